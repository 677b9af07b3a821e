"""Where a circuit's results and clocks live: sinks, and the per-iteration clock.

Split from `ddflow.circuit.core` (which builds circuits and drives ticks): a `Sink`
records what reaches it, tick by tick, through engine captures; `_IterationClock`
turns a child circuit's engine frontier into seed 002's per-iteration clock hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from lattice import Antichain, Product, sort_key
from ddflow.updates import accumulate, consolidate, zset

from ddflow.circuit.base import INTEGRAL, _root_tick

if TYPE_CHECKING:
    from ddflow.circuit.core import Circuit, Node, Stream

class _Recorder:
    """Every update passing a collection, kept by an engine `inspect` (any scope)."""

    def __init__(self, circuit: Circuit, collection: Any, name: str) -> None:
        self.updates: list[tuple] = []
        self.collection = collection.inspect(self.updates.append, name=name)
        circuit.root._recorders.append(self.updates)


class Sink:
    """What a sink node saw: the Z-set of each input stream at each time.

    At the root a sink is an engine capture and `at(t)` answers for every tick run;
    in a child it records the updates passing its streams, and `at(Product(e, i))`
    answers for any time (the Z-set is empty where nothing changed, in delta form).
    `callback(time, *zsets)`, if given, is called for each tick (root) or each time
    with changes (child), in time order, at the end of the root tick.
    """

    def __init__(self, circuit: Circuit, node: Node, streams: list[Stream],
                 callback: Callable | None) -> None:
        self.circuit = circuit
        self.node = node
        self.streams = streams
        self.callback = callback
        self._deltas: list[dict] = [{} for _ in streams]     # root: tick -> Z-set of updates
        self._values: list[dict] = [{} for _ in streams]     # root: tick -> Z-set
        self._running: list[dict] = [{} for _ in streams]
        if circuit.depth == 0:
            self._captures = [s.collection.capture(name=f"sink:{node.name}") for s in streams]
            self._cursors: list[list[int]] = [[] for _ in streams]
            self._recorders = None
        else:
            self._captures = None
            self._recorders = [_Recorder(circuit, s.collection, f"sink:{node.name}")
                               for s in streams]
            self._seen = [0 for _ in streams]
        node.on_clock_stop(self._on_stop)

    def _on_stop(self, scope: int, time: Any) -> None:
        if scope != self.node.depth:
            return                      # only the root clock's stop records
        if self._captures is not None:
            for k, cap in enumerate(self._captures):
                shards, cursors = cap.node.shards, self._cursors[k]
                cursors += [0] * (len(shards) - len(cursors))
                fresh = []
                for w, op in enumerate(shards):
                    fresh.extend(op.updates[cursors[w]:])
                    cursors[w] = len(op.updates)
                delta = zset((d, r) for d, t, r in fresh if t == time)
                self._deltas[k][time] = delta
                run = self._running[k]
                for d, r in delta.items():
                    run[d] = run.get(d, 0) + r
                    if not run[d]:
                        del run[d]
                self._values[k][time] = (dict(run) if self.streams[k].form == INTEGRAL
                                         else delta)
            if self.callback is not None:
                self.callback(time, *(v[time] for v in self._values))
        elif self.callback is not None:
            times = set()
            for k, rec in enumerate(self._recorders):
                times.update(t for _d, t, _r in rec.updates[self._seen[k]:])
                self._seen[k] = len(rec.updates)
            for t in sorted(times, key=sort_key):
                self.callback(t, *(self.at(t, k) for k in range(len(self.streams))))

    def at(self, time: Any, port: int = 0) -> dict:
        """The Z-set `{data: weight}` of input `port` at `time`."""
        if self._captures is not None:
            return dict(self._values[port].get(time, {}))
        ups = self._recorders[port].updates
        if self.streams[port].form == INTEGRAL:
            return accumulate(ups, time)
        return zset((d, r) for d, t, r in ups if t == time)

    def times(self, port: int = 0) -> list:
        """The times recorded: every tick run (root), or every time with changes (child)."""
        if self._captures is not None:
            return sorted(self._values[port])
        return sorted({t for _d, t, _r in self._recorders[port].updates}, key=sort_key)

    def history(self, port: int = 0) -> list[tuple[Any, dict]]:
        """`[(time, Z-set)]` for every time in `times()`."""
        return [(t, self.at(t, port)) for t in self.times(port)]

    @property
    def updates(self) -> list[tuple]:
        """The compiled collection's update triples, consolidated (input 0)."""
        return self.updates_of(0)

    def updates_of(self, port: int) -> list[tuple]:
        if self._captures is not None:
            return self._captures[port].updates
        return consolidate(self._recorders[port].updates)

    def __repr__(self) -> str:
        return f"Sink({self.node.name!r}, gid={list(self.node.global_id)})"


class _IterationClock:
    """A child's iteration clock, read from the updates and the frontier of its import
    and feedback edges (see the module docstring for how faithful that is).

    One iteration is open at a time: it starts when the edge's frontier reaches it or
    a change at it passes the edge, whichever is first, and stops once the frontier
    has passed it; iterations skipped between two seen ones are filled in.
    """

    def __init__(self, circuit: Circuit) -> None:
        self.circuit = circuit
        self.tick: int | None = None
        self.frontier = Antichain()
        self._reset()

    def _reset(self) -> None:
        self.current: Any = None
        self.last: Any = None
        self.done: set = set()
        self.seen: set = set()

    def see(self, update: tuple) -> None:
        t = update[1]
        if self.tick is not None and t not in self.seen and _root_tick(t) == self.tick:
            self.seen.add(t)
            self._fire()

    def watch(self, frontier: Antichain) -> None:
        self.frontier = frontier
        self._fire()

    def begin(self, tick: int) -> None:
        self.tick = tick
        self._reset()
        self._fire()

    def end(self, tick: int) -> None:
        self._fire()
        if self.current is not None:
            self._stop()
        self.tick = None

    def abort(self) -> None:
        self.tick = None
        self._reset()

    def _stop(self) -> None:
        t, self.current = self.current, None
        self._event("stop", t)
        self.done.add(t)
        self.last = t

    def _fire(self) -> None:
        if self.tick is None:
            return
        while True:
            if self.current is not None:
                if self.frontier.less_equal(self.current):
                    return                                   # still running
                self._stop()
            cands = {t for t in self.frontier if _root_tick(t) == self.tick}
            cands |= self.seen
            cands -= self.done
            if not cands:
                return
            t = min(cands, key=sort_key)
            prev = self.last
            if prev is not None and type(t.inner) is int and prev.outer == t.outer:
                for i in range(prev.inner + 1, t.inner):       # rounds jumped over
                    gap = Product(t.outer, i)
                    self._event("start", gap)
                    self._event("stop", gap)
            self.current = t
            self._event("start", t)

    def _event(self, what: str, t: Any) -> None:
        base = self.circuit.depth
        for node in self.circuit.walk():
            if what == "start":
                node.clock_start(node.depth - base, t)
            else:
                node.clock_stop(node.depth - base, t)
