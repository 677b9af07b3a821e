"""Explanations (`Capture.explain`): fed only its explanation, a fresh copy of the
dataflow gives the record with the same multiplicity at the same time, for random
pipelines over every operator family at int and `Product` times; explanations hold
only records present at that time (with their multiplicity there), only the keys
that can contribute, and in a loop only the rounds up to the record's own: on a
random 2,000-node graph, reachability explains a node by edges of its shortest-path
DAG from the roots."""

from __future__ import annotations

import random
from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ddflow
from ddflow.algorithms.graphs import reachability
from ddflow.testing import build_pipeline, dags, join_closure, keyed_updates, pipelines
from ddflow.updates import accumulate
from lattice import Product, join

pytestmark = pytest.mark.filterwarnings("ignore::ddflow.StalledRunWarning")


def _run_pipeline(steps, kind, a_ups, b_ups):
    least = Product(0, 0) if kind == "product" else 0
    df = ddflow.Dataflow(least)
    a_in, a = df.new_collection("a")
    b_in, b = df.new_collection("b")
    cap = build_pipeline(steps, a, b).capture()
    for session, ups in ((a_in, a_ups), (b_in, b_ups)):
        for data, t, diff in ups:
            session.update_at(data, t, diff)
        session.close()
    df.run()
    return df, cap


def _positive(kind):
    # Inserts, and retractions of them at later times: every accumulation stays a
    # multiset (a loop over negative counts need not converge).
    return keyed_updates(kind, max_size=8, diffs=st.sampled_from([1, 2]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), steps=st.one_of(pipelines(max_size=3), dags(max_size=3)),
       kind=st.sampled_from(["int", "product"]))
def test_every_explanation_reproduces_its_record(data, steps, kind):
    # Half the pipelines are DAGs (`dags`): an input reaching an operator both
    # directly and through a negation, where records cancel on one branch only.
    a_ups = data.draw(_positive(kind), "a")
    b_ups = data.draw(_positive(kind), "b")
    # Retract some inserts later (at a time joined with another): deletions too.
    for ups in (a_ups, b_ups):
        for d, t, r in list(ups[: len(ups) // 2]):
            later = data.draw(st.sampled_from([u[1] for u in ups]))
            ups.append((d, join(t, later), -r))
    df, cap = _run_pipeline(steps, kind, a_ups, b_ups)
    times = sorted(join_closure({u[1] for u in a_ups + b_ups} or {df.root.minimum}),
                   key=lambda t: t.sort_key() if kind == "product" else t)
    inputs = {"a": a_ups, "b": b_ups}
    for t in times[:4]:
        out = cap.at(t)
        for record in list(out)[:3]:
            ex = cap.explain(record, t)
            assert ex.multiplicity == out[record]
            assert ex.check()
            for name, recs in ex.inputs.items():
                # Only records present at t, each with its multiplicity there.
                present = accumulate(inputs[name], t)
                assert all(present.get(d) == m for d, m in recs.items()), (name, recs)


def test_keyed_operators_explain_by_their_key_and_min_by_its_winners():
    df = ddflow.Dataflow()
    s, c = df.new_collection("pairs")
    o, other = df.new_collection("other")
    counts = c.count().capture()
    lows = c.min().capture()
    joined = c.join(other).capture()
    for k in range(5):
        for v in range(4):
            s.insert((k, v))
        o.insert((k, "x"))
    s.insert((2, 1))
    s.advance_to(1); o.advance_to(1)
    df.run()
    s.insert((2, 0))            # after the time asked: never in its explanation
    s.advance_to(2); o.advance_to(2)
    df.run()
    ex = counts.explain(((2, 1), 2), 0)
    assert ex.inputs == {"pairs": {(2, 1): 2}}            # the record's group, no more
    ex = lows.explain((3, 0), 0)
    assert ex.inputs == {"pairs": {(3, 0): 1}} and ex.check()   # the winner only
    ex = joined.explain((4, (2, "x")), 0)
    assert ex.inputs == {"pairs": {(4, 2): 1}, "other": {(4, "x"): 1}} and ex.check()
    assert counts.explain(((2, 0), 2)).inputs == {"pairs": {(2, 0): 2}}   # latest final
    with pytest.raises(ddflow.GraphError):
        counts.explain(((2, 0), 2), 0)          # not there at 0


def _shortest_path_dag(n, edges, roots):
    dist = {r: 0 for r in roots}
    out = {}
    for a, b in edges:
        out.setdefault(a, []).append(b)
    queue = deque(roots)
    while queue:
        a = queue.popleft()
        for b in out.get(a, ()):
            if b not in dist:
                dist[b] = dist[a] + 1
                queue.append(b)
    return dist, {(a, b) for a, b in edges if a in dist and dist.get(b) == dist[a] + 1}


def test_reachability_explains_a_node_by_its_shortest_paths():
    rng = random.Random(5)
    n, m = 2_000, 6_000
    edges = set()
    while len(edges) < m:
        edges.add((rng.randrange(n), rng.randrange(n)))
    roots = [0, 1, 2, 3, 4]
    df = ddflow.Dataflow()
    e_in, e = df.new_collection("edges")
    r_in, r = df.new_collection("roots")
    reach = reachability(e, r).capture()
    for edge in edges:
        e_in.insert(edge)
    for x in roots:
        r_in.insert(x)
    e_in.advance_to(1); r_in.advance_to(1)
    df.run()
    dist, dag = _shortest_path_dag(n, edges, roots)
    far = sorted(dist, key=lambda x: (-dist[x], x))
    for node in far[:3] + far[len(far) // 2: len(far) // 2 + 2]:
        ex = reach.explain(node)
        assert set(ex.inputs["edges"]) <= dag
        # Every edge of it lies on a shortest path to `node`: a DAG ending there.
        assert len(ex.inputs["edges"]) <= sum(1 for a, b in dag if dist[b] <= dist[node])
        assert set(ex.inputs["roots"]) <= set(roots)
        assert ex.check()
    # A deletion: the next explanation follows the graph as it is now.
    node = far[0]
    before = reach.explain(node)
    cut = next(iter(before.inputs["edges"]))
    e_in.remove(cut)
    e_in.advance_to(2); r_in.advance_to(2)
    df.run()
    edges.discard(cut)
    dist, dag = _shortest_path_dag(n, edges, roots)
    if node in dist:
        after = reach.explain(node)
        assert cut not in after.inputs["edges"] and set(after.inputs["edges"]) <= dag
        assert after.check()
    else:
        with pytest.raises(ddflow.GraphError):
            reach.explain(node)


KEYED = ("filter", "join", "semijoin", "antijoin", "sum", "min", "max", "distinct",
         "threshold", "reduce", "count")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), step=st.sampled_from(KEYED), kind=st.sampled_from(["int", "product"]))
def test_a_keyed_operator_explains_by_the_records_key_alone(data, step, kind):
    a_ups = data.draw(_positive(kind), "a")
    b_ups = data.draw(_positive(kind), "b")
    df, cap = _run_pipeline([step], kind, a_ups, b_ups)
    for t in sorted({u[1] for u in a_ups + b_ups}, key=lambda t: t.sort_key()
                    if kind == "product" else t)[:3]:
        for record in cap.at(t):
            ex = cap.explain(record, t)
            key = record[0]
            for name, recs in ex.inputs.items():
                assert all(d[0] == key for d in recs), (step, record, name, recs)
            assert ex.check()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edges=st.sets(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=10))
def test_datalog_outputs_with_negation_explain_and_reproduce(edges):
    df = ddflow.Dataflow()
    e_in, e = df.new_collection("e")
    out = ddflow.datalog("""
        tc(x, y) :- e(x, y).
        tc(x, z) :- tc(x, y), e(y, z).
        acyclic(x) :- e(x, _), !tc(x, x).
        hub(x) :- e(x, y), e(x, z), y != z.
        special(0).
    """, e=e)
    caps = {name: coll.capture(name) for name, coll in out.items()}
    for edge in edges:
        e_in.insert(edge)
    e_in.advance_to(1)
    df.run()
    for name, cap in caps.items():
        for record in list(cap.at(0))[:2]:
            ex = cap.explain(record)
            assert ex.check()
            assert set(ex.inputs.get("e", {})) <= edges
            if name == "acyclic":       # a node's own out-edges are enough
                assert all(a == record[0] for a, _b in ex.inputs["e"])


def test_two_inputs_sharing_a_name_are_explained_apart():
    """`new_collection` accepts a name twice: the explanation keys each input by its
    node (`(name, position)` for the shared name), and `check()` compares with the
    original capture, so a wrong explanation cannot pass."""
    df = ddflow.Dataflow()
    a_in, a = df.new_collection("x")
    b_in, b = df.new_collection("x")
    cap = a.join(b).capture()
    a_in.insert((1, "a")); a_in.insert((2, "a2"))
    b_in.insert((1, "b")); b_in.insert((3, "b3"))
    a_in.advance_to(1); b_in.advance_to(1)
    df.run()
    ex = cap.explain((1, ("a", "b")))
    assert ex.inputs == {("x", 0): {(1, "a"): 1}, ("x", 1): {(1, "b"): 1}}
    assert ex.multiplicity == 1 and ex.check()
    # A tampered explanation is caught against the original capture.
    ex.inputs[("x", 1)] = {}
    with pytest.raises(ddflow.GraphError):
        ex.check()


def test_a_record_cancelled_on_one_branch_is_still_demanded_there():
    """`x.antijoin(y).concat(x)`: x's record cancels on the antijoin branch in the
    full run, but not on a subset holding x's record alone, so y's record must be
    in the explanation (else the replay gives 2, not 1)."""
    df = ddflow.Dataflow()
    x_in, x = df.new_collection("x")
    y_in, y = df.new_collection("y")
    cap = x.antijoin(y).concat(x).capture()
    x_in.insert((1, "r")); x_in.insert((2, "s")); y_in.insert(1)
    x_in.advance_to(1); y_in.advance_to(1)
    df.run()
    ex = cap.explain((1, "r"))
    assert ex.inputs == {"x": {(1, "r"): 1}, "y": {1: 1}}
    assert ex.check()


def test_inputs_advancing_unevenly_keep_the_latest_final_time_explainable():
    """Each input compacts no further than the slowest open input allows: the
    latest final time of a join waits for `b`, so `a` keeps it exact."""
    df = ddflow.Dataflow()
    a_in, a = df.new_collection("a")
    b_in, b = df.new_collection("b")
    cap = a.join(b).capture()
    b_in.insert((1, "b"))
    b_in.advance_to(1)
    for e in range(8):
        a_in.insert((1, e))
        a_in.advance_to(e + 1)
        df.run()
    ex = cap.explain((1, (0, "b")))
    assert ex.time == 0
    assert ex.inputs == {"a": {(1, 0): 1}, "b": {(1, "b"): 1}} and ex.check()
    # Once b moves on, a may compact to the new horizon; its latest final time stays.
    b_in.advance_to(9)
    for e in range(8, 40):
        a_in.insert((1, e))
        a_in.advance_to(e + 1)
        df.run()
    ex = cap.explain((1, (7, "b")))
    assert ex.time == 8 and ex.check()
    # A closed input holds nothing back; the latest final time stays explainable.
    b_in.close()
    for e in range(40, 60):
        a_in.insert((1, e))
        a_in.advance_to(e + 1)
        df.run()
    ex = cap.explain((1, (58, "b")))
    assert ex.time == 59 and ex.check()
    a_op = df.engine.operators(a.node)[0]
    assert a_op.since is not None and not a_op.since.less_equal(0)   # it did compact


def test_one_off_explanations_keep_no_dataflow_alive_and_drop_lets_their_copy_go():
    """The copy `Capture.explain` keeps for the next record asked at a time reaches
    the capture's dataflow again: kept on the capture, it goes with it (a module
    table keyed by the capture would keep every explained dataflow alive), and
    `Dataflow.drop(capture)` lets it go with the capture."""
    import gc
    import weakref

    def explained():
        df = ddflow.Dataflow()
        a_in, a = df.new_collection("a")
        cap = a.map(lambda x: (x % 3, x)).reduce(lambda k, vs: [(len(vs), 1)]).capture()
        a_in.extend([(i, 0, 1) for i in range(30)])
        a_in.close()
        df.run()
        first = cap.explain((1, 10), 0)
        assert cap.explain((1, 10), 0).inputs == first.inputs and first.check()
        return df, cap

    refs = []
    for _ in range(3):
        df, cap = explained()
        refs.append((weakref.ref(df), weakref.ref(cap)))
        del df, cap
    gc.collect()
    assert [r() for pair in refs for r in pair] == [None] * 6

    df, cap = explained()
    copy = weakref.ref(cap.asking.copy)
    df.drop(cap)
    gc.collect()
    assert copy() is None
