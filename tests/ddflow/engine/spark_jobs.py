"""Counting Spark jobs the way Spark counts them: its status tracker, by job group."""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from typing import Any, Callable, Iterator

_GROUPS = itertools.count()


@contextmanager
def spark_jobs(spark: Any) -> Iterator[Callable[[], int]]:
    """Within the block, this thread's Spark jobs carry a job group of their own;
    the function yielded counts them (Spark's `statusTracker`), during the block or
    after it.  The thread's previous job group comes back at the end."""
    sc = spark.sparkContext
    group = f"ddflow-test-{next(_GROUPS)}"
    previous = sc.getLocalProperty("spark.jobGroup.id")
    sc.setJobGroup(group, "counted by a test")
    try:
        yield lambda: len(sc.statusTracker().getJobIdsForGroup(group))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", previous)
