"""Spark at scale, counted as Spark counts: jobs per change (its status tracker),
cached RDDs (its persistent RDD map), the engine's files; state found where it ran.

One local[2] session serves the whole run (fixture in conftest.py).  The sizes here
are small enough for the suite; `benchmarks/bench_spark_state.py` gives the same
counts at 100k and more edges."""

from __future__ import annotations

import glob
import os
import random
import tempfile

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


def test_cached_rdds_and_files_stay_bounded_over_a_hundred_epochs(spark):
    """100 epochs: between runs no RDD of the engine stays cached, during a run at
    most 2; the log keeps a bounded number of files per shard; stop() leaves no
    ddflow-* path in the temp dir."""
    sc = spark.sparkContext
    cached_before = sc._jsc.getPersistentRDDs().size()
    engine = SparkEngine(spark, shards=2, checkpoint_every=10)
    during: list[int] = []
    job = engine._job

    def counted_job(start, stages):
        states = job(start, stages)
        during.append(sc._jsc.getPersistentRDDs().size() - cached_before)
        return states
    engine._job = counted_job
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection()
    cap = c.map(lambda x: (x % 5, x)).sum().capture()
    files = []
    for epoch in range(100):
        # A run here takes 3 supersteps: one job of 3, or (every 10th) jobs of 1
        # then 2, so that a run of several jobs is seen too.
        engine.chain = 1 if epoch % 10 == 0 else 3
        s.insert(epoch)
        s.advance_to(epoch + 1)
        df.run()
        assert sc._jsc.getPersistentRDDs().size() == cached_before
        files.append(len([f for _d, _s, fs in os.walk(engine._log.store.root) for f in fs]))
    assert cap.at(99) == {(k, sum(x for x in range(100) if x % 5 == k)): 1 for k in range(5)}
    assert len(during) >= 110 and max(during) <= 2, during
    # Per shard: a base, and the entries of its chain and of the one before it (a
    # log is compacted at the first superstep of a run once 10 long, so each holds
    # up to 10 + 2 entries of a 3-superstep run).
    assert max(files) <= 2 * (1 + 2 * 12), files
    tally = engine.tally()
    mine = os.path.join(tempfile.gettempdir(), f"ddflow-*{engine.uid}*")
    assert glob.glob(mine) == [engine._log.store.root]
    engine.stop()
    assert glob.glob(mine) == []            # (other sessions' ddflow-* may come and go)
    # The shards' workers were found where they ran or caught up, rebuilt only
    # where a Python worker first met them.
    assert tally["rebuilt"] <= 2 * 2 and tally["resident"] + tally["replayed"] > 150, tally
