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
from operators.base import Operator


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


def prepare(df: Any, start: int = 0) -> None:
    """What the front door does to its graph before compiling it: refuse an unset
    Variable (before touching anything), then fuse linear chains if asked.  With
    `start`, only the nodes from `start` on are new (a growing dataflow): the
    running ones are left as they are."""
    _remove_dropped(df, start)
    for node in df.nodes[start:]:
        if node.kind == "feedback" and not node.inputs:
            raise GraphError(f"Variable '{node.name}' was never set()", operator=node.name)
    if df.fuse:
        _fuse_linear(df, start)


def _fuse_linear(df: Any, start: int = 0) -> None:
    """Merge each linear node into its sole linear consumer (the `followed_by` of
    McSherry's "Generalizing linear operators"), among the nodes from `start` on."""
    kept = []
    new = {id(n) for n in df.nodes[start:]}
    for node in df.nodes[start:]:
        if node.kind == "linear" and len(node.inputs) == 1:
            producer = node.inputs[0]
            if (id(producer) in new and producer.kind == "linear"
                    and producer.scope is node.scope
                    and len(producer.consumers) == 1 and len(producer.inputs) == 1):
                node.stages = producer.stages + node.stages
                node.name = f"{producer.name}>{node.name}"
                source = producer.inputs[0]
                node.inputs = [source]
                source.consumers = [(node, 0) if c is producer else (c, p)
                                    for c, p in source.consumers]
                kept.remove(producer)
        kept.append(node)
    df.nodes[start:] = kept


def _remove_dropped(df: Any, start: int) -> None:
    """Nodes dropped before they ever ran simply leave the graph."""
    gone = [n for n in df.nodes[start:] if n.dropped]
    for n in gone:
        for p in n.inputs:
            p.consumers = [(c, q) for c, q in p.consumers if c is not n]
    if gone:
        ids = {id(n) for n in gone}
        df.nodes[start:] = [n for n in df.nodes[start:] if id(n) not in ids]


@attrs.frozen
class Growth:
    """What joins a running dataflow at a `run()`: the nodes from `start` on, and the
    edges along which running operators hand their contents to new ones."""

    start: int
    added: frozenset            # the new nodes (re-derived copies included)
    imports: tuple              # (producer index, consumer index, port), producer running
    time: Any                   # contents are handed over advanced to this time
    dropped: tuple              # indices of running nodes taken out (`Dataflow.drop`)


def grow(df: Any, start: int) -> Growth:
    """Wire the nodes built since the last run (from `start` on) into the running graph.

    A new operator reading a running collection needs that collection's contents so
    far.  An input or a root-scope arrangement has them (`importable`): the edge from
    it becomes an import.  Any other running collection is re-derived: its operators,
    back to the nearest importable ancestors, are copied as new nodes (a loop whole),
    and the new operator reads the copy.  The copies are placed before the new nodes,
    so node order stays topological.

    This is the trace import of McSherry et al., "Shared arrangements: practical
    inter-query sharing for streaming dataflows" (VLDB 2020), in a simulator's terms.
    Contents are handed over advanced to the join of the inputs' times at the end of
    the last run (`Dataflow.time_ran`): every time a new output answers for is in
    advance of it, so compaction up to there is invisible.
    """
    _remove_dropped(df, start)
    new = df.nodes[start:]
    running = {id(n): i for i, n in enumerate(df.nodes[:start])}
    rederive: dict[int, Any] = {}
    stack = [p for n in new for p in n.inputs if id(p) in running and not p.importable]
    while stack:
        p = stack.pop()
        if id(p) in rederive:
            continue
        rederive[id(p)] = p
        stack.extend(q for q in p.inputs if not q.importable)
    copies = _copy_nodes(df, [n for n in df.nodes[:start] if id(n) in rederive])
    for node in new:
        _read_copies(node, copies)
    df.nodes[start:start] = [copies[id(n)] for n in df.nodes[:start] if id(n) in copies]
    prepare(df, start)
    index = {id(n): i for i, n in enumerate(df.nodes)}
    imports = tuple((index[id(p)], index[id(n)], port)
                    for n in df.nodes[start:] for port, p in enumerate(n.inputs)
                    if index[id(p)] < start)
    dropped = tuple(i for i, n in enumerate(df.nodes[:start]) if n.dropped)
    for i in dropped:
        n = df.nodes[i]
        for p in n.inputs:
            p.consumers = [(c, q) for c, q in p.consumers if c is not n]
        n.inputs, n.consumers = [], []
    return Growth(start, frozenset(df.nodes[start:]), imports, df.time_ran, dropped)


def _copy_nodes(df: Any, originals: list) -> dict[int, Any]:
    """New nodes doing what `originals` do, reading each other where the originals
    read each other (and looking each other up: a join finds the copy of its
    arrangement).  A loop is copied whole, into a new scope of the same name."""
    from ddflow.dataflow import Node, Scope
    scopes: dict[int, Any] = {}

    def scope_of(s: Any) -> Any:
        if s.parent is None:
            return s
        if id(s) not in scopes:
            scopes[id(s)] = Scope(df, scope_of(s.parent), s.name, s.max_rounds, s.on_limit)
        return scopes[id(s)]

    copies: dict[int, Any] = {}
    for n in originals:
        c = Node(df, scope_of(n.scope), n.name, n.kind, [], n.factory, n.exchange)
        df.nodes.remove(c)              # placed by the caller
        c.stages = list(n.stages)
        c.users = list(n.users)         # errors name the operators the user called
        copies[id(n)] = c
    for n in originals:
        c = copies[id(n)]
        for port, p in enumerate(n.inputs):
            source = copies.get(id(p), p)
            c.inputs.append(source)
            source.consumers.append((c, port))
        c.factory = _redirected(n.factory, copies)
    return copies


def _read_copies(node: Any, copies: dict[int, Any]) -> None:
    """Make a new node read (and look up) the copies instead of the running nodes."""
    for port, p in enumerate(node.inputs):
        c = copies.get(id(p))
        if c is not None:
            p.consumers = [(x, q) for x, q in p.consumers if not (x is node and q == port)]
            node.inputs[port] = c
            c.consumers.append((node, port))
    node.factory = _redirected(node.factory, copies)


def _redirected(factory: Callable, copies: dict[int, Any]) -> Callable:
    if not copies:
        return factory
    return lambda shard, lookup: factory(shard, lambda n: lookup(copies.get(id(n), n)))
