"""Run by test_spark_ops.py in its own process: a SparkSession built the way a user
builds one (no PYSPARK_PYTHON, none of ddflow's settings), then a Python that cannot
import the project.  Prints one JSON line of what happened."""

from __future__ import annotations

import json
import os
import sys


def main(bare_python: str) -> None:
    from pyspark.sql import SparkSession

    import ddflow
    from ddflow.engine.spark import SparkEngine
    from ddflow.errors import ExecutorEnvironmentError

    spark = (SparkSession.builder.master("local[2]").appName("user-session")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    sc = spark.sparkContext
    out = {"python_before": sc.pythonExec}
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection()
    cap = c.count().capture()
    for word in ("a", "b", "a"):
        s.insert(word)
    s.advance_to(1)
    df.run()
    out["answer"] = sorted(cap.at(0).items())
    out["executor_pythons"] = sorted({i["python"] for i in engine._setup.executors})
    engine.stop()

    # The user points the executors at a Python without the project.
    os.environ["PYSPARK_PYTHON"] = sc.pythonExec = bare_python
    out["bare_python"] = bare_python
    engine = SparkEngine(spark, shards=2, ship_code=False)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection()
    cap = c.count().capture()
    s.insert("a")
    s.advance_to(1)
    try:
        df.run()
        out["bare_error"] = None
    except ExecutorEnvironmentError as exc:
        out["bare_error"] = f"{type(exc).__name__}: {exc}"
    out["read_after_error"] = cap.updates
    engine.stop()
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
