"""Rules in, collections out: `query("tri(x, y, z) :- g(x, y), g(y, z), g(x, z)", g=edges)`.

What this isolates: a parsed conjunctive rule's atoms normalised to *sources* (one
filtered, projected collection per relation and pattern), and the wiring of one
of three plans over them.  The text (tokens, the parser, `QueryError`) is
`ddflow.syntax`'s; the operators live in `operators.join` and `operators.wcoj`.

The law: the result is the collection of head tuples whose multiplicity is the
product of the atoms' multiplicities, summed over the variable bindings (bag
semantics: what a chain of binary joins gives), at every time:
`acc(query(rule, R..), t) = Q(acc(R, t), ..)`.

Syntax (`ddflow.syntax`): `head(v, ..) :- rel(term, ..), rel(term, ..) [.]`, terms
being variables (`_` a fresh one each time), ints or quoted strings.  A variable
may repeat across atoms (a join) and within an atom (an equality); a constant
filters.  The head lists variables of the body.  A relation's records must be tuples
of an arity of its atoms: anything else raises `DataError` at `run()` naming the
relation, the arity and the record (`checked_relation`); a tuple of another of its
atoms' arities does not match this one.

Strategies:

* `"delta"`: delta queries, after McSherry's dogsdogsdogs (`operators.wcoj.delta`): one
  rule per atom of half joins over shared indices.  The default for cyclic rules.
* `"generic"`: incremental Generic Join, after Völkel's "WCOJ meets DBSP"
  (`operators.wcoj.generic_join`): one operator, int (totally ordered) times only.
* `"binary"`: a left-deep plan of `join`s, atoms in rule order (an atom sharing no
  variable is put after the first one that does).  The default for acyclic rules.

Errors: a syntax error, an unknown relation, a head variable missing from the body
raise `QueryError`, whose message shows the rule and a caret at the place.

>>> import ddflow
>>> df = ddflow.Dataflow()
>>> g_in, g = df.new_collection()
>>> tri = query("tri(x, y, z) :- g(x, y), g(y, z), g(x, z)", g=g).capture()
>>> for e in [(1, 2), (2, 3), (1, 3)]:
...     g_in.insert(e)
>>> g_in.advance_to(1); df.run(); tri.updates
[((1, 2, 3), 0, 1)]
>>> g_in.remove((2, 3)); g_in.advance_to(2); df.run(); tri.updates
[((1, 2, 3), 0, 1), ((1, 2, 3), 1, -1)]
>>> query("tri(x, y) :- g(x, y), h(y, 3)", g=g)
Traceback (most recent call last):
...
ddflow.syntax.QueryError: unknown relation 'h' (given: g)
  tri(x, y) :- g(x, y), h(y, 3)
                        ^
"""

from __future__ import annotations

import sys
import types
from typing import Any, Sequence

import attrs

from ddflow.graph import Node
# The parser's names stay importable from here, where they were first published.
from ddflow.syntax import (Atom, Parser, QueryError, Rule, Term, Token, is_fresh, parse,
                           tokenize)
from lattice import minimum
from operators.wcoj.delta import (Count, Delay, Index, Propose, Stamp, Validate, delta_plan,
                                  key_getter, tuple_getter)
from operators.wcoj.generic_join import GenericJoin

STRATEGIES = ("delta", "generic", "binary")


@attrs.frozen
class Conjunctive:
    """What the output node of a worst-case optimal plan computes, for readers of
    the graph that treat the plan as one operator (explanations: its half joins
    and indices have no rule of their own, `ddflow.explain_flow`).

    The node's records are the `head` variables' values of every binding of the
    `atoms` (each atom's distinct variables, in the order of its source's tuples)
    to records of `sources[atom_sources[j]]`, with multiplicity the product of the
    atoms': the law of `query`."""

    sources: tuple          # the source nodes, each one filtered, projected relation
    atoms: tuple            # per atom, its distinct variables
    atom_sources: tuple     # per atom, the index of its source in `sources`
    head: tuple             # the head's variables


# -- planning ------------------------------------------------------------------------------

def atom_shape(a: Atom) -> tuple[tuple, tuple]:
    """(distinct variables in order, per-position pattern: ('v', k) or ('c', value))."""
    vars_: list = []
    shape = []
    for t in a.terms:
        if t.var is None:
            shape.append(("c", t.value))
        else:
            if t.var not in vars_:
                vars_.append(t.var)
            shape.append(("v", vars_.index(t.var)))
    return tuple(vars_), tuple(shape)


def shape_matcher(shape: tuple):
    """`t -> [projected t]` or `[]`: arity, constants and repeated variables checked."""
    n = len(shape)
    consts = [(k, c) for k, (kind, c) in enumerate(shape) if kind == "c"]
    firsts: dict = {}
    repeats = []
    for k, (kind, x) in enumerate(shape):
        if kind == "v":
            if x in firsts:
                repeats.append((k, firsts[x]))
            else:
                firsts[x] = k
    proj = key_getter([firsts[x] for x in range(len(firsts))])
    one = len(firsts) == 1

    def match(t: Any) -> list:
        if type(t) is not tuple or len(t) != n:
            return []
        for k, c in consts:
            if t[k] != c:
                return []
        for k, k0 in repeats:
            if t[k] != t[k0]:
                return []
        return [(proj(t),) if one else proj(t)]
    return match


def is_cyclic(atoms: Sequence[Sequence[str]]) -> bool:
    """Whether the rule's hypergraph is cyclic (GYO reduction fails).

    >>> is_cyclic([("x", "y"), ("y", "z"), ("x", "z")]), is_cyclic([("x", "y"), ("y", "z")])
    (True, False)
    """
    edges = [set(a) for a in atoms]
    changed = True
    while changed and len(edges) > 1:
        changed = False
        for e in edges:
            lonely = {v for v in e if sum(v in f for f in edges) == 1}
            if lonely:
                e -= lonely
                changed = True
        for n, e in enumerate(edges):
            if any(m != n and e <= f for m, f in enumerate(edges)):
                del edges[n]
                changed = True
                break
    return len(edges) > 1


def query(rule: str, /, strategy: str | None = None, **relations: Any) -> Any:
    """The collection of the head tuples of `rule` over the given relations.

    `relations` maps each relation name of the body to a `Collection` of tuples (all
    of one scope; a relation cannot be called `strategy`, the rule is positional).
    `strategy` is `"delta"`, `"generic"` or `"binary"`; `None` picks `"delta"` for
    cyclic rules and `"binary"` for acyclic ones.  Atoms with the same relation and
    pattern share one filtered source and its indices (`plan`).
    """
    from ddflow.collection import Arranged, Collection

    r = parse(rule)
    if strategy is not None and strategy not in STRATEGIES:
        raise QueryError(f"unknown strategy {strategy!r}; expected one of {STRATEGIES}")
    scope = None
    for a in r.body:
        rel = relations.get(a.name)
        if rel is None:
            given = ", ".join(sorted(relations)) or "none"
            raise QueryError(f"unknown relation '{a.name}' (given: {given})", rule, a.pos)
        if isinstance(rel, Arranged):
            rel = relations[a.name] = rel.as_collection()
        if not isinstance(rel, Collection):
            raise QueryError(f"relation '{a.name}' must be a Collection, not "
                             f"{type(rel).__name__}", rule, a.pos)
        if scope is None:
            scope = rel.scope
        elif rel.scope is not scope:
            raise QueryError(f"relation '{a.name}' is in scope {rel.scope.name}, the others "
                             f"in {scope.name}: enter() them into one scope", rule, a.pos)
    arities: dict = {}
    for a in r.body:
        arities.setdefault(a.name, set()).add(len(a.terms))
    checked = {name: checked_relation(relations[name], name, ns)
               for name, ns in arities.items()}
    return plan(r, checked, strategy)


def checked_relation(rel: Any, name: str, arities: set | frozenset) -> Any:
    """`rel`, with every record checked to be a tuple of one of `arities` on its way
    into a rule: any other record raises a `DataError` naming the relation, the
    arity expected and the record (and, through the step's rollback, the session
    update that fed it: `err.inputs`), instead of silently matching nothing.
    Shared by `query` and `ddflow.datalog`, whose relations are checked at this
    boundary, the first operator that reads them."""
    from ddflow.errors import DataError
    ns = frozenset(arities)
    expected = " or ".join(str(n) for n in sorted(ns))

    def check(t: Any) -> Any:
        if type(t) is tuple and len(t) in ns:
            return t
        shape = (f"a tuple of arity {len(t)}" if type(t) is tuple
                 else f"of type {type(t).__name__}, not a tuple")
        raise DataError(f"relation '{name}' takes tuples of arity {expected}; this record "
                        f"is {shape}", record=t)
    return rel.map(check, name=f"{name}.check")


def plan(r: Rule, relations: dict, strategy: str | None = None,
         shared: dict | None = None) -> Any:
    """Wire rule `r` over `relations` (checked: one `Collection` of one scope per
    body relation) with `strategy` (`None`: by the rule's shape).  `query` and
    `ddflow.datalog` both plan through here.

    `shared`, a dict a caller keeps across the rules it plans into one dataflow,
    makes them share what they would otherwise build twice: one source per
    (collection, pattern) and one index per (source, key columns), whichever rule
    made it first (differential dataflow's "arrange once, join many times").  A
    change of a relation then updates one index, however many rules read it.
    """
    shared = {} if shared is None else shared
    scope = relations[r.body[0].name].scope
    # One source per (relation, pattern): atoms with the same one share its indices.
    sources: list = []
    atoms: list[tuple] = []
    atom_sources: list[int] = []
    for a in r.body:
        vars_, shape = atom_shape(a)
        rel = relations[a.name]
        key = ("source", rel.node, shape)
        src = shared.get(key)
        if src is None:
            label = f"{a.name}{_pattern_text(shape)}"
            if all(kind == "v" for kind, _ in shape) and len(vars_) == len(shape):
                n = len(shape)
                src = rel.filter(lambda t, n=n: type(t) is tuple and len(t) == n, name=label)
            else:
                src = rel.flat_map(shape_matcher(shape), name=label)
            shared[key] = src
        if not any(s is src for s in sources):
            sources.append(src)
        atoms.append(vars_)
        atom_sources.append(next(k for k, s in enumerate(sources) if s is src))
    head = tuple(t.var for t in r.head.terms)
    if strategy is None:
        strategy = "delta" if is_cyclic(atoms) else "binary"
    name = r.head.name
    if strategy == "binary":
        return _binary(sources, atoms, atom_sources, head, name, shared)
    total = type(minimum(scope.minimum)) is int
    if strategy == "generic":
        if not total:
            raise QueryError(f"strategy 'generic' needs totally ordered (int) times, and this "
                             f"rule's relations have times like {scope.minimum!r}; use "
                             f"'delta' or 'binary'")
        return _generic(sources, atoms, atom_sources, head, name)
    return _delta(sources, atoms, atom_sources, head, name, total, shared)


def _pattern_text(shape: tuple) -> str:
    return "(" + ", ".join(f"v{x}" if kind == "v" else repr(x) for kind, x in shape) + ")"


# -- wiring -------------------------------------------------------------------------------

def _binary(sources: list, atoms: list, atom_sources: list, head: tuple, name: str,
            shared: dict) -> Any:
    """Left-deep joins; every intermediate result is arranged (the baseline).

    A source joins through its index by the key columns, whose values are its whole
    tuples: the same index serves any rule joining that source on those columns, on
    either side of the join (a self-join reads one index twice).
    """
    order = [0]
    bound = set(atoms[0])
    rest = list(range(1, len(atoms)))
    while rest:
        j = next((j for j in rest if bound.intersection(atoms[j])), rest[0])
        rest.remove(j)
        order.append(j)
        bound.update(atoms[j])

    def index(s: int, positions: list) -> Any:
        src = sources[s]
        key = ("by", src.node, tuple(positions))
        arranged = shared.get(key)
        if arranged is None:
            kg = key_getter(positions)
            arranged = shared[key] = src.map(
                lambda t, kg=kg: (kg(t), t),
                name=f"{src.node.name}.by[{_pos(positions)}]").arrange_by_key()
        return arranged

    layout = list(atoms[0])
    cur = None      # the joins so far, once there are some
    for j in order[1:]:
        a = atoms[j]
        on = [v for v in layout if v in a]
        new = [v for v in a if v not in layout]
        right = index(atom_sources[j], [a.index(v) for v in on])
        if cur is None:
            left = index(atom_sources[order[0]], [layout.index(v) for v in on])
        else:
            lk = key_getter([layout.index(v) for v in on])
            left = cur.map(lambda b, lk=lk: (lk(b), b), name=f"{name}.key")
        if new:
            rx = tuple_getter([a.index(v) for v in new])
            cur = left.join_map(right, lambda k, b, t, rx=rx: b + rx(t), name=f"{name}.join{j}")
        else:
            cur = left.join_map(right, _left_value, name=f"{name}.join{j}")
        layout.extend(new)
    if cur is None:
        cur = sources[atom_sources[0]]
    return cur.map(tuple_getter([layout.index(v) for v in head]), name=f"{name}.head")


def _left_value(_k: Any, b: Any, _t: Any) -> Any:
    return b


def _generic(sources: list, atoms: list, atom_sources: list, head: tuple, name: str) -> Any:
    from ddflow.collection import Collection
    first = sources[0]
    node = Node(first.dataflow, first.scope, f"{name}.generic_join", "wcoj",
                [s.node for s in sources],
                lambda w, ops: GenericJoin(atoms, atom_sources, len(sources), head,
                                           f"{name}.generic_join"),
                exchange=_to_one)
    node.conjunctive = _described(sources, atoms, atom_sources, head)
    return Collection(node)


def _described(sources: list, atoms: list, atom_sources: list, head: tuple) -> Conjunctive:
    return Conjunctive(tuple(s.node for s in sources), tuple(tuple(a) for a in atoms),
                       tuple(atom_sources), tuple(head))


def _to_one(_data: Any) -> int:
    # The generic join is one operator over all relations: every shard sends its
    # updates to the worker owning key 0.
    return 0


def _delta(sources: list, atoms: list, atom_sources: list, head: tuple, name: str,
           total: bool, indexes: dict) -> Any:
    """One rule per atom: its changes, extended step by step by half joins."""
    from ddflow.collection import Collection

    def index(p, kind: str) -> Node:
        # Count index: key -> (); propose index: key -> extension.  Arranged once per
        # (source, key positions[, extension positions]), shared by every rule.
        k = ("wcoj", sources[p.source].node, kind, p.key_src,
             p.ext_src if kind == "propose" else None)
        if k not in indexes:
            kg = key_getter(p.key_src)
            src = sources[p.source]
            if kind == "count":
                label = f"{name}.count[{p.source}:{_pos(p.key_src)}]"
                proj, by_self = kg, True
            else:
                xg = key_getter(p.ext_src)
                label = f"{name}.propose[{p.source}:{_pos(p.key_src)}->{_pos(p.ext_src)}]"
                proj, by_self = (lambda t, kg=kg, xg=xg: (kg(t), xg(t))), False
            indexes[k] = Node(src.dataflow, src.scope, label, "arrange", [src.node],
                              lambda w, ops, proj=proj, by_self=by_self, label=label:
                              Index(proj, by_self, label),
                              exchange=_safe(kg))
        return indexes[k]

    def validate_index(p) -> Node:
        # The relation's tuples by themselves: the same arrangement `arrange_by_self`
        # gives anyone else.
        return sources[p.source].arrange_by_self(name=f"{name}.validate[{p.source}]").node

    outs = []
    for i in range(len(atoms)):
        plan = delta_plan(atoms, atom_sources, i)
        tag = f"{name}.r{i}"
        # (index node, label, make(arrangement, finish), exchange key) per half join
        ops: list = []
        for step in plan.steps:
            parts = step.participants
            multi = len(step.new_vars) > 1
            if not step.new_vars:
                for p in parts:
                    kf = tuple_getter(p.full_pre)
                    ops.append((validate_index(p), f"{tag}.validate{p.atom}",
                                lambda a, f, p=p, kf=kf, lb=f"{tag}.validate{p.atom}":
                                Validate(a, p.neu, total, kf, None, name=lb, finish=f),
                                _payload_key(kf, total, "plain")))
                continue
            if len(parts) == 1:
                p = parts[0]
                kf = key_getter(p.key_pre)
                ops.append((index(p, "propose"), f"{tag}.propose{p.atom}",
                            lambda a, f, p=p, kf=kf, m=multi, lb=f"{tag}.propose{p.atom}":
                            Propose(a, p.neu, total, kf, None, m, name=lb, finish=f),
                            _payload_key(kf, total, "plain")))
                continue
            for n, p in enumerate(parts):
                kf = key_getter(p.key_pre)
                ops.append((index(p, "count"), f"{tag}.count{p.atom}",
                            lambda a, f, p=p, kf=kf, first=(n == 0), lb=f"{tag}.count{p.atom}":
                            Count(a, p.neu, total, kf, p.atom, first, name=lb),
                            _payload_key(kf, total, "plain" if n == 0 else "counted")))
            for p in parts:
                kf = key_getter(p.key_pre)
                ops.append((index(p, "propose"), f"{tag}.propose{p.atom}",
                            lambda a, f, p=p, kf=kf, m=multi, lb=f"{tag}.propose{p.atom}":
                            Propose(a, p.neu, total, kf, p.atom, m, name=lb),
                            _payload_key(kf, total, "counted")))
            for n, p in enumerate(parts):
                kf = tuple_getter(p.full_pre)
                ops.append((validate_index(p), f"{tag}.validate{p.atom}",
                            lambda a, f, p=p, kf=kf, last=(n == len(parts) - 1),
                            lb=f"{tag}.validate{p.atom}":
                            Validate(a, p.neu, total, kf, p.atom, last, name=lb, finish=f),
                            _payload_key(kf, total, "tagged")))
        hg = tuple_getter([plan.layout.index(v) for v in head])
        stream = sources[atom_sources[i]]
        if not total:
            stream = Collection(Node(stream.dataflow, stream.scope, f"{tag}.stamp", "wcoj",
                                     [stream.node], lambda w, ops, tag=tag: Stamp(f"{tag}.stamp")))
        for n, (arranged, label, make, key_of) in enumerate(ops):
            # The rule's last half join maps its outputs to head tuples itself.
            finish = hg if n == len(ops) - 1 else None
            node = Node(stream.dataflow, stream.scope, label, "wcoj", [stream.node, arranged],
                        lambda w, ops, make=make, arranged=arranged, finish=finish:
                        make(ops(arranged), finish),
                        exchange=_safe(key_of))
            stream = Collection(node)
        if not ops:
            if total:
                stream = stream.map(hg, name=f"{tag}.head")
            else:
                stream = Collection(Node(stream.dataflow, stream.scope, f"{tag}.delay", "wcoj",
                                         [stream.node], lambda w, ops, hg=hg: Delay(hg)))
        outs.append(stream)
    out = outs[0].concat(*outs[1:], name=f"{name}.rules") if len(outs) > 1 else outs[0]
    if out.node.kind != "linear":       # a plan with half joins (not a bare map)
        out.node.conjunctive = _described(sources, atoms, atom_sources, head)
    return out


def _pos(positions: tuple) -> str:
    return ",".join(map(str, positions))


def _payload_key(kf, total: bool, fmt: str):
    """The index key of a record of format `fmt` reaching a half join (for exchange).

    A record that is not of that format (a proposed record passing a proposer it
    does not belong to) still yields some key; where it goes does not matter.
    """
    if fmt == "plain":
        return (lambda d: kf(d)) if total else (lambda d: kf(d[0]))
    if total:
        return lambda d: kf(d[0])
    return lambda d: kf(d[0][0])


def _safe(key_of):
    def exchange(d: Any) -> Any:
        try:
            return key_of(d)
        except Exception:  # noqa: BLE001 - an index batch record: it is not read
            return 0
    return exchange


def wcoj_counters(df: Any) -> dict[str, int]:
    """Work of the worst-case optimal operators of `df`: prefixes in, counted,
    proposed, validated, index entries read (`work`), and records held by the
    arrangements they read (`index_records`) or by a generic join."""
    from operators.arrange import Arrange
    out = {"prefixes": 0, "counted": 0, "proposed": 0, "validated": 0, "work": 0,
           "index_records": 0}
    seen: set = set()
    for node in df.nodes:
        for op in df.engine.operators(node):
            if node.kind == "wcoj" and hasattr(op, "counted"):
                out["prefixes"] += getattr(op, "prefixes", 0) or op.records_in
                out["counted"] += op.counted
                out["proposed"] += op.proposed
                out["validated"] += op.validated
                out["work"] += op.work
                index = getattr(op, "index", None)
                if isinstance(index, Arrange) and id(index) not in seen:
                    seen.add(id(index))
                    out["index_records"] += index.trace_records()
                if isinstance(op, GenericJoin):
                    out["index_records"] += op.trace_records()
    return out


__all__ = ["query", "Conjunctive", "QueryError", "parse", "plan", "Parser", "tokenize", "is_cyclic",
           "is_fresh", "wcoj_counters", "STRATEGIES", "Atom", "Rule", "Term", "Token"]


class _CallableModule(types.ModuleType):
    """`ddflow.query` is both this module and, as the API promises, the function:
    importing a submodule makes it the package's attribute, so the module itself
    answers calls."""

    def __call__(self, rule: str, /, strategy: str | None = None, **relations: Any) -> Any:
        return query(rule, strategy=strategy, **relations)


sys.modules[__name__].__class__ = _CallableModule
