"""The small base every operator shares: hooks, output buffer, counters, rollback.

An operator is a state machine for one shard of keys.  The engine calls two hooks:

* `on_input(port, updates)`: a batch of `(data, time, diff)` updates arrived;
* `on_frontier(frontiers)`: called once per scheduling pass with the input
  frontier of every port (an `Antichain` each): times not in advance of them are
  complete, and an operator that waits for completeness does its work here.

It emits with `self.emit(updates)`; the engine drains `take_output()`.  It declares
`capabilities()`: times at which it may still emit without new input (buffered or
pending work), which progress tracking needs to keep downstream frontiers honest.
It never learns which engine runs it.

Counters (read by `Dataflow.metrics()` and by the tests that show work follows the
size of a change): `records_in`, `records_out`, `batches_out`, `work` (records read
from traces), `times_visited` (times at which a reduce evaluated its logic).

Rollback: `snapshot()` / `restore()` copy the attributes named in `_state` (traces
snapshot themselves in O(batches), since their batches are immutable).  A failed
step is undone by restoring every operator, so user errors leave nothing half-applied.
"""

from __future__ import annotations

import copy
from collections import deque
from typing import Any, Iterable, Sequence

from lattice import Antichain
from ddflow.errors import DataError, DataflowError, UserFunctionError
from ddflow.progress import IDENTITY, Summary
from ddflow.updates import consolidate_unsorted

Update = tuple  # (data, time, diff)

_COUNTERS = ("records_in", "records_out", "batches_out", "work", "times_visited")


class Operator:
    """Base of all operator state machines."""

    #: Names of attributes holding mutable state, copied by `snapshot()`.
    _state: tuple[str, ...] = ()
    #: Lists that only ever grow: snapshotted by length, truncated on restore.
    _append_only: tuple[str, ...] = ()
    #: Caches derived from the state: reset to None on restore.
    _caches: tuple[str, ...] = ()
    n_inputs: int = 1
    #: How the operator moves times from input to output, for progress tracking: the
    #: identity for operators whose outputs are at (or after) their input times; scope
    #: boundaries and feedback edges say otherwise (enter, leave, +1 round).
    summary: Summary = IDENTITY

    def __init__(self, name: str) -> None:
        self.name = name
        self._out: list[Update] = []
        self.records_in = 0
        self.records_out = 0
        self.batches_out = 0
        self.work = 0
        self.times_visited = 0

    # -- hooks ---------------------------------------------------------------
    def on_input(self, port: int, updates: list[Update]) -> None:
        raise NotImplementedError

    def on_frontier(self, frontiers: Sequence[Antichain]) -> None:
        """Default: nothing waits for completeness."""

    def capabilities(self) -> Iterable[Any]:
        """Times at which this operator may still emit without new input.

        Everything an operator keeps after `on_input` (a buffer, pending work, even
        input held only until its `on_frontier` in the same visit) must be covered:
        the engine releases a delivered batch's own pointstamps before it tells the
        operator the frontier.
        """
        return ()

    def reads_frontier(self) -> bool:
        """Whether this operator ever acts on its input frontier (fixed for its life):
        the engine tracks frontiers only where someone reads them."""
        return type(self).on_frontier is not Operator.on_frontier

    def wants_frontier(self) -> bool:
        """Whether a move of the input frontier alone gives it something to do (the
        engine then skips visits that would only tell it the frontier)."""
        return type(self).on_frontier is not Operator.on_frontier

    def trace_records(self) -> int:
        """Records held in traces this operator owns."""
        return 0


    # -- output --------------------------------------------------------------
    def emit(self, updates: list[Update]) -> None:
        if updates:
            self._out.extend(updates)

    def take_output(self) -> list[Update]:
        out = self._out
        if out:
            self._out = []
            self.records_out += len(out)
            self.batches_out += 1
        return out

    # -- errors --------------------------------------------------------------
    def user_error(self, exc: BaseException, record: Any, time: Any,
                   what: str = "function") -> DataflowError:
        """Wrap an exception raised by a user function, keeping it as `__cause__`.

        A `DataflowError` raised inside user code (say a `TimeError` from a time of
        the wrong lattice returned by `join_function`) keeps its type and gains the
        operator, record and time if it did not name them.
        """
        if isinstance(exc, DataflowError):
            if exc.operator is not None:
                return exc
            err = type(exc)(exc.message, operator=self.name, record=record, time=time)
            err.__cause__ = exc
            return err
        err = UserFunctionError(
            f"the {what} given to {self.name} raised {type(exc).__name__}: {exc}",
            operator=self.name, record=record, time=time)
        err.__cause__ = exc
        return err

    # -- rollback ------------------------------------------------------------
    def checkpoint(self) -> None:
        """Remember the state, so that `rollback()` can return to it (idempotent
        until `commit()` or `rollback()`)."""
        if getattr(self, "_checkpoint", None) is None:
            self._checkpoint = self.snapshot()

    def rollback(self) -> None:
        snap = getattr(self, "_checkpoint", None)
        if snap is not None:
            self.restore(snap)
        self._checkpoint = None

    def commit(self) -> None:
        self._checkpoint = None

    def snapshot(self) -> dict[str, Any]:
        snap = {c: getattr(self, c) for c in _COUNTERS}
        for attr in self._state:
            snap[attr] = _copy_state(getattr(self, attr))
        for attr in self._append_only:
            snap[attr] = ("length", len(getattr(self, attr)))
        return snap

    def restore(self, snap: dict[str, Any]) -> None:
        self._out = []
        for attr, value in snap.items():
            if attr in _COUNTERS:
                setattr(self, attr, value)
            elif value[0] == "length":
                del getattr(self, attr)[value[1]:]
            else:
                setattr(self, attr, _restore_state(getattr(self, attr), value))
        for attr in self._caches:
            setattr(self, attr, None)

    def consolidate(self, updates: list[Update]) -> list[Update]:
        """`consolidate_unsorted`, with unhashable data reported as a `DataError`
        naming this operator and the record (data made by a user function)."""
        try:
            return consolidate_unsorted(updates)
        except TypeError:
            for u in updates:
                try:
                    hash(u[0])
                except TypeError as exc:
                    raise DataError(f"{self.name} produced unhashable data ({exc}); use "
                                    "tuples, not lists or dicts", operator=self.name,
                                    record=u[0], time=u[1]) from exc
            raise

    def counters(self) -> dict[str, int]:
        return {c: getattr(self, c) for c in _COUNTERS}


def _copy_state(value: Any) -> Any:
    snap = getattr(value, "snapshot", None)
    if snap is not None:
        return ("trace", snap())
    if isinstance(value, dict):
        # dict of sets / lists / deques (pending times, buffers): copy one level down.
        return ("dict", {k: (copy.copy(v) if isinstance(v, (set, list, dict, deque)) else v)
                         for k, v in value.items()})
    return ("copy", copy.copy(value))


def _restore_state(current: Any, saved: tuple) -> Any:
    kind, value = saved
    if kind == "trace":
        current.restore(value)
        return current
    return value
