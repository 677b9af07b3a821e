"""Child of `bench_spark_driver_memory`: one DataFrame load in a fresh driver.

`python -P spark_memory_child.py load PARAMS.json` with `PYTHONPATH` the tree to
measure (this checkout, or the base commit's worktree): it uses only the public
API (`make_session`, `SparkEngine`, `insert_dataframe`, `Capture.at`), so any
commit that has them can be measured.  Prints one JSON object.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from typing import Any

KEYS = 1_000


def _status(pid: int | str, field: str) -> int:
    """A `/proc/<pid>/status` field in bytes (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak(pid: int | str) -> bool:
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def load(n: int, master: str) -> dict:
    """Load n rows, report the memory."""
    from pyspark.sql import functions as F

    import ddflow
    from ddflow.engine.spark import SparkEngine, make_session
    spark = make_session(master, app="ddflow-bench-driver-memory")
    jvm = spark.sparkContext._gateway.proc.pid
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection("facts")
    cap = c.map(lambda kv: kv[0]).count().capture()

    def rows(count: int, start: int) -> Any:
        return spark.range(start, start + count, numPartitions=4).select(
            (F.col("id") % KEYS).alias("k"), F.col("id").alias("v"))
    s.insert_dataframe(rows(100, 10**9))            # warm-up: every module loaded
    s.advance_to(1)
    df.run()
    cap.at(0)
    gc.collect()
    before = {"driver": _status("self", "VmRSS"), "jvm": _status(jvm, "VmRSS")}
    reset = _reset_peak("self") and _reset_peak(jvm)
    t0 = time.perf_counter()
    s.insert_dataframe(rows(n, 0))
    s.advance_to(2)
    df.run()
    answer = cap.at(1)
    seconds = time.perf_counter() - t0
    peak = {"driver": _status("self", "VmHWM"), "jvm": _status(jvm, "VmHWM")}
    assert sum(k_n[1] for k_n in answer) == n + 100, "wrong answer"
    engine.stop()
    spark.stop()
    return {"size": n, "before": before, "peak": peak, "peak_reset": reset,
            "growth": {k: peak[k] - before[k] for k in before}, "seconds": seconds,
            "keys": len(answer), "ddflow": os.path.dirname(ddflow.__file__)}


if __name__ == "__main__":
    params = json.loads(open(sys.argv[2]).read())
    print(json.dumps(load(params["size"], params["master"])))
