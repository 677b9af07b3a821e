"""One measurement of `bench_engine_core`, run in a child process inside the tree measured.

`bench_engine_core` runs this file with `PYTHONPATH` and the working directory set to
the tree being measured (the current checkout, or a `git worktree` of the parent
commit), so the same script times both.  It therefore uses only public API that both
trees have (`ddflow.Dataflow`, `new_collection`, sessions' `insert` / `update` /
`advance_to`, `run`, `capture`, `Capture.at`, `ddflow.algorithms.reachability`) and
imports nothing from `benchmarks`: its inputs come in a JSON file the parent wrote.

CPU time is `time.process_time()` around the timed region only: an epoch is "tell
the change, advance the inputs, run"; a capture read is one `at(t)` call.

    python -P benchmarks/engine_core_child.py reach|capture|profile PARAMS.json

prints one JSON object on stdout.
"""

from __future__ import annotations

import cProfile
import hashlib
import json
import os
import pstats
import random
import sys
import time
from typing import Any


def _digest(answer: Any) -> str:
    return hashlib.sha256(repr(answer).encode()).hexdigest()[:16]


def _reachability_dataflow() -> tuple[Any, Any, Any, Any]:
    import ddflow
    from ddflow.algorithms import reachability

    df = ddflow.Dataflow()
    e_in, edges = df.new_collection("edges")
    r_in, roots = df.new_collection("roots")
    return df, e_in, r_in, reachability(edges, roots).capture()


def _load(p: dict) -> tuple[Any, Any, Any, Any, list, float]:
    """The graph loaded and run at epoch 0; the steps; the load's CPU ms."""
    with open(p["workload"]) as f:
        w = json.load(f)
    steps = [(tuple(e), d) for e, d in w["steps"]][: p["epochs"]]
    df, e_in, r_in, cap = _reachability_dataflow()
    c0 = time.process_time()
    for e in w["initial"]:
        e_in.insert(tuple(e))
    for r in w["roots"]:
        r_in.insert(r)
    e_in.advance_to(1)
    r_in.advance_to(1)
    df.run()
    return df, e_in, r_in, cap, steps, (time.process_time() - c0) * 1e3


def _epoch(df: Any, e_in: Any, r_in: Any, t: int, edge: tuple, diff: int) -> None:
    e_in.update(edge, diff)
    e_in.advance_to(t + 1)
    r_in.advance_to(t + 1)
    df.run()


def reach(p: dict) -> dict:
    df, e_in, r_in, cap, steps, load_ms = _load(p)
    passes = getattr(df.engine, "passes", None)
    ms, pass_counts = [], []
    for t, (edge, diff) in enumerate(steps, start=1):
        before = getattr(df.engine, "passes", None)
        c0 = time.process_time()
        _epoch(df, e_in, r_in, t, edge, diff)
        ms.append((time.process_time() - c0) * 1e3)
        if passes is not None:
            pass_counts.append(df.engine.passes - before)
    answer = sorted(cap.at(len(steps)).items())
    return {"load_ms": load_ms, "epoch_ms": ms, "passes": pass_counts or None,
            "answer_size": len(answer), "answer": _digest(answer)}


def captured_records(records: int, epochs: int) -> tuple[Any, Any, Any]:
    """`(dataflow, session, capture)`: `records` ints captured over `epochs` runs."""
    import ddflow

    df = ddflow.Dataflow()
    s, coll = df.new_collection("records")
    cap = coll.capture()
    per_epoch = records // epochs
    for epoch in range(epochs):
        for i in range(per_epoch):
            s.insert(epoch * per_epoch + i)
        s.advance_to(epoch + 1)
        df.run()
    return df, s, cap


def capture(p: dict) -> dict:
    rng = random.Random(p["seed"])
    df, s, cap = captured_records(p["records"], p["epochs"])
    t = p["epochs"] - 1                 # the latest final time
    c0 = time.process_time()
    cap.at(t)
    first_ms = (time.process_time() - c0) * 1e3
    ms = []
    for _ in range(p["reads"]):
        # A small step (new records, retractions of old ones), then the answer at
        # the newest final time: the pattern of reading the output after each step.
        for _ in range(p["changes"]):
            s.insert(rng.randrange(p["records"], 100 * p["records"]))
            s.remove(rng.randrange(p["records"]))
        t += 1
        s.advance_to(t + 1)
        df.run()
        c0 = time.process_time()
        answer = cap.at(t)
        ms.append((time.process_time() - c0) * 1e3)
    final = sorted(answer.items())
    return {"first_read_ms": first_ms, "read_ms": ms, "answer_size": len(final),
            "answer": _digest(final)}


def profile(p: dict) -> dict:
    """cProfile over the one-edge epochs; progress tracking's share of their CPU."""
    df, e_in, r_in, cap, steps, _load_ms = _load(p)
    # The profiler's default clock: a CPU-time clock is a system call per function
    # call, which would swamp what it measures.  The shares are what matter; the
    # CPU time of the profiled epochs is measured apart.
    prof = cProfile.Profile()
    cpu = 0.0
    for t, (edge, diff) in enumerate(steps, start=1):
        c0 = time.process_time()
        prof.enable()
        _epoch(df, e_in, r_in, t, edge, diff)
        prof.disable()
        cpu += time.process_time() - c0
    stats = pstats.Stats(prof).stats
    progress_file = os.path.realpath(os.path.join("ddflow", "progress.py"))

    def in_progress(func: tuple) -> bool:
        return os.path.realpath(func[0]) == progress_file

    total = sum(tt for _cc, _nc, tt, _ct, _callers in stats.values())
    # Inclusive time of the calls *into* ddflow/progress.py from outside it: calls
    # between its own functions are inside those, so counting them would count twice.
    progress = sum(edge[3] for func, (_cc, _nc, _tt, _ct, callers) in stats.items()
                   if in_progress(func)
                   for caller, edge in callers.items() if not in_progress(caller))
    root = os.path.realpath(".") + os.sep

    def label(f: tuple) -> str:
        path = os.path.realpath(f[0])
        where = path.removeprefix(root) if path.startswith(root) else os.path.basename(f[0])
        return f"{where}:{f[1]}({f[2]})"

    top = sorted(stats.items(), key=lambda kv: -kv[1][2])[: p["top"]]
    return {"epochs": len(steps), "cpu_ms": cpu * 1e3, "profiled_ms": total * 1e3,
            "progress_ms": progress * 1e3,
            "progress_share": progress / total if total else 0.0,
            "top": [{"function": label(f), "calls": nc, "tottime_ms": tt * 1e3,
                     "cumtime_ms": ct * 1e3} for f, (_cc, nc, tt, ct, _callers) in top]}


TASKS = {"reach": reach, "capture": capture, "profile": profile}


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
