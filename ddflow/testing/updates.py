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

from ddflow.testing.times import times

_DIFFS = st.sampled_from([-2, -1, 1, 2])


def updates(kind: str = "product", data: st.SearchStrategy[Any] | None = None,
            max_value: int = 3, min_size: int = 0, max_size: int = 20,
            diffs: st.SearchStrategy[Any] | None = None
            ) -> st.SearchStrategy[list[tuple[Any, Any, Any]]]:
    """Lists of `(data, time, diff)`: data from `data` (default ints `0..4`), times of
    lattice `kind` with components in `0..max_value`, diffs from `diffs` (default
    nonzero ints in `-2..2`)."""
    return st.lists(
        st.tuples(st.integers(0, 4) if data is None else data,
                  times(kind, max_value),
                  _DIFFS if diffs is None else diffs),
        min_size=min_size, max_size=max_size)


def keyed_updates(kind: str = "product", keys: st.SearchStrategy[Any] | None = None,
                  values: st.SearchStrategy[Any] | None = None, max_value: int = 3,
                  min_size: int = 0, max_size: int = 20,
                  diffs: st.SearchStrategy[Any] | None = None
                  ) -> st.SearchStrategy[list[tuple[Any, Any, Any]]]:
    """Lists of `((key, value), time, diff)`, keys and values default ints `0..3`."""
    pair = st.tuples(st.integers(0, 3) if keys is None else keys,
                     st.integers(0, 3) if values is None else values)
    return updates(kind, data=pair, max_value=max_value, min_size=min_size,
                   max_size=max_size, diffs=diffs)


__all__ = ["updates", "keyed_updates"]
