"""Progress tracking hop by hop: frontiers kept at a few ports, changes passed on.

`ddflow.progress.Tracker` pushes a change of a location's frontier straight to every
watched input port it reaches, along the least path summaries between all pairs of
places (`ddflow.summaries.path_summaries`, computed when a plan is compiled).  That
table is quadratic in the graph: a chain of 1,000 concat + distinct steps (4,000
nodes) holds 18 million entries and took 14.5 s to build before its first run.

`EdgeTracker` builds no such table.  As in timely dataflow's
`progress/reachability.rs`, a frontier is kept by counts of the times *implied* at a
place, and a change of it is passed on to the next places, where it travels further
only if it moves their frontier.  Timely keeps one at every place and passes changes
along every edge; here only *junctions* keep one (`_junctions`: the ports of watched
nodes, of nodes read twice, and of loop feedbacks), and a change hops from a
location to the next junctions along the least summaries of the paths between them
(`path_summaries` with `stop`): a few per location, so building is linear in the
graph, and a change costs the junction frontiers it moves.  The frontier of any
other port is pulled from the junctions and pointstamps before it when asked (only
watched nodes ask during a run).

Changes are taken lowest time first, then upstream first, as timely does: when a
time `t` leaves the head of a loop, `t + 1` (implied round the loop by `t` itself)
surfaces there until the removal of `t` has gone round; taking all of `t`'s changes
before any of `t + 1`'s lets the two meet at one place.  Times are ordered by
`flat_key`, a total order over the times of every scope that a feedback raises.

The fixed point is that of the path summaries: a time is complete at a port exactly
when no pointstamp can reach it at or before it (`EdgeTracker._check` compares the
two).  Which tracker a plan gets is `ddflow.engine.plan`'s switch (`set_tracking`).
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Any, Sequence

from lattice import Antichain, Product, sort_key
from lattice.antichain import in_advance
from ddflow.errors import ProgressError
from ddflow.progress import (ADD, KEPT, POP, PUSH, SAME, Pointstamps, kind_of,
                             minimal_times)
from ddflow.summaries import (Summary, components, consumers_of, path_summaries,
                              port_numbers)


def flat_key(t: Any) -> tuple:
    """A total order over the times of all scopes of one dataflow: the coordinates,
    outermost first (an outer time sorts before its rounds: `(e,) < (e, 0)`).  It
    extends each scope's partial order, and a feedback raises it."""
    if type(t) is int:
        return (t,)
    if type(t) is Product:
        return flat_key(t[0]) + flat_key(t[1])
    return (sort_key(t),)


def _moved(kind: int, arg: Any, t: Any) -> Any:
    """`t` moved by a summary of shape `kind` (`ddflow.progress.kind_of`)."""
    if kind == SAME:
        return t
    if kind == ADD:
        return Product(t[0], t[1] + arg)
    if kind == PUSH:
        return Product(t, arg)
    if kind == POP:
        return t[0]
    return arg.apply(t)


class EdgeTracker(Pointstamps):
    """Pointstamp counts at every location, and the frontiers of the junctions, kept
    by passing frontier changes from junction to junction (the interface of
    `ddflow.progress.Tracker`).

    >>> from lattice import Product as P
    >>> from ddflow.summaries import ENTER, IDENTITY, NEXT_ROUND
    >>> tr = EdgeTracker([[], [0, 2], [1]], [ENTER, IDENTITY, NEXT_ROUND])
    >>> tr.update(0, P(5, 0), +1)
    >>> sorted(tr.propagate())
    [1, 2]
    >>> tr.frontiers(1), tr.frontiers(2)
    ((Antichain([Product(5, 0)]), Antichain([Product(5, 1)])), (Antichain([Product(5, 0)]),))
    >>> tr.update(0, P(5, 0), -1); _ = tr.propagate(); tr.frontiers(1)
    (Antichain([]), Antichain([]))
    """

    def __init__(self, inputs: Sequence[Sequence[int]], steps: Sequence[Summary],
                 watched: Sequence[bool] | None = None,
                 found: Sequence[Sequence[int]] | None = None) -> None:
        """A tracker of the graph whose node `i` reads `inputs[i]` and moves times by
        `steps[i]`; `watched` nodes (default all) are reported when their input
        frontier moves; `found`: the graph's `components`, if already known."""
        self.inputs = [tuple(ins) for ins in inputs]
        self.steps = list(steps)
        self.ports = ports = port_numbers(inputs)
        n = len(inputs)
        n_locations = n + sum(len(ps) for ps in ports)
        super().__init__(n_locations, ports)
        self.node_of = list(range(n)) + [0] * (n_locations - n)
        for i, ps in enumerate(ports):
            for port in ps:
                self.node_of[port] = i
        self.watched = [True] * n if watched is None else list(watched)
        #: location -> the node to report when its frontier moves (a watched
        #: node's input port), else -1
        self._report = [self.node_of[loc] if loc >= n and self.watched[self.node_of[loc]]
                        else -1 for loc in range(n_locations)]
        consumers = consumers_of(inputs)
        if found is None:
            found = components(n, consumers)
        #: location -> whether it keeps a frontier (a junction, see `_junctions`)
        self.junction = _junctions(inputs, steps, self.watched, ports, consumers, found)
        #: location -> ((junction, shape, argument), ...): one per least summary of
        #: the paths from it to the junctions it reaches without passing another
        self._onward = tuple(
            tuple((target, *kind_of(s)) for target, ss in hop for s in ss)
            for hop in path_summaries(inputs, steps, self.junction))
        #: location -> ((location before it, shape, argument), ...): the plain edges
        #: backwards, to compute a frontier that is not kept (`_pull`)
        back: list[list] = [[] for _ in range(n_locations)]
        for i, ins in enumerate(inputs):
            kind, arg = kind_of(steps[i])
            back[i] = [(port, kind, arg) for port in ports[i]]
            for p, producer in enumerate(ins):
                back[ports[i][p]].append((producer, SAME, None))
        self._back = tuple(tuple(b) for b in back)
        # Upstream first: components of the graph upstream first, a node's ports
        # before its output (within a component, by node number).
        self._rank = [0] * n_locations
        k = 0
        for component in reversed(found):
            for j in sorted(component):
                for port in ports[j]:
                    self._rank[port] = k
                self._rank[j] = k + 1
                k += 2
        #: junction -> {time: how many of the own minimal pointstamps of the
        #: locations hopping to it (itself included) and of the frontiers of the
        #: junctions hopping to it, moved by the hop, are that time}; its minimal times
        self.implied: list[dict] = [{} for _ in range(n_locations)]
        self._elements: list[tuple] = [()] * n_locations
        self._keys: dict[Any, tuple] = {}

    def settle(self, node: int | None = None, push: bool = True
               ) -> tuple[dict[int, bool], tuple[Antichain, ...] | None]:
        """Apply the recorded changes (if `push`), then read `node`'s input frontiers
        (if a node is given): the watched nodes whose input frontier moved (the keys
        of the dict), and those frontiers."""
        by_time = self.own_moves() if push else None
        moved = self._push(by_time) if by_time else {}
        if node is None:
            return moved, None
        ports = self.ports[node]
        if not self.junction[ports[0]]:
            return moved, tuple(self._intern(self._pull(port)) for port in ports)
        stale = self._stale
        for port in ports:
            if stale[port]:
                stale[port] = False
                self.rebuilt += 1
                elements = self._elements[port]
                if elements != self._frontier[port].elements:
                    self._frontier[port] = self._intern(elements)
                    self._node_frontiers[node] = tuple(self._frontier[p] for p in ports)
        return moved, self._node_frontiers[node]

    def _push(self, by_time: dict) -> dict[int, bool]:
        """Push the own frontiers' moves (`own_moves`) edge by edge, lowest time
        first, until no frontier moves."""
        keys, rank, onward = self._keys, self._rank, self._onward
        implied, elements_of, stale = self.implied, self._elements, self._stale
        report = self._report
        if len(keys) >= KEPT:
            keys.clear()
        # (location, time) -> net change not yet applied; the heap holds one entry
        # per key of `pending` (a sequence number breaks ties: times never compared).
        pending: dict[tuple, int] = {}
        heap: list[tuple] = []
        seq = 0
        junction = self.junction
        for time in by_time:
            for location, delta in by_time[time]:
                # A junction counts its own pointstamps; any other location hands
                # them straight to the junctions it hops to.
                hops = (((location, SAME, None),) if junction[location]
                        else onward[location])
                for target, kind, arg in hops:
                    y = time if kind == SAME else _moved(kind, arg, time)
                    to = (target, y)
                    if to in pending:
                        pending[to] += delta
                    else:
                        pending[to] = delta
                        key = keys[y] if y in keys else keys.setdefault(y, flat_key(y))
                        heap.append((key, rank[target], seq, to))
                        seq += 1
        heap.sort()
        moved: dict[int, bool] = {}
        n_times = 0
        while heap:
            at = heappop(heap)[3]
            delta = pending.pop(at)
            if not delta:
                continue
            n_times += 1
            location, t = at
            c = implied[location]
            old = c[t] if t in c else 0
            new = old + delta
            if new:
                c[t] = new
            else:
                del c[t]
            before = elements_of[location]
            if old <= 0 < new:
                # A new time moves the frontier only if nothing there is <= it.
                if not before:
                    after: tuple = (t,)
                elif in_advance(before, t):
                    continue
                else:
                    after = minimal_times(c)
            elif new <= 0 < old and t in before:
                after = minimal_times(c) if c else ()
            else:
                continue
            elements_of[location] = after
            stale[location] = True
            node = report[location]
            if node >= 0:
                moved[node] = True
            # The frontier moved: its times that left and came hop on.
            for sign, gone, kept in ((-1, before, after), (1, after, before)):
                for x in gone:
                    if x in kept:
                        continue
                    for target, kind, arg in onward[location]:
                        y = x if kind == SAME else _moved(kind, arg, x)
                        to = (target, y)
                        if to in pending:
                            pending[to] += sign
                        else:
                            pending[to] = sign
                            key = keys[y] if y in keys else keys.setdefault(y, flat_key(y))
                            heappush(heap, (key, rank[target], seq, to))
                            seq += 1
        self.pushed += n_times
        return moved

    # -- reading -------------------------------------------------------------------
    def frontier(self, port: int) -> Antichain:
        node = self.node_of[port]
        return self.frontiers(node)[self.ports[node].index(port)]

    def _pull(self, location: int) -> tuple:
        """The minimal times that can still reach a location that keeps no frontier
        (not a junction): its own, and those of the locations before it (a
        junction's kept frontier, or pulled the same way), moved by the edges.  No
        loop avoids the junctions (`_junctions`), so the walk back ends."""
        junction, back, kept = self.junction, self._back, self._elements
        memo: dict[int, tuple] = {}
        stack = [location]
        while stack:
            loc = stack[-1]
            if loc in memo:
                stack.pop()
                continue
            missing = [b for b, _kind, _arg in back[loc] if not junction[b] and b not in memo]
            if missing:
                stack += missing
                continue
            stack.pop()
            times = list(self._own[loc])
            for b, kind, arg in back[loc]:
                times += [_moved(kind, arg, x) for x in (kept[b] if junction[b] else memo[b])]
            memo[loc] = Antichain(times).elements
        return memo[location]

    def _check(self) -> None:
        """Invariants: no pending change, counts positive, each location's frontier is
        that of its pointstamps; each junction's counts are the own frontiers of the
        locations hopping to it and the frontiers of the junctions hopping to it,
        moved by the hops; and every port's frontier is the one of the path summaries
        (the minimal images of all pointstamps reaching it: `ddflow.progress.Tracker`'s
        fixed point)."""
        self._check_stamps()
        expect: list[dict] = [{} for _ in self.implied]

        def count(hops: tuple, times: tuple) -> None:
            for target, kind, arg in hops:
                for t in times:
                    y = _moved(kind, arg, t)
                    expect[target][y] = expect[target].get(y, 0) + 1

        for location, own in enumerate(self._own):
            if self.junction[location]:
                count(((location, SAME, None),), own)
                elements = self._elements[location]
                assert elements == minimal_times(self.implied[location]), location
                count(self._onward[location], elements)
            else:
                count(self._onward[location], own)
        assert expect == self.implied, (expect, self.implied)
        reach = path_summaries(self.inputs, self.steps)
        images: list[list] = [[] for _ in self.implied]
        for location, own in enumerate(self._own):
            for port, summaries in reach[location]:
                images[port].extend(s.apply(t) for t in own for s in summaries)
        for node, ports in enumerate(self.ports):
            want = tuple(Antichain(images[port]) for port in ports)
            assert self.frontiers(node) == want, (node, self.frontiers(node), want)
            assert tuple(self.frontier(port) for port in ports) == want, node


def _junctions(inputs: Sequence[Sequence[int]], steps: Sequence[Summary],
               watched: Sequence[bool], ports: Sequence[tuple[int, ...]],
               consumers: Sequence[Sequence[tuple[int, int]]],
               found: Sequence[Sequence[int]]) -> list[bool]:
    """The locations that keep a frontier (all input ports of a node, or none):

    * the ports of watched nodes (they read it);
    * the ports of nodes read by two or more (so that every other location has one
      way on to its next junctions: the hop table stays linear in the graph);
    * the ports of every feedback in a loop (a node adding rounds), which cuts every
      loop: a change must not go round one in a single hop.

    A loop left in the cut graph moves no time; counts passed round it would hold
    each other up, so it is refused (the front door builds none)."""
    n = len(inputs)
    junction = [False] * (n + sum(len(ps) for ps in ports))

    def looped(component: Sequence[int], succ: Sequence[Sequence[tuple[int, int]]]) -> bool:
        return len(component) > 1 or any(c == component[0] for _q, c in succ[component[0]])

    for component in found:
        if looped(component, consumers):
            for j in component:
                s = steps[j]
                if s.add > 0 and not s.pop and not s.push:
                    for port in ports[j]:
                        junction[port] = True
    cut = [[(q, c) for q, c in consumers[j] if not junction[q]] for j in range(n)]
    for component in components(n, cut):
        if looped(component, cut):
            raise ProgressError(f"nodes {sorted(component)} form a loop with no feedback "
                                "(no node adding a round): progress cannot advance round it")
    for i in range(n):
        if watched[i] or len(consumers[i]) > 1:
            for port in ports[i]:
                junction[port] = True
    return junction
