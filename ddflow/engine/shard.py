"""One shard of a dataflow, runnable on its own: what the Spark engine puts in a partition.

A `Plan` is the static, picklable description of the graph (for each node: its inputs,
its consumers with their exchange functions, its number of ports).  A `ShardState` holds
one shard's operator instances, their input queues and the frontiers they last saw.

`superstep` runs passes over one shard until nothing more can happen *locally*:
messages to other shards go to an outbox, delivered at the next superstep.  Its
frontiers are conservative: the pointstamps of the other shards as they were at the
start of the superstep (they can only have moved forward since, and anything they
send us stems from them), plus this shard's live pointstamps, plus the messages it
has sent and not yet delivered.  So a shard may run many passes (a whole key-local
fixpoint) in one Spark job, and never treats a time as complete too early.

`split_by_shard` is the exchange itself, shared with the local engine.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import attrs

from lattice import Antichain
from ddflow.errors import DataError
from ddflow.progress import input_frontiers
from ddflow.sharding import shard_of


def visit(op: Any, queues: list[list], frontier: Any, last_frontier: Any) -> bool:
    """One operator's turn in a pass: deliver its queued batches, then tell it the
    frontier if it received any or the frontier moved.  Whether it received any."""
    had = False
    for port, q in enumerate(queues):
        if q:
            queues[port] = []
            op.on_input(port, q)
            had = True
    if had or frontier != last_frontier:
        op.on_frontier(frontier)
    return had


def split_by_shard(updates: list, exchange: Callable[[Any], Any], shards: int,
                   consumer: str) -> dict[int, list]:
    """Group `updates` by the shard owning `exchange(data)`."""
    out: dict[int, list] = {}
    for u in updates:
        try:
            key = exchange(u[0])
        except Exception as exc:  # noqa: BLE001 - a record of the wrong shape
            raise DataError(f"{consumer} needs (key, value) pairs ({exc})",
                            operator=consumer, record=u[0], time=u[1]) from exc
        dest = shard_of(key, shards)
        bucket = out.get(dest)
        if bucket is None:
            out[dest] = [u]
        else:
            bucket.append(u)
    return out


@attrs.frozen
class PlanNode:
    index: int
    name: str
    kind: str
    inputs: tuple
    consumers: tuple        # ((consumer index, port, exchange or None, consumer name), ...)
    n_ports: int


@attrs.frozen
class Plan:
    nodes: tuple

    @classmethod
    def of(cls, nodes: Sequence[Any]) -> Plan:
        index = {id(n): i for i, n in enumerate(nodes)}
        return cls(tuple(
            PlanNode(i, n.name, n.kind, tuple(index[id(p)] for p in n.inputs),
                     tuple((index[id(c)], port, c.exchange, c.name) for c, port in n.consumers),
                     max(1, len(n.inputs)))
            for i, n in enumerate(nodes)))


class ShardState:
    """One shard's operators, their queues, and the frontiers they last saw."""

    def __init__(self, ops: list, plan: Plan) -> None:
        self.ops = ops
        self.queues = [[[] for _ in range(pn.n_ports)] for pn in plan.nodes]
        self.last: list = [None] * len(ops)


class _Proxy:
    """A node as progress tracking sees it, from summaries instead of live operators."""

    __slots__ = ("inputs", "caps", "queued", "op")

    def __init__(self, op: Any, caps: list, queued: list) -> None:
        self.inputs: list = []
        self.op, self.caps, self.queued = op, caps, queued

    def capabilities(self) -> list:
        return self.caps

    def queued_times(self, port: int) -> list:
        return self.queued[port]

    def summary(self, frontier: Antichain) -> Antichain:
        return self.op.summary(frontier)


def frontiers_from(plan: Plan, ops: Sequence[Any], caps: dict, queued: dict) -> list:
    """Input frontiers per node from pointstamps: `caps[i]` times, `queued[(i, port)]` times."""
    proxies = [_Proxy(ops[pn.index], list(caps.get(pn.index, ())),
                      [list(queued.get((pn.index, p), ())) for p in range(pn.n_ports)])
               for pn in plan.nodes]
    for pn, proxy in zip(plan.nodes, proxies):
        proxy.inputs = [proxies[i] for i in pn.inputs]
    ins = input_frontiers(proxies)
    return [ins[p] for p in proxies]


def pointstamps(state: ShardState, outbox: dict | None = None) -> tuple[dict, dict]:
    """This shard's capabilities and queued/in-flight message times, as antichains."""
    caps = {}
    for i, op in enumerate(state.ops):
        c = list(op.capabilities())
        if c:
            caps[i] = c
    queued: dict = {}
    for i, qs in enumerate(state.queues):
        for port, q in enumerate(qs):
            if q:
                queued.setdefault((i, port), []).extend(u[1] for u in q)
    for (_dest, i, port), msgs in (outbox or {}).items():
        queued.setdefault((i, port), []).extend(u[1] for u in msgs)
    return ({i: list(Antichain(ts)) for i, ts in caps.items()},
            {k: list(Antichain(ts)) for k, ts in queued.items()})


def superstep(state: ShardState, plan: Plan, shard: int, shards: int,
              others_caps: dict, others_queued: dict) -> tuple[dict, bool]:
    """Run passes on this shard until it is locally quiescent.

    Returns the outbox `{(dest shard, node, port): updates}` and whether anything moved.
    """
    outbox: dict = {}
    moved_any = False
    last = None
    while True:
        caps, queued = pointstamps(state, outbox)
        for i, ts in others_caps.items():
            caps[i] = caps.get(i, []) + list(ts)
        for k, ts in others_queued.items():
            queued[k] = queued.get(k, []) + list(ts)
        frontiers = frontiers_from(plan, state.ops, caps, queued)
        moved = False
        for pn in plan.nodes:
            i = pn.index
            op, fr = state.ops[i], frontiers[i]
            had = visit(op, state.queues[i], fr, state.last[i])
            state.last[i] = fr
            if op._out:
                _route(pn, op.take_output(), state, shard, shards, outbox)
                moved = True
            moved = moved or had
        moved_any = moved_any or moved
        if not moved and frontiers == last:
            return outbox, moved_any
        last = frontiers


def _route(pn: PlanNode, updates: list, state: ShardState, shard: int, shards: int,
           outbox: dict) -> None:
    for j, port, exchange, name in pn.consumers:
        if exchange is None or shards == 1:
            state.queues[j][port].extend(updates)
            continue
        for dest, part in split_by_shard(updates, exchange, shards, name).items():
            if dest == shard:
                state.queues[j][port].extend(part)
            else:
                outbox.setdefault((dest, j, port), []).extend(part)

