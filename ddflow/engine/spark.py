"""The Spark engine: the same operators, their state sharded by key across Spark partitions.

Layout (measured on a 2-core machine: any PySpark job that runs Python costs ~80-100 ms,
a shuffle then `mapPartitions` ~200 ms, so there is one job per superstep, never one per
operator or per loop round; `benchmarks/bench_spark.py` reports jobs and seconds per step):

* One record per shard, `(shard, ("S", blob))`: the shard's `Worker` (every
  operator's traces and buffers for the keys `shard_of` gives it), pickled with
  cloudpickle, in a persisted RDD partitioned by shard id.
* One Spark job per *superstep*: `state.union(messages)` (both partitioned by the same
  partition function object, so the union is narrow: PySpark has no zipPartitions),
  then `mapPartitionsWithIndex(step)`.  Each shard runs passes locally until nothing
  more can happen without other shards (a key-local fixpoint finishes inside one
  task: see `ddflow.engine.bsp.step_shard`); records bound for another shard leave
  as `(dest, ("M", ...))` and go through `partitionBy` to the next superstep.
* The driver receives only a small summary per shard (`"I"`): capabilities and
  message times (for progress tracking), counters, whether anything moved.  It
  computes the next frontiers and stops when nothing moved and they stand still.
* A shard with no messages and no work passes its blob through without unpickling.
* Recovery: lineage plus a checkpoint every `checkpoint_every` supersteps.  Messages
  are delivered sorted by (source shard, sequence), so a recomputed task after an
  executor loss rebuilds exactly the same state.
* Errors: a `DataflowError` in a task (user function, convergence) comes back to the
  driver as a record; the driver restores the state RDD of the step's start, gives
  the sessions their updates back and re-raises it, as the local engine does.

pyspark is imported only by the Spark engine's modules (this one, `spark_io`, and
`bsp.dumps` for cloudpickle), and only when they run, never at import time.
"""

from __future__ import annotations

import atexit
import os
import pickle
import shutil
import socket
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterable

from ddflow.engine.bsp import BSPEngine, dumps, is_idle, run_step_safely
from ddflow.errors import EngineUnavailableError


def by_shard(key: int) -> int:
    """The partition function of every shard-keyed RDD.  One module-level object:
    Spark recognises equal partitioners by the identity of this function, and only
    then is a union of state and messages narrow."""
    return key


# -- environment -------------------------------------------------------------------

def check_environment(master: str = "local[2]", timeout: float = 5.0) -> None:
    """Raise `EngineUnavailableError` with a remedy if Spark cannot start here."""
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise EngineUnavailableError(
            "pyspark is not installed: `pip install pyspark` (or `pip install -e .`, "
            "which brings it)") from exc
    java_home = os.environ.get("JAVA_HOME")
    java = (Path(java_home) / "bin" / "java") if java_home else None
    if not (java and java.exists()) and shutil.which("java") is None:
        raise EngineUnavailableError(
            "Java was not found (no `java` on PATH, JAVA_HOME unset or wrong): install a "
            "Java 17 runtime (e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME")
    if master.startswith("spark://"):
        host, _, port = master[len("spark://"):].partition(":")
        try:
            with socket.create_connection((host, int(port or 7077)), timeout=timeout):
                pass
        except OSError as exc:
            raise EngineUnavailableError(
                f"the Spark master {master} is unreachable ({exc}); start it (e.g. "
                "`spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1`) "
                "or pass another master") from exc


def _prepare_driver_env() -> None:
    """Settings that must be in place before the JVM starts."""
    import pyspark
    os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("SPARK_LOCAL_HOSTNAME", "localhost")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Executors must import what the driver can: the project and the modules that
    # define user functions pickled by reference.
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    old = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths + old.split(os.pathsep)))


LOW_LATENCY_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.locality.wait": "0s",
    "spark.python.worker.reuse": "true",
    "spark.eventLog.enabled": "false",
    "spark.driver.memory": "1g",
}

CLUSTER_CONF = {
    "spark.executor.memory": "1g",
    "spark.executor.cores": "1",
    "spark.executor.heartbeatInterval": "2s",
    "spark.network.timeout": "20s",
    "spark.network.timeoutInterval": "5s",
    "spark.storage.blockManagerHeartbeatTimeoutMs": "20000",
    "spark.task.maxFailures": "8",
}


def make_session(master: str = "local[2]", app: str = "ddflow", conf: dict | None = None):
    """A SparkSession bound to loopback with low-latency settings."""
    check_environment(master)
    _prepare_driver_env()
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.master(master).appName(app)
    settings = dict(LOW_LATENCY_CONF)
    if not master.startswith("local["):
        settings.update(CLUSTER_CONF)
    settings.update(conf or {})
    for k, v in settings.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - JVM start failures arrive in many types
        raise EngineUnavailableError(f"Spark did not start with master {master}: {exc}") from exc
    spark.sparkContext.setLogLevel("ERROR")
    return spark


#: Temporary paths engines made (checkpoint directories, the project's zip): each
#: engine removes its own at `stop()`, and whatever is left goes at interpreter exit.
_MADE: list[str] = []


def _remove(paths: list[str]) -> None:
    for path in paths:
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.exists(path):
            os.remove(path)
        if path in _MADE:
            _MADE.remove(path)


atexit.register(lambda: _remove(list(_MADE)))


def _project_zip() -> str:
    """The three packages as a zip for `addPyFile` (executors without the install)."""
    root = Path(__file__).resolve().parents[2]
    fd, path = tempfile.mkstemp(prefix="ddflow-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(path, "w") as z:
        for pkg in ("ddflow", "lattice", "operators"):
            for f in (root / pkg).rglob("*.py"):
                z.write(f, f.relative_to(root))
    return path


def _probe(_: Any) -> str:
    import ddflow  # noqa: F401
    import operators.reduce  # noqa: F401
    return "ok"


# -- the task ----------------------------------------------------------------------

def _task(index: int, records: Iterable, plan: Any, ctx: dict, shards: int) -> Iterable:
    """One Spark task: one shard's superstep (`ddflow.engine.bsp.step_shard`)."""
    blob = None
    incoming = []
    for _key, value in records:
        if value[0] == "S":
            blob = value[1]
        else:
            incoming.append(value[1])
    if is_idle(index, incoming, ctx):
        state = None
    else:
        state = pickle.loads(blob)
    new, messages, info = run_step_safely(index, state, incoming, plan, ctx, shards)
    yield (index, ("S", blob if new is None else dumps(new)))
    for dest, m in messages:
        yield (dest, ("M", m))
    yield (index, ("I", info))


def _is_state(r: tuple) -> bool:
    return r[1][0] == "S"


def _is_msg(r: tuple) -> bool:
    return r[1][0] == "M"


def _messages_only(records: Iterable) -> Iterable:
    return (r for r in records if r[1][0] == "M")


def _is_info(r: tuple) -> bool:
    return r[1][0] == "I"


def _fetch(index: int, records: Iterable, node: int, attr: str) -> Iterable:
    for _key, value in records:
        if value[0] == "S":
            yield (index, getattr(pickle.loads(value[1]).ops[0][node], attr))


class SparkEngine(BSPEngine):
    """Run a dataflow on Spark: `Dataflow(engine=SparkEngine(master="local[2]"))`.

    `spark` is an existing SparkSession (else one is made for `master`); `shards`
    defaults to Spark's default parallelism (one shard per executor core is what the
    measurements favour).  `ship_code` adds the project to the executors with
    `addPyFile` (default: for every master that is not `local[...]`).
    """

    def __init__(self, spark: Any = None, *, master: str = "local[2]", shards: int | None = None,
                 checkpoint_every: int = 10, checkpoint_dir: str | None = None,
                 ship_code: bool | None = None) -> None:
        super().__init__(shards)
        if spark is None:
            check_environment(master)
        else:
            master = spark.sparkContext.master
        self._spark = spark
        self.master = master
        self.checkpoint_every = checkpoint_every
        self.checkpoint_dir = checkpoint_dir
        self.ship_code = (not master.startswith("local[")) if ship_code is None else ship_code
        self.jobs = 0
        self._state = None
        self._previous = None
        self._keep = None
        self._owned = spark is None
        self._made: list[str] = []
        #: What an executor runs to show it can import the project.
        self._probe = _probe

    # -- session ---------------------------------------------------------------
    @property
    def spark(self) -> Any:
        """The SparkSession, made for `master` on first use when none was given."""
        if self._spark is None:
            self._spark = make_session(self.master)
        return self._spark

    def stop(self) -> None:
        """Stop the session if this engine made it, and remove the temporary files
        this engine made (its checkpoint directory, the project's zip)."""
        if self._owned and self._spark is not None:
            self._spark.stop()
            self._spark = None
        _remove(self._made)
        self._made = []

    def _prepare(self) -> None:
        sc = self.spark.sparkContext
        if self.ship_code:
            sc.addPyFile(self._made_path(_project_zip()))
        if self.checkpoint_every:
            sc.setCheckpointDir(self.checkpoint_dir
                                or self._made_path(tempfile.mkdtemp(prefix="ddflow-ckpt-")))
        try:
            sc.parallelize([0], 1).map(self._probe).collect()
        except Exception as exc:  # noqa: BLE001 - Py4J wraps the executor's error
            raise EngineUnavailableError(
                "Spark executors cannot import ddflow: install the project in the "
                "executors' Python (`pip install -e .`) or use SparkEngine(ship_code=True)"
                f" ({str(exc).splitlines()[0][:200]})") from exc
        self.jobs += 1

    def _made_path(self, path: str) -> str:
        self._made.append(path)
        _MADE.append(path)
        return path

    def _default_shards(self) -> int:
        return self.spark.sparkContext.defaultParallelism

    # -- the executor: shard states in a persisted RDD ------------------------------
    def _create(self, blobs: list[bytes]) -> None:
        sc = self.spark.sparkContext
        records = [(s, ("S", b)) for s, b in enumerate(blobs)]
        self._state = sc.parallelize(records, self.shards).partitionBy(self.shards, by_shard)
        self._state.persist()

    def _superstep(self, messages: Any, ctx: dict) -> tuple[list, Any]:
        sc = self.spark.sparkContext
        if isinstance(messages, list):      # injected by the driver (session updates)
            messages = (sc.parallelize([(d, ("M", m)) for d, m in messages], self.shards)
                        .partitionBy(self.shards, by_shard) if messages else None)
        source = self._state if messages is None else self._state.union(messages)
        plan, shards = self.plan, self.shards
        res = source.mapPartitionsWithIndex(lambda i, it: _task(i, it, plan, ctx, shards),
                                            preservesPartitioning=True)
        res.persist()
        if self.checkpoint_every and (self.supersteps + 1) % self.checkpoint_every == 0:
            res.checkpoint()
        infos = [v[1] for _k, v in res.filter(_is_info).collect()]
        self.jobs += 1
        if any("error" in i for i in infos):
            res.unpersist()
            return infos, None
        if self._previous is not None and self._previous is not self._keep:
            self._previous.unpersist()
        self._previous = res
        self._state = res.filter(_is_state)
        sent = any(i.get("sent") for i in infos)
        # `res` carries the shard partitioner (true of its state records), so
        # partitionBy would believe the messages already placed and skip the shuffle:
        # drop the partitioner first, then shuffle them to their destinations.
        out = (res.mapPartitions(_messages_only, preservesPartitioning=False)
               .partitionBy(self.shards, by_shard) if sent else None)
        return infos, out

    def _checkpoint(self) -> Any:
        self._keep = self._previous
        return (self._state, self._previous)

    def _rollback(self, handle: Any) -> None:
        self._state, self._previous = handle

    def _release(self, handle: Any) -> None:
        self._keep = None

    def _blobs_now(self) -> list[bytes]:
        got = dict(self._state.filter(_is_state).map(lambda r: (r[0], r[1][1])).collect())
        self.jobs += 1
        old = [self._state, self._previous]
        self._previous = self._keep = None
        for rdd in old:
            if rdd is not None:
                rdd.unpersist()
        return [got[s] for s in range(self.shards)]

    def fetch(self, node: Any, attr: str) -> list:
        """`getattr(op, attr)` of `node`'s operator on every shard (one Spark job)."""
        i = self.index[id(node)]
        got = dict(self._state.mapPartitionsWithIndex(
            lambda idx, it: _fetch(idx, it, i, attr)).collect())
        self.jobs += 1
        return [got[s] for s in range(self.shards)]
