"""Proof trees for Datalog facts: why is `tc(1, 4)` derived?

Soufflé's provenance (Zhao, Subotić, Scholz, "Debugging Large-scale Datalog: A
Scalable Provenance Evaluation Strategy", TOPLAS 2020) answers with a proof tree of
minimal height: each node a rule instance whose premises were all derived earlier,
each leaf an input fact (or a fact of the program's text).  This module isolates
that: a plain evaluation of a parsed program (`ddflow.programs.Program`) over input
sets, stratum by stratum and round by round, that keeps each fact's first derivation
(the rule, the premises it matched, the negated atoms that held); a first derivation
only reads facts of earlier rounds, so the tree it unfolds has minimal height and no
cycles.  It leaves out the dataflow: the inputs' sets at a time come from
`ddflow.explain.contents_at`, and `Derived.why` puts the two together.

A negated premise `!r(a)` holds because `r(a)` is absent from a lower stratum, which
is complete when the rule runs: the tree lists it as an absent fact, not as a
subtree (an absence has no derivation).
"""

from __future__ import annotations

from typing import Any, Iterator

from ddflow.syntax import COMPARISONS as _COMPARE, Parser, QueryError, is_fresh

Fact = tuple  # (relation name, tuple of values)


class Proof:
    """A node of a proof tree: `fact`, derived by `rule` (its text; None for an input
    fact or a fact of the program) from `premises` (sub-proofs), with the negated
    atoms `absent` that held."""

    def __init__(self, fact: Fact, rule: str | None, premises: tuple, absent: tuple,
                 given: bool) -> None:
        self.fact = fact
        self.rule = rule
        self.premises = premises
        self.absent = absent
        #: An input fact (True) or a fact of the program's text (False, `rule` None).
        self.given = given

    def leaves(self) -> set:
        """The input facts at the leaves, `{(relation, values)}`."""
        if self.rule is None:
            return {self.fact} if self.given else set()
        out: set = set()
        for p in self.premises:
            out |= p.leaves()
        return out

    def height(self) -> int:
        return 1 + max((p.height() for p in self.premises), default=0)

    def lines(self, depth: int = 0) -> Iterator[str]:
        pad = "  " * depth
        if self.rule is None:
            yield f"{pad}{show_fact(self.fact)}  ({'input' if self.given else 'fact'})"
            return
        yield f"{pad}{show_fact(self.fact)}  <- {self.rule}"
        for p in self.premises:
            yield from p.lines(depth + 1)
        for a in self.absent:
            yield f"{pad}  !{show_fact(a)}  (absent)"

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        return f"Proof({show_fact(self.fact)}, height {self.height()})"


def show_fact(fact: Fact) -> str:
    name, values = fact
    return f"{name}({', '.join(map(_show, values))})"


def _show(v: Any) -> str:
    return repr(v) if isinstance(v, str) else str(v)   # (ANY prints as _)


def parse_fact(text: str) -> Fact:
    """`'tc(1, 4)'` -> `('tc', (1, 4))` (constants only)."""
    p = Parser(text, end="the end of the fact")
    atom = p.atom("a fact")
    p.expect("end", None, "the end of the fact")
    if any(t.var is not None for t in atom.terms):
        raise QueryError(f"a fact to explain lists constants, not variables: {text!r}",
                         text, atom.pos)
    return atom.name, tuple(t.value for t in atom.terms)


def rule_text(clause: Any) -> str:
    """A clause written back as text: `tc(x, z) :- tc(x, y), e(y, z).`"""
    def term(t: Any) -> str:
        if t.var is None:
            return _show(t.value)
        return "_" if is_fresh(t.var) else t.var

    def atom(a: Any) -> str:
        return f"{a.name}({', '.join(term(t) for t in a.terms)})"

    body = []
    for lit in clause.body:
        if lit.kind == "pos":
            body.append(atom(lit.atom))
        elif lit.kind == "neg":
            body.append("!" + atom(lit.atom))
        else:
            body.append(f"{term(lit.left)} {lit.op} {term(lit.right)}")
    return f"{atom(clause.head)} :- {', '.join(body)}."


class Derivations:
    """A program's model over `inputs` (`{relation: set of tuples}`), each fact with
    its first derivation: `(clause, premises, absent)`, or None for a given fact."""

    def __init__(self, program: Any, inputs: dict[str, set]) -> None:
        self.program = program
        self.db: dict[str, set] = {}
        self.first: dict[Fact, Any] = {}
        self._given: set = set()
        for name, facts in inputs.items():
            for f in facts:
                self._add((name, tuple(f)), None)
                self._given.add((name, tuple(f)))
        for c in program.clauses:
            if not c.body:
                self._add((c.head.name, tuple(t.value for t in c.head.terms)), None)
        for stratum in program.strata:
            clauses = [c for c in program.clauses
                       if c.body and c.head.name in stratum.relations]
            while True:
                # One round: every rule against the facts of the rounds before.
                snapshot = {name: list(facts) for name, facts in self.db.items()}
                new, seen = [], set()
                for c in clauses:
                    for fact, premises, absent in _fire(c, snapshot, self.db):
                        if fact not in self.first and fact not in seen:
                            seen.add(fact)
                            new.append((fact, c, premises, absent))
                if not new:
                    break
                for fact, c, premises, absent in new:
                    if fact not in self.first:
                        self._add(fact, (c, premises, absent))

    def _add(self, fact: Fact, how: Any) -> None:
        self.db.setdefault(fact[0], set()).add(fact[1])
        self.first.setdefault(fact, how)

    def proof(self, fact: Fact) -> Proof:
        if fact not in self.first:
            raise QueryError(f"{show_fact(fact)} is not derived")
        how = self.first[fact]
        if how is None:
            return Proof(fact, None, (), (), fact in self._given)
        clause, premises, absent = how
        return Proof(fact, rule_text(clause), tuple(self.proof(p) for p in premises),
                     tuple(absent), False)


def _fire(clause: Any, snapshot: dict, db: dict) -> Iterator[tuple]:
    """Every instance of `clause` over `snapshot`: (head fact, premises, absent)."""
    positives = [lit for lit in clause.body if lit.kind == "pos"]
    index: dict = {}

    def facts_for(atom: Any, env: dict) -> list:
        first = atom.terms[0] if atom.terms else None
        rows = snapshot.get(atom.name, [])
        if first is None:
            return rows
        v = first.value if first.var is None else env.get(first.var, _UNBOUND)
        if v is _UNBOUND:
            return rows
        by_first = index.get(atom.name)
        if by_first is None:
            by_first = index[atom.name] = {}
            for row in rows:
                by_first.setdefault(row[0], []).append(row)
        return by_first.get(v, [])

    def extend(k: int, env: dict, used: list) -> Iterator[tuple]:
        if k == len(positives):
            yield env, used
            return
        atom = positives[k].atom
        for row in facts_for(atom, env):
            bound = _match(atom.terms, row, env)
            if bound is not None:
                yield from extend(k + 1, bound, used + [(atom.name, row)])

    for env, used in extend(0, {}, []):
        if not all(_COMPARE[lit.op](_value(lit.left, env), _value(lit.right, env))
                   for lit in clause.body if lit.kind == "cmp"):
            continue
        absent = []
        ok = True
        for lit in clause.body:
            if lit.kind != "neg":
                continue
            hit = [row for row in db.get(lit.atom.name, ())
                   if _match(lit.atom.terms, row, env, fresh_any=True) is not None]
            if hit:
                ok = False
                break
            absent.append((lit.atom.name, tuple(
                ANY if t.var is not None and is_fresh(t.var) else _value(t, env)
                for t in lit.atom.terms)))
        if ok:
            yield ((clause.head.name, tuple(_value(t, env) for t in clause.head.terms)),
                   used, absent)


_UNBOUND = object()


class _Any:
    """`_` in an absent fact: no value at that position."""

    def __repr__(self) -> str:
        return "_"

    __str__ = __repr__


ANY = _Any()


def _match(terms: tuple, row: tuple, env: dict, fresh_any: bool = False) -> dict | None:
    if len(terms) != len(row):
        return None
    out = env
    for t, v in zip(terms, row):
        if t.var is None:
            if t.value != v:
                return None
        elif fresh_any and is_fresh(t.var):
            continue
        elif t.var in out:
            if out[t.var] != v:
                return None
        else:
            if out is env:
                out = dict(env)
            out[t.var] = v
    return out


def _value(t: Any, env: dict) -> Any:
    return t.value if t.var is None else env[t.var]


__all__ = ["Derivations", "Proof", "parse_fact", "rule_text", "show_fact"]
