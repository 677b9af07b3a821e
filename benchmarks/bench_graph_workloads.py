"""Benchmark: differential dataflow's own graph workloads, incremental against recompute.

The workloads of differential dataflow's interactive IR benchmark (its
`interactive/` directory): a seeded random directed graph of N nodes and 2N edges;
every churn epoch retracts the C oldest edges of the window and inserts C fresh ones.
On it: reachability from one root, connected components (label propagation),
strongly connected components (the doubly nested loop), triangles (a delta query,
`ddflow.query`) and the 2-core by peeling, from `ddflow.algorithms.graphs`.

Scales (`--scale`, repeatable): small 10k / 20k / 10, medium 100k / 200k / 100,
large 1M / 2M / 1,000 (nodes / edges / churn).

How it measures (the pattern of `bench_engine_core`):

* Every workload runs in a child process (`benchmarks/graph_workloads_child.py`)
  importing ddflow from the tree measured; with `--parent` the parent commit
  (`--base`, default the commit this work started from) is checked out in a
  temporary `git worktree` and measured in the same run, parent first.
* The child times **process CPU** around the initial epoch and each churn epoch,
  and around a networkx recompute of the same answer (build the graph, run the
  algorithm) after every epoch; it checks the dataflow's answer against networkx's
  at every epoch, and reports its peak RSS and the records of work
  (`Dataflow.total_work`) per epoch.
* The table: initial epoch, median and max churn epoch, the median networkx
  recompute, and the ratios (recompute / churn: above 1 is incremental winning;
  initial / recompute); with `--parent` the parent's figures and parent / current.
  The published Rust figures (one worker of a laptop, the IR's row interpreter;
  not this machine) are a reference column.

Run from the repository root:

    python -m benchmarks.bench_graph_workloads                      # small, current tree
    python -m benchmarks.bench_graph_workloads --parent             # and the parent
    python -m benchmarks.bench_graph_workloads --scale medium --workloads reach,cc

It prints a table per scale and writes JSON to `benchmarks/results/graph_workloads.json`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from benchmarks.bench_engine_core import REPO, _git, base_tree, run_child
from benchmarks.common import goals_table, median, save, table

CHILD = Path(__file__).resolve().parent / "graph_workloads_child.py"
#: The commit this work started from (issue 21's parent).
BASE = "c4f31a5"
WORKLOADS = ("reach", "triangles", "kcore", "cc", "scc")
SCALES = {
    "tiny": dict(nodes=200, edges=400, churn=2, epochs=3),
    "small": dict(nodes=10_000, edges=20_000, churn=10, epochs=10),
    "medium": dict(nodes=100_000, edges=200_000, churn=100, epochs=5),
    "large": dict(nodes=1_000_000, edges=2_000_000, churn=1_000, epochs=3),
}
#: Published (initial ms, churn epoch ms), Rust, one worker, the IR benchmark.
PUBLISHED = {
    ("small", "reach"): (17, 1.0), ("small", "scc"): (181, 10.8),
    ("medium", "cc"): (871, 23.8), ("medium", "scc"): (2_600, 109),
    ("medium", "triangles"): (180, 1.1),
}
#: A child slower than this is stopped (the run reports it and goes on).
CHILD_TIMEOUT_S = 3_600


def measure_one(tree: Path, workload: str, scale: str, seed: int, tmp: Path,
                profile: bool = False, budget_s: float | None = None) -> dict:
    params = dict(SCALES[scale], seed=seed, profile=profile, budget_s=budget_s)
    r = run_child(tree, workload, params, tmp, child=CHILD, timeout=CHILD_TIMEOUT_S)
    churn = r["epoch_ms"]
    nx = median(r["nx_ms"])
    works = [w for w in r["work"] if w is not None]
    return dict(r, churn_median_ms=median(churn), churn_max_ms=max(churn, default=float("nan")),
                nx_median_ms=nx, recompute_over_churn=nx / median(churn) if churn else None,
                initial_over_recompute=r["initial_ms"] / nx,
                work_median=median(works) if works else None,
                correct=not r["wrong_epochs"])


def measure(trees: dict[str, Path], scales: Sequence[str], workloads: Sequence[str],
            seed: int, tmp: Path, notes: list[str], profile: bool,
            budget_s: float | None) -> dict:
    out: dict = {}
    for scale in scales:
        for w in workloads:
            row: dict = {}
            for tree_name, tree in trees.items():
                t0 = time.monotonic()
                try:
                    row[tree_name] = measure_one(tree, w, scale, seed, tmp,
                                                 profile and tree_name == "current", budget_s)
                except Exception as exc:  # noqa: BLE001 - reported, the run goes on
                    notes.append(f"{scale} {w} {tree_name}: {str(exc)[:300]}")
                    row[tree_name] = None
                print(f"  {scale} {w} {tree_name}: {time.monotonic() - t0:.0f} s wall",
                      file=sys.stderr, flush=True)
            out.setdefault(scale, {})[w] = row
    return out


def _ms(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"


def _x(x: Any) -> str:
    return "-" if x is None else f"{x:.2f}x"


def report(result: dict) -> str:
    out = []
    for scale, rows in result["measured"].items():
        c = SCALES[scale]
        body = []
        for w, row in rows.items():
            cur, par = row.get("current"), row.get("parent")
            pub = PUBLISHED.get((scale, w))
            ref = f"{pub[0]:,} / {pub[1]}" if pub else "-"
            if cur is None:
                body.append([w, "failed"] + ["-"] * 13 + [ref])
                continue
            body.append([
                w, _ms(cur["initial_ms"]), _ms(cur["churn_median_ms"]), _ms(cur["churn_max_ms"]),
                _ms(cur["nx_median_ms"]), _x(cur["recompute_over_churn"]),
                _x(cur["initial_over_recompute"]),
                "-" if cur["work_median"] is None else f"{cur['work_median']:,.0f}",
                f"{cur['peak_rss_mb']:,.0f}",
                "yes" if cur["correct"] else f"NO {cur['wrong_epochs']}",
                _ms(par["initial_ms"]) if par else "-",
                _ms(par["churn_median_ms"]) if par else "-",
                _x(par["initial_ms"] / cur["initial_ms"]) if par else "-",
                _x(par["churn_median_ms"] / cur["churn_median_ms"]) if par else "-",
                f"{cur['epochs_run']}", ref])
        out.append(table(
            f"{scale}: {c['nodes']:,} nodes, {c['edges']:,} edges, churn {c['churn']} "
            f"(process CPU ms; current {result['current']}, parent {result['parent'] or '-'})",
            ["workload", "initial", "churn med", "churn max", "nx recompute", "nx/churn",
             "initial/nx", "work/epoch", "RSS MB", "correct", "par initial", "par churn",
             "par/cur init", "par/cur churn", "epochs", "Rust init/churn (published)"],
            body))
        out.append("")
    if result.get("goals"):
        out.append(goals_table("the issue's goals", result["goals"]))
    for scale, rows in result["measured"].items():
        for w, row in rows.items():
            prof = (row.get("current") or {}).get("profile")
            if prof:
                out.append("")
                out.append(table(f"cProfile, {scale} {w}, churn epochs, current tree",
                                 ["function", "calls", "tottime ms", "cumtime ms"],
                                 [[f["function"], f["calls"], f["tottime_ms"], f["cumtime_ms"]]
                                  for f in prof]))
    for note in result["notes"]:
        out.append(f"note: {note}")
    return "\n".join(out)


def goals(measured: dict) -> list[dict]:
    """The issue's "Done when", each with what this run measured."""
    rows = []

    def cur(scale: str, w: str) -> dict | None:
        return (measured.get(scale, {}).get(w) or {}).get("current")

    def add(goal: str, value: Any, fmt: str, met: bool | None) -> None:
        rows.append({"goal": goal, "measured": "-" if value is None else fmt.format(value),
                     "met": met})

    if "small" in measured:
        for w in measured["small"]:
            c = cur("small", w)
            add(f"small {w}: correct at every epoch", None if c is None else c["correct"],
                "{}", None if c is None else c["correct"])
        for w in ("reach", "cc", "triangles", "kcore"):
            c = cur("small", w)
            if c is None:
                continue
            r = c["recompute_over_churn"]
            add(f"small {w}: churn >= 3x faster than recompute", r, "{:.2f}x", r >= 3)
            r = c["initial_over_recompute"]
            add(f"small {w}: initial <= 20x recompute", r, "{:.1f}x", r <= 20)
        row = measured["small"].get("scc") or {}
        if row.get("current") and row.get("parent"):
            c, p = row["current"], row["parent"]
            r = p["churn_median_ms"] / c["churn_median_ms"]
            add("small scc: churn >= 10x faster than parent", r, "{:.1f}x", r >= 10)
            r = p["initial_ms"] / c["initial_ms"]
            add("small scc: initial >= 5x faster than parent", r, "{:.1f}x", r >= 5)
    if "medium" in measured:
        for w in measured["medium"]:
            c = cur("medium", w)
            add(f"medium {w}: completes, correct", None if c is None else c["correct"], "{}",
                None if c is None else c["correct"] and c["epochs_run"] > 0)
            if c is not None and w != "scc":
                r = c["recompute_over_churn"]
                add(f"medium {w}: churn faster than recompute", r, "{:.2f}x", r > 1)
            if c is not None:
                add(f"medium {w}: peak RSS <= 2 GB", c["peak_rss_mb"], "{:,.0f} MB",
                    c["peak_rss_mb"] <= 2048)
    if "large" in measured:
        for w in ("reach", "triangles", "cc"):
            c = cur("large", w)
            if w in measured["large"]:
                add(f"large {w}: completes, correct", None if c is None else c["correct"],
                    "{}", None if c is None else c["correct"])
    return rows


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_graph_workloads",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", action="append", choices=list(SCALES),
                        help="small (default), medium, large; tiny is for tests")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, of {','.join(WORKLOADS)}")
    parser.add_argument("--parent", action="store_true",
                        help="also measure the parent commit in a git worktree")
    parser.add_argument("--base", default=BASE, help=f"the parent commit ({BASE})")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the current tree's churn epochs (their times then "
                             "include the profiler's cost: measure without it)")
    parser.add_argument("--budget", type=float, default=None,
                        help="stop a workload's churn epochs after this many CPU s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="where to write the JSON "
                        "(default benchmarks/results/graph_workloads.json)")
    args = parser.parse_args(argv)
    scales = args.scale or ["small"]
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = set(workloads) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads: {sorted(unknown)}")
    current = _git("rev-parse", "--short", "HEAD")
    if _git("status", "--porcelain", "--untracked-files=no"):
        current += "+changes"
    notes: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ddflow-bench-inputs-") as tmp_name:
        tmp = Path(tmp_name)
        if args.parent:
            with base_tree(args.base) as tree:
                parent = _git("rev-parse", "--short", args.base)
                measured = measure({"parent": tree, "current": REPO}, scales, workloads,
                                   args.seed, tmp, notes, args.profile, args.budget)
        else:
            parent = None
            measured = measure({"current": REPO}, scales, workloads, args.seed, tmp, notes,
                               args.profile, args.budget)
    if args.profile:
        notes.append("--profile: the current tree's churn epochs ran under cProfile, so "
                     "their times (and ratios) include its cost")
    notes.append(f"wall time of the run: {time.monotonic() - started:.0f} s")
    result = {"scales": scales, "parent": parent, "current": current, "seed": args.seed,
              "measured": measured, "notes": notes}
    result["goals"] = goals(measured)
    print(report(result))
    path = save("graph_workloads", result, Path(args.out) if args.out else None)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
