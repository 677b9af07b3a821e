"""A Spark standalone master and its workers on 127.0.0.1, started and stopped by a test.

The pyspark wheel ships `bin/spark-class` but not `sbin/start-master.sh`, so the
daemons are launched with `spark-class` directly (which `exec`s the JVM: the pid we
record is the JVM's).  Every port is picked free at start, so two runs on one machine
do not collide; every daemon's pid is recorded, and `stop` ends exactly those and the
processes below them (the executors the workers launched), nothing else.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.ddflow.engine.processes import kill_descendants, terminate


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_env() -> dict:
    import pyspark
    return {**os.environ, "SPARK_HOME": os.path.dirname(pyspark.__file__),
            "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "localhost",
            "SPARK_DAEMON_MEMORY": "256m", "PYSPARK_PYTHON": sys.executable}


class StandaloneCluster:
    """`StandaloneCluster(workers=2).start()`: `.master` is its URL; `.stop()` ends it."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.workers, self.cores, self.memory = workers, cores, memory
        self.dir = Path(tempfile.mkdtemp(prefix="spark-standalone-"))
        self.port = free_port()
        self.master = f"spark://127.0.0.1:{self.port}"
        self.master_pid: int | None = None
        self.worker_pids: list[int] = []
        self._procs: list[subprocess.Popen] = []

    @property
    def pids(self) -> set[int]:
        return {p for p in [self.master_pid, *self.worker_pids] if p}

    def _launch(self, name: str, args: list[str]) -> subprocess.Popen:
        spark_class = Path(spark_env()["SPARK_HOME"]) / "bin" / "spark-class"
        log = open(self.dir / f"{name}.log", "wb")
        proc = subprocess.Popen([str(spark_class), *args], env=spark_env(), stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        self._procs.append(proc)
        return proc

    def _wait_for(self, name: str, text: str, timeout: float) -> None:
        path = self.dir / f"{name}.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists() and text in path.read_text(errors="replace"):
                return
            if any(p.poll() is not None for p in self._procs):
                break
            time.sleep(0.25)
        raise RuntimeError(f"{name} did not start ({text!r} not seen):\n"
                           + path.read_text(errors="replace")[-3000:])

    def start(self, timeout: float = 120.0) -> "StandaloneCluster":
        try:
            self.master_pid = self._launch("master", [
                "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                "--port", str(self.port), "--webui-port", str(free_port())]).pid
            self._wait_for("master", "I have been elected leader", timeout)
            for i in range(self.workers):
                work = self.dir / f"work-{i}"
                work.mkdir()
                self.worker_pids.append(self._launch(f"worker-{i}", [
                    "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--webui-port", str(free_port()), "--work-dir", str(work),
                    self.master]).pid)
            for i in range(self.workers):
                self._wait_for(f"worker-{i}", "Successfully registered with master", timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """End what runs below the daemons (executors, their Python workers) while the
        ancestry still proves it ours, then the workers, then the master."""
        kill_descendants(self.pids)
        terminate(self.worker_pids)
        if self.master_pid:
            terminate([self.master_pid])
        for proc in self._procs:
            proc.poll()
        shutil.rmtree(self.dir, ignore_errors=True)
