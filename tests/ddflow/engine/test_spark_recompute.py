"""The PySpark recompute baseline (`ddflow.engine.spark_recompute`), against plain Python.

Notebook 08 and `benchmarks/bench_spark_recompute.py` measure ddflow on Spark against
these functions; here their answers are checked on random small inputs with
retractions (diffs summing to zero, duplicates, cycles, unreachable parts).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from ddflow.engine.spark_recompute import recompute_join_count, recompute_reachability

pytestmark = pytest.mark.spark


def _plain_reach(rows: list, roots: tuple) -> set:
    live = Counter()
    for s, d, r in rows:
        live[(s, d)] += r
    seen, todo = set(roots), list(roots)
    while todo:
        x = todo.pop()
        for (s, d), m in live.items():
            if s == x and m > 0 and d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_recompute_reachability_is_plain_reachability(spark, seed):
    rng = random.Random(seed)
    rows = [(rng.randrange(12), rng.randrange(12), 1) for _ in range(25)]
    rows += [(s, d, -1) for s, d, _r in rng.sample(rows, 8)]      # some edges retracted
    frame = spark.createDataFrame(rows, "src long, dst long, diff long")
    got = {r["node"] for r in recompute_reachability(spark, frame, (0, 1)).collect()}
    assert got == _plain_reach(rows, (0, 1))


def test_recompute_join_count_is_plain_join_count(spark):
    rng = random.Random(7)
    facts = [(rng.randrange(6), i, 1) for i in range(30)]
    facts += [(k, v, -1) for k, v, _r in rng.sample(facts, 10)]
    dim = [(k, k % 3) for k in range(6)]
    want = Counter()
    for k, _v, r in facts:
        want[k % 3] += r
    got = recompute_join_count(spark.createDataFrame(facts, "k long, v long, diff long"),
                               spark.createDataFrame(dim, "k long, cat long")).collect()
    assert {(r["cat"], r["n"]) for r in got} == {(c, n) for c, n in want.items() if n}
