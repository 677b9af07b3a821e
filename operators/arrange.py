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

from typing import Any, Iterable, Sequence

from lattice import Antichain
from lattice.antichain import in_advance
from operators.base import Operator, Update
from operators.undo import UndoDict
from ddflow.errors import DataError
from ddflow.trace import Batch, Trace


class Arrange(Operator):
    """Seal complete updates into batches of a trace indexed by key."""

    _state = ("_buffer", "trace", "_upper", "_readers", "_since")
    _caches = ("_caps", "_sealed_upto")

    def __init__(self, by_self: bool = False, name: str = "arrange_by_key") -> None:
        super().__init__(name)
        self.by_self = by_self
        # Updates not yet sealed, by time: a pass only looks at the distinct times,
        # so data buffered far in the future costs nothing until it becomes complete.
        self._buffer: dict[Any, list[Update]] = UndoDict()
        self.trace = Trace()
        self._upper: Antichain | None = None
        self._readers: dict[int, Antichain | None] = UndoDict()
        self._since: Antichain | None = None
        self._caps: list | None = []
        self._sealed_upto: Any = None

    # -- input ---------------------------------------------------------------
    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        if self.by_self:
            updates = [((d, ()), t, r) for d, t, r in updates]
        else:
            for u in updates:
                d = u[0]
                if type(d) is not tuple or len(d) != 2:
                    raise DataError(
                        f"{self.name} needs (key, value) pairs, got a "
                        f"{type(d).__name__}" + (f" of length {len(d)}" if isinstance(d, tuple) else ""),
                        operator=self.name, record=d, time=u[1])
        by_time: dict[Any, list[Update]] = {}
        for u in updates:
            bucket = by_time.get(u[1])
            if bucket is None:
                by_time[u[1]] = [u]
            else:
                bucket.append(u)
        buffer = self._buffer
        for t, us in by_time.items():
            bucket = buffer.touch(t)      # recorded once per time, not per update
            if bucket is None:
                buffer[t] = us
                self._caps = None
            else:
                bucket.extend(us)

    def capabilities(self) -> Iterable[Any]:
        if self._caps is None:
            self._caps = list(Antichain(self._buffer))
        return self._caps

    def wants_frontier(self) -> bool:
        # Only buffered updates wait for the frontier; an empty arrangement's next
        # batch simply starts where its last one ended.
        return bool(self._buffer)

    def on_frontier(self, frontiers: Sequence[Antichain]) -> None:
        frontier = frontiers[0]
        buffer = self._buffer
        if not buffer:
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
        if ready:
            lower = self._upper if self._upper is not None else Antichain()
            batch = Batch.from_updates(ready, lower=_lower_of(lower, ready, frontier),
                                       upper=frontier)
            self.trace.insert(batch)
            self.emit(_batch_updates(batch))
        self._upper = frontier

    # -- readers and compaction ----------------------------------------------
    def register_reader(self) -> int:
        rid = len(self._readers)
        self._readers[rid] = None
        return rid

    def advance_reader(self, rid: int, frontier: Antichain) -> None:
        """Reader `rid` will only read at times in advance of `frontier` from now on."""
        last = self._readers.get(rid)
        if last is frontier or last == frontier:
            return
        self._readers[rid] = frontier
        since = None
        for f in self._readers.values():
            if f is None:
                return      # a reader not told its first frontier yet holds all history
            since = f if since is None else since.meet(f)
        if since.elements and since != self._since:
            self._since = since
            self.trace.set_logical_compaction(since)

    def trace_records(self) -> int:
        return self.trace.record_count()


def _lower_of(lower: Antichain, ready: list[Update], upper: Antichain) -> Antichain:
    """A batch's lower bound: the previous batch's upper, or for the first batch the
    least of its times and of its upper (under a partial order a time of the batch
    may be incomparable with the upper's elements, and lower must precede upper)."""
    if lower.is_empty() and ready:
        return Antichain([u[1] for u in ready] + list(upper.elements))
    return lower


def _batch_updates(batch: Batch) -> list[Update]:
    return [((k, v), t, r) for k, entries in batch.data.items() for v, t, r in entries]
