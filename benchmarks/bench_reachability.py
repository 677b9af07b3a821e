"""Benchmark: reachability under single-edge changes, ddflow against networkx from scratch.

The workload of issue 4: a random directed graph (2,000 nodes, 6,000 edges by
default) and 5 roots; an initial load, then 20 single-edge inserts and 20
single-edge deletes, one per epoch.  ddflow keeps `ddflow.algorithms.reachability`
running and is told each change; the baseline mutates a `networkx.DiGraph` and
recomputes the reachable set from scratch (`nx.descendants` from every root), as
one would without incremental computation.

Reported per system: the initial load (ms), the median and p90 ms per single-edge
epoch, and the median work per change.  ddflow's work is `df.total_work()`
(records into operators plus trace records read); networkx's is what a from-scratch
traversal touches (reached nodes plus the edges leaving them), the same kind of
count.  Both answers are compared at every epoch (outside the timed regions).

Run from the repository root:

    python -m benchmarks.bench_reachability            # the issue's sizes
    python -m benchmarks.bench_reachability --quick    # small, for tests

It prints a table and writes JSON to `benchmarks/results/reachability.json`
(`--out` to change).  Timings depend on the machine; work counts do not.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path
from typing import Any, Sequence

from benchmarks.common import standard_args

RESULTS = Path(__file__).resolve().parent / "results" / "reachability.json"

FULL = dict(nodes=2_000, edges=6_000, roots=5, changes=20)
QUICK = dict(nodes=200, edges=600, roots=5, changes=5)


def workload(nodes: int, edges: int, roots: int, changes: int, seed: int
             ) -> tuple[list, list, list[tuple[tuple, int]]]:
    """The initial edges, the roots, and the changes `(edge, +1 | -1)`, one per epoch:
    `changes` inserts of new edges, then `changes` deletes of existing ones."""
    rng = random.Random(seed)
    # Edges as codes `src * nodes + dst` (ints: the same draws, the same order as
    # pairs), made into tuples only at the end, in the order returned: as a loader
    # reading a file makes them.  Tuples made in a set's order and returned sorted
    # are freed in an order unlike the one they were made in, and the 2,000 tuples
    # CPython keeps for reuse (its tuple free list) then pin memory all over the
    # heap: a child measuring peak RSS counted ~80 MB of the generator's own
    # garbage as the state of the system that was handed the edges.
    initial: set = set()
    while len(initial) < edges:
        initial.add(rng.randrange(nodes) * nodes + rng.randrange(nodes))
    root_list = rng.sample(range(nodes), roots)
    live = set(initial)
    steps: list[tuple[tuple, int]] = []
    for _ in range(changes):
        e = rng.randrange(nodes) * nodes + rng.randrange(nodes)
        while e in live:
            e = rng.randrange(nodes) * nodes + rng.randrange(nodes)
        live.add(e)
        steps.append((divmod(e, nodes), 1))
    for _ in range(changes):
        e = rng.choice(sorted(live))
        live.discard(e)
        steps.append((divmod(e, nodes), -1))
    return [divmod(e, nodes) for e in sorted(initial)], root_list, steps


def run_ddflow(initial: list, roots: list, steps: list) -> dict[str, Any]:
    import ddflow
    from ddflow.algorithms import reachability

    df = ddflow.Dataflow()
    e_in, edges = df.new_collection("edges")
    r_in, root_coll = df.new_collection("roots")
    cap = reachability(edges, root_coll).capture()

    def epoch(t: int) -> int:
        """Close epoch `t` and run; the work it took."""
        w0 = df.total_work()
        e_in.advance_to(t + 1)
        r_in.advance_to(t + 1)
        df.run()
        return df.total_work() - w0

    start = time.perf_counter()
    for e in initial:
        e_in.insert(e)
    for r in roots:
        r_in.insert(r)
    load_work = epoch(0)
    load_ms = (time.perf_counter() - start) * 1e3
    answers = [set(cap.at(0))]
    ms, work = [], []
    for t, (e, diff) in enumerate(steps, start=1):
        start = time.perf_counter()
        e_in.update(e, diff)
        work.append(epoch(t))
        ms.append((time.perf_counter() - start) * 1e3)
        answers.append(set(cap.at(t)))
    return {"initial_ms": load_ms, "initial_work": load_work, "epoch_ms": ms,
            "work_per_change": work, "answers": answers,
            "rounds": max((r["round"] for r in df.loop_rows()), default=0)}


def _reach(g: Any, roots: list) -> set:
    import networkx as nx
    out = set(roots)
    for r in roots:
        if r in g:
            out |= nx.descendants(g, r)
    return out


def _work(g: Any, reached: set) -> int:
    """What a from-scratch traversal touches: the reached nodes and their out-edges."""
    return len(reached) + sum(g.out_degree(n) for n in reached if n in g)


def run_networkx(initial: list, roots: list, steps: list) -> dict[str, Any]:
    import networkx as nx

    start = time.perf_counter()
    g = nx.DiGraph()
    g.add_edges_from(initial)
    reached = _reach(g, roots)
    load_ms = (time.perf_counter() - start) * 1e3
    answers = [reached]
    initial_work = _work(g, reached)
    ms, work = [], []
    for e, diff in steps:
        start = time.perf_counter()
        if diff > 0:
            g.add_edge(*e)
        else:
            g.remove_edge(*e)
        reached = _reach(g, roots)
        ms.append((time.perf_counter() - start) * 1e3)
        work.append(_work(g, reached))
        answers.append(reached)
    return {"initial_ms": load_ms, "initial_work": initial_work, "epoch_ms": ms,
            "work_per_change": work, "answers": answers}


def _p90(xs: Sequence[float]) -> float:
    """Nearest-rank 90th percentile."""
    ordered = sorted(xs)
    return ordered[max(0, -(-9 * len(ordered) // 10) - 1)]


def summarize(raw: dict[str, Any]) -> dict[str, Any]:
    return {"initial_ms": round(raw["initial_ms"], 3),
            "median_ms_per_epoch": round(statistics.median(raw["epoch_ms"]), 3),
            "p90_ms_per_epoch": round(_p90(raw["epoch_ms"]), 3),
            "initial_work": raw["initial_work"],
            "median_work_per_change": statistics.median(raw["work_per_change"]),
            "epoch_ms": [round(x, 3) for x in raw["epoch_ms"]],
            "work_per_change": raw["work_per_change"]}


def table(result: dict[str, Any]) -> str:
    c = result["config"]
    lines = [f"reachability: {c['nodes']} nodes, {c['edges']} edges, {c['roots']} roots; "
             f"{c['changes']} single-edge inserts + {c['changes']} deletes (seed {c['seed']})",
             f"{'system':<10}{'initial ms':>12}{'median ms/epoch':>17}{'p90 ms/epoch':>14}"
             f"{'initial work':>14}{'median work/change':>20}"]
    for name in ("ddflow", "networkx"):
        s = result[name]
        lines.append(f"{name:<10}{s['initial_ms']:>12.1f}{s['median_ms_per_epoch']:>17.3f}"
                     f"{s['p90_ms_per_epoch']:>14.3f}{s['initial_work']:>14}"
                     f"{s['median_work_per_change']:>20}")
    r = result["ratio"]
    lines.append(f"ratio ddflow/networkx: initial load {r['initial_ms']:.2f}x, median ms/epoch "
                 f"{r['median_ms_per_epoch']:.2f}x, median work/change "
                 f"{r['median_work_per_change']:.4f}x")
    d = result["ddflow"]
    lines.append(f"ddflow median work per change / initial load work: "
                 f"{d['median_work_per_change'] / d['initial_work']:.4%} (issue 4: <= 1%); "
                 f"answers agree with networkx at every epoch: {d['agrees_with_networkx']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = standard_args("bench_reachability", __doc__, RESULTS, argv)
    config = dict(QUICK if args.quick else FULL, seed=args.seed)
    initial, roots, steps = workload(config["nodes"], config["edges"], config["roots"],
                                     config["changes"], config["seed"])
    dd_raw = run_ddflow(initial, roots, steps)
    nx_raw = run_networkx(initial, roots, steps)
    dd, nxs = summarize(dd_raw), summarize(nx_raw)
    dd["agrees_with_networkx"] = dd_raw["answers"] == nx_raw["answers"]
    dd["loop_rounds"] = dd_raw["rounds"]
    ratio = {k: (dd[k] / nxs[k] if nxs[k] else None)
             for k in ("initial_ms", "median_ms_per_epoch", "median_work_per_change")}
    result = {"benchmark": "reachability", "config": config, "ddflow": dd, "networkx": nxs,
              "ratio": ratio}
    print(table(result))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
