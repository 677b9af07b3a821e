"""Progress tracking: which times may still appear where, across scopes and loops.

A *pointstamp* is a time at a place in the graph where data may yet come from: an
input session's current time, an update queued on an edge, or an operator's
capability (a buffered update, a pending reduce time).  The frontier at an
operator's input is the set of minimal times that any pointstamp can still reach it
with, after the time changes along the way: an `Enter` adds round 0, a `Leave` drops
the round, and a `Feedback` edge adds one round.  Times not in advance of that
frontier are complete there.

`input_frontiers` computes them all at once, as the greatest fixed point of

    out(n) = summary_n(meet of n's input frontiers) meet caps(n)
    in(n, p) = out(producer of p) meet (times queued at p)

swept in creation order (a topological order once feedback edges are cut).  Around a
loop every lap adds a round, so the sweep settles after a second lap.  Nothing here
counts empty rounds: a loop is done for an outer time exactly when no pointstamp at
that time remains, however many rounds it took to get there.
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol, Sequence

from lattice import Antichain

EMPTY = Antichain()


class ProgressNode(Protocol):
    inputs: Sequence[Any]

    def capabilities(self) -> Iterable[Any]: ...
    def queued_times(self, port: int) -> Iterable[Any]: ...
    def summary(self, frontier: Antichain) -> Antichain: ...


def meet_all(frontiers: Sequence[Antichain]) -> Antichain:
    """The meet of several frontiers (cheap when they are equal, the common case)."""
    if not frontiers:
        return EMPTY
    first = frontiers[0]
    result = first
    for f in frontiers[1:]:
        if f is result or f == result or f.is_empty():
            continue
        result = f if result.is_empty() else result.meet(f)
    return result


def lower_by(frontier: Antichain, times: Sequence[Any]) -> Antichain:
    """`frontier` met with `times`, allocating nothing when every time is already in
    advance of it (the usual case for capabilities and queued messages)."""
    extra = [t for t in times if not frontier.less_equal(t)]
    if not extra:
        return frontier
    return Antichain(frontier.elements + tuple(extra))


def input_frontiers(nodes: Sequence[ProgressNode]) -> dict[Any, tuple[Antichain, ...]]:
    """The input frontier of every port of every node, as a tuple per node.

    Swept in creation order; a node reading a producer later in that order (a
    feedback edge) reads last sweep's value, so sweeps repeat until no such value
    changed: once for an acyclic graph, two or three times around a loop.
    """
    position = {id(n): i for i, n in enumerate(nodes)}
    back_edges = [(n, p) for i, n in enumerate(nodes) for p in n.inputs
                  if position[id(p)] >= i]
    out: dict[int, Antichain] = {id(n): EMPTY for n in nodes}
    ins: dict[Any, tuple[Antichain, ...]] = {}
    while True:
        read = [out[id(p)] for _n, p in back_edges]
        for n in nodes:
            ports = []
            for p, producer in enumerate(n.inputs):
                f = out[id(producer)]
                queued = n.queued_times(p)
                ports.append(lower_by(f, queued) if queued else f)
            if not n.inputs:
                # A source: updates queued for it (a session's, or another shard's
                # delivery) are pointstamps at its one external port.
                queued = n.queued_times(0)
                if queued:
                    ports.append(Antichain(queued))
            ports_t = tuple(ports)
            ins[n] = ports_t
            f_out = n.summary(meet_all(ports_t)) if ports_t else EMPTY
            caps = n.capabilities()
            if caps:
                f_out = lower_by(f_out, caps) if f_out.elements else Antichain(caps)
            out[id(n)] = f_out
        if all(out[id(p)] == r for (_n, p), r in zip(back_edges, read)):
            return ins
