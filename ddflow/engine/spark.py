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

* Inputs from DataFrames never pass through the driver: `spark_io` checks and shards
  the rows on the executors and hands them over with `feed_rdd`; the next run counts
  their minimal times as in flight and unions them into its first superstep.
* Operations (`spark_session`): the session (the user's, honoured, or one made with
  `conf`), executors registered within `executor_timeout`, running the driver's
  Python and the driver's code, a checkpoint directory of the engine's own (shared,
  for a cluster master); `stop()` unpersists what the engine cached and removes its
  files; `_sweeping` keeps the cached RDDs to what `_held_rdds` lists.

pyspark is imported only by the Spark engine's modules (this one, `spark_io`,
`spark_session`, and `bsp.dumps` for cloudpickle), and only when they run, never at
import time.
"""

from __future__ import annotations

import logging
import pickle
import time
from typing import Any, Iterable

from ddflow.arguments import nonnegative_int, positive_seconds
from ddflow.capture import journal_since, read_since
from ddflow.engine.bsp import BSPEngine, dumps, is_idle, run_step_safely
from ddflow.errors import EngineUnavailableError

log = logging.getLogger("ddflow.spark")


def by_shard(key: int) -> int:
    """The partition function of every shard-keyed RDD.  One module-level object:
    Spark recognises equal partitioners by the identity of this function, and only
    then is a union of state and messages narrow."""
    return key


# -- environment: ddflow.engine.spark_session ---------------------------------------
# (re-exported: `from ddflow.engine.spark import make_session` is the documented use)
from ddflow.engine.spark_session import (  # noqa: E402
    CheckpointDir, ExecutorSetup, Temporary, check_environment, make_session)


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


class _Fed:
    """An input's updates on the executors, waiting for a run (`SparkEngine.feed_rdd`)."""

    __slots__ = ("session", "rdd", "stamps", "count", "persisted")

    def __init__(self, session: Any, rdd: Any, stamps: dict, count: int, persisted: Any) -> None:
        self.session, self.rdd, self.stamps = session, rdd, stamps
        self.count, self.persisted = count, persisted


def _fed_messages(records: Iterable, node: int, feed: int) -> Iterable:
    """Fed chunks as superstep messages `(src, seq, node, port, updates)`: source -2
    (before the driver's -1), sequence by feed then chunk, so a recomputed task
    receives them in the same order."""
    for dest, (_tag, (k, updates)) in records:
        yield dest, ("M", (-2, (feed << 32) + k, node, 0, updates))


def _shard_worker(records: Iterable) -> Any:
    for _key, value in records:
        if value[0] == "S":
            return pickle.loads(value[1])
    return None


def _captured(records: Iterable, node: int) -> Iterable:
    worker = _shard_worker(records)
    if worker is not None:
        yield from worker.ops[0][node].updates


def _journal_part(index: int, records: Iterable, node: int, entries: Any) -> Iterable:
    worker = _shard_worker(records)
    if worker is not None:
        yield index, journal_since(worker.ops[0][node].journal,
                                   entries[index] if entries is not None else None)


def _fetch(index: int, records: Iterable, node: int, attr: str) -> Iterable:
    for _key, value in records:
        if value[0] == "S":
            yield (index, getattr(pickle.loads(value[1]).ops[0][node], attr))


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
    * `checkpoint_dir`: where recovery checkpoints go, a directory the driver and
      every executor reach; required for a master that is not `local...`.  The
      engine works in its own subdirectory there and removes it at `stop()`.
    * `checkpoint_every`: supersteps between checkpoints (0: never).
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
                 shards: int | None = None, checkpoint_every: int = 10,
                 checkpoint_dir: str | None = None, ship_code: bool | None = None,
                 connect_timeout: float = 5.0, executor_timeout: float = 120.0) -> None:
        super().__init__(shards)
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
        self.jobs = 0
        self._state = None
        self._previous = None
        self._keep = None
        self._owned = spark is None
        self._temporary = Temporary()
        self._setup = ExecutorSetup(ship_code, self.executor_timeout)
        self._checkpoints: CheckpointDir | None = None
        self._prepared = False
        self._fed: list = []            # DataFrame inputs on the executors, for the next run
        self._mine: set[int] = set()    # ids of the cached RDDs this engine made
        self._feeding: list = []        # those the running step consumes

    _log = log

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
        """Release what the engine holds: its cached RDDs and its checkpoint directory;
        and the session, if the engine made it.  (A project zip shipped to the
        executors belongs to the session, in Spark's files directory: it goes with it.)"""
        if self._spark is not None and self._spark.sparkContext._jsc is not None:
            for rdd in self._held_rdds():
                rdd.unpersist()
            cached = self._spark.sparkContext._jsc.getPersistentRDDs()
            for rdd_id in self._mine:
                if cached.get(rdd_id) is not None:
                    cached.get(rdd_id).unpersist(False)
        self._mine = set()
        self._state = self._previous = self._keep = None
        self._fed, self._feeding = [], []
        if self._checkpoints is not None:
            self._checkpoints.remove()
            self._checkpoints = None
        if self._owned and self._spark is not None:
            self._spark.stop()
            self._spark = None
        self._temporary.remove()
        self._prepared = False

    def _held_rdds(self) -> list:
        """Every RDD this engine still needs cached (the state, what a rollback needs,
        inputs fed for the next run).  `_sweeping` unpersists the engine's others, so
        whatever the supersteps cache must be listed here while it is needed."""
        held = [self._state, self._previous, self._keep]
        held += [f.rdd for f in self._fed + self._feeding]
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
        if self.checkpoint_every:
            sc.setCheckpointDir(self._checkpoints.path)
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
        messages), and unpersists the RDD once the step succeeded; a failed step
        keeps them for the next run.  `ddflow.engine.spark_io` feeds DataFrames so.
        """
        self._fed.append(_Fed(session, rdd, stamps, count, persisted or rdd))

    def compile(self, df: Any) -> None:
        self._sweeping(lambda: super(SparkEngine, self).compile(df))

    def grow(self, df: Any, growth: Any) -> None:
        self._sweeping(lambda: super(SparkEngine, self).grow(df, growth))

    def run(self, df: Any) -> None:
        self._feeding, self._fed = self._fed, []
        try:
            self._sweeping(lambda: super(SparkEngine, self).run(df))
        except BaseException:
            self._fed, self._feeding = self._feeding + self._fed, []
            raise
        done, self._feeding = self._feeding, []
        for fed in done:
            fed.persisted.unpersist()

    def _sweeping(self, action: Any) -> None:
        """Run `action`, then unpersist every RDD this engine persisted and no longer
        holds (`_held_rdds`): whatever the superstep machinery caches, a dataflow
        keeps only its current state cached, not a copy per step."""
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

    def _with_fed(self, messages: Any) -> Any:
        if not self._feeding:
            return messages
        sc = self.spark.sparkContext
        parts = []
        if messages:
            parts.append(sc.parallelize([(d, ("M", m)) for d, m in messages], self.shards)
                         .partitionBy(self.shards, by_shard))
        for n, fed in enumerate(self._feeding):
            i = self.index[id(fed.session.node)]
            parts.append(fed.rdd.mapPartitions(
                lambda it, i=i, n=n: _fed_messages(it, i, n), preservesPartitioning=True))
        union = parts[0]
        for part in parts[1:]:
            union = union.union(part)
        return union

    # -- outputs read where they are ------------------------------------------------
    def captured_rdd(self, node: Any) -> Any:
        """Every update `node`'s capture recorded, as an RDD of `(data, time, diff)`
        built on the executors (not consolidated across shards)."""
        i = self.index[id(node)]
        return self._live_state().mapPartitions(lambda it: _captured(it, i))

    def _live_state(self) -> Any:
        if self._state is None:
            raise EngineUnavailableError("the Spark engine was stopped: the shards and what "
                                         "they captured are gone (read before stop())")
        return self._state

    def captured_since(self, node: Any, cursor: Any) -> tuple[list, Any, bool]:
        """As `BSPEngine.captured_since`, but each shard sends only the updates its
        capture appended since the cursor (one job): a read after a step moves what
        the step captured, not the history."""
        if id(node) not in self.index:
            return read_since([], cursor)
        i = self.index[id(node)]
        entries = cursor if cursor is not None and len(cursor) == self.shards else None
        got = dict(self._live_state().mapPartitionsWithIndex(
            lambda s, it: _journal_part(s, it, i, entries)).collect())
        self.jobs += 1
        parts = [got[s] for s in range(self.shards)]
        new_cursor = tuple(entry for _ups, entry in parts)
        if entries is None:
            return [u for ups, _e in parts for u in ups], new_cursor, True
        if any(ups is None for ups, _e in parts):
            # A step was rolled back after the last read: the whole history again.
            return read_since(self.fetch(node, "journal"), None)
        return [u for ups, _e in parts for u in ups], new_cursor, False

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
