"""`advance_by`, checked exhaustively on the 10 x 10 grid as differential dataflow's
`lattice.rs` does, then by hypothesis on the nested and `AltNeu` lattices.

The law (logical compaction): for every `s` in advance of frontier `F`,
`less_equal(t, s) == less_equal(advance_by(t, F), s)`.  And `advance_by(t, F)` is
the *greatest* time with that property: every `u` that compares with the times
beyond `F` as `t` does is `<= advance_by(t, F)` (`t` itself is such a `u`, so the
result is `>= t`).  It is in advance of `F` when `F` has one element, but not in
general: `advance_by(Product(3, 7), {Product(4, 8), Product(5, 3)}) == Product(4, 7)`.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lattice import (AltNeu, Antichain, Product, advance_by, join, less_equal,
                     less_than)
from ddflow.testing.times import antichains, times

N = 10
GRID = [Product(a, b) for a in range(N) for b in range(N)]
INDEX = {t: i for i, t in enumerate(GRID)}
# UP[i]: bit j set iff GRID[i] <= GRID[j], each bit computed by lattice.less_equal.
UP = [sum(1 << j for j, s in enumerate(GRID) if less_equal(t, s)) for t in GRID]


def grid_frontiers() -> list[Antichain]:
    """Every antichain of size 1 and 2 in the grid (100 + 2025), and a fixed sample
    of 400 of size 3."""
    ones = [Antichain([t]) for t in GRID]
    twos = [Antichain([a, b]) for a, b in itertools.combinations(GRID, 2)
            if not less_equal(a, b) and not less_equal(b, a)]
    rng = random.Random(20240611)
    threes: set[Antichain] = set()
    while len(threes) < 400:
        f = Antichain(rng.sample(GRID, 3))
        if len(f) == 3:
            threes.add(f)
    return ones + twos + sorted(threes, key=lambda f: [INDEX[t] for t in f])


FRONTIERS = grid_frontiers()


# --- known answers -------------------------------------------------------------------

def test_known_answers() -> None:
    f = Antichain([Product(4, 8), Product(5, 3)])
    assert advance_by(Product(3, 7), f) == Product(4, 7)
    # The result is not itself in advance of a two-element frontier ...
    assert not f.less_equal(Product(4, 7))
    # ... but is beyond a one-element one.
    assert advance_by(Product(3, 7), Antichain([Product(4, 8)])) == Product(4, 8)
    assert advance_by(Product(0, 0), Antichain([Product(0, 1), Product(1, 0)])) == \
        Product(0, 0)
    assert advance_by(Product(6, 9), f) == Product(6, 9)  # already beyond: unchanged
    assert advance_by(2, Antichain([5])) == 5 and advance_by(9, Antichain([5])) == 9
    assert advance_by(Product(3, 7), Antichain()) == Product(3, 7)
    assert advance_by(AltNeu(Product(0, 0), True), Antichain([AltNeu(Product(0, 0))])) == \
        AltNeu(Product(0, 0), True)
    assert advance_by(AltNeu(Product(0, 0), False),
                      Antichain([AltNeu(Product(0, 0), True)])) == AltNeu(Product(0, 0), True)


# --- exhaustive: the 10 x 10 grid ----------------------------------------------------

def test_frontier_sample_covers_sizes() -> None:
    sizes = [len(f) for f in FRONTIERS]
    assert sizes.count(1) == 100 and sizes.count(2) == 2025 and sizes.count(3) == 400


def test_advance_by_exhaustive_grid() -> None:
    """For every frontier, every t and every s beyond the frontier (all in the grid):
    t <= s iff advance_by(t, F) <= s.  Plus: the result is >= t, idempotent, beyond a
    one-element frontier, and the greatest time of t's class (times comparing alike
    with everything beyond F)."""
    beyond_checked = 0
    for f in FRONTIERS:
        beyond = 0  # bit set of the grid times in advance of f
        for e in f:
            beyond |= UP[INDEX[e]]
        classes: dict[int, list[int]] = {}
        for i in range(len(GRID)):
            classes.setdefault(UP[i] & beyond, []).append(i)
        for i, t in enumerate(GRID):
            a = advance_by(t, f)
            k = INDEX[a]  # the grid is closed under join and meet
            # The law: t and a compare alike with every s beyond f.
            assert UP[i] & beyond == UP[k] & beyond, (t, f, a)
            assert less_equal(t, a)
            assert advance_by(a, f) == a
            if len(f) == 1:
                assert f.less_equal(a) and a == join(t, f.elements[0])
            # The greatest of its class: every u alike with t is <= a.
            cls = classes[UP[i] & beyond]
            assert k in cls
            for j in cls:
                assert UP[j] >> k & 1, (t, f, a, GRID[j])
            beyond_checked += bin(beyond).count("1")
    assert beyond_checked > 1_000_000  # the law above was checked on that many (t, s)


def test_advance_by_exhaustive_grid_literal() -> None:
    """The law spelled out with `less_equal` calls, for one-element frontiers and
    every fifth two-element one (the bit sets above cover all of them faster)."""
    frontiers = FRONTIERS[:100] + FRONTIERS[100:2125:5]
    for f in frontiers:
        beyond = [s for s in GRID if f.less_equal(s)]
        assert beyond
        for t in GRID:
            a = advance_by(t, f)
            for s in beyond:
                assert less_equal(t, s) == less_equal(a, s), (t, f, a, s)


def test_advance_by_monotone_frontiers_compose() -> None:
    """Advancing by F1 and then by a later F2 equals advancing by F2 directly (how
    successive compactions of a trace compose)."""
    rng = random.Random(7)
    pairs = 0
    for _ in range(300):
        f1, f2 = rng.choice(FRONTIERS), rng.choice(FRONTIERS)
        if not f1.dominates(f2):
            f2 = f1.join(f2)  # every time of f1.join(f2) is beyond f1
        assert f1.dominates(f2)
        pairs += 1
        for t in GRID[::3]:
            assert advance_by(advance_by(t, f1), f2) == advance_by(t, f2)
    assert pairs == 300


def test_advance_by_collapses_history() -> None:
    """Compaction's purpose: the 100 grid times collapse onto few distinct ones."""
    f = Antichain([Product(5, 5)])
    assert len({advance_by(t, f) for t in GRID}) == 25
    f = Antichain([Product(4, 8), Product(5, 3)])
    assert len({advance_by(t, f) for t in GRID}) < 100


# --- hypothesis: nested products and AltNeu ------------------------------------------

def small_grid(kind: str) -> list[Any]:
    r = range(3)
    if kind == "int":
        return list(range(10))
    if kind == "product":
        return [Product(a, b) for a in r for b in r]
    if kind == "product3":
        return [Product(Product(a, b), c) for a in r for b in r for c in r]
    return [AltNeu(Product(a, b), n) for a in r for b in r for n in (False, True)]


@pytest.mark.parametrize("kind", ["int", "product", "product3", "altneu"])
@settings(max_examples=300)
@given(data=st.data())
def test_advance_by_law_hypothesis(kind: str, data: st.DataObject) -> None:
    m = 9 if kind == "int" else 2
    t = data.draw(times(kind, m), label="t")
    f = data.draw(antichains(kind, m, 3), label="frontier")
    a = advance_by(t, f)
    assert less_equal(t, a)
    assert advance_by(a, f) == a
    if f.is_empty():
        assert a == t
        return
    grid = small_grid(kind)  # every time of the lattice with components 0..m
    beyond = [s for s in grid if f.less_equal(s)]
    assert beyond  # the join of the frontier is beyond it
    for s in beyond:
        assert less_equal(t, s) == less_equal(a, s), (t, f, a, s)
    if len(f) == 1:
        assert f.less_equal(a)
    # Greatest: every u comparing alike with everything beyond f is <= a.
    for u in grid:
        if all(less_equal(u, s) == less_equal(t, s) for s in beyond):
            assert less_equal(u, a), (t, f, a, u)
    # And the bound is tight: anything strictly above a is told apart from t.
    for u in grid:
        if less_than(a, u):
            assert any(less_equal(u, s) != less_equal(t, s) for s in beyond)
