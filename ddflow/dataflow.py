"""The front door: `Dataflow`, its scopes, graph nodes and input sessions.

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
from typing import Any, Callable, Iterable, Iterator, Sequence

from lattice import Antichain, Product, less_equal, minimum, same_lattice
from ddflow.capture import Capture, CaptureOp  # noqa: F401 - re-exported: ddflow.dataflow.Capture
from ddflow.diff import check_diff
from ddflow.errors import DataError, GraphError, SessionClosedError, TimeError
from operators.base import Operator

EMPTY = Antichain()


class Scope:
    """A timestamp domain: the root, or a loop nested in a parent scope."""

    def __init__(self, dataflow: Dataflow, parent: Scope | None, name: str,
                 max_rounds: int | None = None, on_limit: str = "raise") -> None:
        self.dataflow = dataflow
        self.parent = parent
        self.name = name
        self.max_rounds = max_rounds
        self.on_limit = on_limit
        self.minimum = (minimum(dataflow.time) if parent is None
                        else Product(parent.minimum, 0))
        self.depth = 0 if parent is None else parent.depth + 1

    def __repr__(self) -> str:
        return f"Scope({self.name!r})"


class Node:
    """One operator of the graph, as described: engines instantiate it once per shard
    (worker) with `factory(shard, lookup)` and keep the instances themselves."""

    def __init__(self, dataflow: Dataflow, scope: Scope, name: str, kind: str,
                 inputs: Sequence[Node], factory: Callable[[int, Callable], Operator],
                 exchange: Callable[[Any], Any] | None = None) -> None:
        dataflow._check_building()
        self.dataflow = dataflow
        self.id = dataflow._next_id()
        self.scope = scope
        self.name = name
        self.kind = kind
        self.inputs: list[Node] = list(inputs)
        self.factory = factory
        self.exchange = exchange
        self.consumers: list[tuple[Node, int]] = []
        self.stages: list = []
        for port, producer in enumerate(self.inputs):
            producer.consumers.append((self, port))
        dataflow.nodes.append(self)

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.name!r})"


class InputSession:
    """Feeds updates into one input collection, at times no earlier than `time`.

    `insert`, `remove` and `update` act at the session's current time; `update_at`
    at any time in advance of it; `advance_to` moves the time forward (which lets
    the engine finish earlier times); `close` ends the input.  Every check happens
    here, before anything is recorded.
    """

    def __init__(self, dataflow: Dataflow, node: Node, name: str) -> None:
        self.dataflow = dataflow
        self.node = node
        self.name = name
        self.time = node.scope.minimum
        self.closed = False
        self._pending: list[tuple] = []

    def insert(self, data: Any) -> None:
        self.update_at(data, self.time, 1)

    def remove(self, data: Any) -> None:
        self.update_at(data, self.time, -1)

    def update(self, data: Any, diff: Any = 1) -> None:
        self.update_at(data, self.time, diff)

    def update_at(self, data: Any, time: Any, diff: Any = 1) -> None:
        if (type(time) is int and type(self.time) is int and time >= self.time
                and type(diff) is int and not self.closed):
            # The common case (int times, int diffs), checked with fewer calls.
            try:
                hash(data)
            except TypeError:
                pass          # the full path below reports it
            else:
                self._pending.append((data, time, diff))
                return
        self._check_open("update_at", data, time)
        self._check_time(time, data, "update_at")
        if not less_equal(self.time, time):
            raise TimeError(f"update at {time!r} is not in advance of the session's time "
                            f"{self.time!r} (time may not go backwards)",
                            operator=self.name, record=data, time=time)
        try:
            hash(data)
        except TypeError as exc:
            raise DataError(f"data must be hashable ({exc}); use tuples, not lists or dicts",
                            operator=self.name, record=data, time=time) from exc
        check_diff(diff, operator=self.name, record=data, time=time)
        self._pending.append((data, time, diff))

    def extend(self, updates: Iterable[tuple]) -> None:
        """Add many `(data, time, diff)` updates; all are checked before any is kept."""
        updates = list(updates)
        saved = len(self._pending)
        try:
            for u in updates:
                if not isinstance(u, tuple) or len(u) != 3:
                    raise DataError("expected (data, time, diff) triples", operator=self.name,
                                    record=u)
                self.update_at(*u)
        except BaseException:
            del self._pending[saved:]
            raise

    def insert_dataframe(self, frame: Any, time: str | None = None,
                         diff: str | None = None) -> int:
        """Add the rows of a Spark DataFrame as updates (see `ddflow.engine.spark_io`)."""
        from ddflow.engine.spark_io import feed_dataframe
        return feed_dataframe(self, frame, time=time, diff=diff)

    def advance_to(self, time: Any) -> None:
        self._check_open("advance_to", None, time)
        self._check_time(time, None, "advance_to")
        if not less_equal(self.time, time):
            raise TimeError(f"advance_to({time!r}) would move the session back from "
                            f"{self.time!r}", operator=self.name, time=time)
        self.time = time

    def close(self) -> None:
        """No more updates: every time becomes complete once in-flight work is done."""
        self.closed = True

    def frontier(self) -> Antichain:
        # One time is its own antichain (`advance_to` checked its lattice).
        return EMPTY if self.closed else Antichain._trusted((self.time,))

    @property
    def pending(self) -> list[tuple]:
        """Updates given since the last successful `run()` (a copy)."""
        return list(self._pending)

    def discard(self, data: Any) -> list[tuple]:
        """Withdraw the pending updates of `data` (say, the record a failed `run()`
        named) and return them; the other pending updates stay."""
        gone = [u for u in self._pending if u[0] == data]
        self._pending = [u for u in self._pending if u[0] != data]
        return gone

    def clear(self) -> list[tuple]:
        """Withdraw and return every pending update."""
        return self.take_pending()

    def take_pending(self) -> list[tuple]:
        """Withdraw and return every pending update (what an engine does at a step)."""
        pending, self._pending = self._pending, []
        return pending

    def restore_pending(self, updates: list[tuple]) -> None:
        """Give back updates taken by `take_pending` (a failed step), ahead of any
        given since, so nothing is lost and the order is kept."""
        self._pending[:0] = updates

    def _check_open(self, what: str, data: Any, time: Any) -> None:
        if self.closed:
            raise SessionClosedError(f"{what} on input '{self.name}' after close()",
                                     operator=self.name, record=data, time=time)

    def _check_time(self, time: Any, data: Any, what: str) -> None:
        if not same_lattice(time, self.time):
            raise TimeError(f"{what}: {time!r} is not a time of this dataflow's lattice "
                            f"(times look like {self.time!r})",
                            operator=self.name, record=data, time=time)


class InputOp(Operator):
    """Source of a session's updates; holds the session's frontier as capability."""

    _state = ("frontier",)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.frontier: Antichain = EMPTY

    def on_input(self, port: int, updates: list) -> None:
        self.records_in += len(updates)
        # Consolidate first: an update and its retraction in one step cancel.
        self.emit(self.consolidate(updates))

    def capabilities(self) -> Iterable[Any]:
        return self.frontier.elements


#: What the modules above this one register when they are imported: "collection",
#: the type `Dataflow.new_collection` wraps its node in (`ddflow.collection`), and
#: "to_dot", the renderer of `Dataflow.to_dot` (`ddflow.viz`).  Imports point down
#: (ARCHITECTURE, section 2), so the front door cannot import its own fluent API or
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
        if time is int:
            time = 0
        self.time = time
        self.nodes: list[Node] = []
        self.sessions: list[InputSession] = []
        self.captures: list[Capture] = []
        self.root = Scope(self, None, "root")
        self.fuse = fuse
        if engine is None:
            engine = LocalEngine(workers=workers)
        elif workers != 1:
            raise GraphError("give workers to the engine, not to Dataflow, when passing an engine")
        self.engine = engine
        self._ids = 0
        self._compiled = False
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
        """Undo every node added inside the block if it raises (a failed build of an
        `iterate` body leaves no half-wired loop behind)."""
        mark = len(self.nodes)
        n_captures = len(self.captures)
        self._arrangement_log: list = []
        try:
            yield
        except BaseException:
            added = set(map(id, self.nodes[mark:]))
            del self.nodes[mark:]
            del self.captures[n_captures:]
            for node in self.nodes:
                node.consumers = [(c, p) for c, p in node.consumers if id(c) not in added]
            for collection, by_self in self._arrangement_log:
                collection._arranged.pop(by_self, None)
            raise
        finally:
            self._arrangement_log = None

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids - 1

    def _check_building(self) -> None:
        if self._compiled:
            raise GraphError("the dataflow has already run: build every operator before the "
                             "first run(), or start a new Dataflow")

    # -- running -------------------------------------------------------------
    def run(self) -> None:
        """Do all the work the input frontiers allow.

        On any error the step is rolled back and the sessions keep their updates, so
        nothing is lost and nothing is half-applied.
        """
        if not self._compiled:
            from ddflow.engine.plan import prepare
            prepare(self)
            self.engine.compile(self)
            self._compiled = True
        self.engine.run(self)

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
        """Records processed by all operators: records in plus trace records read."""
        return sum(r["records_in"] + r["work"] for r in self.metrics())

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
