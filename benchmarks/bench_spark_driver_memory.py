"""The driver's memory while a DataFrame input loads into ddflow on Spark.

Each size runs in a fresh driver process (so one size's garbage cannot hide in
another's): a SparkSession, a dataflow counting facts per key (1,000 keys), and a
warm-up step on a few rows so that every module is loaded; then the peak RSS is
reset (`/proc/self/clear_refs`) and the measured part runs: `insert_dataframe` of
N rows generated on the executors (`spark.range`), `run()`, and reading the answer
(`Capture.at`).  Reported: the driver process's peak RSS over its RSS before the
load, and the same for the JVM, which with a `local[...]` master is also the
executor (it caches the shards, so its growth is the executors' memory, not the
driver's).  The goal (issue 13): the driver's growth at 1M rows within 100 MB of
its growth at 100k.

Run: `python -m benchmarks.bench_spark_driver_memory [--quick] [--sizes 100000,1000000]`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import save, standard_args, table

RESULTS = Path(__file__).resolve().parent / "results" / "spark_driver_memory.json"
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


def child(n: int, master: str) -> dict:
    """Run in the fresh driver process: load n rows, report the memory."""
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
    import gc
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
            "keys": len(answer)}


def _options(parser: Any) -> None:
    parser.add_argument("--sizes", help="comma-separated row counts (default 100000,1000000;"
                        " --quick: 10000,100000)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)


def main(argv: list[str] | None = None) -> dict:
    args = standard_args("bench_spark_driver_memory", __doc__, RESULTS, argv, _options)
    if args.child is not None:
        print(json.dumps(child(args.child, args.master)))
        return {}
    sizes = ([int(x) for x in args.sizes.split(",")] if args.sizes else
             [10_000, 100_000] if args.quick else [100_000, 1_000_000])
    root = Path(__file__).resolve().parents[1]
    runs = []
    for n in sizes:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_spark_driver_memory",
                               "--child", str(n), "--master", args.master],
                              cwd=root, capture_output=True, text=True, timeout=3600)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode or not lines:
            raise RuntimeError(f"size {n} failed:\n{proc.stderr[-3000:]}")
        runs.append(json.loads(lines[-1]))
    mb = 1024 * 1024
    rows = [[r["size"], r["before"]["driver"] / mb, r["growth"]["driver"] / mb,
             r["before"]["jvm"] / mb, r["growth"]["jvm"] / mb, r["seconds"]] for r in runs]
    print(table(f"Driver memory while a DataFrame input loads ({args.master}; MB; the JVM is "
                "also the executor in local mode)",
                ["rows", "driver RSS before", "driver peak growth", "JVM RSS before",
                 "JVM peak growth", "load+run+read s"], rows))
    extra = (runs[-1]["growth"]["driver"] - runs[0]["growth"]["driver"]) / mb
    print(f"driver growth at {runs[-1]['size']:,} rows over {runs[0]['size']:,}: "
          f"{extra:+.1f} MB (goal: <= 100 MB)")
    result = {"master": args.master, "runs": runs, "driver_growth_difference_mb": extra}
    print(f"wrote {save('spark_driver_memory', result, Path(args.out))}")
    return result


if __name__ == "__main__":
    main()
