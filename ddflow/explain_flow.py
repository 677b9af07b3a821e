"""Maintained explanations: a backward dataflow built beside the forward one.

Chothia, Liagouris, McSherry, Roscoe, "Explaining Outputs in Modern Data Analytics"
(VLDB 2016), and the explanation rewrite of differential dataflow's interactive IR
(`interactive/src/explain/`): the records to explain are an input collection (the
*questions*), and for every node upstream of the capture a *demand* collection
says which of its records the questions need; per operator family a rule, a join
of the demand with what the forward side holds, turns the demand of a node's
output into demands of its inputs.  At the inputs the demand, joined with the
input, is the explanation: each demanded record with its multiplicity.  Being a
dataflow, it is maintained by the engine as inputs and questions change, with
work that follows the change.  `Capture.explain` (`ddflow.explain`) is the same
construction on a copy of the dataflow fed the inputs of one time, with one
question: one set of rules serves both.

Loop rounds are folded into records.  A collection of a loop becomes, at the root,
records `(x, chain)`, `chain` the rounds of its update (outermost loop first; `()`
outside loops): `Lift` folds the time's rounds into the record and `leave` sums
the outer times, so that at root time `t` the record holds the net update of `x`
at those rounds.  A demand `(x, chain)` means "`x` accumulated at `chain`"; it is
satisfied by anything the forward side holds at a chain `<=` it (componentwise).
Loops that already ran are closed (`Graph.check_building`), so their nodes are
read through a *witness copy* of the loop, grown beside it and fed the same
outer collections (the IR rewrite's witness clone).

Each rule reads an input's *support* `S`, the records it may hold on a subset of
the inputs, not just its accumulation: through concat, negate and the other linear
operators, arrangements and joins the support is built from the inputs' supports
(so a record cancelled between two branches, `x.antijoin(y).concat(x)`, is still
demanded on both: on the explanation alone it may not cancel), and so is a
worst-case optimal join's whose head projects a variable away (its bindings over
its sources' supports); reduces, loop variables and worst-case optimal joins whose
head binds every variable give their net records (`W`, each once).
A support is a collection of `(x, chain)` with positive multiplicities: present or
not is all that counts, so no `distinct` is spent on it.

Rules, for a demanded `(x, c)` of node `n`:

* capture, consolidate, arrange: `x` of the input (by-self arrangements: `x[0]`);
* concat: `x` of every input whose support holds it;
* linear: every `y` of the input's support whose image holds `x` (lineage);
* join (all kinds): both sides of every support pair giving `x`;
* reduce, `distinct_trace`: the support records of `x`'s key (for `min` / `max`
  only those with the winning value or a better one), and the same for every key
  the explanation *reaches* there (below);
* enter: `x` outside, one level out; feedback: `x` one round earlier;
* leave: `x` inside at the last round of an update of `x` there (reachability
  explains a node by edges of its shortest paths from the roots);
* a worst-case optimal plan (delta query, Generic Join: `ddflow.query` marks its
  output with a `Conjunctive`), read as one operator over its sources, its half
  joins and indices left out (`ddflow.explain_conjunctive`: a triangle is
  explained by its three edges);
* anything else: everything its inputs' supports hold.

Supports downstream of a reduce are the full run's records, not what part of a
group gives: were a key's group demanded in part (another path needing some of its
records), the explanation run alone would make the reduce emit a value the full
run never had, which no demand covers.  So beside the demand runs a forward
closure, the records each node may hold on the explanation alone (*reached*: at an
input its demanded records; then through each operator what reached records give,
within its support; at a reduce or a node with no rule, its full-run records for
the reached keys, which the rules above then demand whole), and a reduce key any
reached record lands on is demanded as if its outputs were (`_group`; for `min` /
`max` the full run's winners there, or the whole group when it had none).  Chothia
et al. close an explanation the same way: on it, the operators give the full
run's outputs for every record it touches.

All demands live in one root-level `iterate`, a variable of records `(node, x,
chain, question)` (reached records: `(~node index, ...)`); each round follows one
edge backward or forward, and the loop ends when no
demand changes.  Tagged by question, each question's explanation reads apart.  Operators that move records in time (`delay`, `join_function`) have no
rule and are refused.
"""

from __future__ import annotations

from typing import Any, Callable

from ddflow.errors import DataflowError, GraphError
from ddflow.explain_conjunctive import (chain_le, chain_max, conjunctive_demands,
                                        conjunctive_plans, conjunctive_reached,
                                        conjunctive_support)
from ddflow.graph import Node, Scope, cone
from operators import reduce as red
from operators.base import Operator
from operators.linear import Linear

#: Linear stages with no backward rule: they move records in time.
TIMED_STAGES = ("delay", "join_function")

#: Nodes a demand passes straight through (see `BackwardFlow.router`).
_PASSING = ("capture", "consolidate", "arrange", "enter")


def _nonzero(n: Any) -> int:
    return 1 if n else 0


class Lift(Operator):
    """`(x, t, r)` becomes `((x, rounds of t), t, r)`: the rounds of the `depth`
    loops around it folded into the record, outermost first, so that `leave` keeps
    them apart."""

    def __init__(self, depth: int, name: str = "explain.lift") -> None:
        super().__init__(name)
        self.depth = depth

    def on_input(self, port: int, updates: list) -> None:
        self.records_in += len(updates)
        out = []
        for x, t, r in updates:
            rounds = []
            s = t
            for _ in range(self.depth):
                rounds.append(s[1])
                s = s[0]
            out.append(((x, tuple(reversed(rounds))), t, r))
        self.emit(out)


def parameters(node: Node) -> Any:
    """A fresh, stateless operator of `node` (its join kind and logic, its reduce
    logic, whether an arrangement is by self): built by its factory, any operator
    it looks up built fresh too, so nothing running is read or touched."""
    def lookup(m: Node) -> Any:
        return m.factory(0, lookup)
    return node.factory(0, lookup)


# Lineage and the join pair table call the user's functions on support records,
# which the forward side may never feed them (a record cancelled before an
# arrangement is in the support, not in the trace).  A function raising there is
# "no image": where the forward side does reach that record its own run raises
# (and blames the input), so nothing is lost, and the explanation's operators
# never fail a run the forward side alone would finish.

def _image(op: Any, y: Any) -> list:
    """The records a fresh linear operator gives for `y` alone (with nonzero diff);
    none when one of its functions raises on `y` (see above)."""
    try:
        op.on_input(0, [(y, 0, 1)])
    except DataflowError:       # the operator wraps what user code raised
        op.take_output()        # nothing is emitted before the raise; kept clean
        return []
    return [z for z, _t, r in op.take_output() if r]


def _join_outputs(op: Any, a: tuple, b: tuple) -> list:
    """The records a join gives for the pair `a`, `b` alone; none when its logic
    raises on them (see above)."""
    k = a[0]
    if op.kind == "join":
        return [(k, (a[1], b[1]))]
    if op.kind == "semijoin":
        return [a]
    try:
        if op.kind == "map":
            return [op.logic(k, a[1], b[1])]
        return list(op.logic(k, a[1], b[1]))
    except Exception:  # noqa: BLE001 - user code, on a pair the forward side may not join
        return []


class BackwardFlow:
    """The backward dataflow of `target` (a capture's node, root scope) in its own
    dataflow: `demand` (a root collection of `(node index, x, chain, question)`),
    and for each input of the cone `inputs[id(input node)]`, records `(question,
    x)` with the multiplicity of the demanded input record `x`.  `questions`: a root collection of records of `target`'s input
    to explain.  Built inside the caller's `building()` block."""

    def __init__(self, target: Node, questions: Any) -> None:
        # The front door's own `Collection` class, taken from the questions: this
        # module sits beside it (the capture reads explanations through here).
        self.Collection = Collection = type(questions)
        self.df = target.dataflow
        every = cone(target)
        #: Worst-case optimal plans read as one operator each: `id(output node)` ->
        #: its `Conjunctive`; their inner nodes are left out of `nodes`.
        self.conj, inner = conjunctive_plans(every)
        self.nodes = [n for n in every if id(n) not in inner]
        self.index = {id(n): i for i, n in enumerate(self.nodes)}
        self.ops = {id(n): parameters(n) for n in self.nodes if n.kind != "input"}
        for n in self.nodes:
            for stage in getattr(self.ops.get(id(n)), "stages", ()):
                if stage[0] in TIMED_STAGES:
                    raise GraphError(f"explain: '{n.name}' uses {stage[0]}, which moves "
                                     "records in time: explanations do not follow it",
                                     operator=n.name)
        self._scopes: dict[int, Scope] = {}
        self._copies: dict[int, Node] = {}
        self._witness(every)
        self._w: dict[int, Any] = {}
        self.support: dict[int, Any] = {}
        self.pairs: dict[int, Any] = {}
        self.lineage: dict[int, Linear] = {}
        for n in self.nodes:
            if n.kind != "capture":
                self.support[id(n)] = self._support(n)
        # A demand is `(node index, x, chain, q)`: `q` the question it serves.  A
        # question outside the support of what the capture reads demands nothing.
        source = target.inputs[0]
        route = self.router(source)
        start = (questions.map(lambda x: (x, None)).join(self.support[id(source)])
                 .map(lambda kv, route=route: (*route(kv[0], ()), kv[0]),
                      name="explain.questions"))
        self._entered: dict[tuple, Any] = {}
        self.demand = start.iterate(self._body, name="explain")
        self.inputs = {}
        for n in self.nodes:
            if n.kind == "input":
                i = self.index[id(n)]
                asked = self.demand.flat_map(lambda r, i=i: ((r[1], r[3]),) if r[0] == i
                                             else ())
                self.inputs[id(n)] = (Collection(n).map(lambda x: (x, None)).join(asked)
                                      .map(lambda kv: (kv[1][1], kv[0]),
                                           name=f"explain.{n.name}"))

    # -- the forward side, at the root ------------------------------------------
    def _witness(self, every: list) -> None:
        """Copies of the nodes of loops that already ran (the witness clone), the
        inner nodes of worst-case optimal plans among them (the copy runs them)."""
        loop_nodes = [n for n in every if n.scope.parent is not None]
        if not any(self._outermost(n.scope).running for n in loop_nodes):
            return
        for n in loop_nodes:
            inputs = [] if n.kind == "feedback" else [self._read(p) for p in n.inputs]
            made = self._copies
            factory = n.factory
            self._copies[id(n)] = Node(
                self.df, self._scope(n.scope), n.name, n.kind, inputs,
                lambda w, ops, factory=factory: factory(
                    w, lambda m: ops(made.get(id(m), m))), n.exchange)
        for n in loop_nodes:
            if n.kind == "feedback":
                copy = self._copies[id(n)]
                for p in n.inputs:
                    copy.inputs.append(self._read(p))
                    self._read(p).consumers.append((copy, 0))

    @staticmethod
    def _outermost(scope: Scope) -> Scope:
        while scope.parent is not None and scope.parent.parent is not None:
            scope = scope.parent
        return scope

    def _scope(self, s: Scope) -> Scope:
        if s.parent is None:
            return s
        if id(s) not in self._scopes:
            self._scopes[id(s)] = Scope(self.df, self._scope(s.parent), f"{s.name}.witness",
                                        s.max_rounds, s.on_limit)
        return self._scopes[id(s)]

    def _read(self, n: Node) -> Node:
        return self._copies.get(id(n), n)

    def net(self, n: Node) -> Any:
        """`W`: the net records `(x, chain)` of node `n`, lifted to the root."""
        if id(n) in self._w:
            return self._w[id(n)]
        node = self._read(n)
        depth = node.scope.depth
        if depth == 0:
            out = self.Collection(node).map(lambda x: (x, ()), name="explain.net")
        else:
            lift = Node(self.df, node.scope, "explain.lift", "lift", [node],
                        lambda w, ops, depth=depth: Lift(depth))
            out = self.Collection(lift)
            for _ in range(depth):
                out = out.leave(name="explain.lift")
        # A set: every record with a nonzero net count (a loop's net update at a
        # round, or an input's count, may be negative), once.
        out = out.threshold(_nonzero, name="explain.net")
        self._w[id(n)] = out
        return out

    def _support(self, n: Node) -> Any:
        kind, ins = n.kind, n.inputs
        S = self.support
        if id(n) in self.conj:
            return conjunctive_support(self, n, self.conj[id(n)])
        if kind in ("input", "reduce", "feedback") or kind not in (
                "arrange", "consolidate", "linear", "concat", "join", "enter", "leave"):
            return self.net(n)
        src = S[id(ins[0])]
        if kind == "arrange":
            return src.map(lambda xc: ((xc[0], ()), xc[1])) if self.ops[id(n)].by_self else src
        if kind == "consolidate":
            return src
        if kind == "linear":
            # The stages alone, `inspect` left out: lineage must not call back.
            # (Read from a fresh operator: a copied node's factory holds them.)
            op = Linear([st for st in self.ops[id(n)].stages if st[0] != "inspect"])
            self.lineage[id(n)] = op
            self.pairs[id(n)] = src.flat_map(
                lambda yc, op=op: [(z, yc) for z in _image(op, yc[0])], name="explain.lineage")
            return self.pairs[id(n)].map(lambda p: (p[0], p[1][1]))
        if kind == "concat":
            return S[id(ins[0])].concat(*[S[id(p)] for p in ins[1:]])
        if kind == "join":
            op = self.ops[id(n)]
            left = S[id(ins[0])].map(lambda ac: (ac[0][0], ac))
            right = S[id(ins[1])].map(lambda bc: (bc[0][0], bc))
            self.pairs[id(n)] = left.join(right).flat_map(
                lambda kp, op=op: [(z, (kp[1][0][0], kp[1][1][0],
                                        chain_max(kp[1][0][1], kp[1][1][1])))
                                   for z in _join_outputs(op, kp[1][0][0], kp[1][1][0])],
                name="explain.pairs")
            return self.pairs[id(n)].map(lambda p: (p[0], p[1][2]))
        if kind == "enter":
            return src.map(lambda xc: (xc[0], xc[1] + (0,)))
        # leave: present at some round of the loop
        return src.map(lambda xc: (xc[0], xc[1][:-1]))

    # -- the backward side, inside the `explain` loop ---------------------------
    def enter(self, what: Any, n: Node, coll: Any, scope: Scope) -> Any:
        """`coll` (a root collection read for node `n`, `what` naming the reading)
        arranged once at the root and entered into the `explain` loop's `scope`."""
        key = (what, id(n))
        if key not in self._entered:
            # Arranged at the root, its trace read inside: not arranged again there.
            self._entered[key] = coll.arrange_by_key().enter(scope)
        return self._entered[key]

    def router(self, p: Node) -> Callable[[Any, tuple], tuple]:
        """`(y, c) -> (node index, y', c')`: a demand of `p`'s records as a demand of
        the node it passes through to.  Nodes whose support is their input's, moved
        by a fixed map (captures, consolidations, arrangements, enter), pass a
        demand on unchanged but for that map, without a round of their own: a
        demand there is already inside their support, so their input's holds it."""
        steps = []
        while p.kind in _PASSING:
            if p.kind == "enter":
                steps.append(lambda y, c: (y, c[:-1]))
            elif p.kind == "arrange" and self.ops[id(p)].by_self:
                steps.append(lambda y, c: (y[0], c))
            p = p.inputs[0]
        j = self.index[id(p)]

        def route(y: Any, c: tuple) -> tuple:
            for step in steps:
                y, c = step(y, c)
            return j, y, c
        return route

    def _body(self, d: Any) -> Any:
        scope = d.scope
        parts = [d]
        for n in self.nodes:
            if n.kind == "capture":
                continue
            parts.extend(self._forward(n, d, scope))
            if n.kind == "input" or n.kind in _PASSING:
                continue
            i = self.index[id(n)]
            # One linear operator per step (a copy's chains are not fused).
            mine = d.flat_map(lambda r, i=i: ((r[1], (r[2], r[3])),) if r[0] == i else ())
            if n.kind == "reduce":
                parts.append(self._group(n, mine, self.reached(n.inputs[0], d), scope))
            else:
                parts.extend(self._rule(n, mine, scope))
        return parts[0].concat(*parts[1:]).distinct()

    # -- the forward closure, inside the `explain` loop --------------------------
    def reached(self, p: Node, d: Any) -> Any:
        """The reached records `(x, (chain, question))` of node `p` (`_forward`)."""
        j = ~self.index[id(p)]
        return d.flat_map(lambda r, j=j: ((r[1], (r[2], r[3])),) if r[0] == j else ())

    def _forward(self, n: Node, d: Any, scope: Scope) -> list:
        """`R`, the records of `n` the explanation may hold when run alone: records
        `(~node index, x, chain, question)` of the same variable, a step a round.
        At an input, its demanded records; through every other operator, what the
        reached records of its inputs can give there (within its support).  The
        reduce rule reads it: a key any reached record lands on is demanded whole
        (`_group`), so that on the explanation the reduce gives the full run's
        output for it (and nothing the full run never had, which no demand covers)."""
        i = self.index[id(n)]
        kind, ins = n.kind, n.inputs
        if id(n) in self.conj:
            return [conjunctive_reached(self, n, self.conj[id(n)], d, scope).map(
                lambda xq, i=i: (~i, xq[0], xq[1][0], xq[1][1]))]
        if kind == "input":
            return [d.flat_map(lambda r, i=i: ((~i, r[1], r[2], r[3]),) if r[0] == i else ())]

        def tagged(coll: Any) -> Any:
            return coll.map(lambda xq, i=i: (~i, xq[0], xq[1][0], xq[1][1]))
        if kind == "concat":
            return [tagged(self.reached(p, d)) for p in ins]
        src = self.reached(ins[0], d)
        if kind == "consolidate":
            return [tagged(src)]
        if kind == "arrange":
            return [tagged(src.map(lambda xq: ((xq[0], ()), xq[1])) if self.ops[id(n)].by_self
                           else src)]
        if kind == "enter":
            return [tagged(src.map(lambda xq: (xq[0], (xq[1][0] + (0,), xq[1][1]))))]
        if kind == "leave":
            return [tagged(src.map(lambda xq: (xq[0], (xq[1][0][:-1], xq[1][1]))))]
        if kind == "linear":
            return [tagged(src.flat_map(lambda xq, op=self.lineage[id(n)]: [
                (z, xq[1]) for z in _image(op, xq[0])]))]
        if kind == "join":
            op = self.ops[id(n)]
            left = src.map(lambda aq: ((aq[0][0], aq[1][1]), aq))
            right = self.reached(ins[1], d).map(lambda bq: ((bq[0][0], bq[1][1]), bq))
            return [tagged(left.join(right).flat_map(
                lambda kp, op=op: [(z, (chain_max(kp[1][0][1][0], kp[1][1][1][0]), kp[0][1]))
                                   for z in _join_outputs(op, kp[1][0][0], kp[1][1][0])]))]
        if kind == "feedback":
            # The next round's update, where the variable has one (its support):
            # a reached record stops there when the full run's loop does.
            held = self.enter("F", n, self.support[id(n)], scope)
            return [tagged(src.join(held).flat_map(
                lambda kv: ((kv[0], (kv[1][1], kv[1][0][1])),)
                if chain_le(kv[1][0][0][:-1] + (kv[1][0][0][-1] + 1,), kv[1][1]) else ()))]
        # reduce and anything else: the full run's records (its support) where an
        # input is reached, each demanded whole (`_group`, `_rule`), so the node
        # gives there what the full run gave.
        key = self._key(n) if kind == "reduce" else (lambda x: ())
        first = (lambda y: y[0]) if kind == "reduce" else (lambda y: ())
        net = self.enter("K", n, self.net(n).map(lambda xc, key=key: (key(xc[0]), xc)),
                          scope)
        asked = [self.reached(p, d).map(lambda yq, first=first: (first(yq[0]), yq[1]))
                 for p in (ins if kind != "reduce" else ins[:1])]
        out = [tagged(a.distinct().join(net).map(
            lambda kv: (kv[1][1][0], (chain_max(kv[1][0][0], kv[1][1][1]), kv[1][0][1]))))
            for a in asked]
        if kind != "reduce":
            out.extend(self._rule(n, self.reached(ins[0], d).concat(
                *[self.reached(p, d) for p in ins[1:]]), scope))
        return out

    def _gate(self, demand: Any, p: Node, scope: Scope) -> Any:
        """`(x, (c, q))` demanded of input `p` when `p`'s support holds `x` at a
        chain `<= c`: the demand, tagged with `p`."""
        route = self.router(p)
        support = self.enter("S", p, self.support[id(p)], scope)
        return demand.join(support).flat_map(
            lambda kv, route=route: ((*route(kv[0], kv[1][0][0]), kv[1][0][1]),)
            if chain_le(kv[1][1], kv[1][0][0]) else ())

    def _rule(self, n: Node, mine: Any, scope: Scope) -> list:
        kind, ins = n.kind, n.inputs
        if id(n) in self.conj:
            return conjunctive_demands(self, n, self.conj[id(n)], mine, scope)
        if kind == "concat":
            return [self._gate(mine, p, scope) for p in ins]
        if kind == "feedback":
            back = mine.flat_map(
                lambda xq: ((xq[0], (xq[1][0][:-1] + (xq[1][0][-1] - 1,), xq[1][1])),)
                if xq[1][0][-1] > 0 else ())
            return [self._gate(back, ins[0], scope)]
        if kind == "linear":
            r = self.router(ins[0])
            pairs = self.enter("P", n, self.pairs[id(n)], scope)
            return [mine.join(pairs).flat_map(
                lambda kv, r=r: ((*r(kv[1][1][0], kv[1][0][0]), kv[1][0][1]),)
                if chain_le(kv[1][1][1], kv[1][0][0]) else ())]
        if kind == "join":
            rl, rr = self.router(ins[0]), self.router(ins[1])
            pairs = self.enter("P", n, self.pairs[id(n)], scope)
            return [mine.join(pairs).flat_map(
                lambda kv, rl=rl, rr=rr: ((*rl(kv[1][1][0], kv[1][0][0]), kv[1][0][1]),
                                          (*rr(kv[1][1][1], kv[1][0][0]), kv[1][0][1]))
                if chain_le(kv[1][1][2], kv[1][0][0]) else ())]
        if kind == "leave":
            return [self._leave(n, mine, scope)]
        # No rule: everything the inputs' supports hold then (sound, not concise).
        out = []
        for p in ins:
            r = self.router(p)
            everything = self.enter("A", p, self.support[id(p)].map(lambda yc: ((), yc)),
                                     scope)
            out.append(mine.map(lambda xq: ((), xq[1])).distinct().join(everything).flat_map(
                lambda kv, r=r: ((*r(kv[1][1][0], kv[1][0][0]), kv[1][0][1]),)
                if chain_le(kv[1][1][1], kv[1][0][0]) else ()))
        return out

    def _key(self, n: Node) -> Callable:
        # A reduce gives (key, output); `distinct_trace` gives the record itself.
        return (lambda x: x[0]) if getattr(self.ops[id(n)], "logic", None) is not None \
            else (lambda x: x)

    def _group(self, n: Node, mine: Any, reached: Any, scope: Scope) -> Any:
        """A reduce's demands: for a demanded output `(x, c)`, the support records of
        `x`'s key at chains `<= c` (for `min` / `max` only those with the winning
        value or a better one); for a key some reached record of the input lands on
        at `c` (`_forward`), the same for every output the full run has for it at
        chains `<= c`, or, with none, its whole group."""
        source = n.inputs[0]
        r = self.router(source)
        logic = getattr(self.ops[id(n)], "logic", None)
        key = self._key(n)
        # The winner's holders, and any record that would beat it were it not
        # cancelled in the full run (it may not be on a subset).  `x` None: all.
        if logic is red.min_logic:
            keep: Callable = lambda y, x: x is None or y[1] <= x[1]      # noqa: E731
        elif logic is red.max_logic:
            keep = lambda y, x: x is None or y[1] >= x[1]                # noqa: E731
        else:
            keep = lambda y, x: True                                     # noqa: E731
        keys = reached.map(lambda yq: (yq[0][0], yq[1])).distinct()
        if logic is red.min_logic or logic is red.max_logic:
            outs = self.enter("K", n, self.net(n).map(lambda xc, key=key: (key(xc[0]), xc)),
                               scope)
            won = keys.join(outs).flat_map(
                lambda kv: ((kv[0], (kv[1][1][0], kv[1][0])),)
                if chain_le(kv[1][1][1], kv[1][0][0]) else ())
            some = won.map(lambda kx: (kx[0], kx[1][1]))
            none = (keys.map(lambda kq: ((kq[0], kq[1]), None))
                    .antijoin(some.distinct())
                    .map(lambda kn: (kn[0][0], (None, kn[0][1]))))
            wanted = [won, none]
        else:
            wanted = [keys.map(lambda kq: (kq[0], (None, kq[1])))]
        asked = mine.map(lambda xq, key=key: (key(xq[0]), xq)).concat(*wanted)
        group = self.enter("G", source, self.support[id(source)]
                            .map(lambda yc: (yc[0][0], yc)), scope)
        return asked.join(group).flat_map(
            lambda kv, r=r, keep=keep: ((*r(kv[1][1][0], kv[1][0][1][0]), kv[1][0][1][1]),)
            if chain_le(kv[1][1][1], kv[1][0][1][0]) and keep(kv[1][1][0], kv[1][0][0])
            else ())

    def _leave(self, n: Node, mine: Any, scope: Scope) -> Any:
        """`x` inside at the last round of an update of `x` at outer rounds `<= c`
        (for a record that only appears: the round it first appears)."""
        inner = n.inputs[0]
        r = self.router(inner)
        net = self.enter("W", inner, self.net(inner), scope)
        return (mine.join(net).flat_map(
                    lambda kv: (((kv[0], kv[1][0]), kv[1][1][-1]),)
                    if chain_le(kv[1][1][:-1], kv[1][0][0]) else ()).max()
                .map(lambda kr, r=r: (*r(kr[0][0], kr[0][1][0] + (kr[1],)), kr[0][1][1])))


__all__ = ["BackwardFlow", "Lift", "TIMED_STAGES", "chain_le", "parameters"]
