"""Progress tracking edge by edge (`EdgeTracker`) against the tracker by path
summaries (`Tracker`) and the search of every path (`path_summaries_by_search`), on
random graphs of nested loops at int and Product times; and the plan's switch
between them (work counted, never timed)."""

from __future__ import annotations

import signal
import time
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.engine import plan as plan_module
from ddflow.engine.plan import Plan, set_tracking, tracking_for
from ddflow.errors import ProgressError
from ddflow.progress import Tracker
from ddflow.progress_edges import EdgeTracker, flat_key
from ddflow.summaries import (ENTER, IDENTITY, LEAVE, NEXT_ROUND, path_summaries,
                              path_summaries_by_search, port_numbers, reach_size)
from lattice import Antichain, Product, less_equal


@st.composite
def nested_graphs(draw, max_depth: int = 2):
    """A random graph of loops nested up to `max_depth` deep: in every scope, nodes
    reading one to three earlier nodes of the scope, and loops (an enter, one to
    three variables' heads reading the enter and each its own feedback, a body, the
    feedbacks, one or two leaves).  Also the scope depth of every location (node
    outputs first, then ports)."""
    inputs: list[tuple] = []
    steps: list = []
    depth_out: list[int] = []

    def add(ins: tuple, step, depth: int) -> int:
        inputs.append(ins)
        steps.append(step)
        depth_out.append(depth)
        return len(inputs) - 1

    def scope(depth: int, entry: int, heads: list | None = None) -> list[int]:
        nodes = [entry, *(heads or [])[1:]]
        for _ in range(draw(st.integers(1, 3))):
            kinds = ["one", "two", "loop"] if depth < max_depth else ["one", "two"]
            kind = draw(st.sampled_from(kinds))
            if kind == "one":
                nodes.append(add((draw(st.sampled_from(nodes)),), IDENTITY, depth))
            elif kind == "two":
                ins = draw(st.lists(st.sampled_from(nodes), min_size=2, max_size=3))
                nodes.append(add(tuple(ins), IDENTITY, depth))
            else:
                # One to three variables: a head each, reading the enter and its
                # own feedback, fed back from anywhere in the body.
                enter = add((draw(st.sampled_from(nodes)),), ENTER, depth + 1)
                heads = [add((enter,), IDENTITY, depth + 1)
                         for _ in range(draw(st.integers(1, 3)))]
                body = scope(depth + 1, heads[0], heads)
                for head in heads:
                    feedback = add((draw(st.sampled_from(body)),), NEXT_ROUND, depth + 1)
                    inputs[head] = (enter, feedback)
                for last in draw(st.lists(st.sampled_from(body), min_size=1, max_size=2)):
                    nodes.append(add((last,), LEAVE, depth))
        return nodes[1:] if len(nodes) > 1 else nodes

    scope(0, add((), IDENTITY, 0))
    ports = port_numbers(inputs)
    depth = list(depth_out) + [0] * sum(len(ps) for ps in ports)
    for i, ps in enumerate(ports):
        for p, port in enumerate(ps):
            depth[port] = depth_out[inputs[i][p]] if inputs[i] else 0
    return inputs, steps, depth


@contextmanager
def _no_hang(seconds: float = 20):
    """Fail instead of hanging: a tracker that takes changes in the wrong order
    chases a removal and the time it implied around a loop for ever.  The real-time
    timer is pytest-timeout's too: what it had left is given back after."""
    def fail(_signum, _frame):
        raise AssertionError(f"propagation did not end within {seconds} s")
    previous = signal.signal(signal.SIGALRM, fail)
    left, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    if left and left <= seconds:         # the outer timeout comes first: leave it
        signal.setitimer(signal.ITIMER_REAL, left, interval)
        signal.signal(signal.SIGALRM, previous)
        yield
        return
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if left:
            signal.setitimer(signal.ITIMER_REAL,
                             max(left - (time.monotonic() - started), 1e-3), interval)


def _time(depth: int, coords: list[int], root_product: bool):
    t = Product(coords[0], coords[1]) if root_product else coords[0]
    for r in coords[2:2 + depth]:
        t = Product(t, r)
    return t


def _frontiers(tracker, n: int) -> list:
    return [tracker.frontiers(i) for i in range(n)]


@settings(max_examples=120, deadline=None)
@given(nested_graphs(), st.booleans(), st.data())
def test_agree_edge_tracker_and_path_tracker_on_nested_loops(graph, root_product, data):
    """After every propagate, the tracker by edges hands every port the frontier the
    tracker by path summaries does (both checked by their `_check`: the edge
    tracker's also against the path summaries' fixed point), and reports every
    watched node whose frontiers moved since it last read them."""
    inputs, steps, depth = graph
    n = len(inputs)
    watched = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    by_paths = Tracker(port_numbers(inputs), path_summaries(inputs, steps), watched)
    by_edges = EdgeTracker(inputs, steps, watched)
    told = {id(tr): _frontiers(tr, n) for tr in (by_paths, by_edges)}
    live: list = []
    for _ in range(data.draw(st.integers(1, 10))):
        if live and data.draw(st.booleans()):
            location, t, k = live.pop(data.draw(st.integers(0, len(live) - 1)))
            changes = [(location, t, -k)]
        else:
            changes = []
            for _ in range(data.draw(st.integers(1, 3))):
                location = data.draw(st.integers(0, len(depth) - 1))
                coords = data.draw(st.lists(st.integers(0, 3), min_size=4, max_size=4))
                t = _time(depth[location], coords, root_product)
                k = data.draw(st.integers(1, 2))
                live.append((location, t, k))
                changes.append((location, t, k))
        for tr in (by_paths, by_edges):
            for location, t, k in changes:
                tr.update(location, t, k)
            with _no_hang():
                moved = tr.propagate()
            tr._check()
            now = _frontiers(tr, n)
            for i in range(n):
                if watched[i] and now[i] != told[id(tr)][i]:
                    assert i in moved, (type(tr).__name__, i)
            told[id(tr)] = now
        assert told[id(by_edges)] == told[id(by_paths)]
    # Everything taken back: every frontier is empty again.
    for tr in (by_paths, by_edges):
        for location, t, k in live:
            tr.update(location, t, -k)
        with _no_hang():
            tr.propagate()
        tr._check()
        assert all(f == Antichain() for fs in _frontiers(tr, n) for f in fs)


@settings(max_examples=40, deadline=None)
@given(nested_graphs(max_depth=3))
def test_agree_path_summaries_on_nested_loops(graph):
    """The per-node path summaries (which `EdgeTracker._check` compares against, and
    the paths tracker pushes along) are the search's on these graphs too, and
    `reach_size` counts them."""
    inputs, steps, _depth = graph
    def as_sets(reach):
        return [{port: set(ss) for port, ss in r} for r in reach]
    reach = path_summaries(inputs, steps)
    assert as_sets(reach) == as_sets(path_summaries_by_search(inputs, steps))
    # And `reach_size` (the switch's measure) counts its pairs without building it.
    assert reach_size(inputs) == sum(len(r) for r in reach)


@settings(max_examples=200)
@given(st.lists(st.integers(0, 3), min_size=5, max_size=5),
       st.lists(st.integers(0, 3), min_size=5, max_size=5), st.integers(0, 2))
def test_laws_flat_key_extends_every_scope_and_orders_its_outer_time_first(c1, c2, d):
    """`flat_key` is a linear extension of the product order within a scope (and
    tells times apart), and an outer time sorts before its own rounds: a leave
    lowers the key, an enter or a feedback raises it."""
    a, b = _time(d, c1, True), _time(d, c2, True)
    if less_equal(a, b):
        assert flat_key(a) <= flat_key(b)
    assert (flat_key(a) == flat_key(b)) == (a == b)
    inner = _time(d + 1, c1, False)
    assert flat_key(LEAVE.apply(inner)) < flat_key(inner) < flat_key(ENTER.apply(inner))
    assert flat_key(NEXT_ROUND.apply(inner)) > flat_key(inner)


def test_edge_tracker_rejects_a_count_below_zero_and_says_the_time():
    tr = EdgeTracker([[], [0]], [IDENTITY, IDENTITY])
    tr.update(0, 3, -1)
    with pytest.raises(ProgressError, match="3"):
        tr.propagate()


def _chain(steps: int):
    """A chain of concat + distinct (4 nodes a step), one record through it."""
    df = ddflow.Dataflow()
    s, c = df.new_collection()
    x = c
    for _ in range(steps):
        x = x.concat(c).distinct()
    cap = x.capture()
    s.insert(1)
    s.advance_to(1)
    return df, s, cap


def test_work_a_long_chain_builds_no_path_table_and_pushes_each_frontier_once():
    """Past `PATHS_UP_TO` nodes a plan gets the edge tracker (no path summaries:
    `reach` is None), and the first run's frontier changes are linear in the
    graph: each location's frontier moves a bounded number of times (the time 0
    comes and goes), not once per location upstream of it."""
    old = set_tracking("auto")
    try:
        df, s, cap = _chain(300)
        df.run()
    finally:
        set_tracking(old)
    tracker = df.engine._worker.tracker
    assert isinstance(tracker, EdgeTracker) and df.engine._worker.plan.reach is None
    n_locations = len(tracker.implied)
    assert reach_size([pn.inputs for pn in df.engine._worker.plan.nodes]) > \
        plan_module.PATHS_UP_TO
    assert tracker.pushed <= 4 * n_locations, (tracker.pushed, n_locations)
    tracker._check()
    pushed = tracker.pushed
    s.insert(2)
    s.advance_to(2)
    df.run()
    assert tracker.pushed - pushed <= 4 * n_locations
    assert cap.at(1) == {1: 1, 2: 1}


def test_set_tracking_chooses_the_tracker_of_the_next_plans():
    nodes, summaries = _plan_graph()
    try:
        for mode, kind in (("paths", Tracker), ("edges", EdgeTracker)):
            set_tracking(mode)
            assert tracking_for([()]) == mode
            plan = Plan.of(nodes, summaries)
            assert isinstance(plan.tracker(), kind)
            assert (plan.reach is None) == (mode == "edges")
        set_tracking("auto")
        # By the size of the path table: a chain of k nodes lists k(k+1)/2 + k(k-1)/2.
        for k in (400, 800):
            chain = [()] + [(i,) for i in range(k - 1)]
            size = reach_size(chain)
            assert size == k * k
            assert tracking_for(chain) == ("paths" if size <= plan_module.PATHS_UP_TO
                                           else "edges")
        assert tracking_for([[]] * 10**4) == "paths"      # many nodes, no paths
        with pytest.raises(ValueError, match="tracking"):
            set_tracking("all")
    finally:
        set_tracking("auto")


def _plan_graph():
    """A dataflow of a loop (reachability), its front-door nodes and summaries."""
    from ddflow.algorithms.graphs import reachability
    from ddflow.engine.plan import instantiate
    df = ddflow.Dataflow()
    _e_in, e = df.new_collection()
    _r_in, r = df.new_collection()
    reachability(e, r).capture()
    nodes = list(df.nodes)
    return nodes, [op.summary for op in instantiate(nodes, 0)]


def test_plan_cyclic_is_whether_a_node_reaches_its_own_input():
    """`Plan.cyclic` (from the graph's components) is what the path summaries say:
    the node's output reaches one of its own input ports."""
    nodes, summaries = _plan_graph()
    old = set_tracking("paths")
    try:
        plan = Plan.of(nodes, summaries)
    finally:
        set_tracking(old)
    want = tuple(any(port in plan.ports[i] for port, _ss in plan.reach[i])
                 for i in range(len(nodes)))
    assert plan.cyclic == want and any(want) and not all(want)


def test_work_hops_stay_linear_on_a_chain_with_a_reader_at_every_step():
    """A chain of unwatched maps, each also read by a watched distinct: without a
    junction on the chain every map would hop to every distinct downstream (a
    quadratic table); the ports of a node read twice are junctions, so every
    location hops to at most two."""
    for n in (100, 400):
        inputs, watched = [()], [False]
        for _ in range(n):
            inputs.append((len(inputs) - 1 if len(inputs) == 1 else len(inputs) - 2,))
            watched.append(False)
            inputs.append((len(inputs) - 1,))
            watched.append(True)
        tracker = EdgeTracker(inputs, [IDENTITY] * len(inputs), watched)
        assert sum(len(hops) for hops in tracker._onward) <= 2 * len(tracker.implied)
        tracker.update(0, 5, 1)
        tracker.propagate()
        tracker._check()
        assert tracker.pushed <= 2 * n + 2


def test_a_loop_with_no_feedback_is_refused_by_name():
    """A loop that adds no round (the front door builds none, but a graph can say
    it): counts passed round it would hold each other up after the pointstamp is
    gone, so the edge tracker refuses it, naming its nodes (the paths tracker
    counts from the pointstamps themselves and takes it)."""
    inputs = [[], [0, 2], [1]]
    with pytest.raises(ProgressError, match=r"nodes \[1, 2\] form a loop with no feedback"):
        EdgeTracker(inputs, [IDENTITY] * 3)
    by_paths = Tracker(port_numbers(inputs), path_summaries(inputs, [IDENTITY] * 3))
    by_paths.update(2, 7, 1)
    by_paths.propagate()
    by_paths.update(2, 7, -1)
    by_paths.propagate()
    by_paths._check()
    assert by_paths.frontiers(1) == (Antichain(), Antichain())
