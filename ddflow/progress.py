"""Progress tracking: which times may still appear where, kept up to date by counts.

A *pointstamp* is a time at a place of the graph where data may yet come from: an
operator's capability (a buffered update, a pending reduce time, an input session's
time) sits at the operator's output; a batch queued for an operator sits at one of
its input ports.  The frontier at an input port is the set of minimal times that any
pointstamp can still reach it with, after the time changes along the way.

The scheme is the one of timely dataflow's progress tracking (Murray, McSherry,
Isaacs, Isard, Barham, Abadi: "Naiad: a timely dataflow system", SOSP 2013; and
timely's `progress/reachability.rs`):

* How an operator moves times is a `Summary` (`ddflow.summaries`), and the least
  ways of getting from one place to another are antichains of them, computed
  **once**, when a plan is compiled (`path_summaries`).
* A `Tracker` keeps the pointstamps of every location with their minimal times (the
  location's own frontier) and, for every input port, how many locations' minimal
  times reach it at each time (mapped by each path summary).  Only a change of a
  location's own frontier travels, to exactly the ports it reaches; a port's
  frontier is recomputed only when a time joins below it or one of its own elements
  leaves.  Nothing is ever swept from scratch.
* Counts are kept only at the ports of operators that read their frontier (and
  which those are is known when the plan is compiled); any other port's frontier
  is computed from the locations' frontiers when someone asks.

The table of path summaries is quadratic in the graph; past a size, a plan takes
`ddflow.progress_edges.EdgeTracker` instead, which passes changes from one kept
frontier to the next (the two share `Pointstamps`, the recording of changes).

What it does not do: decide when to look (the engines' `Worker` does), or know what
a time is beyond `less_equal` and the summaries.  The invariant (`Tracker._check`):
a time is complete at a port exactly when no pointstamp can reach the port at or
before it, the same fixed point the previous, sweeping version computed.
Nothing here counts empty rounds: a loop is done for an outer time exactly when no
pointstamp at that time remains, however many rounds it took to get there.

"""

from __future__ import annotations

from collections import Counter
from operator import itemgetter
from typing import Any, Sequence

from lattice import Antichain, Product, less_equal, sort_key
from lattice.antichain import in_advance
from ddflow.column_batch import record_time_counts
from ddflow.columnar import Columns
from ddflow.errors import ProgressError
from ddflow.summaries import IDENTITY, Summary, path_summaries, port_numbers

EMPTY = Antichain()


# The shapes of summary the tracker applies inline, and how it recognises them.
SAME, ADD, PUSH, POP, OTHER = range(5)


def kind_of(s: Summary) -> tuple[int, Any]:
    """`(shape, argument)` of a summary: the identity, `add` rounds, entering at a
    round, leaving one scope, or anything else (applied by `Summary.apply`)."""
    if s == IDENTITY:
        return SAME, None
    if not s.pop and not s.push:
        return ADD, s.add
    if not s.pop and not s.add and len(s.push) == 1:
        return PUSH, s.push[0]
    if s.pop == 1 and not s.add and not s.push:
        return POP, None
    return OTHER, s


class Pointstamps:
    """The pointstamps recorded at every location, and each location's own frontier
    (its minimal pointstamps): what either tracker (this module's `Tracker`, by path
    summaries, or `ddflow.progress_edges.EdgeTracker`, edge by edge) pushes on.

    `update(location, time, delta)` records a change; `own_moves()` applies the
    recorded changes and returns how the locations' own frontiers moved.
    """

    def __init__(self, n_locations: int, ports: Sequence[tuple[int, ...]]) -> None:
        #: location -> {time: pointstamps there}, and the minimal times of those (a
        #: tuple in `sort_key` order: only the ports' frontiers are ever handed out)
        self.stamps: list[dict] = [{} for _ in range(n_locations)]
        self._own: list[tuple] = [()] * n_locations
        #: port -> its frontier as last handed out, and whether it is due for a
        #: recompute (its elements moved since)
        self._frontier: list[Antichain] = [EMPTY] * n_locations
        self._stale: list[bool] = [False] * n_locations
        #: node -> the tuple `frontiers(node)` last returned, while still current:
        #: handed out again as the same object, so that comparing it with what an
        #: operator was told last costs nothing
        self._node_frontiers: list[tuple] = [tuple(EMPTY for _ in ps) for ps in ports]
        #: minimal times -> their frontier, shared (see `_intern`)
        self._antichains: dict[tuple, Antichain] = {(): EMPTY}
        #: Changes recorded and not yet propagated: (location, time) -> delta.
        self.changes: dict[tuple[int, Any], int] = {}
        #: counters: pointstamp changes, times whose (net) move was pushed to the
        #: ports, port frontiers rebuilt
        self.changed = self.pushed = self.rebuilt = 0

    # -- recording ---------------------------------------------------------------
    def update(self, location: int, time: Any, delta: int) -> None:
        self.update_counts(location, {time: delta})

    def update_counts(self, location: int, counts: dict, sign: int = 1) -> None:
        changes = self.changes
        for time in counts:
            n = counts[time]
            key = (location, time)
            if key in changes:
                m = changes[key] + sign * n
                if m:
                    changes[key] = m
                else:
                    del changes[key]
            elif n:
                changes[key] = sign * n

    def propagate(self) -> dict[int, bool]:
        """Apply the recorded changes; the nodes whose input frontier may have moved
        (the keys of the dict returned)."""
        return self.settle()[0]

    def frontiers(self, node: int) -> tuple[Antichain, ...]:
        """The frontier at each of `node`'s input ports (changes recorded since the
        last `propagate` or `settle` are not applied): the same tuple object as the
        last call's as long as none of them moved, so that comparing it with what
        the operator was told last costs nothing."""
        return self.settle(node, push=False)[1]

    def settle(self, node: int | None = None, push: bool = True
               ) -> tuple[dict[int, bool], tuple[Antichain, ...] | None]:
        raise NotImplementedError

    def own_moves(self) -> dict[Any, tuple]:
        """Apply the recorded changes to the pointstamps: the locations whose own
        frontier moved, grouped by time, `{time: ((location, +-1), ...)}`.

        Only a change of a location's own frontier travels: a batch queued at a time
        its port already holds reaches nobody new.
        """
        changes = self.changes
        if not changes:
            return {}
        self.changes = {}
        # Subscripts and `in` rather than method calls in these loops (dicts and
        # lists of flags, not sets): they run for every change, and a call costs
        # more than the work it would do.
        stamps, own_frontier = self.stamps, self._own
        dirty: dict[int, bool] = {}
        n_changes = 0
        for key in changes:
            n_changes += 1
            location, time = key
            delta = changes[key]
            own = stamps[location]
            old = own[time] if time in own else 0
            m = old + delta
            if m < 0:
                raise ProgressError(f"pointstamp count of {time!r} at location {location} "
                                    f"would become {m}", time=time)
            if m:
                own[time] = m
            else:
                del own[time]
            if location in dirty:
                continue
            if old == 0:
                # A new time moves the location's frontier unless something there is <= it.
                elements = own_frontier[location]
                if not elements or not in_advance(elements, time):
                    dirty[location] = True
            elif m == 0 and time in own_frontier[location]:
                dirty[location] = True
        self.changed += n_changes
        # The frontier changes of the dirty locations, grouped by time: a pointstamp
        # moving from one operator to the next is one time leaving a location and
        # entering another, and downstream of both the two cancel.
        by_time: dict[Any, tuple] = {}
        for location in dirty:
            old_f = own_frontier[location]
            new_f = ()
            for t in stamps[location]:
                if new_f:       # two times or more: sort them out
                    new_f = minimal_times(stamps[location])
                    break
                new_f = (t,)    # the common case: one time, nothing to sort
            own_frontier[location] = new_f
            for t in old_f:
                if t not in new_f:
                    by_time[t] = (by_time[t] + ((location, -1),) if t in by_time
                                  else ((location, -1),))
            for t in new_f:
                if t not in old_f:
                    by_time[t] = (by_time[t] + ((location, 1),) if t in by_time
                                  else ((location, 1),))
        return by_time

    def _intern(self, elements: tuple) -> Antichain:
        """The frontier of these minimal times, kept so that ports (and epochs) with the
        same frontier share one object."""
        interned = self._antichains
        if elements in interned:
            return interned[elements]
        if len(interned) >= KEPT:
            interned.clear()
        f = interned[elements] = Antichain.trusted(elements)
        return f

    def _check_stamps(self) -> None:
        """No pending change, counts positive, each location's frontier is that of
        its pointstamps."""
        assert not self.changes, self.changes
        for location, own in enumerate(self.stamps):
            assert all(n > 0 for n in own.values()), own
            assert self._own[location] == Antichain(own).elements, (location, own)


class Tracker(Pointstamps):
    """Pointstamp counts at every location, and the frontier at every input port.

    `update(location, time, delta)` records a change (say an operator's new
    capability, or a batch queued at a port, counted once per distinct time);
    `propagate()` pushes the recorded changes along the path summaries and returns the
    nodes whose input frontier may have moved.  `frontiers(node)` reads them, and
    `settle(node)` does both in one call (an engine's visit of an operator).

    >>> from lattice import Product as P
    >>> # a loop: 0 = enter, 1 = the body (reads enter and feedback), 2 = feedback
    >>> from ddflow.summaries import ENTER, IDENTITY, NEXT_ROUND
    >>> tr = Tracker.of([[], [0, 2], [1]], [ENTER, IDENTITY, NEXT_ROUND])
    >>> tr.update(0, P(5, 0), +1)        # the enter may still emit at (5, 0)
    >>> sorted(tr.propagate())
    [1, 2]
    >>> tr.frontiers(1), tr.frontiers(2)
    ((Antichain([Product(5, 0)]), Antichain([Product(5, 1)])), (Antichain([Product(5, 0)]),))
    >>> tr.update(0, P(5, 0), -1); _ = tr.propagate(); tr.frontiers(1)
    (Antichain([]), Antichain([]))
    """

    @classmethod
    def of(cls, inputs: Sequence[Sequence[int]], steps: Sequence[Summary]) -> Tracker:
        """A tracker for a graph given as each node's producers and summary."""
        return cls(port_numbers(inputs), path_summaries(inputs, steps))

    def __init__(self, ports: Sequence[tuple[int, ...]],
                 reach: Sequence[Sequence[tuple[int, tuple[Summary, ...]]]],
                 watched: Sequence[bool] | None = None) -> None:
        self.ports = ports
        self.reach = reach
        n_locations = len(self.reach)
        super().__init__(n_locations, ports)
        self.node_of = [0] * n_locations
        for i, ps in enumerate(self.ports):
            for port in ps:
                self.node_of[port] = i
        # Counts are kept only at the ports of `watched` nodes (those that act on
        # their frontier): a map, a concat or a capture never asks during a run, and
        # leaving their ports out halves the work of every change.  The others'
        # frontiers are computed when asked, from the locations' own (`_pull`).
        self.watched = [True] * len(ports) if watched is None else list(watched)
        kept = [self.watched[self.node_of[port]] for port in range(n_locations)]
        # The reach split for the hot loop: ports reached unchanged, and the others.
        # (`path_summaries` hands out the identity as `IDENTITY` itself: `is` first.)
        self._direct = [tuple(port for port, ss in r if kept[port] and IDENTITY in ss)
                        for r in reach]
        self._moved_by = [tuple((port, s) for port, ss in r if kept[port]
                                for s in ss if s is not IDENTITY and s != IDENTITY)
                          for r in reach]
        self._reverse: dict[int, list] = {}
        for location, r in enumerate(reach):
            for port, ss in r:
                if not kept[port]:
                    self._reverse.setdefault(port, []).append((location, ss))
        #: port -> {time: locations whose minimal pointstamps reach it at that time}
        self.counts: list[dict] = [{} for _ in range(n_locations)]
        self._effects: dict[tuple, tuple] = {}

    def settle(self, node: int | None = None, push: bool = True
               ) -> tuple[dict[int, bool], tuple[Antichain, ...] | None]:
        """Apply the recorded changes (if `push`), then read `node`'s input frontiers
        (if a node is given): the nodes whose input frontier may have moved (the keys
        of the dict), and those frontiers.  One call per operator visit.
        """
        by_time = self.own_moves() if push else {}
        # The net effect of each pattern of (location, +-1) of a time on the ports is
        # computed once and kept.  Applied to the counts straight away: each
        # pattern's effect is already net, and two patterns meeting at one (port,
        # time) in one call is rare (when it happens, a transient zero only marks a
        # frontier for a recompute).
        effects = self._effects
        make = tuple.__new__        # builds a Product without a Python-level call
        moved: dict[int, bool] = {}
        counts, frontier, stale = self.counts, self._frontier, self._stale
        n_times = 0
        for time in by_time:
            n_times += 1
            pattern = by_time[time]
            # (Slices, not len(): no call for the one or two locations of the usual move.)
            if not pattern[1:]:
                key = pattern
            elif not pattern[2:]:
                a, b = pattern
                key = pattern if a < b else (b, a)
            else:
                key = tuple(sorted(pattern))
            effect = effects[key] if key in effects else self._effect(key)
            # One image of the time per summary, then every port it reaches that way.
            for kind, arg, entries in effect:
                # The common summaries inline (a call per image would cost more).
                if kind == SAME:
                    t = time
                elif kind == ADD:
                    t = make(Product, (time[0], time[1] + arg))
                elif kind == PUSH:
                    t = make(Product, (time, arg))
                elif kind == POP:
                    t = time[0]
                else:
                    t = arg.apply(time)
                for port, delta, node_there in entries:
                    c = counts[port]
                    old = c[t] if t in c else 0
                    new = old + delta
                    if new:
                        c[t] = new
                    else:
                        del c[t]
                    if stale[port]:
                        # Due for a recompute already, but its node may not have been
                        # scheduled then (it wanted nothing): a time coming or going
                        # reports it again.
                        if (old <= 0) != (new <= 0):
                            moved[node_there] = True
                        continue
                    if old <= 0 < new:
                        # A new time lowers the frontier only if nothing there is <= it.
                        elements = frontier[port].elements
                        if not elements or not in_advance(elements, t):
                            stale[port] = True
                            moved[node_there] = True
                    elif new <= 0 < old and t in frontier[port].elements:
                        stale[port] = True
                        moved[node_there] = True
        self.pushed += n_times
        if node is None:
            return moved, None
        ports = self.ports[node]
        if not self.watched[node]:
            return moved, tuple(self._pull(port) for port in ports)
        for port in ports:
            if stale[port]:
                # Recomputed from the counts: a new object only if it moved, and then
                # the one already made for the same times if there is one.
                stale[port] = False
                self.rebuilt += 1
                elements = minimal_times(counts[port])
                if elements != frontier[port].elements:
                    interned = self._antichains
                    if elements in interned:
                        frontier[port] = interned[elements]
                    else:
                        frontier[port] = self._intern(elements)
                    if not ports[1:]:
                        self._node_frontiers[node] = (frontier[port],)
                    elif not ports[2:]:
                        self._node_frontiers[node] = (frontier[ports[0]], frontier[ports[1]])
                    else:
                        self._node_frontiers[node] = tuple(map(frontier.__getitem__, ports))
        return moved, self._node_frontiers[node]

    def _effect(self, pattern: tuple) -> tuple:
        """What a time leaving and entering these locations does to the watched ports:
        `(shape, argument, ((port, +-n, its node), ...))` per summary (see
        `kind_of`), for every (port, summary) whose count does not cancel."""
        total: dict[tuple, int] = {}
        for location, delta in pattern:
            for port in self._direct[location]:
                total[(port, IDENTITY)] = total.get((port, IDENTITY), 0) + delta
            for port, s in self._moved_by[location]:
                total[(port, s)] = total.get((port, s), 0) + delta
        by_summary: dict[Summary, list] = {}
        for (port, s), n in total.items():
            if n:
                by_summary.setdefault(s, []).append((port, n, self.node_of[port]))
        effect = tuple((*kind_of(s), tuple(entries)) for s, entries in by_summary.items())
        if len(self._effects) >= KEPT:
            self._effects.clear()
        self._effects[pattern] = effect
        return effect

    # -- reading -------------------------------------------------------------------
    def frontier(self, port: int) -> Antichain:
        node = self.node_of[port]
        if not self.watched[node]:
            return self._pull(port)
        return self.frontiers(node)[self.ports[node].index(port)]

    def _pull(self, port: int) -> Antichain:
        """An unwatched port's frontier, from the frontiers of the locations reaching it."""
        own = self._own
        return Antichain([s.apply(t) for location, ss in self._reverse.get(port, ())
                          for t in own[location] for s in ss])

    def _check(self) -> None:
        """Invariants: no pending change, counts positive, each location's frontier is
        that of its pointstamps, each port's count is the number of locations whose
        frontier reaches it at that time, and port frontiers match the counts."""
        self._check_stamps()
        expect: list[dict] = [{} for _ in self.counts]
        for location in range(len(self.stamps)):
            for time in self._own[location]:
                for port, summaries in self.reach[location]:
                    if not self.watched[self.node_of[port]]:
                        continue
                    for s in summaries:
                        t = s.apply(time)
                        expect[port][t] = expect[port].get(t, 0) + 1
        assert expect == self.counts, (expect, self.counts)
        for node, ports in enumerate(self.ports):
            if self.watched[node]:
                want = tuple(Antichain(self.counts[port]) for port in ports)
                assert tuple(self.frontier(port) for port in ports) == want, node
                assert self.frontiers(node) == want, node


#: How many patterns of location frontier changes (whose effect on the ports is
#: remembered: a graph shows few, mostly a time passing from one operator to the
#: next), how many distinct frontiers (shared objects) and how many time keys
#: (`ddflow.progress_edges`) a tracker keeps.
KEPT = 4096


def minimal_times(counts: dict) -> tuple:
    """The minimal times of a count table (whose counts are all positive), in
    `sort_key` order: the elements of its `Antichain`."""
    n = len(counts)
    if n <= 2:
        # One or two times (the usual case: this round and the next epoch), compared
        # inline.
        if n < 2:
            return tuple(counts)
        a, b = counts
        if (type(a) is Product and type(b) is Product and type(a[0]) is int
                and type(a[1]) is int and type(b[0]) is int and type(b[1]) is int):
            if b[0] < a[0] or (b[0] == a[0] and b[1] < a[1]):
                a, b = b, a                 # a first in the tuple order
            # Then b <= a is impossible, and a <= b exactly when its round is too.
            return (a,) if a[1] <= b[1] else (a, b)
    a = next(iter(counts))
    if type(a) is int:
        return (min(counts),)
    if type(a) is Product and type(a[0]) is int and type(a[1]) is int:
        # Products of ints (the times at one port are all of one shape): the tuple
        # order is a linear extension of the product order, and the minimal elements
        # have strictly falling rounds in it.
        kept = []
        low = None
        for t in sorted(counts, key=tuple):
            if low is None or t[1] < low:
                kept.append(t)
                low = t[1]
        return tuple(kept)
    kept = []
    for t in sorted(counts, key=sort_key):
        if not any(less_equal(k, t) for k in kept):
            kept.append(t)
    return tuple(kept)


def time_counts(updates: Sequence[tuple]) -> dict:
    """How many updates of a batch sit at each time: the batch's pointstamps (of a
    list of triples, or of record columns, `ddflow.columnar`)."""
    if type(updates) is Columns:
        return record_time_counts(updates)
    if len(updates) == 1:
        return {updates[0][1]: 1}
    return Counter(map(_time_of, updates))


_time_of = itemgetter(1)
