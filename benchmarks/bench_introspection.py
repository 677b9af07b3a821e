"""Benchmark: what reading a run, logging and explaining cost (issue 25).

* `reach_2k`: one-edge reachability epochs at 2,000 nodes / 6,000 edges (20 deletions
  then 20 re-insertions), process CPU per epoch, median: the parent tree (`--base`,
  a `git worktree`) against this tree plain (operator timing off: the switch's cost),
  with `Dataflow(timing=True)` (the thread clock around every hook call) and with
  `df.logging()` (timing plus the logging collections fed after every run).
* `changes_100k`: "what changed at epoch e" over 100,000 captured updates in 1,000
  epochs: the scan a user wrote before (`[u for u in cap.updates if u[1] == e]`)
  against `cap.changes(e)` from the per-time index.
* `explain_2k`: `Capture.explain` of random reached nodes at 2,000 / 6,000: CPU per
  explanation and its size in edges, against a plain recompute of the whole
  dataflow from the same inputs (the copy `check()` runs, fed everything).
* `maintained_2k`: `df.explain` of 3 reached nodes kept through the one-edge epochs of
  `reach_2k`: CPU per epoch (the run updating it) and its work per epoch against
  the work of building it, against a twin dataflow that re-explains the same nodes
  one-off (`Capture.explain`) after each plain run.

Every measurement runs in a child interpreter (`benchmarks/introspection_child.py`),
base and current interleaved.  Run from the repository root:

    python -m benchmarks.bench_introspection            # ~3 minutes on 2 cores
    python -m benchmarks.bench_introspection --quick    # small sizes
    python -m benchmarks.bench_introspection --no-base  # this tree only

It prints tables and writes JSON to `benchmarks/results/introspection.json`.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Sequence

from benchmarks.bench_engine_core import REPO, base_tree, run_child
from benchmarks.common import median, save, table

CHILD = Path(__file__).resolve().parent / "introspection_child.py"
BASE = "c4f31a5"        # main before this work

FULL = dict(nodes=2_000, edges=6_000, changes=20, reps=3, records=100_000, epochs=1_000,
            reads=10, questions=3, seed=1)
QUICK = dict(nodes=200, edges=600, changes=5, reps=1, records=10_000, epochs=100, reads=3,
             questions=2, seed=1)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-base", action="store_true")
    ap.add_argument("--base", default=BASE)
    ap.add_argument("--out", default=None, help="where the JSON goes")
    args = ap.parse_args(argv)
    p = QUICK if args.quick else FULL
    result: dict = {"params": p}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        epochs: dict = {"base": [], "plain": [], "timing": [], "logging": []}

        def measure(base: Path | None) -> None:
            for _ in range(p["reps"]):
                if base is not None:
                    epochs["base"] += run_child(base, "reach", {**p, "mode": "plain"}, tmp,
                                                CHILD)["epochs_ms"]
                for mode in ("plain", "timing", "logging"):
                    epochs[mode] += run_child(REPO, "reach", {**p, "mode": mode}, tmp,
                                              CHILD)["epochs_ms"]

        if args.no_base:
            measure(None)
        else:
            with base_tree(args.base) as base:
                measure(base)
        med = {k: median(v) for k, v in epochs.items() if v}
        ref = med.get("base", med["plain"])
        rows = [(k, len(epochs[k]), med[k], ref / med[k]) for k in med]
        print(table(f"reachability {p['nodes']:,} nodes / {p['edges']:,} edges: CPU ms per "
                    "one-edge epoch (median)", ["tree", "epochs", "ms", "base / this"], rows))
        result["reach_2k"] = {"median_ms": med, "epochs": {k: len(v) for k, v in epochs.items()}}

        ch = run_child(REPO, "changes", p, tmp, CHILD)
        scan, read = median(ch["scan_ms"]), median(ch["changes_ms"])
        print()
        print(table(f"what changed at epoch e: {p['records']:,} captured updates over "
                    f"{p['epochs']:,} epochs (median ms)", ["scan", "changes(e)", "ratio"],
                    [(scan, read, scan / read)]))
        result["changes_100k"] = {"scan_ms": scan, "changes_ms": read}

        ex = run_child(REPO, "explain", p, tmp, CHILD)
        print()
        print(table(f"explain a reached node, {p['nodes']:,} / {p['edges']:,} (CPU ms)",
                    ["first (builds the copy)", "explain (median)", "edges in it (median)",
                     "of edges", "full recompute"],
                    [(ex["explain_ms"][0], median(ex["explain_ms"]), median(ex["sizes"]),
                      ex["edges"], ex["recompute_ms"])]))
        result["explain_2k"] = ex

        mx = run_child(REPO, "maintained", p, tmp, CHILD)
        print()
        print(table(f"a maintained explanation of {p['questions']} reached nodes, "
                    f"{p['nodes']:,} / {p['edges']:,}: per one-edge epoch (median)",
                    ["build ms", "build work", "epoch ms (run + update)",
                     "update work", "work / build", "epoch + one-off ms", "one-off / this"],
                    [(mx["build_ms"], mx["build_work"], median(mx["run_ms"]),
                      median(mx["work"]), median(mx["work"]) / mx["build_work"],
                      median(mx["oneoff_ms"]), median(mx["oneoff_ms"]) / median(mx["run_ms"]))]))
        result["maintained_2k"] = mx
    print("\nwrote", save("introspection", result, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
