"""Bulk-synchronous execution: the driver of supersteps over shards held elsewhere.

Each superstep, every shard receives the messages addressed to it and every shard's
progress summary, runs the pass loop of its `Worker` (`ddflow.engine.worker`, the
loop the local engine runs) until it is locally quiescent, and sends its messages
and its summary on (`ddflow.engine.superstep.shard_superstep`).  Since every shard
computes the same global frontiers and the same "run is over" verdict from the
summaries, the driver does not take part in a superstep: it starts a *job*, a chain
of supersteps, and hears only the last one's states.  A run's first job chains
`chain` supersteps, each next job twice as many as the last, so a run that needs
`n` supersteps takes about `log2(n / chain)` jobs, whatever the number of loop
rounds; supersteps after the verdict pass the states through.

The driver keeps the graph, the shards' states as `ShardState`s (tokens naming a
base and a log of supersteps, `ddflow.engine.shard_log`; a shard's worker itself
stays where it last ran), and their last summaries (for metrics and the first
superstep of the next run).  A run that fails is rolled back by going back to the
tokens of its start.

Where shards run is the executor's business: `InProcessShards` runs them here,
simulating the processes a Spark executor would run them in (a shard lands on one
of them at random, so every way of finding a worker is exercised), and the Spark
engine runs them in Spark tasks.  Both run the same `shard_superstep`.
"""

from __future__ import annotations

import logging
import pickle
import random
import uuid
from typing import Any

import attrs

from lattice import Antichain
from ddflow.arguments import positive_int
from ddflow.engine.plan import Plan, instantiate
from ddflow.engine.shard_log import MemoryStore, Resident, ShardLog
from ddflow.engine.steplog import StepLog
from ddflow.engine.superstep import (COUNTERS, TALLY, ShardState, Stage, View, dumps,
                                     raise_error, replay, shard_superstep, summary, undo)
from ddflow.engine.worker import Worker, split_by_shard
from operators.capture import Cursor, read_since


class BSPEngine:
    """The driver of supersteps; subclasses say where shards run (`_job`).

    `chain` is the number of supersteps in a run's first job (each next job of the
    run chains twice as many).  Progress goes to `_logger` (`ddflow.steplog`)."""

    _logger = logging.getLogger("ddflow.bsp")

    def __init__(self, shards: int | None = None, *, chain: int = 4) -> None:
        if shards is not None:
            shards = positive_int(shards, "shards")
        self.requested_shards = shards
        self.chain = positive_int(chain, "chain")
        #: Supersteps run (those passed through after a run's verdict not counted).
        self.supersteps = 0
        #: Jobs started (a chain of supersteps, a fetch, a probe).
        self.jobs = 0
        self.shards = shards or 1
        self.uid = uuid.uuid4().hex[:16]
        self._clock = 0             # versions: one per superstep, never reused
        # Before compile() there is no shard: every read answers "nothing yet", as
        # the local engine's do (a capture read before the first run is empty).
        self.index: dict = {}

    # -- to be provided by an executor --------------------------------------------
    def _make_log(self) -> ShardLog:
        """Where the shards' bases and logged supersteps go."""
        raise NotImplementedError

    def _job(self, start: list | None, stages: list[Stage]) -> list[ShardState]:
        """Run `stages` as a chain of supersteps on every shard, from the records
        `start` (or, None, from where the last job of the run ended); return each
        shard's state after the last one."""
        raise NotImplementedError

    def _end_run(self) -> None:
        """The run is over (or rolled back): let go of what its jobs left."""

    def _default_shards(self) -> int:
        return 1

    def _fed_stamps(self) -> list[tuple[int, int, list]]:
        """`(input node, shard, minimal times)` of updates the run starting takes
        from elsewhere than the driver's sessions (none here)."""
        return []

    def _prepare(self) -> None:
        pass

    def fetch(self, node: Any, attr: Any) -> list:
        """`getattr(op, attr)` (or `attr(op)` if callable) of `node`'s operator on
        every shard."""
        raise NotImplementedError

    def _blobs_now(self) -> list[bytes]:
        """Every shard's pickled worker, in shard order (to grow the dataflow)."""
        raise NotImplementedError

    # -- compile ---------------------------------------------------------------------
    def compile(self, df: Any) -> None:
        """Build the shards' operators and the plan, once, before the first run."""
        self._prepare()
        self.shards = self.requested_shards or self._default_shards()
        self.nodes = list(df.nodes)
        self.index = {id(n): i for i, n in enumerate(self.nodes)}
        # Operators of shard 0 stand in for all of them on the driver: their
        # summaries make the plan, their counters' names the metrics.
        self.plan = Plan.of_operators(self.nodes, instantiate(self.nodes, 0))
        self._log = self._make_log()
        self._states = [ShardState(None) for _ in range(self.shards)]
        self._create([dumps(Worker(self.plan, [s], self.shards, [instantiate(self.nodes, s)]))
                      for s in range(self.shards)])
        self._counters = {s: [[0] * (len(COUNTERS) + 1) for _ in self.nodes]
                          for s in range(self.shards)}
        self._frontiers: list | None = None
        self._importing = False

    def _create(self, blobs: list[bytes]) -> None:
        """The shards' states become `blobs` (pickled workers), each a new base;
        their last summaries stay (the grown workers hold the same pointstamps)."""
        version = self._tick()
        self._states = [attrs.evolve(st, token=self._log.create(s, version, blob))
                        for (s, blob), st in zip(enumerate(blobs), self._states)]

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def grow(self, df: Any, growth: Any) -> None:
        """Operators were added to the running dataflow (`ddflow.graph.grow`):
        each shard's worker takes them next to its running ones.  The shard states
        pass through the driver for this (a growth is rare: a new question asked)."""
        nodes = list(df.nodes)
        workers = [pickle.loads(b) for b in self._blobs_now()]
        ops = [instantiate(nodes, s, w.ops[0][:growth.start], growth)
               for s, w in enumerate(workers)]
        plan = Plan.of_operators(nodes, ops[0])
        for s, w in enumerate(workers):
            w.grow(plan, [ops[s]], growth)
        self.plan, self.nodes = plan, nodes
        self._create([dumps(w) for w in workers])
        self._log.collect_garbage([st.token for st in self._states])
        self.index = {id(n): i for i, n in enumerate(nodes)}
        width = len(COUNTERS) + 1
        self._counters = {s: [list(r) for r in rows[:growth.start]]
                          + [[0] * width for _ in nodes[growth.start:]]
                          for s, rows in self._counters.items()}
        self._importing = True

    # -- run -----------------------------------------------------------------------
    def run(self, df: Any, taken: list, keep: bool = True) -> None:
        """One step over the updates taken from the sessions (`(session, updates)`
        pairs): jobs of supersteps until the shards' verdict is that nothing moves
        any more; rolled back on failure (the sessions by `Dataflow.run`), and with
        `keep=False` (a trial, see `LocalEngine.run`) on success too: the shards go
        back to the step's start as after a failure (each copy undone when next
        loaded)."""
        saved = (list(self._states), {s: [list(r) for r in rows]
                                      for s, rows in self._counters.items()},
                 self._frontiers)
        self._steplog = StepLog(self._logger, self.jobs)
        try:
            self._run(df, taken)
        except BaseException as exc:
            self._states, self._counters, self._frontiers = saved
            self._end_run()
            self._steplog.end(self.jobs, exc)
            raise
        if not keep:
            self._states, self._counters, self._frontiers = saved
            self._end_run()
            self._steplog.end(self.jobs)
            return
        self._end_run()
        self._importing = False
        self._steplog.end(self.jobs)
        # What no live state names any more (superseded entries, bases, and the
        # branches of rolled-back runs) goes now that no task can read it.
        self._log.collect_garbage([st.token for st in self._states])

    def _run(self, df: Any, taken: list) -> None:
        inputs = {self.index[id(s.node)]: s.frontier() for s in df.sessions}
        records: list = []
        injected: dict = {}
        for session, updates in taken:
            i = self.index[id(session.node)]
            for dest, part in split_by_shard(updates, _identity, self.shards,
                                             session.name).items():
                records.append((dest, ("M", (-1, len(records), i, 0, part))))
                # The minimal times stand for the batch in progress tracking.
                key = (dest, i, 0)
                injected[key] = list(Antichain(injected.get(key, []) + [u[1] for u in part]))
        for i, dest, times in self._fed_stamps():
            key = (dest, i, 0)
            injected[key] = list(Antichain(injected.get(key, []) + list(times)))
        given = {s: summary(st.info) for s, st in enumerate(self._states)}
        given[-1] = {"caps": {}, "queued": {}, "sent": injected, "moved": False, "error": None}
        records += [(s, ("S", attrs.evolve(st, frontiers=None, halted=False, error=None,
                                           run_from=st.token.version, trail=())))
                    for s, st in enumerate(self._states)]
        length, first = self.chain, True
        steps = self._states[0].steps
        logged = 0
        while True:
            stages = [Stage(self.plan, self.shards, self._log, inputs, self._tick(),
                            start=first and k == 0, importing=first and k == 0 and self._importing,
                            given=given if first and k == 0 else None)
                      for k in range(length)]
            states = self._job(records if first else None, stages)
            first = False
            self.supersteps += states[0].steps - steps
            steps = states[0].steps
            for k in range(logged, len(states[0].trail)):
                self._steplog.superstep([{"skipped": not st.trail[k][0],
                                          "sent_records": st.trail[k][1]}
                                         for st in states], self.jobs)
            logged = len(states[0].trail)
            for st in states:
                if st.error is not None:
                    raise_error(st.error)
            for s, st in enumerate(states):
                if st.info["counters"] is not None:
                    self._counters[s] = st.info["counters"]
            self._states = states
            if states[0].halted:
                self._frontiers = states[0].frontiers
                return
            view = View({s: summary(st.info) for s, st in enumerate(states)}, self.plan,
                        self.shards, inputs, states[0].frontiers, False)
            if view.done:
                self._frontiers = view.frontiers
                return
            length *= 2

    # -- what front-door objects read ----------------------------------------------
    def operators(self, node: Any) -> list:
        """A view of `node`'s operator on each shard (its counters)."""
        if id(node) not in self.index:
            return []                   # not compiled yet
        i = self.index[id(node)]
        return [_OpView(self, node, s, self._counters[s][i]) for s in range(self.shards)]

    def frontier(self, node: Any) -> tuple | None:
        """The input frontiers of `node` after the last run (None before)."""
        frontiers = getattr(self, "_frontiers", None)
        i = self.index.get(id(node)) if frontiers is not None else None
        # None too for a node added since the last successful run (`grow`).
        return None if i is None or i >= len(frontiers) else frontiers[i]

    def captured_since(self, node: Any, cursor: Cursor | None) -> tuple[list, Cursor, bool]:
        """As `LocalEngine.captured_since`.  Fetches every shard's whole journal (one
        job), so it costs O(history) in transfer; the reader's index still only
        absorbs the new updates."""
        if id(node) not in self.index:
            return read_since([], cursor)   # not compiled yet: nothing captured
        return read_since(self.fetch(node, "journal"), cursor)

    def tally(self) -> dict:
        """What the shards tallied so far (`superstep.TALLY`), summed over shards."""
        states = getattr(self, "_states", [])
        return {name: sum(st.tally[k] for st in states) for k, name in enumerate(TALLY)}


def open_worker(log: ShardLog, token: Any, resident: Resident, settle: bool = False) -> Worker:
    """Shard `token`'s worker to read, found as a superstep finds it, kept there;
    with `settle`, its undo records dropped first (to pickle it)."""
    loaded = log.load(token, resident, replay, undo=undo)
    began = loaded.began
    if settle:
        loaded.worker.commit()
        began = None
    resident.keep(token, loaded.worker, began)
    return loaded.worker


def read_op(worker: Worker, i: int, attr: Any) -> Any:
    """`getattr` of (or `attr` called on) operator `i` of a shard's worker."""
    op = worker.ops[0][i]
    return attr(op) if callable(attr) else getattr(op, attr)


class _OpView:
    """An operator's counters as its shard last reported them."""

    def __init__(self, engine: BSPEngine, node: Any, shard: int, row: list) -> None:
        self._engine, self._node, self._shard = engine, node, shard
        for c, v in zip(COUNTERS, row):
            setattr(self, c, v)
        self._trace = row[len(COUNTERS)]

    def trace_records(self) -> int:
        return self._trace

    @property
    def log(self) -> dict:
        return self._engine.fetch(self._node, "log")[self._shard]


class InProcessShards(BSPEngine):
    """The BSP driver with its shards run in this process, as Spark would run them.

    Each superstep of a shard runs in one of `processes` simulated processes, picked
    at random (seeded by the superstep, so runs repeat): each keeps its own resident
    workers, as a Spark executor's Python workers do, and a shard landing where its
    worker is stale or absent catches up from the log or is rebuilt from its base,
    which is pickled, as are the logged supersteps (re-running the user functions of
    the supersteps replayed, as Spark re-runs tasks: with `processes` > 1 they must
    be deterministic).  The log compacts often, so every shard's state is pickled
    now and then."""

    def __init__(self, shards: int | None = None, *, chain: int = 4, processes: int = 1,
                 max_entries: int = 8) -> None:
        super().__init__(shards, chain=chain)
        self.processes = [Resident() for _ in range(positive_int(processes, "processes"))]
        self.max_entries = positive_int(max_entries, "max_entries")
        self._pending: list = []

    def _default_shards(self) -> int:
        return 2

    def _make_log(self) -> ShardLog:
        return ShardLog(MemoryStore(), self.uid, max_entries=self.max_entries,
                        min_base_bytes=0)

    def _process(self, version: int, shard: int) -> Resident:
        return self.processes[random.Random(version * 7919 + shard).randrange(
            len(self.processes))]

    def _job(self, start: list | None, stages: list[Stage]) -> list[ShardState]:
        self.jobs += 1
        records = self._pending if start is None else start
        for stage in stages:
            inbox: dict = {s: [] for s in range(self.shards)}
            for r in records:
                inbox[r[0]].append(r)
            records = [out for s in range(self.shards)
                       for out in shard_superstep(s, inbox[s], stage,
                                                  self._process(stage.version, s))]
        self._pending = records
        return sorted((r[1][1] for r in records if r[1][0] == "S"),
                      key=lambda st: st.token.shard)

    def _end_run(self) -> None:
        self._pending = []

    def fetch(self, node: Any, attr: Any) -> list:
        # A copy, as from Spark: a value read must not change with the next run.
        i = self.index[id(node)]
        return [pickle.loads(dumps(read_op(self._worker(s), i, attr)))
                for s in range(self.shards)]

    def _worker(self, s: int, settle: bool = False) -> Worker:
        return open_worker(self._log, self._states[s].token, self.processes[0], settle)

    def _blobs_now(self) -> list[bytes]:
        return [dumps(self._worker(s, settle=True)) for s in range(self.shards)]


def _identity(x: Any) -> Any:
    return x

