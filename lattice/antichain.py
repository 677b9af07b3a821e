"""Frontiers: `Antichain` (immutable, minimal elements only) and `MutableAntichain`.

A frontier describes which times may still happen: a time `t` is *in advance of*
frontier `F` when some element of `F` is `<= t` (`F.less_equal(t)`).  Times not in
advance of the frontier are complete: no update at them can arrive any more.  The
empty antichain is the frontier of a finished stream: nothing is in advance of it.

`MutableAntichain` keeps counts per time (how many capabilities or in-flight
messages sit at each time) and exposes the frontier of the times with a positive
count; it is the progress-tracking structure of the engines.

>>> from lattice import Product
>>> f = Antichain([Product(4, 8), Product(5, 3), Product(6, 9)])
>>> f
Antichain([Product(4, 8), Product(5, 3)])
>>> f.less_equal(Product(5, 8)), f.less_equal(Product(4, 4))
(True, False)
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import attrs
from sortedcontainers import SortedKeyList

from lattice.order import Product, join, less_equal, sort_key
from lattice.errors import TimeError


def _minimal(times: Iterable[Any]) -> tuple:
    """Minimal elements of `times`, sorted by `sort_key` (a canonical form)."""
    distinct = set(times)
    if not distinct:
        return ()
    if len(distinct) == 1:
        (t,) = distinct
        if type(t) is int or type(t) is Product:
            return (t,)     # one time is its own antichain (others are checked below)
    try:
        ordered = sorted(distinct, key=sort_key)
    except TypeError as e:
        # Keys of different lattices (an int and a tuple, say) do not compare.
        raise TimeError(f"an antichain's times must belong to one lattice: {e}") from e
    kept: list = []
    # In sort_key order, nothing later can be <= something earlier unless equal,
    # so each candidate only needs checking against the kept ones.
    for t in ordered:
        if not any(less_equal(k, t) for k in kept):
            kept.append(t)
    return tuple(kept)


def in_advance(elements: tuple, t: Any) -> bool:
    """Whether some of `elements` is `<= t`, with the common times (ints, and products
    of ints) compared inline: frontiers are asked this more than anything else.

    >>> in_advance((Product(0, 3), Product(2, 1)), Product(2, 2)), in_advance((), 5)
    (True, False)
    """
    tt = type(t)
    if tt is Product:
        t0, t1 = t
        if type(t0) is int and type(t1) is int:
            # The time of every loop: its type looked at once, not per element.
            for e in elements:
                if type(e) is Product:
                    e0, e1 = e
                    if type(e0) is int and type(e1) is int:
                        if e0 <= t0 and e1 <= t1:
                            return True
                        continue
                if less_equal(e, t):        # (a mismatch raises)
                    return True
            return False
    elif tt is int:
        for e in elements:
            if type(e) is not int:
                return less_equal(e, t)     # the mismatch raises
            if e <= t:
                return True
        return False
    for e in elements:
        if less_equal(e, t):
            return True
    return False


@attrs.frozen(slots=True, repr=False)
class Antichain:
    """An immutable set of mutually incomparable times (a frontier)."""

    elements: tuple = attrs.field(default=(), converter=_minimal)

    # Written out rather than generated: frontiers are compared at every operator
    # visit, and attrs' `__ne__` goes through its `__eq__` (two calls, two tuples).
    def __eq__(self, other: object) -> bool:
        if type(other) is Antichain:
            return self.elements == other.elements      # (canonical: sorted, minimal)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        if type(other) is Antichain:
            return self.elements != other.elements
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.elements)

    @classmethod
    def trusted(cls, elements: tuple) -> Antichain:
        """An antichain from elements already minimal and in `sort_key` order (for
        images under an order-embedding, like entering a scope or adding a round)."""
        a = object.__new__(cls)
        object.__setattr__(a, "elements", elements)
        return a

    @classmethod
    def of(cls, *times: Any) -> Antichain:
        """`Antichain.of(t1, t2)` is `Antichain([t1, t2])`."""
        return cls(times)

    def insert(self, t: Any) -> Antichain:
        """The antichain with `t` added (and the elements it dominates dropped).

        >>> Antichain.of(3).insert(1)
        Antichain([1])
        """
        if any(less_equal(e, t) for e in self.elements):
            return self
        return Antichain(self.elements + (t,))

    def less_equal(self, t: Any) -> bool:
        """Some element is `<= t`: `t` is in advance of this frontier."""
        return in_advance(self.elements, t)

    def less_than(self, t: Any) -> bool:
        """Some element is strictly `< t`."""
        for e in self.elements:
            if e != t and less_equal(e, t):
                return True
        return False

    def dominates(self, other: Antichain) -> bool:
        """Every element of `other` is in advance of `self` (`self <= other` as frontiers).

        >>> Antichain.of(1).dominates(Antichain.of(2)), Antichain.of(2).dominates(Antichain.of(1))
        (True, False)
        """
        elements = self.elements
        for t in other.elements:
            if not in_advance(elements, t):
                return False
        return True

    def join(self, other: Antichain) -> Antichain:
        """The frontier whose advanced times are those in advance of both.

        >>> from lattice import Product
        >>> Antichain.of(Product(1, 0)).join(Antichain.of(Product(0, 1)))
        Antichain([Product(1, 1)])
        """
        return Antichain(join(a, b) for a in self.elements for b in other.elements)

    def meet(self, other: Antichain) -> Antichain:
        """The frontier whose advanced times are those in advance of either."""
        if self.dominates(other):
            return self
        if other.dominates(self):
            return other
        return Antichain(self.elements + other.elements)

    def is_empty(self) -> bool:
        """No elements: every time is complete (a closed input's frontier)."""
        return not self.elements

    def __iter__(self) -> Iterator[Any]:
        return iter(self.elements)

    def __len__(self) -> int:
        return len(self.elements)

    def __contains__(self, t: Any) -> bool:
        return t in self.elements

    def __repr__(self) -> str:
        return f"Antichain({list(self.elements)!r})"


class MutableAntichain:
    """Counts per time, with the frontier of the times whose count is positive.

    >>> m = MutableAntichain()
    >>> m.update_iter([(2, 1), (5, 1)])
    [(2, 1)]
    >>> m.update_iter([(2, -1)])
    [(2, -1), (5, 1)]
    >>> m.frontier()
    Antichain([5])
    """

    __slots__ = ("_counts", "_frontier", "_order")

    def __init__(self, updates: Iterable[tuple[Any, int]] = ()) -> None:
        self._counts: dict[Any, int] = {}
        # The live times in a linear extension of the order: the frontier is then
        # one scan keeping each time no earlier kept time is <= (no sort per update).
        self._order = SortedKeyList(key=sort_key)
        self._frontier: Antichain = Antichain()
        self.update_iter(updates)

    def update_iter(self, updates: Iterable[tuple[Any, int]]) -> list[tuple[Any, int]]:
        """Apply `(time, delta)` count changes; return the frontier's changes.

        A count may not go below zero: that would mean releasing a capability that
        was never held, and it raises `TimeError`.  The updates apply all or nothing:
        after a `TimeError` the counts are those from before the call.
        """
        counts = self._counts
        pending: dict[Any, int] = {}
        for t, delta in updates:
            if not delta:
                continue
            n = pending.get(t, counts.get(t, 0)) + delta
            if n < 0:
                raise TimeError(f"count of time {t!r} would become negative ({n})",
                                time=t)
            pending[t] = n
        if not pending:
            return []
        old = self._frontier
        stale = False
        for t, n in pending.items():
            had = t in counts
            if n:
                counts[t] = n
                if not had:
                    self._order.add(t)
                    # A new time changes the frontier only if nothing in it is <= t.
                    stale = stale or not old.less_equal(t)
            elif had:
                del counts[t]
                self._order.remove(t)
                stale = stale or t in old.elements
        if not stale:
            return []
        kept: list = []
        for t in self._order:
            if not any(less_equal(k, t) for k in kept):
                kept.append(t)
        self._frontier = Antichain(kept)
        if old == self._frontier:
            return []
        out = [(t, -1) for t in old.elements if t not in self._frontier.elements]
        out += [(t, 1) for t in self._frontier.elements if t not in old.elements]
        return sorted(out, key=lambda td: (sort_key(td[0]), td[1]))

    def frontier(self) -> Antichain:
        return self._frontier

    def less_equal(self, t: Any) -> bool:
        return self._frontier.less_equal(t)

    def count(self, t: Any) -> int:
        return self._counts.get(t, 0)

    def is_empty(self) -> bool:
        return not self._counts

    def __repr__(self) -> str:
        return f"MutableAntichain({dict(self._counts)!r})"

    def _check(self) -> None:
        """Invariants: counts positive; the ordered index holds exactly the live times,
        in `sort_key` order; the cached frontier is the counts' frontier."""
        assert all(n > 0 for n in self._counts.values()), self._counts
        self._order._check()
        assert list(self._order) == sorted(self._counts, key=sort_key), self._order
        assert self._frontier == Antichain(self._counts), (self._frontier, self._counts)
