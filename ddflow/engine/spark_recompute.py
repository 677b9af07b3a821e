"""The plain PySpark recompute that ddflow on Spark is measured against.

Part of the Spark engine, though it imports nothing from pyspark: it works only
through the session and the DataFrames it is given.  It isolates the baseline a PySpark user writes without ddflow: keep the data as a
DataFrame of rows with a `diff` column (the base plus the changes so far) and
recompute the answer from all of it after every change.  Notebook 08 and
`benchmarks/bench_spark_recompute.py` both run these functions, so the baseline
a learner reads is the one the benchmark times.  It leaves out measuring (the
benchmark's `Meter`) and ddflow itself.
"""

from __future__ import annotations

from typing import Any, Iterable


def live_edges(current: Any) -> Any:
    """The edges `(src, dst)` whose diffs in `current` sum above zero, made
    concrete (`localCheckpoint`) so the levels below do not re-plan them."""
    return (current.groupBy("src", "dst").agg({"diff": "sum"})
            .withColumnRenamed("sum(diff)", "m")
            .filter("m > 0").select("src", "dst").localCheckpoint())


def recompute_reachability(spark: Any, current: Any, roots: Iterable[int]) -> Any:
    """The nodes reachable from `roots` along the live edges of `current`
    (columns `src, dst, diff`), as a one-column DataFrame `node`.

    One DataFrame join per BFS level, semi-naive (only the nodes new at a level
    are joined again), each level made concrete with `localCheckpoint` so the
    plans stay flat, until a level adds nothing."""
    edges = live_edges(current)
    reached = spark.createDataFrame([(r,) for r in roots], "node long").localCheckpoint()
    frontier = reached
    while True:
        step = (frontier.join(edges, frontier["node"] == edges["src"])
                .selectExpr("dst AS node").distinct())
        new = step.join(reached, "node", "left_anti").localCheckpoint()
        if new.isEmpty():
            return reached
        reached = reached.union(new).localCheckpoint()
        frontier = new


def recompute_join_count(current: Any, dimension: Any) -> Any:
    """Facts `(k, v, diff)` joined with a dimension `(k, cat)`: the number of
    facts per category, `cat, n`, the categories with `n != 0`."""
    return (current.join(dimension, "k").groupBy("cat").agg({"diff": "sum"})
            .withColumnRenamed("sum(diff)", "n").filter("n != 0").localCheckpoint())
