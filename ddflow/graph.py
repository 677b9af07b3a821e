"""The graph model: `Graph`, its `Scope`s and `Node`s, and the rewrites engines compile.

This module isolates what a dataflow *is* before anything runs it: a list of nodes in
topological order (feedback edges cut), each an operator described by a factory, in
a scope (the root, or a loop nested in it).  It keeps the graph's invariants while it
is built and rewritten: node order stays topological, a failed build call leaves the
graph as it was (`Graph.building`), a loop that has run takes no more nodes.  It
leaves out running (the engines, `ddflow.engine`) and the fluent API that builds the
graph (`ddflow.collection`): both import it, it imports neither.

As in timely dataflow, where the builder of scopes and edges (`progress/subgraph.rs`,
`reachability.rs`'s `Builder`) lives in the runtime below the collection API, the
graph's rewrites live here too: `prepare` (refuse unset variables, fuse linear
chains) before the first compile, `grow` (wire nodes added after a run into the
running graph, re-deriving what they read) before each later one.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

import attrs

from lattice import Product, minimum
from ddflow import arguments
from ddflow.errors import GraphError


class Graph:
    """Nodes in topological order, their scopes, and the undo of a failed build.

    `time` is the least time of the root lattice; `fuse` whether `prepare` fuses
    adjacent linear operators.  `Dataflow` is a `Graph` with sessions, captures and
    an engine."""

    def __init__(self, time: Any, fuse: bool = True) -> None:
        self.time = time
        self.fuse = fuse
        self.nodes: list[Node] = []
        self.root = Scope(self, None, "root")
        #: The join of the inputs' times at the end of the last run: what a piece
        #: added afterwards starts from (see `grow`).
        self.time_ran: Any = None
        self._ids = 0
        self._undo: list[Callable[[], None]] | None = None

    def next_id(self) -> int:
        """A fresh node id (ids are handed back by a failed `building` block)."""
        self._ids += 1
        return self._ids - 1

    def check_building(self, scope: Scope | None = None) -> None:
        """Refuse a node inside a loop that has run."""
        # A dataflow grows after run() (see `grow`), but a loop that has run is closed:
        # its rounds are under way, so build a new iterate over its result instead.
        if scope is not None and scope.parent is not None and scope.running:
            raise GraphError(f"the loop {scope.name!r} has already run, so nothing can be "
                             "added inside it: build a new iterate() over its result, or "
                             "over the collections it read", operator=scope.name)

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """Undo every node added inside the block if it raises: a failed build call
        (a bad argument found after an arrangement was made, a failing `iterate`
        body) leaves the graph exactly as it was.  Every builder of the fluent API
        runs inside one (`ddflow.collection._builder`); nested blocks leave the undo
        to the outermost.  What else a build call changed registers its own undo
        with `on_undo`."""
        if self._undo is not None:
            yield
            return
        mark, ids = len(self.nodes), self._ids
        self._undo = []
        try:
            yield
        except BaseException:
            added = set(map(id, self.nodes[mark:]))
            del self.nodes[mark:]
            self._ids = ids
            for node in self.nodes:
                node.consumers = [(c, p) for c, p in node.consumers if id(c) not in added]
                if node.kind == "feedback":     # a Variable set inside the block
                    node.inputs = [p for p in node.inputs if id(p) not in added]
            for undo in reversed(self._undo):
                undo()
            raise
        finally:
            self._undo = None

    def on_undo(self, undo: Callable[[], None]) -> None:
        """Call `undo` if the `building` block open now fails (nothing outside one)."""
        if self._undo is not None:
            self._undo.append(undo)

    def mark_running(self) -> None:
        """Every scope of the graph has run: nothing more goes inside a loop."""
        for node in self.nodes:
            node.scope.running = True


class Scope:
    """A timestamp domain: the root, or a loop nested in a parent scope."""

    def __init__(self, dataflow: Graph, parent: Scope | None, name: str,
                 max_rounds: int | None = None, on_limit: str = "raise") -> None:
        if max_rounds is not None:
            max_rounds = arguments.positive_int(max_rounds, "max_rounds", operator=name)
        if on_limit not in ("raise", "truncate"):
            raise GraphError(f"on_limit must be 'raise' or 'truncate', not {on_limit!r}",
                             operator=name)
        self.dataflow = dataflow
        self.parent = parent
        self.name = name
        self.max_rounds = max_rounds
        self.on_limit = on_limit
        self.minimum = (minimum(dataflow.time) if parent is None
                        else Product(parent.minimum, 0))
        self.depth = 0 if parent is None else parent.depth + 1
        self.running = False            # compiled into a run: nothing more goes inside

    def __repr__(self) -> str:
        return f"Scope({self.name!r})"


class Node:
    """One operator of the graph, as described: engines instantiate it once per shard
    (worker) with `factory(shard, lookup)` and keep the instances themselves."""

    def __init__(self, dataflow: Graph, scope: Scope, name: str, kind: str,
                 inputs: Sequence[Node], factory: Callable[[int, Callable], Any],
                 exchange: Callable[[Any], Any] | None = None) -> None:
        dataflow.check_building(scope)
        arguments.name(name, kind)
        for p in inputs:
            if p.dropped:
                raise GraphError(f"'{p.name}' was dropped from the dataflow (drop()): build "
                                 "on a collection that is still running", operator=name)
        self.dataflow = dataflow
        self.id = dataflow.next_id()
        # An input, or an arrangement of the root scope: something an operator added
        # after `run()` can import whole (its compacted contents) rather than re-derive.
        self.importable = scope.parent is None and kind in ("input", "arrange")
        self.dropped = False
        self.scope = scope
        self.name = name
        self.kind = kind
        self.inputs: list[Node] = list(inputs)
        self.factory = factory
        self.exchange = exchange
        self.consumers: list[tuple[Node, int]] = []
        self.stages: list = []
        #: The operators the user called that read this node (an arrangement made
        #: for a join or a reduce): errors about its records name them.
        self.users: list[str] = []
        #: Set by `ddflow.query` on the output of a worst-case optimal plan: the
        #: conjunctive query it computes over its sources (`query.Conjunctive`), which
        #: explanations read as one operator (its inner half joins have no rule).
        self.conjunctive: Any = None
        for port, producer in enumerate(self.inputs):
            producer.consumers.append((self, port))
        dataflow.nodes.append(self)

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.name!r})"

    @property
    def blame(self) -> str:
        """The name errors give this node: an arrangement goes by its readers'
        (the operators the user called), the node's own name otherwise."""
        return "/".join(self.users) if self.users else self.name


# -- the rewrites --------------------------------------------------------------------

def cone(node: Node) -> list[Node]:
    """The nodes `node` reads from, directly or not (through loop feedback too),
    itself included, in the graph's order."""
    seen = {id(node)}
    stack = [node]
    while stack:
        n = stack.pop()
        for p in n.inputs:
            if id(p) not in seen:
                seen.add(id(p))
                stack.append(p)
    return [n for n in node.dataflow.nodes if id(n) in seen]


def prepare(graph: Graph, start: int = 0) -> None:
    """What the front door does to its graph before compiling it: refuse an unset
    Variable (before touching anything), then fuse linear chains if asked.  With
    `start`, only the nodes from `start` on are new (a growing dataflow): the
    running ones are left as they are."""
    _remove_dropped(graph, start)
    for node in graph.nodes[start:]:
        if node.kind == "feedback" and not node.inputs:
            raise GraphError(f"Variable '{node.name}' was never set()", operator=node.name)
    if graph.fuse:
        _fuse_linear(graph, start)


def _fuse_linear(graph: Graph, start: int = 0) -> None:
    """Merge each linear node into its sole linear consumer (the `followed_by` of
    McSherry's "Generalizing linear operators"), among the nodes from `start` on."""
    kept = []
    new = {id(n) for n in graph.nodes[start:]}
    for node in graph.nodes[start:]:
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
    graph.nodes[start:] = kept


def _remove_dropped(graph: Graph, start: int) -> None:
    """Nodes dropped before they ever ran simply leave the graph."""
    gone = [n for n in graph.nodes[start:] if n.dropped]
    for n in gone:
        for p in n.inputs:
            p.consumers = [(c, q) for c, q in p.consumers if c is not n]
    if gone:
        ids = {id(n) for n in gone}
        graph.nodes[start:] = [n for n in graph.nodes[start:] if id(n) not in ids]


@attrs.frozen
class Growth:
    """What joins a running dataflow at a `run()`: the nodes from `start` on, and the
    edges along which running operators hand their contents to new ones."""

    start: int
    added: frozenset            # the new nodes (re-derived copies included)
    imports: tuple              # (producer index, consumer index, port), producer running
    time: Any                   # contents are handed over advanced to this time
    dropped: tuple              # indices of running nodes taken out (`Dataflow.drop`)


def grow(graph: Graph, start: int) -> Growth:
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
    the last run (`Graph.time_ran`): every time a new output answers for is in
    advance of it, so compaction up to there is invisible.
    """
    _remove_dropped(graph, start)
    new = graph.nodes[start:]
    running = {id(n): i for i, n in enumerate(graph.nodes[:start])}
    rederive: dict[int, Any] = {}
    stack = [p for n in new for p in n.inputs if id(p) in running and not p.importable]
    while stack:
        p = stack.pop()
        if id(p) in rederive:
            continue
        rederive[id(p)] = p
        stack.extend(q for q in p.inputs if not q.importable)
    copies = _copy_nodes(graph, [n for n in graph.nodes[:start] if id(n) in rederive])
    for node in new:
        _read_copies(node, copies)
    graph.nodes[start:start] = [copies[id(n)] for n in graph.nodes[:start] if id(n) in copies]
    prepare(graph, start)
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    imports = tuple((index[id(p)], index[id(n)], port)
                    for n in graph.nodes[start:] for port, p in enumerate(n.inputs)
                    if index[id(p)] < start)
    dropped = tuple(i for i, n in enumerate(graph.nodes[:start]) if n.dropped)
    for i in dropped:
        n = graph.nodes[i]
        for p in n.inputs:
            p.consumers = [(c, q) for c, q in p.consumers if c is not n]
        n.inputs, n.consumers = [], []
    return Growth(start, frozenset(graph.nodes[start:]), imports, graph.time_ran, dropped)


def _copy_nodes(graph: Graph, originals: list) -> dict[int, Node]:
    """New nodes doing what `originals` do, reading each other where the originals
    read each other (and looking each other up: a join finds the copy of its
    arrangement).  A loop is copied whole, into a new scope of the same name."""
    scopes: dict[int, Scope] = {}

    def scope_of(s: Scope) -> Scope:
        if s.parent is None:
            return s
        if id(s) not in scopes:
            scopes[id(s)] = Scope(graph, scope_of(s.parent), s.name, s.max_rounds,
                                  s.on_limit)
        return scopes[id(s)]

    copies: dict[int, Node] = {}
    for n in originals:
        c = Node(graph, scope_of(n.scope), n.name, n.kind, [], n.factory, n.exchange)
        graph.nodes.remove(c)           # placed by the caller
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


def _read_copies(node: Node, copies: dict[int, Node]) -> None:
    """Make a new node read (and look up) the copies instead of the running nodes."""
    for port, p in enumerate(node.inputs):
        c = copies.get(id(p))
        if c is not None:
            p.consumers = [(x, q) for x, q in p.consumers if not (x is node and q == port)]
            node.inputs[port] = c
            c.consumers.append((node, port))
    node.factory = _redirected(node.factory, copies)


def _redirected(factory: Callable, copies: dict[int, Node]) -> Callable:
    if not copies:
        return factory
    return lambda shard, lookup: factory(shard, lambda n: lookup(copies.get(id(n), n)))


__all__ = ["Graph", "Growth", "Node", "Scope", "grow", "prepare"]
