"""The compiled plan: the one contract between the front door and every engine.

A `Plan` is the static, picklable description of a dataflow graph: for each node its
producers, its consumers (with the exchange function that shards the records they
receive), its number of input ports and its progress `Summary`; and, computed once
here, the least path summaries between all places of the graph, which progress
tracking pushes pointstamp changes along.  Engines instantiate operators from the
front door's node factories and run them over a plan; they never read or write the
front door's objects beyond that.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import attrs

from lattice import Antichain
from ddflow.errors import GraphError
from ddflow.progress import Summary, Tracker, path_summaries, port_numbers


@attrs.frozen
class PlanNode:
    index: int
    name: str
    kind: str
    inputs: tuple           # producer indices, one per port
    consumers: tuple        # ((consumer index, port, exchange or None, name errors give it), ...)
    n_ports: int
    summary: Summary


@attrs.frozen
class Plan:
    nodes: tuple
    ports: tuple            # node -> location numbers of its input ports
    reach: tuple            # location -> ((port, least summaries), ...)
    watched: tuple          # node -> whether anyone reads its input frontier

    @classmethod
    def of(cls, nodes: Sequence[Any], summaries: Sequence[Summary],
           watched: Sequence[bool] | None = None) -> Plan:
        """The plan of front-door `nodes`, with each node's operator `summaries`, and
        which of them read their frontier (default: all)."""
        index = {id(n): i for i, n in enumerate(nodes)}
        inputs = [tuple(index[id(p)] for p in n.inputs) for n in nodes]
        plan_nodes = tuple(
            PlanNode(i, n.name, n.kind, inputs[i],
                     tuple((index[id(c)], port, c.exchange, getattr(c, "blame", c.name))
                           for c, port in n.consumers),
                     max(1, len(n.inputs)), summaries[i])
            for i, n in enumerate(nodes))
        reach = path_summaries(inputs, summaries)
        return cls(plan_nodes, tuple(port_numbers(inputs)),
                   tuple(tuple(r) for r in reach),
                   tuple(watched) if watched is not None else (True,) * len(nodes))

    @classmethod
    def of_operators(cls, nodes: Sequence[Any], ops: Sequence[Any]) -> Plan:
        """The plan of `nodes`, taking summaries and frontier readers from one shard's
        operator instances."""
        return cls.of(nodes, [op.summary for op in ops], [op.reads_frontier() for op in ops])

    def tracker(self) -> Tracker:
        return Tracker(self.ports, self.reach, self.watched)

    def frontiers_of(self, caps: dict, queued: dict) -> list[tuple[Antichain, ...]]:
        """Every node's input frontiers given pointstamps from anywhere: `caps[i]`
        times at node `i`'s output, `queued[(i, port)]` times at its input port."""
        tracker = self.tracker()
        for i, times in caps.items():
            for t in times:
                tracker.update(i, t, 1)
        for (i, port), times in queued.items():
            for t in times:
                tracker.update(self.ports[i][port], t, 1)
        tracker.propagate()
        return [tracker.frontiers(pn.index) for pn in self.nodes]


def instantiate(nodes: Sequence[Any], shard: int) -> list:
    """One shard's operator instances, built by the nodes' factories (a factory may
    look up the instance of an earlier node of the same shard, say its arrangement)."""
    index = {id(n): i for i, n in enumerate(nodes)}
    ops: list = []
    lookup: Callable[[Any], Any] = lambda n: ops[index[id(n)]]  # noqa: E731
    for node in nodes:
        op = node.factory(shard, lookup)
        # Who made what reaches it: an operator that finds a record unusable (say
        # unhashable) blames the producer when it only passes records on.
        op.producers = tuple(p.name for p in node.inputs)
        ops.append(op)
    return ops


def prepare(df: Any) -> None:
    """What the front door does to its graph before the first compile: refuse an unset
    Variable (before touching anything), then fuse linear chains if asked."""
    for node in df.nodes:
        if node.kind == "feedback" and not node.inputs:
            raise GraphError(f"Variable '{node.name}' was never set()", operator=node.name)
    if df.fuse:
        _fuse_linear(df)


def _fuse_linear(df: Any) -> None:
    """Merge each linear node into its sole linear consumer (the `followed_by` of
    McSherry's "Generalizing linear operators")."""
    kept = []
    for node in df.nodes:
        if node.kind == "linear" and len(node.inputs) == 1:
            producer = node.inputs[0]
            if (producer.kind == "linear" and producer.scope is node.scope
                    and len(producer.consumers) == 1 and len(producer.inputs) == 1):
                node.stages = producer.stages + node.stages
                node.name = f"{producer.name}>{node.name}"
                source = producer.inputs[0]
                node.inputs = [source]
                source.consumers = [(node, 0) if c is producer else (c, p)
                                    for c, p in source.consumers]
                kept.remove(producer)
        kept.append(node)
    df.nodes[:] = kept
