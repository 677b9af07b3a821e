"""The text of rules: tokens, terms, atoms, and a recursive descent parser.

What this isolates: turning the text of a conjunctive rule (`ddflow.query`) or of a
whole Datalog program (`ddflow.programs`) into `Atom`s and `Term`s that remember
where they stand, and `QueryError`, which shows that place with a caret.  It
leaves out what the rules mean (planning, stratification) and has no dependency
beyond `attrs`.

Syntax: `head(v, ..) :- rel(term, ..), rel(term, ..) [.]`, terms being variables
(identifiers; `_` is a fresh variable each time), ints (`-3`) or quoted strings
(`'a'`, `"b"`, with backslash escapes); `%` or `//` comment to the end of the
line.  A program (`ddflow.programs`) adds `!`, `not`, comparisons and facts, built
from the same `Parser` pieces.

>>> r = parse("tri(x, y, z) :- g(x, y), g(y, z), g(x, z).")
>>> r.head.name, [a.name for a in r.body], [t.var for t in r.body[1].terms]
('tri', ['g', 'g', 'g'], ['y', 'z'])
>>> parse("tri(x, w) :- g(x, y)")
Traceback (most recent call last):
...
ddflow.syntax.QueryError: head variable 'w' does not occur in the body
  tri(x, w) :- g(x, y)
         ^
"""

from __future__ import annotations

import operator

import re
from typing import Any

import attrs

from ddflow.errors import DataflowError


class QueryError(DataflowError):
    """A rule that cannot be planned: bad syntax, unknown relation, unbound head
    variable, unsupported strategy.  `rule` and `position` (an offset into it)
    locate the problem; the message shows the rule's line with a caret."""

    def __init__(self, message: str, rule: str | None = None,
                 position: int | None = None) -> None:
        text = message
        if rule is not None and position is not None:
            text += "\n" + _caret(rule, position)
        super().__init__(text)
        self.rule = rule
        self.position = position


def _caret(rule: str, position: int) -> str:
    start = rule.rfind("\n", 0, position) + 1
    end = rule.find("\n", position)
    line = rule[start:] if end < 0 else rule[start:end]
    where = ""
    if "\n" in rule:
        where = f" (line {rule.count(chr(10), 0, position) + 1}, column {position - start + 1})"
    return f"  {line}{where}\n  {' ' * (position - start)}^"


# -- tokens and syntax ----------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<ws>\s+|%[^\n]*|//[^\n]*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<int>-?[0-9]+)
  | (?P<str>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<op>:-|!=|<=|>=|[(),.!<>=])
""", re.VERBOSE)

_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}


@attrs.frozen
class Token:
    kind: str      # ident, int, str, op, end
    text: str
    pos: int


def tokenize(rule: str) -> list[Token]:
    """The tokens of `rule`, ending with an `end` token.

    >>> [(t.kind, t.text) for t in tokenize("q(x) :- r(x, 'a b', -2).")]
    [('ident', 'q'), ('op', '('), ('ident', 'x'), ('op', ')'), ('op', ':-'), ('ident', 'r'), ('op', '('), ('ident', 'x'), ('op', ','), ('str', "'a b'"), ('op', ','), ('int', '-2'), ('op', ')'), ('op', '.'), ('end', '')]
    """
    out = []
    pos = 0
    while pos < len(rule):
        m = _TOKEN.match(rule, pos)
        if m is None:
            ch = rule[pos]
            if ch in "'\"":
                raise QueryError("unterminated string", rule, pos)
            raise QueryError(f"unexpected character {ch!r}", rule, pos)
        kind = m.lastgroup
        if kind != "ws":
            out.append(Token(kind, m.group(), pos))
        pos = m.end()
    out.append(Token("end", "", len(rule)))
    return out


@attrs.frozen
class Term:
    """A variable (`var` set) or a constant (`value`), where it stands in the rule."""

    var: str | None
    value: Any
    pos: int


@attrs.frozen
class Atom:
    name: str
    terms: tuple
    pos: int


@attrs.frozen
class Rule:
    head: Atom
    body: tuple
    text: str


class Parser:
    """Recursive descent over the tokens of `text`, a rule or a whole program: the
    pieces (`term`, `atom`, `expect`) that `parse` and `ddflow.datalog` share.
    `_` becomes a fresh variable `_0`, `_1`, ... each time (numbered over `text`)."""

    def __init__(self, text: str, end: str = "the end of the rule") -> None:
        self.text = text
        self.toks = tokenize(text)
        self.i = 0
        self.fresh = 0
        self.end = end          # how the end of `text` is named in messages

    @property
    def tok(self) -> Token:
        """The next token."""
        return self.toks[self.i]

    def at(self, kind: str, text: str | None = None) -> bool:
        """Whether the next token is of `kind` (and `text`)."""
        tok = self.toks[self.i]
        return tok.kind == kind and (text is None or tok.text == text)

    def found(self, tok: Token) -> str:
        """`tok` as an error message names it."""
        return self.end if tok.kind == "end" else repr(tok.text)

    def expect(self, kind: str, text: str | None, what: str) -> Token:
        """Consume the next token, which must be of `kind` (and `text`)."""
        tok = self.toks[self.i]
        if tok.kind != kind or (text is not None and tok.text != text):
            raise QueryError(f"expected {what}, found {self.found(tok)}", self.text, tok.pos)
        self.i += 1
        return tok

    def term(self) -> Term:
        """A variable, `_`, an int or a quoted string."""
        tok = self.toks[self.i]
        self.i += 1
        if tok.kind == "ident":
            if tok.text == "_":
                self.fresh += 1
                return Term(f"_{self.fresh - 1}", None, tok.pos)
            return Term(tok.text, None, tok.pos)
        if tok.kind == "int":
            try:
                return Term(None, int(tok.text), tok.pos)
            except ValueError:      # more digits than Python converts (sys.int_info)
                raise QueryError(f"the number has {len(tok.text.lstrip('-')):,} digits, "
                                 "more than Python converts", self.text, tok.pos) from None
        if tok.kind == "str":
            body = tok.text[1:-1]
            return Term(None, re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)),
                                     body), tok.pos)
        self.i -= 1
        raise QueryError(f"expected a variable, a number or a quoted string, found "
                         f"{self.found(tok)}", self.text, tok.pos)

    def atom(self, what: str) -> Atom:
        """`name(term, ..)`; `what` names the expected name in an error."""
        name = self.expect("ident", None, what)
        self.expect("op", "(", "'('")
        terms = []
        if self.at("op", ")"):
            self.i += 1
            return Atom(name.text, (), name.pos)
        while True:
            terms.append(self.term())
            if self.at("op", ","):
                self.i += 1
                continue
            self.expect("op", ")", "',' or ')'")
            return Atom(name.text, tuple(terms), name.pos)


#: The comparisons a rule's body may hold, `left op right`, as Python evaluates them.
COMPARISONS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
               ">": operator.gt, ">=": operator.ge}


def is_fresh(var: str) -> bool:
    """Whether `var` is the fresh variable of a `_`."""
    return var.startswith("_") and var[1:].isdigit()


def parse(rule: str) -> Rule:
    """Parse `head(..) :- atom(..), ..` (a final `.` is optional).

    >>> r = parse("p(x) :- e(x, _), e(_, 'k')")
    >>> [(a.name, [t.var or t.value for t in a.terms]) for a in r.body]
    [('e', ['x', '_0']), ('e', ['_1', 'k'])]
    """
    if not isinstance(rule, str):
        raise QueryError(f"a rule is a string, not {type(rule).__name__}")
    p = Parser(rule)
    head = p.atom("the rule's head (a name)")
    p.expect("op", ":-", "':-'")
    body = [p.atom("an atom (a relation name)")]
    while p.at("op", ","):
        p.i += 1
        body.append(p.atom("an atom (a relation name)"))
    if p.at("op", "."):
        p.i += 1
    p.expect("end", None, "',' or the end of the rule")
    for t in head.terms:
        if t.var is None:
            raise QueryError("the head lists variables only", rule, t.pos)
        if is_fresh(t.var):
            raise QueryError("'_' stands for a fresh variable: it cannot be in the head",
                             rule, t.pos)
    for a in body:
        if not a.terms:
            raise QueryError(f"atom '{a.name}' needs at least one argument", rule, a.pos)
    bound = {t.var for a in body for t in a.terms if t.var is not None}
    for t in head.terms:
        if t.var not in bound:
            raise QueryError(f"head variable '{t.var}' does not occur in the body", rule, t.pos)
    return Rule(head, tuple(body), rule)


__all__ = ["COMPARISONS", "QueryError", "Token", "Term", "Atom", "Rule", "Parser", "tokenize", "parse",
           "is_fresh"]
