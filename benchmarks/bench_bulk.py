"""Benchmark: the bulk path's goals (issue 22), this checkout against its parent commit.

Measured in one run, process CPU, each measurement in a child process:

* join+count (`a.join(b).map(key).count()`, `bench_join_count_ab`'s workload and
  child): 100k updates in epochs of 1,000 over 10k keys, against the parent commit
  (a `git worktree`) and a per-epoch `Counter` recompute; with `--large` also 1M
  updates over 100k keys against the parent, and the peak RSS of each;
* the initial load of reachability (`ddflow.algorithms.reachability`) at 200k nodes
  / 600k edges, 5 roots (`bench_reachability.workload`), against the networkx
  from-scratch answer and the parent commit: CPU, and bytes of state per edge:
  peak RSS less the RSS before the child generated the edges, over the edge count
  (the system holds the edge tuples then), the peak taken from the moment the
  edges exist (the generator's own transient sets left out; `bulk_child`); for
  comparison, the figure less the RSS once the tuples existed, and the
  tracemalloc peak of Python-allocated memory from a traced run of its own
  (one per system: tracing slows a run several times; it is deterministic);
* a cProfile of the current tree on the 100k join+count stream.

Every reachability child, networkx's too, runs with the same fixed environment,
`REACH_ENV` (printed with the table): `NUMPY_MADVISE_HUGEPAGE=0`.  numpy's
transparent huge-page hint lets a large array take whole 2 MB pages when the
kernel has them free, so its RSS depends on the box's state (one earlier run
moved 15 MB with the variable on one side and not the other).  The median of the
runs (`--reps 3` for a figure that decides; each run's printed beside it) and the
reset peak (`bulk_child`; a run whose peak could not be reset is refused) do the
rest, against the 292-314 bytes an edge earlier runs spread over.

The answers are compared between trees (digests).  The initial loads of triangles
and 2-core against networkx are the loops issue's `bench_graph_workloads`.

    python -m benchmarks.bench_bulk               # 100k join+count, 200k reach load
    python -m benchmarks.bench_bulk --large       # also join+count at 1M (long)
    python -m benchmarks.bench_bulk --quick       # small sizes, < 2 minutes
    python -m benchmarks.bench_bulk --no-base     # the current tree only
    python -m benchmarks.bench_bulk --only reach  # one part (join or reach)

It prints tables and writes JSON to `benchmarks/results/bulk.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from benchmarks import bench_join_count_ab as jc
from benchmarks.bench_engine_core import _git, base_tree, run_child
from benchmarks.bench_reachability import workload as reach_workload
from benchmarks.common import goals_table, median, save, table

CHILD = Path(__file__).resolve().parent / "bulk_child.py"

JOIN_FULL = {"ab_100k": dict(updates=100_000, keys=10_000, epoch=1_000, reps=3)}
JOIN_LARGE = {"ab_1m": dict(updates=1_000_000, keys=100_000, epoch=1_000, reps=1,
                            recompute=False)}
JOIN_QUICK = {"ab_10k": dict(updates=10_000, keys=1_000, epoch=100, reps=1)}
REACH_FULL = dict(nodes=200_000, edges=600_000, roots=5, reps=1)
REACH_QUICK = dict(nodes=20_000, edges=60_000, roots=5, reps=1)

#: The environment every reachability child runs with (see the docstring).
REACH_ENV = {"NUMPY_MADVISE_HUGEPAGE": "0"}

#: The issue's memory figures at commit ad1a9b2 (its note), for the goal rows.
AD1A9B2_JOIN_1M_MB = 798


def default_base() -> str:
    """The parent commit of the work: where this branch left main."""
    try:
        return _git("merge-base", "HEAD", "main")[:7]
    except Exception:  # noqa: BLE001 - no main branch: the previous commit
        return _git("rev-parse", "--short", "HEAD~1")


def measure_reach(trees: dict[str, Path], c: dict, seed: int, tmp: Path, log=print) -> dict:
    # Each child generates the workload itself (`bulk_child._workload`), so that its
    # RSS before the edges exist is the baseline of what the system holds.
    params = {"nodes": c["nodes"], "edges": c["edges"], "roots": c["roots"], "seed": seed}
    runs: dict[str, list] = {name: [] for name in [*trees, "networkx"]}
    for rep in range(c["reps"]):
        for name, tree in [*trees.items(), ("networkx", trees["current"])]:
            t0 = time.monotonic()
            task = "reach_networkx" if name == "networkx" else "reach_load"
            run = run_child(tree, task, params, tmp, CHILD, env=REACH_ENV)
            if not run["peak_reset"]:
                # Then the peak is the generator's, the same for every system.
                raise RuntimeError("bench_bulk: a reach child could not reset its peak "
                                   "RSS (/proc/self/clear_refs): no state per edge to report")
            runs[name].append(run)
            log(f"  reach load rep {rep + 1}/{c['reps']} {name}: "
                f"{time.monotonic() - t0:.1f} s wall", file=sys.stderr)
    traced = {}
    for name, tree in [*trees.items(), ("networkx", trees["current"])]:
        task = "reach_networkx" if name == "networkx" else "reach_load"
        traced[name] = run_child(tree, task, dict(params, traced=True), tmp, CHILD,
                                 env=REACH_ENV)
    out: dict = {"config": c, "env": REACH_ENV}
    per_edge = 2**20 / c["edges"]
    for name, rs in runs.items():
        states = [r["rss_peak_mb"] - r["rss_base_mb"] for r in rs]
        state = median(states)
        old = median([r["rss_peak_mb"] - r["rss_workload_mb"] for r in rs])
        child = median([r["rss_child_peak_mb"] - r["rss_base_mb"] for r in rs])
        out[name] = {"cpu_ms": median([r["cpu_ms"] for r in rs]),
                     "state_mb": state, "bytes_per_edge": state * per_edge,
                     "bytes_per_edge_runs": [s * per_edge for s in states],
                     "state_less_tuples_mb": old, "bytes_per_edge_less_tuples": old * per_edge,
                     "child_peak_bytes_per_edge": child * per_edge,
                     "rss_peak_mb": median([r["rss_peak_mb"] for r in rs]),
                     "traced_peak_mb": traced[name]["traced_peak_mb"],
                     "answer_size": rs[0]["answer_size"]}
    out["answers_agree"] = len({r["answer"] for rs in [*runs.values(), traced.values()]
                                for r in rs}) == 1
    return out


def goals(m: dict) -> list[dict]:
    """The issue's goals, at the sizes they name (none in quick mode: its 10k stream's
    epochs of 100 reach no columnar threshold, and its graph is not 200k nodes)."""
    rows: list[dict] = []
    j = m["join"].get("ab_100k")
    if j is None and (m["join"] or m["reach"]["config"]["edges"] < REACH_FULL["edges"]):
        return rows
    if j is not None and "vs_base" in j:
        rows.append({"goal": "join+count 100k: >= 3x the parent commit",
                     "measured": f"{j['vs_base']:.2f}x", "met": j["vs_base"] >= 3})
    if j is not None:
        rows.append({"goal": "join+count 100k: >= 1.5x the per-epoch Counter recompute",
                     "measured": f"{j['vs_recompute']:.2f}x", "met": j["vs_recompute"] >= 1.5})
    big = m["join"].get("ab_1m")
    if big is not None:
        if "vs_base" in big:
            rows.append({"goal": "join+count 1M: >= 3x the parent commit",
                         "measured": f"{big['vs_base']:.2f}x", "met": big["vs_base"] >= 3})
        peak = big["current"]["rss_peak_mb"]
        rows.append({"goal": f"join+count 1M: peak RSS below ad1a9b2's "
                             f"{AD1A9B2_JOIN_1M_MB} MB",
                     "measured": f"{peak:,.0f} MB", "met": peak < AD1A9B2_JOIN_1M_MB})
    r = m["reach"]
    if r is None:
        return rows
    ratio = r["current"]["cpu_ms"] / r["networkx"]["cpu_ms"]
    rows.append({"goal": "reachability load: <= the networkx from-scratch CPU",
                 "measured": f"{ratio:.2f}x networkx", "met": ratio <= 1})
    bpe = r["current"]["bytes_per_edge"]
    rows.append({"goal": "reachability load: <= 300 bytes of state per edge",
                 "measured": f"{bpe:,.0f} B ({r['current']['bytes_per_edge_less_tuples']:,.0f}"
                             f" B less the edge tuples)", "met": bpe <= 300})
    return rows


def report(result: dict) -> str:
    m = result["measured"]
    out = [jc.report({"measured": m["join"], "base": result["base"],
                      "current": result["current"], "mode": result["mode"],
                      "goals": [], "notes": []}).split("\n\nthe issue's")[0]
           if m["join"] else ""]
    for name in ("ab_10k", "ab_100k", "ab_1m"):
        if name in m["join"]:
            s = m["join"][name]
            out.append(f"{name}: peak RSS " + ", ".join(
                f"{t} {s[t]['rss_peak_mb']:,.0f} MB" for t in ("base", "current", "recompute")
                if t in s))
    r = m["reach"]
    out.append("")
    if r is not None:
        c = r["config"]
        out.append(table(f"reachability initial load, {c['nodes']:,} nodes / "
                         f"{c['edges']:,} edges, "
                         f"medians of {c['reps']} (process CPU; state = peak RSS while the "
                         f"system runs less the RSS before the edges existed; 'less tuples' = "
                         f"less the RSS once they did; 'child peak' = the peak of the whole "
                         f"child, the generator's included; traced = tracemalloc's peak, a "
                         f"run of its own; env "
                         f"{' '.join(f'{k}={v}' for k, v in r['env'].items())})",
                         ["system", "CPU ms", "state MB", "bytes/edge", "runs B/edge",
                          "less tuples B/edge", "child peak B/edge", "traced MB",
                          "peak RSS MB", "reached", "agree"],
                         [[name, r[name]["cpu_ms"], r[name]["state_mb"], r[name]["bytes_per_edge"],
                           " ".join(f"{b:.0f}" for b in r[name]["bytes_per_edge_runs"]),
                           r[name]["bytes_per_edge_less_tuples"],
                           r[name]["child_peak_bytes_per_edge"], r[name]["traced_peak_mb"],
                           r[name]["rss_peak_mb"], r[name]["answer_size"],
                           "yes" if r["answers_agree"] else "NO"]
                          for name in ("base", "current", "networkx") if name in r]))
    out.append("")
    out.append(goals_table("the issue's goals (issue 22)", result["goals"]))
    out.extend(f"note: {n}" for n in result["notes"])
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_bulk",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--large", action="store_true", help="also join+count at 1M")
    parser.add_argument("--base", default=None, help="the commit to compare with "
                        "(default: the merge-base with main)")
    parser.add_argument("--no-base", action="store_true", help="the current tree only")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile run")
    parser.add_argument("--only", choices=("join", "reach"), default=None,
                        help="measure one part only")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default=None,
                        help="JSON path (default benchmarks/results/bulk.json)")
    args = parser.parse_args(argv)
    join_cfg = dict(JOIN_QUICK if args.quick else JOIN_FULL)
    if args.large:
        join_cfg.update(JOIN_LARGE)
    reach_cfg = dict(REACH_QUICK if args.quick else REACH_FULL)
    if args.reps is not None:
        join_cfg = {n: dict(c, reps=args.reps) for n, c in join_cfg.items()}
        reach_cfg["reps"] = args.reps
    repo = Path(__file__).resolve().parent.parent
    current = _git("rev-parse", "--short", "HEAD")
    if _git("status", "--porcelain", "--untracked-files=no"):
        current += "+changes"
    notes: list[str] = []
    started = time.monotonic()
    base = None

    def run(trees: dict[str, Path], tmp: Path) -> dict:
        return {"join": {} if args.only == "reach" else
                jc.measure(trees, join_cfg, args.seed, tmp, notes, not args.no_profile),
                "reach": None if args.only == "join" else
                measure_reach(trees, reach_cfg, args.seed, tmp)}
    with tempfile.TemporaryDirectory(prefix="ddflow-bench-inputs-") as tmp_name:
        tmp = Path(tmp_name)
        if args.no_base:
            measured = run({"current": repo}, tmp)
        else:
            rev = args.base or default_base()
            with base_tree(rev) as tree:
                base = _git("rev-parse", "--short", rev)
                measured = run({"base": tree, "current": repo}, tmp)
    notes.append(f"wall time of the run: {time.monotonic() - started:.0f} s")
    result = {"mode": "quick" if args.quick else "full", "base": base, "current": current,
              "seed": args.seed, "measured": measured, "notes": notes}
    result["goals"] = goals(measured)
    print(report(result))
    path = save("bulk", result, Path(args.out) if args.out else None)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
