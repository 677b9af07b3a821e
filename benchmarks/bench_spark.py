"""The Spark engine against the local engine, on the same dataflows in the same run.

Reports, per workload, Spark jobs per logical step (one `df.run()` after an epoch's
updates) and seconds per step, next to the local engine's seconds per step.  On a
2-core machine Spark is slower by design of the comparison: it pays ~0.1-0.3 s per
job (PySpark's fixed cost per job, measured on this machine); the figures show the
engine runs one job per superstep, not one per operator or per loop round.

Workloads: W1 reachability (a random graph, single-edge epochs) and the join + count
of `bench_join_count` (smaller).  Run: `python -m benchmarks.bench_spark [--quick]
[--master local[2]]`.
"""

from __future__ import annotations

import argparse
import random
import time

import ddflow
from benchmarks.common import median, save, table
from ddflow.algorithms.graphs import reachability


def _reach_steps(engine, nodes: int, edges: int, epochs: int, seed: int = 5):
    rng = random.Random(seed)
    graph: set = set()
    while len(graph) < edges:
        graph.add((rng.randrange(nodes), rng.randrange(nodes)))
    df = ddflow.Dataflow(engine=engine) if engine else ddflow.Dataflow()
    e_in, e = df.new_collection()
    r_in, r = df.new_collection()
    cap = reachability(e, r).capture()
    for x in graph:
        e_in.insert(x)
    for x in range(3):
        r_in.insert(x)
    steps = []

    def step(t):
        e_in.advance_to(t)
        r_in.advance_to(t)
        jobs = engine.jobs if engine else 0
        t0 = time.perf_counter()
        df.run()
        steps.append((time.perf_counter() - t0, (engine.jobs - jobs) if engine else 0))

    step(1)
    live = sorted(graph)
    for epoch in range(1, epochs + 1):
        if epoch % 2:
            e_in.remove(live.pop(rng.randrange(len(live))))
        else:
            e_in.insert((rng.randrange(nodes), rng.randrange(nodes)))
        step(epoch + 1)
    return steps, cap.updates


def _join_count_steps(engine, n: int, epoch: int, keys: int):
    from benchmarks.bench_join_count import workload
    dimension, epochs = workload(n, epoch, keys)
    df = ddflow.Dataflow(engine=engine) if engine else ddflow.Dataflow()
    f_in, facts = df.new_collection()
    d_in, dim = df.new_collection()
    cap = facts.join(dim).map(lambda kv: kv[1][1]).count().capture()
    for row in dimension:
        d_in.insert(row)
    steps = []
    for t, batch in enumerate(epochs, start=1):
        for fact, diff in batch:
            f_in.update(fact, diff)
        f_in.advance_to(t)
        d_in.advance_to(t)
        jobs = engine.jobs if engine else 0
        t0 = time.perf_counter()
        df.run()
        steps.append((time.perf_counter() - t0, (engine.jobs - jobs) if engine else 0))
    return steps, cap.updates


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)
    from ddflow.engine.spark import SparkEngine, make_session
    spark = make_session(args.master, app="ddflow-bench")
    try:
        size = (200, 600, 6) if args.quick else (1000, 3000, 12)
        jc = (3_000, 500, 300) if args.quick else (20_000, 1_000, 2_000)
        rows, result = [], {"master": args.master}
        for name, run in (("W1 reachability", lambda eng: _reach_steps(eng, *size)),
                          ("join + count", lambda eng: _join_count_steps(eng, *jc))):
            local_steps, local_out = run(None)
            engine = SparkEngine(spark, shards=2)
            spark_steps, spark_out = run(engine)
            assert spark_out == local_out, f"{name}: engines disagree"
            s_sec = median([s for s, _j in spark_steps[1:]])
            l_sec = median([s for s, _j in local_steps[1:]])
            jobs = median([j for _s, j in spark_steps[1:]])
            rows.append([name, len(spark_steps), jobs, s_sec, l_sec, s_sec / l_sec])
            result[name] = {"steps": len(spark_steps), "spark_jobs_per_step_median": jobs,
                            "spark_s_per_step_median": s_sec, "local_s_per_step_median": l_sec,
                            "spark_first_step_s": spark_steps[0][0],
                            "spark_jobs_first_step": spark_steps[0][1],
                            "supersteps_total": engine.supersteps, "agree": True}
        print(table(f"Spark ({args.master}, 2 shards) vs local engine, same dataflows",
                    ["workload", "steps", "jobs/step", "spark s/step", "local s/step",
                     "spark/local"], rows))
        print(f"wrote {save('spark', result)}")
        return result
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
