"""One measurement of `bench_spark_state`, run in a child process inside the tree measured.

`bench_spark_state` runs this file with `PYTHONPATH` and the working directory set to
the tree measured (this checkout, or a `git worktree` of the commit before the work),
so the same script counts both.  It uses only what both trees have
(`SparkEngine(spark, shards=2)`, `engine.supersteps`, sessions, `run`, `capture`,
`ddflow.algorithms.reachability`); what only the current tree has (`engine.tally()`)
is read if present.  Spark's own status tracker counts the jobs (a job group per run).

    python -P benchmarks/spark_state_child.py reach|profile PARAMS.json   # one JSON object

Tasks: `reach` (load a graph, one-edge changes, one batch of changes; per run: Spark
jobs, supersteps, wall seconds, what the shards tallied) and `profile` (the same
load, then a cProfile of the driver over one-edge changes).
"""

from __future__ import annotations

import cProfile
import hashlib
import io
import json
import os
import pstats
import sys
import time
from typing import Any


def _run(df: Any, engine: Any, sc: Any, label: str) -> dict:
    """One `df.run()`, counted: Spark jobs, supersteps, seconds, tally, cached RDDs."""
    group = f"bench-{label}-{time.monotonic_ns()}"
    sc.setJobGroup(group, label)
    steps = engine.supersteps
    tally = engine.tally() if hasattr(engine, "tally") else None
    t0 = time.perf_counter()
    df.run()
    seconds = time.perf_counter() - t0
    out = {"jobs": len(sc.statusTracker().getJobIdsForGroup(group)),
           "supersteps": engine.supersteps - steps, "seconds": seconds,
           "cached_rdds": sc._jsc.getPersistentRDDs().size()}
    if tally is not None:
        after = engine.tally()
        out["tally"] = {k: after[k] - tally[k] for k in after}
    return out


def main() -> None:
    task = sys.argv[1]
    with open(sys.argv[2]) as f:
        p = json.load(f)
    import ddflow
    from ddflow.algorithms import reachability
    from ddflow.engine.spark import SparkEngine, make_session

    with open(p["workload"]) as f:
        w = json.load(f)
    spark = make_session(p.get("master", "local[2]"), app="bench-spark-state")
    sc = spark.sparkContext
    result: dict = {"ddflow": os.path.dirname(os.path.abspath(ddflow.__file__))}
    try:
        engine = SparkEngine(spark, shards=2)
        df = ddflow.Dataflow(engine=engine)
        e_in, edges = df.new_collection("edges")
        r_in, roots = df.new_collection("roots")
        cap = reachability(edges, roots).capture()
        for e in w["initial"]:
            e_in.insert(tuple(e))
        for r in w["roots"]:
            r_in.insert(r)
        e_in.advance_to(1)
        r_in.advance_to(1)
        result["load"] = _run(df, engine, sc, "load")
        print(f"    load: {result['load']}", file=sys.stderr, flush=True)
        t = 1
        changes = []
        profiler = cProfile.Profile() if task == "profile" else None
        for e, d in w["steps"]:
            e_in.update(tuple(e), d)
            t += 1
            e_in.advance_to(t)
            r_in.advance_to(t)
            if profiler:
                profiler.enable()
            changes.append(_run(df, engine, sc, "edge"))
            if profiler:
                profiler.disable()
            print(f"    edge: {changes[-1]}", file=sys.stderr, flush=True)
        result["changes"] = changes
        if profiler:
            s = io.StringIO()
            pstats.Stats(profiler, stream=s).sort_stats("cumulative").print_stats(25)
            result["profile_cumulative"] = s.getvalue()
            s = io.StringIO()
            pstats.Stats(profiler, stream=s).sort_stats("tottime").print_stats(15)
            result["profile_own"] = s.getvalue()
        elif w.get("batch"):
            for e, d in w["batch"]:
                e_in.update(tuple(e), d)
            t += 1
            e_in.advance_to(t)
            r_in.advance_to(t)
            result["batch"] = _run(df, engine, sc, "batch")
            print(f"    batch: {result['batch']}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        updates = cap.updates
        result["read_s"] = time.perf_counter() - t0
        result["answer"] = hashlib.sha256(repr(updates).encode()).hexdigest()[:16]
        result["answer_size"] = len(updates)
        engine.stop()
    finally:
        spark.stop()
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
