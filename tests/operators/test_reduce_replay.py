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


def _count_correct(u, acc_in, acc_out):
    want = {len(acc_in): 1, sum(acc_in.values()): 1} if acc_in else {}
    for o, r in acc_out.items():
        want[o] = want.get(o, 0) - r
    return want


def _both(seeds, inputs, frontier):
    floor = floor_of(seeds)
    walked, later_w, _ = replay(seeds, [KeyHistory.build(inputs, floor)], [],
                                frontier.less_equal, _count_correct)
    direct, later_d, _ = replay_direct(seeds, inputs, [], frontier.less_equal, _count_correct)
    return walked, later_w, direct, later_d


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_replay_puts_off_what_the_direct_path_puts_off_both_ways(data):
    """Every time the walk puts off lies above one the direct path puts off, and a
    walk that stops early still puts off the seeds it has not reached (mutation
    testing: dropping them survived a one-way check).  The direct path may put off
    more: a time whose accumulations the walk's history, advanced to its floor, shows
    equal to a seed's (`('b', (0, 1), -1)` and `('b', (1, 1), 1)` from seed `(1, 0)`:
    both at `(1, 1)` there, cancelled) needs no replay, and the walk rightly skips it.
    So, with the frontier gone, the replays from the put-off times make the same
    corrections, whichever side put off what."""
    times = st.builds(P, st.integers(0, 3), st.integers(0, 3))
    inputs = data.draw(st.lists(st.tuples(st.sampled_from("abc"), times,
                                          st.sampled_from([-1, 1, 2])), max_size=10))
    seeds = data.draw(st.lists(times, min_size=1, max_size=4))
    frontier = Antichain(data.draw(st.lists(times, min_size=1, max_size=2)))
    walked, later_w, direct, later_d = _both(seeds, inputs, frontier)
    assert consolidate(walked) == consolidate(direct)
    assert all(any(less_equal(t, d) for d in later_d) for t in later_w)
    for s in seeds:
        if frontier.less_equal(s):
            assert any(less_equal(w, s) for w in later_w), (s, later_w)
    rest_w: list = []
    if later_w:
        outputs = [(o, t, r) for o, t, r in consolidate(walked)]
        rest_w, _l, _w = replay(sorted(later_w, key=lambda t: t.sort_key()),
                                [KeyHistory.build(inputs, floor_of(later_w))],
                                [KeyHistory.build(outputs, floor_of(later_w))],
                                lambda t: False, _count_correct)
    rest_d: list = []
    if later_d:
        rest_d, _l, _w = replay_direct(sorted(later_d, key=lambda t: t.sort_key()), inputs,
                                       consolidate(direct), lambda t: False, _count_correct)
    assert consolidate(rest_w) == consolidate(rest_d), (later_w, later_d)


def test_a_time_whose_input_cancels_at_the_floor_is_put_off_by_the_direct_path_alone():
    """Hypothesis found it: from seed `(1, 0)` under frontier `{(0, 1)}`, the direct
    path puts off `(1, 1)` (a join of the seed with an input time), while the walk's
    history, advanced to the floor `(1, 0)`, holds the two updates at `(1, 1)`
    cancelled: nothing changes after the seed, nothing to put off.  Both make no
    correction now, and none when `(1, 1)` is replayed."""
    inputs = [("b", P(0, 1), -1), ("b", P(1, 1), 1)]
    walked, later_w, direct, later_d = _both([P(1, 0)], inputs, Antichain([P(0, 1)]))
    assert consolidate(walked) == consolidate(direct) == []
    assert later_w == set() and later_d == {P(1, 1)}
    rest_d, _l, _w = replay_direct([P(1, 1)], inputs, [], lambda t: False, _count_correct)
    assert consolidate(rest_d) == []


@st.composite
def _joins_with_input_times(draw):
    """A key's history built to need a join of an interesting time with an input
    update's time that is neither a seed nor a join of seeds: an update at
    `(a, d)` met before the seed `(c, b)` (c > a, d > b), whose join `(c, d)` the
    walk must create from the update (mutation testing: a generator drawing times
    uniformly builds this shape in 2.4% of cases)."""
    a, b = draw(st.integers(0, 1)), draw(st.integers(0, 1))
    c, d = draw(st.integers(a + 1, 3)), draw(st.integers(b + 1, 3))
    seed = P(c, b)
    inputs = [(draw(st.sampled_from("abc")), P(a, d), draw(st.sampled_from([1, 2]))),
              (draw(st.sampled_from("abc")), seed, 1)]
    times = st.builds(P, st.integers(0, 3), st.integers(0, 3))
    inputs += draw(st.lists(st.tuples(st.sampled_from("abc"), times,
                                      st.sampled_from([-1, 1, 2])), max_size=4))
    seeds = [seed] + draw(st.lists(times.filter(lambda t: not less_equal(t, P(a, d))),
                                   max_size=1))
    return draw(st.permutations(inputs)), seeds


@settings(max_examples=100, deadline=None)
@given(case=_joins_with_input_times())
def test_replay_joins_an_interesting_time_with_input_update_times(case):
    inputs, seeds = case
    walked, _lw, direct, _ld = _both(seeds, inputs, Antichain())
    assert consolidate(walked) == consolidate(direct)
