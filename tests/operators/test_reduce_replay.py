"""Reduce by history replay: the records a reduce reads follow the change, not the
history (its law is checked in test_oracle_reduce.py)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

import ddflow
from ddflow.algorithms.graphs import connected_components
from ddflow.key_history import KeyHistory
from ddflow.updates import consolidate
from lattice import Antichain, Product as P, less_equal
from operators.history import floor_of, replay, replay_direct
from operators.reduce import Reduce


def _min_reads_after_one_edge(n: int) -> tuple[int, int, int]:
    """Connected components on a path of `n` nodes, then one edge adding a node at
    its end: for that change, the records the `min` reduce read (replayed and read
    at evaluations), the stored updates its traces read for it, and its output
    changes."""
    df = ddflow.Dataflow()
    edges_in, edges = df.new_collection()
    labels = connected_components(edges)
    out = labels.filter(lambda nl: nl[0] == n).capture()
    for i in range(n - 1):
        edges_in.insert((i, i + 1))
    edges_in.advance_to(1)
    df.run()
    node = next(nd for nd in df.nodes if nd.name == "connected_components.min")
    (red,) = df.engine.operators(node)
    traces = (red.source.trace, red.out_trace)
    reads_before = sum(t.history_reads for t in traces)
    before = {r["operator"]: r for r in df.metrics()}["connected_components.min"]
    edges_in.insert((n - 1, n))
    edges_in.advance_to(2)
    df.run()
    after = {r["operator"]: r for r in df.metrics()}["connected_components.min"]
    assert out.at(1) == {(n, 0): 1}      # the new node joins component 0
    return (after["work"] - before["work"], sum(t.history_reads for t in traces) - reads_before,
            after["records_out"] - before["records_out"])


def test_connected_components_path_reads_grow_linearly():
    """The new node's label falls by one per round, so the reduce's output changes
    grow linearly in the path length; the records it reads, and the stored updates
    read for it, grow by at most 2.5x per doubling (re-accumulating every key's
    history at every time read 4x)."""
    reads, stored, changes = zip(*[_min_reads_after_one_edge(n) for n in (50, 100, 200, 400)])
    for series in (reads, stored, changes):
        for small, big in zip(series, series[1:]):
            assert big <= 2.5 * small, series


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_replay_and_replay_direct_make_the_same_corrections(data):
    """One key's history at `Product` times, seeds among them: the general walk and
    the direct evaluation make the same corrections (consolidated), and every time
    one puts off is above a seed (the direct one may put off more: all the joins)."""
    times = st.builds(P, st.integers(0, 3), st.integers(0, 3))
    inputs = data.draw(st.lists(st.tuples(st.sampled_from("abc"), times,
                                          st.sampled_from([-1, 1, 2])), max_size=10))
    seeds = data.draw(st.lists(times, min_size=1, max_size=3))
    frontier = Antichain(data.draw(st.lists(times, max_size=2)))

    def correct(u, acc_in, acc_out):
        want = {len(acc_in): 1, sum(acc_in.values()): 1} if acc_in else {}
        for o, r in acc_out.items():
            want[o] = want.get(o, 0) - r
        return want

    floor = floor_of(seeds)
    walked, later_w, _ = replay(seeds, [KeyHistory.build(inputs, floor)], [],
                                frontier.less_equal, correct)
    direct, later_d, _ = replay_direct(seeds, inputs, [], frontier.less_equal, correct)
    assert consolidate(walked) == consolidate(direct)
    for t in later_w | later_d:
        assert frontier.less_equal(t) and any(less_equal(s, t) for s in seeds)
    assert all(any(less_equal(t, d) for d in later_d) for t in later_w)


def test_both_paths_run_in_a_loop():
    """Connected components over a cycle: its keys' histories are long enough for the
    general walk and short enough for the direct path in one run, and the answer is
    the same when every key takes one path."""
    answers = []
    for below in (Reduce.direct_below, 0, 10**9):
        old, Reduce.direct_below = Reduce.direct_below, below
        try:
            df = ddflow.Dataflow()
            edges_in, edges = df.new_collection()
            out = connected_components(edges).capture()
            for i in range(30):
                edges_in.insert((i, (i + 1) % 30))
            edges_in.insert((40, 41))
            edges_in.advance_to(1)
            df.run()
            edges_in.remove((29, 0))
            edges_in.remove((14, 15))
            edges_in.advance_to(2)
            df.run()
            answers.append((out.at(0), out.at(1)))
        finally:
            Reduce.direct_below = old
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][1][(20, 15)] == 1 and answers[0][1][(41, 40)] == 1
