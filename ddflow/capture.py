"""Reading an output: `Capture`, what users read of a capture's sinks.

This module isolates one job: answering "what is this collection at time `t`?" and
"what are its updates?" without re-reading the whole history on every question.  It
leaves out scheduling and the sinks themselves: engines only hand over the updates a
capture's sinks (`operators.capture.CaptureOp`) appended since a cursor
(`engine.captured_since`, built on `operators.capture.read_since`), and say where the
capture's frontier is.

`Capture` keeps an index that each read brings up to date from the new updates alone:

* per record, its consolidated changes `data -> {time: diff}` (no zero diffs), which
  is what `updates` returns, in `ddflow.updates.consolidate`'s order, by merging the
  changed records into a cached sorted list;
* a *checkpoint*: the accumulation `acc(C, c)` at one complete time `c`, plus the
  "recent" consolidated updates at times not `<= c`.  For `t` in advance of `c`,

      acc(C, t) = acc(C, c) + (sum of recent updates at times s <= t)

  because every update at `s <= c` is also `<= t`.  This is the logical compaction
  of differential dataflow's traces (McSherry, Murray, Isaacs, Isard, "Differential
  dataflow", CIDR 2013; the `advance_by` / `since` frontier of the differential
  dataflow library's `TraceReader`): the part of the history no later question can
  tell apart is kept as one accumulation.  The checkpoint moves forward (`c <= t` in
  the lattice order, never `<` on times) when `at` is asked at a time that is final
  (not in advance of the capture's frontier), so asking for the answer after each
  step costs O(answer + changes since the last answer), not O(history).  Answers
  are `Accumulation`s: dicts that print in data order.

Invariant (checked by `Capture._check`): the index equals what a full recomputation
from every captured update gives: `updates == consolidate(all)`, `acc == accumulate(
all, c)`, and `recent` holds exactly the consolidated updates
at times not `<= c`.  A rolled-back step (the engine's lists lose updates the index
has read) makes the engine answer `reset=True`, and the index is rebuilt.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from operator import itemgetter
from typing import Any

from lattice import Antichain, as_time, less_equal, same_lattice, sort_key
from ddflow import frames
from ddflow.errors import GraphError, NotFinalError, TimeError
from ddflow.graph import Node, cone
from ddflow.updates import (UNORDERED, accumulate, consolidate, fallback_key, is_chain,
                            sort_updates_ordered, sorted_data)
from operators.capture import Cursor

#: Re-sort the whole list rather than merge the changed records in one by one when
#: they are more than a quarter of it (bisecting for each costs more than sorting);
#: below a few dozen entries either is cheap.
_MERGE_SHARE = 4
_MERGE_SLACK = 32


class Accumulation(dict):
    """A collection at one time, `{data: multiplicity}`: a plain dict that prints in
    data order.

    `Capture.at` builds it from a copy of the checkpoint's accumulation plus the
    recent changes, so keys that appeared since the checkpoint sit at the end; putting
    every key in order would cost a re-insertion of the whole answer, several times
    the price of the read.  So the order is promised where people look at it, in
    `repr`, and not in iteration (as `collections.Counter` prints by count whatever
    its insertion order).  Equality is a dict's.

    >>> a = Accumulation({3: 1, "x": 2, 1: -1})
    >>> a, list(a), a == {1: -1, 3: 1, "x": 2}
    ({1: -1, 3: 1, 'x': 2}, [3, 'x', 1], True)
    """

    __slots__ = ()

    def __repr__(self) -> str:
        if not self:
            return "{}"
        return "{" + ", ".join(f"{d!r}: {self[d]!r}" for d in sorted_data(self)) + "}"


class Capture:
    """Every update reaching a collection, consolidated, and the frontier there.

    Updates at times not in advance of `frontier` are final.  Reads bring an index
    up to date from the updates captured since the previous read (see the module
    docstring): `at(t)` after a step costs O(answer + changes since the last `at`)
    when `t` is in advance of the last final time asked (else a scan of every
    record), `updates` costs a list copy plus O(changed records * log) merging,
    `repr` O(changes).

    Counters, for the tests that show reads follow the changes: `absorbed` (updates
    taken from the engine), `scanned` (index entries visited to answer reads),
    `resets` (index rebuilds after a rolled-back step).
    """

    def __init__(self, dataflow: Any, node: Node) -> None:
        self.dataflow = dataflow
        self.node = node
        self.absorbed = 0
        self.scanned = 0
        self.resets = 0
        #: For a capture added to a running dataflow: the time it was added at.  Its
        #: first updates are the whole answer there, so it answers at times in
        #: advance of `since` only (None: it has been there from the start).
        self.since: Any = None
        #: The copy its one-off explanations (`explain`) of the latest time asked are
        #: read from (`ddflow.explain.Asking`), kept for the next record asked then;
        #: held here, not in a module table, so that it goes with the capture (it
        #: reaches the capture's dataflow again), and let go by `Dataflow.drop`.
        self.asking: Any = None
        #: Views kept only once asked for (None until then): the changes per time
        #: (`changes`), and the consolidated updates not yet handed out (`drain`).
        self._by_time: dict[Any, dict[Any, Any]] | None = None
        self._undrained: dict[tuple, Any] | None = None
        self._clear()

    def _clear(self) -> None:
        self._cursor: Cursor | None = None
        self._records: dict[Any, dict[Any, Any]] = {}   # data -> {time: diff}
        self._size = 0                                  # (data, time) entries
        self._sorted: list[tuple] = []                  # consolidated, in order
        self._dirty: set = set()          # data whose entries changed since _sorted
        # Nothing sorted yet: the first `_ordered` sorts every record, so what changed
        # is not tracked until then (a capture only ever read by `at` would keep a
        # set of every record it saw: 32 MB of the join+count stream's 1M updates).
        self._stale = True
        self._natural = True              # data ordered by `<` (else fallback_key)
        self._vanished = False            # a record disappeared since the order was chosen
        self._since: Any = None           # the checkpoint time c, None before the first
        self._acc: dict[Any, Any] = {}    # acc(C, c), zero values kept (see _fold)
        self._zeros: set = set()          # the keys of _acc whose value is zero
        self._recent: dict[tuple, Any] = {}   # (data, time) -> diff, time not <= c
        if self._by_time is not None:
            self._by_time = {}            # rebuilt from the history the reset brings

    # -- reading -------------------------------------------------------------------
    @property
    def updates(self) -> list[tuple]:
        """All updates so far, consolidated and sorted (as `consolidate` sorts)."""
        self._check_live()
        self._sync()
        return list(self._ordered())

    @property
    def frontier(self) -> Antichain:
        """The captured collection's frontier: times not in advance of it are final."""
        self._check_live()
        f = self.dataflow.engine.frontier(self.node)
        return f[0] if f else Antichain([self.node.scope.minimum])

    def at(self, time: Any, *, partial: bool = False) -> Accumulation:
        """The accumulated collection at `time`: `{data: multiplicity}` (zeros dropped).

        `time` must be final (`is_final(time)`): otherwise some input may still change
        the answer, and a `NotFinalError` says which inputs to `advance_to` past
        `time` before the next `run()`.  `partial=True` reads what has arrived so
        far instead, on purpose (it may change).  Printed in data order (see
        `Accumulation`); iterated in no promised order.
        """
        self._check_live()
        time = self._check_time(time)
        self._check_since(time)
        final = not self.frontier.less_equal(time)
        if not (final or partial):
            raise self._not_final(time)
        self._sync()
        c = self._since
        if c is not None and less_equal(c, time):
            result = self._from_checkpoint(time)
        else:
            result = self._scan(time)  # not in advance of the checkpoint, or none yet
        if (c is None or (c != time and less_equal(c, time))) and final:
            self._advance_checkpoint(time, result)
        return result

    def _check_since(self, time: Any) -> None:
        """Refuse a time not in advance of `since` (a capture added to a running
        dataflow holds what happened before it compacted into one snapshot)."""
        if self.since is not None and not less_equal(self.since, time):
            raise TimeError(f"capture '{self.node.name}' was added to the running dataflow "
                            f"at {self.since!r}: it answers at times in advance of that, "
                            f"not at {time!r}", operator=self.node.name, time=time)

    def changes(self, time: Any, *, partial: bool = False) -> list[tuple]:
        """The consolidated updates at exactly `time` (not the accumulation: what
        changed there), as `(data, time, diff)` sorted by data.

        Read from an index of the changes per time, kept up to date from the new
        updates alone once the first call has built it (one scan of the history):
        a call costs O(changes at `time`), not O(history).  Like `at`, `time` must
        be final unless `partial=True`.

        On a capture added to a running dataflow (`since` not None) `time` must be
        in advance of `since`, as for `at`; `changes(since)` is then the snapshot
        the capture started from (everything before it, compacted to `since`) plus
        what changed at `since` afterwards, not only the latter.
        """
        self._check_live()
        time = self._check_time(time)
        self._check_since(time)
        if not partial and self.frontier.less_equal(time):
            raise self._not_final(time)     # some input may still change it
        self._sync()
        by_time = self._by_time
        if by_time is None:
            by_time = self._by_time = {}
            self.scanned += self._size
            for data, rec in self._records.items():
                for t, r in rec.items():
                    by_time.setdefault(t, {})[data] = r
        at = by_time.get(time, {})
        self.scanned += len(at)
        return sort_updates_ordered([(d, time, r) for d, r in at.items()])[0]

    def drain(self) -> list[tuple]:
        """Everything captured since the last `drain()` (the first: since the start),
        consolidated and sorted as `updates` sorts: a reader that acts on each run's
        changes once.  Costs O(changes since the last drain)."""
        self._check_live()
        self._sync()
        if self._undrained is None:
            out = list(self._ordered())
        else:
            out = sort_updates_ordered([(d, t, r) for (d, t), r in self._undrained.items()])[0]
            self.scanned += len(out)
        self._undrained = {}
        return out

    def explain(self, record: Any, time: Any = None) -> Any:
        """Why is `record` in this output at `time` (None: the latest final time)?
        An `Explanation` (`ddflow.explain`): per input, the records, with their
        multiplicities at `time`, that reproduce `record` with its multiplicity there,
        found by a backward dataflow from it (the maintained one of
        `Dataflow.explain`, on a copy asked this one question); `check()` replays
        them."""
        from ddflow.explain import Asking, latest_final
        self._check_live()
        if time is None:
            time = latest_final(self)
        time = self._check_time(time)
        if not self.is_final(time):
            raise self._not_final(time)
        if self.asking is None or self.asking.time != time:
            self.asking = Asking(self, time)
        return self.asking.explain(self, record)

    def to_spark(self, spark: Any, at: Any = None) -> Any:
        """The updates as a Spark DataFrame (columns data, time, diff); with `at`, the
        accumulation at that final time (columns data, count).  An engine that holds
        the captures on Spark's executors builds the frame there (its
        `capture_dataframe`, as the Spark engine's): nothing goes through the driver.
        Otherwise the frame is made from this reader's copy (`ddflow.frames`)."""
        self._check_live()
        if at is not None:
            at = self._check_time(at)
            if not self.is_final(at):
                raise self._not_final(at)
        export = getattr(self.dataflow.engine, "capture_dataframe", None)
        if export is not None and self.dataflow.compiled:
            return export(self.node, spark, at)
        rows = (frames.update_rows(self.updates) if at is None
                else list(self.at(at).items()))
        return frames.to_dataframe(spark, rows, at is not None)

    def is_final(self, time: Any) -> bool:
        """Whether the accumulation at `time` can no longer change."""
        return not self.frontier.less_equal(self._check_time(time))

    def _check_live(self) -> None:
        if self.node.dropped:
            raise GraphError(f"capture '{self.node.name}' was dropped from the dataflow "
                             "(Dataflow.drop): it has no answers any more; build it again "
                             "to ask again", operator=self.node.name)

    def _check_time(self, time: Any) -> Any:
        time = as_time(time)
        if not same_lattice(time, self.node.scope.minimum):
            raise TimeError(f"{time!r} is not a time of this capture (its times look like "
                            f"{self.node.scope.minimum!r})", operator=self.node.name,
                            time=time)
        return time

    def _not_final(self, time: Any) -> NotFinalError:
        """The error for a read at `time` that is not final: it names the inputs
        upstream of this capture whose frontier has not passed `time`."""
        outer = time
        for _ in range(self.node.scope.depth):
            outer = outer[0]            # a loop's time: Product(outer time, round)
        upstream = {id(n) for n in cone(self.node)}
        holding = [s.name for s in self.dataflow.sessions
                   if id(s.node) in upstream and not s.closed and less_equal(s.time, outer)]
        if holding:
            how = (f"advance_to() a time past {outer!r} (or close()) on "
                   f"{', '.join(map(repr, holding))}, then run()")
        else:
            how = "run() the dataflow (the inputs have moved past it since the last run)"
        return NotFinalError(f"the answer at {time!r} is not final yet: {how}; "
                             "at(time, partial=True) reads the partial answer",
                             operator=self.node.name, time=time)

    def __repr__(self) -> str:
        if self.node.dropped:
            return f"Capture({self.node.name!r}, dropped)"
        self._sync()
        return f"Capture({self.node.name!r}, {self._size} updates)"

    # -- keeping the index up to date ----------------------------------------------
    def _sync(self) -> None:
        if not self.dataflow.compiled:
            return                      # nothing can have been captured yet
        new, cursor, reset = self.dataflow.engine.captured_since(self.node, self._cursor)
        drained = None
        if reset:
            if self._cursor is not None:
                self.resets += 1
            if self._undrained is not None:
                # What was handed out already: the history read so far minus what
                # was not drained yet.  The new history minus that is what is left.
                drained = _entries(self._records)
                _add_into(drained, self._undrained, -1)
                self._undrained = None      # set below, once the history is read
            self._clear()
        self._absorb(new)
        self._cursor = cursor
        if drained is not None:
            self._undrained = _entries(self._records)
            _add_into(self._undrained, drained, -1)

    def _absorb(self, updates: list) -> None:
        records, recent = self._records, self._recent
        dirty = None if self._stale else self._dirty
        c = self._since
        size = self._size
        by_time, undrained = self._by_time, self._undrained
        for data, time, diff in updates:
            if not diff:
                continue
            if by_time is not None:
                at = by_time.get(time)
                if at is None:
                    by_time[time] = {data: diff}
                else:
                    total = at.get(data, 0) + diff
                    if total:
                        at[data] = total
                    else:
                        del at[data]
                        if not at:
                            del by_time[time]
            if undrained is not None:
                key = (data, time)
                total = undrained.get(key, 0) + diff
                if total:
                    undrained[key] = total
                else:
                    del undrained[key]
            rec = records.get(data)
            if rec is None:
                records[data] = {time: diff}
                size += 1
            else:
                prev = rec.get(time)
                if prev is None:
                    rec[time] = diff
                    size += 1
                else:
                    total = prev + diff
                    if total:
                        rec[time] = total
                    else:
                        del rec[time]
                        size -= 1
                        if not rec:
                            del records[data]
                            self._vanished = True
            if dirty is not None:
                dirty.add(data)
            if c is not None:
                if less_equal(time, c):
                    # A change at a time the checkpoint called complete: an engine
                    # that declared it final too early.  Stay exact: drop the
                    # checkpoint, the next `at` rebuilds it from the records.
                    c = self._since = None
                    self._acc, self._recent, self._zeros = {}, {}, set()
                    recent = self._recent
                    continue
                key = (data, time)
                prev = recent.get(key)
                if prev is None:
                    recent[key] = diff
                else:
                    total = prev + diff
                    if total:
                        recent[key] = total
                    else:
                        del recent[key]
        self._size = size
        self.absorbed += len(updates)

    def _ordered(self) -> list[tuple]:
        """The consolidated updates in `consolidate`'s order, brought up to date."""
        current = self._sorted
        if (self._stale or (self._vanished and not self._natural)
                or len(self._dirty) * _MERGE_SHARE > len(current) + _MERGE_SLACK):
            return self._rebuild()
        if self._dirty:
            try:
                self._sorted = self._merge(current)
            except UNORDERED:
                return self._rebuild()   # new data `<` cannot order: decide anew
            self._dirty = set()
        return self._sorted

    def _rebuild(self) -> list[tuple]:
        entries = [(d, t, r) for d, rec in self._records.items() for t, r in rec.items()]
        self.scanned += len(entries)
        self._sorted, natural = sort_updates_ordered(entries)
        self._dirty, self._vanished, self._natural = set(), False, natural
        self._stale = False
        return self._sorted

    def _merge(self, current: list[tuple]) -> list[tuple]:
        """`current` with the entries of the changed records replaced: slices of it
        copied whole, each changed record found by bisection and written anew."""
        natural = self._natural
        records = self._records
        dirty = self._dirty
        changed = sorted(dirty) if natural else sorted(dirty, key=fallback_key)
        if natural and not is_chain(changed):
            raise TypeError("changed data only partly ordered by <")
        key = itemgetter(0) if natural else (lambda u: fallback_key(u[0]))
        out: list = []
        pos = 0
        end = len(current)
        for data in changed:
            k = data if natural else fallback_key(data)
            lo = bisect_left(current, k, pos, key=key)
            hi = bisect_right(current, k, lo, key=key)
            if natural and not ((lo == 0 or current[lo - 1][0] < data)
                                and (hi == end or data < current[hi][0])
                                and all(u[0] == data for u in current[lo:hi])):
                # bisection trusts `<`; a frozenset it orders only partly lands
                # between neighbours it is not between
                raise TypeError("new data only partly ordered by <")
            out += current[pos:lo]
            if not natural:
                # one fallback key may hold unequal data (a class defined twice):
                # keep the entries of those not written anew here
                out += [u for u in current[lo:hi] if u[0] not in dirty]
            rec = records.get(data)
            if rec:
                out += [(data, t, rec[t]) for t in sorted(rec, key=sort_key)]
                self.scanned += len(rec)
            pos = hi
        out += current[pos:]
        return out

    # -- the checkpoint ---------------------------------------------------------------
    def _from_checkpoint(self, time: Any) -> Accumulation:
        """acc(C, time) = acc(C, c) + recent updates at times <= time, for c <= time."""
        # `_acc` never has a key deleted, so this copy is a block copy of its table
        # (CPython copies a dict key by key once deletions have left holes in it).
        result = Accumulation(self._acc)
        recent = self._recent
        self.scanned += len(recent) + len(self._zeros)
        touched: list = []
        for (data, s), diff in recent.items():
            if less_equal(s, time):
                prev = result.get(data)
                result[data] = diff if prev is None else prev + diff
                touched.append(data)
        for keys in (self._zeros, touched):
            for data in keys:
                if not result.get(data, 1):
                    del result[data]
        return result

    def _scan(self, time: Any) -> Accumulation:
        """acc(C, time) from every record: for times the checkpoint cannot serve."""
        result = Accumulation()
        self.scanned += self._size
        small = type(time) is int
        for data, rec in self._records.items():
            w = None
            for s, r in rec.items():
                if (s <= time) if small and type(s) is int else less_equal(s, time):
                    w = r if w is None else w + r
            if w:
                result[data] = w
        return result

    def _advance_checkpoint(self, time: Any, result: dict) -> None:
        if self._since is None:
            # The first checkpoint: the recent updates are all those not <= time.
            self.scanned += self._size
            self._recent = {(d, s): r for d, rec in self._records.items()
                            for s, r in rec.items() if not less_equal(s, time)}
            self._acc, self._zeros = dict(result), set()
        else:
            self._fold(time)
        self._since = time

    def _fold(self, time: Any) -> None:
        """Move the recent updates at times <= `time` into `_acc`, in place: O(recent),
        where copying the answer would be O(answer).  A value that sums to zero stays
        (deleting it would leave a hole that makes every later copy slow) and is
        listed in `_zeros`; once they are an eighth of `_acc`, one rebuild drops them."""
        acc, zeros, keep = self._acc, self._zeros, {}
        self.scanned += len(self._recent)
        for key, diff in self._recent.items():
            if less_equal(key[1], time):
                data = key[0]
                prev = acc.get(data)
                total = diff if prev is None else prev + diff
                acc[data] = total
                if total:
                    zeros.discard(data)
                else:
                    zeros.add(data)
            else:
                keep[key] = diff
        self._recent = keep
        if len(zeros) * 8 > len(acc) + 8:
            self.scanned += len(acc)
            self._acc = {d: w for d, w in acc.items() if w}
            self._zeros = set()

    # -- invariants -----------------------------------------------------------------
    def _check(self) -> None:
        """Assert the index equals a recomputation from its own records, in O(n)."""
        entries = [(d, t, r) for d, rec in self._records.items() for t, r in rec.items()]
        _require(all(self._records.values()), "an empty record is kept")
        _require(all(r for _d, _t, r in entries), "a zero diff is kept")
        _require(len(entries) == self._size, f"size {self._size} != {len(entries)} entries")
        full = consolidate(entries)
        if not self._dirty and not self._stale:
            _require(self._sorted == full, "the sorted updates differ from consolidate()")
        if self._since is not None:
            c = self._since
            acc = {d: w for d, w in self._acc.items() if w}
            _require(acc == accumulate(entries, c), f"acc differs from acc(C, {c!r})")
            _require(self._zeros == {d for d, w in self._acc.items() if not w},
                     "the zero keys of acc are not the ones listed")
            recent = {(d, t): r for d, t, r in entries if not less_equal(t, c)}
            _require(self._recent == recent, "recent differs from the updates not <= c")
        if self._by_time is not None:
            by_time: dict = {}
            for d, t, r in entries:
                by_time.setdefault(t, {})[d] = r
            _require(self._by_time == by_time, "the changes per time differ from the records")
        if self._undrained is not None:
            _require(all(self._undrained.values()), "a zero diff is kept undrained")


def _entries(records: dict) -> dict[tuple, Any]:
    """`{(data, time): diff}` of a capture's records."""
    return {(d, t): r for d, rec in records.items() for t, r in rec.items()}


def _add_into(into: dict, other: dict, sign: int) -> None:
    """`into += sign * other`, as Z-sets over the same keys (zeros dropped)."""
    for key, diff in other.items():
        total = into.get(key, 0) + sign * diff
        if total:
            into[key] = total
        else:
            into.pop(key, None)


def _require(ok: bool, what: str) -> None:
    if not ok:      # an explicit raise: `python -O` must not silence the check
        raise AssertionError(f"Capture index: {what}")


__all__ = ["Accumulation", "Capture"]
