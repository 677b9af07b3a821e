"""The Spark engine runs the same dataflows as the local engine, with the same results.

One local[2] session serves the whole run (fixture in conftest.py).  The real
multi-process cluster test lives in test_spark_cluster.py (its own driver process).
"""

from __future__ import annotations

import gc
import math
import os
import sys
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ddflow
from ddflow.engine.spark import SparkEngine, check_environment
from ddflow.errors import EngineUnavailableError
from ddflow.testing import evaluate
from ddflow.updates import accumulate
from tests.ddflow.engine.cases import CASES
from tests.ddflow.engine.spark_jobs import spark_jobs

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

SLOW_OK = settings(max_examples=3, deadline=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture,
                                          HealthCheck.too_slow])


@pytest.mark.parametrize("name", sorted(CASES))
@SLOW_OK
@given(data=st.data())
def test_agree_spark_with_local(spark, name, data):
    # The schedule is drawn: "each" runs once per update, so the agreement across
    # several run()s (frontiers moving, shard state carried between Spark jobs, the
    # finality of every output the capture declares final) is tested too.  Its
    # inputs are cut to a few updates: one Spark job per run keeps the test short.
    build, inputs = CASES[name]
    schedule = data.draw(st.sampled_from(["once", "each"]), label="schedule")
    inp = [list(x)[:4] if schedule == "each" else list(x) for x in data.draw(inputs)]
    local = evaluate(build, inp, schedule=schedule)
    on_spark = evaluate(build, inp, schedule=schedule,
                        engine=lambda: SparkEngine(spark, shards=2))
    assert on_spark == local


def test_spark_shards_hold_the_keys_the_local_workers_hold(spark):
    """Same shard function on both engines: shard contents compare one for one."""
    contents = {}
    for engine in (SparkEngine(spark, shards=2), None):
        df = ddflow.Dataflow(engine=engine) if engine else ddflow.Dataflow(workers=2)
        s, c = df.new_collection()
        c.map(lambda x: (f"k{x % 7}", x)).sum().capture()
        for x in range(40):
            s.insert(x)
        s.close()
        df.run()
        arrange = next(n for n in df.nodes if n.kind == "arrange")
        traces = (engine.fetch(arrange, "trace") if engine
                  else [op.trace for op in df.engine.operators(arrange)])
        contents[engine is None] = [sorted(t.keys()) for t in traces]
    assert contents[True] == contents[False]
    assert all(contents[True])          # both shards hold keys


def test_spark_step_chains_its_supersteps_in_one_job_and_rolls_back(spark):
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection("numbers")
    ok = c.map(lambda x: (x % 3, x)).count().capture()
    inv = c.map(lambda x: 12 // x, name="invert").capture()
    for x in (1, 2, 3):
        s.insert(x)
    s.advance_to(1)
    with spark_jobs(spark) as jobs:
        df.run()
    # The supersteps of a step chain inside Spark jobs (4, then 8, ...; plus the
    # start-up probe), never one job per superstep, operator or loop round.
    assert jobs() == engine.jobs and 1 < engine.jobs <= engine.supersteps
    assert jobs() - 1 <= math.ceil(math.log2(engine.supersteps / engine.chain + 1))
    before = (ok.updates, inv.updates)
    s.insert(0)
    s.advance_to(2)
    with pytest.raises(ddflow.UserFunctionError) as err:
        df.run()
    assert err.value.operator == "invert" and err.value.record == 0
    assert isinstance(err.value.__cause__, ZeroDivisionError)
    assert (ok.updates, inv.updates) == before
    s.discard(0)
    s.insert(4)
    df.run()
    s.advance_to(3)
    df.run()
    assert inv.at(1) == {12: 1, 6: 1, 4: 1} and inv.at(2) == {12: 1, 6: 1, 4: 1, 3: 1}
    assert ok.at(2) == {((1, 1), 1): 1, ((2, 2), 1): 1, ((0, 3), 1): 1, ((1, 4), 1): 1}


def test_dataframes_in_and_out(spark):
    frame = spark.createDataFrame([("a", 1, 0, 1), ("b", 2, 0, 1), ("a", 1, 1, -1)],
                                  ["name", "value", "time", "diff"])
    df = ddflow.Dataflow(engine=SparkEngine(spark, shards=2))
    s, c = df.new_collection()
    cap = c.map(lambda kv: kv[0]).count().capture()
    assert s.insert_dataframe(frame, time="time", diff="diff") == 3
    s.close()
    df.run()
    assert cap.at(0) == {("a", 1): 1, ("b", 1): 1} and cap.at(1) == {("b", 1): 1}
    out = cap.to_spark(spark)
    assert out.columns == ["data", "time", "diff"]
    rows = sorted((tuple(r["data"]), r["time"], r["diff"]) for r in out.collect())
    assert rows == sorted(cap.updates)
    default = spark.createDataFrame([("x",), ("y",)], ["name"])
    df2 = ddflow.Dataflow()
    s2, c2 = df2.new_collection()
    cap2 = c2.capture()
    s2.insert_dataframe(default)
    s2.close()
    df2.run()
    assert cap2.updates == [("x", 0, 1), ("y", 0, 1)]
    with pytest.raises(ddflow.DataError, match="column"):
        s2b = ddflow.Dataflow().new_collection()[0]
        s2b.insert_dataframe(default, time="when")


def test_driver_memory_stays_flat_while_state_grows_in_executors(spark):
    """10x more keys in the executors' state; the driver's Python heap does not follow."""
    def retained(keys: int) -> tuple[int, int]:
        engine = SparkEngine(spark, shards=2)
        df = ddflow.Dataflow(engine=engine)
        s, c = df.new_collection()
        c.map(lambda x: (x, x % 10)).sum().capture()
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        for lo in range(0, keys, 2000):
            for x in range(lo, min(keys, lo + 2000)):
                s.insert(x)
            s.advance_to(s.time + 1)
            df.run()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        state = sum(r["trace_records"] for r in df.metrics())
        return grown, state

    small_heap, small_state = retained(2_000)
    big_heap, big_state = retained(20_000)
    assert big_state >= 9 * small_state           # the state did grow 10x ...
    assert big_heap < 2 * small_heap + 200_000, (small_heap, big_heap)   # ... the driver did not


def test_environment_errors_name_the_remedy(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(EngineUnavailableError, match="Java"):
        check_environment("local[2]")
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(EngineUnavailableError, match="pip install pyspark"):
        check_environment("local[2]")
    monkeypatch.undo()
    with pytest.raises(EngineUnavailableError, match="unreachable"):
        check_environment("spark://127.0.0.1:9", timeout=2)


def test_spark_engine_rejects_workers_argument(spark):
    with pytest.raises(ddflow.GraphError):
        ddflow.Dataflow(engine=SparkEngine(spark), workers=3)


def test_lazy_import_keeps_pyspark_out_of_the_core():
    code = ("import sys, ddflow, ddflow.trace, ddflow.dataflow, ddflow.collection, operators.join;"
            "d = ddflow.Dataflow(); print('pyspark' in sys.modules)")
    import subprocess
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ})
    assert out.stdout.strip() == "False"


def test_a_dataflow_grows_on_spark(spark):
    """Pieces added after run() on Spark (shard states through the driver once, then
    imports as messages) answer as the same pieces built from the start locally."""
    from lattice import Product
    from tests.ddflow.test_grow import _fresh, _grown
    a = [((0, 1), Product(0, 0), 1), ((1, 2), Product(1, 0), 1), ((2, 3), Product(0, 1), 1),
         ((1, 2), Product(1, 1), -1)]
    b = [((0, 5), Product(0, 0), 1), ((2, 6), Product(1, 0), 1)]
    for source, piece in (("input", "join"), ("loop", "count")):
        got, since = _grown([a, b], source, piece, 1, lambda: SparkEngine(spark, shards=2))
        want = _fresh([a, b], source, piece, None)
        for t in (since, Product(1, 1), Product(2, 2)):
            assert accumulate(got, t) == accumulate(want, t), (source, piece, t)


def test_spark_one_off_explanations_equal_the_local_ones(spark):
    """`Capture.explain` on Spark reads the inputs' histories from the executors
    (`InputSession.contents` through the engine's `fetch`) and explains as the local
    engine does, one-off and maintained alike."""
    from tests.ddflow.test_explain_flow import shard_explanations
    got = shard_explanations(SparkEngine(spark, shards=2), loop=False)
    assert got == shard_explanations(None, loop=False) and got
