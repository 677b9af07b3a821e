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

Where the head projects a variable away (`ends(x, z) :- g(x, y), g(y, z), g(x,
z)`), a head tuple sums several bindings, which may cancel (a relation holding a
negative record): a tuple of net multiplicity 0 can come out of part of them, so
net records do not bound what a subset gives.  The plan's support is then the
head tuples of every binding over its sources' supports (`flow.pairs[id(n)]`
keeps each with its records and chain); a demanded `(z, c)` demands every
record of every such binding of `z` at chains `<= c`, cancelling ones too; and
the forward closure (what the explanation may hold) is the head tuples of the
bindings of the sources' reached records.  The bindings are found by left-deep
binary joins (as `ddflow.query`'s binary plan), not worst-case optimally: the
explanation's joins over supports may hold more intermediate records than the
forward plan does.

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


def binds_every_variable(q: Any) -> bool:
    """Whether the head of conjunctive query `q` binds every variable of its atoms
    (then a head tuple has one binding)."""
    return {v for atom in q.atoms for v in atom} <= set(q.head)


def conjunctive_support(flow: Any, n: Node, q: Any) -> Any:
    """The support `(z, chain)` of plan output `n`: its net records when the head
    binds every variable (a subset of the inputs gives a subset of its bindings,
    each its own tuple); otherwise the head tuples of every binding over the
    sources' supports, kept with their records as `flow.pairs[id(n)]` for the
    demands: a tuple cancelled between bindings in the full run (net 0) may come
    out of part of them, so it must be in the support."""
    if binds_every_variable(q):
        return flow.net(n)
    table = _join_atoms(q, [flow.support[id(q.sources[s])].map(lambda xc: (xc[0], (xc[1], None)))
                            for s in q.atom_sources], name="explain.bindings")
    flow.pairs[id(n)] = table.map(lambda zb: (zb[0], (zb[1][0], zb[1][1][0])))
    return flow.pairs[id(n)].map(lambda zb: (zb[0], zb[1][1]))


def conjunctive_demands(flow: Any, n: Node, q: Any, mine: Any, scope: Scope) -> list:
    """The demands of demanded head tuples `mine` (`(z, (c, question))`): for a
    head binding every variable, `atom_demands`; otherwise every record of every
    binding over the sources' supports that gives `z` at chains `<= c`, those that
    cancel included, so that on the explanation the same bindings sum to the same
    multiplicity (the law above)."""
    if binds_every_variable(q):
        return atom_demands(flow, n, q, mine, scope)
    routes = tuple(flow.router(q.sources[s]) for s in q.atom_sources)
    table = flow.enter("T", n, flow.pairs[id(n)], scope)
    return [mine.join(table).flat_map(
        lambda kv, routes=routes: [(*route(x, kv[1][0][0]), kv[1][0][1])
                                   for route, x in zip(routes, kv[1][1][0])]
        if chain_le(kv[1][1][1], kv[1][0][0]) else (), name="explain.bindings")]


def conjunctive_reached(flow: Any, n: Node, q: Any, d: Any, scope: Scope) -> Any:
    """`R` of plan output `n`, `(z, (chain, question))`: the head tuples the
    explanation may hold.  For a head binding every variable, `reached_bindings`;
    otherwise the head tuples of the bindings of the sources' reached records
    (cancelled ones too: on a subset they may not cancel)."""
    if binds_every_variable(q):
        return reached_bindings(flow, n, q, d, scope)
    reached: dict = {}
    for s in q.atom_sources:
        if s not in reached:
            reached[s] = flow.reached(q.sources[s], d)
    return _join_atoms(q, [reached[s] for s in q.atom_sources],
                       name="explain.reached").map(lambda zb: (zb[0], zb[1][1]))


def _join_atoms(q: Any, relations: list, name: str) -> Any:
    """The bindings of `q`'s atoms, atom `j` bound to records `(x, (chain, tag))`
    of `relations[j]` (`x` its variables' values in order), bindings joining only
    records of one tag (a question, or None): records `(z, (records, (chain,
    tag)))`, `z` the head tuple, `records` the bound record per atom, `chain` the
    latest of theirs.  Left-deep joins, each next atom one sharing a variable with
    those bound (as `ddflow.query`'s binary plan orders them)."""
    atoms = q.atoms
    order = [0]
    rest = list(range(1, len(atoms)))
    layout = list(atoms[0])
    while rest:
        j = next((j for j in rest if set(layout).intersection(atoms[j])), rest[0])
        rest.remove(j)
        order.append(j)
        layout.extend(v for v in atoms[j] if v not in layout)
    cur = relations[0].map(lambda xe: (xe[0], (xe[0],), xe[1]))
    bound = list(atoms[0])
    for j in order[1:]:
        a = atoms[j]
        on = [v for v in bound if v in a]
        lk = _Picker(tuple(bound.index(v) for v in on))
        rk = _Picker(tuple(a.index(v) for v in on))
        rx = _Picker(tuple(a.index(v) for v in a if v not in bound))
        left = cur.map(lambda s, lk=lk: ((lk(s[0]), s[2][1]), s))
        right = relations[j].map(lambda xe, rk=rk: ((rk(xe[0]), xe[1][1]), xe))
        cur = left.join(right).map(
            lambda kv, rx=rx: (kv[1][0][0] + rx(kv[1][1][0]), kv[1][0][1] + (kv[1][1][0],),
                               (chain_max(kv[1][0][2][0], kv[1][1][1][0]), kv[0][1])),
            name=name)
        bound.extend(v for v in a if v not in bound)
    zkey = _Picker(tuple(bound.index(v) for v in q.head))
    # Records in join order, put back in atom order.
    back = tuple(order.index(j) for j in range(len(atoms)))
    return cur.map(lambda s, zkey=zkey, back=back: (
        zkey(s[0]), (tuple(s[1][k] for k in back), s[2])), name=name)


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
    nodes then fall to the rule of last resort)."""
    ids = {id(n) for n in nodes}
    plans: dict = {}
    inner: set = set()
    for n in nodes:
        q = n.conjunctive
        if q is None or not all(id(s) in ids for s in q.sources):
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


__all__ = ["atom_demands", "binds_every_variable", "chain_le", "chain_max", "conjunctive_demands",
           "conjunctive_plans", "conjunctive_reached", "conjunctive_support", "reached_bindings"]
