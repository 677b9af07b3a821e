"""The compiled plan: the one contract between the front door and every engine.

A `Plan` is the static, picklable description of a dataflow graph: for each node its
producers, its consumers (with the exchange function that shards the records they
receive), its number of input ports and its progress `Summary`; and, computed once
here, what progress tracking needs: the least path summaries between all places of
the graph (`Tracker`), or, for a large graph, its components (`EdgeTracker`, which
builds its own linear table of hops: see `set_tracking`).  Engines instantiate
operators from the graph's node factories (`ddflow.graph`, which also holds the
rewrites done before compiling: `prepare`, `grow`) and run them over a plan; they
never read or write the front door's objects beyond that.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import attrs

from lattice import Antichain
from ddflow.graph import Growth
from ddflow.progress import Tracker
from ddflow.progress_edges import EdgeTracker
from ddflow.summaries import (Summary, components, consumers_of, path_summaries,
                              port_numbers, reach_size)
from operators.base import Operator


#: Which progress tracker a plan gets (`set_tracking`): "paths" (`Tracker`: a change
#: goes straight to the ports it reaches, along path summaries between all pairs of
#: places, which take time and memory quadratic in the graph to build; the cheaper
#: per change on small graphs), "edges" (`EdgeTracker`: a change hops between the
#: ports that keep a frontier, a table linear in the graph), or "auto": paths while
#: their table has at most `PATHS_UP_TO` (location, port) pairs (`reach_size`; ~1 us
#: of build each), edges above.  Small graphs keep the paths tracker, the cheaper per
#: change (a one-edge reachability epoch takes 1.4-2x as long with the edge
#: tracker); a large table is both slow to build and slow per change (a change
#: touches every watched port it reaches).  benchmarks/bench_progress.py measures
#: both.
_tracking = "auto"
PATHS_UP_TO = 250_000


def set_tracking(mode: str) -> str:
    """Choose the tracker of the plans compiled from now on ("auto", "paths" or
    "edges"); the previous choice."""
    global _tracking
    if mode not in ("auto", "paths", "edges"):
        raise ValueError(f"tracking is 'auto', 'paths' or 'edges', not {mode!r}")
    old, _tracking = _tracking, mode
    return old


def tracking_for(inputs: Sequence[Sequence[int]],
                 found: Sequence[Sequence[int]] | None = None) -> str:
    """The tracker the graph of these producers (node -> its inputs) gets now:
    "paths" or "edges" (`found`: its `components`, if known)."""
    if _tracking == "auto":
        small = reach_size(inputs, PATHS_UP_TO, found) <= PATHS_UP_TO
        return "paths" if small else "edges"
    return _tracking


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
    reach: tuple | None     # location -> ((port, least summaries), ...); None: edges
    watched: tuple          # node -> whether anyone reads its input frontier
    cyclic: tuple           # node -> whether its output reaches its input (a loop)
    components: tuple       # the graph's strongly connected components, downstream first

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
        consumers = consumers_of(inputs)
        found = tuple(tuple(c) for c in components(len(nodes), consumers))
        reach = (tuple(tuple(r) for r in path_summaries(inputs, summaries))
                 if tracking_for(inputs, found) == "paths" else None)
        cyclic = [False] * len(nodes)
        for component in found:
            for j in component:
                cyclic[j] = len(component) > 1 or any(c == j for _p, c in consumers[j])
        return cls(plan_nodes, tuple(port_numbers(inputs)), reach,
                   tuple(watched) if watched is not None else (True,) * len(nodes),
                   tuple(cyclic), found)

    @classmethod
    def of_operators(cls, nodes: Sequence[Any], ops: Sequence[Any]) -> Plan:
        """The plan of `nodes`, taking summaries and frontier readers from one shard's
        operator instances."""
        return cls.of(nodes, [op.summary for op in ops], [op.reads_frontier() for op in ops])

    def tracker(self) -> Tracker | EdgeTracker:
        if self.reach is None:
            return EdgeTracker([pn.inputs for pn in self.nodes],
                               [pn.summary for pn in self.nodes], self.watched,
                               self.components)
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


def instantiate(nodes: Sequence[Any], shard: int, running: Sequence[Any] = (),
                growth: Growth | None = None) -> list:
    """One shard's operator instances, built by the nodes' factories (a factory may
    look up the instance of an earlier node of the same shard, say its arrangement).

    For a growing dataflow, `running` are the shard's instances of the nodes before
    `growth.start`, kept as they are; those of dropped nodes let go of what they read
    and are replaced by an inert `Dropped`."""
    index = {id(n): i for i, n in enumerate(nodes)}
    ops: list = list(running)
    if growth is not None:
        for i in growth.dropped:
            ops[i].release()
            ops[i] = Dropped(nodes[i].name)
    lookup: Callable[[Any], Any] = lambda n: ops[index[id(n)]]  # noqa: E731
    for node in nodes[len(ops):]:
        op = node.factory(shard, lookup)
        # Who made what reaches it: an operator that finds a record unusable (say
        # unhashable) blames the producer when it only passes records on.
        op.producers = tuple(p.name for p in node.inputs)
        ops.append(op)
    return ops


class Dropped(Operator):
    """What is left of an operator its dataflow dropped: nothing."""

    def reads_frontier(self) -> bool:
        return False
