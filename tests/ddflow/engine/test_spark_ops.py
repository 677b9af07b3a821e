"""Operating the Spark engine: options, the environment checks, what a run leaves
behind (cached RDDs, files), and its progress in the logs.

In-process tests share the run's one local[2] session (conftest.py); the test of a
session made by the user without ddflow's settings runs in its own process (one
SparkContext per process).
"""

from __future__ import annotations

import glob
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

import ddflow
from ddflow.engine.spark import SparkEngine, check_environment
from ddflow.errors import EngineUnavailableError, GraphError

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[3]


def _cached(spark) -> int:
    return spark.sparkContext._jsc.getPersistentRDDs().size()


@pytest.mark.slow
def test_cached_rdds_stay_bounded_over_100_epochs_and_go_at_stop(spark):
    """100 epochs: the dataflow keeps at most 2 cached RDDs (the last job's result
    while its run goes on, and a DataFrame input waiting for the next run), never a
    copy per step or per input, none of the shards between runs; its checkpoint
    directory keeps a bounded number of files (the shards' logs, compacted); after
    `stop()` no RDD and no file of it is left."""
    before = _cached(spark)
    engine = SparkEngine(spark, shards=2, checkpoint_every=10)
    during: list[int] = []
    job = engine._job

    def counted_job(start, stages):
        states = job(start, stages)
        during.append(_cached(spark) - before)
        return states
    engine._job = counted_job
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection()
    cap = c.map(lambda x: (x % 5, x)).capture()
    most, files = 0, []
    for epoch in range(100):
        # A run here takes 3 supersteps: one job of 3, or (every 10th) jobs of 1
        # then 2, so that runs of several jobs are seen too.
        engine.chain = 1 if epoch % 10 == 0 else 3
        if epoch % 25 == 0:
            s.insert_dataframe(spark.createDataFrame([(-epoch - 1,)], "x long"))
            most = max(most, _cached(spark) - before)
        s.insert(epoch)
        s.advance_to(epoch + 1)
        df.run()
        assert _cached(spark) == before           # nothing cached between runs
        files.append(sum(len(f) for _d, _s, f in os.walk(engine.checkpoint_path)))
    assert max([most] + during) <= 2 and len(during) >= 110, (most, during)
    assert cap.at(99) == {(x % 5, x): 1
                          for x in list(range(100)) + [-e - 1 for e in range(0, 100, 25)]}
    # Per shard: a full checkpoint, and the entries of its log and of the one before
    # (a log is compacted at the first superstep of a run once 10 long, so each
    # holds up to 10 + 2 entries of a 3-superstep run).
    assert max(files) <= 2 * (1 + 2 * 12), files
    own = engine.checkpoint_path
    tally = engine.tally()
    engine.stop()
    assert _cached(spark) == before and not os.path.exists(own)
    # The shards' workers were found where they ran or caught up, rebuilt only where
    # a Python worker first met them.
    assert tally["resident"] + tally["replayed"] > 150 >= tally["rebuilt"], tally


def test_stop_leaves_no_ddflow_path_in_the_temp_dir(spark, tmp_path, monkeypatch):
    """The checkpoint directory goes at `stop()`; the project zip shipped to the
    executors lives in Spark's own files directory of the session (executors that
    start later fetch it), which Spark removes with the session.  The temp dir is
    this test's own, so that a `ddflow-*` path of another test or process running
    beside it (the suite runs on two workers) cannot count."""
    from pyspark import SparkFiles
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    pattern = os.path.join(tempfile.gettempdir(), "ddflow-*")
    before = set(glob.glob(pattern))
    engine = SparkEngine(spark, shards=2, ship_code=True)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection()
    cap = c.count().capture()
    s.insert_dataframe(spark.createDataFrame([("a",), ("b",)], "x string"))
    s.advance_to(1)
    df.run()
    assert cap.at(0) == {("a", 1): 1, ("b", 1): 1}
    made = set(glob.glob(pattern)) - before
    assert any("ddflow-ckpt-" in p for p in made)
    assert engine._setup.shipped.startswith(SparkFiles.getRootDirectory())
    engine.stop()
    assert set(glob.glob(pattern)) - before == set()
    assert spark.sparkContext._jsc is not None      # the user's session is still up


def test_a_checkpoint_dir_of_the_user_keeps_everything_but_the_engines_own(spark, tmp_path):
    (tmp_path / "mine.txt").write_text("the user's")
    engine = SparkEngine(spark, shards=2, checkpoint_dir=str(tmp_path), checkpoint_every=1)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection()
    c.map(lambda x: x % 2).count().capture()
    for x in range(10):
        s.insert(x)
    s.advance_to(1)
    df.run()
    own = Path(engine.checkpoint_path)
    assert own.parent == tmp_path and any(own.rglob("*"))      # checkpoints were written
    engine.stop()
    assert not own.exists() and (tmp_path / "mine.txt").read_text() == "the user's"


def test_a_run_logs_its_supersteps(spark, caplog):
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection()
    c.map(lambda x: (x % 5, x)).reduce(lambda k, vs: [(len(vs), 1)]).capture()
    for x in range(40):
        s.insert(x)
    s.advance_to(1)
    with caplog.at_level(logging.DEBUG, logger="ddflow.spark"):
        steps = engine.supersteps
        df.run()
    lines = [r.getMessage() for r in caplog.records if r.name == "ddflow.spark"]
    supersteps = [ln for ln in lines if ln.startswith("superstep ")]
    assert len(supersteps) == engine.supersteps - steps >= 2
    done = [ln for ln in lines if ln.startswith("run done")]
    assert len(done) == 1 and f"{engine.supersteps - steps} superstep(s)" in done[0]
    moved = sum(int(ln.split(" record(s) sent")[0].rsplit(" ", 1)[1]) for ln in supersteps)
    assert moved > 0 and f"{moved} record(s) moved" in done[0]
    engine.stop()


def test_options_are_checked(spark):
    with pytest.raises(EngineUnavailableError, match="already running"):
        SparkEngine(spark, conf={"spark.executor.memory": "2g"})
    with pytest.raises(GraphError, match="checkpoint_every"):
        SparkEngine(spark, checkpoint_every=-1)
    with pytest.raises(GraphError, match="executor_timeout"):
        SparkEngine(spark, executor_timeout="30s")
    engine = SparkEngine(spark=spark, connect_timeout=1, executor_timeout=1)
    assert engine.spark is spark and engine.master == spark.sparkContext.master


def _serve(reply: bytes | None) -> tuple[socket.socket, int]:
    """A TCP server on loopback that answers `reply` to anything (None: never)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def loop():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.recv(4096)
            if reply is not None:
                conn.sendall(reply)
                conn.close()
    threading.Thread(target=loop, daemon=True).start()
    return server, server.getsockname()[1]


def test_a_master_address_that_is_not_a_spark_master_fails_at_once():
    silent, port = _serve(None)
    try:
        with pytest.raises(EngineUnavailableError, match=f"127.0.0.1:{port} accepted a "
                           "connection but said nothing"):
            check_environment(f"spark://127.0.0.1:{port}", timeout=1)
    finally:
        silent.close()
    web, port = _serve(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    try:
        with pytest.raises(EngineUnavailableError, match="not Spark's RPC protocol"):
            check_environment(f"spark://127.0.0.1:{port}", timeout=2)
    finally:
        web.close()
    with pytest.raises(EngineUnavailableError, match="unreachable"):
        check_environment("spark://127.0.0.1:9", timeout=2)


@pytest.mark.slow
def test_a_users_own_session_gets_the_drivers_python_or_a_typed_error():
    """A session the user built without PYSPARK_PYTHON (executors would run whatever
    `python3` is on the PATH): the engine gives the executors the driver's Python.
    A Python that cannot import the project gets an `ExecutorEnvironmentError` that
    names it, and the dataflow stays readable (no AttributeError afterwards)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    with tempfile.TemporaryDirectory(prefix="spark-user-session-") as where:
        bare = os.path.join(where, "bare")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", bare], check=True)
        proc = subprocess.run(
            [sys.executable, "-m", "tests.ddflow.engine.user_session_run",
             os.path.join(bare, "bin", "python")],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    r = json.loads(lines[-1])
    assert r["python_before"] == "python3"                # what PySpark would have run
    assert set(r["executor_pythons"]) == {sys.executable}
    assert r["answer"] == [[["a", 2], 1], [["b", 1], 1]]
    assert r["bare_error"].startswith("ExecutorEnvironmentError")
    assert r["bare_python"] in r["bare_error"] and "No module named" in r["bare_error"]
    assert r["read_after_error"] == []


def test_an_executor_seeing_edited_source_is_told_apart_from_another_copy(tmp_path):
    """The probe's verdict when an executor's ddflow differs from the driver's: the
    driver's own directory with other contents (edited after the driver imported it)
    asks for a restart; another directory is named as another copy."""
    from ddflow.engine.spark_session import ExecutorSetup, _project_root
    setup = ExecutorSetup(None, 1.0)
    edited = setup._wrong({"ddflow": str(_project_root()), "fingerprint": "not-the-driver's"})
    assert "changed after the driver imported them" in edited and "restart" in edited
    other = setup._wrong({"ddflow": str(tmp_path), "fingerprint": "not-the-driver's"})
    assert "another copy" in other and str(tmp_path) in other
