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
  start and re-raises it, as the local engine does (`Dataflow.run` gives the
  sessions their updates back); the copies that started the step undo it in place.
* Inputs from DataFrames never pass through the driver: `spark_io` checks and shards
  the rows on the executors and hands them over with `feed_rdd`; the next run counts
  their minimal times as in flight and unions them into its first superstep.
  Outputs are read where they are (`shard_rdd`, `captured_rdd`, `captured_since`).
* Operations (`spark_session`): the session (the user's, honoured, or one made with
  `conf`), executors registered within `executor_timeout`, running the driver's
  Python and the driver's code, a checkpoint directory of the engine's own (shared,
  for a cluster master: the shard logs are written there by the executors' Python,
  so it must be a directory they mount); `stop()` unpersists what the engine cached
  and removes its files; `_sweeping` keeps the cached RDDs to what `_held_rdds` lists.

pyspark is imported only by the Spark engine's modules (this one, `spark_io`,
`spark_session`), and only when they run, never at import time.
"""


from __future__ import annotations

import contextlib
import functools
import logging
import pickle
import time
from typing import Any, Iterable, Iterator

from ddflow import frames
from ddflow.arguments import nonnegative_int, positive_seconds
from ddflow.engine.bsp import BSPEngine
from ddflow.engine import spark_io
from ddflow.engine.fed import FedRows, fed_messages
from ddflow.engine.shard_log import DirectoryStore, ShardLog
from ddflow.engine.spark_io import by_shard
from ddflow.engine.superstep import ShardState, Stage
from ddflow.engine import spark_tasks as tasks
from ddflow.errors import DataError, EngineUnavailableError
from operators.capture import read_since

log = logging.getLogger("ddflow.spark")


# -- environment: ddflow.engine.spark_session ---------------------------------------
# (re-exported: `from ddflow.engine.spark import make_session` is the documented use)
from ddflow.engine.spark_session import (  # noqa: E402
    CheckpointDir, ExecutorSetup, Temporary, check_environment, make_session)

#: `checkpoint_every=0`: a shard's log is compacted only once it outweighs its base.
_NO_COUNT = 1 << 62


class SparkEngine(BSPEngine):
    """Run a dataflow on Spark: `Dataflow(engine=SparkEngine(spark=session))`.

    Options (every one has a default; nothing is fixed inside):

    * `spark`: the user's SparkSession, used as it is (its settings are the user's;
      `stop()` leaves it running).  Without one, a session is made for `master` on
      first use, with `conf` over ddflow's defaults (`spark_session.session_conf`),
      and `stop()` stops it.  `conf` with `spark` is refused: a running session's
      settings cannot change.
    * `shards`: default Spark's default parallelism (one shard per executor core is
      what the measurements favour).
    * `checkpoint_dir`: where the shards' logs and full checkpoints go, a directory
      the driver and every executor mount (the executors' Python writes there);
      required for a master that is not `local...`.  The engine works in its own
      subdirectory there and removes it at `stop()`.
    * `checkpoint_every`: a shard's log is compacted into a full checkpoint after at
      most this many logged supersteps (sooner once it outweighs the last one; 0:
      only then).
    * `chain`: supersteps in a run's first Spark job; each next job of the run chains
      twice as many.
    * `ship_code`: add the project to the executors with `addPyFile`; default for
      a cluster master, and for a local one whose executors cannot import it.
    * `connect_timeout`: seconds to wait for a `spark://` master to answer;
      `executor_timeout`: seconds to wait for an executor to register (then an
      `EngineUnavailableError` names the master).  Spark's own timeouts are
      Spark settings: give them in `conf` (or on your session).

    Progress goes to the logger `ddflow.spark` (INFO: one line per run; DEBUG: one
    per superstep).
    """

    def __init__(self, spark: Any = None, *, master: str = "local[2]", conf: dict | None = None,
                 shards: int | None = None, checkpoint_every: int = 1000,
                 checkpoint_dir: str | None = None, ship_code: bool | None = None,
                 connect_timeout: float = 5.0, executor_timeout: float = 120.0,
                 chain: int = 4) -> None:
        super().__init__(shards, chain=chain)
        self.checkpoint_every = nonnegative_int(checkpoint_every, "checkpoint_every")
        self.connect_timeout = positive_seconds(connect_timeout, "connect_timeout")
        self.executor_timeout = positive_seconds(executor_timeout, "executor_timeout")
        if spark is None:
            check_environment(master, timeout=self.connect_timeout)
        else:
            if conf:
                raise EngineUnavailableError(
                    "SparkEngine(spark=..., conf=...): the session is already running, so "
                    "its settings cannot change; give conf when building the session, or "
                    "leave out spark and let the engine make one")
            master = spark.sparkContext.master
        self._spark = spark
        self.master = master
        self.conf = dict(conf or {})
        self.checkpoint_dir = checkpoint_dir
        self._last = None               # the last job's result, while its run goes on
        self._owned = spark is None
        self._temporary = Temporary()
        self._setup = ExecutorSetup(ship_code, self.executor_timeout)
        self._checkpoints: CheckpointDir | None = None
        self._prepared = False
        self._stopped = False
        self._current: str | None = None  # store name of the shards' versions, once read lazily
        self._fed: list = []            # DataFrame inputs on the executors, for the next run
        self._mine: set[int] = set()    # ids of the cached RDDs this engine made
        self._feeding: list = []        # those the running step consumes

    _logger = log

    # -- session ---------------------------------------------------------------
    @property
    def spark(self) -> Any:
        """The SparkSession, made for `master` on first use when none was given (or
        the one already running in this process for that master, left running)."""
        if self._spark is None:
            from pyspark import SparkContext
            from pyspark.sql import SparkSession
            running = SparkContext._active_spark_context
            if running is not None and running.master == self.master and not self.conf:
                self._spark = SparkSession.getActiveSession() or SparkSession(running)
                self._owned = False
            else:
                self._spark = make_session(self.master, conf=self.conf,
                                           connect_timeout=self.connect_timeout,
                                           executor_timeout=self.executor_timeout)
        return self._spark

    @property
    def ship_code(self) -> bool:
        """Whether the project is shipped to the executors (known once prepared)."""
        return self._setup.shipped is not None

    @property
    def checkpoint_path(self) -> str | None:
        """The engine's own checkpoint directory (None before the first run)."""
        return self._checkpoints.path if self._checkpoints else None

    def stop(self) -> None:
        """Release what the engine holds: its cached RDDs, the shards its executors
        keep, its checkpoint directory (the shards' logs); and the session, if the
        engine made it.  (A project zip shipped to the executors belongs to the
        session, in Spark's files directory: it goes with it.)"""
        self._stopped = True
        try:
            self._release_on_executors()
        finally:
            # Whatever the executors answered (they may be gone), the driver's side
            # goes: the checkpoint directory, temporary files, an owned session.
            self._mine = set()
            self._last = None
            self._fed, self._feeding = [], []
            if self._checkpoints is not None:
                self._checkpoints.remove()
                self._checkpoints = None
            try:
                if self._owned and self._spark is not None:
                    self._spark.stop()
                    self._spark = None
            finally:
                self._temporary.remove()
                self._prepared = False

    def _release_on_executors(self) -> None:
        alive = self._spark is not None and self._spark.sparkContext._jsc is not None
        if alive:
            for rdd in self._held_rdds():
                rdd.unpersist()
            cached = self._spark.sparkContext._jsc.getPersistentRDDs()
            for rdd_id in self._mine:
                if cached.get(rdd_id) is not None:
                    cached.get(rdd_id).unpersist(False)
            if not self._owned and self.index:
                # Best effort: the executors' Python workers that run this job let go
                # of the shards they keep (the others drop them when Spark retires
                # them, or as other engines' shards push them out).
                sc = self._spark.sparkContext
                sc.parallelize(range(self.shards), self.shards).foreachPartition(
                    functools.partial(tasks.forget, self.uid))
                self.jobs += 1

    def _held_rdds(self) -> list:
        """Every RDD this engine still needs cached (the last job's result while its
        run goes on, inputs fed for the next run).  `_sweeping` unpersists the
        engine's others, so whatever the jobs cache must be listed here while it is
        needed.  Between runs nothing of the shards is cached: the driver holds
        their tokens."""
        held = [self._last] + [f.rdd for f in self._fed + self._feeding]
        return list({id(r): r for r in held if r is not None}.values())

    def _prepare(self) -> None:
        """Before the first job: executors registered, running the driver's Python and
        importing the project (`ExecutorSetup`), and the checkpoint directory made and
        checked (`CheckpointDir`).  Idempotent; a failure leaves nothing half-done."""
        if self._prepared:
            return
        sc = self.spark.sparkContext
        t0 = time.perf_counter()
        CheckpointDir.require(sc.master, self.checkpoint_dir)
        self._setup.prepare(sc, self._temporary)
        if self._checkpoints is None:
            self._checkpoints = CheckpointDir(sc, self.checkpoint_dir, self._temporary)
        if not self._checkpoints.local:
            path, self._checkpoints = self._checkpoints.path, self._checkpoints.remove()
            raise EngineUnavailableError(
                f"checkpoint_dir {path!r}: the shards' logs are written by the executors' "
                "Python with plain file I/O, so they need a directory every machine "
                "mounts (NFS, a cluster file system), not a Hadoop URI such as hdfs:// "
                "or s3a://")
        self.jobs += 1
        self._prepared = True
        log.info("Spark engine ready on %s: %d executor Python worker(s) checked, "
                 "checkpoints in %s, project %s (%.2f s)", sc.master,
                 len(self._setup.executors), self._checkpoints.path,
                 "shipped" if self.ship_code else "installed", time.perf_counter() - t0)

    def _default_shards(self) -> int:
        return self.spark.sparkContext.defaultParallelism

    def fix_shards(self) -> int:
        """The number of shards, decided now if it is not yet: an input fed before the
        first run is split as the shards will be."""
        if self.requested_shards is None:
            self.requested_shards = self._default_shards()
        return self.requested_shards

    # -- inputs that never pass through the driver ---------------------------------
    def feed_rdd(self, session: Any, rdd: Any, stamps: dict[int, list], count: int,
                 persisted: Any = None) -> None:
        """Updates for `session`'s input, already on the executors, for the next run.

        `rdd` holds records `(shard, ("B", (k, updates)))`, partitioned by `by_shard`
        into `fix_shards()` partitions; `k` numbers one shard's chunks (their order of
        delivery after a recomputation); `stamps` is `{shard: minimal times of its
        updates}`; `persisted` the cached RDD it derives from (default `rdd`).  The
        next `run()` counts those times as in flight to their shards, hands the
        chunks to them in its first superstep (a narrow union with the driver's
        records), and unpersists the RDD once the step succeeded; a failed step
        keeps them for the next run.  `feed_dataframe` feeds DataFrames so.
        """
        self._fed.append(FedRows(session, rdd, stamps, count, persisted or rdd))

    def fed(self) -> list[FedRows]:
        """The inputs fed for the next run (`feed_rdd`), oldest first."""
        return list(self._fed)

    @contextlib.contextmanager
    def withholding(self, rows: Iterable[FedRows]) -> Iterator[None]:
        """Runs inside leave `rows` waiting: the trials of `ddflow.blame`, which must
        try a step without fed rows as they try it without a pending update."""
        held = {id(r) for r in rows}
        waiting = self._fed
        self._fed = [f for f in waiting if id(f) not in held]
        try:
            yield
        finally:
            self._fed = waiting

    def unfeed(self, rows: FedRows) -> None:
        """Withdraw fed rows for good (`Dataflow.discard` of a failed run's culprits):
        they never run, and their cached RDD is released."""
        if not any(f is rows for f in self._fed):
            raise DataError(f"discard: {rows!r} is no longer waiting for a run",
                            operator=rows.session.name)
        self._fed = [f for f in self._fed if f is not rows]
        rows.persisted.unpersist()

    def feed_dataframe(self, session: Any, frame: Any, time: str | None = None,
                       diff: str | None = None) -> int:
        """`InputSession.insert_dataframe` on this engine: the rows are converted,
        checked and sharded on the executors (`spark_io.shard_frame`, one job) and
        wait there for the next run (`feed_rdd`); returns their number."""
        frames.columns_of(session.name, frame.columns, time, diff)  # before any job
        self._prepare()
        shards = self.fix_shards()
        try:
            chunks, persisted, stamps, count = spark_io.shard_frame(session, frame, time,
                                                                    diff, shards)
        finally:
            self.jobs += 1
        if count:
            self.feed_rdd(session, chunks, stamps, count, persisted=persisted)
        else:
            persisted.unpersist()
        return count

    def capture_dataframe(self, node: Any, spark: Any, at: Any = None) -> Any:
        """`Capture.to_spark` on this engine: the frame is built on the executors
        from the shards' captures (`captured_rdd`), nothing goes through the driver."""
        return spark_io.updates_frame(spark, self.captured_rdd(node), at)

    def _not_stopped(self) -> None:
        if self._stopped:
            raise EngineUnavailableError("the Spark engine was stopped (stop()): its shards "
                                         "and checkpoint directory are gone; make a new "
                                         "engine and dataflow")

    def compile(self, df: Any) -> None:
        self._not_stopped()
        self._sweeping(lambda: super(SparkEngine, self).compile(df))

    def grow(self, df: Any, growth: Any) -> None:
        self._not_stopped()
        self._sweeping(lambda: super(SparkEngine, self).grow(df, growth))

    def run(self, df: Any, taken: list, keep: bool = True) -> None:
        self._not_stopped()
        self._feeding, self._fed = self._fed, []
        try:
            self._sweeping(lambda: super(SparkEngine, self).run(df, taken, keep))
        except BaseException:
            self._fed, self._feeding = self._feeding + self._fed, []
            with contextlib.suppress(OSError):      # the run's own error is the one to see
                self._mark_current()
            raise
        if not keep:        # a trial: what was fed waits for the real run
            self._fed, self._feeding = self._feeding + self._fed, []
            self._mark_current()
            return
        done, self._feeding = self._feeding, []
        for fed in done:
            fed.persisted.unpersist()
        self._mark_current()

    def _mark_current(self) -> None:
        """Write the shards' versions where lazy reads check them (`require_current`),
        once any was made."""
        if self._current is not None and self._checkpoints is not None:
            self._log.store.put(self._current, pickle.dumps(
                [st.token.version for st in self._states]))

    def _sweeping(self, action: Any) -> None:
        """Run `action`, then unpersist every RDD this engine persisted and no longer
        holds (`_held_rdds`)."""
        sc = self.spark.sparkContext
        before = set(sc._jsc.getPersistentRDDs().keySet())
        try:
            action()
        finally:
            if sc._jsc is not None:
                cached = sc._jsc.getPersistentRDDs()
                self._mine |= set(cached.keySet()) - before
                held = {rdd.id() for rdd in self._held_rdds()}
                for rdd_id in sorted(self._mine - held):
                    rdd = cached.get(rdd_id)
                    if rdd is not None:
                        rdd.unpersist(False)
                self._mine &= held

    def _fed_stamps(self) -> list[tuple[int, int, list]]:
        return [(self.index[id(f.session.node)], dest, times)
                for f in self._feeding for dest, times in f.stamps.items()]

    def _fed_parts(self) -> list:
        """The inputs fed for the run starting (`feed_rdd`) as its first superstep's
        messages `(shard, ("M", (src, seq, node, 0, updates)))`, partitioned by
        `by_shard` (their times go to `_fed_stamps`)."""
        return [fed.rdd.mapPartitions(
                    functools.partial(fed_messages, node=self.index[id(fed.session.node)],
                                      feed=n), preservesPartitioning=True)
                for n, fed in enumerate(self._feeding)]

    # -- outputs read where they are ------------------------------------------------
    def captured_rdd(self, node: Any) -> Any:
        """Every update `node`'s capture recorded, as an RDD of `(data, time, diff)`
        built on the executors (not consolidated across shards)."""
        self._live()
        if self._current is None:
            self._current = f"{self.uid}/current"
            self._mark_current()
        return self.shard_rdd(functools.partial(tasks.captured, self.index[id(node)]),
                              current=self._current)

    def _live(self) -> None:
        if self._stopped:
            raise EngineUnavailableError("the Spark engine was stopped: the shards and what "
                                         "they captured are gone (read before stop())")
        if self.index and self._checkpoints is None:
            raise EngineUnavailableError("the Spark engine has not run this dataflow yet: "
                                         "nothing is captured on its executors (run() first)")

    def captured_since(self, node: Any, cursor: Any) -> tuple[list, Any, bool]:
        """As `BSPEngine.captured_since`, but each shard sends only the updates its
        capture appended since the cursor (one job): a read after a step moves what
        the step captured, not the history."""
        if id(node) not in self.index:
            return read_since([], cursor)
        self._live()
        i = self.index[id(node)]
        entries = cursor if cursor is not None and len(cursor) == self.shards else None
        parts = self._read_shards(functools.partial(tasks.journal_part, i, entries))
        new_cursor = tuple(entry for _ups, entry in parts)
        if entries is None:
            return [u for ups, _e in parts for u in ups], new_cursor, True
        if any(ups is None for ups, _e in parts):
            # A step was rolled back after the last read: the whole history again.
            return read_since(self.fetch(node, "journal"), None)
        return [u for ups, _e in parts for u in ups], new_cursor, False

    # -- the executors: shard workers resident, logged to the checkpoint directory ---
    def _make_log(self) -> ShardLog:
        return ShardLog(DirectoryStore(self._checkpoints.path), self.uid,
                        max_entries=self.checkpoint_every or _NO_COUNT)

    def _job(self, start: list | None, stages: list[Stage]) -> list[ShardState]:
        """One Spark job: the supersteps chained as shuffle stages (every superstep's
        records go to their shards with `partitionBy`), one action at the end that
        brings back the shards' states.  The result stays cached while the run goes
        on: the next job of the run starts from it."""
        rdd = self._last if start is None else self._start(start)
        for k, stage in enumerate(stages):
            if k or start is None:
                rdd = rdd.partitionBy(self.shards, by_shard)
            rdd = rdd.mapPartitionsWithIndex(functools.partial(tasks.task, stage))
        # Spilled rather than dropped under memory pressure: a lost result re-runs
        # the previous job's last superstep, whose copies are then a step ahead and
        # rebuilt from their logs.
        from pyspark import StorageLevel
        rdd.persist(StorageLevel.MEMORY_AND_DISK)
        states = rdd.filter(tasks.is_state).map(tasks.payload).collect()
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
        return sc.parallelize(by_dest, self.shards).flatMap(tasks.records_of)

    def _end_run(self) -> None:
        if self._last is not None:
            self._last.unpersist()
            self._last = None

    def shard_rdd(self, records: Any, settle: bool = False, current: str | None = None
                  ) -> Any:
        """An RDD of what `records(worker)` yields on every shard (one task per shard,
        its worker found as a superstep finds it): how an output is read where it
        is, say `lambda w: w.ops[0][i].updates` for a capture's updates.  It reads
        the shards as they are now; with `current` (see `captured_rdd`) its tasks
        refuse, with `StaleReadError`, to run after a later `run()`."""
        sc = self.spark.sparkContext
        tokens = [st.token for st in self._states]
        return sc.parallelize(tokens, self.shards).mapPartitions(
            functools.partial(tasks.each_shard, self._log, records, settle, current))

    def _read_shards(self, transform: Any, settle: bool = False) -> list:
        """`transform(worker)` of every shard, one Spark job."""
        got = dict(self.shard_rdd(functools.partial(tasks.keyed, transform), settle).collect())
        self.jobs += 1
        return [got[s] for s in range(self.shards)]

    def fetch(self, node: Any, attr: Any) -> list:
        """`getattr(op, attr)` (or `attr(op)`) of `node`'s operator on every shard
        (one Spark job)."""
        self._live()
        return self._read_shards(tasks.Reader(self.index[id(node)], attr))

    def _blobs_now(self) -> list[bytes]:
        return self._read_shards(tasks.Reader(), settle=True)
