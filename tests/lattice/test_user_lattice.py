"""Bring your own lattice: a user type implementing the `lattice.Lattice` protocol is
a timestamp everywhere, with no registration.

Two user lattices are defined here, with plain frozen dataclasses (no attrs):

* `Divisors(n)`: positive integers ordered by divisibility, join = lcm, meet = gcd,
  minimum `Divisors(1)` (a distributive lattice, partially ordered);
* `Pentagon(name)`: the five-element lattice N5 (0 < a < b < 1, 0 < c < 1), the
  smallest lattice that is not distributive.  `Antichain` and `advance_by` assume
  only the lattice laws, so they must work on it too.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lattice
from lattice import (Antichain, MutableAntichain, Product, advance_by, join, less_equal,
                     less_than, meet, minimum, same_lattice, sort_key)
from lattice.errors import TimeError


@dataclass(frozen=True)
class Divisors:
    """A positive integer under divisibility."""

    n: int

    def _check(self, other: Any) -> None:
        if type(other) is not Divisors:
            raise TimeError(f"cannot compare times of different lattices: {self!r} "
                            f"and {other!r}")

    def less_equal(self, other: Any) -> bool:
        self._check(other)
        return other.n % self.n == 0

    def join(self, other: Any) -> Divisors:
        self._check(other)
        return Divisors(math.lcm(self.n, other.n))

    def meet(self, other: Any) -> Divisors:
        self._check(other)
        return Divisors(math.gcd(self.n, other.n))

    def minimum(self) -> Divisors:
        return Divisors(1)

    def sort_key(self) -> int:
        return self.n  # d | n implies d <= n: a linear extension


@dataclass(frozen=True)
class Pentagon:
    """An element of N5: 0 < a < b < 1 and 0 < c < 1, c incomparable with a and b."""

    name: str

    BELOW = {"0": {"0"}, "a": {"0", "a"}, "b": {"0", "a", "b"}, "c": {"0", "c"},
             "1": {"0", "a", "b", "c", "1"}}
    ORDER = "0acb1"  # a linear extension

    def less_equal(self, other: Any) -> bool:
        if type(other) is not Pentagon:
            raise TimeError(f"cannot compare times of different lattices: {self!r} "
                            f"and {other!r}")
        return self.name in self.BELOW[other.name]

    def join(self, other: Any) -> Pentagon:
        ups = [x for x in PENTAGON if self.less_equal(x) and other.less_equal(x)]
        return min(ups, key=sort_key)  # the upper bounds form a chain here

    def meet(self, other: Any) -> Pentagon:
        downs = [x for x in PENTAGON if x.less_equal(self) and x.less_equal(other)]
        return max(downs, key=sort_key)

    def minimum(self) -> Pentagon:
        return Pentagon("0")

    def sort_key(self) -> int:
        return self.ORDER.index(self.name)


PENTAGON = [Pentagon(x) for x in "0abc1"]
DIV360 = [Divisors(d) for d in range(1, 361) if 360 % d == 0]  # closed under lcm, gcd
divisors = st.sampled_from(DIV360)


# --- the protocol --------------------------------------------------------------------

def test_protocol_holds() -> None:
    for t in (Divisors(6), Pentagon("a"), Product(Divisors(2), 3)):
        assert isinstance(t, lattice.Lattice)
        assert lattice.is_time(t)
    assert not isinstance(6, lattice.Lattice) and lattice.is_time(6)
    assert not isinstance("6", lattice.Lattice) and not lattice.is_time("6")


def test_free_functions_known_answers() -> None:
    assert join(Divisors(4), Divisors(6)) == Divisors(12)
    assert meet(Divisors(4), Divisors(6)) == Divisors(2)
    assert less_equal(Divisors(3), Divisors(12)) and not less_equal(Divisors(4), Divisors(6))
    assert less_than(Divisors(3), Divisors(12)) and not less_than(Divisors(3), Divisors(3))
    assert minimum(Divisors(360)) == Divisors(1)
    assert sorted([Divisors(12), Divisors(1), Divisors(4)], key=sort_key) == \
        [Divisors(1), Divisors(4), Divisors(12)]
    assert same_lattice(Divisors(2), Divisors(3)) and not same_lattice(Divisors(2), 2)
    a, c = Pentagon("a"), Pentagon("c")
    assert join(a, c) == Pentagon("1") and meet(a, c) == Pentagon("0")
    # N5 is not distributive: b ^ (a v c) = b, but (b ^ a) v (b ^ c) = a.
    b = Pentagon("b")
    assert meet(b, join(a, c)) == b and join(meet(b, a), meet(b, c)) == a


def test_mixing_with_other_lattices_raises() -> None:
    for other in (6, Product(6, 6), Pentagon("a")):
        for op in (less_equal, join, meet):
            with pytest.raises(TimeError):
                op(Divisors(6), other)
            with pytest.raises(TimeError):
                op(other, Divisors(6))
    with pytest.raises(TimeError):
        less_equal(Product(Divisors(2), 0), Product(2, 0))
    with pytest.raises(TimeError):
        join(Product(0, Divisors(2)), Product(0, 2))


# --- the laws, exhaustively on both lattices and by hypothesis on Divisors -----------

@pytest.mark.parametrize("elements", [DIV360, PENTAGON], ids=["divisors", "pentagon"])
def test_laws_exhaustive(elements: list[Any]) -> None:
    for a, b in itertools.product(elements, repeat=2):
        j, m = join(a, b), meet(a, b)
        assert j in elements and m in elements
        assert less_equal(a, j) and less_equal(b, j)
        assert less_equal(m, a) and less_equal(m, b)
        assert j == join(b, a) and m == meet(b, a)
        assert join(a, meet(a, b)) == a and meet(a, join(a, b)) == a
        assert less_equal(a, b) == (j == b)
        if less_equal(a, b):
            assert sort_key(a) <= sort_key(b)
            if a != b:
                assert not less_equal(b, a) and sort_key(a) < sort_key(b)
        assert less_equal(minimum(a), a)
        for c in elements[::3] if len(elements) > 5 else elements:
            if less_equal(a, c) and less_equal(b, c):
                assert less_equal(j, c)
            if less_equal(c, a) and less_equal(c, b):
                assert less_equal(c, m)
            assert join(join(a, b), c) == join(a, join(b, c))
            assert meet(meet(a, b), c) == meet(a, meet(b, c))


@settings(max_examples=500)
@given(a=divisors, b=divisors, c=divisors)
def test_divisors_laws_hypothesis(a: Divisors, b: Divisors, c: Divisors) -> None:
    assert join(join(a, b), c) == join(a, join(b, c))
    assert meet(a, join(b, c)) == join(meet(a, b), meet(a, c))  # distributive
    if less_equal(a, c) and less_equal(b, c):
        assert less_equal(join(a, b), c)
    if less_equal(c, a) and less_equal(c, b):
        assert less_equal(c, meet(a, b))


# --- Antichain, MutableAntichain, advance_by -----------------------------------------

def test_antichain_of_user_times() -> None:
    f = Antichain([Divisors(4), Divisors(6), Divisors(12), Divisors(9), Divisors(8)])
    assert f.elements == (Divisors(4), Divisors(6), Divisors(9))
    assert f.less_equal(Divisors(36)) and not f.less_equal(Divisors(10))
    assert f == Antichain([Divisors(9), Divisors(6), Divisors(4)])
    assert f.insert(Divisors(2)) == Antichain([Divisors(2), Divisors(9)])
    g = Antichain([Divisors(5)])
    assert f.join(g) == Antichain([Divisors(20), Divisors(30), Divisors(45)])
    assert f.meet(g) == Antichain(list(f) + [Divisors(5)])
    assert Antichain([Divisors(1)]).dominates(f) and not f.dominates(Antichain([Divisors(1)]))
    assert Antichain(PENTAGON[1:4]) == Antichain([Pentagon("a"), Pentagon("c")])


@settings(max_examples=200)
@given(xs=st.lists(divisors, max_size=5), ys=st.lists(divisors, max_size=5))
def test_antichain_brute_force_divisors(xs: list[Divisors], ys: list[Divisors]) -> None:
    a, b = Antichain(xs), Antichain(ys)
    for s in DIV360:
        beyond_a = any(less_equal(x, s) for x in xs)
        beyond_b = any(less_equal(y, s) for y in ys)
        assert a.less_equal(s) == beyond_a
        assert a.join(b).less_equal(s) == (beyond_a and beyond_b)
        assert a.meet(b).less_equal(s) == (beyond_a or beyond_b)


def test_mutable_antichain_of_user_times() -> None:
    m = MutableAntichain()
    assert m.update_iter([(Divisors(6), 1), (Divisors(4), 1)]) == \
        [(Divisors(4), 1), (Divisors(6), 1)]
    assert m.update_iter([(Divisors(2), 1)]) == \
        [(Divisors(2), 1), (Divisors(4), -1), (Divisors(6), -1)]
    assert m.update_iter([(Divisors(12), 3)]) == []
    m._check()
    assert m.update_iter([(Divisors(2), -1)]) == \
        [(Divisors(2), -1), (Divisors(4), 1), (Divisors(6), 1)]
    with pytest.raises(TimeError):
        m.update_iter([(Divisors(12), -4)])
    m._check()
    assert m.frontier() == Antichain([Divisors(4), Divisors(6)])


def test_advance_by_known_answers() -> None:
    assert advance_by(Divisors(3), Antichain([Divisors(2)])) == Divisors(6)
    assert advance_by(Divisors(6), Antichain([Divisors(4), Divisors(9)])) == Divisors(6)
    assert advance_by(Divisors(5), Antichain([Divisors(4), Divisors(9)])) == Divisors(5)
    assert advance_by(Divisors(10), Antichain([Divisors(4), Divisors(6)])) == Divisors(10)
    assert advance_by(Divisors(3), Antichain([Divisors(4), Divisors(6)])) == Divisors(6)


@pytest.mark.parametrize("elements", [DIV360, PENTAGON], ids=["divisors", "pentagon"])
def test_advance_by_exhaustive(elements: list[Any]) -> None:
    """The compaction law and the greatest-element property, for every frontier of
    one or two elements and every t (the pentagon needs no distributivity)."""
    frontiers = [Antichain([e]) for e in elements]
    frontiers += [Antichain(p) for p in itertools.combinations(elements, 2)
                  if len(Antichain(p)) == 2]
    assert len(frontiers) > len(elements)
    for f in frontiers:
        beyond = [s for s in elements if f.less_equal(s)]
        for t in elements:
            a = advance_by(t, f)
            assert less_equal(t, a)
            for s in beyond:
                assert less_equal(t, s) == less_equal(a, s), (t, f, a, s)
            for u in elements:
                if all(less_equal(u, s) == less_equal(t, s) for s in beyond):
                    assert less_equal(u, a), (t, f, a, u)


# --- user times nested in Product ----------------------------------------------------

def test_product_of_user_lattice() -> None:
    x, y = Product(Divisors(4), 7), Product(Divisors(6), 3)
    assert join(x, y) == Product(Divisors(12), 7)
    assert meet(x, y) == Product(Divisors(2), 3)
    assert not less_equal(x, y) and less_equal(meet(x, y), x)
    assert minimum(x) == Product(Divisors(1), 0)
    assert same_lattice(x, y) and not same_lattice(x, Product(4, 7))
    assert sorted([x, y, meet(x, y)], key=sort_key) == [meet(x, y), x, y]
    f = Antichain([Product(Divisors(2), 5), Product(Divisors(3), 1), x])
    assert f.elements == (Product(Divisors(2), 5), Product(Divisors(3), 1))
    assert advance_by(Product(Divisors(1), 0), f) == Product(Divisors(1), 1)
    m = MutableAntichain([(x, 1), (y, 1)])
    assert m.frontier() == Antichain([x, y])
    m._check()
    with pytest.raises(TimeError):
        x < y  # noqa: B015


@settings(max_examples=300)
@given(t=st.tuples(divisors, st.integers(0, 4)),
       fs=st.lists(st.tuples(divisors, st.integers(0, 4)), min_size=1, max_size=3),
       ss=st.lists(st.tuples(divisors, st.integers(0, 4)), min_size=1, max_size=8))
def test_product_of_user_lattice_advance_by(t: tuple, fs: list, ss: list) -> None:
    t = Product(*t)
    f = Antichain(Product(*p) for p in fs)
    a = advance_by(t, f)
    assert less_equal(t, a) and advance_by(a, f) == a
    for s in ss:
        s = join(Product(*s), f.elements[len(ss) % len(f)])  # in advance of f
        assert f.less_equal(s)
        assert less_equal(t, s) == less_equal(a, s)
