"""Bulk-synchronous execution: a driver loop of supersteps over shards held elsewhere.

The driver keeps only the graph and a small summary per shard (capabilities and
queued message times, for progress tracking; counters, for metrics).  Each
superstep, every shard receives the messages addressed to it, runs the pass loop of
its `Worker` (`ddflow.engine.worker`, the same loop the local engine runs) until it is
locally quiescent, and reports its summary and its outgoing messages.  The run
ends when a superstep moved nothing and the frontiers stood still.

Where the shards live is the executor's business: `InProcessShards` keeps them in a
list (it makes the superstep logic testable without a cluster), the Spark engine
keeps them in an RDD.  The per-shard work is one function, `step_shard`, which both
call, so what runs in a Spark task is exactly what the in-process tests check.
"""

from __future__ import annotations

import logging
import pickle
from collections import Counter
from typing import Any

from lattice import Antichain
from ddflow.capture import Cursor, read_since
from ddflow.engine.plan import Plan, instantiate
from ddflow.engine.steplog import StepLog
from ddflow.engine.worker import Worker, split_by_shard
from ddflow.arguments import positive_int
from ddflow.errors import DataflowError

COUNTERS = ("records_in", "records_out", "batches_out", "work", "times_visited")


def step_shard(index: int, state: Worker | None, incoming: list, plan: Plan,
               ctx: dict, shards: int) -> tuple[Any, list, dict]:
    """One shard's superstep.  `state` None means "idle, not unpickled".

    The shard's worker receives the messages addressed to it, the inputs' frontiers
    and the other shards' pointstamps as reported (they can only have moved forward
    since, and anything they send stems from them), then runs its pass loop until it
    is locally quiescent: a whole key-local fixpoint can finish in one superstep, and
    no time is treated as complete too early.  Messages for other shards are counted
    as this shard's pointstamps until it hands them over at the end.

    Returns `(new state or None if unchanged, outgoing messages, info)`; an outgoing
    message is `(dest, (src, seq, node, port, updates))`.
    """
    if state is None:
        return None, [], {"shard": index, "skipped": True}
    incoming = sorted(incoming, key=lambda m: (m[0], m[1]))
    routed = state.routed
    for _src, _seq, i, port, ups in incoming:
        state.enqueue(index, i, port, ups)
    for i, frontier in ctx["inputs"].items():
        state.set_input_frontier(i, frontier)
    external: dict = {}
    for s, (caps, queued) in ctx["stamps"].items():
        if s == index:
            continue
        for i, ts in caps.items():
            external.setdefault(i, Counter()).update(ts)
        for (i, port), ts in queued.items():
            external.setdefault(plan.ports[i][port], Counter()).update(ts)
    state.set_external(external)
    if ctx.get("import"):
        # The dataflow grew: this superstep only hands new operators their contents.
        # Nothing is drained until every shard's import messages are known to all
        # (a new operator must not see a frontier pass a time still on its way).
        state.import_contents()
    else:
        state.drain()
    outbox = state.take_outbox()
    caps, queued = state.pointstamps()
    sent = {key: list(Antichain(u[1] for u in ups)) for key, ups in outbox.items()}
    messages = [(dest, (index, seq, i, port, ups))
                for seq, ((dest, i, port), ups) in enumerate(sorted(outbox.items(),
                                                                    key=lambda kv: kv[0]))]
    info = {"shard": index, "moved": state.routed != routed or bool(incoming),
            "caps": caps, "queued": queued, "sent": sent,
            "sent_records": sum(len(ups) for ups in outbox.values()),
            "counters": [[getattr(op, c) for c in COUNTERS] + [op.trace_records()]
                         for op in state.ops[0]]}
    return state, messages, info


def is_idle(index: int, incoming: list, ctx: dict) -> bool:
    """A shard with no messages, no work of its own, and no frontier change can skip
    a superstep without even being unpickled."""
    return not incoming and index not in ctx["busy"] and not ctx["frontier_moved"]


class BSPEngine:
    """The driver of supersteps; subclasses say where shards live (`_superstep`)."""

    _log = logging.getLogger("ddflow.bsp")

    def __init__(self, shards: int | None = None) -> None:
        if shards is not None:
            shards = positive_int(shards, "shards")
        self.requested_shards = shards
        self.supersteps = 0
        self.shards = shards or 1
        # Before compile() there is no shard: every read answers "nothing yet", as
        # the local engine's do (a capture read before the first run is empty).
        self.index: dict = {}

    # -- to be provided by an executor --------------------------------------------
    def _create(self, blobs: list[bytes]) -> None:
        raise NotImplementedError

    def _superstep(self, messages: list, ctx: dict) -> list[dict]:
        """Run `step_shard` on every shard with its messages; return the infos."""
        raise NotImplementedError

    def _checkpoint(self) -> Any:
        """An opaque handle on the current shard states, for rollback."""
        raise NotImplementedError

    def _rollback(self, handle: Any) -> None:
        raise NotImplementedError

    def _release(self, handle: Any) -> None:
        """The step succeeded: the handle is no longer needed."""

    def _default_shards(self) -> int:
        return 1

    def _prepare(self) -> None:
        pass

    def _fed_stamps(self) -> list[tuple[int, int, list]]:
        """`(input node, shard, minimal times)` of the updates the running step takes
        from outside the driver (none here; see `SparkEngine.feed_rdd`)."""
        return []

    def _with_fed(self, messages: Any) -> Any:
        """The first superstep's messages, with those updates joined in."""
        return messages

    def fetch(self, node: Any, attr: str) -> list:
        """`getattr(op, attr)` of `node`'s operator on every shard."""
        raise NotImplementedError

    def _blobs_now(self) -> list[bytes]:
        """Every shard's pickled state, in shard order (to grow the dataflow)."""
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
        blobs = [dumps(Worker(self.plan, [s], self.shards, [instantiate(self.nodes, s)]))
                 for s in range(self.shards)]
        self._create(blobs)
        self._counters = {s: [[0] * (len(COUNTERS) + 1) for _ in self.nodes]
                          for s in range(self.shards)}
        self._stamps: dict = {s: ({}, {}) for s in range(self.shards)}
        self._frontiers: list | None = None
        self._importing = False

    def grow(self, df: Any, growth: Any) -> None:
        """Operators were added to the running dataflow (`ddflow.engine.plan.grow`):
        each shard's worker takes them next to its running ones.  The shard states
        pass through the driver for this (a growth is rare: a new question asked)."""
        nodes = list(df.nodes)
        workers = [pickle.loads(b) for b in self._blobs_now()]
        ops = [instantiate(nodes, s, w.ops[0][:growth.start], growth)
               for s, w in enumerate(workers)]
        plan = Plan.of_operators(nodes, ops[0])
        for s, w in enumerate(workers):
            w.grow(plan, [ops[s]], growth)
        self._create([dumps(w) for w in workers])
        self.plan, self.nodes = plan, nodes
        self.index = {id(n): i for i, n in enumerate(nodes)}
        width = len(COUNTERS) + 1
        self._counters = {s: [list(r) for r in rows[:growth.start]]
                          + [[0] * width for _ in nodes[growth.start:]]
                          for s, rows in self._counters.items()}
        self._importing = True

    # -- run -----------------------------------------------------------------------
    def run(self, df: Any) -> None:
        """One step: supersteps until no shard has work or messages; rolled back on failure."""
        taken = [(s, s.take_pending()) for s in df.sessions]
        handle = self._checkpoint()
        saved = (dict(self._stamps), {s: [list(r) for r in rows]
                                      for s, rows in self._counters.items()},
                 self._frontiers)
        self._steplog = StepLog(self._log, getattr(self, "jobs", 0))
        try:
            self._run(df, taken)
        except BaseException as exc:
            self._rollback(handle)
            self._stamps, self._counters, self._frontiers = saved
            for session, updates in taken:
                session.restore_pending(updates)
            self._steplog.end(getattr(self, "jobs", 0), exc)
            raise
        self._release(handle)
        self._importing = False
        self._steplog.end(getattr(self, "jobs", 0))

    def _run(self, df: Any, taken: list) -> None:
        inputs = {self.index[id(s.node)]: s.frontier() for s in df.sessions}
        messages: list = []
        sent_to: dict = {}
        for session, updates in taken:
            i = self.index[id(session.node)]
            for dest, part in split_by_shard(updates, _identity, self.shards,
                                             session.name).items():
                messages.append((dest, (-1, len(messages), i, 0, part)))
                sent_to.setdefault(dest, {}).setdefault((i, 0), []).extend(u[1] for u in part)
        # Inputs already on the executors (DataFrames, `SparkEngine.feed_rdd`): their
        # minimal times count as in flight to their shards, their records join the
        # first superstep's messages.
        for i, dest, times in self._fed_stamps():
            sent_to.setdefault(dest, {}).setdefault((i, 0), []).extend(times)
        messages = self._with_fed(messages)
        last_frontiers = None
        frontier_moved = True
        importing = self._importing
        while True:
            stamps = {s: (caps, _merge_queued(queued, sent_to.get(s, {})))
                      for s, (caps, queued) in self._stamps.items()}
            ctx = {"inputs": inputs, "stamps": stamps, "frontier_moved": frontier_moved,
                   "busy": {s for s, (caps, queued) in stamps.items()
                            if queued or any(i not in inputs for i in caps)},
                   "import": importing}
            if importing:
                ctx["busy"] = set(range(self.shards))
                importing = False
            infos, messages = self._superstep(messages, ctx)
            self.supersteps += 1
            self._steplog.superstep(infos, getattr(self, "jobs", 0))
            errors = [i["error"] for i in infos if "error" in i]
            if errors:
                exc, cause = pickle.loads(errors[0])
                raise exc from cause
            moved = False
            sent_to = {}
            for info in infos:
                if info.get("skipped"):
                    continue
                s = info["shard"]
                moved = moved or info["moved"] or bool(info["sent"])
                self._counters[s] = info["counters"]
                self._stamps[s] = (info["caps"], info["queued"])
                for (dest, i, port), ts in info["sent"].items():
                    sent_to.setdefault(dest, {}).setdefault((i, port), []).extend(ts)
            frontiers = self._global_frontiers(inputs, sent_to)
            frontier_moved = frontiers != last_frontiers
            self._frontiers = frontiers
            if not moved and not frontier_moved and not messages:
                return
            last_frontiers = frontiers

    def _global_frontiers(self, inputs: dict, sent_to: dict) -> list:
        caps: dict = {i: list(f) for i, f in inputs.items()}
        queued: dict = {}
        for s, (c, q) in self._stamps.items():
            for i, ts in c.items():
                caps.setdefault(i, []).extend(ts)
            for k, ts in _merge_queued(q, sent_to.get(s, {})).items():
                queued.setdefault(k, []).extend(ts)
        return self.plan.frontiers_of(caps, queued)

    # -- what front-door objects read ----------------------------------------------
    def operators(self, node: Any) -> list:
        """A view of `node`'s operator on each shard (its counters)."""
        if id(node) not in self.index:
            return []                   # not compiled yet
        i = self.index[id(node)]
        return [_OpView(self, node, s, self._counters[s][i]) for s in range(self.shards)]

    def captured(self, node: Any) -> list:
        """Every update a capture node has recorded, over all shards."""
        if id(node) not in self.index:
            return []                   # not compiled yet
        return [u for part in self.fetch(node, "updates") for u in part]

    def frontier(self, node: Any) -> tuple | None:
        """The input frontiers of `node` after the last superstep (None before)."""
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



def run_step_safely(index: int, state: Worker | None, incoming: list, plan: Plan,
                    ctx: dict, shards: int) -> tuple[Any, list, dict]:
    """`step_shard`, with a `DataflowError` turned into an info the driver re-raises."""
    try:
        return step_shard(index, state, incoming, plan, ctx, shards)
    except DataflowError as exc:
        # Pickling drops __cause__ (the user's original exception): carry it along.
        cause = exc.__cause__
        try:
            payload = dumps((exc, cause))
        except Exception:  # noqa: BLE001 - an unpicklable user exception
            payload = dumps((exc, RuntimeError(repr(cause))))
        return None, [], {"shard": index, "error": payload}


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
    """The BSP driver with its shards in this process, pickled between supersteps
    exactly as a Spark partition would hold them."""

    def _create(self, blobs: list[bytes]) -> None:
        self._blobs = list(blobs)
        self._unpickled: dict[int, tuple[bytes, Worker]] = {}

    def _default_shards(self) -> int:
        return 2

    def _superstep(self, messages: list, ctx: dict) -> tuple[list, list]:
        inbox: dict = {}
        for dest, m in messages:
            inbox.setdefault(dest, []).append(m)
        infos, out = [], []
        for s in range(self.shards):
            incoming = inbox.get(s, [])
            state = None if is_idle(s, incoming, ctx) else pickle.loads(self._blobs[s])
            new, msgs, info = run_step_safely(s, state, incoming, self.plan, ctx, self.shards)
            if new is not None:
                self._blobs[s] = dumps(new)
            infos.append(info)
            out.extend(msgs)
        return infos, out

    def _checkpoint(self) -> Any:
        return list(self._blobs)

    def _rollback(self, handle: Any) -> None:
        self._blobs = list(handle)

    def fetch(self, node: Any, attr: str) -> list:
        i = self.index[id(node)]
        return [getattr(self._shard(s).ops[0][i], attr) for s in range(self.shards)]

    def _shard(self, s: int) -> Worker:
        """Shard `s` unpickled, once per state: reads between two steps (every capture,
        every `at`) share one copy instead of each unpickling every shard."""
        blob = self._blobs[s]
        cached = self._unpickled.get(s)
        if cached is None or cached[0] is not blob:
            cached = self._unpickled[s] = (blob, pickle.loads(blob))
        return cached[1]

    def _blobs_now(self) -> list[bytes]:
        return list(self._blobs)


def dumps(obj: Any) -> bytes:
    """Pickle with cloudpickle when available (user lambdas), else plain pickle."""
    try:
        from pyspark import cloudpickle
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _identity(x: Any) -> Any:
    return x


def _merge_queued(queued: dict, extra: dict) -> dict:
    if not extra:
        return queued
    out = {k: list(v) for k, v in queued.items()}
    for k, ts in extra.items():
        out.setdefault(k, []).extend(ts)
    return out
