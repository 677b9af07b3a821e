"""Where a circuit's results and clocks are read: captures read by time, from the driver.

What this module isolates: everything a circuit learns about a run, and it learns it
only through the front door after each root tick: `Capture.updates` of captures on the
streams it watches, read *by time*.  A sink's Z-set at tick `t` is the capture's
content at `t` (its updates at exactly `t` for a delta stream, their accumulation for
an integral one), never "what arrived during tick `t`": the engine's `delay` emits the
updates of tick `t + 1` while running tick `t`, and on a sharded engine what arrives
when is the scheduler's business.  After tick `t` the frontier of every root collection
has passed `t` (every session stands at `t + 1`), so what a capture holds at times
`<= t` is final.

Nothing here runs inside an operator.  An `inspect` callback would: on the BSP
engines (`ddflow.engine.bsp`) operators run on copies made by pickling (in Spark's
Python workers, or rebuilt from a shard's log), so a callback mutating a driver
object mutates a copy.  Captures are read the same way on every
engine, so a circuit gives the same sinks, inspect callbacks and clock hooks on
`LocalEngine(workers=1)`, on `workers=3` and on `InProcessShards`.

Left out: reading only what is new since the last tick.  `Capture.updates` is the
whole consolidated history, so a tick costs one pass over each watched capture (read
at most once per tick, and only when something asks).

`replay_iterations` gives child circuits their per-iteration clock ("Notes on DBSP", 2.6)
from the same captures; see its docstring for what it promises.
"""

from __future__ import annotations

from typing import Any, Callable

from lattice import Product, sort_key
from ddflow.updates import accumulate

from ddflow.circuit.base import INTEGRAL, root_tick

#: What this module handles of `ddflow.circuit.core` (which imports it): named for
#: the reader, typed loosely so that the import runs one way.
Circuit = Node = Stream = Any


class Reading:
    """A capture of one collection, read from the driver and indexed by time.

    One `Capture.updates` call per root tick, made when first asked; the circuit calls
    `forget()` after every run so that the next question reads again.
    """

    def __init__(self, collection: Any) -> None:
        self.capture = collection.capture(name="circuit.read", in_loop=True)
        self._updates: list[tuple] | None = None
        self._by_time: dict[Any, dict] = {}

    def forget(self) -> None:
        self._updates = None
        self._by_time = {}

    def updates(self) -> list[tuple]:
        """Every update captured so far, consolidated (`Capture.updates`)."""
        if self._updates is None:
            self._updates = self.capture.updates
            by_time: dict[Any, dict] = {}
            for d, t, r in self._updates:
                by_time.setdefault(t, {})[d] = r       # consolidated: one (d, t) each
            self._by_time = by_time
        return self._updates

    def at_time(self, time: Any) -> dict:
        """The Z-set of the updates at exactly `time` (a copy)."""
        self.updates()
        return dict(self._by_time.get(time, {}))

    def accumulated(self, time: Any) -> dict:
        """The accumulation at `time` (the lattice order: `Product` times compare
        componentwise)."""
        return accumulate(self.updates(), time)

    def times(self) -> list:
        """The times with a nonzero update, in a linear extension of the order."""
        self.updates()
        return sorted(self._by_time, key=sort_key)


class Record:
    """One stream's Z-sets, tick by tick at the root, at any time in a child.

    At the root the value of each tick is kept as the tick closes (a delta stream's
    Z-set is the updates at `t`; an integral stream's value is their running sum, which
    at int times is the accumulation).  In a child it is read from the capture when
    asked, at any `Product(epoch, iteration)`.
    """

    def __init__(self, circuit: Circuit, stream: Stream) -> None:
        self.form = stream.form
        self.at_root = circuit.depth == 0
        self.reading = circuit.root.reading_of(stream.collection)
        self.values: dict[int, dict] = {}
        self._running: dict = {}

    def close_tick(self, tick: int) -> list:
        """Record root tick `tick`; return the times it completed, in order."""
        if not self.at_root:
            return [t for t in self.reading.times() if root_tick(t) == tick]
        delta = self.reading.at_time(tick)
        run = self._running
        for d, r in delta.items():
            run[d] = run.get(d, 0) + r
            if not run[d]:
                del run[d]
        self.values[tick] = dict(run) if self.form == INTEGRAL else delta
        return [tick]

    def at(self, time: Any) -> dict:
        if self.at_root:
            return dict(self.values.get(time, {}))
        if self.form == INTEGRAL:
            return self.reading.accumulated(time)
        return self.reading.at_time(time)

    def times(self) -> list:
        if self.at_root:
            return sorted(self.values)
        return self.reading.times()


class Sink:
    """What a sink node saw: the Z-set of each input stream at each time.

    At the root `at(t)` answers for every tick run; in a child, `at(Product(e, i))`
    answers for any time (the Z-set is empty where nothing changed, in delta form).
    `callback(time, *zsets)`, if given, is called at the end of every root tick: once
    for the tick (root), or once per time of that tick with changes (child), in time
    order.  Everything is read by time from captures (see the module docstring).
    """

    def __init__(self, circuit: Circuit, node: Node, streams: list[Stream],
                 callback: Callable | None) -> None:
        self.circuit = circuit
        self.node = node
        self.streams = streams
        self.callback = callback
        self._records = [Record(circuit, s) for s in streams]
        circuit.root.tick_listeners.append(self._close_tick)

    def _close_tick(self, tick: int) -> None:
        times: set = set()
        for rec in self._records:
            times.update(rec.close_tick(tick))
        if self.callback is not None:
            for t in sorted(times, key=sort_key):
                self.callback(t, *(rec.at(t) for rec in self._records))

    def at(self, time: Any, port: int = 0) -> dict:
        """The Z-set `{data: weight}` of input `port` at `time`."""
        return self._records[port].at(time)

    def times(self, port: int = 0) -> list:
        """The times recorded: every tick run (root), or every time with changes (child)."""
        return self._records[port].times()

    def history(self, port: int = 0) -> list[tuple[Any, dict]]:
        """`[(time, Z-set)]` for every time in `times()`."""
        return [(t, self.at(t, port)) for t in self.times(port)]

    @property
    def updates(self) -> list[tuple]:
        """The compiled collection's update triples, consolidated (input 0)."""
        return self.updates_of(0)

    def updates_of(self, port: int) -> list[tuple]:
        """The compiled collection's update triples, consolidated (input `port`)."""
        return self._records[port].reading.updates()

    def __repr__(self) -> str:
        return f"Sink({self.node.name!r}, gid={list(self.node.global_id)})"


# -- the iteration clocks of child circuits ------------------------------------------------

def _time_depth(t: Any) -> int:
    depth = 0
    while type(t) is Product:
        t, depth = t.outer, depth + 1
    return depth


def _project(t: Any, depth: int) -> Any:
    """`t` (a time of some circuit) as a time of its ancestor at `depth`."""
    for _ in range(_time_depth(t) - depth):
        t = t.outer
    return t


def _last_iterations(circuit: Circuit, tick: int) -> dict[Any, int]:
    """For a child circuit: each parent time of root tick `tick` -> the last iteration
    with a change on the clock edges of the circuit or of any circuit inside it."""
    last: dict[Any, int] = {}
    for c in circuit.nested_circuits():
        for reading in c.clock_readings:
            for t in reading.times():
                if root_tick(t) != tick:
                    continue
                p = _project(t, circuit.depth)
                last[p.outer] = max(last.get(p.outer, 0), p.inner)
    return last


def _has_hooks(circuit: Circuit) -> bool:
    return any(node.start_hooks or node.stop_hooks for node in circuit.walk())


def replay_iterations(root: Circuit, tick: int) -> None:
    """Fire the per-iteration clock hooks of every child circuit for root tick `tick`,
    once the tick has run.

    A child's clock is read from the captures of its import and feedback streams (its
    "clock edges"): for each time `p` of its parent's clock in the tick it runs
    iterations `Product(p, 0)` to `Product(p, k)`, `k` the last iteration at which a
    change crossed a clock edge of the child or of a circuit nested in it (`0` when
    nothing changed: every tick of a parent starts iteration 0).  Each iteration fires
    `clock_start(0, (p, i))` on the child's nodes, then the iterations of circuits
    nested in it, then `clock_stop(0, (p, i))` (scope `k` for nodes `k` levels further
    in), so hooks come well nested, in order and one per iteration.

    What it does not promise: simultaneity.  The engine runs a whole fixed point inside
    one `run()`, and on the BSP engines inside operators that live elsewhere, so these
    hooks fire after the root tick's `run()` and before its stop hooks; they describe
    the iterations, they do not stand between them.  A child with no hooks registered
    (in it or below) is skipped, and its captures are not read.
    """
    def fire(c: Circuit, what: str, t: Any) -> None:
        for node in c.walk():
            (node.clock_start if what == "start" else node.clock_stop)(node.depth - c.depth, t)

    last: dict[int, dict] = {}

    def run(c: Circuit, outer: Any) -> None:
        if id(c) not in last:
            last[id(c)] = _last_iterations(c, tick)
        for i in range(last[id(c)].get(outer, 0) + 1):
            t = Product(outer, i)
            fire(c, "start", t)
            for node in c.nodes:
                if node.child is not None:
                    run(node.child, t)
            fire(c, "stop", t)

    for node in root.nodes:
        if node.child is not None and _has_hooks(node.child):
            run(node.child, tick)
