"""Circuits, nodes, streams and the clock driver of the "Notes on DBSP", on the engine.

What this module isolates: the *shape* of a DBSP circuit ("Notes on DBSP", sections 2.6 to
2.8) and how it is compiled to a `ddflow.Dataflow`.  It computes nothing itself: every
stream is an engine `Collection`, every operator an engine operator
(`ddflow.circuit.catalogue` wires them).  Left out: operators of its own, a scheduler of
its own, and any root lattice but the ints (the root clock counts ticks).

Node types ("Notes on DBSP", 2.8), each with a local ID (its index in its circuit's
`nodes`) and a global ID (the path of local IDs from the root):

========  ======  =======  ==============================================================
type      inputs  outputs  compiled to
========  ======  =======  ==============================================================
source    0       1        an `InputSession` and its collection (root circuit only)
operator  N       1        engine operators (`ddflow.circuit.catalogue`)
child     0       N        a nested engine `Scope` (times `Product(epoch, iteration)`)
import    1       1        `Collection.enter` of a parent stream into the child
feedback  1       1        a `Variable` in a child (one iteration later); at the root a
                           driver-side transfer (below)
sink      N       0        `Collection.capture`, read by time from the driver
                           (`ddflow.circuit.sinks`)
========  ======  =======  ==============================================================

A child's outputs are the streams it `export`s: `Collection.leave`, which sums a
stream over the iterations of each epoch (the notes' consolidate, which exports the
results of a recursive subcircuit to its parent).

The invariant kept: the graph of engine nodes is built once, before the first `tick`
(the engine's own rule), and every `tick` completes exactly one root time.

Engines: `Circuit(engine=...)` runs on any engine (`LocalEngine(workers=W)`, the BSP
engines of `ddflow.engine.bsp`).  The circuit never reaches into an engine: it feeds
sessions, runs `Dataflow.run()`, and reads `Capture.updates` by time after each tick.

Clock hooks ("Notes on DBSP", 2.6): every node has `on_clock_start(fn)` /
`on_clock_stop(fn)`; `fn(scope, time)` is called with `scope` the number of levels from
the node's own circuit up to the circuit whose clock moved (0: its own clock; a node in a
child gets 1 for a root tick) and that clock's time.

* Root ticks: the driver fires every node's start hook before the tick's `run()` and
  every stop hook after it, when time `t` is complete everywhere (exact).
* Iterations of a child (scope 0 inside it): the engine runs a whole loop inside one
  `run()`, so they are replayed after it, from the captures of the child's import and
  feedback streams (`ddflow.circuit.sinks.replay_iterations`): in order, well nested,
  one start and one stop per iteration, but after the fact, not between iterations.

z^-1 at the root, two cases:

* Compiled to the engine's `delay` (`Collection.delay`, the time-advancing linear
  operator of `operators.linear`, moving each update from `t` to `t + 1`): every z^-1
  whose input exists before its output is used.  That is `delay` / `z1` of a stream,
  the lag of a delayed trace (`z1_trace`, `TraceStream.accumulation`), and the
  conversion of a delta stream to integral form (`C - z^-1 C`, in `differentiate` and
  the pointwise operators).  It runs inside the engine, so on every engine and with no
  driver work; the updates of tick `t + 1` it emits during tick `t` are read when tick
  `t + 1` closes, because sinks read by time.
* Carried by the driver: a z^-1 closing a cycle at the root, i.e. a root `feedback()`
  node (its output is used before the stream it is `connect`ed to exists, as in DBSP's
  integrator `I(s) = s + z^-1(I(s))`), and the integrator `R = C + z^-1 R` that puts
  an integral stream into delta form (`integrate` of an integral stream, its trace,
  the incremental operators on it).  The engine
  graph must be acyclic at the root: only a loop scope's `Variable` closes a cycle
  (its summary adds a round, so progress can go around it), while a cycle through
  `delay` at the root would hold its own frontier back forever.  So the output is an
  input session and, when tick `t` has run, the driver reads the updates at exactly
  `t` from a capture of the connected stream and feeds them to the session at `t + 1`
  (`_Transfer`): public API only, so it too works on every engine.

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

import numbers
from typing import Any, Callable, Iterable

from lattice import less_equal
from ddflow import Dataflow
from ddflow.arguments import positive_int
from ddflow.collection import Variable
from ddflow.graph import Scope
from ddflow.errors import GraphError

from ddflow.circuit.base import DELTA, INTEGRAL, NODE_KINDS
from ddflow.circuit.sinks import Sink, Reading, replay_iterations
from ddflow.circuit.streams import Node, SourceStream, Stream, TraceStream


def _next_tick(_data: Any, time: int) -> int:
    """The root z^-1 as the engine's `delay`: every update one tick later.  A module
    function, not a lambda, so that every engine can pickle it."""
    return time + 1


class _Transfer:
    """The driver's z^-1 closing a cycle at the root (see the module docstring): what
    `collection` holds at exactly tick `t` enters `session` at `t + 1`."""

    def __init__(self, circuit: Circuit, collection: Any, session: Any) -> None:
        self.reading = circuit.root.reading_of(collection)
        self.session = session

    def transfer(self, tick: int) -> None:
        for d, r in self.reading.at_time(tick).items():
            self.session.update_at(d, tick + 1, r)


class Circuit:
    """A DBSP circuit: the root (`Circuit()`) or a child (`parent.child()`).

    Building a circuit builds a `ddflow.Dataflow` underneath (`dataflow`); `tick()` on
    the root advances its clock by one: every source's Z-set for the tick goes in, the
    engine runs until the tick is complete (child circuits to their fixed points), and
    sinks record what came out.  `engine` is the dataflow's engine (any engine; by
    default `LocalEngine(workers=workers)`).
    """

    def __init__(self, name: str = "root", *, workers: int = 1, engine: Any = None,
                 max_rounds: int = 10_000, _parent: Circuit | None = None,
                 _node: Node | None = None) -> None:
        self.name = name
        self.parent = _parent
        self.node = _node                  # the child node in the parent circuit
        self.nodes: list[Node] = []
        self.max_rounds = max_rounds
        if _parent is None:
            self.root = self
            self.depth = 0
            self.global_id: tuple[int, ...] = ()
            self.dataflow = Dataflow(time=0, workers=workers, engine=engine)
            self.scope = self.dataflow.root
            self.time = 0
            self._transfers: list[_Transfer] = []
            self._shift_cache: dict[tuple[int, Any], Any] = {}
            self._readings: dict[int, tuple[Any, Reading]] = {}
            self.tick_listeners: list[Callable[[int], Any]] = []
            self._started = False
            self._root_feedback: list[tuple[Stream, Any]] = []   # (output, session)
        else:
            self.root = _parent.root
            self.depth = _parent.depth + 1
            self.global_id = _node.global_id
            self.dataflow = _parent.dataflow
            self.scope = Scope(self.dataflow, _parent.scope, name, max_rounds, "raise")
            self._variables: dict[int, Any] = {}
        self._clock_inputs: list[Any] = []   # import and feedback collections
        self.clock_readings: list[Reading] = []

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

    def check_building(self) -> None:
        """Refuse a new node once the root has ticked (the engine graph is built once)."""
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
        if max_rounds is not None:
            max_rounds = positive_int(max_rounds, "max_rounds", operator=name)
        node = Node(self, "child", name)
        sub = Circuit(name, max_rounds=self.max_rounds if max_rounds is None else max_rounds,
                      _parent=self, _node=node)
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

    def connect_feedback(self, fb: Stream, stream: Stream) -> Stream:
        """Close feedback node `fb` with `stream` (what `Stream.connect` asks for)."""
        self._check_own(stream)
        node = fb.node
        if node.inputs:
            raise GraphError(f"feedback node {node.name!r} is already connected")
        self.check_building()
        coll = self.in_form(stream, fb.form)
        node.inputs.append(stream)
        if self.depth:
            self._variables[id(node)].set(coll)
        else:
            session = next(s for out, s in self._root_feedback if out is fb)
            self._transfers.append(_Transfer(self, coll, session))
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
        iterations of each tick (engine `leave`; the notes' consolidate across a
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
    def add_operator(self, name: str, inputs: list, collection: Any, form: str,
                  label: str | None = None) -> Stream:
        """A node of the catalogue (`ddflow.circuit.catalogue`): an operator `name`
        over `inputs`, computed by the engine `collection`, in `form` (delta or
        integral), drawn as `label`."""
        self._check_own(*inputs)
        node = Node(self, "operator", name, inputs)
        node.label = label or name
        out = Stream(self, node, collection, form)
        node.outputs.append(out)
        return out

    def add_trace_operator(self, name: str, inputs: list, collection: Any, lag: int,
                        timed: bool = True, label: str | None = None) -> TraceStream:
        """As `add_operator`, for an operator whose output is a `TraceStream` (`lag`
        and `timed` as it takes them)."""
        self._check_own(*inputs)
        node = Node(self, "operator", name, inputs)
        node.label = label or name
        out = TraceStream(self, node, collection, lag, timed)
        node.outputs.append(out)
        return out

    def reading_of(self, collection: Any) -> Reading:
        """The one capture of `collection` the driver reads (shared by every sink,
        inspect, transfer and clock that watches it)."""
        readings = self.root._readings
        if id(collection) not in readings:
            self.check_building()
            # keep `collection` alive with its reading, so that ids stay unique
            readings[id(collection)] = (collection, Reading(collection))
        return readings[id(collection)][1]

    def in_form(self, stream: Stream, form: str) -> Any:
        """A collection holding `stream` (of this circuit) in `form`, converting at the
        root, once (the conversions are in the package docstring)."""
        if stream.form == form:
            return stream.collection
        if self.depth:
            raise GraphError(
                f"{stream!r} is in {stream.form} form and this operator needs {form} form; "
                "converting needs a z^-1 over epochs, which a child circuit cannot express "
                "(use the incremental operators, distinct_trace and incremental_join, on "
                "delta streams inside a child)")
        cache = self.root._shift_cache
        key = (id(stream.collection), form)
        if key not in cache:
            c = stream.collection
            if form == INTEGRAL:
                # C - z^-1 C accumulates, at t, to the updates of C at t (engine delay).
                out = c.concat(self.shifted(c).negate(), name="to_integral")
            else:
                # R = C + z^-1 R: its updates at t are acc(C, t) (DBSP's integrator
                # loop), a cycle at the root: the driver carries its z^-1.
                session, fed = self.dataflow.new_collection("to_delta.z^-1")
                out = c.concat(fed, name="to_delta")
                self._transfers.append(_Transfer(self, out, session))
            cache[key] = (c, out)
        return cache[key][1]

    def in_form_or_none(self, stream: Stream, form: str) -> Any:
        """The collection holding `stream` in `form` if there is one already (builds
        nothing)."""
        if stream.form == form:
            return stream.collection
        hit = self.root._shift_cache.get((id(stream.collection), form))
        return None if hit is None else hit[1]

    def shifted(self, collection: Any, k: int = 1) -> Any:
        """`collection` with every update `k` clock cycles later (z^-k): the engine's
        `delay` by one tick at the root, a `Variable` (one iteration) in a child."""
        for _ in range(k):
            key = (id(collection), 1)
            cache = self.root._shift_cache
            if key in cache:
                collection = cache[key][1]
                continue
            self.check_building()
            if self.depth:
                var = Variable(self.scope, name="z^-1")
                var.set(collection)
                out = var.collection
                self._clock_inputs.append(out)
            else:
                out = collection.delay(_next_tick, name="z^-1")
            cache[key] = (collection, out)     # keep `collection` alive: ids stay unique
            collection = out
        return collection

    # -- running ---------------------------------------------------------------------------
    def _start(self) -> None:
        for out, _session in self._root_feedback:
            if not out.node.inputs:
                raise GraphError(f"feedback node {out.node.name!r} was never connected")
        for c in self.nested_circuits():
            if c.depth == 0:
                continue
            for node in c.nodes:
                if node.kind == "feedback" and not node.inputs:
                    raise GraphError(f"feedback node {node.name!r} in child {c.name!r} was "
                                     "never connected")
            # Captures are built before the first run (the engine's rule), whether or
            # not hooks are registered yet: a hook may be added after any tick.
            c.clock_readings = [self.reading_of(coll) for coll in c._clock_inputs]
        self._started = True

    def nested_circuits(self) -> Iterable[Circuit]:
        """This circuit and every circuit nested in it, depth first."""
        yield self
        for node in self.nodes:
            if node.child is not None:
                yield from node.child.nested_circuits()

    def tick(self) -> int:
        """Run one tick of the root clock; return the tick just completed.

        Every node's `clock_start(depth, t)` fires, every session advances to `t + 1`
        and the engine runs (child circuits iterate to their fixed points).  Then, read
        from captures: sinks and inspect callbacks record tick `t`, child circuits'
        iteration hooks are replayed, root feedback carries tick `t` over to `t + 1`,
        and every node's `clock_stop(depth, t)` fires.  If the run raises, the engine
        rolls back and keeps the tick's input: correct it (push a retraction, or
        `source.session.discard(record)`) and tick again; the start hooks of tick `t`
        then fire a second time.
        """
        if self.parent is not None:
            raise GraphError("tick() the root circuit; a child runs inside its parent's tick")
        if not self._started:
            self._start()
        t = self.time
        nodes = list(self.walk())
        for node in nodes:
            node.clock_start(node.depth, t)
        before = [(session, session.time) for session in self.dataflow.sessions]
        for session in self.dataflow.sessions:
            if not session.closed and less_equal(session.time, t + 1):
                session.advance_to(t + 1)
        try:
            self.dataflow.run()
        except BaseException:
            # The engine rolled back and kept the sessions' updates; put the sessions
            # back at tick t too, so that the tick's input can still be corrected.
            for session, time in before:
                session.time = time
            raise
        finally:
            for _collection, reading in self._readings.values():
                reading.forget()
        for listener in self.tick_listeners:
            listener(t)
        replay_iterations(self, t)
        for transfer in self._transfers:
            transfer.transfer(t)
        for node in nodes:
            node.clock_stop(node.depth, t)
        self.time = t + 1
        return t

    def run(self, ticks: int) -> None:
        """`tick()` `ticks` times."""
        if not (isinstance(ticks, numbers.Integral) and not isinstance(ticks, bool)
                and int(ticks) >= 0):
            raise GraphError(f"run(ticks) takes a number of ticks (an int >= 0), not "
                             f"{ticks!r}", operator=self.name)
        for _ in range(int(ticks)):
            self.tick()

    # `to_dot()` and `draw()` are attached by `ddflow.circuit.draw` when it is imported.


__all__ = ["Circuit", "Node", "Stream", "SourceStream", "TraceStream", "Sink",
           "NODE_KINDS", "DELTA", "INTEGRAL"]
