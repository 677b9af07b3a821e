"""`ddflow demo`: incremental graph analytics on a stream of edge changes.

A random graph is loaded, then every epoch inserts or deletes one edge.  Two
dataflows run side by side on the local engine: reachability from a few roots and
BFS distances.  Each epoch's answers are checked against a plain Python BFS over
that epoch's graph, and the work done per epoch (records processed by all
operators) is reported next to the initial load's: differential dataflow's point is
that the first number is tiny compared with the second.
"""

from __future__ import annotations

import random
import statistics
import time
from collections import deque

import ddflow
from ddflow.algorithms.graphs import bfs, reachability


def _plain_bfs(edges: set, roots: list) -> dict:
    adj: dict = {}
    for s, d in edges:
        adj.setdefault(s, []).append(d)
    dist = {r: 0 for r in roots}
    q = deque(roots)
    while q:
        u = q.popleft()
        for v in adj.get(u, ()):
            if v not in dist:
                dist[v] = dist[u] + 1
                q.append(v)
    return dist


def run_demo(nodes: int = 2000, edges: int = 6000, epochs: int = 40, workers: int = 1,
             seed: int = 1, out=print) -> int:
    rng = random.Random(seed)
    graph: set = set()
    while len(graph) < edges:
        graph.add((rng.randrange(nodes), rng.randrange(nodes)))
    roots = list(range(5))
    df = ddflow.Dataflow(workers=workers)
    e_in, e = df.new_collection("edges")
    r_in, r = df.new_collection("roots")
    reach = reachability(e, r).capture()
    dist = bfs(e, r).capture()
    out(f"ddflow {ddflow.__version__} demo: reachability and BFS on {nodes:,} nodes, "
        f"{edges:,} edges, {len(roots)} roots; {epochs} single-edge epochs "
        f"({workers} worker{'s' if workers > 1 else ''})")
    for x in graph:
        e_in.insert(x)
    for x in roots:
        r_in.insert(x)
    t0 = time.perf_counter()
    e_in.advance_to(1)
    r_in.advance_to(1)
    df.run()
    load_s, load_work = time.perf_counter() - t0, df.total_work()
    failures = []
    rows = []
    edge_list = list(graph)
    for epoch in range(1, epochs + 1):
        if epoch % 2:
            x = edge_list.pop(rng.randrange(len(edge_list)))
            e_in.remove(x)
            graph.discard(x)
            change = f"-{x}"
        else:
            x = (rng.randrange(nodes), rng.randrange(nodes))
            while x in graph:
                x = (rng.randrange(nodes), rng.randrange(nodes))
            e_in.insert(x)
            graph.add(x)
            edge_list.append(x)
            change = f"+{x}"
        before = df.total_work()
        t = time.perf_counter()
        e_in.advance_to(epoch + 1)
        r_in.advance_to(epoch + 1)
        df.run()
        ms = 1000 * (time.perf_counter() - t)
        work = df.total_work() - before
        expected = _plain_bfs(graph, roots)
        got_reach = {n for n, m in reach.at(epoch).items() if m}
        got_dist = dict(d for d, m in dist.at(epoch).items() if m)
        ok = got_reach == set(expected) and got_dist == expected
        if not ok:
            failures.append(epoch)
        rows.append((epoch, change, len(got_reach), work, ms, ok))
    out(f"initial load: {load_s * 1000:,.0f} ms, {load_work:,} records processed")
    out(f"{'epoch':>5}  {'change':<14} {'reachable':>9} {'work':>7} {'ms':>7}  check")
    for epoch, change, n, work, ms, ok in rows[:5] + rows[-5:]:
        out(f"{epoch:>5}  {change:<14} {n:>9,} {work:>7,} {ms:>7.2f}  {'ok' if ok else 'WRONG'}")
    med_work = statistics.median(r[3] for r in rows)
    med_ms = statistics.median(r[4] for r in rows)
    out(f"median per epoch: {med_work:,.0f} records ({100 * med_work / load_work:.3f}% of the "
        f"initial load), {med_ms:.2f} ms")
    if failures:
        out(f"check against a plain recomputation: FAILED at epochs {failures}")
        return 1
    out(f"check against a plain recomputation: all {epochs} epochs agree")
    return 0
