"""Spark at scale, counted as Spark counts: jobs per change (its status tracker).
(Cached RDDs and files over 100 epochs: test_spark_ops.py.)

One local[2] session serves the whole run (fixture in conftest.py).  The sizes here
are small enough for the suite; `benchmarks/bench_spark_state.py` gives the same
counts at 10k to 1M edges."""

from __future__ import annotations

import random

import pytest

import ddflow
from ddflow.algorithms.graphs import reachability
from ddflow.engine.spark import SparkEngine
from tests.ddflow.engine.spark_jobs import spark_jobs

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def _reach(engine, graph: set, roots=(0, 1, 2)):
    df = ddflow.Dataflow(engine=engine) if engine else ddflow.Dataflow(workers=2)
    e_in, e = df.new_collection("edges")
    r_in, r = df.new_collection("roots")
    cap = reachability(e, r).capture()
    for x in graph:
        e_in.insert(x)
    for x in roots:
        r_in.insert(x)
    return df, e_in, r_in, cap


def test_one_edge_and_a_thousand_changes_take_few_spark_jobs(spark):
    """Reachability over 3,000 edges: each single-edge change completes in <= 3 Spark
    jobs, a batch of 1,000 changes in <= 5, with the local engine's answers."""
    rng = random.Random(13)
    nodes = 1000
    graph: set = set()
    while len(graph) < 3000:
        graph.add((rng.randrange(nodes), rng.randrange(nodes)))
    live = sorted(graph)
    changes = []
    for k in range(4):
        changes.append([(live.pop(rng.randrange(len(live))), -1)] if k % 2 else
                       [((rng.randrange(nodes), nodes + k), 1)])
    batch = [(live.pop(rng.randrange(len(live))), -1) for _ in range(500)]
    batch += [((rng.randrange(nodes), rng.randrange(nodes)), 1) for _ in range(500)]
    changes.append(batch)
    answers, counts = [], []
    engine = SparkEngine(spark, shards=2)
    for eng in (engine, None):
        df, e_in, r_in, cap = _reach(eng, graph)
        e_in.advance_to(1)
        r_in.advance_to(1)
        df.run()
        for t, change in enumerate(changes, start=2):
            for edge, diff in change:
                e_in.update(edge, diff)
            e_in.advance_to(t)
            r_in.advance_to(t)
            if eng is None:
                df.run()
                continue
            steps = eng.supersteps
            with spark_jobs(spark) as jobs:
                df.run()
            counts.append((jobs(), eng.supersteps - steps))
        answers.append(cap.updates)
    engine.stop()
    assert answers[0] == answers[1]
    assert all(jobs <= 3 for jobs, _steps in counts[:-1]), counts
    assert counts[-1][0] <= 5, counts
    # The jobs are fewer than the supersteps they chained.
    assert sum(j for j, _s in counts) < sum(s for _j, s in counts), counts
