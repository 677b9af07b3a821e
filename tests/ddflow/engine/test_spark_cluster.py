"""A real multi-process Spark cluster: a standalone master and two workers on
127.0.0.1, started by a fixture (pids recorded; only those and what runs below them
are ended at teardown).  One driver process (`cluster_run.py`: one SparkContext per
process) runs every scenario against it; each test checks one scenario's report.

The kill tests are honest: the executor killed is one of this application's (found
by process ancestry from the workers this fixture started), killed while a task of
the targeted Spark job is running (seen through `sc.statusTracker()`), on a state of
at least 100k records, and the answer is compared update for update with the local
engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.ddflow.engine.processes import kill_descendants
from tests.ddflow.engine.standalone import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def standalone():
    cluster = StandaloneCluster(workers=2, cores=1, memory="1g").start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def reports(standalone):
    """Every scenario's report, from one driver process (killed with everything
    below it, whatever happens)."""
    base = tempfile.mkdtemp(prefix="spark-cluster-ckpt-")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.ddflow.engine.cluster_run", standalone.master, base,
         *map(str, standalone.worker_pids)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=800)
    finally:
        kill_descendants({proc.pid})
        proc.kill()
        proc.wait()
    found = {}
    for line in out.splitlines():
        if line.startswith("{"):
            report = json.loads(line)
            found[report["scenario"]] = report
    found["_stderr"] = err[-3000:]
    found["_base"] = base
    yield found
    import shutil
    shutil.rmtree(base, ignore_errors=True)


def _report(reports, name):
    report = reports.get(name)
    assert report is not None, f"scenario {name} did not report:\n{reports['_stderr']}"
    assert "error" not in report, report.get("traceback", report["error"])
    return report


def test_no_executor_fails_fast_naming_the_master(reports, standalone):
    r = _report(reports, "no_executor")
    assert r["raised"] == "EngineUnavailableError"
    assert standalone.master in r["message"] and "no executor registered" in r["message"]
    assert r["seconds"] < 120          # 8 s asked for, plus the JVM's start


def test_cluster_master_needs_a_shared_checkpoint_dir_and_stop_removes_its_own(reports):
    r = _report(reports, "checkpoint_dir")
    assert r["without"] and "checkpoint_dir" in r["without"]
    assert r["path"].startswith(reports["_base"]) and r["files_while_running"] > 0
    assert r["answer"] == [[[0, 10], 1], [[1, 10], 1], [[2, 10], 1]]
    assert not r["exists_after_stop"] and r["base_after_stop"]


def test_agree_standalone_cluster_with_local(reports, standalone):
    r = _report(reports, "agree")
    assert all(len(seen) == 3 and any(seen) for seen in r["checked"].values()), r["checked"]
    # Both executors ran Python tasks (their Python workers descend from both).
    assert len(r["executors_that_ran"]) == 2, r


@pytest.mark.parametrize("where", ["state", "load"])
def test_kill_an_executor_while_its_task_runs(reports, standalone, where):
    r = _report(reports, f"kill_{where}")
    killed = r["killed"]
    assert killed, f"no task of the targeted job was caught running: {r}"
    assert killed["pid"] in killed["executors_before"] and r["killed_gone"]
    assert killed["active_tasks"] >= 1
    assert r["agree"], r
    assert r["state_records"] >= 100_000
    assert r["answer_size"] == 10
