"""Loops reuse their work across epochs, stop when they must, and show their rounds.

What this file checks (issue 4, items 4 and 5, and their "done when"):

* differential reuse: reachability on a random graph of 2,000 nodes and 6,000 edges
  from 5 roots; after the initial load, 20 single-edge inserts then 20 single-edge
  deletes, one per epoch.  The median increase of `df.total_work()` per change is at
  most 1% of the initial load's work (work, not seconds: no timing in tests), and
  the answers agree with networkx along the way;
* convergence guard: a loop without `distinct` that oscillates is stopped at
  `max_rounds` by `ConvergenceError`, whose message names the loop and the outer time
  and says it oscillates with period 2; the step is rolled back, so the session
  still holds the offending record, and removing it makes the dataflow usable again;
  `on_limit="truncate"` returns what the loop has at its last round;
* termination by progress: a path of 400 nodes needs 399 rounds and converges;
* `df.loop_rows()`: one row per (outer time, round) with the changes that entered it.
"""

from __future__ import annotations

import random
import statistics

import networkx as nx
import pytest

import ddflow
from ddflow.algorithms import bfs, reachability

# -- differential reuse ---------------------------------------------------------------


def random_graph(seed: int, nodes: int, edges: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    out: set = set()
    while len(out) < edges:
        out.add((rng.randrange(nodes), rng.randrange(nodes)))
    return sorted(out)


def nx_reach(edges: set, roots: list) -> dict:
    g = nx.DiGraph(list(edges))
    out = set(roots)
    for r in roots:
        if r in g:
            out |= nx.descendants(g, r)
    return {n: 1 for n in out}


@pytest.mark.parametrize("seed", [0, 1])
def test_single_edge_changes_cost_a_tiny_fraction_of_the_initial_load(seed: int) -> None:
    nodes, n_edges, changes = 2_000, 6_000, 20
    rng = random.Random(seed)
    edges = random_graph(seed, nodes, n_edges)
    roots = rng.sample(range(nodes), 5)
    df = ddflow.Dataflow()
    e_in, edge_coll = df.new_collection("edges")
    r_in, root_coll = df.new_collection("roots")
    cap = reachability(edge_coll, root_coll).capture()
    for e in edges:
        e_in.insert(e)
    for r in roots:
        r_in.insert(r)
    live = set(edges)

    def step(epoch: int) -> int:
        before = df.total_work()
        e_in.advance_to(epoch + 1)
        r_in.advance_to(epoch + 1)
        df.run()
        return df.total_work() - before

    initial = step(0)
    assert cap.at(0) == nx_reach(live, roots)
    per_change = []
    for epoch in range(1, 2 * changes + 1):
        if epoch <= changes:
            e = (rng.randrange(nodes), rng.randrange(nodes))
            while e in live:
                e = (rng.randrange(nodes), rng.randrange(nodes))
            e_in.insert(e)
            live.add(e)
        else:
            e = rng.choice(sorted(live))
            e_in.remove(e)
            live.discard(e)
        per_change.append(step(epoch))
        if epoch % 10 == 0:
            assert cap.at(epoch) == nx_reach(live, roots), epoch
    median = statistics.median(per_change)
    assert median <= 0.01 * initial, (median, initial, per_change)


# -- the convergence guard ----------------------------------------------------------


def _flip(x: ddflow.Collection) -> ddflow.Collection:
    # No distinct: {0} -> {1} -> {0} ... the changes cancel and re-add forever.
    return x.map(lambda v: 1 - v)


def test_a_loop_whose_counts_grow_is_told_apart_from_one_that_oscillates() -> None:
    """Counting walks around a cycle (concat, no distinct) adds the same changes every
    round: the error said the loop "oscillates", as if records cancelled; it says the
    contents grow without bound."""
    df = ddflow.Dataflow()
    e_in, edges = df.new_collection("edges")
    r_in, roots = df.new_collection("roots")
    roots.iterate(lambda x: edges.enter(x.scope).join_map(x.map(lambda n: (n, ())),
                                                         lambda _a, b, _u: b)
                  .concat(roots.enter(x.scope)), max_rounds=20, name="walks").capture()
    for e in [(0, 1), (1, 0)]:
        e_in.insert(e)
    r_in.insert(0)
    advance(1, e_in, r_in)
    with pytest.raises(ddflow.ConvergenceError) as info:
        df.run()
    msg = str(info.value)
    assert "grow without bound" in msg and "oscillates" not in msg
    assert info.value.period == 2


def test_an_oscillating_loop_raises_and_the_dataflow_stays_usable() -> None:
    df = ddflow.Dataflow()
    c_in, c = df.new_collection("c")
    e_in, edges = df.new_collection("edges")
    r_in, roots = df.new_collection("roots")
    flip = c.iterate(_flip, max_rounds=40, name="flip").capture()
    reach = reachability(edges, roots).capture()
    c_in.insert(0)
    e_in.insert((1, 2))
    r_in.insert(1)
    # The loop runs an outer time once it is complete (its feedback waits for that).
    advance(1, c_in, e_in, r_in)
    with pytest.raises(ddflow.ConvergenceError) as info:
        df.run()
    err = info.value
    msg = str(err)
    assert "'flip'" in msg and "outer time 0" in msg and "max_rounds=40" in msg
    assert "oscillates" in msg and "every 2 round(s)" in msg
    assert (err.period, err.outer_time, err.round) == (2, 0, 41)
    assert err.operator == "flip"
    # Rolled back: nothing was recorded, and the sessions kept their updates; the
    # offending record is withdrawn from its session, the rest runs.
    assert flip.updates == [] and reach.updates == []
    assert c_in.discard(0) == [(0, 0, 1)]
    df.run()
    assert flip.updates == []
    assert reach.at(0) == {1: 1, 2: 1}
    e_in.insert((2, 3))
    advance(2, c_in, e_in, r_in)
    df.run()
    assert reach.at(1) == {1: 1, 2: 1, 3: 1}
    # A later offending input is named with its own outer time.
    c_in.insert(7)
    advance(3, c_in, e_in, r_in)
    with pytest.raises(ddflow.ConvergenceError, match="outer time 2") as info:
        df.run()
    assert info.value.period == 2
    c_in.discard(7)
    r_in.insert(4)
    advance(4, c_in, e_in, r_in)
    df.run()
    assert reach.at(3) == {1: 1, 2: 1, 3: 1, 4: 1}
    assert flip.updates == []


def advance(t: int, *sessions: ddflow.InputSession) -> None:
    for s in sessions:
        s.advance_to(t)


@pytest.mark.parametrize("max_rounds,last", [(4, 1), (5, 0)])
def test_truncate_returns_the_last_round(max_rounds: int, last: int) -> None:
    """With `on_limit="truncate"` the changes bound for round `max_rounds + 1` are
    dropped: the result is the loop body's output at round `max_rounds` (the flip
    of {0} is {1} at even rounds, {0} at odd ones)."""
    df = ddflow.Dataflow()
    c_in, c = df.new_collection()
    out = c.iterate(_flip, max_rounds=max_rounds, on_limit="truncate").capture()
    c_in.insert(0)
    c_in.close()
    df.run()
    assert out.at(0) == {last: 1}


def test_a_loop_of_hundreds_of_rounds_converges() -> None:
    """Termination is by progress (no pointstamp left at the outer time), not by a
    run of empty rounds: a path of 400 nodes takes 399 rounds."""
    n = 400
    df = ddflow.Dataflow()
    e_in, edges = df.new_collection()
    r_in, roots = df.new_collection()
    reach = reachability(edges, roots).capture()
    dist = bfs(edges, roots).capture()
    for i in range(n - 1):
        e_in.insert((i, i + 1))
    r_in.insert(0)
    e_in.advance_to(1)
    r_in.advance_to(1)
    df.run()
    assert reach.at(0) == {i: 1 for i in range(n)}
    assert dist.at(0) == {(i, i): 1 for i in range(n)}
    rounds = [r["round"] for r in df.loop_rows() if r["loop"] == "reachability"]
    assert max(rounds) == n - 1 > 300
    # A change at the far end costs a round count of its own, at the new epoch only.
    e_in.remove((n - 3, n - 2))
    e_in.advance_to(2)
    r_in.advance_to(2)
    df.run()
    assert reach.at(1) == {i: 1 for i in range(n - 2)}


# -- loop_rows ------------------------------------------------------------------------


def _net(sample: list) -> dict:
    acc: dict = {}
    for d, r in sample:
        acc[d] = acc.get(d, 0) + r
    return {d: r for d, r in acc.items() if r}


def test_loop_rows_follow_the_path_round_by_round() -> None:
    """Reachability along 0 -> 1 -> ... -> 5 from 0: at epoch 0, round r brings in
    node r; deleting (2, 3) at epoch 1 takes 3, 4, 5 out at rounds 3, 4, 5 of outer
    time 1 only, and leaves the rows of epoch 0 as they were.

    The net change per row is read from its sample: the raw `changes` count of
    round 1 also holds a cancelling pair (see test_engine_repro_feedback_cancel)."""
    df = ddflow.Dataflow()
    e_in, edges = df.new_collection()
    r_in, roots = df.new_collection()
    reachability(edges, roots).capture()
    for i in range(5):
        e_in.insert((i, i + 1))
    r_in.insert(0)
    e_in.advance_to(1)
    r_in.advance_to(1)
    df.run()
    first = df.loop_rows()
    assert {r["loop"] for r in first} == {"reachability"}
    assert [(r["outer"], r["round"]) for r in first] == [(0, k) for k in range(1, 6)]
    assert [_net(r["sample"]) for r in first] == [{k: 1} for k in range(1, 6)]
    assert all(r["changes"] == 1 for r in first[1:])

    e_in.remove((2, 3))
    e_in.advance_to(2)
    r_in.advance_to(2)
    df.run()
    rows = df.loop_rows()
    assert rows[:len(first)] == first
    later = rows[len(first):]
    assert [(r["outer"], r["round"], r["changes"]) for r in later] == [
        (1, 3, 1), (1, 4, 1), (1, 5, 1)]
    assert [_net(r["sample"]) for r in later] == [{3: -1}, {4: -1}, {5: -1}]


# -- the benchmark script runs (sizes only; no timing is asserted) ------------------


def test_benchmark_quick_run(tmp_path) -> None:
    from benchmarks.bench_reachability import main

    out = tmp_path / "reachability.json"
    result = main(["--quick", "--out", str(out)])
    assert out.exists()
    assert result["ddflow"]["agrees_with_networkx"]
    assert set(result) >= {"config", "ddflow", "networkx", "ratio"}
    assert len(result["ddflow"]["work_per_change"]) == 2 * result["config"]["changes"]
