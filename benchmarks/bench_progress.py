"""Benchmark: progress tracking's compile cost, by path summaries and hop by hop.

A plan used to get one tracker, `ddflow.progress.Tracker`, which pushes a change
straight to the ports it reaches along the least path summaries between all pairs of
places: building them is quadratic in the graph (a chain of 1,000 concat + distinct
steps took 14.5 s at its first `run()`).  `ddflow.progress_edges.EdgeTracker`
passes changes between the ports that keep a frontier, along a table of hops
linear in the graph; the plan takes it when the path table would pass
`ddflow.engine.plan.PATHS_UP_TO` pairs ("auto").

What it measures (process CPU, in child processes, `benchmarks/progress_child.py`,
the pattern of `bench_engine_core`; the parent commit, `--base`, checked out in a
temporary `git worktree` and measured in the same run, interleaved):

* the chain (4 nodes a step, every distinct reads its frontier) at 125 .. 4,000
  steps: building the graph, the first `run()` (compile, tracker, the record through
  the chain), and a one-record epoch after it; with the edge tracker at every size,
  with the paths tracker (this tree) and the parent up to `--paths-max` steps (it is
  quadratic: 1,000 steps take ~15 s each);
* the per-change cost: one-edge reachability epochs at 2,000 nodes / 6,000 edges
  (`bench_engine_core`'s workload) in the parent, in this tree as "auto" picks (the
  paths tracker: 19 nodes), and with the edge tracker forced.

Run from the repository root:

    python -m benchmarks.bench_progress               # ~2 minutes on a quiet box
    python -m benchmarks.bench_progress --quick       # small sizes, seconds
    python -m benchmarks.bench_progress --no-base     # this tree only

It prints tables and writes JSON to `benchmarks/results/progress.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from benchmarks.bench_engine_core import REPO, _git, base_tree, run_child
from benchmarks.bench_reachability import workload
from benchmarks.common import goals_table, median, save, table

CHILD = Path(__file__).resolve().parent / "progress_child.py"
#: The commit this work started from (main before the edge tracker).
BASE = "3fe2bd1"
FULL = dict(steps=(125, 250, 500, 1_000, 2_000, 4_000), paths_max=500, epochs=3,
            reach=dict(nodes=2_000, edges=6_000, roots=5, changes=20), reps=3)
QUICK = dict(steps=(25, 50), paths_max=50, epochs=2,
             reach=dict(nodes=200, edges=600, roots=5, changes=5), reps=1)
#: The goals: a 1,000-step chain's compile + first run, and the per-change cost.
FIRST_RUN_S = 1.0
NO_REGRESSION = 0.9


def _chain_runs(trees: dict[str, Path], config: dict, paths_max: int, tmp: Path,
                log: Any) -> list[dict]:
    rows = []
    for steps in config["steps"]:
        row: dict = {"steps": steps}
        runs = [("edges", "current", "edges")]
        if steps <= paths_max:
            runs = [("base", "base", None), ("paths", "current", "paths")] + runs
        for label, tree, mode in runs:
            if tree not in trees:
                continue
            t0 = time.monotonic()
            r = run_child(trees[tree], "chain", {"steps": steps, "tracking": mode,
                                                 "epochs": config["epochs"]},
                          tmp, child=CHILD)
            log(f"  chain {steps} {label}: {time.monotonic() - t0:.1f} s wall",
                file=sys.stderr)
            row[label] = {"tracker": r["tracker"], "nodes": r["nodes"],
                          "build_ms": r["build_ms"], "first_run_ms": r["first_run_ms"],
                          "epoch_ms": median(r["epoch_ms"]),
                          "peak_rss_mb": r["peak_rss_mb"]}
            row["nodes"] = r["nodes"]
            if tree == "current":
                row["auto"] = r["auto"]         # what "auto" gives this graph
        rows.append(row)
    return rows


def _reach_runs(trees: dict[str, Path], config: dict, seed: int, tmp: Path,
                log: Any) -> dict:
    c = config["reach"]
    initial, roots, steps = workload(c["nodes"], c["edges"], c["roots"], c["changes"], seed)
    wfile = tmp / "reach.json"
    wfile.write_text(json.dumps({"initial": initial, "roots": roots, "steps": steps}))
    runs: dict[str, list] = {}
    for rep in range(config["reps"]):
        for label, tree, mode in (("base", "base", None), ("auto", "current", "auto"),
                                  ("edges", "current", "edges")):
            if tree not in trees:
                continue
            r = run_child(trees[tree], "reach", {"workload": str(wfile), "tracking": mode},
                          tmp, child=CHILD)
            runs.setdefault(label, []).append(r)
            log(f"  reach rep {rep + 1} {label}: median epoch {median(r['epoch_ms']):.2f} "
                f"ms", file=sys.stderr)
    answers = {r["reached"] for rs in runs.values() for r in rs}
    if len(answers) != 1:
        raise AssertionError(f"the trees disagree on reachability: {answers}")
    return {label: {"tracker": rs[0]["tracker"],
                    "epoch_ms": median([x for r in rs for x in r["epoch_ms"]]),
                    "rep_medians": [median(r["epoch_ms"]) for r in rs]}
            for label, rs in runs.items()}


def _s(ms: Any) -> str:
    return "-" if ms is None else f"{ms / 1e3:.3f}"


def _ms(ms: Any) -> str:
    return "-" if ms is None else f"{ms:.1f}"


def _mb(mb: Any) -> str:
    return "-" if mb is None else f"{mb:.0f}"


def _ratio(a: Any, b: Any) -> str:
    return "-" if a is None or b is None or not b else f"{a / b:.1f}x"


def report(result: dict) -> str:
    rows = []
    for row in result["chain"]:
        def get(label: str, key: str) -> Any:
            return row.get(label, {}).get(key)
        auto = get(row["auto"], "first_run_ms")
        rows.append([row["steps"], row["nodes"], row["auto"], _s(get("base", "first_run_ms")),
                     _s(get("paths", "first_run_ms")), _s(get("edges", "first_run_ms")),
                     _ratio(get("base", "first_run_ms"), auto),
                     f"{get('edges', 'first_run_ms') / row['steps']:.2f}",
                     _ms(get("base", "epoch_ms")), _ms(get("paths", "epoch_ms")),
                     _ms(get("edges", "epoch_ms")),
                     _mb(get("base", "peak_rss_mb")), _mb(get("edges", "peak_rss_mb"))])
    out = [table("Chain of concat + distinct: CPU s of the first run() (compile, "
                 "tracker, one record through)",
                 ["steps", "nodes", "auto", "base", "paths", "edges", "base/auto",
                  "edges ms/step", "epoch ms base", "paths", "edges", "RSS MB base",
                  "edges"], rows)]
    reach = result["reach"]
    base = reach.get("base", {}).get("epoch_ms")
    out.append(table("One-edge reachability epochs (the per-change cost): median CPU ms",
                     ["tree", "tracker", "median epoch ms", "rep medians", "base/this"],
                     [[label, r["tracker"], f"{r['epoch_ms']:.2f}",
                       " ".join(f"{x:.2f}" for x in r["rep_medians"]),
                       _ratio(base, r["epoch_ms"])] for label, r in reach.items()]))
    out.append(goals_table("Goals", result["goals"]))
    out += [f"note: {n}" for n in result["notes"]]
    return "\n\n".join(out)


def goals(result: dict) -> list[dict]:
    found = []
    for row in result["chain"]:
        if row["steps"] == 1_000:
            s = row[row["auto"]]["first_run_ms"] / 1e3
            found.append({"goal": "1,000-step chain: compile + first run < 1 s",
                          "measured": f"{s:.3f} s", "met": s < FIRST_RUN_S})
    reach = result["reach"]
    if "base" in reach:
        x = reach["base"]["epoch_ms"] / reach["auto"]["epoch_ms"]
        found.append({"goal": f"reachability epoch >= {NO_REGRESSION}x the base (auto)",
                      "measured": f"{x:.2f}x", "met": x >= NO_REGRESSION})
    return found


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_progress",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (for tests)")
    parser.add_argument("--no-base", action="store_true", help="this tree only")
    parser.add_argument("--base", default=BASE, help=f"the parent commit ({BASE})")
    parser.add_argument("--paths-max", type=int, default=None,
                        help="largest chain run with the paths tracker and the parent")
    parser.add_argument("--reps", type=int, default=None,
                        help="repetitions of the reachability epochs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=None, help="where to write the JSON "
                        "(default benchmarks/results/progress.json)")
    args = parser.parse_args(argv)
    config = dict(QUICK if args.quick else FULL)
    if args.reps:
        config["reps"] = args.reps
    paths_max = args.paths_max if args.paths_max is not None else config["paths_max"]
    current = _git("rev-parse", "--short", "HEAD")
    if _git("status", "--porcelain", "--untracked-files=no"):
        current += "+changes"
    notes: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ddflow-bench-progress-") as tmp_name:
        tmp = Path(tmp_name)
        if args.no_base:
            trees = {"current": REPO}
            base = None
            chain = _chain_runs(trees, config, paths_max, tmp, print)
            reach = _reach_runs(trees, config, args.seed, tmp, print)
        else:
            with base_tree(args.base) as tree:
                base = _git("rev-parse", "--short", args.base)
                trees = {"base": tree, "current": REPO}
                chain = _chain_runs(trees, config, paths_max, tmp, print)
                reach = _reach_runs(trees, config, args.seed, tmp, print)
    notes.append(f"wall time of the run: {time.monotonic() - started:.0f} s")
    result = {"base": base, "current": current, "config": config, "chain": chain,
              "reach": reach, "notes": notes}
    result["goals"] = goals(result)
    print(report(result))
    path = save("progress", result, Path(args.out) if args.out else None)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
