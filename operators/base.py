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
from traces), `times_visited` (times at which a reduce evaluated its logic); and
`cpu_ns`, the CPU time of its hook calls, which the engine adds only when asked to
time operators (it is a measurement, not a count, so `counters()` leaves it out; a
rolled-back step takes it back with the rest).

Rollback (`operators.undo`): the engine calls `checkpoint()` on an operator before
its first hook call of a step, then `commit()` when the step succeeds or
`rollback()` when anything in it raised, so user errors leave nothing half-applied.
Between the two, the operator records the before-image of what its hooks overwrite,
declared by class attributes:

* `_state`: attributes restored by value (frontiers, scalars).  When the value is an
  `UndoDict` (or a tuple of them) its keys are recorded as they are written; when it
  is a trace, its O(#batches) `snapshot()` is taken.  A plain mutable container here
  is refused (`TypeError` at `checkpoint()`): it would need a whole copy.
* `_append_only`: lists that only grow (or are swapped for a fresh list): their length.
  Those also in `_private_buffers` (the operator's own, read by no one else) are
  recorded without a reference when empty at `checkpoint()`: rollback gives back a
  fresh empty list, and the list swapped out during the step (a whole load, for a
  join's pending input) is freed when drained rather than when the step ends.
* `_caches`: derived from the state, reset to None by `rollback()`.
* `_counters`: counters beyond the base's, restored with them.
* `_writes`: attributes holding *other* operators whose state this one's hooks
  mutate (a reader advances its arrangement's compaction frontier): checkpoint,
  commit and rollback extend to them, so the engine need not know who writes where.

A step therefore costs what it touched.  `undo_records` and `undo_values` count the
records written and the values copied into them (not rolled back: they measure the
mechanism, and are not among `counters()`).
"""

from __future__ import annotations

from collections import deque
from operator import attrgetter
from typing import Any, Iterable, Sequence

from lattice import Antichain
from ddflow.errors import DataError, DataflowError, UserFunctionError
from ddflow.summaries import IDENTITY, Summary
from ddflow.columnar import Columns, consolidate_records, records, wants_column_build
from ddflow.updates import consolidate_unsorted
from operators.undo import EMPTY, Prefix, UndoDict, undo_dicts

Update = tuple  # (data, time, diff)

_COUNTERS = ("records_in", "records_out", "batches_out", "work", "times_visited")
#: Measurements restored with the counters by a rollback, but not among `counters()`.
_MEASURED = ("cpu_ns",)


def as_rows(updates: Any) -> list:
    """A batch as a list of `(data, time, diff)` triples (record columns decoded)."""
    return records(updates) if type(updates) is Columns else updates


class Operator:
    """Base of all operator state machines."""

    #: Attributes restored by value; `UndoDict`s among them record per key, traces
    #: by snapshot (see the module docstring).
    _state: tuple[str, ...] = ()
    #: Lists that only grow (or are swapped for a fresh list): recorded by length.
    _append_only: tuple[str, ...] = ()
    #: Those of `_append_only` no one else holds: an empty one is recorded as empty,
    #: not by reference (its identity does not matter, so the record need not keep it).
    _private_buffers: tuple[str, ...] = ()
    #: Caches derived from the state: reset to None by `rollback()`.
    _caches: tuple[str, ...] = ()
    #: Counters beyond the base's: restored by `rollback()`, listed by `counters()`.
    _counters: tuple[str, ...] = ()
    #: Attributes holding other operators whose state this one's hooks mutate.
    _writes: tuple[str, ...] = ()
    n_inputs: int = 1
    #: Names of the operators feeding this one (set by the engine's `instantiate`).
    producers: tuple[str, ...] = ()
    #: Whether `on_input` takes record columns (`ddflow.columnar`: a batch of plain
    #: updates without a tuple per update) as well as lists; the engine decodes a
    #: columnar batch for an operator that does not.
    takes_columns: bool = False
    #: How the operator moves times from input to output, for progress tracking: the
    #: identity for operators whose outputs are at (or after) their input times; scope
    #: boundaries and feedback edges say otherwise (enter, leave, +1 round).
    summary: Summary = IDENTITY

    def __init__(self, name: str) -> None:
        self.name = name
        #: Emitted and not yet taken (`take_output`); an engine reads it to skip
        #: the call when there is nothing.
        self.output: list[Update] = []
        #: The cached answer of `pending_capabilities` (None: to recompute).
        self._caps: list | None = []
        self.records_in = 0
        self.records_out = 0
        self.batches_out = 0
        self.work = 0
        self.times_visited = 0
        self.cpu_ns = 0
        self.undo_records = 0
        self.undo_values = 0
        self._undo_log: _Checkpoint | None = None

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
        operator the frontier.  An operator that caches its answer replaces the cached
        object when the answer changes, never mutates it: the engine skips a report
        it has seen before.
        """
        return ()

    def pending_capabilities(self, times: Iterable[Any]) -> list:
        """`capabilities()` of an operator whose pending work sits at `times`: their
        minimal elements, computed once per change.  The operator sets `self._caps =
        None` whenever its pending times change (and lists `_caps` in `_caches`); the
        list is recomputed then, a new object, never mutated (see `capabilities`).
        `times` is only read on a recomputation: pass a container or a lazy iterable.
        """
        caps = self._caps
        if caps is None:
            caps = self._caps = list(Antichain(times))
        return caps

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

    def traces(self) -> tuple:
        """The traces (`ddflow.trace.Trace`) this operator owns, for their sizes."""
        return ()

    def release(self) -> None:
        """This operator is dropped from its dataflow: stop holding back the
        compaction of the arrangements it reads.  A reader keeps each arrangement it
        reads in an attribute listed in `_writes`, and the reader id it was given in
        `_rid_<attribute>` (or `_rid` when it reads one); an operator that only
        passes its readers' ids on (an entered arrangement) has neither."""
        for attr in self._writes:
            rid = getattr(self, f"_rid_{attr}", getattr(self, "_rid", None))
            if rid is not None:
                getattr(self, attr).release_reader(rid)


    # -- output --------------------------------------------------------------
    def emit(self, updates: list[Update]) -> None:
        if updates:
            out = self.output
            if type(updates) is list and type(out) is list:
                out.extend(updates)
            elif not out:
                self.output = updates       # record columns, passed on as they are
            else:       # columns and rows together: rows
                self.output = as_rows(out) + as_rows(updates)

    def take_output(self) -> list[Update]:
        out = self.output
        if out:
            self.output = []
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

    # -- rollback (the engine-facing contract) -------------------------------
    def checkpoint(self) -> None:
        """Start recording what this operator's next mutations overwrite, until
        `commit()` or `rollback()`; a second call before then does nothing.

        Costs O(#declared attributes), plus O(#batches) per trace.
        """
        if self._undo_log is not None:
            return
        cls = type(self)
        try:
            names, get, first_state = _PLANS[cls]
        except KeyError:
            names, get, first_state = _PLANS[cls] = _plan_of(cls)
        values = get(self)
        if first_state is None:
            # A stateless operator (a map, a concat): its counters are all it has.
            self._undo_log = _Checkpoint(names, values, (), (), ())
            self.undo_records += 1
            return
        dicts, traces = [], []
        for attr, value in zip(self._state, values[first_state:]):
            kind = type(value)
            if kind is UndoDict:
                dicts.append(value)
                continue
            if value is None or kind in _SCALARS:
                continue
            if kind not in _TRACES:         # (a trace is known to hold no UndoDict)
                found = list(undo_dicts(value))
                if found:
                    dicts.extend(found)
                    continue
            if kind in _TRACES or (hasattr(value, "snapshot") and hasattr(value, "restore")):
                _TRACES.add(kind)
                snap = value.snapshot()
                traces.append((value, snap))
                self.undo_values += len(getattr(snap, "batches", ()))
            elif isinstance(value, (list, set, dict, deque)):
                raise TypeError(
                    f"{type(self).__name__}.{attr} is a plain {type(value).__name__} in "
                    "_state, which rollback would have to copy whole: make it an "
                    "operators.undo.UndoDict, or list it in _append_only")
        for d in dicts:
            d.checkpoint()
        prefixes = ()
        private = self._private_buffers
        for a in self._append_only:
            items = getattr(self, a)
            prefixes += ((a, EMPTY if not items and a in private
                          else Prefix(items, len(items))),)
        self._undo_log = _Checkpoint(names, values, dicts, traces, prefixes)
        # One record for the scalars, one per trace snapshot, one per list length.
        self.undo_records += 1 + len(traces) + len(prefixes)
        for attr in self._writes:
            getattr(self, attr).checkpoint()

    def commit(self) -> None:
        """Forget the records of this step and stop recording."""
        log, self._undo_log = self._undo_log, None
        if log is None:
            return
        for d in log.dicts:
            records, copied = d.commit()
            self.undo_records += records
            self.undo_values += copied
        for attr in self._writes:
            getattr(self, attr).commit()

    def rollback(self) -> None:
        """Put the state back exactly as at `checkpoint()` (the output buffer empty,
        counters as they were, caches reset) and stop recording.  Nothing to undo
        (no checkpoint, or already rolled back): does nothing."""
        log, self._undo_log = self._undo_log, None
        if log is None:
            return
        self.output = []
        for attr, value in zip(log.names, log.values):
            setattr(self, attr, value)
        for d in log.dicts:
            records, copied = d.rollback()
            self.undo_records += records
            self.undo_values += copied
        for trace, snap in log.traces:
            trace.restore(snap)
        for attr, prefix in log.prefixes:
            setattr(self, attr, prefix.restore())
        for attr in self._caches:
            setattr(self, attr, None)
        for attr in self._writes:
            getattr(self, attr).rollback()

    def consolidate(self, updates: list[Update]) -> list[Update]:
        """`consolidate_unsorted`, with unhashable data reported as a `DataError`
        naming this operator and the record (data made by a user function).  A large
        list of plain updates goes by the columnar kernel instead
        (`ddflow.columnar.consolidate_records`: the same updates, another order)."""
        if wants_column_build(len(updates)):
            done = consolidate_records(updates)
            if done is not None:
                return done
        try:
            return consolidate_unsorted(updates)
        except TypeError:
            for u in updates:
                try:
                    hash(u[0])
                except TypeError as exc:
                    raise self.unhashable(exc, u[0], u[1]) from exc
            raise

    def unhashable(self, exc: BaseException, record: Any, time: Any) -> DataError:
        """A `DataError` for unhashable `record` reaching this operator, naming the
        operator that made it (a user function of a map, say: sessions refuse
        unhashable input, so data only becomes unhashable in one)."""
        makers = self.producers or (self.name,)
        maker = makers[0] if len(makers) == 1 else " or ".join(makers)
        return DataError(f"{maker} produced unhashable data ({exc}), which reached "
                         f"{self.name}; use tuples, not lists or dicts", operator=maker,
                         record=record, time=time)

    def counters(self) -> dict[str, int]:
        return {c: getattr(self, c) for c in (*_COUNTERS, *self._counters)}


#: Immutable values kept in `_state` by reference (frontiers, times, counts): the
#: checkpoint needs no more than their value, so it does not inspect them further.
_SCALARS = frozenset({Antichain, int, bool, str, float})
#: Types seen to snapshot themselves (traces): asked once, not at every checkpoint.
_TRACES: set = set()


class _Checkpoint:
    """What `checkpoint()` saved: attribute values, the recording `UndoDict`s, trace
    snapshots and list lengths."""

    __slots__ = ("names", "values", "dicts", "traces", "prefixes")

    def __init__(self, names: tuple, values: tuple, dicts: Sequence, traces: Sequence,
                 prefixes: tuple) -> None:
        self.names, self.values, self.dicts = names, values, dicts
        self.traces, self.prefixes = traces, prefixes


#: Per operator class: the attributes a checkpoint saves by value, a getter of them
#: all, and where the `_state` ones start among them (None: the class has no state,
#: lists or written operators, only counters).  Its declarations are fixed.
_PLANS: dict[type, tuple] = {}


def _plan_of(cls: type) -> tuple:
    names = (*_COUNTERS, *_MEASURED, *cls._counters, *cls._state)
    stateless = not (cls._state or cls._append_only or cls._writes)
    return names, attrgetter(*names), None if stateless else len(names) - len(cls._state)
