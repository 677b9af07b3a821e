"""One workload of `bench_graph_workloads`, run in a child process inside the tree measured.

`bench_graph_workloads` runs this file with `PYTHONPATH` and the working directory set
to the tree being measured (this checkout, or a `git worktree` of the parent commit),
so the same script times both.  It uses only public API both trees have
(`ddflow.Dataflow`, sessions, `Collection.inspect`, `ddflow.algorithms`,
`ddflow.query`) and imports nothing from `benchmarks`.  `k_core` is new with the
benchmark: a tree without it gets the same dataflow written out here.

The workload is differential dataflow's interactive IR one (its `interactive/`
benchmarks): a seeded random directed graph of N nodes and M edges (no self loops,
no duplicates), then churn epochs, each retracting the C oldest edges of the window
and inserting C fresh ones.  It is generated here from the parameters, identically
in both trees.

Timed (`time.process_time`): an epoch is "tell the changes, advance the input, run"
(the initial one also collects the garbage the load left, since a run may pause the
collector); the networkx recompute is "build the graph from the current edges, run
the algorithm, shape the answer", after an untimed collection, so that it pays for
its own garbage only.  The dataflow's answer is folded into a dict by
`inspect` (a capture would keep the whole history) and compared with networkx's at
every epoch, outside the timed regions.

    python -P benchmarks/graph_workloads_child.py reach|cc|scc|triangles|kcore PARAMS.json

prints one JSON object on stdout.
"""

from __future__ import annotations

import cProfile
import gc
import json
import os
import pstats
import random
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

WORKLOADS = ("reach", "cc", "scc", "triangles", "kcore")

# This checkout's `benchmarks/rss.py` (peak RSS from VmHWM), found at the end of the
# path: the tree measured comes first (`PYTHONPATH`), and may be older.
sys.path.append(str(Path(__file__).resolve().parent))
import rss  # noqa: E402


def workload(nodes: int, edges: int, churn: int, epochs: int, seed: int
             ) -> tuple[list, list]:
    """`(initial edges, [(removed, added)] per churn epoch)`: a window of distinct edges."""
    rng = random.Random(seed)
    live: set = set()
    window: deque = deque()

    def fresh() -> tuple:
        while True:
            e = (rng.randrange(nodes), rng.randrange(nodes))
            if e[0] != e[1] and e not in live:
                live.add(e)
                window.append(e)
                return e

    initial = [fresh() for _ in range(edges)]
    steps = []
    for _ in range(epochs):
        removed = [window.popleft() for _ in range(churn)]
        for e in removed:
            live.discard(e)
        steps.append((removed, [fresh() for _ in range(churn)]))
    return initial, steps


# -- the dataflows ---------------------------------------------------------------------

def _k_core(edges: Any, k: int = 2) -> Any:
    """`ddflow.algorithms.graphs.k_core`, for a tree that lacks it (the same dataflow)."""
    try:
        from ddflow.algorithms.graphs import k_core
        return k_core(edges, k)
    except ImportError:
        pass
    undirected = (edges.filter(lambda e: e[0] != e[1])
                  .flat_map(lambda e: (e, (e[1], e[0]))).distinct())

    def step(live: Any) -> Any:
        scope = live.scope
        kept = live.map(lambda e: e[0]).count().filter(lambda nd: nd[1] >= k).map(
            lambda nd: nd[0])
        return (undirected.enter(scope).semijoin(kept).map(lambda e: (e[1], e[0]))
                .semijoin(kept).map(lambda e: (e[1], e[0])))

    return undirected.iterate(step)


def build(name: str, root: int) -> tuple[Any, Any, Any, dict]:
    """`(dataflow, edge session, root session or None, answer dict)`."""
    import ddflow
    from ddflow.algorithms import (connected_components, reachability,
                                   strongly_connected_components)

    df = ddflow.Dataflow()
    e_in, edges = df.new_collection("edges")
    r_in = None
    if name == "reach":
        r_in, roots = df.new_collection("roots")
        out = reachability(edges, roots)
    elif name == "cc":
        out = connected_components(edges)
    elif name == "scc":
        out = strongly_connected_components(edges)
    elif name == "triangles":
        out = ddflow.query("tri(x, y, z) :- g(x, y), g(y, z), g(x, z)", g=edges)
    else:
        out = _k_core(edges, 2)
    answer: dict = {}

    def fold(update: tuple) -> None:
        d, _t, r = update
        n = answer.get(d, 0) + r
        if n:
            answer[d] = n
        else:
            del answer[d]

    out.inspect(fold)
    if r_in is not None:
        r_in.insert(root)
    return df, e_in, r_in, answer


# -- networkx, the recompute and the oracle ---------------------------------------------

def recompute(name: str, edges: set, root: int) -> dict:
    """The same answer from scratch with networkx, as `{record: 1}`."""
    import networkx as nx

    if name == "reach":
        g = nx.DiGraph(edges)
        g.add_node(root)
        return {n: 1 for n in nx.descendants(g, root) | {root}}
    if name == "cc":
        g = nx.Graph(edges)
        out = {}
        for comp in nx.connected_components(g):
            m = min(comp)
            out.update(((n, m), 1) for n in comp)
        return out
    if name == "scc":
        g = nx.DiGraph(edges)
        out = {}
        for comp in nx.strongly_connected_components(g):
            m = min(comp)
            out.update(((n, m), 1) for n in comp)
        return out
    if name == "triangles":
        g = nx.DiGraph(edges)
        succ = g.succ
        return {(x, y, z): 1 for x in succ for y in succ[x] for z in succ[y]
                if z in succ[x]}
    g = nx.Graph(edges)
    g.remove_edges_from(nx.selfloop_edges(g))
    core = nx.k_core(g, 2)
    return {e: 1 for u, v in core.edges() for e in ((u, v), (v, u))}


def _cpu(f: Callable[[], Any]) -> tuple[float, Any]:
    c0 = time.process_time()
    value = f()
    return (time.process_time() - c0) * 1e3, value


def _work(df: Any) -> int | None:
    total = getattr(df, "total_work", None)
    return total() if total is not None else None


def run(p: dict) -> dict:
    name, root = p["workload"], p.get("root", 0)
    initial, steps = workload(p["nodes"], p["edges"], p["churn"], p["epochs"], p["seed"])
    df, e_in, r_in, answer = build(name, root)
    sessions = [s for s in (e_in, r_in) if s is not None]
    live = set(initial)

    def load() -> None:
        for e in initial:
            e_in.insert(e)
        for s in sessions:
            s.advance_to(1)
        df.run()
        # A run may pause the garbage collector (`ddflow.dataflow.PAUSE_GC`): the
        # collection of what the load built is its cost, so it is counted here, not
        # in the recompute that would trigger it next.
        gc.collect()

    budget = p.get("budget_s")
    started = time.process_time()
    w0 = _work(df)
    initial_ms, _ = _cpu(load)
    w1 = _work(df)
    nx_ms: list = []
    gc.collect()    # the recompute pays for its own garbage only (both trees alike)
    ms, nx_t = _cpu(lambda: recompute(name, live, root))
    nx_ms.append(ms)
    wrong = [] if answer == nx_t else [0]
    sizes = [len(answer)]
    epoch_ms: list = []
    work: list = []
    prof = cProfile.Profile() if p.get("profile") else None
    for t, (removed, added) in enumerate(steps, start=1):
        if budget is not None and time.process_time() - started > budget:
            break

        def epoch() -> None:
            for e in removed:
                e_in.remove(e)
            for e in added:
                e_in.insert(e)
            for s in sessions:
                s.advance_to(t + 1)
            df.run()

        before = _work(df)
        if prof is not None:
            prof.enable()
        ms, _ = _cpu(epoch)
        if prof is not None:
            prof.disable()
        epoch_ms.append(ms)
        after = _work(df)
        work.append(None if before is None else after - before)
        live.difference_update(removed)
        live.update(added)
        gc.collect()
        ms, truth = _cpu(lambda: recompute(name, live, root))
        nx_ms.append(ms)
        if answer != truth:
            wrong.append(t)
        sizes.append(len(answer))
    out = {"initial_ms": initial_ms, "epoch_ms": epoch_ms, "nx_ms": nx_ms,
           "initial_work": None if w0 is None else w1 - w0, "work": work,
           "wrong_epochs": wrong, "answer_sizes": sizes, "epochs_run": len(epoch_ms),
           "peak_rss_mb": rss.peak_mb()}
    if prof is not None:
        out["profile"] = _top(prof, p.get("top", 25))
    return out


def _top(prof: cProfile.Profile, n: int) -> list[dict]:
    stats = pstats.Stats(prof).stats
    root = os.path.realpath(".") + os.sep

    def label(f: tuple) -> str:
        path = os.path.realpath(f[0])
        where = path.removeprefix(root) if path.startswith(root) else os.path.basename(f[0])
        return f"{where}:{f[1]}({f[2]})"

    top = sorted(stats.items(), key=lambda kv: -kv[1][2])[:n]
    return [{"function": label(f), "calls": nc, "tottime_ms": tt * 1e3, "cumtime_ms": ct * 1e3}
            for f, (_cc, nc, tt, ct, _callers) in top]


def main() -> None:
    name, params = sys.argv[1], sys.argv[2]
    with open(params) as f:
        p = dict(json.load(f), workload=name)
    import ddflow
    result = run(p)
    result["ddflow"] = os.path.dirname(os.path.realpath(ddflow.__file__))
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
