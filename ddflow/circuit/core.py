"""Circuits, nodes, streams and the clock driver: seed 002's runtime, compiled onto the engine.

What this module isolates: the *shape* of a DBSP circuit (seed 002, sections 2.6 to 2.8)
and how it is compiled to a `ddflow.Dataflow`.  It computes nothing itself: every stream
is an engine `Collection`, every operator an engine operator (`ddflow.circuit.catalogue`
wires them).  Left out: operators of its own, a scheduler of its own, and any root
lattice but the ints (the root clock counts ticks).

Node types (seed 002, 2.8), each with a local ID (its index in its circuit's `nodes`)
and a global ID (the path of local IDs from the root):

========  ======  =======  ==============================================================
type      inputs  outputs  compiled to
========  ======  =======  ==============================================================
source    0       1        an `InputSession` and its collection (root circuit only)
operator  N       1        engine operators (`ddflow.circuit.catalogue`)
child     0       N        a nested engine `Scope` (times `Product(epoch, iteration)`)
import    1       1        `Collection.enter` of a parent stream into the child
feedback  1       1        a `Variable` in a child (one iteration later); at the root the
                           driver's z^-1 (below)
sink      N       0        `Collection.capture` at the root; a recording `inspect` in a
                           child (the engine captures only root collections)
========  ======  =======  ==============================================================

A child's outputs are the streams it `export`s: `Collection.leave`, which sums a
stream over the iterations of each epoch (seed 002's consolidate "used to export the
results of a recursive subcircuit to the parent").

The invariant kept: the graph of engine nodes is built once, before the first `tick`
(the engine's own rule), and every `tick` completes exactly one root time.

Clock hooks (seed 002, 2.6): every node has `on_clock_start(fn)` / `on_clock_stop(fn)`;
`fn(scope, time)` is called with `scope` the number of levels from the node's own
circuit up to the circuit whose clock moved (0: its own clock; a node in a child gets
1 for a root tick) and that clock's time.

* Root ticks: the driver fires every node's start hook before the tick's `run()` and
  every stop hook after it, when time `t` is complete everywhere (exact).
* Iterations of a child (scope 0 inside it): the engine runs a whole loop inside one
  `run()`, so the driver cannot stand between two iterations.  Each child gets an
  iteration clock: an engine `inspect` on the meet of its import and feedback
  streams, seeing each change that passes and (`on_frontier`) the frontier there.
  `clock_start(0, (e, i))` fires when a change at `(e, i)` passes or the frontier
  reaches `(e, i)`, `clock_stop(0, (e, i))` once the frontier has passed it, one
  iteration open at a time, interleaved with the loop's work.  This is faithful in
  order and count (every tick starts at iteration 0; iterations the clock jumps over
  are filled in, so a child of the root reports iterations 0, 1, ..., k of each
  epoch) but it is not a barrier: stop(0, (e, i)) means no more change at iteration
  `<= i` reaches the child's feedback and import edges, while an operator downstream
  of them may still be finishing iteration `i`.

z^-1 at the root: the engine has no operator that *adds* to a time (`join_function`
lattice-joins times, `join(t, 1)` is `max(t, 1)`, not `t + 1`; only a loop's
`Feedback` adds one, to the iteration).  So the driver carries root delays: a capture
on the delayed collection, whose updates at `t` the driver feeds into an input session
at `t + 1` at the end of tick `t`.  Since those updates wait outside the engine until
the next tick, a root feedback edge (a cycle through z^-1, as in DBSP's integrator
`I(s) = s + z^-1(I(s))`) is allowed.  The engine change that would make this native is
a time-advancing linear operator (timely dataflow's `delay`): see
`tests/ddflow/test_circuit.py::test_engine_can_shift_a_collection_by_one_tick`.

>>> c = Circuit()
>>> xs = c.source("xs")
>>> out = c.sink(xs.map(lambda x: x * 10))
>>> xs.push(1); xs.push(2); c.tick()
0
>>> xs.push(1, -1); c.tick()
1
>>> out.at(0), out.at(1)
({10: 1, 20: 1}, {10: -1})
>>> [(n.kind, n.global_id) for n in c.nodes]
[('source', (0,)), ('operator', (1,)), ('sink', (2,))]
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from lattice import less_equal
from ddflow.errors import GraphError


from ddflow.circuit.base import DELTA, INTEGRAL, NODE_KINDS, Hook  # noqa: E402
from ddflow.circuit.sinks import Sink, _IterationClock  # noqa: E402


class Node:
    """A vertex of a circuit: one of seed 002's six node types."""

    def __init__(self, circuit: Circuit, kind: str, name: str,
                 inputs: Iterable[Any] = ()) -> None:
        if kind not in NODE_KINDS:
            raise GraphError(f"unknown node type {kind!r}; expected one of {NODE_KINDS}")
        circuit._check_building()
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
        self._start: list[Hook] = []
        self._stop: list[Hook] = []
        circuit.nodes.append(self)

    @property
    def depth(self) -> int:
        """How deep the node's circuit is nested: 0 for the root circuit."""
        return self.circuit.depth

    def on_clock_start(self, fn: Hook) -> Node:
        """Call `fn(scope, time)` when a clock this node sees starts a cycle."""
        self._start.append(fn)
        return self

    def on_clock_stop(self, fn: Hook) -> Node:
        """Call `fn(scope, time)` when a clock this node sees ends a cycle."""
        self._stop.append(fn)
        return self

    def clock_start(self, scope: int, time: Any) -> None:
        for fn in self._start:
            fn(scope, time)

    def clock_stop(self, scope: int, time: Any) -> None:
        for fn in self._stop:
            fn(scope, time)

    def __repr__(self) -> str:
        return f"Node({self.kind}, {self.name!r}, gid={list(self.global_id)})"


class Stream:
    """An edge of a circuit: a stream of Z-sets, one per tick of its circuit's clock.

    `collection` is the engine collection holding it and `form` says how (`DELTA`:
    the Z-set at `t` is the collection's updates at time `t`; `INTEGRAL`: it is the
    collection's accumulation at `t`).  Operators are the functions of
    `ddflow.circuit.catalogue`; the methods here are shorthands for them.
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

    # -- shorthands for the catalogue ------------------------------------------
    def __add__(self, other: Stream) -> Stream:
        from ddflow.circuit import catalogue
        return catalogue.plus(self, other)

    def __sub__(self, other: Stream) -> Stream:
        from ddflow.circuit import catalogue
        return catalogue.minus(self, other)

    def __neg__(self) -> Stream:
        from ddflow.circuit import catalogue
        return catalogue.negate(self)

    def map(self, f: Callable[[Any], Any]) -> Stream:
        from ddflow.circuit import catalogue
        return catalogue.map(f, self)

    def filter(self, p: Callable[[Any], bool]) -> Stream:
        from ddflow.circuit import catalogue
        return catalogue.filter(p, self)

    def index_with(self, key: Callable[[Any], Any]) -> Stream:
        from ddflow.circuit import catalogue
        return catalogue.index_with(key, self)

    def distinct(self) -> Stream:
        from ddflow.circuit import catalogue
        return catalogue.distinct(self)

    def delay(self) -> Stream:
        from ddflow.circuit import catalogue
        return catalogue.delay(self)

    def integrate(self) -> Stream:
        from ddflow.circuit import catalogue
        return catalogue.integrate(self)

    def differentiate(self) -> Stream:
        from ddflow.circuit import catalogue
        return catalogue.differentiate(self)

    def connect(self, stream: Stream) -> Stream:
        """Close a feedback node: this (the feedback's output) is `stream` one clock
        cycle later.  Returns `stream`."""
        if self.node.kind != "feedback":
            raise GraphError(f"connect() is for the output of a feedback node, not of "
                             f"{self.node.kind} node {self.node.name!r}")
        return self.circuit._connect_feedback(self, stream)


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
    """A trace (seed 002, 2.3): the updates of `collection` (held in delta form) seen
    `lag` ticks late.  At tick `t` it holds the updates at times `<= t - lag`; an
    operator reads it through its accumulation, the integral-form collection
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
        return self.circuit._shift(self.collection, self.lag)

    def __repr__(self) -> str:
        return f"TraceStream({self.node.name!r}, gid={list(self.node.global_id)}, lag={self.lag})"


class _Shift:
    """The driver's z^-1 at the root: updates captured at `t` re-enter at `t + 1`."""

    def __init__(self, circuit: Circuit, collection: Any, session: Any = None,
                 output: Any = None) -> None:
        self.capture = collection.capture(name="z^-1.in")
        if session is None:
            session, output = circuit.dataflow.new_collection("z^-1.out")
        self.session, self.output = session, output
        self._cursors: list[int] = []

    def transfer(self) -> None:
        shards = self.capture.node.shards
        if len(self._cursors) < len(shards):
            self._cursors += [0] * (len(shards) - len(self._cursors))
        for w, op in enumerate(shards):
            new = op.updates[self._cursors[w]:]
            self._cursors[w] = len(op.updates)
            for d, t, r in new:
                self.session.update_at(d, t + 1, r)


class Circuit:
    """A circuit of seed 002: the root (`Circuit()`) or a child (`parent.child()`).

    Building a circuit builds a `ddflow.Dataflow` underneath (`dataflow`); `tick()` on
    the root advances its clock by one: every source's Z-set for the tick goes in, the
    engine runs until the tick is complete (child circuits to their fixed points), and
    sinks record what came out.
    """

    def __init__(self, name: str = "root", *, workers: int = 1, max_rounds: int = 10_000,
                 _parent: Circuit | None = None, _node: Node | None = None) -> None:
        self.name = name
        self.parent = _parent
        self.node = _node                  # the child node in the parent circuit
        self.nodes: list[Node] = []
        self.max_rounds = max_rounds
        if _parent is None:
            from ddflow.dataflow import Dataflow
            self.root = self
            self.depth = 0
            self.global_id: tuple[int, ...] = ()
            self.dataflow = Dataflow(time=0, workers=workers)
            self.scope = self.dataflow.root
            self.time = 0
            self._shifts: list[_Shift] = []
            self._shift_cache: dict[tuple[int, int], Any] = {}
            self._recorders: list[list] = []
            self._clocks: list[_IterationClock] = []
            self._started = False
            self._root_feedback: list[tuple[Stream, Any]] = []   # (output, session)
        else:
            from ddflow.dataflow import Scope
            self.root = _parent.root
            self.depth = _parent.depth + 1
            self.global_id = _node.global_id
            self.dataflow = _parent.dataflow
            self.scope = Scope(self.dataflow, _parent.scope, name, max_rounds, "raise")
            self._variables: dict[int, Any] = {}
        self._clock_inputs: list[Any] = []   # collections whose frontier is the clock

    def __repr__(self) -> str:
        return f"Circuit({self.name!r}, gid={list(self.global_id)}, {len(self.nodes)} nodes)"

    # -- structure -------------------------------------------------------------------
    def walk(self) -> Iterable[Node]:
        """Every node of this circuit and of its children, depth first, in ID order."""
        for node in self.nodes:
            yield node
            if node.child is not None:
                yield from node.child.walk()

    def find(self, global_id: Iterable[int]) -> Node:
        """The node with this global ID (a path of local IDs from the root)."""
        path = tuple(global_id)
        circuit = self.root
        node = None
        for depth, local in enumerate(path):
            if circuit is None or not 0 <= local < len(circuit.nodes):
                raise GraphError(f"no node with global ID {list(path)}")
            node = circuit.nodes[local]
            circuit = node.child if depth + 1 < len(path) else None
        if node is None:
            raise GraphError("the empty path names the root circuit, not a node")
        return node

    def _check_building(self) -> None:
        if self.root._started:
            raise GraphError("the circuit has ticked: build every node before the first "
                             "tick(), or start a new Circuit")

    def _check_own(self, *streams: Any) -> None:
        for s in streams:
            if not isinstance(s, (Stream, TraceStream)):
                raise GraphError(f"expected a stream, got {s!r}")
            if s.circuit is not self:
                raise GraphError(f"stream {s!r} belongs to circuit {s.circuit.name!r}, not "
                                 f"{self.name!r}: import it into the child first")

    # -- the six node types ------------------------------------------------------------
    def source(self, name: str | None = None) -> SourceStream:
        """A source node: a stream fed with `push` / `extend`, one Z-set per tick."""
        if self.depth:
            raise GraphError("a source lives in the root circuit; a child circuit takes "
                             "its parent's streams in with import_stream()")
        name = name or f"source{len(self.nodes)}"
        node = Node(self, "source", name)
        session, coll = self.dataflow.new_collection(name)
        out = SourceStream(self, node, session, coll)
        node.outputs.append(out)
        return out

    def child(self, name: str | None = None, *, max_rounds: int | None = None) -> Circuit:
        """A child node and its subcircuit, run to a fixed point on every tick of this one."""
        name = name or f"child{len(self.nodes)}"
        node = Node(self, "child", name)
        sub = Circuit(name, max_rounds=max_rounds or self.max_rounds, _parent=self,
                      _node=node)
        node.child = sub
        return sub

    def import_stream(self, stream: Stream, name: str | None = None) -> Stream:
        """An import node: an ancestor's `stream` inside this child (engine `enter`).

        In delta form the imported stream is the parent's Z-set at iteration 0 and
        nothing after (DBSP's delta_0); in integral form it is the parent's value at
        every iteration (a constant).  Both are the engine's `Enter`.
        """
        if self.parent is None:
            raise GraphError("import_stream() belongs to a child circuit")
        if not isinstance(stream, Stream):
            raise GraphError(f"import_stream() takes a stream, got {stream!r}")
        anc = self.parent
        while anc is not None and anc is not stream.circuit:
            anc = anc.parent
        if anc is None:
            raise GraphError(f"{stream!r} is not a stream of an ancestor of {self.name!r}")
        node = Node(self, "import", name or "import", [stream])
        node.label = "import"
        out = Stream(self, node, stream.collection.enter(self.scope), stream.form)
        node.outputs.append(out)
        self._clock_inputs.append(out.collection)
        return out

    def feedback(self, name: str | None = None, *, form: str = DELTA) -> Stream:
        """A feedback node: its output is, one clock cycle later, the stream it is
        `connect`ed to (one iteration in a child, one tick at the root)."""
        name = name or f"feedback{len(self.nodes)}"
        node = Node(self, "feedback", name)
        node.label = "z^-1"
        if self.depth:
            from ddflow.collection import Variable
            var = Variable(self.scope, name=name)
            out = Stream(self, node, var.collection, form)
            self._variables[id(node)] = var
            self._clock_inputs.append(out.collection)
        else:
            session, coll = self.dataflow.new_collection(f"{name}.z^-1")
            out = Stream(self, node, coll, form)
            self._root_feedback.append((out, session))
        node.outputs.append(out)
        return out

    def _connect_feedback(self, fb: Stream, stream: Stream) -> Stream:
        self._check_own(stream)
        node = fb.node
        if node.inputs:
            raise GraphError(f"feedback node {node.name!r} is already connected")
        self._check_building()
        from ddflow.circuit import catalogue
        coll = catalogue._in_form(stream, fb.form)
        node.inputs.append(stream)
        if self.depth:
            self._variables[id(node)].set(coll)
        else:
            session = next(s for out, s in self._root_feedback if out is fb)
            self._shifts.append(_Shift(self, coll, session, fb.collection))
        return stream

    def sink(self, *streams: Stream, name: str | None = None,
             callback: Callable | None = None) -> Sink:
        """A sink node recording its input streams (see `Sink`)."""
        if not streams:
            raise GraphError("a sink needs at least one input stream")
        self._check_own(*streams)
        for s in streams:
            if not isinstance(s, Stream):
                raise GraphError("sink a Z-set stream; consolidate() a trace first")
        node = Node(self, "sink", name or "sink", streams)
        return Sink(self, node, list(streams), callback)

    def export(self, stream: Stream, name: str | None = None) -> Stream:
        """Make `stream` an output of this child: in the parent, its sum over the
        iterations of each tick (engine `leave`; seed 002's consolidate across a
        recursive subcircuit).  In delta form that is the change of the fixed point at
        each epoch; in integral form, the fixed point itself."""
        if self.parent is None:
            raise GraphError("export() belongs to a child circuit")
        self._check_own(stream)
        if not isinstance(stream, Stream):
            raise GraphError("export a Z-set stream; consolidate() a trace first")
        node = self.node
        out = Stream(self.parent, node, stream.collection.leave(name=name or "export"),
                     stream.form, port=len(node.outputs))
        node.outputs.append(out)
        node.exports.append(stream)
        return out

    # -- compiled helpers ----------------------------------------------------------------
    def _operator(self, name: str, inputs: list, collection: Any, form: str,
                  label: str | None = None) -> Stream:
        self._check_own(*inputs)
        node = Node(self, "operator", name, inputs)
        node.label = label or name
        out = Stream(self, node, collection, form)
        node.outputs.append(out)
        return out

    def _trace_operator(self, name: str, inputs: list, collection: Any, lag: int,
                        timed: bool = True, label: str | None = None) -> TraceStream:
        self._check_own(*inputs)
        node = Node(self, "operator", name, inputs)
        node.label = label or name
        out = TraceStream(self, node, collection, lag, timed)
        node.outputs.append(out)
        return out

    def _shift(self, collection: Any, k: int = 1) -> Any:
        """`collection` with every update `k` clock cycles later (z^-k): the driver's
        delay at the root, a `Variable` (one iteration per step) in a child."""
        for _ in range(k):
            key = (id(collection), 1)
            cache = self.root._shift_cache
            if key in cache:
                collection = cache[key][1]
                continue
            self._check_building()
            if self.depth:
                from ddflow.collection import Variable
                var = Variable(self.scope, name="z^-1")
                var.set(collection)
                out = var.collection
                self._clock_inputs.append(out)
            else:
                shift = _Shift(self, collection)
                self._shifts.append(shift)
                out = shift.output
            cache[key] = (collection, out)     # keep `collection` alive: ids stay unique
            collection = out
        return collection

    # -- running ---------------------------------------------------------------------------
    def _start(self) -> None:
        for out, _session in self._root_feedback:
            if not out.node.inputs:
                raise GraphError(f"feedback node {out.node.name!r} was never connected")
        for c in self._circuits():
            if c.depth == 0:
                continue
            for node in c.nodes:
                if node.kind == "feedback" and not node.inputs:
                    raise GraphError(f"feedback node {node.name!r} in child {c.name!r} was "
                                     "never connected")
            if c._clock_inputs:
                first, rest = c._clock_inputs[0], c._clock_inputs[1:]
                meet = first.concat(*rest, name=f"{c.name}.clock") if rest else first
                clock = _IterationClock(c)
                meet.inspect(clock.see, on_frontier=clock.watch, name=f"{c.name}.clock")
                self._clocks.append(clock)
        self._started = True

    def _circuits(self) -> Iterable[Circuit]:
        yield self
        for node in self.nodes:
            if node.child is not None:
                yield from node.child._circuits()

    def tick(self) -> int:
        """Run one tick of the root clock; return the tick just completed.

        Every node's `clock_start(depth, t)` fires, every session advances to `t + 1`
        and the engine runs (child circuits iterate to their fixed points, their
        iteration hooks firing as they go), root delays carry their input over to
        `t + 1`, and every node's `clock_stop(depth, t)` fires.  If the run raises,
        the engine rolls back and keeps the tick's input: correct it (push a
        retraction, or `source.session.discard(record)`) and tick again; the start
        hooks of tick `t` then fire a second time.
        """
        if self.parent is not None:
            raise GraphError("tick() the root circuit; a child runs inside its parent's tick")
        if not self._started:
            self._start()
        t = self.time
        nodes = list(self.walk())
        for node in nodes:
            node.clock_start(node.depth, t)
        for clock in self._clocks:
            clock.begin(t)
        before = [(session, session.time) for session in self.dataflow.sessions]
        for session in self.dataflow.sessions:
            if not session.closed and less_equal(session.time, t + 1):
                session.advance_to(t + 1)
        marks = [len(r) for r in self._recorders]
        try:
            self.dataflow.run()
        except BaseException:
            # The engine rolled back and kept the sessions' updates; put the sessions
            # back at tick t too, so that the tick's input can still be corrected.
            for session, time in before:
                session.time = time
            for rec, n in zip(self._recorders, marks):
                del rec[n:]
            for clock in self._clocks:
                clock.abort()
            raise
        for clock in self._clocks:
            clock.end(t)
        for shift in self._shifts:
            shift.transfer()
        for node in nodes:
            node.clock_stop(node.depth, t)
        self.time = t + 1
        return t

    def run(self, ticks: int) -> None:
        """`tick()` `ticks` times."""
        for _ in range(ticks):
            self.tick()

    # -- pictures ------------------------------------------------------------------------
    def to_dot(self) -> str:
        """Graphviz text of the circuit (see `ddflow.circuit.draw`)."""
        from ddflow.circuit.draw import to_dot
        return to_dot(self)

    def draw(self, ax: Any = None, **kw: Any) -> Any:
        """A matplotlib picture of the circuit (see `ddflow.circuit.draw`)."""
        from ddflow.circuit.draw import draw
        return draw(self, ax=ax, **kw)


__all__ = ["Circuit", "Node", "Stream", "SourceStream", "TraceStream", "Sink",
           "NODE_KINDS", "DELTA", "INTEGRAL"]
