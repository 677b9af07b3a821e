"""Circuits ("Notes on DBSP", 2.6 to 2.8) compiled onto the engine: node types and IDs, ticks,
child circuits, feedback, import/export, clock hooks, drawings, and recursion written
as a child circuit agreeing with the `iterate` forms (`test_agree_*`)."""

from __future__ import annotations

import random
import re

import pytest

import ddflow
from hypothesis import given, settings, strategies as st

from ddflow.algorithms.graphs import reachability, transitive_closure
from ddflow.circuit import (DELTA, INTEGRAL, NODE_KINDS, Circuit, consolidate, delay,
                            delay_trace, distinct, distinct_trace, incremental_join,
                            index_with, inspect, integrate, plus, z1_trace)
from ddflow.circuit.draw import edges as draw_edges
from ddflow.engine.bsp import InProcessShards
from ddflow.errors import GraphError, UserFunctionError
from ddflow.testing import evaluate
from lattice import Product

P = Product


# -- structure -------------------------------------------------------------------------

def _closure_circuit(c: Circuit, edges):
    """Transitive closure as a child circuit: paths = distinct_trace(edges + paths . edges)."""
    sub = c.child("closure")
    e = sub.import_stream(edges, name="edges")
    paths = sub.feedback("paths")
    longer = incremental_join(lambda _mid, p, e: (p[0], e[1]),
                              index_with(lambda p: p[1], paths),
                              index_with(lambda e: e[0], e))
    nxt = distinct_trace(plus(e, longer))
    paths.connect(nxt)
    return sub.export(nxt)


def _reach_circuit(c: Circuit, edges, roots):
    """Reachability as a child circuit: reached = distinct_trace(roots + reached . edges)."""
    sub = c.child("reach")
    e = sub.import_stream(edges, name="edges")
    r = sub.import_stream(roots, name="roots")
    reached = sub.feedback("reached")
    hop = incremental_join(lambda _src, _n, e: e[1], index_with(lambda n: n, reached),
                           index_with(lambda e: e[0], e))
    nxt = distinct_trace(plus(r, hop))
    reached.connect(nxt)
    return sub.export(nxt)


def test_six_node_types_with_local_and_global_ids():
    c = Circuit()
    edges = c.source("edges")
    out = _closure_circuit(c, edges)
    sink = c.sink(out)
    kinds = {n.kind for n in c.walk()}
    assert kinds == set(NODE_KINDS)
    assert [(n.kind, n.local_id, n.global_id) for n in c.nodes] == [
        ("source", 0, (0,)), ("child", 1, (1,)), ("sink", 2, (2,))]
    sub = c.nodes[1].child
    assert sub.global_id == (1,) and sub.depth == 1
    assert [n.global_id for n in sub.nodes] == [(1, k) for k in range(len(sub.nodes))]
    assert [n.kind for n in sub.nodes][:2] == ["import", "feedback"]
    assert c.find((1, 1)) is sub.nodes[1] and c.find((2,)) is sink.node
    # global IDs are unique across the whole tree
    gids = [n.global_id for n in c.walk()]
    assert len(gids) == len(set(gids))
    # node inputs and outputs match the notes' table
    arity = {"source": (0, 1), "import": (1, 1), "feedback": (1, 1), "sink": (1, 0)}
    for n in c.walk():
        if n.kind in arity:
            assert (len(n.inputs), len(n.outputs)) == arity[n.kind], n
    assert len(c.nodes[1].inputs) == 0 and len(c.nodes[1].outputs) == 1


def test_a_circuit_is_a_dataflow_underneath():
    c = Circuit()
    xs = c.source("xs")
    ys = xs.map(lambda x: x + 1)
    assert ys.collection.dataflow is c.dataflow
    # a source is an input session of the dataflow, a sink a capture
    assert c.dataflow.sessions == [xs.session]
    sink = c.sink(ys)
    assert len(c.dataflow.captures) == 1
    xs.push(1)
    assert c.tick() == 0
    assert sink.at(0) == {2: 1} and sink.updates == [(2, 0, 1)]
    assert xs.session.time == 1 and c.time == 1


def test_building_after_the_first_tick_is_refused():
    c = Circuit()
    xs = c.source()
    c.tick()
    with pytest.raises(GraphError, match="build every node before"):
        c.source()
    with pytest.raises(GraphError):
        xs.map(lambda x: x)


def test_feedback_must_be_connected():
    c = Circuit()
    c.feedback("loose")
    with pytest.raises(GraphError, match="never connected"):
        c.tick()
    c2 = Circuit()
    sub = c2.child()
    sub.feedback("loose")
    with pytest.raises(GraphError, match="never connected"):
        c2.tick()


def test_scope_errors():
    c = Circuit()
    xs = c.source()
    sub = c.child()
    with pytest.raises(GraphError, match="source lives in the root"):
        sub.source()
    with pytest.raises(GraphError, match="import it"):
        sub.sink(xs)
    inner = sub.import_stream(xs)
    with pytest.raises(GraphError, match="different circuits"):
        plus(xs, inner)
    with pytest.raises(GraphError, match="tick\\(\\) the root"):
        sub.tick()
    with pytest.raises(GraphError, match="root clock"):
        integrate(inner)
    other = Circuit().source()
    with pytest.raises(GraphError):
        sub.import_stream(other)


def test_child_converts_no_forms():
    """A pointwise operator on a delta stream needs a z^-1 over epochs: refused in a child."""
    c = Circuit()
    sub = c.child()
    x = sub.import_stream(c.source())
    with pytest.raises(GraphError, match="z\\^-1 over epochs"):
        distinct(x)
    xi = sub.import_stream(integrate(c.source()))
    assert distinct(xi).form == INTEGRAL         # integral in: pointwise is native
    with pytest.raises(GraphError, match="z\\^-1 over epochs"):
        distinct_trace(xi)


def test_distinct_trace_refuses_another_trace():
    c = Circuit()
    a, b = c.source(), c.source()
    assert distinct_trace(a, z1_trace(a)).form == DELTA
    with pytest.raises(GraphError, match="distinct_incremental"):
        distinct_trace(a, z1_trace(b))


# -- child circuits: import, feedback, export ------------------------------------------

def test_import_is_delta0_or_constant_and_export_sums_iterations():
    c = Circuit()
    xs = c.source("xs")
    sub = c.child("loop")
    d = sub.import_stream(xs)                 # delta form: at iteration 0 only
    i = sub.import_stream(integrate(xs))      # integral form: at every iteration
    d1, i1 = delay(d), delay(i)               # one iteration later
    sinks = [sub.sink(s) for s in (d, i, d1, i1)]
    out = c.sink(sub.export(plus(d, d1)))     # sum over iterations: 2 per epoch
    xs.push("a")
    c.tick()
    xs.push("b")
    c.tick()
    d_s, i_s, d1_s, i1_s = sinks
    assert [d_s.at(P(e, k)) for e in (0, 1) for k in (0, 1)] == [
        {"a": 1}, {}, {"b": 1}, {}]
    assert [i_s.at(P(e, k)) for e in (0, 1) for k in (0, 1, 5)] == [
        {"a": 1}, {"a": 1}, {"a": 1}, {"a": 1, "b": 1}, {"a": 1, "b": 1}, {"a": 1, "b": 1}]
    assert [d1_s.at(P(e, k)) for e in (0, 1) for k in (0, 1)] == [{}, {"a": 1}, {}, {"b": 1}]
    assert i1_s.at(P(1, 0)) == {} and i1_s.at(P(1, 1)) == {"a": 1, "b": 1}
    assert out.at(0) == {"a": 2} and out.at(1) == {"b": 2}


def test_root_feedback_is_dbsp_integrator():
    """I(s) = s + z^-1(I(s)): a root cycle through the driver's z^-1."""
    c = Circuit()
    s = c.source()
    fb = c.feedback("I")
    total = fb.connect(plus(s, fb))
    loop, direct = c.sink(total), c.sink(integrate(s))
    rng = random.Random(7)
    for t in range(10):
        s.extend({rng.randrange(4): rng.choice([-1, 1, 2]) for _ in range(2)})
        c.tick()
        assert loop.at(t) == direct.at(t)


def test_failed_tick_rolls_back_and_can_be_retried():
    c = Circuit()
    xs = c.source()
    seen = []
    out = c.sink(xs.map(lambda x: 10 // x), callback=lambda t, z: seen.append((t, z)))
    xs.push(5)
    c.tick()
    xs.push(0)
    xs.push(2)
    with pytest.raises(UserFunctionError):
        c.tick()
    xs.push(0, -1)                      # the retraction cancels the bad record
    assert c.tick() == 1
    assert out.at(0) == {2: 1} and out.at(1) == {5: 1}
    assert seen == [(0, {2: 1}), (1, {5: 1})]
    xs.push(0)
    with pytest.raises(UserFunctionError):
        c.tick()
    xs.session.discard(0)               # or withdraw it from the session
    assert c.tick() == 2 and out.at(2) == {}


# -- clock hooks ---------------------------------------------------------------------------

def test_clock_hooks_by_scope():
    c = Circuit()
    xs = c.source("xs")
    log = []
    xs.node.on_clock_start(lambda sc, t: log.append(("root-node start", sc, t)))
    xs.node.on_clock_stop(lambda sc, t: log.append(("root-node stop", sc, t)))
    sub = c.child("chain")
    x = sub.import_stream(xs)
    fb = sub.feedback("next")
    # x, x+1, x+2 ... up to 3: three iterations after the first
    fb.connect(distinct_trace(plus(x, fb.filter(lambda v: v < 3).map(lambda v: v + 1))))
    inner = sub.nodes[0]
    inner.on_clock_start(lambda sc, t: log.append(("inner start", sc, t)))
    inner.on_clock_stop(lambda sc, t: log.append(("inner stop", sc, t)))
    xs.push(0)
    c.tick()
    assert log[0] == ("root-node start", 0, 0) and log[1] == ("inner start", 1, 0)
    assert log[-2:] == [("root-node stop", 0, 0), ("inner stop", 1, 0)]
    iterations = [(what, t) for what, sc, t in log[2:-2] if sc == 0]
    # start/stop, well nested, one per iteration 0..4 (4: the change that dies out)
    expected = []
    for i in range(5):
        expected += [("inner start", P(0, i)), ("inner stop", P(0, i))]
    assert iterations == expected
    log.clear()
    c.tick()                                   # no input: iteration 0 only
    assert [(w, t) for w, sc, t in log if w.startswith("inner") and sc == 0] == [
        ("inner start", P(1, 0)),
        ("inner stop", P(1, 0))]


def test_sink_in_child_calls_back_in_time_order():
    c = Circuit()
    xs = c.source()
    sub = c.child()
    x = sub.import_stream(xs)
    got = []
    sub.sink(x, delay(x), callback=lambda t, a, b: got.append((t, a, b)))
    xs.push("a")
    c.tick()
    assert got == [(P(0, 0), {"a": 1}, {}), (P(0, 1), {}, {"a": 1})]


# -- recursion as a child circuit agrees with iterate ---------------------------------

def _graph_changes(seed: int, epochs: int, nodes: int, per_epoch: int):
    rng = random.Random(seed)
    present: set = set()
    for _ in range(epochs):
        changes = []
        for _ in range(per_epoch):
            e = (rng.randrange(nodes), rng.randrange(nodes))
            if e in present:
                present.discard(e)
                changes.append((e, -1))
            elif (e, 1) not in changes:
                present.add(e)
                changes.append((e, 1))
        yield changes


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(3, 8), per_epoch=st.integers(1, 4))
def test_agree_circuit_recursion_with_iterate_over_30_epochs(seed, nodes, per_epoch):
    c = Circuit()
    edges, roots = c.source("edges"), c.source("roots")
    tc, reach = c.sink(_closure_circuit(c, edges)), c.sink(_reach_circuit(c, edges, roots))
    tc_iter = transitive_closure(edges.collection).capture()
    reach_iter = reachability(edges.collection, roots.collection).capture()
    rng = random.Random(seed)
    root_set: set = set()
    for epoch, changes in enumerate(_graph_changes(seed, 30, nodes, per_epoch)):
        for e, w in changes:
            edges.push(e, w)
        if rng.random() < 0.3:                      # roots come and go too
            r = rng.randrange(nodes)
            w = -1 if r in root_set else 1
            (root_set.discard if w < 0 else root_set.add)(r)
            roots.push(r, w)
        t = c.tick()
        assert tc.at(t) == {d: w for d, s, w in tc_iter.updates if s == t}
        assert reach.at(t) == {d: w for d, s, w in reach_iter.updates if s == t}
    assert tc.updates == tc_iter.updates and reach.updates == reach_iter.updates


def test_closure_circuit_on_a_path_and_a_deletion():
    c = Circuit()
    edges = c.source()
    out = c.sink(integrate(_closure_circuit(c, edges)))
    for e in [(1, 2), (2, 3), (3, 4)]:
        edges.push(e)
    c.tick()
    assert set(out.at(0)) == {(1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4)}
    edges.push((2, 3), -1)
    c.tick()
    assert out.at(1) == {(1, 2): 1, (3, 4): 1}


# -- drawings ------------------------------------------------------------------------------

def test_to_dot_shows_types_ids_clusters_and_delays():
    c = Circuit("tc")
    edges = c.source("edges")
    c.sink(_closure_circuit(c, edges), name="paths")
    dot = c.to_dot()
    assert dot.startswith('digraph "tc"') and dot.rstrip().endswith("}")
    assert "subgraph cluster_1" in dot and "child closure [1]" in dot
    assert 'label="z^-1\\nfeedback [1, 1]"' in dot
    assert "source [0]" in dot and "sink [2]" in dot and "import [1, 0]" in dot
    assert "constraint=false" in dot                 # the back edge into feedback
    assert 'label="export"' in dot
    # Edge labels ("export") were set at 8 pt once: every label is at least 9 pt.
    sizes = [float(x) for x in re.findall(r"fontsize=([\d.]+)", dot)]
    assert sizes and min(sizes) >= 9


def test_draw_makes_a_matplotlib_figure():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    c = Circuit("reach")
    edges, roots = c.source("edges"), c.source("roots")
    c.sink(_reach_circuit(c, edges, roots))
    c.sink(delay(edges))
    fig = c.draw()
    ax = fig.axes[0]
    texts = {t.get_text() for t in ax.texts}
    assert "z$^{-1}$" in texts and "distinct_trace" in texts
    assert any("child reach [2]" == t for t in texts)
    assert any(t.startswith("feedback [2, ") for t in texts)
    plt.close(fig)


def test_draw_puts_root_nodes_level_with_the_child_and_labels_at_9_pt():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from ddflow.circuit.draw import layout
    c = Circuit("reach")
    edges, roots = c.source("edges"), c.source("roots")
    change = _reach_circuit(c, edges, roots)
    c.sink(change, name="reached")
    c.sink(integrate(change), name="reached set")
    pos, frames = layout(c)
    (x0, y0, x1, y1), = frames.values()
    root = [n for n in pos if n.depth == 0]
    # sources and sinks sit beside the child's frame, within its height: no empty band
    assert root and all(y0 <= pos[n][1] <= y1 for n in root)
    assert all(pos[n][0] < x0 or pos[n][0] > x1 for n in root)
    # the feedback node starts the child, right of the sources feeding it
    fb, = [n for n in pos if n.kind == "feedback"]
    assert pos[fb][0] > max(pos[n][0] for n in root if n.kind == "source")
    # nodes in one column are at least a row apart
    for a in pos:
        for b in pos:
            if a is not b and pos[a][0] == pos[b][0]:
                assert abs(pos[a][1] - pos[b][1]) >= 1.1 - 1e-9
    fig = c.draw()
    ax = fig.axes[0]
    assert min(t.get_fontsize() for t in ax.texts) >= 9
    assert min(t.get_fontsize() for t in ax.get_legend().get_texts()) >= 9
    top = ax.get_ylim()[1]
    # the back edge's arc stays inside the axes (extents of the curve, not its control points)
    back = [p for p in ax.patches
            if type(p).__name__ == "FancyArrowPatch" and p.get_linestyle() == "--"]
    assert back and all(p.get_path().get_extents().y1 <= top for p in back)
    plt.close(fig)


def _circuits_to_draw() -> dict:
    reach = Circuit("reach")                     # notebook 09's circuit
    edges, roots = reach.source("edges"), reach.source("roots")
    change = _reach_circuit(reach, edges, roots)
    reach.sink(change, name="reached")
    reach.sink(integrate(change), name="reached set")
    both = Circuit("both")                       # two children, a root delay, fan-out
    e, r = both.source("edges"), both.source("roots")
    paths = _closure_circuit(both, e)
    both.sink(paths)
    both.sink(integrate(paths))
    both.sink(plus(_reach_circuit(both, e, r), delay(r)))
    return {"reach": reach, "both": both}


@pytest.mark.parametrize("name", ["reach", "both"])
def test_draw_routes_edges_around_boxes_and_captions(name):
    """Notebook 09's drawing ran edges through the captions of the nodes between their
    ends ("operator [2, 4]", "operator [2, 5]"): forward edges now turn in the gaps
    between columns and rows, and none crosses a box or a caption."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    c = _circuits_to_draw()[name]
    fig = c.draw()
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    to_data = ax.transData.inverted()

    def extent(artist):
        (x0, y0), (x1, y1) = to_data.transform(artist.get_window_extent(renderer).get_points())
        return x0, y0, x1, y1

    blocked = {a.get_gid(): extent(a) for a in [*ax.texts, *ax.patches]
               if (a.get_gid() or "").startswith(("box ", "caption "))}
    nodes = [n for n in c.walk() if n.kind != "child"]
    assert len(blocked) == 2 * len(nodes)
    arrows = [p for p in ax.patches if (p.get_gid() or "").startswith("edge ")]
    forward = [(s, d) for s, d, back, _l in draw_edges(c) if not back]
    assert len(arrows) == len(forward)
    for arrow in arrows:
        src, dst = arrow.get_gid()[len("edge "):].split(" -> ")
        path = arrow.get_path().interpolated(50).vertices
        for gid, (x0, y0, x1, y1) in blocked.items():
            if gid in (f"box {src}", f"box {dst}"):
                continue                # it leaves one side and enters the other
            inside = ((path[:, 0] > x0 + 0.02) & (path[:, 0] < x1 - 0.02)
                      & (path[:, 1] > y0 + 0.02) & (path[:, 1] < y1 - 0.02))
            assert not inside.any(), (arrow.get_gid(), gid)
    plt.close(fig)


# -- the engine's delay, which a root z^-1 compiles to ---------------------------------------

def test_engine_can_shift_a_collection_by_one_tick():
    out = evaluate(lambda c: c.delay(lambda data, time: time + 1),
                   [[("a", 0, 1), ("b", 2, 1)]])
    assert out == [("a", 1, 1), ("b", 3, 1)]
    with pytest.raises(ddflow.TimeError) as err:
        evaluate(lambda c: c.delay(lambda data, time: time - 1, name="back"), [[("a", 2, 1)]])
    assert err.value.operator == "back" and err.value.record == "a" and err.value.time == 2


def test_agree_circuit_on_simulated_workers():
    """The same circuit on 1 and 3 simulated workers: sinks, delays and child sinks
    read every worker's shard."""
    def build(workers):
        c = Circuit(workers=workers)
        edges = c.source("edges")
        closure = _closure_circuit(c, edges)
        sub = c.nodes[1].child
        sinks = [c.sink(closure), c.sink(integrate(closure)), c.sink(delay(edges) - edges),
                 sub.sink(sub.nodes[-1].outputs[0])]
        return c, edges, sinks

    runs = [build(w) for w in (1, 3)]
    for changes in _graph_changes(5, 8, 6, 3):
        for c, edges, _s in runs:
            for e, w in changes:
                edges.push(e, w)
            c.tick()
    (_c1, _e1, s1), (_c3, _e3, s3) = runs
    for a, b in zip(s1, s3):
        assert a.history() == b.history()


# -- every engine ------------------------------------------------------------------------------

def test_root_delay_is_the_engines_delay_and_sinks_read_by_time():
    """z^-1 of a stream compiles to the engine's `delay` (no input session, no driver
    work); the engine emits tick t + 1's updates while running tick t, and the sink
    still gives them to tick t + 1, because it reads its capture by time."""
    c = Circuit()
    xs = c.source("xs")
    late = c.sink(delay(xs))
    assert len(c.dataflow.sessions) == 1
    assert [n.kind for n in c.dataflow.nodes if n.name == "z^-1"] == ["linear"]
    xs.push("a")
    assert c.tick() == 0
    assert late.updates == [("a", 1, 1)]          # already emitted, at time 1
    assert late.at(0) == {}
    c.tick()
    assert late.history() == [(0, {}), (1, {"a": 1})]


def _everything_circuit(engine):
    """A circuit with both kinds of root z^-1 (the engine's delay, the driver's
    transfer for a root cycle and for integrating an integral stream), a child circuit
    with iteration, a child sink, an inspect, and iteration hooks."""
    c = Circuit(engine=engine)
    edges, roots = c.source("edges"), c.source("roots")
    closure = _closure_circuit(c, edges)
    reach = _reach_circuit(c, edges, roots)
    sub = c.nodes[2].child
    fb = c.feedback("I")
    total = fb.connect(plus(edges, fb))                      # driver: a root cycle
    seen = []
    sinks = [c.sink(closure), c.sink(integrate(closure)), c.sink(delay(edges) - edges),
             c.sink(total), c.sink(integrate(integrate(edges))),
             c.sink(consolidate(delay_trace(delay_trace(roots)))),
             c.sink(inspect(seen.append, delay(reach))),
             sub.sink(sub.nodes[-1].outputs[0], callback=lambda t, z: seen.append((t, z)))]
    hooks = []
    sub.nodes[1].on_clock_start(lambda sc, t: hooks.append(("start", sc, t)))
    sub.nodes[1].on_clock_stop(lambda sc, t: hooks.append(("stop", sc, t)))
    return c, (edges, roots), sinks, seen, hooks


@pytest.mark.parametrize("engine", [lambda: ddflow.LocalEngine(workers=3),
                                    lambda: InProcessShards(2)],
                         ids=["local-3-workers", "bsp-in-process"])
def test_agree_circuit_on_every_engine(engine):
    """The same circuit on `LocalEngine(workers=1)` and on another engine: every sink,
    inspect callback and iteration hook agrees, and the single-worker run agrees with
    the iterate forms and with integration done by hand."""
    runs = [_everything_circuit(None), _everything_circuit(engine())]
    # 2 sources + the root feedback + integrate(integral): the engine's delays add no
    # input session, the driver's z^-1 one each.
    assert [len(c.dataflow.sessions) for c, *_ in runs] == [4, 4]
    (c1, (edges1, roots1), _s, _seen, _h) = runs[0]
    tc_iter = transitive_closure(edges1.collection).capture()
    rng = random.Random(11)
    pushed: list = []
    for changes in _graph_changes(3, 6, 5, 3):
        root_change = (rng.randrange(5), 1)
        for c, (edges, roots), *_rest in runs:
            for e, w in changes:
                edges.push(e, w)
            roots.push(*root_change)
            c.tick()
        pushed.append(changes)
    (_c, _i, s1, seen1, hooks1), (_c3, _i3, s2, seen2, hooks2) = runs
    for a, b in zip(s1, s2):
        assert a.history() == b.history()
        assert a.updates == b.updates
    assert seen1 == seen2 and hooks1 == hooks2
    # and the single-worker run is right
    for t in range(len(pushed)):
        assert s1[0].at(t) == {d: w for d, s_, w in tc_iter.updates if s_ == t}
        running = {}
        for changes in pushed[:t + 1]:
            for d, w in changes:
                running[d] = running.get(d, 0) + w
        assert s1[3].at(t) == {d: w for d, w in running.items() if w}
    assert [h for h in hooks1 if h[1] == 1][:2] == [("start", 1, 0), ("stop", 1, 0)]
    iterations = [t for what, sc, t in hooks1 if sc == 0 and what == "start"]
    assert iterations[0] == P(0, 0) and len(iterations) > len(pushed)
