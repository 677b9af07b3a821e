"""Diff semirings: ints are exact, DiffVector is a commutative ring, bad diffs are refused."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, strategies as st

from ddflow.diff import (INTEGERS, Diff, DiffVector, Semiring, check_diff, is_diff,
                         vectors)
from ddflow.errors import DataflowError, DiffError

ints = st.integers(-(2 ** 70), 2 ** 70)
vecs = st.lists(st.integers(-5, 5), min_size=3, max_size=3).map(lambda c: DiffVector(*c))


def test_semirings_satisfy_the_protocol():
    assert isinstance(INTEGERS, Semiring)
    assert isinstance(vectors(2), Semiring)


def test_integers_are_arbitrary_precision():
    # "Implementing Z-sets": 32-bit weights overflow; Python ints cannot.
    big = 2 ** 64
    assert INTEGERS.plus(big, big) == 2 ** 65
    assert INTEGERS.multiply(big, big) == 2 ** 128
    assert INTEGERS.negate(big) == -big
    assert INTEGERS.is_zero(INTEGERS.plus(big, INTEGERS.negate(big)))
    assert INTEGERS.zero() == 0 and INTEGERS.one() == 1


@pytest.mark.parametrize("bad", [True, False, 0.5, 1.0, "1", None, (1, 2), 1j])
def test_check_diff_rejects_non_diffs(bad):
    with pytest.raises(DiffError) as info:
        check_diff(bad, operator="map", record="r", time=3)
    assert isinstance(info.value, DataflowError)
    assert info.value.operator == "map" and info.value.record == "r" and info.value.time == 3
    assert not is_diff(bad)
    assert not INTEGERS.is_element(bad)


def test_check_diff_float_message_says_why():
    with pytest.raises(DiffError, match="not a group under rounding"):
        check_diff(0.1)


@pytest.mark.parametrize("good", [0, 1, -3, 2 ** 100, DiffVector(1, 2), DiffVector()])
def test_check_diff_accepts_diffs(good):
    assert check_diff(good) is good
    assert is_diff(good)


def test_registered_exact_type_is_a_diff():
    from fractions import Fraction

    class Exact(Fraction):
        pass

    Diff.register(Exact)
    assert check_diff(Exact(1, 3)) == Fraction(1, 3)


@given(vecs, vecs, vecs)
def test_vector_group_and_ring_laws(a, b, c):
    zero = vectors(3).zero()
    assert a + b == b + a
    assert (a + b) + c == a + (b + c)
    assert a + zero == a and a + 0 == a and 0 + a == a
    assert not (a + -a) and not (a - a)
    assert a - b == a + (-b)
    assert a * b == b * a
    assert a * (b + c) == a * b + a * c
    assert a * vectors(3).one() == a
    assert 2 * a == a + a == a * 2
    assert hash(a + zero) == hash(a)


@given(vecs)
def test_vector_zero_test_is_bool(a):
    assert bool(a) == any(a.components)
    assert vectors(3).is_zero(a) == (not a)


def test_vector_count_and_sum_in_one_pass():
    values = [3, 4, 4, 10]
    total = sum(DiffVector(1, v) for v in values)
    assert total == DiffVector(4, 21)
    # Retracting a record retracts both aggregates.
    total = total + -1 * DiffVector(1, 10)
    assert list(total) == [3, 11]


def test_vector_errors():
    with pytest.raises(DiffError, match="widths 2 and 3"):
        DiffVector(1, 2) * DiffVector(1, 2, 3)
    with pytest.raises(DiffError, match="only 0"):
        DiffVector(1, 2) + 1
    with pytest.raises(DiffError, match="components must be ints"):
        DiffVector(1, 0.5)
    with pytest.raises(DiffError):
        DiffVector(True)
    with pytest.raises(AttributeError):
        DiffVector(1).components = (2,)
    with pytest.raises(TypeError):
        DiffVector(1) + "x"


def test_vector_equality_and_pickling():
    v = DiffVector(1, -2)
    assert v == DiffVector(1, -2) and v != DiffVector(1, 2) and v != (1, -2)
    assert pickle.loads(pickle.dumps(v)) == v
    assert {v: 1}[DiffVector(1, -2)] == 1
    assert 0 - v == -v and v - 0 == v
