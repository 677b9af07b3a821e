"""The explanation rule of a worst-case optimal plan, read as one conjunctive query.

A delta query or a Generic Join (`ddflow.query` marks its output node with a
`Conjunctive`) computes the law of `query`: its records are the head variables'
values of every binding of the atoms to records of their sources, with
multiplicity the product of the atoms'.  Its half joins and indices have no rule
of their own: `ddflow.explain_flow` reads the plan as one operator over its
sources, with the rule here.

The law it keeps: on the explanation alone, a demanded head tuple `z` at round
chain `c` comes out with its full-run multiplicity there.  When each atom's source
gives its demanded records their full-run multiplicities, that holds if every
binding that can give `z` at chains `<= c` on a subset of the inputs has all its
records demanded: then the bindings present on the explanation are the full
run's, each with the full run's product.

Where the head binds every variable of the atoms (a triangle), a head tuple has
one binding, its atoms' records the tuple projected: a demanded `(z, c)` selects,
for each atom, the source records agreeing with `z` on the atom's variables at
chains `<= c` (its three edges), and the plan's support is its net records.

Round chains (`chain_le`, `chain_max`) are shared with `ddflow.explain_flow`: a
record of a loop is `(x, chain)`, `chain` the rounds of its update, outermost
first.  This module reads the backward flow only through its public methods
(`enter`, `router`, `reached`, `net`, `support`).
"""

from __future__ import annotations

from typing import Any

from ddflow.graph import Node, Scope


def chain_le(a: tuple, b: tuple) -> bool:
    """The product order on round chains of equal length."""
    return all(x <= y for x, y in zip(a, b))


def chain_max(a: tuple, b: tuple) -> tuple:
    """The lattice join of two round chains of equal length."""
    return tuple(max(x, y) for x, y in zip(a, b))


def atom_demands(flow: Any, n: Node, q: Any, mine: Any, scope: Scope) -> list:
    """A conjunctive query's demands: a demanded head tuple `(z, c)`, projected
    on each atom's variables that the head binds, selects the atom's source
    records agreeing with it there at chains `<= c`.  Every binding giving `z`
    uses only such records, so on them `z` comes out as in the full run; where
    the head binds all of an atom's variables (a triangle), that is the one
    record the binding uses."""
    out = []
    for src, xkey, zkey in _projections(q):
        p = q.sources[src]
        r = flow.router(p)
        support = flow.enter(("Q", xkey.positions), p, flow.support[id(p)].map(
            lambda xc, xkey=xkey: (xkey(xc[0]), xc)), scope)
        out.append(mine.map(lambda zq, zkey=zkey: (zkey(zq[0]), zq[1])).join(support)
                   .flat_map(lambda kv, r=r: ((*r(kv[1][1][0], kv[1][0][0]), kv[1][0][1]),)
                             if chain_le(kv[1][1][1], kv[1][0][0]) else ()))
    return out

def reached_bindings(flow: Any, n: Node, q: Any, d: Any, scope: Scope) -> Any:
    """`R` of a conjunctive query: its full-run head tuples (its support) with,
    for every atom, a reached record of the atom's source agreeing with it on
    the head's variables, at the latest of their chains, per question.  Where
    the head binds every variable these are the bindings of reached records;
    otherwise a superset (the atoms' records are matched apart), which only
    demands more."""
    cur = None
    for src, xkey, zkey in _projections(q):
        reached = flow.reached(q.sources[src], d).map(
            lambda xq, xkey=xkey: ((xkey(xq[0]), xq[1][1]), xq[1][0])).distinct()
        if cur is None:
            net = flow.enter(("B", zkey.positions), n, flow.net(n).map(
                lambda zc, zkey=zkey: (zkey(zc[0]), zc)), scope)
            cur = reached.map(lambda kq: (kq[0][0], (kq[1], kq[0][1]))).join(net).map(
                lambda kv: (kv[1][1][0], (chain_max(kv[1][0][0], kv[1][1][1]),
                                          kv[1][0][1])))
        else:
            cur = cur.map(lambda zq, zkey=zkey: ((zkey(zq[0]), zq[1][1]),
                                                 (zq[0], zq[1][0]))).join(reached).map(
                lambda kv: (kv[1][0][0], (chain_max(kv[1][0][1], kv[1][1]), kv[0][1])))
    return cur


class _Picker:
    """`x -> (x[p] for p in positions)` as a tuple; `positions` names it (an
    arrangement per projection)."""

    def __init__(self, positions: tuple) -> None:
        self.positions = positions

    def __call__(self, x: tuple) -> tuple:
        return tuple(x[p] for p in self.positions)


def _projections(q: Any) -> list:
    """Per distinct (source, variables the head binds, their head positions) of
    conjunctive query `q`'s atoms: `(source index, key of a source record, key of a head tuple)`, the two
    keys the values of those variables, in one order."""
    out, seen = [], set()
    for vars_, src in zip(q.atoms, q.atom_sources):
        bound = [v for v in vars_ if v in q.head]
        xpos = tuple(vars_.index(v) for v in bound)
        zpos = tuple(q.head.index(v) for v in bound)
        if (src, xpos, zpos) not in seen:
            seen.add((src, xpos, zpos))
            out.append((src, _Picker(xpos), _Picker(zpos)))
    return out


def conjunctive_plans(nodes: list) -> tuple[dict, set]:
    """The worst-case optimal plans among `nodes` (a cone, in graph order) read as
    one operator: `{id(output): Conjunctive}` and the ids of their inner nodes (the
    half joins and indices between the sources and the output).  A plan one of
    whose inner nodes something else in the cone reads is left as it is (its
    nodes then fall to the rule of last resort).

    Only a plan whose head binds every variable of its atoms is read so: then a head
    tuple has one binding, and its atoms' records are exactly the tuple projected.
    A head that projects a variable away sums several bindings, which may cancel
    (a relation holding a negative record): a tuple of net multiplicity 0 in the
    full run can come out of part of its bindings, and the record that cancelled it
    must be demanded too, which the net records cannot tell (a review found the
    explanation of such a plan not reproducing).  Those plans keep the rules of
    their half joins, built from the inputs' supports."""
    ids = {id(n) for n in nodes}
    plans: dict = {}
    inner: set = set()
    for n in nodes:
        q = n.conjunctive
        if q is None or not all(id(s) in ids for s in q.sources):
            continue
        if not {v for atom in q.atoms for v in atom} <= set(q.head):
            continue
        # Back from the output to the sources, not past them (a source in a loop
        # reads the output itself, through the loop's feedback).
        sources = {id(s) for s in q.sources}
        mine: set = set()
        stack = [p for p in n.inputs if id(p) not in sources]
        while stack:
            m = stack.pop()
            if id(m) not in mine:
                mine.add(id(m))
                stack.extend(p for p in m.inputs if id(p) not in sources)
        if all(id(c) in mine or c is n for m in nodes if id(m) in mine
               for c, _p in m.consumers if id(c) in ids) and not any(
                m.kind in ("input", "feedback") for m in nodes if id(m) in mine):
            plans[id(n)] = q
            inner |= mine
    return plans, inner


__all__ = ["atom_demands", "chain_le", "chain_max", "conjunctive_plans", "reached_bindings"]
