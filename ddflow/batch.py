"""Immutable batches of keyed updates, and how batches merge (with compaction).

Split from `ddflow.trace`, which keeps the spine that holds them.  A `Batch` is a
consolidated set of `((key, val), time, diff)` updates with a description: `lower`
and `upper` frontiers (every time in advance of `lower`, none in advance of `upper`;
an empty `upper` is unbounded) and `since` (the frontier its times were advanced by).
`merge_batches` sums consecutive batches, advancing every time by a compaction frontier and
consolidating, which is where history collapses and zero diffs disappear.

Invariants (`Batch._check()`, O(n)): no zero diffs, at most one entry per
`(key, val, time)`, every time in advance of `lower` and fixed under `since`
(`advance_by(t, since) == t`).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import numpy as np

from lattice import Antichain, advance_by
from ddflow import columnar
from ddflow.columnar import Columns, wants_column_batch, wants_columns
from ddflow.diff import Diff, check_diff
from ddflow.errors import BatchError, DataError

Entry = tuple[Any, Any, Any]

def require_antichain(name: str, f: Any) -> Antichain:
    if not isinstance(f, Antichain):
        raise TypeError(f"{name} must be an Antichain, got {type(f).__name__} {f!r}")
    return f


#: Key reads a columnar batch of at least `COLUMN_READS_MIN` updates serves from its
#: columns before it is decoded (`Batch.get`); a smaller one is decoded at its first
#: read (at most ~30 ms and ~6 MB; churn epochs of the 10k-node 2-core read dozens
#: of such batches, and ran 12.3 ms a median epoch by binary search against 6.2).
#: 128: the 200k-node reachability load reads its 600k-edge batch 112 times and keeps
#: it in columns; one-edge epochs after it (~25 reads each) decode it within a few
#: (median epoch 0.66 ms; 0.78 with 256 reads, where it stayed in columns for 40).
COLUMN_READS = 128
COLUMN_READS_MIN = 1 << 16


class Batch:
    """An immutable, consolidated set of keyed updates with its description.

    `data` maps each key to a tuple of `(val, time, diff)` entries (no zero diffs,
    no two entries with equal `(val, time)`); `len` is the number of entries.
    Equality is identity: two batches are the same batch only if they are one object.

    Two layouts, one content: rows (`data` given) or, for a large batch of plain
    data, sorted numpy columns (`cols`, `ddflow.columnar`), merged and consolidated
    by vectorized kernels; its `data` is then decoded from the columns when first
    read, and kept.  A plain slotted class rather than a frozen attrs one: that
    cached decoding is the one attribute set after construction.
    """

    __slots__ = ("lower", "upper", "since", "len", "cols", "_data", "_reads", "__weakref__")

    def __init__(self, lower: Antichain, upper: Antichain, since: Antichain,
                 data: dict | None, len: int, cols: Columns | None = None) -> None:
        self.lower, self.upper, self.since = lower, upper, since
        self._data, self.len, self.cols = data, len, cols
        self._reads = 0

    def get(self, key: Any) -> tuple:
        """`key`'s `(val, time, diff)` entries, `()` if none.  A columnar batch not yet
        decoded serves it from its columns (`columnar.key_entries`, a binary search):
        a join with a small delta, or a reduce's few general keys, read a handful of
        keys of a big batch, and decoding all of it for them cost its size in time
        and ~100 bytes an entry kept beside the columns.  A batch read more often is
        hot (one-change epochs read it at every step): past `COLUMN_READS` reads it
        is decoded once and read by dict (0.1 us a read
        against ~5 us by binary search; measured: the 200k-node reachability load
        reads its 600k-edge batch 112 times, one-edge epochs ~25 times each)."""
        d = self._data
        if d is None:
            if self.len >= COLUMN_READS_MIN and self._reads < COLUMN_READS:
                got = columnar.key_entries(self.cols, key)
                if got is not None:
                    self._reads += 1
                    return got
            d = self.data
        return d.get(key, ())

    @property
    def data(self) -> dict:
        """`key -> ((val, time, diff), ...)` (decoded from the columns once)."""
        d = self._data
        if d is None:
            d = self._data = columnar.decode(self.cols)
        return d

    @classmethod
    def from_updates(cls, updates: Iterable[tuple[Any, Any, Any]], lower: Antichain,
                     upper: Antichain, since: Antichain | None = None) -> Batch:
        """Consolidate `((key, val), time, diff)` triples into a batch.

        Raises `BatchError` (naming the record and time) if a time is not in advance
        of `lower` or is in advance of `upper`, or if `lower` does not precede
        `upper`; `DataError` if a record is not a hashable `(key, val)` pair;
        `DiffError` if a diff is not a diff.  `since` defaults to `lower` (times in
        advance of `lower` are already advanced by it); a given `since` advances
        every time by it.

        >>> from lattice import Antichain
        >>> b = Batch.from_updates([(("k", "v"), 1, 1), (("k", "v"), 1, 1), (("k", "w"), 2, 0)],
        ...                        Antichain([0]), Antichain([5]))
        >>> b.data, len(b)
        ({'k': (('v', 1, 2),)}, 1)
        >>> Batch.from_updates([(("k", "v"), 5, 1)], Antichain([0]), Antichain([5]))
        Traceback (most recent call last):
        ...
        ddflow.errors.BatchError: time is in advance of the batch's upper Antichain([5]); ...
        """
        require_antichain("lower", lower)
        require_antichain("upper", upper)
        if since is not None:
            require_antichain("since", since)
        if not lower.dominates(upper):
            raise BatchError(f"a batch's lower {lower!r} must precede its upper {upper!r}")
        if not isinstance(updates, (list, tuple)):
            updates = list(updates)
        if wants_column_batch(len(updates)):
            batch = _from_columns(updates, lower, upper, since)
            if batch is not None:
                return batch
        checked: dict = {}   # time -> advanced time; each distinct time is checked once
        groups: dict = {}    # key -> {(val, time): diff}
        for rec in updates:
            try:
                (key, val), time, diff = rec
            except (TypeError, ValueError):
                raise DataError("an arranged update is ((key, value), time, diff)",
                                record=rec) from None
            try:
                t = checked.get(time)
            except TypeError:
                raise DataError("a time must be hashable", record=rec[0], time=time) from None
            if t is None:
                if not lower.less_equal(time):
                    raise BatchError(f"time is not in advance of the batch's lower {lower!r}",
                                     record=rec[0], time=time)
                if upper.less_equal(time):
                    raise BatchError(f"time is in advance of the batch's upper {upper!r}",
                                     record=rec[0], time=time)
                t = checked[time] = time if since is None else advance_by(time, since)
            if type(diff) is not int and not isinstance(diff, Diff):
                check_diff(diff, record=rec[0], time=time)
            try:
                g = groups.get(key)
                if g is None:
                    g = groups[key] = {}
                k = (val, t)
                prev = g.get(k)
            except TypeError:
                raise DataError("keys and values of an arrangement must be hashable",
                                record=rec[0], time=time) from None
            g[k] = diff if prev is None else prev + diff
        data, n = _freeze(groups)
        return cls(lower, upper, lower if since is None else since, data, n)

    @classmethod
    def from_records(cls, records: list[tuple[Any, Any, Any]], lower: Antichain,
                     upper: Antichain) -> Batch:
        """`from_updates` of `((data, ()), time, diff)` for `(data, time, diff)`
        records: a collection arranged by itself.  A large plain one is encoded
        straight from the records (`columnar.encode_records`), without the pairs.

        >>> from lattice import Antichain
        >>> Batch.from_records([("k", 1, 1), ("k", 1, 1)], Antichain([0]), Antichain([5])).data
        {'k': (((), 1, 2),)}
        """
        if wants_column_batch(len(records)):
            require_antichain("lower", lower)
            require_antichain("upper", upper)
            if lower.dominates(upper):
                cols = columnar.encode_records(records)
                if cols is not None:
                    batch = _from_columns(records, lower, upper, None, cols)
                    if batch is not None:
                        return batch
        return cls.from_updates([((d, ()), t, r) for d, t, r in records], lower, upper)

    @classmethod
    def from_columns(cls, cols: Columns | None, lower: Antichain,
                     upper: Antichain) -> Batch | None:
        """The batch of consolidated keyed columns (`ddflow.columnar`), or None when
        they are none or a time lies outside `[lower, upper)` (`from_updates` of
        their rows then names it)."""
        require_antichain("lower", lower)
        require_antichain("upper", upper)
        if cols is None or not lower.dominates(upper):
            return None
        return _from_columns([], lower, upper, None, cols)

    @classmethod
    def empty(cls, lower: Antichain, upper: Antichain,
              since: Antichain | None = None) -> Batch:
        """A batch with no updates (it only moves a trace's upper frontier)."""
        return cls.from_updates((), lower, upper, since)

    def updates(self) -> Iterator[tuple[Any, Any, Any]]:
        """The batch's contents as `((key, val), time, diff)` triples."""
        return iter(self.update_list())

    def update_list(self) -> list[tuple[Any, Any, Any]]:
        """The batch's contents as a list of `((key, val), time, diff)` triples
        (straight from the columns of a columnar batch, without decoding `data`)."""
        if self._data is None:
            return columnar.updates(self.cols)
        return [((k, v), t, r) for k, entries in self._data.items() for v, t, r in entries]

    def __len__(self) -> int:
        return self.len

    def __repr__(self) -> str:
        return (f"Batch(lower={self.lower!r}, upper={self.upper!r}, "
                f"since={self.since!r}, len={self.len})")

    def _check(self) -> None:
        """Assert the batch's invariants in O(len)."""
        lower, since = self.lower, self.since
        assert lower.dominates(self.upper), f"lower {lower!r} after upper {self.upper!r}"
        if self.cols is not None:
            _check_columns(self)
        n = 0
        ok: set = set()
        for key, entries in self.data.items():
            assert type(entries) is tuple and entries, f"key {key!r}: entries {entries!r}"
            seen: set = set()
            for val, time, diff in entries:
                assert diff, f"zero diff at {(key, val, time)!r}"
                assert (val, time) not in seen, f"duplicate entry {(key, val, time)!r}"
                seen.add((val, time))
                if time not in ok:
                    assert lower.less_equal(time), f"{time!r} not in advance of lower {lower!r}"
                    assert advance_by(time, since) == time, \
                        f"{time!r} not advanced by since {since!r}"
                    ok.add(time)
            n += len(entries)
        assert n == self.len, f"len {self.len} but {n} entries"


def _frontier_columns(f: Antichain, product: bool) -> np.ndarray | None:
    return columnar.encode_frontier(f.elements, product)


def _from_columns(updates: list, lower: Antichain, upper: Antichain,
                  since: Antichain | None, cols: Columns | None = None) -> Batch | None:
    """The columnar batch of `updates` (or of `cols`, their columns, consolidated),
    or None if they are not plain or any time lies outside `[lower, upper)` (the row
    path then raises the error naming it)."""
    consolidated = cols is not None
    if cols is None:
        cols = columnar.encode(updates, sort=False)
    if cols is None:
        return None
    lo = _frontier_columns(lower, cols.product)
    up = _frontier_columns(upper, cols.product)
    adv = None if since is None else _frontier_columns(since, cols.product)
    if lo is None or up is None or (since is not None and adv is None):
        return None
    times = cols.times
    if not bool(np.all(columnar.in_advance_of(times, lo))) or bool(
            np.any(columnar.in_advance_of(times, up))):
        return None
    if adv is not None:
        cols.times = columnar.advance(times, adv)
        consolidated = False
    if not consolidated:
        cols = columnar.consolidate(cols)
    n = len(cols)
    return Batch(lower, upper, lower if since is None else since, None if n else {}, n,
                 cols if n else None)


def _check_columns(b: Batch) -> None:
    """The columnar layout's invariants: sorted and consolidated columns, times in
    advance of `lower` and fixed under `since`, and the decoded rows (if any) equal
    to the columns."""
    c = b.cols
    c._check()
    assert len(c) == b.len and b.len > 0, f"columns hold {len(c)} rows, len {b.len}"
    lo = _frontier_columns(b.lower, c.product)
    since = _frontier_columns(b.since, c.product)
    assert lo is not None and since is not None, "frontiers not of the columns' lattice"
    assert bool(np.all(columnar.in_advance_of(c.times, lo))), "time before lower"
    assert bool(np.all(columnar.advance(c.times, since) == c.times)), \
        "time not advanced by since"
    if b._data is not None:
        # Entry order is free: a row batch given columns later keeps its own order.
        decoded = columnar.decode(c)
        assert decoded.keys() == b._data.keys() and all(
            set(es) == set(decoded[k]) for k, es in b._data.items()), \
            "decoded rows differ from the columns"


def _merge_columns(batches: list[Batch], since: Antichain | None) -> Batch | None:
    """`merge_batches` by the columnar kernels, or None if some batch is not plain (or the
    layouts differ)."""
    parts = []
    for b in batches:
        if not b.len:
            continue
        c = b.cols if b.cols is not None else columnar.encode(b.update_list())
        if c is None or (parts and c.layout() != parts[0].layout()):
            return None
        parts.append(c)
    if not parts:
        return None
    frontier = None
    if since is not None and since.elements:
        frontier = _frontier_columns(since, parts[0].product)
        if frontier is None:
            return None
    merged = columnar.merge(parts, frontier)
    if merged is None:
        return None
    n = len(merged)
    return Batch(batches[0].lower, batches[-1].upper, _merged_since(batches, since),
                 None if n else {}, n, merged if n else None)


def _merged_since(batches: list[Batch], since: Antichain | None) -> Antichain:
    if since is not None:
        return since
    new_since = batches[0].since
    for b in batches[1:]:
        new_since = new_since.meet(b.since)
    return new_since


def _freeze(groups: dict) -> tuple[dict, int]:
    """`key -> {(val, time): diff}` to `key -> ((val, time, diff), ...)`, zeros dropped."""
    data: dict = {}
    n = 0
    for key, acc in groups.items():
        entries = tuple([(v, t, d) for (v, t), d in acc.items() if d])
        if entries:
            data[key] = entries
            n += len(entries)
    return data, n


def merge_batches(batches: list[Batch], since: Antichain | None) -> Batch:
    """One batch holding the sum of `batches` (consecutive, oldest first).

    With a `since`, every time is advanced by it and entries that become equal are
    consolidated; without one, the sinces of the parts are met (their union).
    """
    n = sum(b.len for b in batches)
    # Below the base threshold, a merge whose parts are all read as rows (built so,
    # or columns decoded by key reads: `Batch.get`) stays in rows: its readers go key
    # by key, and a columnar result would be decoded whole at its first read (the
    # one-edge reachability epoch at 2,000 nodes: 0.69 ms a median epoch against 0.60).
    if wants_column_batch(n) and (wants_columns(n) or any(b._data is None for b in batches)):
        merged = _merge_columns(batches, since)
        if merged is not None:
            return merged
    lower, upper = batches[0].lower, batches[-1].upper
    parts: dict = {}   # key -> list of entry tuples, one per batch holding the key
    for b in batches:
        for key, entries in b.data.items():
            p = parts.get(key)
            if p is None:
                parts[key] = [entries]
            else:
                p.append(entries)
    advancing = since is not None and bool(since.elements)
    # Few distinct times, many records: classify each time once.  Most times, once
    # advanced, stay put under later merges, so keys held by one batch whose times
    # are all `fixed` keep their entry tuple as is.
    fixed: set = set()
    moved: dict = {}

    def advanced(time: Any) -> Any:
        # Each distinct time is advanced once per merge, however many entries hold it.
        if time in fixed:
            return time
        a = moved.get(time)
        if a is None:
            a = advance_by(time, since)
            if a == time:
                fixed.add(time)
            else:
                moved[time] = a
        return a
    data: dict = {}
    n = 0
    for key, p in parts.items():
        if len(p) == 1:
            entries = p[0]
            if advancing and len(entries) == 1:
                # One entry (the usual key of a sparse batch): advance its time, and
                # there is nothing to consolidate it with.
                val, time, diff = entries[0]
                a = advanced(time)
                if a != time:
                    entries = ((val, a, diff),)
                data[key] = entries
                n += 1
                continue
            if advancing:
                for _, time, _ in entries:
                    if time in fixed:
                        continue
                    if time in moved:
                        break
                    a = advance_by(time, since)
                    if a == time:
                        fixed.add(time)
                    else:
                        moved[time] = a
                        break
                else:
                    data[key] = entries
                    n += len(entries)
                    continue
            else:
                # Consolidated inside its batch, and nothing to advance: reuse.
                data[key] = entries
                n += len(entries)
                continue
        acc: dict = {}
        get = acc.get
        for entries in p:
            for val, time, diff in entries:
                if advancing:
                    time = advanced(time)
                k = (val, time)
                prev = get(k)
                acc[k] = diff if prev is None else prev + diff
        entries = tuple([(v, t, d) for (v, t), d in acc.items() if d])
        if entries:
            data[key] = entries
            n += len(entries)
    return Batch(lower, upper, _merged_since(batches, since), data, n)


