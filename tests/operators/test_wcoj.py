"""Worst-case optimal joins and the rule front end: known answers, errors, state, rollback."""

from __future__ import annotations

import pytest

import ddflow
from ddflow.errors import DataflowError, TimeError, UserFunctionError
from ddflow.query import QueryError, parse, query, wcoj_counters
from lattice import Antichain, Product
from operators.wcoj import GenericJoin, delta_plan

STRATEGIES = ["delta", "generic", "binary"]
TRI = "tri(x, y, z) :- g(x, y), g(y, z), g(x, z)"

EPOCHS = [
    [((1, 2), 1), ((2, 3), 1)],
    [((1, 3), 1)],
    [((2, 3), -1)],
    [((2, 4), 1), ((1, 4), 1), ((2, 3), 1)],
    [((1, 2), -1)],
]
EXPECTED = [
    ((1, 2, 3), 1, 1), ((1, 2, 3), 2, -1), ((1, 2, 3), 3, 1), ((1, 2, 3), 4, -1),
    ((1, 2, 4), 3, 1), ((1, 2, 4), 4, -1),
]


def _run_epochs(strategy: str, epochs, rule: str = TRI, workers: int = 1):
    df = ddflow.Dataflow(workers=workers)
    s, g = df.new_collection()
    cap = query(rule, g=g, strategy=strategy).capture()
    for e, ups in enumerate(epochs):
        for d, r in ups:
            s.update(d, r)
        s.advance_to(e + 1)
        df.run()
    return cap.updates, df


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_triangles_on_epochs(strategy):
    out, _ = _run_epochs(strategy, EPOCHS)
    assert out == EXPECTED


@pytest.mark.parametrize("strategy", ["delta", "binary"])
def test_triangles_on_epochs_three_workers(strategy):
    out, _ = _run_epochs(strategy, EPOCHS, workers=3)
    assert out == EXPECTED


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_simultaneous_edges_count_once(strategy):
    # All three edges at one time: each rule sees the others' changes at that time
    # only if they precede it (AltNeu), so exactly one rule produces the triangle.
    out, df = _run_epochs(strategy, [[((1, 2), 1), ((2, 3), 1), ((1, 3), 1)],
                                     [((1, 2), -1), ((2, 3), -1), ((1, 3), -1)]])
    assert out == [((1, 2, 3), 0, 1), ((1, 2, 3), 1, -1)]


@pytest.mark.parametrize("strategy", ["delta", "binary"])
def test_partially_ordered_times(strategy):
    # The triangle exists only at (1, 1), the join of times where no edge changed.
    df = ddflow.Dataflow(time=Product(0, 0))
    s, g = df.new_collection()
    cap = query(TRI, g=g, strategy=strategy).capture()
    s.update_at((1, 2), Product(1, 0))
    s.update_at((2, 3), Product(0, 1))
    s.update_at((1, 3), Product(0, 0))
    s.update_at((1, 3), Product(2, 0), -1)
    s.close()
    df.run()
    assert cap.updates == [((1, 2, 3), Product(1, 1), 1), ((1, 2, 3), Product(2, 1), -1)]


def test_generic_needs_int_times():
    df = ddflow.Dataflow(time=Product(0, 0))
    _, g = df.new_collection()
    with pytest.raises(QueryError, match="totally ordered"):
        query(TRI, g=g, strategy="generic")
    gj = GenericJoin([("x", "y")], [0], 1, head=("x",))
    with pytest.raises(TimeError, match="int"):
        gj.on_input(0, [((1, 2), Product(0, 0), 1)])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_constants_repeats_and_bags(strategy):
    df = ddflow.Dataflow()
    r_in, r = df.new_collection()
    e_in, e = df.new_collection()
    out = query("q(x, z) :- r(x, 'k', y), e(y, z), e(z, z), e(x, 7)", r=r, e=e,
                strategy=strategy).capture()
    for t in [(1, "k", 2), (1, "j", 2), (3, "k", 2), ("bad",)]:
        r_in.insert(t)
    r_in.update((1, "k", 2), 2)           # multiplicity 3
    for t in [(2, 5), (5, 5), (1, 7), (3, 8)]:
        e_in.insert(t)
    e_in.update((5, 5), 1)                # multiplicity 2
    for s in (r_in, e_in):
        s.advance_to(1)
    # A record of another arity is refused at the relation's boundary (issue 24: it
    # used to match nothing, silently); withdrawn, the rest gives the same answer.
    with pytest.raises(ddflow.DataError, match="relation 'r' takes tuples of arity 3") as err:
        df.run()
    assert err.value.record == ("bad",)
    assert r_in.discard(("bad",))
    df.run()
    # (x=1, y=2, z=5): r 3, e(2,5) 1, e(5,5) 2, e(1,7) 1  ->  6
    assert out.updates == [((1, 5), 0, 6)]


def test_unused_and_fresh_variables_and_default_strategy():
    df = ddflow.Dataflow()
    s, g = df.new_collection()
    path = query("p(x) :- g(x, _), g(_, x)", g=g)          # acyclic: binary by default
    assert not any(n.kind == "wcoj" for n in df.nodes)
    tri = query(TRI, g=g)                                    # cyclic: delta by default
    assert any(n.kind == "wcoj" for n in df.nodes)
    cp, ct = path.capture(), tri.capture()
    for edge in [(1, 2), (2, 3), (1, 3), (3, 4)]:
        s.insert(edge)
    s.close()
    df.run()
    # x with an out-edge and an in-edge, times the number of such pairs.
    assert cp.updates == [((2,), 0, 1), ((3,), 0, 2)]
    assert ct.at(0) == {(1, 2, 3): 1}


def test_syntax_error_points_at_position():
    with pytest.raises(QueryError) as info:
        parse("tri(x, y) :- g(x, y) g(y, z)")
    msg = str(info.value)
    assert "expected ',' or the end of the rule, found 'g'" in msg
    assert msg.splitlines()[1:] == ["  tri(x, y) :- g(x, y) g(y, z)",
                                    "                       ^"]
    assert info.value.position == 21
    with pytest.raises(QueryError, match="unexpected character '#'"):
        parse("q(x) :- g(x, #)")
    with pytest.raises(QueryError, match="unterminated string"):
        parse("q(x) :- g(x, 'abc)")
    with pytest.raises(QueryError, match="expected ':-'"):
        parse("q(x) g(x)")
    with pytest.raises(QueryError, match="head variable 'w' does not occur"):
        parse("q(x, w) :- g(x, y)")
    with pytest.raises(QueryError, match="expected a variable, a number or a quoted string"):
        parse("q(x) :- g(x, )")


def test_unbound_relation_points_at_atom():
    df = ddflow.Dataflow()
    _, g = df.new_collection()
    with pytest.raises(QueryError) as info:
        query("tri(x, y, z) :- g(x, y), h(y, z), g(x, z)", g=g)
    msg = str(info.value)
    assert isinstance(info.value, DataflowError)
    assert msg.splitlines() == ["unknown relation 'h' (given: g)",
                                "  tri(x, y, z) :- g(x, y), h(y, z), g(x, z)",
                                "                           ^"]
    with pytest.raises(QueryError, match="unknown strategy"):
        query(TRI, g=g, strategy="magic")
    with pytest.raises(QueryError, match="must be a Collection"):
        query(TRI, g=[(1, 2)])


def test_multiline_rule_caret():
    with pytest.raises(QueryError) as info:
        parse("q(x) :-\n  g(x, y),\n  g(y ! x)")
    assert "line 3, column 7" in str(info.value)
    assert str(info.value).endswith("  g(y ! x) (line 3, column 7)\n        ^")


def test_delta_plan_shapes():
    cycle = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")]
    plan = delta_plan(cycle, [0, 0, 0, 0], 0)
    assert plan.layout == ("a", "b", "c", "d")
    assert [[p.atom for p in s.participants] for s in plan.steps] == [[1], [2, 3]]
    # A ternary atom and a pair binding two variables at once (both may propose).
    plan = delta_plan([("x",), ("x", "y", "z"), ("y", "z")], [0, 1, 2], 0)
    assert [(s.new_vars, [p.atom for p in s.participants]) for s in plan.steps] == \
        [(("y", "z"), [1, 2])]
    assert plan.steps[0].participants[1].ext_src == (0, 1)
    # Atoms whose variables the trigger binds already: a filter step.
    plan = delta_plan([("x", "y", "z"), ("z", "y"), ("x",)], [0, 1, 2], 0)
    assert [(s.new_vars, [p.atom for p in s.participants]) for s in plan.steps] == \
        [((), [1, 2])]
    assert plan.steps[0].participants[0].full_pre == (2, 1)


def _star_clique(n: int, k: int) -> list[tuple[int, int]]:
    hub = -1
    edges = [(i, hub) if i % 2 else (hub, i) for i in range(n)]
    nodes = range(n, n + k)
    edges += [(a, b) for a in nodes for b in nodes if a < b]
    return edges


def test_delta_state_is_linear_and_work_small():
    edges = _star_clique(400, 8)
    stats = {}
    for strategy in ("delta", "binary"):
        df = ddflow.Dataflow()
        s, g = df.new_collection()
        cap = query(TRI, g=g, strategy=strategy).capture()
        for e in edges:
            s.insert(e)
        s.advance_to(1)
        df.run()
        assert len(cap.at(0)) == 8 * 7 * 6 // 6
        held = sum(r["trace_records"] for r in df.metrics())
        stats[strategy] = (held, df.total_work())
        if strategy == "delta":
            c = wcoj_counters(df)
            assert c["proposed"] < 3 * len(edges) and c["index_records"] <= 5 * len(edges)
    assert stats["delta"][0] <= 5 * len(edges) < stats["binary"][0]
    assert stats["delta"][1] * 4 < stats["binary"][1]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_failed_step_rolls_back(strategy):
    # A failing operator downstream rolls the whole step back (the generic join
    # replays its undo journal); running again must not count anything twice.
    df = ddflow.Dataflow()
    s, g = df.new_collection()
    broken = [True]
    cap = query(TRI, g=g, strategy=strategy).map(
        lambda t: 1 // 0 if broken[0] and t[0] == 7 else t).capture()
    for e in [(1, 2), (2, 3), (1, 3)]:
        s.insert(e)
    s.advance_to(1)
    df.run()
    for e in [(7, 8), (8, 9), (7, 9), (1, 4), (2, 4)]:
        s.insert(e)
    s.advance_to(2)
    with pytest.raises(UserFunctionError):
        df.run()
    broken[0] = False
    df.run()
    s.remove((7, 8))
    s.advance_to(3)
    df.run()
    assert cap.updates == [((1, 2, 3), 0, 1), ((1, 2, 4), 1, 1), ((7, 8, 9), 1, 1),
                           ((7, 8, 9), 2, -1)]
    for node in df.nodes:
        for op in df.engine.operators(node):
            if isinstance(op, GenericJoin):
                op._check()


def test_half_join_waits_for_index_and_holds_capability():
    from operators.arrange import Arrange
    from operators.wcoj import Propose
    idx = Arrange(name="idx")
    p = Propose(idx, neu=True, total=True, key=lambda v: v[0])
    p.on_input(0, [((1,), 2, 1)])
    assert list(p.capabilities()) == [2]
    idx.on_input(0, [((1, "a"), 2, 1)])
    idx.on_frontier([Antichain([2])])
    p.on_frontier([Antichain([3]), Antichain([2])])    # entries at 2 may still come
    assert p.take_output() == [] and list(p.capabilities()) == [2]
    idx.on_frontier([Antichain([3])])
    p.on_frontier([Antichain([3]), Antichain([3])])
    assert p.take_output() == [((1, "a"), 2, 1)] and list(p.capabilities()) == []


@pytest.mark.parametrize("strategy", ["delta", "binary"])
def test_inside_a_loop(strategy):
    # Product(epoch, round) times with feedback: half joins wait on indices that
    # depend on the loop's own output a round later, without deadlock.
    df = ddflow.Dataflow()
    s, e = df.new_collection()

    def body(p):
        inner = e.enter(p.scope)
        step = query("q(x, z) :- p(x, y), e(y, z)", p=p, e=inner, strategy=strategy)
        return step.concat(inner).distinct()

    reach = e.iterate(body).capture()
    for i in range(6):
        s.insert((i, i + 1))
    s.advance_to(1)
    df.run()
    s.remove((2, 3))
    s.advance_to(2)
    df.run()
    s.insert((6, 0))
    s.advance_to(3)
    df.run()
    assert [len(reach.at(t)) for t in range(3)] == [21, 9, 21]
    assert reach.at(2)[(3, 2)] == 1 and (2, 3) not in reach.at(2)


def test_benchmark_quick(tmp_path):
    from benchmarks.bench_wcoj import main

    out = tmp_path / "wcoj.json"
    result = main(["--quick", "--out", str(out)])
    assert out.exists()
    assert all(r["agree"] for r in result["asymptotics"]["rows"])
    assert all(g["agree"] for g in result["maintenance"].values())
    fits = result["asymptotics"]["fits"]
    # Work counts, not timings: the delta query stays near the output bound, the
    # binary plan pays the hub's quadratic paths, and only the latter's state grows so.
    assert fits["delta"]["work_exponent"] < 1.6 < fits["binary"]["work_exponent"]
    assert fits["delta"]["held_exponent"] < 1.1 < fits["binary"]["held_exponent"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_bsp_engine_two_shards(strategy):
    # Operators pickled between supersteps, as a Spark partition holds them.
    from ddflow.engine.bsp import InProcessShards
    df = ddflow.Dataflow(engine=InProcessShards(shards=2))
    s, g = df.new_collection()
    cap = query(TRI, g=g, strategy=strategy).capture()
    for e, ups in enumerate(EPOCHS):
        for d, r in ups:
            s.update(d, r)
        s.advance_to(e + 1)
        df.run()
    assert cap.updates == EXPECTED


def test_delta_index_compacts_under_product_epochs():
    """A triangle delta query at `Product(epoch, 0)` times, one edge toggled per
    epoch for 1,000 epochs: its indices stay within 2x of their size on the live
    edges (they kept every change before: 706 -> 5,706 records), and the answer is
    the triangles of the live graph."""
    import random
    rng = random.Random(3)
    edges: set = set()
    while len(edges) < 200:
        a, b = rng.sample(range(60), 2)
        edges.add((min(a, b), max(a, b)))
    df = ddflow.Dataflow(time=Product(0, 0))
    s, g = df.new_collection()
    cap = query(TRI, g=g, strategy="delta").capture()
    for e in sorted(edges):
        s.update_at(e, Product(0, 0))
    s.advance_to(Product(1, 0))
    df.run()
    loaded = wcoj_counters(df)["index_records"]
    toggle = (0, 59) if (0, 59) not in edges else (1, 58)
    for epoch in range(1, 1001):
        s.update_at(toggle, Product(epoch, 0), 1 if epoch % 2 else -1)
        s.advance_to(Product(epoch + 1, 0))
        df.run()
        if epoch % 100 == 0:
            assert wcoj_counters(df)["index_records"] <= 2 * loaded, epoch
    live = edges | ({toggle} if 1000 % 2 else set())
    want = {(x, y, z): 1 for (x, y) in live for (y2, z) in live
            if y2 == y and (x, z) in live}
    assert cap.at(Product(1000, 0)) == want
