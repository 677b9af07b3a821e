"""Loops: nested scopes, Variables, enter_at, termination by progress, the fixpoint law."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

import ddflow
from ddflow.collection import Variable
from ddflow.testing import check_law, evaluate
from lattice import Antichain, Product
from tests.strategies import updates


def _collatz_steps(c):
    """Iterate x -> x // 2 (for even) / 3x + 1 (odd) until 1, keeping every value seen."""
    return c.iterate(lambda x: x.concat(
        x.filter(lambda v: v != 1).map(lambda v: v // 2 if v % 2 == 0 else 3 * v + 1))
        .distinct())


def test_iterate_reaches_the_fixpoint_after_many_rounds():
    out = evaluate(_collatz_steps, [[(27, 0, 1)]])
    assert len(out) == 112 and all(t == 0 for _d, t, _r in out)   # 111 steps + 27


def test_nested_iterate_has_three_time_coordinates():
    """Transitive closure by an outer loop whose body runs an inner loop (Product(Product(e, i), j))."""
    seen_times = []

    def body(paths):
        step = paths.map(lambda e: (e[1], e[0])).join(paths).map(lambda kv: (kv[1][0], kv[1][1]))

        def inner(x):
            seen_times.append(x.scope.minimum)
            return x.concat(step.enter(x.scope)).distinct()
        return paths.iterate(inner)

    edges = [((i, i + 1), 0, 1) for i in range(6)]
    out = evaluate(lambda e: e.iterate(body), [edges])
    closure = {(i, j) for i in range(7) for j in range(i + 1, 7)}
    assert {d for d, _t, r in out if r > 0} == closure and len(out) == len(closure)
    assert seen_times == [Product(Product(0, 0), 0)]


def test_variable_mutual_recursion_even_odd():
    """Two Variables feeding each other: even/odd distance classes from a root."""
    df = ddflow.Dataflow()
    e_in, edges = df.new_collection()
    r_in, roots = df.new_collection()
    result = []

    def build(scope_coll):
        scope = scope_coll.scope
        e = edges.enter(scope)
        even = Variable(scope, name="even")
        odd = Variable(scope, name="odd")
        next_odd = e.semijoin(even.collection).map(lambda kv: kv[1]).distinct()
        next_even = (e.semijoin(odd.collection).map(lambda kv: kv[1])
                     .concat(roots.enter(scope)).distinct())
        even.set(next_even)
        odd.set(next_odd)
        result.append(next_odd.leave())
        return next_even

    evens = roots.iterate(build).capture()
    odds = result[0].capture()
    for a, b in [(0, 1), (1, 2), (2, 3)]:
        e_in.insert((a, b))
    r_in.insert(0)
    e_in.close()
    r_in.close()
    df.run()
    assert evens.at(0) == {0: 1, 2: 1}
    assert odds.at(0) == {1: 1, 3: 1}


def test_enter_at_delays_records_by_round():
    df = ddflow.Dataflow()
    s, c = df.new_collection()
    rounds = []

    def body(x):
        late = c.enter_at(x.scope, lambda v: v)
        return x.concat(late.inspect(lambda u: rounds.append(u[1]))).distinct()

    out = c.filter(lambda v: False).iterate(body).capture()
    for v in (0, 2, 5):
        s.insert(v)
    s.close()
    df.run()
    assert out.at(0) == {0: 1, 2: 1, 5: 1}
    assert sorted(t.inner for t in rounds) == [0, 2, 5]


def test_inspect_sees_updates_and_frontier_changes():
    df = ddflow.Dataflow()
    s, c = df.new_collection()
    seen, frontiers = [], []
    c.inspect(seen.append, on_frontier=frontiers.append).capture()
    s.insert("a")
    s.advance_to(3)
    df.run()
    s.close()
    df.run()
    assert seen == [("a", 0, 1)]
    # The update at 0 is delivered in the same visit as the frontier that completes
    # it, so the first frontier seen is already past it; never backwards after that.
    assert frontiers == [Antichain([3]), Antichain()]
    assert all(a.dominates(b) for a, b in zip(frontiers, frontiers[1:]))
    assert all(a.dominates(b) for a, b in zip(frontiers, frontiers[1:]))


def _plain_reach(edges: dict, roots: dict) -> dict:
    adj = {}
    for (a, b), m in edges.items():
        if m > 0:
            adj.setdefault(a, set()).add(b)
    seen = {r for r, m in roots.items() if m > 0}
    todo = list(seen)
    while todo:
        for b in adj.get(todo.pop(), ()):
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return {n: 1 for n in seen}


def _reach(e, r):
    def body(inner):
        edges = e.filter(lambda kv: True).enter(inner.scope)
        positive = edges.distinct()        # multiplicities above 1 collapse, as in the oracle
        return positive.semijoin(inner).map(lambda kv: kv[1]).concat(
            r.distinct().enter(inner.scope)).distinct()
    return r.distinct().iterate(body)


@settings(max_examples=100)
@given(edges=updates("product", data=st.tuples(st.integers(0, 4), st.integers(0, 4)),
                     max_size=15),
       roots=updates("product", data=st.integers(0, 4), max_size=4),
       schedule=st.sampled_from(["once", "each"]))
def test_oracle_loop_at_partially_ordered_outer_time(edges, roots, schedule):
    """A loop body with join and reduce at Product(a, b) outer times (loop times have
    three coordinates): the accumulated output is reachability of the accumulated
    input, at every time of the join-closure."""
    out = evaluate(_reach, [edges, roots], schedule=schedule)
    check_law(out, [edges, roots], _plain_reach)
