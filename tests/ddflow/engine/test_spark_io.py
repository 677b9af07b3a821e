"""DataFrames in and out of the Spark engine, on the executors.

`insert_dataframe` checks and shards the rows on the executors and hands them to the
next run without the driver; `to_spark` builds the output frame from the shards;
a capture read after a step moves only what the step captured.  Answers are checked
against the local engine fed the same updates, at every time (accumulation law).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ddflow
from lattice import Product
from ddflow.engine.spark import SparkEngine
from ddflow.testing import check_law, evaluate
from ddflow.updates import accumulate, consolidate
from tests.strategies import by_key, keyed_updates

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

SLOW_OK = settings(max_examples=3, deadline=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture,
                                          HealthCheck.too_slow])


def _count_by_key(c):
    return c.map(lambda kv: kv[0]).count()


def _frame(spark, updates, product: bool):
    """Rows (key, value, time, diff); a Product time as a struct (epoch, round)."""
    rows = [(k, v, (t[0], t[1]) if product else t, r) for (k, v), t, r in updates]
    if product:
        schema = ("key long, value long, time struct<epoch: long, round: long>, diff long")
    else:
        schema = "key long, value long, time long, diff long"
    return spark.createDataFrame(rows, schema)


@pytest.mark.parametrize("kind", ["int", "product"])
@SLOW_OK
@given(data=st.data())
def test_oracle_dataframe_input_on_executors(spark, kind, data):
    """A DataFrame fed on the executors gives the local engine's output, and that
    output satisfies the accumulation law of a count by key at every time."""
    ups = data.draw(keyed_updates(kind, max_size=15))
    start = Product(0, 0) if kind == "product" else 0
    local = evaluate(_count_by_key, [ups], time=start)
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(time=start, engine=engine)
    s, c = df.new_collection("facts")
    cap = _count_by_key(c).capture()
    assert s.insert_dataframe(_frame(spark, ups, kind == "product"),
                              time="time", diff="diff") == len(ups)
    assert s.pending == []                       # nothing waits on the driver
    s.close()
    df.run()
    out = cap.updates
    engine.stop()
    with pytest.raises(ddflow.EngineUnavailableError, match="stopped"):
        engine.captured_since(cap.node, None)
    assert out == local
    check_law(out, [ups], lambda coll: {
        (k, sum(vs.values())): 1 for k, vs in by_key(coll).items() if sum(vs.values())})


def test_rows_are_checked_on_the_executors_all_or_nothing(spark):
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection("facts")
    cap = c.capture()
    s.advance_to(5)
    behind = spark.createDataFrame([(1, 5, 1), (2, 3, 1)], "k long, t long, d long")
    with pytest.raises(ddflow.TimeError) as err:
        s.insert_dataframe(behind, time="t", diff="d")
    assert err.value.operator == "facts" and err.value.record == 2 and err.value.time == 3
    fractional = spark.createDataFrame([(1, 0.5)], "k long, d double")
    with pytest.raises(ddflow.DiffError, match="float"):
        s.insert_dataframe(fractional, diff="d")
    unhashable = spark.createDataFrame([([1, 2],)], "k array<long>")
    with pytest.raises(ddflow.DataError, match="hashable"):
        s.insert_dataframe(unhashable)
    assert engine.fed() == []                    # nothing of those frames was kept
    good = spark.createDataFrame([(7,), (8,)], "k long")
    assert s.insert_dataframe(good) == 2
    s.advance_to(6)
    df.run()
    assert cap.at(5) == {7: 1, 8: 1}
    engine.stop()


def test_fed_rows_wait_out_a_failed_step(spark):
    """A step that fails keeps the rows fed from a DataFrame for the next run, which
    takes them exactly once."""
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection("numbers")
    cap = c.map(lambda x: 12 // x, name="invert").capture()
    s.insert_dataframe(spark.createDataFrame([(1,), (2,), (3,)], "x long"))
    s.insert(0)
    s.advance_to(1)
    with pytest.raises(ddflow.UserFunctionError) as err:
        df.run()
    assert len(engine.fed()) == 1
    assert err.value.inputs == ((s, 0, 0, 1),)          # the fed rows are not blamed
    s.discard(0)
    df.run()
    assert cap.at(0) == {12: 1, 6: 1, 4: 1}
    assert engine.fed() == [] and engine._feeding == []
    engine.stop()


def test_fed_rows_that_fail_a_step_are_blamed_whole_and_discarded(spark):
    """Rows fed from a DataFrame that make a step fail cannot poison the dataflow:
    the trials withhold them like a pending update, `err.inputs` names the frame
    (as one unit: its rows never pass through the driver) and `discard(err)`
    withdraws it; the good frame and the driver's updates run next, exactly once."""
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection("numbers")
    cap = c.map(lambda x: 12 // x, name="invert").capture()
    s.insert_dataframe(spark.createDataFrame([(1,), (2,)], "x long"))
    s.insert_dataframe(spark.createDataFrame([(3,), (0,), (4,)], "x long"))
    s.insert(6)
    s.advance_to(1)
    with pytest.raises(ddflow.UserFunctionError, match="row.s. fed to input 'numbers'") as err:
        df.run()
    assert err.value.operator == "invert" and err.value.record == 0
    good, bad = engine.fed()
    assert err.value.inputs == ((s, bad, None, None),) and bad.count == 3
    with pytest.raises(ddflow.UserFunctionError):
        df.run()                                        # nothing was lost or half-run
    assert cap.updates == [] and s.pending == [(6, 0, 1)]
    assert df.discard(err.value) == [(s, bad, None, None)]
    assert engine.fed() == [good]
    with pytest.raises(ddflow.DataError, match="no longer waiting"):
        df.discard(err.value)                           # all or nothing: nothing moved
    assert s.pending == [(6, 0, 1)] and engine.fed() == [good]
    df.run()
    assert cap.at(0) == {12: 1, 6: 1, 2: 1}
    assert engine.fed() == [] and engine._feeding == []
    s.insert(3)
    s.advance_to(2)
    df.run()                                            # usable after the recovery
    assert cap.at(1) == {12: 1, 6: 1, 2: 1, 4: 1}
    engine.stop()


def test_capture_to_spark_is_built_on_the_executors(spark):
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection()
    cap = c.map(lambda kv: kv[0]).count().capture()
    empty = cap.to_spark(spark)
    assert empty.columns == ["data", "time", "diff"] and empty.count() == 0
    frame = spark.createDataFrame([("a", 1, 0, 1), ("b", 2, 0, 1), ("a", 1, 1, -1),
                                   ("c", 3, 1, 1)], "name string, v long, t long, d long")
    s.insert_dataframe(frame, time="t", diff="d")
    s.advance_to(2)
    df.run()
    # Read on the driver first: building the frame must not depend on it.
    out = cap.to_spark(spark)
    rows = sorted((tuple(r["data"]), r["time"], r["diff"]) for r in out.collect())
    assert rows == sorted(cap.updates)
    at1 = {tuple(r["data"]): r["count"] for r in cap.to_spark(spark, at=1).collect()}
    assert at1 == cap.at(1) == {("b", 1): 1, ("c", 1): 1}
    with pytest.raises(ddflow.NotFinalError):
        cap.to_spark(spark, at=2)
    engine.stop()


def test_a_capture_read_lazily_refuses_a_later_state_or_a_stopped_engine(spark):
    """`captured_rdd` (what `to_spark` builds on) reads the shards when an action
    runs.  A frame from `to_spark` runs its shuffle when it is made (Spark samples
    it for a schema), so it keeps the answer of the run it was made after; an RDD
    first evaluated after a later `run()` would read a newer state, so its tasks
    refuse with `StaleReadError`; after `stop()` the shards are gone, and a run of
    the stopped engine is refused too: typed errors, not a missing file."""
    from ddflow.errors import EngineUnavailableError, StaleReadError
    engine = SparkEngine(spark, shards=2, checkpoint_every=1)   # compaction at every run
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection()
    cap = c.count().capture()
    s.insert("a")
    s.advance_to(1)
    df.run()
    frame = cap.to_spark(spark)
    lazy = engine.captured_rdd(cap.node)        # made, not evaluated
    for epoch in range(2, 5):           # runs that compact the logs both were made at
        s.insert("a")
        s.advance_to(epoch)
        df.run()
    assert [(tuple(r["data"]), r["time"], r["diff"]) for r in frame.collect()] == \
        [(("a", 1), 0, 1)]
    with pytest.raises(Exception) as stale:
        lazy.collect()
    assert StaleReadError.__name__ in str(stale.value) and "later run()" in str(stale.value)
    assert sorted(engine.captured_rdd(cap.node).collect()) == sorted(cap.updates)
    pending = engine.captured_rdd(cap.node)
    engine.stop()
    with pytest.raises(Exception) as gone:
        pending.collect()
    assert EngineUnavailableError.__name__ in str(gone.value) and "stopped" in str(gone.value)
    s.insert("b")
    s.advance_to(5)
    with pytest.raises(EngineUnavailableError, match="stopped"):
        df.run()


def test_stop_cleans_the_driver_side_even_when_the_executors_fail(spark, monkeypatch):
    """`stop()` whose executor-side release raises (executors gone) still removes the
    checkpoint directory and the engine's temporary files, and says why it failed."""
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection()
    c.count().capture()
    s.insert("a")
    s.advance_to(1)
    df.run()
    path = engine.checkpoint_path
    assert path is not None and os.path.isdir(path)

    def executors_gone():
        raise RuntimeError("executors lost")
    monkeypatch.setattr(engine, "_release_on_executors", executors_gone)
    with pytest.raises(RuntimeError, match="executors lost"):
        engine.stop()
    assert not os.path.exists(path) and engine.checkpoint_path is None


def test_capture_to_spark_writes_product_times_as_structs(spark):
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(time=Product(0, 0), engine=engine)
    s, c = df.new_collection()
    cap = c.capture()
    s.update_at("x", Product(0, 1), 1)
    s.update_at("y", Product(1, 0), 2)
    s.close()
    df.run()
    rows = sorted((r["data"], tuple(r["time"]), r["diff"]) for r in cap.to_spark(spark).collect())
    assert rows == [("x", (0, 1), 1), ("y", (1, 0), 2)]
    engine.stop()


def test_a_read_after_a_step_moves_only_what_the_step_captured(spark, monkeypatch):
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection()
    cap = c.map(lambda x: (x % 5, x)).capture()
    for x in range(200):
        s.insert(x)
    s.advance_to(1)
    df.run()
    assert len(cap.at(0)) == 200
    node = cap.node
    cursor = cap._cursor

    def whole_journal(*_args):
        raise AssertionError("a read fetched every shard's whole journal")
    monkeypatch.setattr(engine, "fetch", whole_journal)
    s.insert(1000)
    s.remove(3)
    s.advance_to(2)
    df.run()
    new, _cursor, reset = engine.captured_since(node, cursor)
    assert not reset and consolidate(new) == [((0, 1000), 1, 1), ((3, 3), 1, -1)]
    absorbed = cap.absorbed
    assert cap.at(1) == accumulate([((x % 5, x), 0, 1) for x in range(200) if x != 3]
                                   + [((0, 1000), 1, 1)], 1)
    assert cap.absorbed - absorbed == 2
    engine.stop()
