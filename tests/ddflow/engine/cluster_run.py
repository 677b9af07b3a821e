"""Run by test_spark_cluster.py in its own process: a dataflow on a real multi-process
Spark cluster (`local-cluster[2,1,1024]`: two executor JVMs), one executor killed with
SIGKILL in the middle of a superstep, results compared with the local engine.
Prints one JSON line with what happened."""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time


def _descends_from_me(pid: int) -> bool:
    """Whether `pid` is a descendant of this process (the executors this driver's
    JVM started, not another session's)."""
    me = os.getpid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == me:
            return True
    return False


def executor_pids() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"CoarseGrainedExecutorBackend" in cmd and _descends_from_me(int(entry)):
                pids.append(int(entry))
    return pids


def build(df):
    from ddflow.algorithms.graphs import reachability
    e_in, e = df.new_collection("edges")
    r_in, r = df.new_collection("roots")
    reach = reachability(e, r).capture()
    counts = e.map(lambda kv: kv[0]).count().capture()
    return e_in, r_in, reach, counts


def drive(df, epochs, on_epoch=None):
    e_in, r_in, reach, counts = build(df)
    rng = random.Random(3)
    live = set()
    for epoch in range(epochs):
        for _ in range(6):
            x = (rng.randrange(12), rng.randrange(12))
            if x not in live:
                live.add(x)
                e_in.insert(x)
        if epoch % 3 == 2:
            x = sorted(live)[rng.randrange(len(live))]
            live.discard(x)
            e_in.remove(x)
        if epoch == 0:
            r_in.insert(0)
        e_in.advance_to(epoch + 1)
        r_in.advance_to(epoch + 1)
        if on_epoch:
            on_epoch(epoch)
        df.run()
    return reach.updates, counts.updates


def main() -> None:
    import ddflow
    from ddflow.engine.spark import SparkEngine, make_session

    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    spark = make_session("local-cluster[2,1,1024]", app="ddflow-cluster-test")
    sc = spark.sparkContext
    deadline = time.time() + 120
    while sc._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.time() < deadline:
        time.sleep(0.5)
    worker_pids = set(sc.parallelize(range(8), 4).mapPartitions(lambda _: [os.getppid()]).collect())
    jvms_before = executor_pids()
    engine = SparkEngine(spark, shards=2)
    killed = []

    def kill_one():
        pids = executor_pids()
        if pids:
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    def on_epoch(epoch):
        if epoch == epochs // 2:
            original = engine._job

            def job_with_kill(start, stages):
                if not killed:
                    threading.Timer(0.05, kill_one).start()   # mid-job (of supersteps)
                return original(start, stages)
            engine._job = job_with_kill

    t0 = time.time()
    spark_out = drive(ddflow.Dataflow(engine=engine), epochs, on_epoch)
    local_out = drive(ddflow.Dataflow(workers=2), epochs)
    print(json.dumps({
        "executor_jvms_before": jvms_before, "python_worker_parents": sorted(worker_pids),
        "driver_pid": os.getpid(), "killed": killed, "executor_jvms_after": executor_pids(),
        "agree": spark_out == local_out, "reach_updates": len(spark_out[0]),
        "supersteps": engine.supersteps, "seconds": round(time.time() - t0, 1)}))
    spark.stop()


if __name__ == "__main__":
    main()
