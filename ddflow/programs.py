"""Datalog programs: `datalog("tc(x, y) :- e(x, y). tc(x, z) :- tc(x, y), e(y, z).", e=edges)`.

What this isolates: the text of a program (rules, facts, negated atoms,
comparisons), its checks (safety, arities, unknown relations, stratification) and
its compilation onto the fluent API: one `iterate`-style loop scope per recursive
stratum, with one `Variable` per mutually recursive relation, and the rules' joins
planned by `ddflow.query.plan`.  The parser pieces are `ddflow.syntax`'s.  It
leaves out aggregates, functions in terms and nullary relations.

The law (set semantics, stratified negation; Abiteboul, Hull, Vianu, "Foundations
of Databases", chapters 12 and 15): at every time `t`, each derived relation
accumulates to the set the program's perfect model gives for the inputs' sets
`{x : acc(R, t)[x] > 0}`; each derived relation is `distinct`.  Semi-naive
evaluation comes for free: differential dataflow moves only changes around a loop
(McSherry, Murray, Isaacs, Isard, "Differential dataflow"), and a change of input
at a later epoch moves only the changes it causes, at `Product(epoch, round)`
times.

Syntax: clauses ending in `.`; a rule `head(t, ..) :- lit, .. .` whose literals
are atoms `r(t, ..)`, negated atoms `!r(t, ..)` or `not r(t, ..)`, and
comparisons `t op t` with `op` in `= != < <= > >=`; a fact `r(c, ..).` lists
constants.  Terms are `ddflow.syntax`'s: variables, `_`, ints, quoted strings.  A
`%` or `//` starts a comment to the end of the line.

Comparisons run on the values as Python compares them: `=` and `!=` compare
anything, while ordering an int against a string fails when it is evaluated
(a `UserFunctionError`, the step rolled back).

Strata: Tarjan's strongly connected components of "head depends on body
relation" (Tarjan, "Depth-first search and linear graph algorithms"), dependencies
first.

Checks (`QueryError`, the program's line and a caret): syntax; an unsafe rule (a
variable of the head, of a negated atom or of a comparison not bound by a
positive atom); a relation used with two arities; a body relation neither
derived nor given; negation through recursion (the cycle is named).

>>> import ddflow
>>> df = ddflow.Dataflow()
>>> e_in, e = df.new_collection()
>>> out = datalog('''
...     tc(x, y) :- e(x, y).
...     tc(x, z) :- tc(x, y), e(y, z).
...     cyclic(x) :- tc(x, x).
... ''', e=e)
>>> cyc = out["cyclic"].capture()
>>> for edge in [(1, 2), (2, 3), (3, 1)]:
...     e_in.insert(edge)
>>> e_in.advance_to(1); df.run(); sorted(cyc.updates)
[((1,), 0, 1), ((2,), 0, 1), ((3,), 0, 1)]
>>> e_in.remove((3, 1)); e_in.advance_to(2); df.run(); sorted(cyc.updates)[-1]
((3,), 1, -1)
>>> datalog("p(x) :- e(x, y), !p(y).", e=e)
Traceback (most recent call last):
...
ddflow.syntax.QueryError: negation through recursion: p depends on !p (cycle p -> !p); the program cannot be stratified
  p(x) :- e(x, y), !p(y).
                    ^
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs

from ddflow.query import atom_shape, checked_relation, plan, shape_matcher
from ddflow.syntax import COMPARISONS, Atom, Parser, QueryError, Rule, Term, is_fresh
from operators.wcoj.plan import tuple_getter

#: The strategies a program's joins may use (`"generic"` needs int times, and
#: recursive strata run at `Product` times).
STRATEGIES = ("delta", "binary")

_COMPARE = COMPARISONS

_counter = itertools.count()


@attrs.frozen
class Literal:
    """One element of a rule's body: a positive atom (`kind="pos"`), a negated one
    (`"neg"`), or a comparison (`"cmp"`: `left op right`)."""

    kind: str
    atom: Atom | None = None
    op: str | None = None
    left: Term | None = None
    right: Term | None = None
    pos: int = 0


@attrs.frozen
class Clause:
    """A rule (`body` non-empty) or a fact (`body` empty, constant head)."""

    head: Atom
    body: tuple


@attrs.frozen
class Stratum:
    """Relations evaluated together: a strongly connected component of the
    dependency graph; `recursive` when some rule of it reads one of them."""

    relations: tuple
    recursive: bool


@attrs.frozen
class Program:
    """A parsed, checked program: its clauses, and its strata in evaluation order."""

    text: str
    clauses: tuple
    strata: tuple
    inputs: tuple

    def rules_of(self, name: str) -> list:
        """The rules (not facts) whose head is `name`, in program order."""
        return [c for c in self.clauses if c.head.name == name and c.body]

    def facts_of(self, name: str) -> list:
        """The facts of `name`, as tuples of constants, in program order."""
        return [tuple(t.value for t in c.head.terms) for c in self.clauses
                if c.head.name == name and not c.body]

    def derived(self) -> list:
        """Every relation with a rule or a fact, in order of first appearance."""
        return list(dict.fromkeys(c.head.name for c in self.clauses))


# -- text ----------------------------------------------------------------------------

def _clauses(text: str) -> list:
    p = Parser(text, end="the end of the program")
    out = []
    while not p.at("end"):
        head = p.atom("a rule or a fact (a relation name)")
        body: list = []
        if p.at("op", ":-"):
            p.i += 1
            body.append(_literal(p))
            while p.at("op", ","):
                p.i += 1
                body.append(_literal(p))
        p.expect("op", ".", "'.' at the end of the clause" if not body else "',' or '.'")
        out.append(Clause(head, tuple(body)))
    return out


def _literal(p: Parser) -> Literal:
    tok = p.tok
    if p.at("op", "!"):
        p.i += 1
        return Literal("neg", p.atom("a relation name after '!'"), pos=tok.pos)
    if p.at("ident", "not") and p.toks[p.i + 1].kind == "ident":
        p.i += 1
        return Literal("neg", p.atom("a relation name after 'not'"), pos=tok.pos)
    if p.at("ident") and p.toks[p.i + 1].kind == "op" and p.toks[p.i + 1].text == "(":
        return Literal("pos", p.atom("an atom"), pos=tok.pos)
    left = p.term()
    op = p.tok
    if op.kind != "op" or op.text not in _COMPARE:
        raise QueryError(f"expected an atom or a comparison ({' '.join(_COMPARE)}), found "
                         f"{p.found(op)}", p.text, op.pos)
    p.i += 1
    return Literal("cmp", op=op.text, left=left, right=p.term(), pos=op.pos)


def _check_clause(text: str, c: Clause, arity: dict) -> None:
    def use(a: Atom) -> None:
        if not a.terms:
            raise QueryError(f"atom '{a.name}' needs at least one argument", text, a.pos)
        seen = arity.setdefault(a.name, (len(a.terms), a.pos))
        if seen[0] != len(a.terms):
            line = text.count("\n", 0, seen[1]) + 1
            col = seen[1] - text.rfind("\n", 0, seen[1])
            raise QueryError(f"relation '{a.name}' is used with {len(a.terms)} arguments here "
                             f"and with {seen[0]} at line {line}, column {col}", text, a.pos)

    use(c.head)
    if not c.body:
        for t in c.head.terms:
            if t.var is not None:
                raise QueryError(f"a fact lists constants only: '{t.var}' is a variable "
                                 "(a rule needs ':-' and a body)", text, t.pos)
        return
    for lit in c.body:
        if lit.atom is not None:
            use(lit.atom)
    bound = {t.var for lit in c.body if lit.kind == "pos" for t in lit.atom.terms
             if t.var is not None}
    if not any(lit.kind == "pos" for lit in c.body):
        raise QueryError("a rule needs at least one positive atom", text, c.head.pos)
    for t in c.head.terms:
        if t.var is not None and is_fresh(t.var):
            raise QueryError("'_' stands for a fresh variable: it cannot be in the head",
                             text, t.pos)
        if t.var is not None and t.var not in bound:
            raise QueryError(f"unsafe rule: head variable '{t.var}' is not bound by a "
                             "positive atom of the body", text, t.pos)
    for lit in c.body:
        if lit.kind == "neg":
            for t in lit.atom.terms:
                if t.var is not None and not is_fresh(t.var) and t.var not in bound:
                    raise QueryError(f"unsafe rule: variable '{t.var}' of the negated atom "
                                     f"'{lit.atom.name}' is not bound by a positive atom",
                                     text, t.pos)
        elif lit.kind == "cmp":
            for t in (lit.left, lit.right):
                if t.var is not None and is_fresh(t.var):
                    raise QueryError("'_' cannot be compared", text, t.pos)
                if t.var is not None and t.var not in bound:
                    raise QueryError(f"unsafe rule: compared variable '{t.var}' is not bound "
                                     "by a positive atom", text, t.pos)


def parse_program(text: str, given: Any = ()) -> Program:
    """Parse and check `text`, with relations `given` as inputs; find its strata.

    >>> p = parse_program("r(x, y) :- e(x, y). r(x, z) :- r(x, y), e(y, z). "
    ...                   "s(x) :- e(x, _), !r(x, x).", given=["e"])
    >>> [(s.relations, s.recursive) for s in p.strata]
    [(('r',), True), (('s',), False)]
    """
    if not isinstance(text, str):
        raise QueryError(f"a program is a string, not {type(text).__name__}")
    clauses = _clauses(text)
    arity: dict = {}
    for c in clauses:
        _check_clause(text, c, arity)
    derived = dict.fromkeys(c.head.name for c in clauses)
    given = set(given)
    for c in clauses:
        for lit in c.body:
            if lit.atom is not None and lit.atom.name not in derived \
                    and lit.atom.name not in given:
                names = ", ".join(sorted(given)) or "none"
                raise QueryError(f"unknown relation '{lit.atom.name}': no rule or fact "
                                 f"derives it and it is not given (given: {names})",
                                 text, lit.atom.pos)
    strata = _strata(text, clauses, list(derived))
    inputs = tuple(sorted({lit.atom.name for c in clauses for lit in c.body
                           if lit.atom is not None and lit.atom.name in given}))
    return Program(text, tuple(clauses), tuple(strata), inputs)


def _strata(text: str, clauses: list, derived: list) -> list:
    """Tarjan's strongly connected components of "head depends on body relation",
    dependencies first; negation inside a component is refused."""
    deps: dict = {r: [] for r in derived}
    for c in clauses:
        for lit in c.body:
            if lit.atom is not None and lit.atom.name in deps:
                deps[c.head.name].append(lit.atom.name)
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    comps: list = []
    for root in derived:
        if root in index:
            continue
        # Iterative Tarjan: (node, iterator over its dependencies).
        work = [(root, iter(deps[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(deps[w])))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(tuple(r for r in derived if r in comp))
    out = []
    for comp in comps:
        members = set(comp)
        recursive = len(comp) > 1 or comp[0] in deps[comp[0]]
        for c in clauses:
            if c.head.name not in members:
                continue
            for lit in c.body:
                if lit.kind == "neg" and lit.atom.name in members:
                    cycle = _path(deps, lit.atom.name, c.head.name, members)
                    shown = " -> ".join([c.head.name, "!" + lit.atom.name] + cycle[1:])
                    raise QueryError(f"negation through recursion: {c.head.name} depends on "
                                     f"!{lit.atom.name} (cycle {shown}); the program cannot "
                                     "be stratified", text, lit.atom.pos)
        out.append(Stratum(comp, recursive))
    return out


def _path(deps: dict, start: str, goal: str, members: set) -> list:
    """A shortest dependency path from `start` to `goal` inside one component."""
    prev: dict = {start: None}
    queue = [start]
    for v in queue:
        if v == goal:
            break
        for w in deps[v]:
            if w in members and w not in prev:
                prev[w] = v
                queue.append(w)
    path = [goal]
    while prev[path[-1]] is not None:
        path.append(prev[path[-1]])
    return path[::-1]


# -- compilation -------------------------------------------------------------------------

def datalog(program: str, /, strategy: str | None = None, **relations: Any) -> dict:
    """The derived relations of `program` over the given input `relations`.

    `relations` maps input names to `Collection`s of tuples, all of one scope of one
    dataflow (with none given, a new `Dataflow` holds the program: reach it through
    a result's `.dataflow`).  Returns `{name: Collection}` for every relation with a
    rule or a fact, in order of first appearance.  A given relation that also has
    rules or facts gets them added to it.  `strategy` picks the joins of every rule:
    `"delta"` (delta queries), `"binary"` (left-deep joins) or `None` (delta queries
    for cyclic rule bodies, binary joins otherwise; see `ddflow.query`).

    Every record of a given relation must be a tuple of the relation's arity in the
    program: a bare value, a longer or shorter tuple, a string make `run()` raise a
    `DataError` naming the relation, the arity and the record, the step rolled back
    (`session.discard(err)` withdraws the update that fed it).
    """
    import ddflow
    from ddflow.collection import Arranged, Collection

    if strategy is not None and strategy not in STRATEGIES:
        raise QueryError(f"unknown strategy {strategy!r}; a program's joins use one of "
                         f"{STRATEGIES}")
    scope = None
    for name, rel in list(relations.items()):
        if isinstance(rel, Arranged):
            rel = relations[name] = rel.as_collection()
        if not isinstance(rel, Collection):
            raise QueryError(f"relation '{name}' must be a Collection, not "
                             f"{type(rel).__name__}")
        if scope is None:
            scope = rel.scope
        elif rel.scope is not scope:
            raise QueryError(f"relation '{name}' is in scope {rel.scope.name}, the others in "
                             f"{scope.name}: enter() them into one scope")
    prog = parse_program(program, relations)
    df = scope.dataflow if scope is not None else ddflow.Dataflow()
    scope = scope if scope is not None else df.root
    with df.building():
        arity = arities(prog)
        checked = {name: (checked_relation(rel, name, {arity[name]}) if name in arity
                          else rel)
                   for name, rel in relations.items()}
        return Derived(_Compiler(prog, df, scope, strategy, checked).run(), prog,
                       relations, df)


def arities(prog: Program) -> dict[str, int]:
    """The arity of every relation the program names (`parse_program` checked
    that each has one)."""
    out: dict[str, int] = {}
    for c in prog.clauses:
        out.setdefault(c.head.name, len(c.head.terms))
        for lit in c.body:
            if lit.kind in ("pos", "neg"):
                out.setdefault(lit.atom.name, len(lit.atom.terms))
    return out


class Derived(dict):
    """What `datalog` returns: `{name: Collection}` of the derived relations, plus
    `why(fact)`, the proof tree of a derived fact (`ddflow.proofs`)."""

    def __init__(self, collections: dict, program: Program, given: dict, df: Any) -> None:
        super().__init__(collections)
        self.program = program
        self.given = given
        self.dataflow = df

    def why(self, fact: Any, time: Any = None) -> Any:
        """A proof tree (`ddflow.proofs.Proof`) of `fact` (`'tc(1, 4)'`, or `(name,
        values)`) at `time` (None: the latest final time; else it must be final, or
        `NotFinalError`): rule instances down to input facts (see `ddflow.proofs`
        for what the tree's height promises).  `QueryError` when it is not derived
        there."""
        from ddflow.capture import Capture
        from ddflow.explain import contents_at, latest_final_of
        from ddflow.proofs import Derivations, parse_fact
        fact = parse_fact(fact) if isinstance(fact, str) else (fact[0], tuple(fact[1]))
        if fact[0] not in self:
            raise QueryError(f"'{fact[0]}' is not a relation this program derives "
                             f"({', '.join(self)})")
        if time is None:
            time = latest_final_of(self.dataflow)
        else:
            _check_final(self, time)
        if self.given and next(iter(self.given.values())).scope.parent is not None:
            raise QueryError("why() reads relations of the root scope; this program's "
                             "were entered into a loop")
        inputs = {name: {d for d, m in contents_at(rel.node, time, Capture).items() if m > 0}
                  for name, rel in self.given.items()}
        return Derivations(self.program, inputs).proof(fact)


def _check_final(derived: Any, time: Any) -> None:
    """`NotFinalError` unless every input upstream of the program's given relations
    has made `time` final and handed its updates there to the engine (as
    `Capture.explain` requires of its time)."""
    from ddflow.errors import NotFinalError
    from ddflow.graph import cone
    from lattice import less_equal
    df = derived.dataflow
    upstream = {id(n) for rel in derived.given.values() for n in cone(rel.node)}
    for s in df.sessions:
        if id(s.node) not in upstream:
            continue
        if not s.closed and less_equal(s.time, time):
            raise NotFinalError(f"why(): the answer at {time!r} is not final yet: "
                                f"advance_to() a time past it (or close()) on "
                                f"{s.name!r}, then run()", operator=s.name, time=time)
        if any(less_equal(t, time) for _d, t, _r in s.pending):
            raise NotFinalError(f"why(): input {s.name!r} has updates at or before "
                                f"{time!r} not yet run: run() first",
                                operator=s.name, time=time)


class _Compiler:
    """Builds the program's dataflow, stratum by stratum."""

    def __init__(self, prog: Program, df: Any, scope: Any, strategy: str | None,
                 relations: dict) -> None:
        self.prog = prog
        self.df = df
        self.scope = scope
        self.strategy = strategy
        self.env = dict(relations)      # name -> collection of `scope`
        self.given = set(relations)
        self.facts = None
        self.negated: dict = {}         # (source id, pattern, named) -> distinct keys
        self.shared: dict = {}          # the rules' sources and indexes (`plan`)

    def run(self) -> dict:
        facts = [(c.head.name, tuple(t.value for t in c.head.terms))
                 for c in self.prog.clauses if not c.body]
        if facts:
            session, coll = self.df.new_collection(name="datalog.facts")
            for fact in facts:
                session.insert(fact)
            session.close()
            self.facts = coll if self.scope is self.df.root else coll.enter(self.scope)
        for stratum in self.prog.strata:
            if stratum.recursive:
                self._loop(stratum.relations)
            else:
                (name,) = stratum.relations
                self.env[name] = self._union(name, self.env.get(name), self.env.__getitem__,
                                             self.facts)
        return {name: self.env[name] for name in self.prog.derived()}

    def _union(self, name: str, given: Any, lookup: Any, facts: Any) -> Any:
        """`distinct` of what the given relation, the facts and the rules of `name` say."""
        parts = [] if given is None or name not in self.given else [given]
        if facts is not None and self.prog.facts_of(name):
            parts.append(facts.flat_map(lambda f, n=name: [f[1]] if f[0] == n else [],
                                        name=f"{name}.facts"))
        for k, c in enumerate(self.prog.rules_of(name)):
            parts.append(self._rule(c, k, lookup))
        out = parts[0].concat(*parts[1:], name=f"{name}.rules") if len(parts) > 1 else parts[0]
        return out.distinct(name=name)

    def _loop(self, names: tuple) -> None:
        from ddflow.collection import Variable
        from ddflow.graph import Scope
        inner = Scope(self.df, self.scope, f"datalog.{'+'.join(names)}#{next(_counter)}",
                      None)
        variables = {n: Variable(inner, name=n) for n in names}
        entered: dict = {}

        def lookup(name: str) -> Any:
            if name in variables:
                return variables[name].collection
            if name not in entered:
                entered[name] = self.env[name].enter(inner, name=f"{name}.enter")
            return entered[name]

        facts = self.facts.enter(inner) if self.facts is not None else None
        results = {}
        for n in names:
            given = self.env[n].enter(inner) if n in self.given else None
            results[n] = self._union(n, given, lookup, facts)
        for n in names:
            variables[n].set(results[n])
            self.env[n] = results[n].leave(name=f"{n}.leave")

    def _rule(self, c: Clause, k: int, lookup: Any) -> Any:
        text = self.prog.text
        label = f"{c.head.name}.rule{k}"
        positives = tuple(lit.atom for lit in c.body if lit.kind == "pos")
        wanted = [t.var for t in c.head.terms if t.var is not None]
        for lit in c.body:
            if lit.kind == "neg":
                wanted += [t.var for t in lit.atom.terms if t.var and not is_fresh(t.var)]
            elif lit.kind == "cmp":
                wanted += [t.var for t in (lit.left, lit.right) if t.var]
        wanted = list(dict.fromkeys(wanted))
        head = Atom(label, tuple(Term(v, None, c.head.pos) for v in wanted), c.head.pos)
        rels = {a.name: lookup(a.name) for a in positives}
        cur = plan(Rule(head, positives, text), rels, self.strategy, self.shared)
        at = {v: n for n, v in enumerate(wanted)}
        tests = []
        for lit in c.body:
            if lit.kind == "cmp":
                tests.append((_COMPARE[lit.op], _getter(lit.left, at), _getter(lit.right, at)))
        if tests:
            cur = cur.filter(lambda b, tests=tests: all(f(x(b), y(b)) for f, x, y in tests),
                             name=f"{label}.compare")
        for lit in c.body:
            if lit.kind != "neg":
                continue
            a = lit.atom
            vars_, shape = atom_shape(a)
            named = [n for n, v in enumerate(vars_) if not is_fresh(v)]
            source = lookup(a.name)
            # Rules negating the same pattern of the same collection share its keys.
            cache_key = (id(source), shape, tuple(named))
            keys = self.negated.get(cache_key)
            if keys is None:
                match, pick = shape_matcher(shape), tuple_getter(named)
                keys = self.negated[cache_key] = source.flat_map(
                    lambda t, match=match, pick=pick: [pick(m) for m in match(t)],
                    name=f"{label}.not.{a.name}").distinct(name=f"{label}.not.{a.name}.keys")
            kb = tuple_getter([at[vars_[n]] for n in named])
            cur = (cur.map(lambda b, kb=kb: (kb(b), b), name=f"{label}.key")
                   .antijoin(keys, name=f"{label}.not.{a.name}")
                   .map(_second, name=f"{label}.unkey"))
        out = tuple((at[t.var], None) if t.var is not None else (None, t.value)
                    for t in c.head.terms)
        if [n for n, _ in out] == list(range(len(wanted))):
            return cur
        return cur.map(lambda b, out=out: tuple(b[n] if n is not None else v for n, v in out),
                       name=f"{label}.head")


def _second(kv: tuple) -> Any:
    return kv[1]


def _getter(t: Term, at: dict) -> Any:
    if t.var is None:
        return lambda b, v=t.value: v
    return lambda b, n=at[t.var]: b[n]


def strata_text(program: Program) -> str:
    """The strata of `program`, one a line, in evaluation order.

    >>> print(strata_text(parse_program("a(x) :- e(x). b(x) :- a(x), !c(x). c(x) :- c(x), e(x). "
    ...                                 "c(x) :- e(x).", given=["e"])))
    1. a
    2. c (recursive)
    3. b
    """
    return "\n".join(f"{n}. {', '.join(s.relations)}{' (recursive)' if s.recursive else ''}"
                     for n, s in enumerate(program.strata, 1))


__all__ = ["datalog", "parse_program", "strata_text", "Derived", "Program", "Clause",
           "Literal", "Stratum", "STRATEGIES"]
