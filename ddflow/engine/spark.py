"""The Spark engine: the same operators, their state sharded by key across Spark tasks.

Layout (measured on a 2-core machine: any PySpark job that runs Python costs ~80-100 ms,
a shuffle then `mapPartitions` ~120-200 ms; `benchmarks/bench_spark_state.py` reports
jobs, supersteps and bytes persisted per change):

* **Supersteps** (`ddflow.engine.bsp`, `ddflow.engine.superstep`): each shard's task
  runs its `Worker`'s pass loop until nothing more can happen without other shards
  (a key-local fixpoint finishes inside one task), then sends its messages `"M"` to
  their shards, its progress summary `"P"` to every shard and its state record
  `"S"` to itself.  Every shard works out the same global frontiers and the same
  verdict from the summaries, so supersteps chain as shuffle stages
  (`partitionBy(shards, by_shard)` then `mapPartitionsWithIndex`) in **one Spark
  job**, with one action at the end that brings the `"S"` records to the driver.
  A run's first job chains `chain` supersteps, each next one twice as many: the
  jobs per change grow with the log of its supersteps, not with its loop rounds.
* **State resident on the executors** (`ddflow.engine.shard_log`): the `"S"` record
  is a token, a few hundred bytes; the worker stays deserialized in the Python
  worker process that ran it (`RESIDENT`) and is used in place when the next
  superstep lands there.  What a superstep persists is its log entry (the messages
  and progress it received, the size of the change), under `checkpoint_dir`; each
  shard's log is compacted into a full checkpoint now and then.  A task that lands
  in another process (Spark promises no affinity; an executor was lost; Spark
  retired an idle Python worker) catches a stale copy up by replaying the entries
  it missed, or rebuilds the worker from the last full checkpoint and the entries.
* **Recovery**: within a job, Spark's lineage (tasks are deterministic: messages are
  delivered sorted by source and sequence, so a recomputed superstep writes the
  same entry and reaches the same state); between runs there is no lineage at all,
  the driver keeps the tokens.  Nothing is cached between runs; while a run goes on,
  only its last job's result (the next job starts from it).
* A shard with no messages, nothing queued and no frontier change is not loaded.
* Errors: a `DataflowError` in a task (user function, convergence) travels in the
  summaries; every shard stops, the driver goes back to the tokens of the step's
  start, gives the sessions their updates back and re-raises it, as the local
  engine does.

pyspark is imported only by the Spark engine's modules (this one, `spark_io`, and
`superstep.dumps` for cloudpickle), and only when they run, never at import time.
"""

from __future__ import annotations

import atexit
import functools
import gc
import os
import shutil
import socket
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterable

from ddflow.arguments import positive_int
from ddflow.engine.bsp import BSPEngine, open_worker, read_op
from ddflow.engine.shard_log import RESIDENT, DirectoryStore, ShardLog
from ddflow.engine.superstep import ShardState, Stage, dumps, shard_superstep
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


# -- the tasks ---------------------------------------------------------------------

#: Tasks between two full collections of this Python worker's frozen objects.
_FULL_COLLECTION_EVERY = 500
_tasks_run = 0


def _task(stage: Stage, index: int, records: Iterable) -> Iterable:
    """One Spark task: shard `index`'s superstep (`superstep.shard_superstep`), its
    worker kept in this Python worker process (`shard_log.RESIDENT`)."""
    yield from shard_superstep(index, records, stage, RESIDENT)
    _settle_heap()


def _settle_heap() -> None:
    """Move what this process holds now out of the cyclic collector's sight.

    The resident workers are millions of long-lived objects, and every full
    collection walked them all and found nothing (measured at 100k edges: 388 full
    collections, none collecting an object, 193 s of a 5-minute run; a dropped
    worker leaves no cycle, refcounting frees it).  `gc.freeze` spares them; a full
    collection now and then still reclaims any cycle a user function left."""
    global _tasks_run
    _tasks_run += 1
    if _tasks_run % _FULL_COLLECTION_EVERY == 0:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


def _records(records: list) -> list:
    return records


def _is_state(r: tuple) -> bool:
    return r[1][0] == "S"


def _payload(r: tuple) -> Any:
    return r[1][1]


def _each_shard(log: ShardLog, records: Any, settle: bool, tokens: Iterable) -> Iterable:
    """`records(worker)` of each shard whose token comes in, its worker loaded as a
    superstep loads it (and kept; `settle`: without undo records)."""
    for token in tokens:
        yield from records(open_worker(log, token, RESIDENT, settle))
    _settle_heap()


def _keyed(transform: Any, worker: Any) -> list:
    return [(worker.shards[0], transform(worker))]


class _Reader:
    """A picklable `worker -> value`: operator `i`'s `attr`, or the pickled worker."""

    def __init__(self, i: int | None = None, attr: Any = None) -> None:
        self.i, self.attr = i, attr

    def __call__(self, worker: Any) -> Any:
        return dumps(worker) if self.i is None else read_op(worker, self.i, self.attr)


def _forget(uid: str, _: Any) -> Iterable:
    RESIDENT.drop(uid)
    return []


class SparkEngine(BSPEngine):
    """Run a dataflow on Spark: `Dataflow(engine=SparkEngine(master="local[2]"))`.

    `spark` is an existing SparkSession (else one is made for `master`); `shards`
    defaults to Spark's default parallelism (one shard per executor core is what the
    measurements favour).  `ship_code` adds the project to the executors with
    `addPyFile` (default: for every master that is not `local[...]`).

    Shard states live in the executors' Python workers between supersteps, logged
    under `checkpoint_dir` (default: a new temporary directory; on a cluster, a
    directory every executor and the driver mount), each shard's log compacted into
    a full checkpoint after at most `checkpoint_every` supersteps (sooner once it
    outweighs the last one).  `chain` is the number of supersteps in a run's first
    Spark job; each further job of the run chains twice as many.
    """

    def __init__(self, spark: Any = None, *, master: str = "local[2]", shards: int | None = None,
                 checkpoint_every: int = 100, checkpoint_dir: str | None = None,
                 ship_code: bool | None = None, chain: int = 4) -> None:
        super().__init__(shards, chain=chain)
        if spark is None:
            check_environment(master)
        else:
            master = spark.sparkContext.master
        self._spark = spark
        self.master = master
        self.checkpoint_every = positive_int(checkpoint_every, "checkpoint_every")
        self.checkpoint_dir = checkpoint_dir
        self.ship_code = (not master.startswith("local[")) if ship_code is None else ship_code
        self._last = None           # the last job's result, while its run goes on
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
        self._end_run()
        if self._spark is not None:
            if self._owned:
                self._spark.stop()
                self._spark = None
            elif self.index:
                # Best effort: the executors' Python workers that run this job let go
                # of the shards they keep (the others drop them when Spark retires
                # them, or as other engines' shards push them out).
                sc = self._spark.sparkContext
                sc.parallelize(range(self.shards), self.shards).foreachPartition(
                    functools.partial(_forget, self.uid))
                self.jobs += 1
        _remove(self._made)
        self._made = []

    def _prepare(self) -> None:
        sc = self.spark.sparkContext
        if self.ship_code:
            sc.addPyFile(self._made_path(_project_zip()))
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

    # -- the executors: shard workers resident, logged to the checkpoint directory ---
    def _make_log(self) -> ShardLog:
        if self.checkpoint_dir:
            root = os.path.join(self.checkpoint_dir, f"ddflow-ckpt-{self.uid}")
            os.makedirs(root)
        else:
            root = tempfile.mkdtemp(prefix=f"ddflow-ckpt-{self.uid}-")
        return ShardLog(DirectoryStore(self._made_path(root)), self.uid,
                        max_entries=self.checkpoint_every)

    def _job(self, start: list | None, stages: list[Stage]) -> list[ShardState]:
        """One Spark job: the supersteps chained as shuffle stages (every superstep's
        records go to their shards with `partitionBy`), one action at the end that
        brings back the shards' states.  The result stays cached while the run goes
        on: the next job of the run starts from it."""
        rdd = self._last if start is None else self._start(start)
        for k, stage in enumerate(stages):
            if k or start is None:
                rdd = rdd.partitionBy(self.shards, by_shard)
            rdd = rdd.mapPartitionsWithIndex(functools.partial(_task, stage))
        rdd.persist()
        states = rdd.filter(_is_state).map(_payload).collect()
        self.jobs += 1
        self._end_run()
        self._last = rdd
        return sorted(states, key=lambda st: st.token.shard)

    def _start(self, records: list) -> Any:
        """The records of a run's first superstep, partition `s` holding those for
        shard `s`: the driver's (no shuffle: one element per partition, a list),
        joined by a narrow union with inputs already on the executors
        (`_fed_parts`), if any (then the driver's go through `partitionBy`)."""
        sc = self.spark.sparkContext
        fed = self._fed_parts()
        if fed:
            rdd = sc.parallelize(records, self.shards).partitionBy(self.shards, by_shard)
            for part in fed:
                rdd = rdd.union(part)
            return rdd
        by_dest: list[list] = [[] for _ in range(self.shards)]
        for r in records:
            by_dest[r[0]].append(r)
        return sc.parallelize(by_dest, self.shards).flatMap(_records)

    def _fed_parts(self) -> list:
        """RDDs of input messages `(shard, ("M", (src, seq, node, 0, updates)))`
        already on the executors, partitioned by `by_shard`, for the run starting
        (their times go to `_fed_stamps`).  None here."""
        return []

    def _end_run(self) -> None:
        if self._last is not None:
            self._last.unpersist()
            self._last = None

    def shard_rdd(self, records: Any, settle: bool = False) -> Any:
        """An RDD of what `records(worker)` yields on every shard (one task per shard,
        its worker found as a superstep finds it): how an output is read where it
        is, say `lambda w: w.ops[0][i].updates` for a capture's updates."""
        sc = self.spark.sparkContext
        tokens = [st.token for st in self._states]
        return sc.parallelize(tokens, self.shards).mapPartitions(
            functools.partial(_each_shard, self._log, records, settle))

    def _read_shards(self, transform: Any, settle: bool = False) -> list:
        """`transform(worker)` of every shard, one Spark job."""
        got = dict(self.shard_rdd(functools.partial(_keyed, transform), settle).collect())
        self.jobs += 1
        return [got[s] for s in range(self.shards)]

    def fetch(self, node: Any, attr: Any) -> list:
        """`getattr(op, attr)` (or `attr(op)`) of `node`'s operator on every shard
        (one Spark job)."""
        return self._read_shards(_Reader(self.index[id(node)], attr))

    def _blobs_now(self) -> list[bytes]:
        return self._read_shards(_Reader(), settle=True)
