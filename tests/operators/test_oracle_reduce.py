"""The law for the reduce family, exact under partial orders (2 and 3 coordinates)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from lattice import Product as P
from operators.reduce import Reduce
from ddflow.testing import evaluate, join_closure
from tests.strategies import SCHEDULES, assert_law, by_key, keyed_updates

# Every test here runs with batches in rows and in columns (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("both_layouts")

KINDS = st.sampled_from(["product", "product3", "int"])


@pytest.fixture(autouse=True, scope="module", params=["replay", "direct", "chain"])
def reduce_path(request):
    """Every test here runs with each key replayed by the general walk, then with
    each evaluated directly (`Reduce.direct_below`), then with keys whose times form
    a chain walked as one (`Reduce.chain_replay`, the others by the general walk), so
    every path answers to the law.
    (Module-scoped: hypothesis refuses function-scoped fixtures around examples.)"""
    before = Reduce.direct_below, Reduce.chain_replay
    Reduce.direct_below = 10**9 if request.param == "direct" else 0
    Reduce.chain_replay = request.param == "chain"
    yield request.param
    Reduce.direct_below, Reduce.chain_replay = before


def _count(c):
    return {(x, m): 1 for x, m in c.items() if m}


def _sum(c):
    return {(k, sum(v * m for v, m in vals.items())): 1 for k, vals in by_key(c).items()}


def _extreme(pick):
    def f(c):
        out = {}
        for k, vals in by_key(c).items():
            present = [v for v, m in vals.items() if m > 0]
            if present:
                out[(k, pick(present))] = 1
        return out
    return f


def _generic_logic(key, vals):
    # Several outputs with assorted diffs, so corrections of all signs occur.
    total = sum(c for _v, c in vals)
    return [("n", len(vals)), (("total", total), 2), ("neg", -1)] if total else [("n", len(vals))]


def _generic(c):
    out = {}
    for k, vals in by_key(c).items():
        for o, d in _generic_logic(k, sorted(vals.items())):
            out[(k, o)] = out.get((k, o), 0) + d
    return out


CASES = {
    "count": (lambda c: c.map(lambda kv: kv[0]).count(),
              lambda c: _count({k: sum(m for (k2, _v), m in c.items() if k2 == k)
                                for k in {k for k, _ in c}})),
    "sum": (lambda c: c.sum(), _sum),
    "min": (lambda c: c.min(), _extreme(min)),
    "max": (lambda c: c.max(), _extreme(max)),
    "distinct": (lambda c: c.distinct(), lambda c: {x: 1 for x, m in c.items() if m > 0}),
    "threshold": (lambda c: c.threshold(lambda n: n * n if n > 1 else 0),
                  lambda c: {x: m * m for x, m in c.items() if m > 1}),
    "reduce": (lambda c: c.reduce(_generic_logic), _generic),
}


def _check_case(name, data, schedule, workers=1):
    kind = data.draw(KINDS)
    inp = data.draw(keyed_updates(kind))
    build, f = CASES[name]
    assert_law(build, f, [inp], schedule, workers)


@settings(max_examples=200)
@given(data=st.data(), schedule=SCHEDULES)
def test_oracle_count(data, schedule):
    _check_case("count", data, schedule)


@settings(max_examples=200)
@given(data=st.data(), schedule=SCHEDULES)
def test_oracle_distinct(data, schedule):
    _check_case("distinct", data, schedule)


@settings(max_examples=200)
@given(data=st.data(), schedule=SCHEDULES)
def test_oracle_reduce_generic(data, schedule):
    _check_case("reduce", data, schedule)


@settings(max_examples=100)
@given(data=st.data(), schedule=SCHEDULES,
       name=st.sampled_from(["sum", "min", "max", "threshold"]))
def test_oracle_aggregates(data, schedule, name):
    _check_case(name, data, schedule)


@settings(max_examples=100)
@given(data=st.data(), schedule=SCHEDULES, name=st.sampled_from(sorted(CASES)))
def test_agree_workers_reduce(data, schedule, name):
    """W=3 simulated workers give the same output as one worker."""
    kind = data.draw(KINDS)
    inp = data.draw(keyed_updates(kind))
    build, _f = CASES[name]
    one = evaluate(build, [inp], schedule=schedule, workers=1)
    three = evaluate(build, [inp], schedule=schedule, workers=3)
    assert one == three


@settings(max_examples=100)
@given(data=st.data())
def test_reduce_output_times_are_joins_of_input_times(data):
    kind = data.draw(KINDS)
    inp = data.draw(keyed_updates(kind))
    out = evaluate(lambda c: c.count(), [inp], schedule="each")
    closure = join_closure({u[1] for u in inp})
    assert all(t in closure for _d, t, _r in out)


def test_count_known_answer_at_partial_order():
    """The issue's known answer: two outputs at (1, 1), where no input changed."""
    out = evaluate(lambda c: c.map(lambda kv: kv[0]).count(),
                   [[(("k", "a"), P(1, 0), 1), (("k", "b"), P(0, 1), 1)]])
    assert out == [(("k", 1), P(0, 1), 1), (("k", 1), P(1, 0), 1),
                   (("k", 1), P(1, 1), -2), (("k", 2), P(1, 1), 1)]


def test_distinct_needs_every_finite_join():
    """One record at (1,0,0), (0,1,0), (0,0,1): distinct must retract copies at the
    pairwise joins and restore one at (1,1,1), a join of three times."""
    t1, t2, t3 = P(P(1, 0), 0), P(P(0, 1), 0), P(P(0, 0), 1)
    inp = [("x", t1, 1), ("x", t2, 1), ("x", t3, 1)]
    out = evaluate(lambda c: c.count(), [inp])
    from ddflow.updates import accumulate
    assert accumulate(out, P(P(1, 1), 1)) == {("x", 3): 1}
    assert any(t == P(P(1, 1), 1) for _d, t, _r in out)
    dist = evaluate(lambda c: c.map(lambda x: (x, x)).distinct(), [inp])
    for t in join_closure([t1, t2, t3]):
        assert accumulate(dist, t) == {("x", "x"): 1}


def test_seed_002_aggregate_example():
    """"Notes on DBSP", section 2.9.1: aggregate(count) over an indexed Z-set."""
    inp = [((1, "foo"), 0, 1), ((1, "bar"), 0, 1), ((2, "baz"), 0, 1)]
    out = evaluate(lambda c: c.map(lambda kv: kv[0]).count(), [inp])
    assert out == [((1, 2), 0, 1), ((2, 1), 0, 1)]


def test_seed_002_distinct_example():
    """"Notes on DBSP", section 2.9.3 (weights: 1 -> 1, 2 -> 1, -1 -> absent, 0 -> absent)."""
    out = evaluate(lambda c: c.distinct(), [[(0, 0, 1), (1, 0, 2), (2, 0, -1), (3, 0, 0)]])
    assert out == [(0, 0, 1), (1, 0, 1)]


def test_reduce_work_follows_the_change():
    """After a large load, one new record re-evaluates one key at one time."""
    import ddflow
    df = ddflow.Dataflow()
    s, c = df.new_collection()
    c.map(lambda x: (x % 100, x)).count().capture()
    for x in range(10_000):
        s.insert(x)
    s.advance_to(1)
    df.run()
    before = {r["operator"]: r["times_visited"] for r in df.metrics()}
    s.insert(5)
    s.advance_to(2)
    df.run()
    after = {r["operator"]: r["times_visited"] for r in df.metrics()}
    assert after["count"] - before["count"] == 1


def _ordered_logic(key, vals):
    # Depends on the order of the values: the first one and the number of them.
    return [(("first", vals[0][0]), 1), (("n", len(vals)), 1)]


def _ordered(c):
    from ddflow.updates import sorted_data
    out = {}
    for k, vals in by_key(c).items():
        for o, d in _ordered_logic(k, sorted_data(vals.items(), key=lambda p: p[0])):
            out[(k, o)] = out.get((k, o), 0) + d
    return out


@settings(max_examples=150)
@given(data=st.data(), schedule=SCHEDULES)
def test_oracle_reduce_values_holding_product_times(data, schedule):
    """Values that hold `Product` times (whose `<` raises TimeError) reach the logic
    sorted as `ddflow.updates.sorted_data` sorts them, at partially ordered times."""
    from ddflow.testing import times
    kind = data.draw(KINDS)
    inp = data.draw(keyed_updates(kind, values=times("product", 2)))
    assert_law(lambda c: c.reduce(_ordered_logic), _ordered, [inp], schedule)


def test_reduce_values_holding_product_times_known_answer():
    """The issue's case: two values `Product(1, 2)` and `Product(0, 3)` of one key."""
    out = evaluate(lambda c: c.reduce(lambda k, vals: [(len(vals), 1)]),
                   [[(("a", P(1, 2)), 0, 1), (("a", P(0, 3)), 0, 1)]])
    assert out == [(("a", 2), 0, 1)]
