"""Benchmark: Spark at scale, the counts of issue 13 (state on the executors, few jobs).

For reachability over random graphs of 10k, 100k and 1M edges (3 edges per node,
3 roots) on Spark `local[2]`, 2 shards, it reports per run: Spark jobs (Spark's own
status tracker, a job group per run), supersteps, wall seconds; and what the shards
tallied: bytes persisted as log entries per busy superstep and as compactions, how
each superstep found its shard's worker (resident in the Python worker, a stale copy
caught up from the log, rebuilt from the last full checkpoint).  Runs: the initial
load, six one-edge changes (3 inserts, 3 deletes), one batch of 1,000 changes
(500 deletes, 500 inserts).

"Before": the same child script in a `git worktree` of the commit before the work
(`--base`, default `4249cb8`), counted the same way, at the sizes up to
`--base-max` (default 10k: the old engine's load re-pickles every shard at each of
its ~100 supersteps, hours at 1M).  Both trees get the same inputs (a file), and
their answers are compared.  Then a cProfile of the driver over one-edge changes at
the smallest size (current tree).

    python -m benchmarks.bench_spark_state                       # 10k, 100k, 1M
    python -m benchmarks.bench_spark_state --quick               # 2k edges, for tests
    python -m benchmarks.bench_spark_state --sizes 10000 --no-base

It prints tables and writes JSON to `benchmarks/results/spark_state.json`.  Times on a
shared 2-core box are noisy; the counts (jobs, supersteps, bytes) are not.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Sequence

from benchmarks.bench_engine_core import REPO, base_tree, run_child
from benchmarks.bench_reachability import workload
from benchmarks.common import RESULTS, median, save, table

CHILD = Path(__file__).resolve().parent / "spark_state_child.py"
BASE = "4249cb8"
CHILD_TIMEOUT_S = 3 * 3600


def _workload(edges: int, seed: int, tmp: Path) -> Path:
    nodes = max(10, edges // 3)
    initial, roots, steps = workload(nodes, edges, 3, 3, seed)
    order = [steps[0], steps[3], steps[1], steps[4], steps[2], steps[5]]   # +, -, +, ...
    rng = random.Random(seed + 1)
    live = set(initial) | {e for e, d in steps if d > 0}
    live -= {e for e, d in steps if d < 0}
    gone = rng.sample(sorted(live), 500)
    batch = [(e, -1) for e in gone]
    while len(batch) < 1000:
        e = (rng.randrange(nodes), rng.randrange(nodes))
        if e not in live:
            live.add(e)
            batch.append((e, 1))
    path = tmp / f"reach-{edges}.json"
    path.write_text(json.dumps({"initial": initial, "roots": roots, "steps": order,
                                "batch": batch}))
    return path


def _row(size: int, tree: str, r: dict) -> list:
    ch = r["changes"]
    busy = [c["tally"]["busy"] for c in ch if "tally" in c]
    logged = [c["tally"]["log_bytes"] / c["tally"]["busy"] for c in ch
              if "tally" in c and c["tally"]["busy"]]
    based = sum(c["tally"]["base_bytes"] for c in ch if "tally" in c) if busy else None
    how = "-"
    if busy:
        found = {k: sum(c["tally"][k] for c in ch) for k in ("resident", "replayed", "rebuilt")}
        how = "/".join(str(found[k]) for k in ("resident", "replayed", "rebuilt"))
    b = r.get("batch", {})
    return [size, tree, r["load"]["seconds"], r["load"]["jobs"], r["load"]["supersteps"],
            max(c["jobs"] for c in ch), median([c["supersteps"] for c in ch]),
            median([c["seconds"] for c in ch]),
            median(logged) if logged else "-", based if based is not None else "-", how,
            b.get("jobs", "-"), b.get("supersteps", "-"), b.get("seconds", "-"),
            max([c["cached_rdds"] for c in ch] + [b.get("cached_rdds", 0)])]


def main(argv: Sequence[str] | None = None) -> dict:
    args = _args(argv)
    sizes = [2_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="ddflow-bench-spark-"))
    result: dict = {"sizes": sizes, "base": None if args.no_base else args.base, "runs": {}}
    rows = []
    try:
        with base_tree(args.base) if not args.no_base else nullcontext() as base:
            trees = {"current": REPO} | ({"before": base} if base else {})
            for size in sizes:
                w = _workload(size, args.seed, tmp)
                for name, tree in trees.items():
                    if name == "before" and size > args.base_max:
                        continue
                    print(f"  {size} edges, {name} ...", file=sys.stderr, flush=True)
                    t0 = time.monotonic()
                    r = run_child(tree, "reach", {"workload": str(w)}, tmp,
                                  child=CHILD, timeout=CHILD_TIMEOUT_S)
                    r["wall_s"] = time.monotonic() - t0
                    result["runs"][f"{size}/{name}"] = r
                    rows.append(_row(size, name, r))
                answers = {result["runs"][f"{size}/{n}"]["answer"] for n in trees
                           if f"{size}/{n}" in result["runs"]}
                assert len(answers) == 1, f"{size} edges: the trees disagree"
            w = _workload(sizes[0], args.seed, tmp)
            prof = run_child(REPO, "profile", {"workload": str(w)}, tmp,
                             child=CHILD, timeout=CHILD_TIMEOUT_S)
            result["profile"] = {k: prof[k] for k in ("profile_cumulative", "profile_own",
                                                      "changes")}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(table("Reachability on Spark local[2], 2 shards: per run (jobs: Spark's status "
                "tracker)",
                ["edges", "tree", "load s", "load jobs", "load steps", "1-edge jobs max",
                 "1-edge steps", "1-edge s", "log B/busy step", "base B (6 edges)",
                 "found r/c/b", "1k jobs", "1k steps", "1k s", "cached max"], rows))
    print("found: resident / caught up from the log / rebuilt from the full checkpoint,"
          " over the six one-edge runs")
    print("\ncProfile of the driver over six one-edge runs "
          f"({sizes[0]} edges), by cumulative time:")
    print(result["profile"]["profile_cumulative"])
    print(f"wrote {save('spark_state', result, Path(args.out) / 'spark_state.json')}")
    return result


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_spark_state",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2k edges only (for tests)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--base", default=BASE)
    ap.add_argument("--base-max", type=int, default=10_000)
    ap.add_argument("--no-base", action="store_true")
    return ap.parse_args(argv)


if __name__ == "__main__":
    main()
