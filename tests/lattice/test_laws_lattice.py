"""Lattice laws for every time kind ddflow ships, and the errors of misuse.

Three layers, from the cheapest oracle to the strongest:

* known answers (the examples of differential dataflow's `lattice.rs` and of the
  dogsdogsdogs `AltNeu` type);
* hypothesis, 500 examples per law per kind (`ddflow.testing.times.TIME_KINDS`);
* the same laws checked exhaustively on a small grid of each kind,
  where every premise (`a <= c and b <= c`, ...) is met by many triples.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lattice
from lattice import (AltNeu, Antichain, Product, join, less_equal, less_than, meet,
                     minimum, same_lattice, sort_key)
from lattice.errors import DataflowError, TimeError
from ddflow.testing.times import TIME_KINDS, minimum_of, times
from ddflow.testing.times import grid as all_times

LAW = settings(max_examples=500)
kinds = pytest.mark.parametrize("kind", TIME_KINDS)


def draw3(data: st.DataObject, kind: str) -> tuple[Any, Any, Any]:
    t = times(kind)
    return data.draw(t, label="a"), data.draw(t, label="b"), data.draw(t, label="c")



# Grid sizes for the exhaustive checks: 6, 16, 27 and 18 times.
GRID_MAX = {"int": 5, "product": 3, "product3": 2, "altneu": 2}


# --- known answers -------------------------------------------------------------------

def test_product_known_answers() -> None:
    a, b = Product(3, 7), Product(4, 6)
    assert join(a, b) == Product(4, 7)
    assert meet(a, b) == Product(3, 6)
    assert not less_equal(a, b) and not less_equal(b, a)
    assert less_equal(Product(3, 6), a) and less_equal(a, Product(4, 7))
    assert less_than(Product(3, 6), a) and not less_than(a, a)
    nested = join(Product(Product(0, 1), 2), Product(Product(1, 0), 0))
    assert nested == Product(Product(1, 1), 2)
    assert meet(Product(Product(0, 1), 2), Product(Product(1, 0), 0)) == \
        Product(Product(0, 0), 0)
    assert minimum(Product(Product(5, 6), 7)) == Product(Product(0, 0), 0)


@pytest.mark.parametrize("t", [5, Product(2, 3)])
def test_altneu_same_time_known_answers(t: Any) -> None:
    alt, neu = AltNeu(t, False), AltNeu(t, True)
    assert less_than(alt, neu) and not less_equal(neu, alt)
    assert join(neu, alt) == join(alt, neu) == neu
    assert meet(neu, alt) == meet(alt, neu) == alt


def test_altneu_incomparable_times_known_answers() -> None:
    # The joined time is above both operands strictly, so its flag is alt (False):
    # AltNeu(Product(1, 1), False) is already an upper bound, and below the neu one.
    x, y = AltNeu(Product(1, 0), True), AltNeu(Product(0, 1), True)
    assert join(x, y) == AltNeu(Product(1, 1), False)
    assert less_than(join(x, y), AltNeu(Product(1, 1), True))
    # Dually the met time is strictly below both, so its flag is neu (True).
    x, y = AltNeu(Product(1, 0), False), AltNeu(Product(0, 1), False)
    assert meet(x, y) == AltNeu(Product(0, 0), True)
    assert less_than(AltNeu(Product(0, 0), False), meet(x, y))
    # Flags of incomparable operands never matter.
    for n1, n2 in itertools.product((False, True), repeat=2):
        assert join(AltNeu(Product(1, 0), n1), AltNeu(Product(0, 1), n2)) == \
            AltNeu(Product(1, 1), False)
        assert meet(AltNeu(Product(1, 0), n1), AltNeu(Product(0, 1), n2)) == \
            AltNeu(Product(0, 0), True)


def test_altneu_order_known_answers() -> None:
    # A strictly smaller time wins whatever the flags: the order is lexicographic.
    lo, hi = AltNeu(Product(0, 0), True), AltNeu(Product(0, 1), False)
    assert less_than(lo, hi) and not less_equal(hi, lo)
    assert join(lo, hi) == hi and meet(lo, hi) == lo
    # Comparable times: the larger operand is the join, its flag kept.
    assert join(AltNeu(Product(1, 0), True), AltNeu(Product(1, 1), False)) == \
        AltNeu(Product(1, 1), False)
    assert meet(AltNeu(Product(1, 1), False), AltNeu(Product(0, 0), True)) == \
        AltNeu(Product(0, 0), True)
    # Incomparable times stay incomparable whatever the flags.
    assert not less_equal(AltNeu(Product(1, 0), False), AltNeu(Product(0, 1), True))
    assert not less_equal(AltNeu(Product(0, 1), False), AltNeu(Product(1, 0), True))
    assert minimum(AltNeu(Product(3, 4), True)) == AltNeu(Product(0, 0), False)


def test_int_is_a_total_order_lattice() -> None:
    assert join(3, 5) == 5 and meet(3, 5) == 3 and minimum(9) == 0 == minimum(int)
    assert less_equal(3, 3) and less_than(3, 4) and not less_than(4, 4)
    assert lattice.is_time(3) and lattice.is_time(Product(0, 0))
    assert lattice.is_time(AltNeu(0)) and not lattice.is_time("3")


# --- hypothesis: the laws, 500 examples per kind -------------------------------------

@kinds
@LAW
@given(data=st.data())
def test_less_equal_reflexive(kind: str, data: st.DataObject) -> None:
    a = data.draw(times(kind))
    assert less_equal(a, a)
    assert not less_than(a, a)


@kinds
@LAW
@given(data=st.data())
def test_less_equal_antisymmetric(kind: str, data: st.DataObject) -> None:
    a, b, _ = draw3(data, kind)
    if less_equal(a, b) and less_equal(b, a):
        assert a == b
    else:
        assert a != b


@kinds
@LAW
@given(data=st.data())
def test_less_equal_transitive(kind: str, data: st.DataObject) -> None:
    a, b, c = draw3(data, kind)
    if less_equal(a, b) and less_equal(b, c):
        assert less_equal(a, c)


@kinds
@LAW
@given(data=st.data())
def test_join_is_least_upper_bound(kind: str, data: st.DataObject) -> None:
    a, b, c = draw3(data, kind)
    j = join(a, b)
    assert same_lattice(j, a)
    assert less_equal(a, j) and less_equal(b, j)
    if less_equal(a, c) and less_equal(b, c):
        assert less_equal(j, c)
    # An upper bound built from c is always above the join.
    assert less_equal(j, join(join(a, c), join(b, c)))


@kinds
@LAW
@given(data=st.data())
def test_meet_is_greatest_lower_bound(kind: str, data: st.DataObject) -> None:
    a, b, c = draw3(data, kind)
    m = meet(a, b)
    assert same_lattice(m, a)
    assert less_equal(m, a) and less_equal(m, b)
    if less_equal(c, a) and less_equal(c, b):
        assert less_equal(c, m)
    assert less_equal(meet(meet(a, c), meet(b, c)), m)


@kinds
@LAW
@given(data=st.data())
def test_join_meet_commutative(kind: str, data: st.DataObject) -> None:
    a, b, _ = draw3(data, kind)
    assert join(a, b) == join(b, a)
    assert meet(a, b) == meet(b, a)


@kinds
@LAW
@given(data=st.data())
def test_join_meet_associative(kind: str, data: st.DataObject) -> None:
    a, b, c = draw3(data, kind)
    assert join(join(a, b), c) == join(a, join(b, c))
    assert meet(meet(a, b), c) == meet(a, meet(b, c))


@kinds
@LAW
@given(data=st.data())
def test_join_meet_idempotent(kind: str, data: st.DataObject) -> None:
    a = data.draw(times(kind))
    assert join(a, a) == a
    assert meet(a, a) == a


@kinds
@LAW
@given(data=st.data())
def test_absorption(kind: str, data: st.DataObject) -> None:
    a, b, _ = draw3(data, kind)
    assert join(a, meet(a, b)) == a
    assert meet(a, join(a, b)) == a


@kinds
@LAW
@given(data=st.data())
def test_order_agrees_with_join_and_meet(kind: str, data: st.DataObject) -> None:
    a, b, _ = draw3(data, kind)
    assert less_equal(a, b) == (join(a, b) == b) == (meet(a, b) == a)


@kinds
@LAW
@given(data=st.data())
def test_less_than_is_less_equal_and_not_equal(kind: str, data: st.DataObject) -> None:
    a, b, _ = draw3(data, kind)
    assert less_than(a, b) == (less_equal(a, b) and a != b)
    if kind != "int":  # the methods agree with the free function
        assert a.less_than(b) == less_than(a, b)
        assert a.less_equal(b) == less_equal(a, b)


@kinds
@LAW
@given(data=st.data())
def test_sort_key_is_a_linear_extension(kind: str, data: st.DataObject) -> None:
    a, b, _ = draw3(data, kind)
    ka, kb = sort_key(a), sort_key(b)
    if less_equal(a, b):
        assert ka <= kb
    if less_than(a, b):
        assert ka < kb
    # Total and injective: distinct times get distinct, comparable keys.
    assert (ka == kb) == (a == b)
    assert (ka < kb) or (kb < ka) or (a == b)


@kinds
@LAW
@given(data=st.data())
def test_minimum_is_least(kind: str, data: st.DataObject) -> None:
    a = data.draw(times(kind))
    assert less_equal(minimum(a), a)
    assert minimum(a) == minimum_of(kind)
    assert join(minimum(a), a) == a and meet(minimum(a), a) == minimum(a)


@kinds
@LAW
@given(data=st.data())
def test_equal_times_hash_equal(kind: str, data: st.DataObject) -> None:
    a, b, _ = draw3(data, kind)
    if a == b:
        assert hash(a) == hash(b)
    # A join rebuilt from parts is a new object equal to the drawn one.
    j = join(a, meet(a, b))
    assert j == a and hash(j) == hash(a)


# --- the same laws, exhaustively on small grids --------------------------------------

@kinds
def test_laws_exhaustive_on_grid(kind: str) -> None:
    grid = all_times(kind, GRID_MAX[kind])
    n = len(grid)
    index = {t: i for i, t in enumerate(grid)}
    assert len(index) == n
    le = [[less_equal(a, b) for b in grid] for a in grid]
    J = [[index[join(a, b)] for b in grid] for a in grid]  # closed under join
    M = [[index[meet(a, b)] for b in grid] for a in grid]  # and meet
    keys = [sort_key(t) for t in grid]
    assert len(set(keys)) == n
    for i in range(n):
        assert le[i][i] and J[i][i] == i and M[i][i] == i
        assert le[index[minimum(grid[i])]][i]
        for j in range(n):
            if le[i][j] and le[j][i]:
                assert i == j
            assert less_than(grid[i], grid[j]) == (le[i][j] and i != j)
            if le[i][j]:
                assert keys[i] <= keys[j]
            assert J[i][j] == J[j][i] and M[i][j] == M[j][i]
            assert J[i][M[i][j]] == i and M[i][J[i][j]] == i
            assert le[i][J[i][j]] and le[j][J[i][j]]
            assert le[M[i][j]][i] and le[M[i][j]][j]
    premises = 0
    for i, j, k in itertools.product(range(n), repeat=3):
        if le[i][j] and le[j][k]:
            assert le[i][k]
        if le[i][k] and le[j][k]:
            premises += 1
            assert le[J[i][j]][k], (grid[i], grid[j], grid[k])
        if le[k][i] and le[k][j]:
            assert le[k][M[i][j]], (grid[i], grid[j], grid[k])
        assert J[J[i][j]][k] == J[i][J[j][k]]
        assert M[M[i][j]][k] == M[i][M[j][k]]
    # Not vacuous: many triples have a common upper bound below the top.
    assert premises > n * n


@kinds
def test_grid_has_incomparable_pairs(kind: str) -> None:
    """The order really is partial for every kind but int (so the laws above test
    joins that are neither operand)."""
    grid = all_times(kind, GRID_MAX[kind])
    incomparable = [(a, b) for a in grid for b in grid
                    if not less_equal(a, b) and not less_equal(b, a)]
    if kind == "int":
        assert not incomparable
    else:
        assert incomparable
        assert any(join(a, b) not in (a, b) for a, b in incomparable)


# --- errors --------------------------------------------------------------------------

def test_time_error_is_a_dataflow_error() -> None:
    assert issubclass(TimeError, DataflowError)
    assert lattice.TimeError is TimeError and lattice.DataflowError is DataflowError


MISMATCHED = [
    (3, Product(3, 3)),
    (Product(3, 3), AltNeu(Product(3, 3), True)),
    (AltNeu(3, True), AltNeu(Product(3, 3), True)),
    (Product(Product(0, 0), 0), Product(0, 0)),
    (Product(0, Product(0, 0)), Product(0, 0)),
    # The outer components alone say "not <=": the inner ones must still be checked.
    (Product(5, 0), Product(0, Product(0, 0))),
    (Product(Product(5, 5), 0), Product(Product(0, Product(0, 0)), 0)),
    (AltNeu(Product(5, 0)), AltNeu(Product(0, Product(0, 0)))),
]


@pytest.mark.parametrize("a, b", MISMATCHED)
@pytest.mark.parametrize("op", [less_equal, less_than, join, meet])
def test_mixing_lattices_raises_time_error(op: Any, a: Any, b: Any) -> None:
    with pytest.raises(TimeError, match="different lattices"):
        op(a, b)
    with pytest.raises(TimeError, match="different lattices"):
        op(b, a)
    assert not same_lattice(a, b) and not same_lattice(b, a)


def test_not_a_time_raises_time_error() -> None:
    with pytest.raises(TimeError, match="not a time"):
        less_equal("a", "b")
    for bad in (1.5, True, None, (1, 2), frozenset()):
        for op in (less_equal, join, meet):
            with pytest.raises(TimeError, match="not a time"):
                op(bad, bad)
        with pytest.raises(TimeError, match="not a time"):
            sort_key(bad)
        with pytest.raises(TimeError, match="not a time"):
            minimum(bad)
        with pytest.raises(TimeError):
            less_equal(Product(bad, 0), Product(bad, 0))
    with pytest.raises(TimeError):
        less_equal(3, True)
    with pytest.raises(TimeError, match="instance"):
        minimum(Product)


PARTIAL = [(Product(1, 0), Product(0, 1)), (Product(0, 0), Product(1, 1)),
           (AltNeu(Product(0, 0), False), AltNeu(Product(0, 0), True))]


@pytest.mark.parametrize("a, b", PARTIAL)
def test_python_comparison_operators_raise(a: Any, b: Any) -> None:
    for x, y in ((a, b), (b, a), (a, a)):
        with pytest.raises(TimeError, match="sort_key"):
            x < y  # noqa: B015
        with pytest.raises(TimeError):
            x <= y  # noqa: B015
        with pytest.raises(TimeError):
            x > y  # noqa: B015
        with pytest.raises(TimeError):
            x >= y  # noqa: B015
    with pytest.raises(TimeError):
        a < 3  # noqa: B015
    with pytest.raises(TimeError):
        3 < a  # noqa: B015  (int defers to the reflected Product/AltNeu operator)
    # Equality is not an order: it works, across lattices too.
    assert a == a and a != b and a != 3 and Product(0, 0) != AltNeu(Product(0, 0))


@pytest.mark.parametrize("kind", ["product", "product3", "altneu"])
def test_sorting_without_sort_key_raises(kind: str) -> None:
    grid = all_times(kind, 1)
    with pytest.raises(TimeError):
        sorted(grid)
    with pytest.raises(TimeError):
        max(grid)
    with pytest.raises(TimeError):
        min(grid)
    ordered = sorted(reversed(grid), key=sort_key)
    for i, a in enumerate(ordered):
        for b in ordered[:i]:  # nothing earlier is above a later time
            assert not less_than(a, b)


def test_antichain_of_mixed_lattices_raises() -> None:
    for a, b in MISMATCHED[:4]:
        with pytest.raises(TimeError):
            Antichain([a, b])
        with pytest.raises(TimeError):
            Antichain([a]).insert(b)
        with pytest.raises(TimeError):
            Antichain([a]).less_equal(b)


def test_nested_product_fast_paths_match_the_componentwise_definition() -> None:
    """`Product(Product(a, b), c)` (the time of a loop in a loop) is compared, joined,
    met and keyed inline; on a whole 3 x 3 x 3 grid, squared, each answer is the
    component-wise one, and a nested time of another shape still raises."""
    grid = [Product(Product(a, b), c) for a in range(3) for b in range(3) for c in range(3)]
    for x in grid:
        (a, b), c = x
        for y in grid:
            (d, e), f = y
            assert less_equal(x, y) == (a <= d and b <= e and c <= f)
            assert join(x, y) == Product(Product(max(a, d), max(b, e)), max(c, f))
            assert meet(x, y) == Product(Product(min(a, d), min(b, e)), min(c, f))
            assert type(join(x, y).outer) is Product and type(meet(x, y).outer) is Product
            if less_equal(x, y):
                assert sort_key(x) <= sort_key(y)
        assert sort_key(x) == ((a, b), c)
    odd = Product(Product(0, Product(0, 0)), 0)
    for f in (less_equal, join, meet):
        with pytest.raises(TimeError):
            f(grid[0], odd)
