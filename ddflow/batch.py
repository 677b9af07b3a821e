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

import attrs

from lattice import Antichain, advance_by
from ddflow.diff import Diff, check_diff
from ddflow.errors import BatchError, DataError

Entry = tuple[Any, Any, Any]

def require_antichain(name: str, f: Any) -> Antichain:
    if not isinstance(f, Antichain):
        raise TypeError(f"{name} must be an Antichain, got {type(f).__name__} {f!r}")
    return f


@attrs.frozen(slots=True, eq=False, repr=False)
class Batch:
    """An immutable, consolidated set of keyed updates with its description.

    `data` maps each key to a tuple of `(val, time, diff)` entries (no zero diffs,
    no two entries with equal `(val, time)`); `len` is the number of entries.
    Equality is identity: two batches are the same batch only if they are one object.
    """

    lower: Antichain
    upper: Antichain
    since: Antichain
    data: dict
    len: int

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
    def empty(cls, lower: Antichain, upper: Antichain,
              since: Antichain | None = None) -> Batch:
        """A batch with no updates (it only moves a trace's upper frontier)."""
        return cls.from_updates((), lower, upper, since)

    def updates(self) -> Iterator[tuple[Any, Any, Any]]:
        """The batch's contents as `((key, val), time, diff)` triples."""
        for key, entries in self.data.items():
            for val, time, diff in entries:
                yield ((key, val), time, diff)

    def __len__(self) -> int:
        return self.len

    def __repr__(self) -> str:
        return (f"Batch(lower={self.lower!r}, upper={self.upper!r}, "
                f"since={self.since!r}, len={self.len})")

    def _check(self) -> None:
        """Assert the batch's invariants in O(len)."""
        lower, since = self.lower, self.since
        assert lower.dominates(self.upper), f"lower {lower!r} after upper {self.upper!r}"
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
    if since is None:
        new_since = batches[0].since
        for b in batches[1:]:
            new_since = new_since.meet(b.since)
    else:
        new_since = since
    return Batch(lower, upper, new_since, data, n)


