"""Hypothesis strategies for update lists: `(data, time, diff)` and keyed forms.

Small on purpose: data in `0..4`, keys and values in `0..3`, diffs in `-2..2` without
zero, times from `ddflow.testing.times.times` on a small grid.  Small domains make
collisions, cancellations and incomparable times likely, which is where the bugs of
consolidation, compaction and reductions hide.  The lists are not consolidated:
repeated `(data, time)` pairs and cancelling diffs are part of what is tested.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from lattice import join
from ddflow.errors import GraphError
from ddflow.testing.times import times

_DIFFS = st.sampled_from([-2, -1, 1, 2])
_POSITIVE = st.sampled_from([1, 2])


def updates(kind: str = "product", data: st.SearchStrategy[Any] | None = None,
            max_value: int = 3, min_size: int = 0, max_size: int = 20,
            diffs: st.SearchStrategy[Any] | None = None, nonnegative: bool = False
            ) -> st.SearchStrategy[list[tuple[Any, Any, Any]]]:
    """Lists of `(data, time, diff)`: data from `data` (default ints `0..4`), times of
    lattice `kind` with components in `0..max_value`, diffs from `diffs` (default
    nonzero ints in `-2..2`).

    `nonnegative=True` draws only collections a program can receive from inputs
    that never remove what is not there: every accumulation, at every time, is
    `>= 0`.  Each record is inserted at some time `t` with a positive diff (from
    `diffs`, its positive values; default `1..2`) and perhaps retracted at a time
    `join(t, u)`: the retraction is in advance of the insertion, so no time sees it
    alone.  (A shrunk counterexample is then an input the program can get.)
    """
    if type(nonnegative) is not bool:
        raise GraphError(f"nonnegative must be True or False, not {nonnegative!r}")
    data = st.integers(0, 4) if data is None else data
    if not nonnegative:
        return st.lists(st.tuples(data, times(kind, max_value),
                                  _DIFFS if diffs is None else diffs),
                        min_size=min_size, max_size=max_size)
    positive = (_POSITIVE if diffs is None
                else diffs.filter(lambda r: not isinstance(r, bool) and r > 0))
    life = st.tuples(data, times(kind, max_value), positive,
                     st.none() | times(kind, max_value))
    # Each life is one or two updates: a list of lives fits `max_size` updates.
    return st.lists(life, min_size=(min_size + 1) // 2, max_size=max_size // 2).map(
        _lived).filter(lambda us: min_size <= len(us) <= max_size)


def _lived(lives: list) -> list:
    """Updates of `(data, inserted at, diff, retracted after or None)` lives."""
    out = []
    for d, t, r, later in lives:
        out.append((d, t, r))
        if later is not None:
            out.append((d, join(t, later), -r))
    return out


def keyed_updates(kind: str = "product", keys: st.SearchStrategy[Any] | None = None,
                  values: st.SearchStrategy[Any] | None = None, max_value: int = 3,
                  min_size: int = 0, max_size: int = 20,
                  diffs: st.SearchStrategy[Any] | None = None, nonnegative: bool = False
                  ) -> st.SearchStrategy[list[tuple[Any, Any, Any]]]:
    """Lists of `((key, value), time, diff)`, keys and values default ints `0..3`
    (`nonnegative` as for `updates`)."""
    pair = st.tuples(st.integers(0, 3) if keys is None else keys,
                     st.integers(0, 3) if values is None else values)
    return updates(kind, data=pair, max_value=max_value, min_size=min_size,
                   max_size=max_size, diffs=diffs, nonnegative=nonnegative)


__all__ = ["updates", "keyed_updates"]
