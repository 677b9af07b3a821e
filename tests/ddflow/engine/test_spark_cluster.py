"""A real multi-process Spark cluster: two executor JVMs on loopback, one killed with
SIGKILL in the middle of a superstep; the run completes with the local engine's results.

The cluster gets its own driver process (one SparkContext per process), started and
stopped by this test; the subprocess has a timeout, so a hung JVM cannot eat CI's time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(420)]


def _run_cluster(root: Path, timeout: float) -> tuple[int, str, str]:
    """Run the cluster driver in its own process group, and kill the whole group
    (driver, its JVM and the executor JVMs) however the run ends."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.ddflow.engine.cluster_run", "6"],
                            cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_local_cluster_survives_kill_minus_nine():
    root = Path(__file__).resolve().parents[3]
    returncode, stdout, stderr = _run_cluster(root, timeout=400)
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    assert returncode == 0 and lines, stderr[-3000:]
    result = json.loads(lines[-1])
    assert len(result["executor_jvms_before"]) >= 2          # two executor processes ...
    workers = set(result["python_worker_parents"]) - {result["driver_pid"]}
    assert len(workers) >= 2                                 # ... both did work
    assert result["killed"] and result["killed"][0] in result["executor_jvms_before"]
    assert result["killed"][0] not in result["executor_jvms_after"]
    assert result["agree"], result                           # identical to the local engine
    assert result["reach_updates"] > 0
