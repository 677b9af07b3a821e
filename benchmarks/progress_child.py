"""One measurement of `bench_progress`, run in a child process inside the tree measured.

`bench_progress` runs this file with `PYTHONPATH` and the working directory set to
the tree being measured (this checkout, or a `git worktree` of the parent commit).
It uses only public API both trees have, and chooses the tracker with
`ddflow.engine.plan.set_tracking` where the tree has it (the parent has one tracker,
by path summaries).

Tasks:

* `chain`: a chain of `steps` concat + distinct steps (4 nodes a step; every
  distinct reads its frontier) with one record: CPU of building the graph, of the
  first `run()` (the plan compiled, the tracker built, the record through the
  chain), then of `epochs` one-record epochs; peak RSS.
* `reach`: reachability at `nodes` / `edges` (the workload `bench_engine_core` runs,
  in a file), then one-edge epochs: CPU per epoch (the per-change cost).

    python -P benchmarks/progress_child.py chain|reach PARAMS.json

prints one JSON object on stdout.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# This checkout's `benchmarks/rss.py` (peak RSS from VmHWM), found at the end of the
# path: the tree measured comes first.
sys.path.append(str(Path(__file__).resolve().parent))
import rss  # noqa: E402


def _tracking(mode: str | None) -> str:
    """Choose the tracker where the tree can; the one used ("paths" in a tree
    with only that one)."""
    from ddflow.engine import plan
    if mode is None or not hasattr(plan, "set_tracking"):
        return "paths"
    plan.set_tracking(mode)
    return mode


def _tracker_name(df: Any) -> str:
    return type(df.engine._worker.tracker).__name__


def _auto(df: Any) -> str:
    """The tracker "auto" gives this dataflow's graph ("paths" in a tree with one)."""
    from ddflow.engine import plan
    if not hasattr(plan, "tracking_for"):
        return "paths"
    old = plan.set_tracking("auto")
    try:
        return plan.tracking_for([pn.inputs for pn in df.engine._worker.plan.nodes])
    finally:
        plan.set_tracking(old)


def chain(p: dict) -> dict:
    mode = _tracking(p.get("tracking"))
    import ddflow
    c0 = time.process_time()
    df = ddflow.Dataflow()
    s, c = df.new_collection()
    x = c
    for _ in range(p["steps"]):
        x = x.concat(c).distinct()
    cap = x.capture()
    s.insert(0)
    s.advance_to(1)
    c1 = time.process_time()
    df.run()
    c2 = time.process_time()
    epochs = []
    for k in range(p["epochs"]):
        s.insert(k + 1)
        s.advance_to(k + 2)
        t = time.process_time()
        df.run()
        epochs.append((time.process_time() - t) * 1e3)
    answer = cap.at(p["epochs"])
    assert answer == {k: 1 for k in range(p["epochs"] + 1)}, answer
    return {"mode": mode, "tracker": _tracker_name(df), "auto": _auto(df),
            "nodes": len(df.nodes),
            "build_ms": (c1 - c0) * 1e3, "first_run_ms": (c2 - c1) * 1e3,
            "epoch_ms": epochs, "peak_rss_mb": rss.peak_mb()}


def reach(p: dict) -> dict:
    mode = _tracking(p.get("tracking"))
    import ddflow
    from ddflow.algorithms import reachability
    with open(p["workload"]) as f:
        w = json.load(f)
    df = ddflow.Dataflow()
    e_in, edges = df.new_collection("edges")
    r_in, roots = df.new_collection("roots")
    cap = reachability(edges, roots).capture()
    for e in w["initial"]:
        e_in.insert(tuple(e))
    for r in w["roots"]:
        r_in.insert(r)
    e_in.advance_to(1)
    r_in.advance_to(1)
    df.run()
    epochs = []
    for k, (e, d) in enumerate(w["steps"]):
        e_in.update(tuple(e), d)
        e_in.advance_to(k + 2)
        r_in.advance_to(k + 2)
        t = time.process_time()
        df.run()
        epochs.append((time.process_time() - t) * 1e3)
    return {"mode": mode, "tracker": _tracker_name(df), "epoch_ms": epochs,
            "reached": len(cap.at(len(w["steps"])))}


TASKS = {"chain": chain, "reach": reach}


def main() -> None:
    task, params = sys.argv[1], sys.argv[2]
    with open(params) as f:
        p = json.load(f)
    import ddflow
    result = TASKS[task](p)
    result["ddflow"] = os.path.dirname(os.path.realpath(ddflow.__file__))
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
