"""One shard's superstep, and the progress every shard works out alike from what it receives.

What this module isolates: the per-shard side of bulk-synchronous execution, the one
function (`shard_superstep`) that a Spark task and the in-process BSP engine both
run, records in, records out.  It leaves out where shards live between supersteps
(`ddflow.engine.shard_log`) and who chains supersteps into jobs (`ddflow.engine.bsp`).

Records are `(dest shard, (tag, payload))`:

* `"S"`: the shard's own `ShardState`: where its worker is (a `Token`), its last
  summary, the global frontiers it last computed, whether the run is over;
* `"P"`: a *progress summary*, `(src, summary)`, which every shard sends to every
  shard after each superstep: its capabilities, its queued batch times, the times of
  the messages it sent and where to, whether it moved, an error if it failed;
* `"M"`: a message `(src, seq, node, port, updates)` for the shard's operators.

Because every shard receives every summary, every shard computes the same global
frontiers and the same verdict ("the run is over": the last superstep moved nothing
and the frontiers stood still; or "a shard failed") without the driver: supersteps
chain inside one Spark job, and the driver only hears the last one.  A shard with no
message, nothing queued and no frontier change is idle: its worker is not even
loaded.  Once the verdict is in, the remaining supersteps of a job pass the states
through untouched.

Determinism: a shard's superstep is a function of its state and of what it received
(messages sorted by source and sequence), which is what lets a Spark task be
recomputed after an executor loss and a logged superstep be replayed
(`shard_log`): the entry logged is exactly the arguments of `step_shard`.
"""

from __future__ import annotations

import pickle
import time
from collections import Counter
from typing import Any, Iterator

import attrs
import cloudpickle

from lattice import Antichain
from ddflow.engine.plan import Plan
from ddflow.engine.shard_log import RESIDENT, Resident, ShardLog, Token
from ddflow.engine.worker import Worker
from ddflow.errors import DataflowError

COUNTERS = ("records_in", "records_out", "batches_out", "work", "times_visited")

#: What a shard tallies over its life: supersteps it worked in, records it sent to
#: other shards, bytes it persisted as log entries and as bases (compactions),
#: seconds it worked (loading, stepping, persisting), how it found its worker
#: (`shard_log.Loaded.how`: kept here, undone after a failed run, a copy caught up,
#: rebuilt from the base), and logged supersteps it replayed to get there.
TALLY = ("busy", "records_sent", "log_bytes", "base_bytes", "seconds", "resident",
         "rolled_back", "replayed", "rebuilt", "entries_replayed")

#: A shard's summary before it has run: nothing held, nothing queued.
EMPTY_INFO = {"moved": False, "caps": {}, "queued": {}, "sent": {}, "counters": None}


def step_shard(worker: Worker, incoming: list, inputs: dict, external: dict,
               importing: bool, version: int) -> tuple[list, dict]:
    """Run one shard's pass loop on what it received.

    The worker takes the messages addressed to it (sorted by source and sequence),
    the inputs' frontiers and the other shards' pointstamps as last reported (they
    can only have moved forward since, and anything they send stems from them),
    then runs until it is locally quiescent: a whole key-local fixpoint finishes in
    one superstep, and no time is treated as complete too early.  Messages for other
    shards count as this shard's pointstamps until it hands them over at the end.

    Returns the outgoing messages `(dest, (src, seq, node, port, updates))` and the
    shard's summary (capabilities, queued times, sent times, counters).
    """
    index = worker.shards[0]
    routed = worker.routed
    for _src, _seq, i, port, ups in incoming:
        worker.enqueue(index, i, port, ups)
    for i, frontier in inputs.items():
        worker.set_input_frontier(i, frontier)
    worker.set_external(external)
    # Captures draw their batch tokens from the superstep (never reused), so that a
    # shard rebuilt by replaying this superstep hands out the same ones again.
    worker.seed_tokens(version)
    if importing:
        # The dataflow grew: this superstep only hands new operators their contents.
        # Nothing is drained until every shard's import messages are known to all (a
        # new operator must not see a frontier pass a time still on its way).
        worker.import_contents()
    else:
        worker.drain()
    outbox = worker.take_outbox()
    caps, queued = worker.pointstamps()
    sent = {key: list(Antichain(u[1] for u in ups)) for key, ups in outbox.items()}
    messages = [(dest, (index, seq, i, port, ups))
                for seq, ((dest, i, port), ups) in enumerate(sorted(outbox.items(),
                                                                    key=lambda kv: kv[0]))]
    info = {"moved": worker.routed != routed or bool(incoming), "caps": caps,
            "queued": queued, "sent": sent,
            "counters": [[getattr(op, c) for c in COUNTERS] + [op.trace_records()]
                         for op in worker.ops[0]]}
    return messages, info


def replay(worker: Worker, entry: tuple) -> None:
    """Re-apply a logged superstep (its `step_shard` arguments) to `worker`."""
    step_shard(worker, *entry)


def summary(info: dict, error: bytes | None = None) -> dict:
    """What a shard tells every shard after a superstep (its info less counters)."""
    return {"caps": info["caps"], "queued": info["queued"], "sent": info["sent"],
            "moved": info["moved"], "error": error}


@attrs.frozen
class ShardState:
    """The `"S"` record: a shard's state as the driver and the next superstep see it.

    `frontiers` are the global frontiers this shard computed at its last superstep
    (None at the start of a run); `steps` counts the supersteps it took part in;
    `halted` says the run's verdict is in (done, or `error`, pickled, if a shard
    failed); `tally` counts, over the shard's life, what `TALLY` names;
    `run_from` is the version the shard started the current run at; `trail` has,
    per superstep of the run, whether the shard worked and the records it sent."""

    token: Token
    info: dict = EMPTY_INFO
    frontiers: Any = None
    steps: int = 0
    halted: bool = False
    error: bytes | None = None
    tally: tuple = (0,) * len(TALLY)
    run_from: int | None = None
    trail: tuple = ()


@attrs.frozen
class Stage:
    """What every task of one superstep is told: the plan, where shards are logged,
    the run's input frontiers, the version a changed shard's state gets, and at the
    first superstep of a run (`start`) the summaries the driver holds (`given`: the
    shards' last ones, and under key -1 the times of the updates it injects)."""

    plan: Plan
    shards: int
    log: ShardLog
    inputs: dict
    version: int
    start: bool = False
    importing: bool = False
    given: dict | None = None


class View:
    """The global picture every shard draws from the same summaries: each shard's
    pointstamps (its own, plus the messages in flight to it), the frontiers of every
    node, whether they moved since `last`, whether anything moved at all."""

    def __init__(self, summaries: dict, plan: Plan, shards: int, inputs: dict,
                 last: Any, start: bool) -> None:
        sent_to: dict = {}
        moved = False
        self.error = None
        for src in sorted(summaries):
            p = summaries[src]
            if p.get("error") is not None and self.error is None:
                self.error = p["error"]
            moved = moved or p["moved"] or bool(p["sent"])
            for (dest, i, port), ts in p["sent"].items():
                sent_to.setdefault(dest, {}).setdefault((i, port), []).extend(ts)
        self.plan, self.inputs = plan, inputs
        self.stamps = {s: (summaries[s]["caps"], _merge_queued(summaries[s]["queued"],
                                                               sent_to.get(s, {})))
                       for s in range(shards)}
        caps: dict = {i: list(f) for i, f in inputs.items()}
        queued: dict = {}
        for c, q in self.stamps.values():
            for i, ts in c.items():
                caps.setdefault(i, []).extend(ts)
            for k, ts in q.items():
                queued.setdefault(k, []).extend(ts)
        self.frontiers = plan.frontiers_of(caps, queued)
        self.frontier_moved = start or self.frontiers != last
        self.done = not start and not moved and not self.frontier_moved

    def busy(self, index: int) -> bool:
        """Shard `index` has work of its own: queued batches, or capabilities other
        than its inputs' (which the inputs' frontiers already stand for)."""
        caps, queued = self.stamps[index]
        return bool(queued) or any(i not in self.inputs for i in caps)

    def external(self, index: int) -> dict:
        """The pointstamps held by the shards other than `index`, by location."""
        ports = self.plan.ports
        external: dict = {}
        for s, (caps, queued) in self.stamps.items():
            if s == index:
                continue
            for i, ts in caps.items():
                external.setdefault(i, Counter()).update(ts)
            for (i, port), ts in queued.items():
                external.setdefault(ports[i][port], Counter()).update(ts)
        return external


def shard_superstep(index: int, records: Any, stage: Stage,
                    resident: Resident = RESIDENT) -> Iterator[tuple]:
    """Shard `index`'s superstep: the records addressed to it in, the records it
    sends out (its state, its summary to every shard, its messages)."""
    own, summaries, incoming = None, {}, []
    for _dest, (tag, payload) in records:
        if tag == "M":
            incoming.append(payload)
        elif tag == "P":
            summaries[payload[0]] = payload[1]
        else:
            own = payload
    if own.halted:
        yield (index, ("S", own))
        return
    view = View(stage.given if stage.start else summaries, stage.plan, stage.shards,
                stage.inputs, own.frontiers, stage.start)
    if view.error is not None or view.done:
        yield (index, ("S", attrs.evolve(own, halted=True, error=view.error,
                                         frontiers=view.frontiers)))
        return
    frontiers = None if stage.start else view.frontiers
    if not (incoming or stage.importing or view.busy(index) or view.frontier_moved):
        info = dict(own.info, moved=False, sent={})
        yield (index, ("S", attrs.evolve(own, info=info, frontiers=frontiers,
                                         steps=own.steps + 1,
                                         trail=own.trail + ((False, 0),))))
        yield from _to_all(stage.shards, index, summary(info))
        return
    started = time.perf_counter()
    loaded = stage.log.load(own.token, resident, replay, undo=undo)
    worker, began, token, based = loaded.worker, loaded.began, own.token, 0
    if began != own.run_from:
        # Open undo records of an earlier run: it succeeded (this copy is on the
        # token's chain), they go.  A copy at the run's start records this run's.
        if began is not None:
            worker.commit()
        began = None
        if stage.log.due(token):
            # Compacted while no undo record is open (a base must not carry any).
            blob = dumps(worker)
            token, based = stage.log.compact(token, blob), len(blob)
        if token.version == own.run_from:
            worker.begin()
            began = own.run_from
    incoming.sort(key=lambda m: (m[0], m[1]))
    args = (incoming, stage.inputs, view.external(index), stage.importing, stage.version)
    # Logged before it runs: operators may take the message lists as their own.
    entry = dumps(args)
    try:
        messages, info = step_shard(worker, *args)
    except DataflowError as exc:
        # The run fails (the driver goes back to its start): a copy recording since
        # then is undone and kept; a half-updated one goes.
        if began is not None:
            undo(worker)
            resident.keep(token, worker, version=began)
        payload = _error_payload(exc)
        yield (index, ("S", attrs.evolve(own, halted=True, error=payload,
                                         steps=own.steps + 1,
                                         trail=own.trail + ((True, 0),))))
        yield from _to_all(stage.shards, index, summary(own.info, payload))
        return
    token = stage.log.append(token, stage.version, entry)
    resident.keep(token, worker, began)
    sent = sum(len(m[4]) for _dest, m in messages)
    tally = dict(zip(TALLY, own.tally))
    tally["busy"] += 1
    tally["records_sent"] += sent
    tally["log_bytes"] += len(entry)
    tally["base_bytes"] += based
    tally["seconds"] += time.perf_counter() - started
    tally[loaded.how] += 1
    tally["entries_replayed"] += loaded.replayed
    yield (index, ("S", attrs.evolve(own, token=token, info=info, frontiers=frontiers,
                                     steps=own.steps + 1, tally=tuple(tally.values()),
                                     trail=own.trail + ((True, sent),))))
    yield from _to_all(stage.shards, index, summary(info))
    for dest, m in messages:
        yield (dest, ("M", m))


def undo(worker: Worker) -> None:
    """Undo what the worker's open undo records cover (a failed run's changes)."""
    worker.rollback()


def _to_all(shards: int, src: int, p: dict) -> Iterator[tuple]:
    for dest in range(shards):
        yield (dest, ("P", (src, p)))


def _error_payload(exc: DataflowError) -> bytes:
    # Pickling drops __cause__ (the user's original exception): carry it along.
    cause = exc.__cause__
    try:
        return dumps((exc, cause))
    except Exception:  # noqa: BLE001 - an unpicklable user exception
        return dumps((exc, RuntimeError(repr(cause))))


def raise_error(payload: bytes) -> None:
    """Re-raise, on the driver, the error a shard reported."""
    exc, cause = pickle.loads(payload)
    raise exc from cause


def dumps(obj: Any) -> bytes:
    """Pickle with cloudpickle: a shard's operators hold the user's lambdas."""
    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _merge_queued(queued: dict, extra: dict) -> dict:
    if not extra:
        return queued
    out = {k: list(v) for k, v in queued.items()}
    for k, ts in extra.items():
        out.setdefault(k, []).extend(ts)
    return out
