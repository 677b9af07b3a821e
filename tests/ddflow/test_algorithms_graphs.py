"""The graph algorithms against networkx, epoch by epoch, and the law at Product times.

Oracle tests (the `test_oracle_*` family under this module's name):

* a sliding window over a random graph: every epoch inserts some edges (short
  cycles and self loops among them) and deletes the oldest ones, the roots change
  now and then; after each epoch's `advance_to` + `run`, `cap.at(epoch)` must equal
  networkx's answer on that epoch's graph, multiplicities included (every answer is
  a set);
* hand-made cases: cutting the one edge from a root into a cycle must make the
  cycle unreachable (the trap of propagating along a cycle that props itself up),
  splitting and merging components;
* a two-dimensional outer time: edges change along the first coordinate and roots
  along the second, and every point of the grid is checked;
* hypothesis: random edge and root histories at `Product(a, b)` times, through
  `ddflow.testing.evaluate`, and `check_law` against a plain Python fixpoint at
  every time of the join-closure (loop times have three coordinates, four for SCC).

Conventions the oracles follow (they are the algorithms' documented ones): the
nodes of a graph are the endpoints of its edges; reachability and BFS count each
root as reached at distance 0, even with no edges; the transitive closure holds
`(v, v)` only when `v` is on a cycle (networkx's `reflexive=False`); component
labels are the least node of the component.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import networkx as nx
import pytest
from hypothesis import given, settings, strategies as st

import ddflow
from ddflow.algorithms import (bfs, connected_components, k_core, reachability,
                               strongly_connected, strongly_connected_components,
                               transitive_closure)
from ddflow.algorithms import graphs
from ddflow.testing import check_law, evaluate
from lattice import Product as P
from operators.reduce import Reduce

# Every test here runs with batches in rows and in columns (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("both_layouts")

SCHEDULINGS = ["scheduled", "round0", "no-chain"]
LAYOUTS = ["rows", "columns", "columns-keyreads"]      # `both_layouts` in tests/conftest.py


@pytest.fixture(autouse=True, scope="module", params=SCHEDULINGS)
def round_scheduling(request):
    """Every test here runs with label propagation round-scheduled (`propagate_at`,
    the default), then with every label at round 0 (`propagate`), so both answer to
    networkx and to the law; and round-scheduled with the reduce's chain walk off
    (`Reduce.chain_replay`), so its keys take the general replay.  (Module-scoped:
    hypothesis refuses function-scoped fixtures around examples.)"""
    before = graphs.ROUND_SCHEDULING, Reduce.chain_replay
    graphs.ROUND_SCHEDULING = request.param != "round0"
    Reduce.chain_replay = request.param != "no-chain"
    yield request.param
    graphs.ROUND_SCHEDULING, Reduce.chain_replay = before

# -- oracles on a plain edge set --------------------------------------------------


def _graph(edges: set) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_edges_from(edges)
    return g


def nx_reachability(edges: set, roots: set) -> dict:
    g = _graph(edges)
    out = set(roots)
    for r in roots:
        if r in g:
            out |= nx.descendants(g, r)
    return {n: 1 for n in out}


def nx_bfs(edges: set, roots: set) -> dict:
    g = _graph(edges)
    dist: dict = {r: 0 for r in roots}
    for r in roots:
        if r in g:
            for n, d in nx.single_source_shortest_path_length(g, r).items():
                dist[n] = min(d, dist.get(n, d))
    return {(n, d): 1 for n, d in dist.items()}


def _labels(components: Any) -> dict:
    return {(n, min(c)): 1 for c in components for n in c}


def nx_components(edges: set, roots: set = frozenset()) -> dict:
    return _labels(nx.connected_components(_graph(edges).to_undirected()))


def nx_scc(edges: set, roots: set = frozenset()) -> dict:
    return _labels(nx.strongly_connected_components(_graph(edges)))


def nx_closure(edges: set, roots: set = frozenset()) -> dict:
    return {e: 1 for e in nx.transitive_closure(_graph(edges), reflexive=False).edges()}


def nx_two_core(edges: set, roots: set = frozenset()) -> dict:
    g = _graph(edges).to_undirected()
    g.remove_edges_from(list(nx.selfloop_edges(g)))
    return {e: 1 for u, v in nx.k_core(g, 2).edges() for e in ((u, v), (v, u))}


def _partition(labels: dict) -> set:
    groups: dict = {}
    for (n, label), _m in labels.items():
        groups.setdefault(label, set()).add(n)
    return {frozenset(g) for g in groups.values()}


ALGORITHMS: dict[str, tuple[Callable, Callable]] = {
    "reachability": (reachability, nx_reachability),
    "bfs": (bfs, nx_bfs),
    "connected_components": (lambda e, r: connected_components(e), nx_components),
    "strongly_connected_components": (lambda e, r: strongly_connected_components(e), nx_scc),
    "transitive_closure": (lambda e, r: transitive_closure(e), nx_closure),
    "k_core": (lambda e, r: k_core(e, 2), nx_two_core),
}


# -- a sliding window over a random graph -------------------------------------------


def sliding_window(seed: int, nodes: int = 40, epochs: int = 32, window: int = 60,
                   per_epoch: int = 6) -> list[tuple[list, list, list, list]]:
    """Per epoch: (edges inserted, edges deleted, roots inserted, roots deleted).

    Inserts are random edges, now and then a 3-cycle or a self loop; the oldest
    edges beyond `window` are deleted, plus now and then a random live one, so
    reachable cycles get cut off their roots and components split.
    """
    rng = random.Random(seed)
    live: list = []
    roots: set = set()
    out = []
    for epoch in range(epochs):
        ins: list = []
        count = window if epoch == 0 else per_epoch

        def add(e: tuple) -> None:
            if e not in live and e not in ins:
                ins.append(e)

        while len(ins) < count:
            kind = rng.random()
            if kind < 0.15:
                a, b, c = rng.sample(range(nodes), 3)
                for e in ((a, b), (b, c), (c, a)):
                    add(e)
            elif kind < 0.2:
                v = rng.randrange(nodes)
                add((v, v))
            else:
                add((rng.randrange(nodes), rng.randrange(nodes)))
        live.extend(ins)
        dels = live[:max(0, len(live) - window)] if epoch else []
        if epoch and rng.random() < 0.5:
            extra = rng.choice(live[len(dels):len(live) - len(ins)] or [None])
            if extra is not None:
                dels.append(extra)
        live = [e for e in live if e not in dels]
        r_ins, r_dels = [], []
        if epoch == 0:
            r_ins = rng.sample(range(nodes), 2)
        elif rng.random() < 0.2:
            v = rng.randrange(nodes)
            (r_dels if v in roots else r_ins).append(v)
        roots |= set(r_ins)
        roots -= set(r_dels)
        out.append((ins, dels, r_ins, r_dels))
    return out


def run_epochs(name: str, schedule: list, *, workers: int = 1, product: bool = False,
               check_every: int = 1) -> ddflow.Dataflow:
    """Feed `schedule` epoch by epoch and compare with networkx after each run."""
    build, oracle = ALGORITHMS[name]
    df = ddflow.Dataflow(time=P(0, 0) if product else 0, workers=workers)
    e_in, edges = df.new_collection("edges")
    r_in, roots = df.new_collection("roots")
    cap = build(edges, roots).capture()
    live: set = set()
    live_roots: set = set()
    for epoch, (ins, dels, r_ins, r_dels) in enumerate(schedule):
        for e in ins:
            e_in.insert(e)
        for e in dels:
            e_in.remove(e)
        for r in r_ins:
            r_in.insert(r)
        for r in r_dels:
            r_in.remove(r)
        live = (live | set(ins)) - set(dels)
        live_roots = (live_roots | set(r_ins)) - set(r_dels)
        nxt = P(epoch + 1, 0) if product else epoch + 1
        e_in.advance_to(nxt)
        r_in.advance_to(nxt)
        df.run()
        if epoch % check_every == 0 or epoch == len(schedule) - 1:
            t = P(epoch, 0) if product else epoch
            assert cap.is_final(t)
            expected = oracle(live, live_roots)
            got = cap.at(t)
            assert got == expected, _mismatch(name, epoch, expected, got)
    return df


def _mismatch(name: str, epoch: int, expected: dict, got: dict) -> str:
    missing = sorted(set(expected) - set(got), key=repr)[:10]
    extra = sorted(((d, m) for d, m in got.items() if expected.get(d) != m), key=repr)[:10]
    return f"{name} differs from networkx at epoch {epoch}: missing {missing}, wrong {extra}"


SEEDS = [0, 1, 2]
#: Graph sizes per algorithm, to keep the file fast: SCC's doubly nested loop takes
#: a hundred or so scheduling passes per epoch, and a closure is quadratic.
SIZES: dict[str, dict] = {
    "strongly_connected_components": dict(nodes=30, window=30, per_epoch=3),
    "transitive_closure": dict(nodes=30, window=45, per_epoch=5),
}


def _window(name: str, seed: int, **kw: Any) -> list:
    return sliding_window(seed, **{**SIZES.get(name, {}), **kw})


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_oracle_sliding_window(name: str, both_layouts: str, round_scheduling: str) -> None:
    """One seed per module variant, as a Latin square over layout x scheduling: every
    layout and every scheduling meets all three windows, and the nine variants cost
    three windows per algorithm rather than nine."""
    square = (LAYOUTS.index(both_layouts) + SCHEDULINGS.index(round_scheduling)) % len(SEEDS)
    run_epochs(name, _window(name, SEEDS[square]))


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_oracle_sliding_window_product_outer_time(name: str) -> None:
    """The same with outer times `Product(epoch, 0)`: loop times gain a coordinate."""
    run_epochs(name, _window(name, 7, epochs=16), product=True, check_every=3)


@pytest.mark.parametrize("name,epochs", [("reachability", 30), ("bfs", 30),
                                         ("connected_components", 30),
                                         ("strongly_connected_components", 10)])
def test_oracle_sliding_window_three_workers(name: str, epochs: int) -> None:
    """Keys sharded over three simulated workers, exchanged inside the loops."""
    run_epochs(name, _window(name, 11, epochs=epochs), workers=3)


def test_partitions_match_networkx() -> None:
    """The labels already equal networkx's least-node labels epoch by epoch; here the
    partitions themselves are compared with networkx's component sets."""
    schedule = sliding_window(3, nodes=30, epochs=8, window=30, per_epoch=3)
    live: set = set()
    for ins, dels, _ri, _rd in schedule:
        live = (live | set(ins)) - set(dels)
    for name, nx_fn in (("connected_components", nx.connected_components),
                        ("strongly_connected_components", nx.strongly_connected_components)):
        df = run_epochs(name, schedule)
        cap = df.captures[0]
        g = _graph(live)
        if name == "connected_components":
            g = g.to_undirected()
        assert _partition(cap.at(len(schedule) - 1)) == {frozenset(c) for c in nx_fn(g)}


# -- hand-made cases ----------------------------------------------------------------


def _epochs(name: str, steps: list[tuple[list, list, list]]) -> list[dict]:
    """Run `name` on `steps` of (edges inserted, edges deleted, roots inserted);
    return the accumulation after every epoch, checked against networkx as well."""
    schedule = [(ins, dels, roots, []) for ins, dels, roots in steps]
    df = run_epochs(name, schedule)
    cap = df.captures[0]
    return [cap.at(e) for e in range(len(steps))]


def test_cutting_the_edge_into_a_cycle_makes_the_cycle_unreachable() -> None:
    cycle = [(1, 2), (2, 3), (3, 1), (3, 4)]
    steps = [([(0, 1)] + cycle, [], [0]),
             ([], [(0, 1)], []),               # the cycle keeps itself "reached" no more
             ([(0, 5), (5, 2)], [], [])]       # back in, by a longer way round
    reach = _epochs("reachability", steps)
    assert reach == [{0: 1, 1: 1, 2: 1, 3: 1, 4: 1}, {0: 1},
                     {0: 1, 5: 1, 2: 1, 3: 1, 1: 1, 4: 1}]
    dist = _epochs("bfs", steps)
    assert dist == [{(0, 0): 1, (1, 1): 1, (2, 2): 1, (3, 3): 1, (4, 4): 1}, {(0, 0): 1},
                    {(0, 0): 1, (5, 1): 1, (2, 2): 1, (3, 3): 1, (1, 4): 1, (4, 4): 1}]
    closure = _epochs("transitive_closure", steps)
    assert (1, 1) in closure[0] and (0, 4) in closure[0] and (0, 1) not in closure[1]


def test_components_split_and_merge() -> None:
    steps = [([(1, 2), (2, 3), (3, 1), (3, 4), (5, 6)], [], []),
             ([], [(3, 1)], []),               # SCC {1, 2, 3} breaks; CC stays
             ([(4, 5)], [(1, 2)], []),         # CC {1} leaves, {2..6} merge
             ([(6, 2)], [], [])]               # SCC {2, 3, 4, 5, 6} forms
    scc = _epochs("strongly_connected_components", steps)
    assert _partition(scc[0]) == {frozenset({1, 2, 3}), frozenset({4}), frozenset({5}),
                                  frozenset({6})}
    assert all(n == label for n, label in scc[1])
    assert _partition(scc[3]) == {frozenset({2, 3, 4, 5, 6})}
    cc = _epochs("connected_components", steps)
    assert _partition(cc[1]) == {frozenset({1, 2, 3, 4}), frozenset({5, 6})}
    assert _partition(cc[2]) == {frozenset({2, 3, 4, 5, 6})}


def test_algorithms_inside_a_loop() -> None:
    """The algorithms nest: reachability from what reachability reaches is a
    fixpoint after one round, and the loops inside run at nested Product times."""
    df = ddflow.Dataflow()
    e_in, edges = df.new_collection()
    r_in, roots = df.new_collection()
    outer = roots.iterate(lambda inner: reachability(edges.enter(inner.scope), inner),
                          name="outer")
    # The edges inside SCCs of the edges inside SCCs: a fixpoint after one round,
    # with the SCC loops at Product(Product(Product(epoch, r0), r1), r2).
    scc = edges.iterate(strongly_connected, name="scc_nest")
    cap, cap_scc = outer.capture(), scc.capture()
    for e in [(0, 1), (1, 2), (2, 0), (3, 4)]:
        e_in.insert(e)
    r_in.insert(0)
    e_in.close()
    r_in.close()
    df.run()
    assert cap.at(0) == {0: 1, 1: 1, 2: 1}
    assert cap_scc.at(0) == {(0, 1): 1, (1, 2): 1, (2, 0): 1}
    assert any(isinstance(r["outer"], P) for r in df.loop_rows())


# -- two-dimensional outer time -----------------------------------------------------


@pytest.mark.parametrize("name,workers", [("reachability", 1), ("reachability", 3),
                                          ("bfs", 1)])
def test_oracle_on_a_product_grid(name: str, workers: int) -> None:
    """Edges change at `Product(e, 0)`, roots at `Product(0, e)`: the answer at
    `Product(a, b)` is the algorithm on the edges of epoch `a` from the roots of
    epoch `b`, including the grid points where neither input changed."""
    build, oracle = ALGORITHMS[name]
    schedule = sliding_window(5, nodes=30, epochs=6, window=40)
    rng = random.Random(5)
    root_steps = [rng.sample(range(30), 2) for _ in schedule]
    df = ddflow.Dataflow(time=P(0, 0), workers=workers)
    e_in, edges = df.new_collection("edges")
    r_in, roots = df.new_collection("roots")
    cap = build(edges, roots).capture()
    edge_sets, root_sets = [], []
    live: set = set()
    live_roots: set = set()
    for k, (ins, dels, _ri, _rd) in enumerate(schedule):
        for e in ins:
            e_in.update_at(e, P(k, 0), 1)
        for e in dels:
            e_in.update_at(e, P(k, 0), -1)
        new_roots = set(root_steps[k])
        for r in new_roots - live_roots:
            r_in.update_at(r, P(0, k), 1)
        for r in live_roots - new_roots:
            r_in.update_at(r, P(0, k), -1)
        live = (live | set(ins)) - set(dels)
        live_roots = new_roots
        edge_sets.append(live)
        root_sets.append(live_roots)
        e_in.advance_to(P(k + 1, 0))
        r_in.advance_to(P(0, k + 1))
        df.run()
        # Everything up to (k, k) is complete now: check the new row and column.
        for a in range(k + 1):
            for b in range(k + 1):
                if a == k or b == k:
                    assert cap.is_final(P(a, b))
                    assert cap.at(P(a, b)) == oracle(edge_sets[a], root_sets[b]), (a, b)


# -- the law, by hypothesis, at partially ordered outer times -----------------------

NODES = 5


@st.composite
def histories(draw: Any, items: st.SearchStrategy, max_items: int) -> list[tuple]:
    """Updates in which every item's accumulation is 0 or 1 at every time.

    Each item gets a chain of times `t0 <= t1 <= ...` (product order) with diffs
    `+1, -1, +1, ...`: at any time `t` the times below `t` form a prefix of the
    chain, so the accumulation is 1 or 0, and the plain oracles can read it as a set.
    """
    chosen = draw(st.lists(items, unique=True, max_size=max_items))
    out = []
    for item in chosen:
        a, b = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        for i in range(draw(st.integers(1, 3))):
            if i:
                a += draw(st.integers(0, 1))
                b += draw(st.integers(0, 1))
            out.append((item, P(a, b), 1 if i % 2 == 0 else -1))
    return out


EDGE_HISTORIES = histories(st.tuples(st.integers(0, NODES - 1), st.integers(0, NODES - 1)), 9)
ROOT_HISTORIES = histories(st.integers(0, NODES - 1), 3)


def _as_set(acc: dict) -> set:
    assert all(m in (0, 1) for m in acc.values()), acc
    return {d for d, m in acc.items() if m == 1}


def plain_reachability(edges: dict, roots: dict) -> dict:
    reached = set(_as_set(roots))
    es = _as_set(edges)
    while True:
        more = reached | {d for s, d in es if s in reached}
        if more == reached:
            return {n: 1 for n in reached}
        reached = more


def plain_bfs(edges: dict, roots: dict) -> dict:
    dist = {r: 0 for r in _as_set(roots)}
    es = _as_set(edges)
    while True:
        nxt = dict(dist)
        for s, d in es:
            if s in dist and dist[s] + 1 < nxt.get(d, dist[s] + 2):
                nxt[d] = dist[s] + 1
        if nxt == dist:
            return {(n, d): 1 for n, d in dist.items()}
        dist = nxt


def plain_components(edges: dict) -> dict:
    es = _as_set(edges)
    label = {n: n for e in es for n in e}
    while True:
        nxt = dict(label)
        for s, d in es:
            nxt[d] = min(nxt[d], label[s])
            nxt[s] = min(nxt[s], label[d])
        if nxt == label:
            return {(n, lab): 1 for n, lab in label.items()}
        label = nxt


def plain_scc(edges: dict) -> dict:
    es = _as_set(edges)
    nodes = {n for e in es for n in e}
    reach = {n: {n} for n in nodes}
    changed = True
    while changed:
        changed = False
        for s, d in es:
            if not reach[d] <= reach[s]:
                reach[s] |= reach[d]
                changed = True
    return {(n, min(m for m in reach[n] if n in reach[m])): 1 for n in nodes}


def plain_two_core(edges: dict) -> dict:
    live = {(s, d) for s, d in _as_set(edges) if s != d}
    live |= {(d, s) for s, d in live}
    while True:
        degree: dict = {}
        for s, _d in live:
            degree[s] = degree.get(s, 0) + 1
        kept = {(s, d) for s, d in live if degree[s] >= 2 and degree[d] >= 2}
        if kept == live:
            return {e: 1 for e in live}
        live = kept


LAW_CASES = {
    "reachability": (reachability, plain_reachability, True),
    "bfs": (bfs, plain_bfs, True),
    "connected_components": (connected_components, plain_components, False),
    "strongly_connected_components": (strongly_connected_components, plain_scc, False),
    "k_core": (lambda e: k_core(e, 2), plain_two_core, False),
}


def _law(name: str, edges: list, roots: list, schedule: str, workers: int) -> None:
    build, plain, with_roots = LAW_CASES[name]
    inputs = [edges, roots] if with_roots else [edges]
    out = evaluate(build, inputs, time=P(0, 0), schedule=schedule, workers=workers)
    check_law(out, inputs, plain, extra_times=[P(5, 5)])


@settings(max_examples=80)
@given(edges=EDGE_HISTORIES, roots=ROOT_HISTORIES, schedule=st.sampled_from(["once", "each"]),
       workers=st.sampled_from([1, 2]))
def test_law_bfs_at_product_times(edges: list, roots: list, schedule: str,
                                  workers: int) -> None:
    """The issue's law: a loop body with join and reduce (`join_map` + `min`) at
    partially ordered outer times, loop times `Product(Product(a, b), round)`."""
    _law("bfs", edges, roots, schedule, workers)


@settings(max_examples=60)
@given(edges=EDGE_HISTORIES, roots=ROOT_HISTORIES, schedule=st.sampled_from(["once", "each"]),
       workers=st.sampled_from([1, 2]))
def test_law_reachability_at_product_times(edges: list, roots: list, schedule: str,
                                           workers: int) -> None:
    _law("reachability", edges, roots, schedule, workers)


@settings(max_examples=40)
@given(edges=EDGE_HISTORIES, schedule=st.sampled_from(["once", "each"]))
def test_law_components_at_product_times(edges: list, schedule: str) -> None:
    _law("connected_components", edges, [], schedule, 1)


@settings(max_examples=30)
@given(edges=EDGE_HISTORIES, schedule=st.sampled_from(["once", "each"]))
def test_law_scc_at_product_times(edges: list, schedule: str) -> None:
    """Four time coordinates inside: Product(Product(Product(a, b), outer), inner)."""
    _law("strongly_connected_components", edges, [], schedule, 1)


@settings(max_examples=30)
@given(edges=EDGE_HISTORIES, schedule=st.sampled_from(["once", "each"]))
def test_law_k_core_at_product_times(edges: list, schedule: str) -> None:
    """Peeling (a `count` and two `semijoin`s in the loop) at partially ordered
    outer times."""
    _law("k_core", edges, [], schedule, 1)
