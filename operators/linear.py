"""Linear operators: the operator of a change is the change of the output.

A linear operator `L` satisfies `L(x + y) = L(x) + L(y)`, so it can act on each
update triple on its own and never waits for a frontier.  Every linear operator is
an instance of the general one of McSherry's "Generalizing linear operators",
`join_function(logic)`: an update
`(d, t, r)` becomes `(d2, join(t, t2), r * r2)` for each `(d2, t2, r2)` in
`logic(d)`.  `map`, `filter`, `flat_map`, `explode` and `negate` are the special
cases with `t2` the minimum time, and are implemented directly for speed.  `delay`
(differential dataflow's time-advancing operator) moves each update to a later time
`f(d, t) >= t`; it is linear too, and since outputs never precede inputs the identity
frontier summary stays a sound lower bound.

Stages fuse (the post's `followed_by`): a chain of adjacent linear operators runs as
one `Linear` operator applying its stages in order to each batch, with identical
results and one batch per step instead of one per stage.

The law, per stage, for every time `t`:
`acc(L(C), t) = L(acc(C, t))`.

>>> op = Linear([("map", lambda x: x * 10), ("filter", lambda x: x > 10),
...              ("explode", lambda x: [(x, 2), (x + 1, -1)])], name="demo")
>>> op.on_input(0, [(1, 0, 1), (2, 0, 1), (3, 1, -1)])
>>> sorted(op.take_output())
[(20, 0, 2), (21, 0, -1), (30, 1, -2), (31, 1, 1)]
>>> jf = Linear([("join_function", lambda x: [(x, 3, 1), (x, 5, -1)])])
>>> jf.on_input(0, [("a", 4, 2)])
>>> jf.take_output()
[('a', 4, 2), ('a', 5, -2)]
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Sequence

from lattice import Antichain, TimeError, as_time, join, less_equal
from operators.base import Operator, Update, as_rows
from ddflow import columnar
from ddflow.columnar import Columns, wants_column_batch
from ddflow.diff import check_diff


#: Whether a run of maps passes a large batch of plain results (ints, tuples of
#: ints) on as record columns (`ddflow.column_batch`): its functions applied to the
#: data alone, no `(data, time, diff)` triple built, and an arrangement after it
#: seals them without encoding triples.  False: triples, the path before (the
#: switch; the tests run both).
MAP_COLUMNS = True
#: `_map_fields` transposes up to this many triples by `zip(*batch)`.
_ZIP_MAX = 4096


def set_map_columns(on: bool) -> bool:
    """Turn `MAP_COLUMNS` on or off; returns the previous setting."""
    global MAP_COLUMNS
    old, MAP_COLUMNS = MAP_COLUMNS, on
    return old


def _map(fn: Callable, batch: list) -> list:
    return [(fn(d), t, r) for d, t, r in batch]


def _filter(fn: Callable, batch: list) -> list:
    return [u for u in batch if fn(u[0])]


def _flat_map(fn: Callable, batch: list) -> list:
    return [(d2, t, r) for d, t, r in batch for d2 in fn(d)]


def _diff(r2: Any) -> Any:
    # A user function's diff must be a semiring element, as a session's must.
    return r2 if type(r2) is int else check_diff(r2)


def _explode(fn: Callable, batch: list) -> list:
    return [(d2, t, r * _diff(r2)) for d, t, r in batch for d2, r2 in fn(d)]


def _join_function(fn: Callable, batch: list) -> list:
    return [(d2, join(t, t2), r * _diff(r2)) for d, t, r in batch for d2, t2, r2 in fn(d)]


def _delay(fn: Callable, batch: list) -> list:
    out = []
    for d, t, r in batch:
        t2 = fn(d, t)
        if not less_equal(t, t2):
            raise TimeError(f"delay may only move a time forward, not from {t!r} to {t2!r}")
        out.append((d, t2, r))
    return out


def _negate(fn: Any, batch: list) -> list:
    return [(d, t, -r) for d, t, r in batch]


def _inspect(fn: Callable, batch: list) -> list:
    for u in batch:
        fn(u)
    return batch


def temporal_bounds(lower: Callable[[Any], Any], upper: Callable[[Any], Any]
                    ) -> Callable[[Any], list]:
    """The `join_function` logic of a temporal filter: a record `x` is present from
    `lower(x)` until `upper(x)` (McSherry, "Generalizing linear operators"; what
    Materialize builds its `mz_now()` filters on).

    An update `(x, t, r)` becomes `(x, join(t, lower(x)), r)` and
    `(x, join(t, lower(x), upper(x)), -r)`: at an integer time that is
    `max(t, lower)` and `max(t, upper)`.  The retraction's time includes `lower(x)`
    so that the record is never *negatively* present: at a time `s`, the two
    accumulate to `r` exactly when `t <= s`, `lower(x) <= s` and not `upper(x) <= s`
    (the plain function), also when `upper(x)` is before `lower(x)` (never present)
    or, in a partial order, incomparable to it.

    The update triples for one record, present from 3 until 5, inserted at 0, at 4
    (arriving while it is present) and at 6 (arriving after its window: the two
    cancel, so it is never seen):

    >>> logic = temporal_bounds(lambda x: 3, lambda x: 5)
    >>> for t in (0, 4, 6):
    ...     print(_join_function(logic, [("a", t, 1)]))
    [('a', 3, 1), ('a', 5, -1)]
    [('a', 4, 1), ('a', 5, -1)]
    [('a', 6, 1), ('a', 6, -1)]
    """
    def logic(x: Any) -> list:
        start, end = as_time(lower(x)), as_time(upper(x))
        for bound in (start, end):
            # A str has a `join` too: say what is wrong before the lattice's join does.
            if type(bound) is not int and not hasattr(bound, "less_equal"):
                raise TimeError(f"a temporal filter's bounds must be times; {x!r} got "
                                f"{bound!r}")
        return [(x, start, 1), (x, join(start, end), -1)]
    return logic


_STAGES: dict[str, Callable[[Any, list], list]] = {
    "map": _map, "filter": _filter, "flat_map": _flat_map, "explode": _explode,
    "join_function": _join_function, "negate": _negate, "inspect": _inspect,
    "delay": _delay,
}

Stage = tuple  # (kind, fn) or (kind, fn, on_frontier) for inspect


class Linear(Operator):
    """One or more fused linear stages applied to every batch, in order."""

    _state = ("_last_frontier",)

    def __init__(self, stages: Sequence[Stage], name: str | None = None) -> None:
        for s in stages:
            if s[0] not in _STAGES:
                raise ValueError(f"unknown linear stage {s[0]!r}")
        self.stages = list(stages)
        super().__init__(name or "+".join(s[0] for s in self.stages))
        self._frontier_watchers = [s[2] for s in self.stages if len(s) > 2 and s[2]]
        self._last_frontier: Any = None
        # Maps whose functions say how to act on record columns (`on_columns`, a
        # library projection such as a graph's `dst`) take them, without a tuple
        # per update.
        self.takes_columns = bool(self.stages) and all(
            s[0] == "map" and callable(getattr(s[1], "on_columns", None))
            for s in self.stages)
        self._maps_only = bool(self.stages) and all(s[0] == "map" for s in self.stages)

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        batch = updates
        if type(batch) is Columns:
            for stage in self.stages:
                done = stage[1].on_columns(batch)
                if done is None:
                    break
                batch = done
            else:
                self.emit(batch)
                return
            batch = as_rows(updates)
        if self._maps_only and MAP_COLUMNS and wants_column_batch(len(batch)):
            done = self._map_fields(batch)
            if done is not None:
                self.emit(done)
                return
        for stage in self.stages:
            kind, fn = stage[0], stage[1]
            try:
                batch = _STAGES[kind](fn, batch)
            except Exception as exc:  # noqa: BLE001 - user code: find the record, wrap
                raise self._blame(kind, fn, batch, exc) from exc
            if not batch:
                return
        self.emit(batch)

    def _map_fields(self, batch: list) -> Columns | list | None:
        """The maps applied to the data alone (C-level passes over the batch): record
        columns when the results are plain, else triples zipped once; None when a
        function raised (the row path runs it again and names the record)."""
        if len(batch) <= _ZIP_MAX:
            data, times, diffs = zip(*batch)    # one transposing pass
        else:       # (a call of a million arguments costs more than three maps)
            data, times, diffs = (list(map(itemgetter(i), batch)) for i in range(3))
        try:
            for stage in self.stages:
                data = list(map(stage[1], data))
        except Exception:  # noqa: BLE001 - user code: blamed by the row path
            return None
        cols = columnar.encode_fields(data, times, diffs)
        return cols if cols is not None else list(zip(data, times, diffs))

    def reads_frontier(self) -> bool:
        return bool(self._frontier_watchers)

    def wants_frontier(self) -> bool:
        return bool(self._frontier_watchers)

    def on_frontier(self, frontiers: Sequence[Antichain]) -> None:
        if self._frontier_watchers and frontiers[0] != self._last_frontier:
            self._last_frontier = frontiers[0]
            for watch in self._frontier_watchers:
                try:
                    watch(frontiers[0])
                except Exception as exc:  # noqa: BLE001 - user code
                    raise self.user_error(exc, None, frontiers[0],
                                          what="on_frontier callback of inspect") from exc

    def _blame(self, kind: str, fn: Any, batch: list, exc: Exception) -> Exception:
        """Re-run the failing stage record by record to name the culprit."""
        for u in batch:
            try:
                _STAGES[kind](fn, [u])
            except Exception as inner:  # noqa: BLE001
                return self.user_error(inner, u[0], u[1], what=f"function of {kind}")
        return self.user_error(exc, None, None, what=f"function of {kind}")


class Concat(Operator):
    """The sum of several collections: every input update passes through."""

    takes_columns = True        # passed on as they are (`Operator.emit`)

    def __init__(self, n_inputs: int, name: str = "concat") -> None:
        super().__init__(name)
        self.n_inputs = n_inputs

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        self.emit(updates)


class Consolidate(Operator):
    """Identity on accumulations; sums equal (data, time) pairs within each step.

    >>> c = Consolidate()
    >>> c.on_input(0, [("a", 1, 1), ("a", 1, -1), ("b", 2, 3), ("b", 2, 1)])
    >>> c.on_frontier([Antichain()])
    >>> c.take_output()
    [('b', 2, 4)]
    """

    _append_only = ("_buffer",)     # extended, then swapped for a fresh list
    _private_buffers = _append_only

    def __init__(self, name: str = "consolidate") -> None:
        super().__init__(name)
        self._buffer: list[Update] = []

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        self._buffer.extend(updates)

    def wants_frontier(self) -> bool:
        return bool(self._buffer)

    def capabilities(self) -> Any:
        return Antichain(u[1] for u in self._buffer).elements if self._buffer else ()

    def on_frontier(self, frontiers: Sequence[Antichain]) -> None:
        if self._buffer:
            buffered, self._buffer = self._buffer, []
            self.emit(self.consolidate(buffered))
