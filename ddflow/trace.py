"""Arrangements: the `Trace` that holds immutable `Batch`es (`ddflow.batch`) and merges them.

This module isolates the storage of indexed collections (the Trace of the "Notes on DBSP",
differential dataflow's arrangement): `key -> value -> [(time, diff)]`, built from
immutable batches and merged in size tiers like a log-structured merge tree, with
logical compaction.  It leaves out what operators do with the history (joins,
reductions) and progress tracking (which frontiers the engine may promise).

A `Batch` is a consolidated set of `((key, val), time, diff)` updates with a
description: `lower` and `upper` frontiers (every time is in advance of `lower` and
not in advance of `upper`; an empty `upper` is unbounded) and `since` (the frontier
its times have been advanced by).  A `Trace` is a list of batches, oldest first,
whose descriptions follow one another (each batch's `lower` in advance of the
previous batch's `upper`).

Invariants kept (checked by `_check()` in O(n)):

* in a batch, no zero diffs and at most one entry per `(key, val, time)`;
* in a batch, every time is in advance of `lower` and already advanced by `since`
  (`advance_by(t, since) == t`; under a partial order an advanced time need not be
  in advance of a multi-element `since`, so that is the test, not `since <= t`);
* batch sizes shrink in tiers from oldest to newest (of any `FANIN` consecutive
  batches, the oldest holds more than `FANIN` times the records of the newest), so
  there are O(FANIN log n) batches;
* a key history kept by `key_histories` is its batch's entries advanced by its
  floor (`KeyHistory._check`), and belongs to a batch still in the spine;
* the batches after the oldest hold at most half its records, so a trace holds at
  most 1.5x the records of its last full merge (which compaction brings down to
  the live records);
* compaction (by `set_logical_compaction` then a merge or `compact()`) never changes
  `accumulate(t)` for a time `t` in advance of the compaction frontier.

Batches are never mutated, so `snapshot()` is a tuple of references and `restore()`
puts them back: that is how the engine rolls a failed step back in O(#batches).

>>> from lattice import Antichain
>>> tr = Trace()
>>> _ = tr.insert_updates([(("a", 1), 0, 1), (("b", 2), 1, 1)], Antichain([0]), Antichain([2]))
>>> _ = tr.insert_updates([(("a", 1), 3, -1)], Antichain([2]), Antichain([4]))
>>> tr.accumulate(2), tr.accumulate(3)
({('a', 1): 1, ('b', 2): 1}, {('b', 2): 1})
>>> tr.set_logical_compaction(Antichain([3])); tr.compact()
>>> sorted(tr.get("a"))   # (1, 0, 1) and (1, 3, -1) both advanced to 3, then cancelled
[]
>>> list(tr.cursor())
[('b', 2, 3, 1)]
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Iterable, Iterator


from lattice import Antichain, less_equal, sort_key

from ddflow import columnar
from ddflow.batch import Batch, Entry, merge_batches, require_antichain
from ddflow.errors import BatchError, CompactionError
from ddflow.key_history import KeyHistory
from ddflow.updates import sorted_data

"""One stored entry of a key: `(val, time, diff)`."""

#: Batches of similar size merged at once (see `Trace.insert`).
FANIN = 4

#: Each batch's distinct times, computed once (a batch never changes) and forgotten
#: with the batch: what `Trace.time_count` unites.
_BATCH_TIMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: A key's entries in a batch below this many are not kept by `key_histories`.
_MEMO_MIN = 8


class TraceSnapshot:
    """A trace's state at one moment: its batches (immutable, shared) and frontiers.

    A plain slotted class: one is taken per trace per step that touches it."""

    __slots__ = ("batches", "since", "upper")

    def __init__(self, batches: tuple, since: Antichain | None,
                 upper: Antichain | None) -> None:
        self.batches, self.since, self.upper = batches, since, upper


class Trace:
    """A spine of immutable batches, merged geometrically, with logical compaction.

    `Trace(lower)` starts at frontier `lower` (its upper and its compaction
    frontier).  `Trace()` learns its lattice from the first batch: until then
    `upper` is None and so is `logical_compaction`, which means "not compacted":
    every time is still distinguishable.

    Reads (`get`, `values`, `history`, `accumulate_key`, `accumulate`) see the sum
    of all batches; they are correct at every time in advance of
    `logical_compaction`, and at earlier times only until a merge advances them.
    """

    __slots__ = ("_batches", "_since", "_upper", "_memo", "history_reads")

    def __init__(self, lower: Antichain | None = None) -> None:
        if lower is not None:
            require_antichain("lower", lower)
        self._batches: list[Batch] = []
        # A read cache for `key_histories`: batch -> key -> KeyHistory.  Derived from
        # immutable batches (a KeyHistory at any floor is exact for reads at or after
        # it), so a rollback only has to drop what belongs to batches no longer held.
        self._memo: dict[Batch, dict] = {}
        #: Stored updates `key_histories` has read, kept ones included (a measure of
        #: the mechanism, like a merge's work: not rolled back).
        self.history_reads = 0
        self._since: Antichain | None = lower
        self._upper: Antichain | None = lower

    # --- writing -----------------------------------------------------------------

    def insert(self, batch: Batch) -> None:
        """Append `batch` (its lower must be in advance of the trace's upper), then
        merge the newest batches while the older is at most twice the newer.

        Raises `BatchError` if the batch starts before the trace's upper: its times
        would land in a part of time the trace has already sealed.
        """
        if type(batch) is not Batch:
            raise TypeError(f"Trace.insert takes a Batch, got {type(batch).__name__}")
        if self._upper is not None and not self._upper.dominates(batch.lower):
            raise BatchError(f"batch lower {batch.lower!r} is not in advance of the "
                             f"trace's upper {self._upper!r}")
        self._upper = batch.upper
        if not batch.len:
            return   # an empty batch only moves the upper frontier
        batches = self._batches
        batches.append(batch)
        # Tiered merging: FANIN batches of similar size become one, so each record
        # is rewritten about log_FANIN(n / batch) times and a read visits at most
        # (FANIN - 1) batches per size tier.  In Python the rewrite (with times
        # advanced by the compaction frontier) dominates, hence FANIN = 4, not 2.
        while len(batches) >= FANIN and batches[-FANIN].len <= FANIN * batches[-1].len:
            group = batches[-FANIN:]
            del batches[-FANIN:]
            merged = merge_batches(group, self._since)
            if merged.len:
                batches.append(merged)
            self._forget(group)
        # Tiers bound the number of batches, not the records: under churn (a fixed live
        # set, old records deleted, new ones inserted) the deletions pile up in newer
        # batches next to the records they delete, in the oldest, until the tiers reach
        # it: up to about 4x the live records.  Once the newer batches hold more than half
        # the records of the oldest, merge them all: compaction cancels each deletion
        # against its record, and the trace stays within 1.5x what its last full merge
        # left.  Such a merge rewrites less than 3x the records of the newer batches:
        # O(1) amortized per record (a trace that only grows pays about one rewrite
        # per record more than the tiers alone).
        if len(batches) > 1:
            oldest = batches[0].len
            if 2 * (sum(b.len for b in batches) - oldest) > oldest:
                merged = merge_batches(batches, self._since)
                self._forget(batches)
                self._batches = batches = [merged] if merged.len else []

    def insert_updates(self, updates: Iterable[tuple[Any, Any, Any]], lower: Antichain,
                       upper: Antichain) -> Batch:
        """`insert(Batch.from_updates(updates, lower, upper))`; returns the batch."""
        batch = Batch.from_updates(updates, lower, upper)
        self.insert(batch)
        return batch

    def set_logical_compaction(self, frontier: Antichain) -> None:
        """Promise that no read will ask about times not in advance of `frontier`.

        Takes effect lazily: the next merge (or `compact()`) advances times by it.
        Raises `CompactionError` if `frontier` is behind the current one (the times
        it would make distinguishable again may already have been merged).
        """
        require_antichain("frontier", frontier)
        old = self._since
        if old is not None and not old.dominates(frontier):
            raise CompactionError(f"logical compaction cannot move backwards, from "
                                  f"{old!r} to {frontier!r}")
        self._since = frontier

    def compact(self) -> None:
        """Merge every batch into one now, advancing times by `logical_compaction`
        and consolidating (zero diffs dropped)."""
        if not self._batches:
            return
        merged = merge_batches(self._batches, self._since)
        self._forget(self._batches)
        self._batches = [merged] if merged.len else []

    def _forget(self, batches: Iterable[Batch]) -> None:
        """Drop the read cache of batches leaving the spine."""
        if self._memo:
            for b in batches:
                self._memo.pop(b, None)

    # --- reading -----------------------------------------------------------------

    def get(self, key: Any) -> list[Entry]:
        """Every stored `(val, time, diff)` of `key`, across batches, in no order.

        Entries are consolidated inside each batch but not across batches.
        """
        batches = self._batches
        if len(batches) == 1:
            return list(batches[0].get(key))
        out: list = []
        for b in batches:
            entries = b.get(key)
            if entries:
                out.extend(entries)
        return out

    def column_view(self) -> tuple[list, Callable[[Any], list]]:
        """The trace split by layout, for readers with vectorized kernels: the
        `Columns` of its columnar batches (read without decoding them), and `get`
        over its row batches only."""
        cols = [b.cols for b in self._batches if b.cols is not None]
        rows = [b for b in self._batches if b.cols is None]
        if not cols:
            return [], self.get

        def get(key: Any) -> list[Entry]:
            out: list = []
            for b in rows:
                entries = b.data.get(key)
                if entries:
                    out.extend(entries)
            return out
        return cols, get

    def column_batches(self, limit: int) -> list | None:
        """Every batch as `Columns`, for readers whose kernels take only columns: the
        row batches encoded (and kept on the batch: it is immutable, and the next
        pass reads it again) when they hold at most `limit` updates in all; None when
        they hold more or are not plain (the reader then goes key by key)."""
        rows = [b for b in self._batches if b.cols is None]
        if rows:
            if sum(b.len for b in rows) > limit:
                return None
            for b in rows:
                c = columnar.encode(b.update_list())
                if c is None:
                    return None
                b.cols = c
        return [b.cols for b in self._batches]

    def key_histories(self, key: Any, floor: Any) -> list[KeyHistory]:
        """`key`'s updates in each batch as a `KeyHistory` advanced by `floor`, for a
        reader that evaluates only at times in advance of `floor` (and of
        `logical_compaction`).  `history_reads` counts the stored updates read.

        A big batch can outlive many reads of one key (the tiers merge it only when
        as much new data has arrived), as a reduce's key is read in every round of a
        loop.  So the `KeyHistory` of a key's longer history in a batch is kept until
        the batch is merged away, and moved on from its last floor when the next
        floor is in advance of it: along a chain of floors each stored update is
        touched about once, not once per read.
        """
        out: list = []
        short: list = []        # the key's entries in batches where it has few: one history
        touched = 0
        memo = self._memo
        for b in self._batches:
            entries = b.get(key)
            if not entries:
                continue
            if len(entries) < _MEMO_MIN:
                short.extend(entries)
                continue
            per_key = memo.get(b)
            if per_key is None:
                per_key = memo[b] = {}
            h = per_key.get(key)
            if h is None or not less_equal(h.floor, floor):
                h = per_key[key] = KeyHistory.build(entries, floor)
                touched += len(entries)
            else:
                touched += h.advance(floor)
            out.append(h)
        if short:
            out.append(KeyHistory.build(short, floor))
            touched += len(short)
        self.history_reads += touched
        return out

    def values(self, key: Any) -> dict[Any, list[tuple[Any, Any]]]:
        """`val -> [(time, diff), ...]` for `key` (unconsolidated across batches)."""
        out: dict = {}
        for b in self._batches:
            entries = b.get(key)
            if entries:
                for val, time, diff in entries:
                    h = out.get(val)
                    if h is None:
                        out[val] = [(time, diff)]
                    else:
                        h.append((time, diff))
        return out

    def history(self, key: Any, val: Any) -> list[tuple[Any, Any]]:
        """`[(time, diff), ...]` of one `(key, val)` (unconsolidated across batches)."""
        out = []
        for b in self._batches:
            entries = b.get(key)
            if entries:
                out.extend([(t, d) for v, t, d in entries if v == val])
        return out

    def accumulate_key(self, key: Any, t: Any) -> dict[Any, Any]:
        """`val -> diff` for `key` at time `t` (sum of diffs at times `<= t`), nonzero."""
        acc: dict = {}
        get = acc.get
        int_t = type(t) is int
        for b in self._batches:
            entries = b.get(key)
            if not entries:
                continue
            for val, time, diff in entries:
                if (time <= t) if int_t and type(time) is int else less_equal(time, t):
                    prev = get(val)
                    acc[val] = diff if prev is None else prev + diff
        return {v: d for v, d in acc.items() if d}

    def accumulate(self, t: Any) -> dict[tuple[Any, Any], Any]:
        """`(key, val) -> diff` of the whole trace at time `t`, nonzero."""
        acc: dict = {}
        get = acc.get
        int_t = type(t) is int
        for b in self._batches:
            for key, entries in b.data.items():
                for val, time, diff in entries:
                    if (time <= t) if int_t and type(time) is int else less_equal(time, t):
                        k = (key, val)
                        prev = get(k)
                        acc[k] = diff if prev is None else prev + diff
        return {k: d for k, d in acc.items() if d}

    def keys(self) -> list[Any]:
        """Keys with stored entries (first-seen order, oldest batch first)."""
        if len(self._batches) == 1:
            return list(self._batches[0].data)
        return list(dict.fromkeys(k for b in self._batches for k in b.data))

    def times(self, key: Any) -> set:
        """The times at which `key` has stored entries."""
        return {time for b in self._batches for _, time, _ in b.data.get(key, ())}

    def __contains__(self, key: Any) -> bool:
        for b in self._batches:
            if key in b.data:
                return True
        return False

    def record_count(self) -> int:
        """Number of stored entries, summed over batches."""
        return sum(b.len for b in self._batches)

    __len__ = record_count

    def batch_count(self) -> int:
        return len(self._batches)

    def time_count(self) -> int:
        """Distinct times held, over all batches: O(sum of each batch's distinct
        times) once each batch's set is known (computed once per batch).

        >>> from lattice import Antichain
        >>> tr = Trace()
        >>> _ = tr.insert_updates([(("a", 1), 0, 1), (("b", 1), 1, 1)], Antichain([0]), Antichain([2]))
        >>> _ = tr.insert_updates([(("a", 2), 2, 1)], Antichain([2]), Antichain([3]))
        >>> tr.batch_count(), tr.time_count()
        (2, 3)
        """
        times: set = set()
        for batch in self._batches:
            held = _BATCH_TIMES.get(batch)
            if held is None:
                held = _BATCH_TIMES[batch] = frozenset(
                    t for entries in batch.data.values() for _v, t, _r in entries)
            times |= held
        return len(times)

    @property
    def batches(self) -> tuple[Batch, ...]:
        """The batches, oldest first (immutable; for inspection and tests)."""
        return tuple(self._batches)

    @property
    def upper(self) -> Antichain | None:
        """The frontier up to which the trace holds all updates (None before the first
        batch of a `Trace()` created without `lower`)."""
        return self._upper

    @property
    def logical_compaction(self) -> Antichain | None:
        """The `since` frontier: reads are exact at times in advance of it (None: not
        compacted yet, every time exact)."""
        return self._since

    since = logical_compaction

    def cursor(self) -> TraceCursor:
        """An ordered cursor over the current contents (unaffected by later inserts)."""
        return TraceCursor(tuple(self._batches))

    # --- rollback ----------------------------------------------------------------

    def snapshot(self) -> TraceSnapshot:
        """The current state, in O(#batches): batches are immutable and shared."""
        return TraceSnapshot(tuple(self._batches), self._since, self._upper)

    def restore(self, snapshot: TraceSnapshot) -> None:
        """Return to the state of `snapshot` (including a compaction frontier that has
        since moved on: a rollback is not a backward move of a live frontier)."""
        self._batches = list(snapshot.batches)
        self._since = snapshot.since
        self._upper = snapshot.upper
        if self._memo:
            held = set(self._batches)
            self._forget([b for b in self._memo if b not in held])

    def __repr__(self) -> str:
        sizes = [b.len for b in self._batches]
        return f"Trace(batches={sizes}, since={self._since!r}, upper={self._upper!r})"

    def _check(self) -> None:
        """Assert the trace's invariants in O(n); the tests call it after every operation."""
        assert self._since is None or isinstance(self._since, Antichain)
        prev: Batch | None = None
        for b in self._batches:
            assert type(b) is Batch
            b._check()
            assert b.len > 0, "empty batch kept in the spine"
            if prev is not None:
                assert prev.upper.dominates(b.lower), \
                    f"batch lower {b.lower!r} before previous upper {prev.upper!r}"
            prev = b
        for i in range(len(self._batches) - FANIN + 1):
            oldest, newest = self._batches[i], self._batches[i + FANIN - 1]
            assert oldest.len > FANIN * newest.len, \
                f"batch sizes not tiered: {[x.len for x in self._batches]}"
        if len(self._batches) > 1:
            oldest = self._batches[0].len
            assert 2 * (self.record_count() - oldest) <= oldest, \
                f"newer batches outgrew the oldest: {[x.len for x in self._batches]}"
        if prev is not None:
            assert self._upper is not None and prev.upper.dominates(self._upper), \
                f"trace upper {self._upper!r} before last batch upper {prev.upper!r}"
        held = set(self._batches)
        for b, per_key in self._memo.items():
            assert b in held, "key history kept for a batch no longer in the spine"
            for key, h in per_key.items():
                h._check(b.data[key])


class TraceCursor:
    """Ordered, consolidated read access to a trace: keys, then values, then times.

    The order the "Notes on DBSP" ask of traces (by key, by value, by time).  Keys and values
    are sorted as in `ddflow.updates.sorted_data`, times by `lattice.sort_key`;
    entries are consolidated across batches and zeros dropped, so a key or value
    whose history cancels out does not appear.  Iterating yields the notes'
    4-tuples `(key, val, time, diff)`.

    Stepping API, as in differential dataflow: `key_valid()`, `key()`, `step_key()`,
    and within a key `val_valid()`, `val()`, `step_val()`, `history()`.
    """

    __slots__ = ("_batches", "_keys", "_ki", "_vals", "_vi")

    def __init__(self, batches: tuple[Batch, ...]) -> None:
        self._batches = batches
        self._keys = sorted_data(dict.fromkeys(k for b in batches for k in b.data))
        self._ki = -1
        self._vals: list = []
        self._vi = 0
        self.step_key()

    def _load(self, key: Any) -> list:
        acc: dict = {}
        get = acc.get
        for b in self._batches:
            for val, time, diff in b.data.get(key, ()):
                k = (val, time)
                prev = get(k)
                acc[k] = diff if prev is None else prev + diff
        by_val: dict = {}
        for (val, time), diff in acc.items():
            if diff:
                by_val.setdefault(val, []).append((time, diff))
        return [(val, sorted(by_val[val], key=lambda td: sort_key(td[0])))
                for val in sorted_data(by_val)]

    def key_valid(self) -> bool:
        return self._ki < len(self._keys)

    def key(self) -> Any:
        return self._keys[self._ki]

    def step_key(self) -> None:
        """Move to the next key with a nonzero history."""
        self._ki += 1
        while self._ki < len(self._keys):
            self._vals = self._load(self._keys[self._ki])
            self._vi = 0
            if self._vals:
                return
            self._ki += 1
        self._vals = []

    def rewind_keys(self) -> None:
        self._ki = -1
        self.step_key()

    def val_valid(self) -> bool:
        return self._vi < len(self._vals)

    def val(self) -> Any:
        return self._vals[self._vi][0]

    def step_val(self) -> None:
        self._vi += 1

    def rewind_vals(self) -> None:
        self._vi = 0

    def history(self) -> list[tuple[Any, Any]]:
        """The current `(key, val)`'s `[(time, diff), ...]`, consolidated, by sort_key."""
        return list(self._vals[self._vi][1])

    def __iter__(self) -> Iterator[tuple[Any, Any, Any, Any]]:
        """All `(key, val, time, diff)` in order, from the first key (rewinds)."""
        self.rewind_keys()
        while self.key_valid():
            key = self.key()
            for val, hist in self._vals:
                for time, diff in hist:
                    yield (key, val, time, diff)
            self.step_key()


__all__ = ["Batch", "Trace", "TraceCursor", "TraceSnapshot", "Entry"]
