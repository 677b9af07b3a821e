"""Input sessions: where `(data, time, diff)` updates enter a dataflow.

`Dataflow.new_collection()` hands out an `InputSession`; the engine runs its node as an
`InputOp`.  The session checks every update at the boundary (a time of the input's
lattice, in advance of the session's time; hashable data; a diff of the dataflow's
ring) before recording it, so bad input raises a typed error and leaves the dataflow
as it was.  Its time is the input's capability: `advance_to` gives up earlier times,
which is what lets the engine declare outputs final (`InputSession` in the
differential-dataflow crate, McSherry).

>>> import ddflow
>>> df = ddflow.Dataflow()
>>> edges_in, edges = df.new_collection()
>>> edges_in.update_at(("a", "b"), 3, 1)
>>> edges_in.advance_to(2); edges_in.time
2
>>> edges_in.update_at(("a", "c"), 1, 1)
Traceback (most recent call last):
  ...
lattice.errors.TimeError: update at 1 is not in advance of the session's time 2 (time may not go backwards); operator: input0; record: ('a', 'c'); time: 1
"""

from __future__ import annotations

import warnings
from typing import Any, Iterable

from lattice import Antichain, advance_by, as_time, less_equal
from ddflow import frames
from ddflow.errors import (DataError, DataflowError, NothingDiscardedWarning,
                           SessionClosedError, TimeError)
from ddflow import columnar
from ddflow.columnar import Columns, wants_column_batch, wants_columns
from ddflow.graph import Node
from ddflow.updates import (check_lattice, checked_update, consolidate_unsorted,
                            not_self_equal)
from operators.base import Operator

EMPTY = Antichain()

#: Whether an input passes a step's plain updates on as record columns from
#: `columnar.wants_column_batch` of them (consolidated by the columnar kernel), as a
#: load handed over as columns goes.  False: consolidated triples (the path before;
#: the switch, the tests run both).
INPUT_COLUMNS = True
_ANY: Any = object()    # "any value" for the optional filters of `InputSession.discard`


def _ints_and_strs(data: tuple) -> bool:
    """Whether every field of `data` is an int or a str (not a bool): such a tuple
    hashes and equals itself (no NaN), so it needs no `hash` or self-equality test."""
    for x in data:
        k = type(x)
        if k is not int and k is not str:
            return False
    return True


class InputSession:
    """Feeds updates into one input collection, at times no earlier than `time`.

    `insert`, `remove` and `update` act at the session's current time; `update_at`
    at any time in advance of it; `advance_to` moves the time forward (which lets
    the engine finish earlier times); `close` ends the input.  Every check happens
    here, before anything is recorded.
    """

    def __init__(self, dataflow: Any, node: Node, name: str) -> None:
        self.dataflow = dataflow
        self.node = node
        self.name = name
        self.time = node.scope.minimum
        self.closed = False
        self._pending: list[tuple] = []
        # The frontier at the last successful run(): a run that finds it unchanged
        # while updates are pending can process none of them (see Dataflow.run).
        self._ran_at: Antichain = self.frontier()
        # Updates successful runs took at times that frontier had not passed: a run
        # that completes those times can still fail on one (`open_updates`).
        self._open: list[tuple] = []

    def __repr__(self) -> str:
        return f"InputSession({self.name!r})"

    def insert(self, data: Any) -> None:
        """Add one copy of `data` at the session's current time (`update(data, 1)`)."""
        self.update_at(data, self.time, 1)

    def remove(self, data: Any) -> None:
        """Take away one copy of `data` at the session's current time (`update(data, -1)`);
        removing what is not there leaves a negative count, as in differential dataflow."""
        self.update_at(data, self.time, -1)

    def update(self, data: Any, diff: Any = 1) -> None:
        """Change the count of `data` by `diff` at the session's current time."""
        time = self.time
        if (type(time) is int and type(diff) is int and type(data) is tuple
                and not self.closed and _ints_and_strs(data)):
            # The commonest update of a stream, checked here without `update_at`'s
            # call and `hash`.
            self._pending.append((data, time, diff))
            return
        self.update_at(data, time, diff)

    def update_at(self, data: Any, time: Any, diff: Any = 1) -> None:
        """Change the count of `data` by `diff` at `time`, which must be in advance of the
        session's time (`advance_to`).  The update is pending until the next `run()`.

        Raises, recording nothing: `TimeError` (a time of another lattice, or before the
        session's), `DataError` (unhashable `data`, or data holding a NaN: unequal to
        itself, it would never cancel), `DiffError` (a diff that is not an
        element of the diff type), `SessionClosedError` (after `close()`).
        """
        if (type(time) is int and type(self.time) is int and time >= self.time
                and type(diff) is int and not self.closed):
            # The common case (int times, int diffs), checked with fewer calls: ints,
            # strs and tuples of them hash and equal themselves (no NaN), with no
            # call to `hash` or `not_self_equal`.
            kind = type(data)
            if kind is int or kind is str or (kind is tuple and _ints_and_strs(data)):
                self._pending.append((data, time, diff))
                return
            try:
                hash(data)
            except TypeError:
                pass          # the full path below reports it
            else:
                if not not_self_equal(data):
                    self._pending.append((data, time, diff))
                    return
        self._check_open("update_at", data, time)
        self._pending.append(checked_update(self.name, self.time, data, time, diff))

    def extend(self, updates: Iterable[tuple]) -> None:
        """Add many `(data, time, diff)` updates; all are checked before any is kept."""
        try:
            updates = list(updates)
        except TypeError as exc:
            raise DataError(f"extend needs an iterable of (data, time, diff) triples, got "
                            f"{updates!r}", operator=self.name, record=updates) from exc
        saved = len(self._pending)
        try:
            for u in updates:
                if not isinstance(u, tuple) or len(u) != 3:
                    raise DataError("expected (data, time, diff) triples", operator=self.name,
                                    record=u)
                self.update_at(*u)
        except BaseException:
            del self._pending[saved:]
            raise

    def update_many(self, data: Any, diffs: Any = 1, times: Any = None) -> int:
        """Change the counts of many records at once; returns how many were given.

        `data` is a numpy array (1-D: one value per record; 2-D: a tuple per row),
        a pandas DataFrame (a tuple per row, or the value of a one-column frame), or
        a sequence of hashable records.  `diffs` is one diff or one per record;
        `times` is None (the session's time), one time, or one per record (a numpy
        int array for an int lattice, or any sequence of times).  Each column is
        checked as a whole (`ddflow.bulk_input`); the first bad row is named in the
        same typed error `update_at` raises (`DataError`, `TimeError`, `DiffError`),
        and nothing is recorded unless every row passes.

        >>> import numpy as np, ddflow
        >>> df = ddflow.Dataflow(); s, c = df.new_collection("pairs")
        >>> s.update_many(np.array([[1, 2], [3, 4]]), diffs=np.array([1, -1]), times=[0, 2])
        2
        >>> s.pending
        [((1, 2), 0, 1), ((3, 4), 2, -1)]
        >>> s.update_many([(5, 6), [7]])
        Traceback (most recent call last):
        ...
        ddflow.errors.DataError: row 1: data must be hashable (unhashable type: 'list'); ...
        """
        from ddflow.bulk_input import diffs_of, records_of, times_of
        self._check_open("update_many", None, None)
        records = records_of(data, self.name)
        n = len(records)
        d = diffs_of(diffs, n, records, self.name)
        t = times_of(times, n, self.time, records, self.name)
        if type(t) is list:
            new = list(zip(records, t, d)) if type(d) is list else [
                (r, u, d) for r, u in zip(records, t)]
        elif type(d) is list:
            new = [(r, t, x) for r, x in zip(records, d)]
        else:
            new = [(r, t, d) for r in records]
        self._pending.extend(new)
        return n

    def insert_many(self, data: Any, times: Any = None) -> int:
        """`update_many(data, 1, times)`: one more copy of each record."""
        return self.update_many(data, 1, times)

    def remove_many(self, data: Any, times: Any = None) -> int:
        """`update_many(data, -1, times)`: one copy less of each record."""
        return self.update_many(data, -1, times)

    def insert_dataframe(self, frame: Any, time: str | None = None,
                         diff: str | None = None) -> int:
        """Add the rows of a Spark DataFrame as updates (see `ddflow.frames`); returns
        the number of rows.  An engine that takes them where they are (its
        `feed_dataframe`: the Spark engine checks and shards them on the executors,
        where they wait for the next `run()`) is handed the frame; `pending` does not
        list those rows, and a failed run that they cause blames them as one unit
        (`(self, rows, None, None)` in `err.inputs`, `ddflow.engine.fed`), which
        `discard(err)` withdraws whole.  Any other engine's rows stream through
        the driver."""
        if not (hasattr(frame, "columns") and hasattr(frame, "toLocalIterator")):
            raise DataError(f"insert_dataframe needs a Spark DataFrame, got a "
                            f"{type(frame).__name__} (use extend() for (data, time, diff) "
                            "triples)", operator=self.name)
        feed = getattr(self.dataflow.engine, "feed_dataframe", None)
        if feed is None:
            return frames.feed_rows(self, frame, time, diff)
        self._check_open("insert_dataframe", None, None)
        return feed(self, frame, time=time, diff=diff)

    def advance_to(self, time: Any) -> None:
        """Promise no updates at times not in advance of `time`: the times before it can
        complete (outputs there become final) once `run()` has done their work.  Moving
        back raises `TimeError`."""
        self._check_open("advance_to", None, time)
        time = as_time(time)
        self._check_time(time, None, "advance_to")
        if not less_equal(self.time, time):
            raise TimeError(f"advance_to({time!r}) would move the session back from "
                            f"{self.time!r}", operator=self.name, time=time)
        self.time = time

    def close(self) -> None:
        """No more updates: every time becomes complete once in-flight work is done."""
        self.closed = True

    def held(self) -> bool:
        """Whether this process holds the input's history, which `contents` reads: the
        local engine does once it has run; the BSP and Spark engines keep it on their
        shards (`readable`)."""
        ops = self.dataflow.engine.operators(self.node)
        return bool(ops) and all(hasattr(op, "history_updates") for op in ops)

    def readable(self) -> bool:
        """Whether `contents` can read the input's history: held here, or on the
        shards of an engine that hands an operator's state back (`fetch`: the BSP
        and Spark engines, once the input has run)."""
        engine = self.dataflow.engine
        return self.held() or (getattr(engine, "fetch", None) is not None
                               and bool(engine.operators(self.node)))

    def contents(self, time: Any) -> dict:
        """The input's accumulation at `time`, over what the engine has received
        (`{data: multiplicity}`): what explanations start from (`ddflow.explain`).
        The input keeps its history compacted one step behind the slowest open
        input's frontier (`InputOp.horizon`), so the dataflow's latest final time is
        always there, however unevenly the inputs advance; an earlier time compacted
        away raises `CompactionError` naming it.  On a sharded engine the shards'
        histories are fetched (one read per shard: O(history) in transfer)."""
        from operator import methodcaller

        from ddflow.errors import CompactionError
        from ddflow.updates import accumulate
        time = as_time(time)
        engine = self.dataflow.engine
        if self.held():
            parts = [(op.since, op.history_updates())
                     for op in engine.operators(self.node)]
        elif self.readable():
            # `methodcaller`, not a function of ours: a Spark worker unpickles it
            # whatever code it imports.
            parts = list(zip(engine.fetch(self.node, "since"),
                             engine.fetch(self.node, methodcaller("history_updates"))))
        else:
            raise DataError(f"the contents of input '{self.name}' are not held here (run() "
                            "first)", operator=self.name)
        history: list = []
        for since, updates in parts:
            if since is not None and not since.less_equal(time):
                raise CompactionError(f"input '{self.name}' has compacted its history to "
                                      f"{since!r}, past {time!r}: its contents there "
                                      "are gone", operator=self.name, time=time)
            history.extend(updates)
        return accumulate(history, time)

    def frontier(self) -> Antichain:
        """The times this session may still update: `{time}` while open, empty after
        `close()`."""
        # One time is its own antichain (`advance_to` checked its lattice).
        return EMPTY if self.closed else Antichain.trusted((self.time,))

    @property
    def pending(self) -> list[tuple]:
        """Updates given since the last successful `run()` (a copy)."""
        return list(self._pending)

    def stalled(self) -> bool:
        """Whether updates are pending that no run can complete: the session is open
        and its frontier has not moved since the last successful `run()`."""
        return bool(self._pending) and not self.closed and self.frontier() == self._ran_at

    def mark_ran(self) -> None:
        """A `run()` succeeded: its frontier is the one `stalled` compares with, and
        the one `open_updates` are in advance of."""
        self._ran_at = frontier = self.frontier()
        if self._open:
            self._open = _in_advance(self._open, frontier)

    def accepted(self, updates: list[tuple]) -> None:
        """A run took `updates` and succeeded: those at times its frontier has not
        passed stay open (`open_updates`)."""
        if updates:
            self._open.extend(_in_advance(updates, self.frontier()))

    @property
    def open_updates(self) -> list[tuple]:
        """The updates successful runs took at times the frontier of the last one had
        not passed: not final yet, so a run whose `advance_to` completes their time
        may fail on one.  `ddflow.blame` then names it (`err.accepted`), and
        `discard(err)` retracts it at its own time, which that frontier still allows
        (the failed run moved nothing)."""
        return list(self._open)

    def recover(self, withdraw: list[tuple], retract: list[tuple],
                apply: bool = True) -> None:
        """`discard(err)`'s part on this session: take the pending updates `withdraw`
        out, and cancel the open updates `retract` by their negation at their own
        time (one copy per entry); `DataError` if one is neither, and then nothing
        changes.  `apply=False` only checks (the dataflow checks every session
        before it changes any)."""
        pending, open_ = list(self._pending), list(self._open)
        for u in withdraw:
            if u not in pending:
                raise DataError(f"withdraw: {u!r} is not pending on input '{self.name}'",
                                operator=self.name, record=u[0], time=u[1])
            pending.remove(u)
        for u in retract:
            if u not in open_ or not self._ran_at.less_equal(u[1]):
                raise DataError(f"retract: {u!r} is no longer an open update of input "
                                f"'{self.name}' (a later run completed its time)",
                                operator=self.name, record=u[0], time=u[1])
            open_.remove(u)
        if apply:
            self._pending = pending + [(d, t, -r) for d, t, r in retract]
            self._open = open_

    def discard(self, data: Any, time: Any = _ANY, diff: Any = _ANY) -> list[tuple]:
        """Withdraw pending updates and return them; the other pending updates stay.

        The recovery from a failed `run()` is `discard(err)`: the error names the
        pending updates its step failed on, `err.inputs`, and this withdraws exactly
        those, from whichever sessions of the dataflow they were given to (see
        `Dataflow.discard`; it returns `(session, data, time, diff)` entries).
        `err.record` and `err.time` are what the failing operator saw, which past
        the first operator (a map before it, a join, a round of a loop) is not
        what was given here: they are not the way to find the culprit.

        `discard(data)` withdraws every pending update of `data`; with `time`, its
        updates at that time only; with `diff` as well, only the exact `(data, time,
        diff)` updates.  Matching nothing withdraws nothing and warns
        (`NothingDiscardedWarning`): the return value is `[]`, and a recovery that
        meant to withdraw something hears of it.
        """
        if isinstance(data, DataflowError) and time is _ANY and diff is _ANY:
            return self.dataflow.discard(data)
        if time is not _ANY:
            time = as_time(time)

        def hit(u: tuple) -> bool:
            return (u[0] == data and (time is _ANY or u[1] == time)
                    and (diff is _ANY or u[2] == diff))
        gone = [u for u in self._pending if hit(u)]
        if gone:
            self._pending = [u for u in self._pending if not hit(u)]
        else:
            times = sorted({repr(u[1]) for u in self._pending if u[0] == data})
            warnings.warn(NothingDiscardedWarning(
                f"discard: no pending update of {data!r} on input '{self.name}' matches"
                + ("" if time is _ANY else f" at time {time!r}")
                + ("" if diff is _ANY else f" with diff {diff!r}")
                + (f"; it has pending updates at {', '.join(times)}" if times else
                   "; it has none (withdrawn, or run() since)")
                + ": nothing was withdrawn"), stacklevel=2)
        return gone

    def withdraw(self, updates: list[tuple]) -> None:
        """Take exactly `updates` (each a pending `(data, time, diff)`, one copy per
        entry) out of the pending ones; `DataError` if one is not pending, and
        then nothing is taken."""
        self.recover(updates, [])

    def clear(self) -> list[tuple]:
        """Withdraw and return every pending update."""
        return self.take_pending()

    def take_pending(self) -> list[tuple]:
        """Withdraw and return every pending update (what an engine does at a step)."""
        pending, self._pending = self._pending, []
        return pending

    def restore_pending(self, updates: list[tuple]) -> None:
        """Give back updates taken by `take_pending` (a failed step), ahead of any
        given since, so nothing is lost and the order is kept."""
        self._pending[:0] = updates

    def _check_open(self, what: str, data: Any, time: Any) -> None:
        if self.closed:
            raise SessionClosedError(f"{what} on input '{self.name}' after close()",
                                     operator=self.name, record=data, time=time)

    def _check_time(self, time: Any, data: Any, what: str) -> None:
        check_lattice(self.name, self.time, time, data, what)


class InputOp(Operator):
    """Source of a session's updates; holds the session's frontier as capability.

    It keeps what it has emitted, compacted (`history`), so that an operator added
    after `run()` can be handed the input's contents (`snapshot`): the input's own
    arrangement, in differential dataflow's terms.  The history is re-compacted to
    the frontier (no further than the slowest open input allows: `horizon`)
    whenever it has doubled since the last time, at a constant
    amortised cost per update: it holds at most twice the records it held after its
    last compaction.  That bounds it by the live records only while they do not
    shrink: deleting every record leaves the deletions and what they cancel (up to
    twice the old size) until the next updates trigger a compaction.
    """

    _state = ("_frontier", "_behind", "since", "_live", "_columns", "_fresh", "horizon")
    _append_only = ("history",)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._frontier: Antichain = EMPTY
        # The frontier before the last move: compaction goes that far only, so that
        # the accumulation at every time the last run made final stays exact (what
        # an explanation of the latest answer reads, `InputSession.contents`).
        self._behind: Antichain = EMPTY
        #: The frontier the history was last compacted to (None: never).
        self.since: Antichain | None = None
        #: Set by the worker: the meet over the dataflow's open inputs of their
        #: frontiers one step behind (None: this input's own; empty: an open input
        #: has not moved yet, keep every time).  The latest final time depends on
        #: the slowest input, so no input compacts past it.
        self.horizon: Antichain | None = None
        self.history: list = []
        self._live = 0          # the history's length after its last compaction
        # The compacted history of plain records (ints, tuples of ints; int or
        # Product-of-int times) as sorted numpy columns (`ddflow.columnar`): 32 bytes
        # an update instead of ~150 in tuples, and compacted by vectorized kernels.
        # `history` then holds only what arrived since.  Replaced, never mutated.
        self._columns: Columns | None = None
        # Record columns emitted since the last compaction (`INPUT_COLUMNS`), kept
        # as they came until the next one merges them in: no tuple per update.  A
        # tuple, replaced, never mutated (the undo journal keeps the old one).
        self._fresh: tuple = ()

    @property
    def frontier(self) -> Antichain:
        return self._frontier

    @frontier.setter
    def frontier(self, frontier: Antichain) -> None:
        self._behind, self._frontier = self._frontier, frontier

    @property
    def behind(self) -> Antichain:
        """The frontier before the last move (empty before the first)."""
        return self._behind

    takes_columns = True

    def on_input(self, port: int, updates: list) -> None:
        self.records_in += len(updates)
        # Consolidate first: an update and its retraction in one step cancel.
        if type(updates) is Columns:        # a load handed over as columns
            updates = columnar.consolidate(updates)
        elif INPUT_COLUMNS and wants_column_batch(len(updates)):
            # A step's plain updates consolidated in numpy and passed on as record
            # columns: an arrangement seals them and a join reads them as they are,
            # where triples were consolidated here, then encoded by each.
            cols = columnar.encode_records(updates)
            updates = cols if cols is not None else self.consolidate(updates)
        else:
            updates = self.consolidate(updates)
        self.emit(updates)
        if len(self.history) + len(updates) + self._column_records() > 2 * self._live:
            # Straight into the compacted history, not appended first: the undo
            # record of the step holds the list `history` was at its start, and the
            # rows appended to it would live as long as the step (a load's every
            # update: its tuples outlived their columns).
            self._compact(updates)
        elif type(updates) is Columns:
            if len(updates):
                self._fresh = (*self._fresh, updates)
        else:
            self.history.extend(updates)

    def _column_records(self) -> int:
        return (0 if self._columns is None else len(self._columns)) + sum(
            map(len, self._fresh))

    def _compact(self, new: Any = None) -> None:
        """Compact the history and `new` (updates arriving: triples, or record
        columns) together."""
        # Fresh objects, not edits in place: the undo journal keeps the old ones.
        # Compaction goes as far as the frontier before the last move (`_behind`),
        # and no further than the slowest input allows (`horizon`).
        frontier, horizon = self._behind, self.horizon
        if horizon is not None:
            frontier = (horizon if horizon.is_empty() else frontier if frontier.is_empty()
                        else frontier.meet(horizon))
        rows = self.history
        parts = ([] if self._columns is None else [self._columns]) + list(self._fresh)
        self._fresh = ()
        if type(new) is Columns:
            parts.append(new)
        elif new:
            rows = rows + new if rows else new
        if len({p.layout() for p in parts}) > 1:
            # Data of another shape than the kept columns': those parts as rows.
            layout = parts[0].layout()
            rows = rows + [u for p in parts if p.layout() != layout
                           for u in columnar.records(p)]
            parts = [p for p in parts if p.layout() == layout]
        merged = None
        if wants_columns(len(rows) + sum(map(len, parts))):
            merged = _advanced_columns(rows, parts, frontier)
        if merged is not None:
            self._columns = merged if len(merged) else None
            self.history = []
        else:
            self._columns = None
            self.history = _advanced([u for p in parts for u in columnar.records(p)] + rows,
                                     frontier)
        if not frontier.is_empty():
            self.since = frontier
        self._live = len(self.history) + self._column_records()

    def history_updates(self) -> list:
        """The kept history as `(data, time, diff)` triples (columns decoded)."""
        parts = ([] if self._columns is None else [self._columns]) + list(self._fresh)
        if not parts:
            return self.history
        return [u for c in parts for u in columnar.records(c)] + self.history

    def snapshot(self, time: Any) -> list:
        """Everything this input has emitted, advanced to `time` and consolidated."""
        return _advanced(self.history_updates(), Antichain([time]))

    def trace_records(self) -> int:
        return len(self.history) + self._column_records()

    def capabilities(self) -> Iterable[Any]:
        return self.frontier.elements


def _advanced_columns(rows: list, parts: list, frontier: Antichain) -> Columns | None:
    """The column `parts` (consolidated, of one layout) plus `rows`, times advanced
    by `frontier`, consolidated, as columns; None if the rows are not plain, the
    layouts differ or a sum leaves int64 (the caller keeps rows)."""
    parts = list(parts)
    if rows:
        new = columnar.encode_records(rows)
        if new is None:
            return None
        parts.append(new)
    if not parts or len({p.layout() for p in parts}) > 1:
        return None
    adv = None
    if frontier.elements:
        adv = columnar.encode_frontier(frontier.elements, parts[0].product)
        if adv is None:
            return None
    elif len(parts) == 1:
        return parts[0]         # consolidated, and nothing to advance: no second sort
    return columnar.merge(parts, adv)


def _in_advance(updates: list, frontier: Antichain) -> list:
    """The updates whose time `frontier` has not passed: not complete, still open."""
    elements = frontier.elements
    if not elements:
        return []
    if len(elements) == 1 and type(elements[0]) is int:
        least = elements[0]
        return [u for u in updates if u[1] >= least]
    return [u for u in updates if frontier.less_equal(u[1])]


def _advanced(updates: list, frontier: Antichain) -> list:
    """`updates` with times advanced by `frontier`, consolidated (see `advance_by`)."""
    if frontier.is_empty():
        return consolidate_unsorted(updates)
    return consolidate_unsorted([(d, advance_by(t, frontier), r) for d, t, r in updates])
