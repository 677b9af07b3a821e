"""The vertices and edges of a DBSP circuit: nodes, streams, source and trace streams.

What this module isolates: the graph objects a `ddflow.circuit.core.Circuit` is made
of ("Notes on DBSP", sections 2.6 to 2.8): a `Node` of one of the six node types with
its local and global IDs and clock hooks; a `Stream` (an edge: a stream of Z-sets held
by one engine collection, in delta or integral form); a `SourceStream` fed by `push`;
a `TraceStream` (a trace seen `lag` ticks late).  Building and driving them is the
circuit's (`core`); what they compute is the catalogue's.  Invariant: a node is added
only while its root circuit has not ticked (`Circuit.check_building`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ddflow.errors import GraphError

from ddflow.circuit.base import DELTA, INTEGRAL, NODE_KINDS, Hook

# A node's or stream's circuit is a `ddflow.circuit.core.Circuit`, typed `Any` here:
# `core` builds on this module, and importing it back (even for type checking) would
# close an import cycle.
Circuit = Any


class Node:
    """A vertex of a circuit: one of the six node types of the "Notes on DBSP"."""

    def __init__(self, circuit: Circuit, kind: str, name: str,
                 inputs: Iterable[Any] = ()) -> None:
        if kind not in NODE_KINDS:
            raise GraphError(f"unknown node type {kind!r}; expected one of {NODE_KINDS}")
        circuit.check_building()
        self.circuit = circuit
        self.kind = kind
        self.name = name
        self.local_id = len(circuit.nodes)
        self.global_id: tuple[int, ...] = circuit.global_id + (self.local_id,)
        self.inputs: list[Any] = list(inputs)
        self.outputs: list[Any] = []
        self.child: Circuit | None = None      # the subcircuit of a child node
        self.exports: list[Any] = []           # a child node: the inner exported streams
        self.label = name                      # what a drawing writes in the box
        self.start_hooks: list[Hook] = []
        self.stop_hooks: list[Hook] = []
        circuit.nodes.append(self)

    @property
    def depth(self) -> int:
        """How deep the node's circuit is nested: 0 for the root circuit."""
        return self.circuit.depth

    def on_clock_start(self, fn: Hook) -> Node:
        """Call `fn(scope, time)` when a clock this node sees starts a cycle."""
        self.start_hooks.append(fn)
        return self

    def on_clock_stop(self, fn: Hook) -> Node:
        """Call `fn(scope, time)` when a clock this node sees ends a cycle."""
        self.stop_hooks.append(fn)
        return self

    def clock_start(self, scope: int, time: Any) -> None:
        for fn in self.start_hooks:
            fn(scope, time)

    def clock_stop(self, scope: int, time: Any) -> None:
        for fn in self.stop_hooks:
            fn(scope, time)

    def __repr__(self) -> str:
        return f"Node({self.kind}, {self.name!r}, gid={list(self.global_id)})"


class Stream:
    """An edge of a circuit: a stream of Z-sets, one per tick of its circuit's clock.

    `collection` is the engine collection holding it and `form` says how (`DELTA`:
    the Z-set at `t` is the collection's updates at time `t`; `INTEGRAL`: it is the
    collection's accumulation at `t`).  Operators are the functions of
    `ddflow.circuit.catalogue`, which attaches shorthand methods for them here.
    """

    def __init__(self, circuit: Circuit, node: Node, collection: Any, form: str,
                 port: int = 0) -> None:
        if form not in (DELTA, INTEGRAL):
            raise GraphError(f"unknown stream form {form!r}")
        self.circuit = circuit
        self.node = node
        self.port = port
        self.collection = collection
        self.form = form

    def __repr__(self) -> str:
        return (f"Stream({self.node.name!r}, gid={list(self.node.global_id)}, "
                f"form={self.form})")

    # The shorthands `+`, `-`, unary `-`, `map`, `filter`, `index_with`, `distinct`,
    # `delay`, `integrate` and `differentiate` are attached by
    # `ddflow.circuit.catalogue` when it is imported (it builds on this module, so
    # defining them here would import it back).

    def connect(self, stream: Stream) -> Stream:
        """Close a feedback node: this (the feedback's output) is `stream` one clock
        cycle later.  Returns `stream`."""
        if self.node.kind != "feedback":
            raise GraphError(f"connect() is for the output of a feedback node, not of "
                             f"{self.node.kind} node {self.node.name!r}")
        return self.circuit.connect_feedback(self, stream)


class SourceStream(Stream):
    """The output of a source node: what `push` gives at the current tick."""

    def __init__(self, circuit: Circuit, node: Node, session: Any, collection: Any) -> None:
        super().__init__(circuit, node, collection, DELTA)
        self.session = session

    def push(self, data: Any, weight: Any = 1) -> None:
        """Add `data` with `weight` to the Z-set of the current tick."""
        self.session.update_at(data, self.circuit.time, weight)

    def extend(self, zset_: Mapping[Any, Any] | Iterable[tuple]) -> None:
        """Add a Z-set (`{data: weight}` or `(data, weight)` pairs) at the current tick."""
        items = zset_.items() if isinstance(zset_, Mapping) else zset_
        t = self.circuit.time
        self.session.extend((d, t, w) for d, w in items)


class TraceStream:
    """A trace ("Notes on DBSP", 2.3): the updates of `collection` (held in delta
    form) seen `lag` ticks late.  At tick `t` it holds the updates at times `<= t - lag`;
    an operator reads it through its accumulation, the integral-form collection
    `accumulation()` (`lag` z^-1 shifts of `collection`)."""

    def __init__(self, circuit: Circuit, node: Node, collection: Any, lag: int = 0,
                 timed: bool = True, port: int = 0) -> None:
        self.circuit = circuit
        self.node = node
        self.port = port
        self.collection = collection
        self.lag = lag
        self.timed = timed
        self.form = "trace"

    def accumulation(self) -> Any:
        """A collection whose accumulation at `t` is this trace's content at `t`."""
        return self.circuit.shifted(self.collection, self.lag)

    def __repr__(self) -> str:
        return f"TraceStream({self.node.name!r}, gid={list(self.node.global_id)}, lag={self.lag})"


__all__ = ["Node", "Stream", "SourceStream", "TraceStream"]
