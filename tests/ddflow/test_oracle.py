"""The oracle itself: it accepts correct outputs, rejects wrong ones, and checks the
join-closure (where a partially ordered reduce can change without any input change)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from ddflow.errors import DataError, DataflowError, GraphError
from ddflow.testing import (accumulate_all, check_law, evaluate, join_closure, keyed_updates,
                            times, updates)
from ddflow.updates import accumulate, zset
from lattice import Product, join, less_equal

# Every test here runs with batches in rows and in columns (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("both_layouts")


def double(c):
    return zset((2 * d, w) for d, w in c.items())


@given(updates("product"))
def test_oracle_accepts_a_correct_map(u):
    out = [(2 * d, t, w) for d, t, w in u]
    check_law(out, [u], double)


@given(updates("product", min_size=1))
def test_oracle_rejects_a_wrong_map(u):
    out = [(2 * d + 1, t, w) for d, t, w in u]
    if not any(accumulate(u, t) for _, t, _ in u):
        return   # everything cancels: a wrong map of nothing is still nothing
    with pytest.raises(AssertionError, match="accumulation law fails at time"):
        check_law(out, [u], double)


def test_oracle_rejects_output_at_the_wrong_time_and_names_it():
    u = [("a", Product(0, 1), 1)]
    late = [("a", Product(1, 1), 1)]
    with pytest.raises(AssertionError) as info:
        check_law(late, [u], lambda c: c)
    msg = str(info.value)
    assert "Product(0, 1)" in msg and "'a': expected 1, got 0" in msg


def test_oracle_catches_a_reduce_that_only_emits_at_input_times():
    # Two inputs at incomparable times; the count of 'k' is 2 only at their join,
    # a time at which no input changed.
    u = [(("k", 1), Product(0, 1), 1), (("k", 2), Product(1, 0), 1)]

    def count(c):
        return zset(((k, n), 1) for k, n in zset((k, w) for (k, _), w in c.items()).items())

    right = [(("k", 1), Product(0, 1), 1), (("k", 1), Product(1, 0), 1),
             (("k", 1), Product(1, 1), -2), (("k", 2), Product(1, 1), 1)]
    check_law(right, [u], count)
    wrong = [(("k", 1), Product(0, 1), 1), (("k", 1), Product(1, 0), 1)]
    with pytest.raises(AssertionError, match=r"Product\(1, 1\)"):
        check_law(wrong, [u], count)


def test_oracle_binary():
    a, b = [("x", 0, 1)], [("x", 2, 1)]

    def union_all(p, q):
        return {d: p.get(d, 0) + q.get(d, 0) for d in set(p) | set(q)}

    check_law([("x", 0, 1), ("x", 2, 1)], [a, b], union_all)
    with pytest.raises(AssertionError, match="time 2"):
        check_law([("x", 0, 1)], [a, b], union_all)


def test_oracle_checks_extra_times():
    # A function with output on the empty input: only a time before every input
    # time (here the extra time 0) shows that the output misses it there.
    inp, out = [("x", 1, 1)], [("x", 1, 1), ("z", 1, 1)]

    def plus_z(c):
        return {**c, "z": 1}

    check_law(out, [inp], plus_z)
    with pytest.raises(AssertionError, match="time 0"):
        check_law(out, [inp], plus_z, extra_times=[0])


def test_oracle_with_no_times():
    check_law([], [[]], lambda c: c)
    check_law([], [], lambda: {})


def test_join_closure_of_three_incomparable_product3_times():
    ts = [Product(Product(1, 0), 0), Product(Product(0, 1), 0), Product(Product(0, 0), 1)]
    closure = join_closure(ts)
    triple = join(join(ts[0], ts[1]), ts[2])
    assert triple == Product(Product(1, 1), 1)
    assert triple in closure
    assert len(closure) == 7   # 3 singletons, 3 pairs, 1 triple


@given(st.lists(st.builds(Product, st.integers(0, 3), st.integers(0, 3)), max_size=6))
def test_join_closure_is_closed_and_minimal(ts):
    closure = join_closure(ts)
    assert set(ts) <= closure
    for a in closure:
        for b in closure:
            assert join(a, b) in closure
        # Every element is a join of input times it is above.
        below = [t for t in ts if less_equal(t, a)]
        top = below[0]
        for t in below[1:]:
            top = join(top, t)
        assert top == a


def test_accumulate_all():
    u = [("a", Product(0, 0), 1), ("a", Product(1, 1), -1)]
    assert accumulate_all(u, [Product(0, 5), Product(1, 1)]) == \
        {Product(0, 5): {"a": 1}, Product(1, 1): {}}


@settings(max_examples=200)
@given(ts=st.lists(times("product3", 2), max_size=6))
def test_oracle_closure_agrees_with_lattice_closure(ts):
    """The oracle's join-closure and the one reduce uses are written apart; they agree."""
    import lattice
    assert join_closure(ts) == lattice.join_closure(ts)


# -- misuse of ddflow.testing, and its independence (issue 24) -------------------------

def test_the_oracle_shares_no_code_with_the_library():
    import ddflow.testing.harness as harness
    import ddflow.testing.oracle as oracle
    import ddflow.updates
    import lattice
    for module in (oracle, harness):
        borrowed = [name for name, value in vars(module).items()
                    if value is ddflow.updates
                    or getattr(value, "__module__", None) == "ddflow.updates"
                    or value is lattice.join_closure]
        assert not borrowed, (module.__name__, borrowed)
    assert harness.accumulate is oracle.accumulate is not accumulate
    assert harness.join_closure is oracle.join_closure


@given(u=updates("product"), t=times("product"))
def test_the_oracles_accumulate_agrees_with_the_library(u, t):
    from ddflow.testing.oracle import accumulate as own
    assert own(u, t) == accumulate(u, t)


@pytest.mark.parametrize("call, error, says", [
    (lambda: check_law([], [[]], lambda a, b: {}), GraphError,
     "check_law's f takes one dict per input: it is called with 1"),
    (lambda: check_law([], [[], []], lambda a: {}), GraphError, "called with 2"),
    (lambda: check_law([], [[]], "upper"), GraphError, "must be a function"),
    (lambda: check_law([("a", 0)], [[]], lambda a: {}), DataError,
     "output: updates are (data, time, diff) triples, got ('a', 0)"),
    (lambda: check_law([], [[("a", 0, 1, 5)]], lambda a: {}), DataError, "input 0"),
    (lambda: check_law([], 5, lambda: {}), DataError, "inputs must be a list"),
    (lambda: evaluate(lambda a, b: a.concat(b), [[(1, 0, 1)]]), GraphError,
     "evaluate's build takes one collection per input list (1 given)"),
    (lambda: evaluate(lambda a: a, [[(1, 0)]]), DataError,
     "evaluate input 0: updates are (data, time, diff) triples, got (1, 0)"),
    (lambda: evaluate(lambda a: a, [(1, 0, 1)]), DataError, "evaluate input 0: updates are"),
    (lambda: evaluate(lambda a: a, [[(1, 0, 1)]], schedule="random"), GraphError,
     "unknown schedule 'random'"),
    (lambda: updates("product", nonnegative=1), GraphError, "nonnegative must be True"),
    (lambda: times("lexicographic"), GraphError, "unknown time kind"),
])
def test_misuse_of_the_testing_tools_is_a_typed_error(call, error, says):
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, DataflowError)
    assert says in str(info.value), str(info.value)


@settings(max_examples=200)
@given(u=updates("product", nonnegative=True), kv=keyed_updates("int", nonnegative=True))
def test_nonnegative_strategies_never_accumulate_below_zero(u, kv):
    from ddflow.testing.times import grid
    for ups, kind in ((u, "product"), (kv, "int")):
        for t in grid(kind, 3):
            assert all(r > 0 for r in accumulate(ups, t).values()), (ups, t)
    assert all(r != 0 for _d, _t, r in u)


def test_nonnegative_strategies_still_retract():
    from hypothesis import find
    found = find(updates("product", nonnegative=True), lambda us: any(r < 0 for *_x, r in us))
    assert len(found) == 2 and found[0][2] == -found[1][2]
