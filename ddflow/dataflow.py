"""The front door: `Dataflow`, its scopes and graph nodes (input sessions: `ddflow.input`).

A `Dataflow` is a graph of nodes built through the `Collection` API and run by an
engine (`LocalEngine` by default).  It owns what users touch: `new_collection()`
returns an `InputSession` to feed `(data, time, diff)` updates and a `Collection`
to build on; `capture()` records an output (read through `ddflow.capture.Capture`,
re-exported here); `run()` does all the work the input frontiers allow.  Nothing
here computes: operators live in `operators/`, the scheduling in `ddflow/engine/`.

Boundary errors (bad time, unhashable data, closed session ...) are raised by the
session before anything is recorded, so the dataflow is unchanged.  Errors during
`run()` roll the whole step back (every operator's state, the captures and the
sessions' pending updates), so the dataflow stays usable: fix or retract the
offending input and run again.

>>> import ddflow
>>> df = ddflow.Dataflow()
>>> words_in, words = df.new_collection()
>>> counts = words.count().capture()
>>> words_in.insert("a"); words_in.insert("b"); words_in.insert("a")
>>> words_in.advance_to(1); df.run()
>>> counts.updates
[(('a', 2), 0, 1), (('b', 1), 0, 1)]
>>> words_in.remove("a"); words_in.advance_to(2); df.run()
>>> counts.at(1)
{('a', 1): 1, ('b', 1): 1}
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable, Iterator, Sequence

from lattice import Antichain, Product, as_time, is_time, join, minimum
from ddflow import arguments
from ddflow.capture import Capture, CaptureOp  # noqa: F401 - re-exported from the front door
from ddflow.blame import blame
from ddflow.errors import (DataError, DataflowError, GraphError, NothingDiscardedWarning,
                           StalledRunWarning, TimeError)
from ddflow.input import InputOp, InputSession
from operators.base import Operator

EMPTY = Antichain()


class Scope:
    """A timestamp domain: the root, or a loop nested in a parent scope."""

    def __init__(self, dataflow: Dataflow, parent: Scope | None, name: str,
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

    def __init__(self, dataflow: Dataflow, scope: Scope, name: str, kind: str,
                 inputs: Sequence[Node], factory: Callable[[int, Callable], Operator],
                 exchange: Callable[[Any], Any] | None = None) -> None:
        dataflow._check_building(scope)
        arguments.name(name, kind)
        for p in inputs:
            if p.dropped:
                raise GraphError(f"'{p.name}' was dropped from the dataflow (drop()): build "
                                 "on a collection that is still running", operator=name)
        self.dataflow = dataflow
        self.id = dataflow._next_id()
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


#: What the modules above this one register when they are imported: "collection",
#: the type `Dataflow.new_collection` wraps its node in (`ddflow.collection`), and
#: "to_dot", the renderer of `Dataflow.to_dot` (`ddflow.viz`).  Imports point down
#: (lattice, then core data, operators, the front door, the CLI), so the front door
#: cannot import its own fluent API or
#: its pictures; `ddflow.Dataflow` imports both modules before handing the class out.
_REGISTERED: dict[str, Any] = {}


def register(name: str, value: Any) -> None:
    """Register `value` under `name` ("collection" or "to_dot"); see `_REGISTERED`."""
    if name not in ("collection", "to_dot"):
        raise GraphError(f"nothing of the front door is registered as {name!r}")
    _REGISTERED[name] = value


def _registered(name: str, module: str) -> Any:
    try:
        return _REGISTERED[name]
    except KeyError:
        raise GraphError(f"{module} was never imported, so Dataflow has no {name!r}: take "
                         f"Dataflow from the package (ddflow.Dataflow) or import {module} "
                         "first") from None


class Dataflow:
    """A differential dataflow: build it with collections, feed it, run it.

    `time` is the least time of the root lattice, or the type `int`: `0` (the
    default), `Product(0, 0)` for a partially ordered root, or any user lattice's
    minimum.  `workers=W` simulates W workers with keys sharded by `shard_of`.
    `fuse=False` keeps adjacent linear operators apart (to compare).
    """

    def __init__(self, time: Any = 0, *, workers: int = 1, engine: Any = None,
                 fuse: bool = True) -> None:
        from ddflow.engine.local import LocalEngine
        time = _root_time(time)
        if type(fuse) is not bool:
            raise GraphError(f"fuse must be True or False, not {fuse!r}")
        self.time = time
        self.nodes: list[Node] = []
        self.sessions: list[InputSession] = []
        self.captures: list[Capture] = []
        self.root = Scope(self, None, "root")
        self.fuse = fuse
        if engine is None:
            engine = LocalEngine(workers=workers)
        else:
            _check_engine(engine)
            if workers != 1:
                raise GraphError("give workers to the engine, not to Dataflow, when passing "
                                 "an engine")
        self.engine = engine
        self._ids = 0
        self._compiled = False
        self._ran = 0                   # nodes already running (built before a run())
        #: The join of the inputs' times at the end of the last run(): what a piece
        #: added afterwards starts from (see `run`).
        self.time_ran: Any = None
        self._dropping = False
        #: Work done by operators since dropped (`drop`): `total_work` keeps counting
        #: it, so the total never goes down when a piece is taken away.
        self._retired_work = 0
        self._arrangement_log: list | None = None
        self._loops = 0

    # -- building ------------------------------------------------------------
    def new_collection(self, name: str | None = None) -> tuple[InputSession, Any]:
        """A new input: `(InputSession, Collection)`."""
        collection = _registered("collection", "ddflow.collection")
        name = name or f"input{len(self.sessions)}"
        node = Node(self, self.root, name, "input", [], lambda w, ops: InputOp(name))
        session = InputSession(self, node, name)
        self.sessions.append(session)
        return session, collection(node)

    @contextlib.contextmanager
    def _building(self) -> Iterator[None]:
        """Undo every node added inside the block if it raises: a failed build call
        (a bad argument found after an arrangement was made, a failing `iterate`
        body) leaves the graph exactly as it was.  Every builder of the fluent API
        runs inside one (`ddflow.collection._builder`); nested blocks leave the undo
        to the outermost."""
        if self._arrangement_log is not None:
            yield
            return
        mark = len(self.nodes)
        n_captures, n_sessions, ids = len(self.captures), len(self.sessions), self._ids
        self._arrangement_log = []
        try:
            yield
        except BaseException:
            added = set(map(id, self.nodes[mark:]))
            del self.nodes[mark:]
            del self.captures[n_captures:]
            del self.sessions[n_sessions:]
            self._ids = ids
            for node in self.nodes:
                node.consumers = [(c, p) for c, p in node.consumers if id(c) not in added]
                if node.kind == "feedback":     # a Variable set inside the block
                    node.inputs = [p for p in node.inputs if id(p) not in added]
            for collection, by_self in self._arrangement_log:
                collection._arranged.pop(by_self, None)
            raise
        finally:
            self._arrangement_log = None

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids - 1

    def _check_building(self, scope: Scope | None = None) -> None:
        # A dataflow grows after run() (see `run`), but a loop that has run is closed:
        # its rounds are under way, so build a new iterate over its result instead.
        if scope is not None and scope.parent is not None and scope.running:
            raise GraphError(f"the loop {scope.name!r} has already run, so nothing can be "
                             "added inside it: build a new iterate() over its result, or "
                             "over the collections it read", operator=scope.name)

    # -- running -------------------------------------------------------------
    def run(self) -> None:
        """Do all the work the input frontiers allow.

        On any error the step is rolled back and the sessions keep their updates, so
        nothing is lost and nothing is half-applied.  An error of the data (a user
        function raising, a record of the wrong shape, a loop not converging) names
        the pending updates it comes from, `err.inputs` (found by re-running the step
        on parts of them, `ddflow.blame`): `df.discard(err)` (or any session's
        `discard(err)`) withdraws exactly those, and the next `run()` goes on.  With
        `err.inputs == ()` no pending update is to blame: the failing operator
        (`err.operator`) meets data the dataflow already holds, either a piece added
        since the last run meeting what it imported, or updates accepted by an
        earlier run at times this run's `advance_to` completes (an update is
        committed when the run that takes it succeeds, even if its time is not
        complete yet: withdraw a doubtful update before advancing past its time);
        `drop()` the failing piece and run again: the rest goes on.

        Updates complete only once their input's frontier passes their time.  When
        an input was given updates but its frontier has not moved since the last
        run (no `advance_to`, no `close`), none of them can complete: the run warns
        with a `StalledRunWarning` naming those inputs (and still does the work it
        can: linear operators pass the updates on, as partial answers).

        Operators built since the last `run()` join the running dataflow here, as in
        differential dataflow's interactive use: each imports the arrangements it
        reads (compacted to the current time; an input keeps its own), a collection
        that has none is re-derived from its nearest arranged ancestors, and a new
        capture's first updates are the whole accumulated answer at the time the
        piece was added (`Capture.since`), maintained like the rest from then on.
        """
        from ddflow.engine import plan
        if not self._compiled:
            plan.prepare(self)
            self.engine.compile(self)
            self._compiled = True
            self._ran = len(self.nodes)
            self._mark_running()
        elif len(self.nodes) > self._ran or self._dropping:
            growth = plan.grow(self, self._ran)
            self.engine.grow(self, growth)
            for cap in self.captures:
                if cap.node in growth.added:
                    cap.since = growth.time
            self._ran = len(self.nodes)
            self._dropping = False
            self._mark_running()
        stalled = [s for s in self.sessions
                   if s._pending and not s.closed and s.frontier() == s._ran_at]
        try:
            self.engine.run(self)
        except DataflowError as err:
            if err.inputs is None:
                _with_inputs(err, blame(self, err))
            raise
        time = self.root.minimum
        for s in self.sessions:
            s._ran_at = s.frontier()
            time = join(time, s.time)
        self.time_ran = time
        if stalled:
            names = ", ".join(f"{s.name!r} (at {s.time!r})" for s in stalled)
            warnings.warn(StalledRunWarning(
                f"run(): the updates given to {names} cannot complete, since the input's "
                "frontier has not moved since the last run(): advance_to() a later time "
                "(or close()) the input, then run() again"), stacklevel=2)

    def _mark_running(self) -> None:
        for node in self.nodes:
            node.scope.running = True

    def drop(self, what: Any) -> None:
        """Remove a piece added for a question (a `Capture`, or a collection's
        operators) together with every operator only it needed; the arrangements those
        read stop holding back compaction for them.  Takes effect at the next `run()`.
        """
        node = getattr(what, "node", None)
        if node is None or node.dataflow is not self:
            raise GraphError(f"drop() takes a capture or collection of this dataflow, "
                             f"not {what!r}")
        if node.kind == "input":
            raise GraphError(f"drop(): '{node.name}' is an input; close() its session "
                             "instead", operator=node.name)
        live_nodes = [n for n in self.nodes if not n.dropped and n is not node]
        # What stays: whatever still leads to an output (a node no one reads: a
        # capture, an inspect, a collection left dangling) other than this one.
        keep: set = set()
        stack = [n for n in live_nodes if not n.consumers]
        while stack:
            n = stack.pop()
            if id(n) not in keep:
                keep.add(id(n))
                stack.extend(n.inputs)
        doomed, stack = [], [node]
        seen: set = set()
        while stack:
            n = stack.pop()
            if id(n) in seen or id(n) in keep or n.kind == "input":
                continue
            seen.add(id(n))
            doomed.append(n)
            stack.extend(n.inputs)
        if id(node) in keep:
            readers = ", ".join(sorted({f"'{c.name}'" for c, _p in node.consumers
                                        if not c.dropped}))
            raise GraphError(f"drop(): '{node.name}' is still read by {readers}; drop "
                             "those first", operator=node.name)
        # Nothing runs between drop() and the next run(): the doomed operators'
        # counters are final now (an engine may reset them when it lets them go).
        self._retired_work += sum(self._work_of(n) for n in doomed)
        for n in doomed:
            n.dropped = True
        self.captures = [c for c in self.captures if not c.node.dropped]
        self._dropping = True

    def discard(self, err: DataflowError) -> list[tuple]:
        """Withdraw the pending updates a failed `run()` blamed (`err.inputs`) from
        their sessions and return them as `(session, data, time, diff)`: exactly
        those, one pending copy each.  Raises `DataError` for an error that names no
        inputs (not raised by a run, or not the data's fault) or whose inputs are
        no longer pending; warns (`NothingDiscardedWarning`) when `err.inputs` is
        empty: nothing pending is to blame, `drop()` the failing piece instead."""
        inputs = getattr(err, "inputs", None)
        if not isinstance(err, DataflowError) or inputs is None:
            raise DataError(f"discard(err) takes an error raised by run() that names the "
                            f"pending updates it comes from (err.inputs), not {err!r}")
        if not inputs:
            warnings.warn(NothingDiscardedWarning(
                "discard(err): no pending update is to blame for this error (err.inputs "
                "is empty): the failure comes from data already in the dataflow (met by a "
                "piece added since the last run(), or accepted earlier at a time this "
                "run completes); drop() the failing piece"), stacklevel=2)
            return []
        sessions = list({id(u[0]): u[0] for u in inputs}.values())
        for session in sessions:
            if session.dataflow is not self:
                raise DataError(f"discard(err): the error names input '{session.name}' "
                                "of another dataflow", operator=session.name)
        saved = [session.pending for session in sessions]
        try:        # all or nothing: a session refusing puts the others back
            for session in sessions:
                session.withdraw([u[1:] for u in inputs if u[0] is session])
        except DataError:
            for session, pending in zip(sessions, saved):
                session.take_pending()
                session.restore_pending(pending)
            raise
        return list(inputs)

    def step(self) -> None:
        """Alias of `run()`."""
        self.run()

    # -- observing -------------------------------------------------------------
    def metrics(self, per_worker: bool = False) -> list[dict]:
        """Work counters per operator (summed over workers unless `per_worker`)."""
        rows = []
        for node in self.nodes:
            shards = list(enumerate(self.engine.operators(node)))
            groups = [[s] for s in shards] if per_worker else [shards]
            for group in groups:
                row = {"id": node.id, "operator": node.name, "kind": node.kind,
                       "scope": node.scope.name}
                if per_worker:
                    row["worker"] = group[0][0]
                for key in ("records_in", "records_out", "batches_out", "work",
                            "times_visited"):
                    row[key] = sum(getattr(op, key) for _w, op in group)
                row["trace_records"] = sum(op.trace_records() for _w, op in group)
                rows.append(row)
        return rows

    def to_dot(self) -> str:
        """The dataflow graph as graphviz text (see `ddflow.viz.to_dot`)."""
        return _registered("to_dot", "ddflow.viz")(self)

    def total_work(self) -> int:
        """Records processed by all operators since the dataflow was built: records in
        plus trace records read.  Operators taken away by `drop` keep the work they
        did in the total, so it never decreases: the difference between two readings
        is the work done in between."""
        return self._retired_work + sum(self._work_of(n) for n in self.nodes
                                        if not n.dropped)

    def _work_of(self, node: Node) -> int:
        return sum(op.records_in + op.work for op in self.engine.operators(node))

    def loop_rows(self) -> list[dict]:
        """Round-by-round log of every loop: outer time, round, changes, sample."""
        rows = []
        for node in self.nodes:
            if node.kind == "feedback":
                merged: dict = {}
                for op in self.engine.operators(node):
                    for key, (n, sample) in op.log.items():
                        m = merged.setdefault(key, [0, []])
                        m[0] += n
                        m[1].extend(sample[: max(0, 12 - len(m[1]))])
                from lattice import sort_key
                for (outer, rnd), (n, sample) in sorted(
                        merged.items(), key=lambda kv: (sort_key(kv[0][0]), kv[0][1])):
                    rows.append({"loop": node.scope.name, "variable": node.name,
                                 "outer": outer, "round": rnd, "changes": n,
                                 "sample": sample})
        return rows


def _with_inputs(err: DataflowError, inputs: tuple | None) -> None:
    """Attach `inputs` to `err` and say in its message what to do."""
    err.inputs = inputs
    if inputs is None:
        return
    if inputs:
        shown = ", ".join(f"{s.name}: {(d, t, r)!r}" for s, d, t, r in inputs[:4])
        more = f" and {len(inputs) - 4} more" if len(inputs) > 4 else ""
        hint = (f"it comes from the pending update(s) {shown}{more}: "
                "session.discard(err) withdraws them")
    else:
        hint = ("no pending update is to blame: the failing operator meets data the "
                "dataflow already holds (added since the last run(), it fails on what it "
                "imported; or an earlier update's time completes now); drop() it")
    err.args = (f"{err.args[0]}; {hint}",) + err.args[1:]


def _root_time(time: Any) -> Any:
    """The root's least time from `Dataflow(time=...)`: the type `int`, or the least
    element of a lattice; anything else is a `TimeError` saying what is expected."""
    if time is int:
        return 0
    time = as_time(time)
    if isinstance(time, type) or not is_time(time):
        raise TimeError(f"Dataflow(time=...) takes the least time of the root lattice (0, "
                        f"Product(0, 0), a lattice's minimum()) or the type int, not "
                        f"{time!r}")
    least = minimum(time)
    if least != time:
        raise TimeError(f"Dataflow(time={time!r}): time is the least time of the root "
                        f"lattice, here {least!r}; to start later, advance_to({time!r}) "
                        "the inputs", time=time)
    return time


#: What `Dataflow` calls on its engine (the contract of `ddflow.engine.local`).
_ENGINE_METHODS = ("compile", "run", "operators", "captured_since", "frontier")


def _check_engine(engine: Any) -> None:
    missing = [m for m in _ENGINE_METHODS if not callable(getattr(engine, m, None))]
    if missing:
        raise GraphError(f"engine must be an engine object (LocalEngine(workers=...), "
                         f"ddflow.engine.bsp.InProcessShards(...), SparkEngine(...)), not "
                         f"{engine!r}: it has no {', '.join(missing)}")
