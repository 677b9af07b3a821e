"""One key's updates in one batch, advanced by a floor time and sorted for replay.

What this module isolates: the form in which `reduce` reads a key's history
(differential dataflow's `ValueHistory`, McSherry et al., "Differential dataflow",
CIDR 2013).  A reader that will only evaluate at times in advance of a *floor* `f`
may replace every time `t` by `join(t, f)`: for `u >= f`, `t <= u` exactly when
`join(t, f) <= u`.  Updates whose times land on `f` then sum into a `base`
accumulation (per value), and the others are kept sorted by `sort_key` with the
meet of every suffix, so a reader can walk them in an order extending the partial
order and know a lower bound of everything still ahead.

A `KeyHistory` can be moved to a later floor in place (`advance`).  Only the
updates not already in advance of the new floor change, and the suffix meets find
where those end by binary search, so when floors climb a chain (the rounds of a
loop) each update is touched about once however often the key is read.
`ddflow.trace.Trace.key_histories` keeps them per batch between reads.

>>> from lattice import Product as P
>>> h = KeyHistory.build([("a", P(0, 1), 1), ("a", P(0, 2), -1), ("b", P(0, 3), 1)], P(1, 1))
>>> h.base, h.ahead()
({'a': 1}, [(Product(1, 2), 'a', -1), (Product(1, 3), 'b', 1)])
>>> h.advance(P(1, 2)), h.base, h.ahead()
(1, {}, [(Product(1, 3), 'b', 1)])
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Iterable

from lattice import join, less_equal, meet, sort_key

_first = itemgetter(0)


def add_to(acc: dict, k: Any, r: Any) -> None:
    """`acc[k] += r`, the key dropped when its sum is zero."""
    prev = acc.get(k)
    if prev is None:
        acc[k] = r
    else:
        s = prev + r
        if s:
            acc[k] = s
        else:
            del acc[k]


class KeyHistory:
    """`base` (value -> diff at `floor`) and, from index `start`, the updates above
    the floor as `entries[i] = (time, value, diff)` in `sort_key` order, with
    `keys[i] = sort_key(time)` and `meets[i]` the meet of `entries[i:]`."""

    __slots__ = ("floor", "base", "entries", "keys", "meets", "start")

    def __init__(self, floor: Any, base: dict, entries: list, keys: list, meets: list,
                 start: int = 0) -> None:
        self.floor, self.base, self.entries = floor, base, entries
        self.keys, self.meets, self.start = keys, meets, start

    @classmethod
    def build(cls, updates: Iterable[tuple], floor: Any) -> KeyHistory:
        """From `(value, time, diff)` updates: times joined with `floor`, consolidated."""
        base: dict = {}
        rest: dict = {}
        for v, t, r in updates:
            a = join(t, floor)
            if a == floor:
                add_to(base, v, r)
            else:
                add_to(rest, (v, a), r)
        entries, keys, meets = _sorted([(t, v, r) for (v, t), r in rest.items()])
        return cls(floor, base, entries, keys, meets)

    def __len__(self) -> int:
        return len(self.base) + len(self.entries) - self.start

    def ahead(self) -> list[tuple]:
        """The updates above the floor, `(time, value, diff)`, in `sort_key` order."""
        return self.entries[self.start:]

    def advance(self, floor: Any) -> int:
        """Move to `floor` (in advance of the current one); returns the updates touched."""
        if floor == self.floor:
            return 0
        entries, meets = self.entries, self.meets
        lo, hi = self.start, len(entries)
        while lo < hi:   # the first suffix wholly in advance of `floor`
            mid = (lo + hi) // 2
            if less_equal(floor, meets[mid]):
                hi = mid
            else:
                lo = mid + 1
        while lo < len(entries) and entries[lo][0] == floor:
            lo += 1     # in advance of the floor and equal to it: it joins the base
        moved: list = []
        base = self.base
        for t, v, r in entries[self.start:lo]:
            a = join(t, floor)
            if a == floor:
                add_to(base, v, r)
            else:
                moved.append((a, v, r))
        touched = lo - self.start
        self.floor = floor
        if moved:
            # Times that stay above the floor but moved: re-sort (rare along a chain).
            rest: dict = {}
            for t, v, r in moved + entries[lo:]:
                add_to(rest, (v, t), r)
            self.entries, self.keys, self.meets = _sorted([(t, v, r) for (v, t), r in rest.items()])
            self.start = 0
            touched += len(entries) - lo
        else:
            self.start = lo
        return touched

    def _check(self, updates: Iterable[tuple]) -> None:
        """Assert that this is `build(updates, self.floor)` (O(n log n))."""
        fresh = KeyHistory.build(updates, self.floor)
        assert self.base == fresh.base, f"base {self.base!r} != {fresh.base!r}"
        mine = {(t, v): r for t, v, r in self.ahead()}
        assert mine == {(t, v): r for t, v, r in fresh.ahead()}, "updates above the floor differ"
        ks = self.keys[self.start:]
        assert ks == sorted(ks), "not in sort_key order"
        m = None
        for i in range(len(self.entries) - 1, self.start - 1, -1):
            t = self.entries[i][0]
            m = t if m is None else meet(m, t)
            assert self.meets[i] == m, f"suffix meet at {i}"


def _sorted(entries: list) -> tuple[list, list, list]:
    decorated = sorted(((sort_key(e[0]), e) for e in entries), key=_first)
    keys = [k for k, _e in decorated]
    entries = [e for _k, e in decorated]
    meets = [None] * len(entries)
    m = None
    for i in range(len(entries) - 1, -1, -1):
        t = entries[i][0]
        m = t if m is None else meet(m, t)
        meets[i] = m
    return entries, keys, meets


__all__ = ["KeyHistory", "add_to"]
