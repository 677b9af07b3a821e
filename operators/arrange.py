"""Arrangements: a collection indexed by key, as a trace shared by its readers.

`Arrange` buffers incoming `(key, value)` updates until the input frontier shows
their times complete, then seals them into an immutable batch `[lower, upper)`,
inserts it into its `Trace`, and passes the batch on to every reader (joins,
reduces).  Many readers can share one arrangement ("arrange once, join many").
Each reader declares how far it will ever look back (`advance_reader`); the trace
is compacted to the meet of those frontiers, never further, so compaction cannot
change an accumulation any reader will ask for.

Sealing waits for the frontier because a batch must describe a completed interval
of time; the capabilities it holds are the times of updates still buffered.

>>> from lattice import Antichain
>>> a = Arrange(by_self=False, name="arrange")
>>> a.on_input(0, [(("k", 1), 0, 1), (("k", 2), 3, 1)])
>>> a.on_frontier([Antichain([2])])
>>> a.take_output(), a.trace.accumulate_key("k", 1), list(a.capabilities())
([(('k', 1), 0, 1)], {1: 1}, [3])
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import Any, Iterable, Sequence

from lattice import Antichain, advance_by
from lattice.antichain import in_advance
from operators.base import Operator, Update
from ddflow.updates import by_time as group_by_time, consolidate_unsorted, entered
from operators.undo import UndoDict
from ddflow import column_batch, columnar
from ddflow.columnar import Columns
from ddflow.errors import DataError
from ddflow.key_history import KeyHistory
from ddflow.summaries import ENTER
from ddflow.trace import Batch, Trace


_data_of = itemgetter(0)


class Arrange(Operator):
    """Seal complete updates into batches of a trace indexed by key."""

    _state = ("_buffer", "_col_buffer", "trace", "_upper", "_readers", "_since")
    _caches = ("_caps", "_sealed_upto")

    def __init__(self, by_self: bool = False, name: str = "arrange_by_key",
                 users: tuple[str, ...] = ()) -> None:
        super().__init__(name)
        self.by_self = by_self
        # The operators the user called that read this arrangement: a record of the
        # wrong shape is their input, and errors name them.
        self.users = users
        # Updates not yet sealed, by time: a pass only looks at the distinct times,
        # so data buffered far in the future costs nothing until it becomes complete.
        self._buffer: dict[Any, list[Update]] = UndoDict()
        # Record columns (`ddflow.columnar`: a load handed on without a tuple per
        # update; of `(key, value)` pairs of ints by key), by their one time.
        self._col_buffer: dict[Any, list] = UndoDict()
        self.takes_columns = True
        self.trace = Trace()
        self._upper: Antichain | None = None
        self._readers: dict[int, Antichain | None] = UndoDict()
        self._since: Antichain | None = None
        self._sealed_upto: Any = None

    # -- input ---------------------------------------------------------------
    def on_input(self, port: int, updates: list[Update]) -> None:
        if type(updates) is Columns:
            times = column_batch.record_times(updates)
            if len(times) == 1 and (self.by_self or column_batch.as_pairs(updates) is not None):
                self.records_in += len(updates)
                bucket = self._col_buffer.touch(times[0])
                if bucket is None:
                    self._col_buffer[times[0]] = [updates]
                    self._caps = None
                else:
                    bucket.append(updates)
                return
            updates = columnar.records(updates)
        self.records_in += len(updates)
        # By self, the records are buffered as they come (`Batch.from_records` pairs
        # them with `()`, or encodes them without the pairs).
        if not self.by_self and (set(map(type, data := list(map(_data_of, updates))))
                                 != {tuple} or set(map(len, data)) != {2}):
            # Not all plain pairs (C-level passes): find the first that is no pair.
            for u in updates:
                d = u[0]
                if (type(d) is not tuple or len(d) != 2) and not (
                        isinstance(d, tuple) and len(d) == 2):     # a namedtuple pair
                    raise self._not_a_pair(d, u[1])
        by_time = group_by_time(updates)
        buffer = self._buffer
        for t, us in by_time.items():
            bucket = buffer.touch(t)      # recorded once per time, not per update
            if bucket is None:
                buffer[t] = us
                self._caps = None
            else:
                bucket.extend(us)

    def _complete_columns(self, elements: tuple) -> list:
        """The buffered record columns whose time is complete, taken out."""
        col_buffer = self._col_buffer
        complete = [t for t in col_buffer if not in_advance(elements, t)]
        if complete:
            self._caps = None
        return [c for t in complete for c in col_buffer.pop(t)]

    def _seal_columns(self, parts: list, frontier: Antichain) -> bool:
        """Seal record columns (of pairs, by key) into a columnar batch, and pass
        them on as they are by key: no tuple per update.  False (nothing done) when they do not fit
        the batch (a sum out of int64, a time outside it): the rows path then
        seals them or names the error."""
        records = parts[0] if len(parts) == 1 else columnar.merge(parts, None)
        if records is None:
            return False
        if len(parts) == 1:
            records = columnar.consolidate(records)
        lower = self._upper if self._upper is not None else Antichain()
        if lower.is_empty():
            lower = Antichain(column_batch.record_times(records) + list(frontier.elements))
        batch = Batch.from_columns(records if self.by_self else column_batch.as_pairs(records),
                                   lower, frontier)
        if batch is None:
            return False
        self.trace.insert(batch)
        # By key, the records are the pairs readers take; by self, readers take
        # `(data, ())` pairs, which are no record columns: rows, decoded as the
        # keyed batch they are (the data the key, `()` the value; no triples of the
        # records held besides).
        self.emit(columnar.updates(records) if self.by_self else records)
        self._upper = frontier
        return True

    def _not_a_pair(self, d: Any, time: Any) -> DataError:
        who = "/".join(self.users) or self.name
        shape = f" of length {len(d)}" if isinstance(d, tuple) else ""
        return DataError(f"{who} needs (key, value) pairs, got {type(d).__name__}{shape} {d!r}"
                         + (f" (found by its {self.name})" if self.users else ""),
                         operator=who, record=d, time=time)

    def capabilities(self) -> Iterable[Any]:
        return self.pending_capabilities(chain(self._buffer, self._col_buffer))

    def wants_frontier(self) -> bool:
        # Only buffered updates wait for the frontier; an empty arrangement's next
        # batch simply starts where its last one ended.
        return bool(self._buffer) or bool(self._col_buffer)

    def on_frontier(self, frontiers: Sequence[Antichain]) -> None:
        frontier = frontiers[0]
        buffer = self._buffer
        if not buffer and not self._col_buffer:
            self._upper = frontier
            return
        if frontier == self._sealed_upto:
            return      # nothing buffered can have become complete
        elements = frontier.elements
        complete = [t for t in buffer if not in_advance(elements, t)]
        self._sealed_upto = frontier
        ready: list[Update] = []
        for t in complete:
            ready.extend(buffer.pop(t))
        if complete:
            self._caps = None
        parts = self._complete_columns(elements)
        if parts and not ready and self._seal_columns(parts, frontier):
            return
        if parts:
            ready.extend(u for p in parts for u in columnar.records(p))
        if ready:
            lower = self._upper if self._upper is not None else Antichain()
            try:
                batch = (Batch.from_records if self.by_self else Batch.from_updates)(
                    ready, lower=lower_of(lower, ready, frontier), upper=frontier)
            except DataError as exc:
                if exc.operator is not None:
                    raise
                raise self.unhashable(exc.message, exc.record, exc.time) from exc
            self.trace.insert(batch)
            # Nothing combined or cancelled: the batch holds exactly `ready`, which
            # passes on as is (no second list of tuples decoded from the batch: at
            # 600k edges, ~100 MB at the peak of a load).
            if batch.len != len(ready):
                self.emit(batch.update_list())
            elif self.by_self:
                self.emit([((d, ()), t, r) for d, t, r in ready])
            else:
                self.emit(ready)
        self._upper = frontier

    # -- readers and compaction ----------------------------------------------
    def register_reader(self) -> int:
        rid = max(self._readers, default=-1) + 1
        self._readers[rid] = None
        return rid

    def advance_reader(self, rid: int, frontier: Antichain) -> None:
        """Reader `rid` will only read at times in advance of `frontier` from now on."""
        last = self._readers.get(rid)
        if last is frontier or last == frontier:
            return
        self._readers[rid] = frontier
        self._recompute_since()

    def _recompute_since(self) -> None:
        since = None
        for f in self._readers.values():
            if f is None:
                return      # a reader not told its first frontier yet holds all history
            since = f if since is None else since.meet(f)
        if since is not None and self._since is not None and not self._since.dominates(since):
            # A reader added to a running dataflow (`Dataflow.run` grows it) may promise
            # less than the others did: it reads at times in advance of both.
            since = since.join(self._since)
        if since is not None and since.elements and since != self._since:
            self._since = since
            self.trace.set_logical_compaction(since)

    def release_reader(self, rid: int) -> None:
        """Reader `rid` is gone (its dataflow piece was dropped): it no longer holds
        back compaction."""
        self._readers.pop(rid, None)
        self._recompute_since()

    def snapshot(self, time: Any) -> list[Update]:
        """The sealed contents, each time advanced to `time`, consolidated: what a
        reader attached now is handed as its first batch (differential dataflow's
        trace import).  Accumulations at every time in advance of `time` are those of
        the trace; costs the size of the trace, not of its history."""
        frontier = Antichain([time])
        return consolidate_unsorted([((k, v), advance_by(t, frontier), r)
                                    for batch in self.trace.batches
                                    for k, entries in batch.data.items()
                                    for v, t, r in entries])

    def trace_records(self) -> int:
        return self.trace.record_count()

    def traces(self) -> tuple:
        return (self.trace,)


class EnteredTrace:
    """An outer trace read from inside a loop: every time `t` is read as
    `Product(t, 0)` (differential dataflow's `TraceEnter`).  Only what readers ask
    of a trace is offered: `get` and `key_histories`."""

    __slots__ = ("arrangement",)

    def __init__(self, arrangement: Any) -> None:
        # The arrangement, not its trace: the trace is looked up at every read.
        self.arrangement = arrangement

    def get(self, key: Any) -> list:
        return entered(self.arrangement.trace.get(key))

    def column_view(self) -> tuple[list, Any]:
        """`Trace.column_view` of the outer trace, times entered."""
        cols, get = self.arrangement.trace.column_view()
        if not cols or any(c.product for c in cols):
            # Entered Product times are nested Products: not plain, so rows.
            return [], self.get
        return ([columnar.entered(c) for c in cols],
                lambda key: entered(get(key)))

    def column_batches(self, limit: int) -> list | None:
        """`Trace.column_batches` of the outer trace, times entered."""
        cols = self.arrangement.trace.column_batches(limit)
        if cols is None or any(c.product for c in cols):
            return None
        return [columnar.entered(c) for c in cols]

    def key_histories(self, key: Any, floor: Any) -> list[KeyHistory]:
        entries = self.get(key)
        return [KeyHistory.build(entries, floor)] if entries else []

    def record_count(self) -> int:
        return self.arrangement.trace.record_count()


class EnteredArrangement(Operator):
    """An arrangement of the enclosing scope, read inside a loop without arranging
    the entered collection again: the outer batches pass on entered (`t ->
    Product(t, 0)`), readers read the outer trace through `EnteredTrace`, and the
    frontiers they promise move the outer trace's compaction by their epochs (a
    reader at `Product(o, r)` and later reads outer times up to `o`).

    Holds no state of its own: the state is the outer arrangement's, which reader
    steps extend their checkpoints to (`_writes`).
    """

    summary = ENTER
    _writes = ("outer",)

    def __init__(self, outer: Any, name: str = "enter_arranged") -> None:
        super().__init__(name)
        self.outer = outer
        self.by_self = outer.by_self
        self.trace = EnteredTrace(outer)

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        self.emit(entered(updates))

    def register_reader(self) -> int:
        return self.outer.register_reader()

    def advance_reader(self, rid: int, frontier: Antichain) -> None:
        self.outer.advance_reader(rid, Antichain(f.outer for f in frontier.elements))

    def release_reader(self, rid: int) -> None:
        self.outer.release_reader(rid)

    def trace_records(self) -> int:
        return 0        # the outer arrangement's records, counted there


def lower_of(lower: Antichain, ready: list[Update], upper: Antichain) -> Antichain:
    """A batch's lower bound: the previous batch's upper, or for the first batch the
    least of its times and of its upper (under a partial order a time of the batch
    may be incomparable with the upper's elements, and lower must precede upper)."""
    if lower.is_empty() and ready:
        return Antichain([u[1] for u in ready] + list(upper.elements))
    return lower
