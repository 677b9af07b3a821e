"""Reading edge lists and change streams from files, all-or-nothing.

This module isolates the parsing of the CLI's input files: an edge list (`src dst`
per line) and a change stream (`EPOCH + src dst` / `EPOCH - src dst` per line); for
Datalog, a directory of facts files and a change stream naming the relation
(`EPOCH + NAME field ...`).
Fields are separated by a comma, a tab or spaces; `#` starts a comment; blank
lines are skipped.  It leaves out feeding a dataflow (the CLI does that) and any
graph semantics beyond one check: a change stream may only remove an edge that is
present at that epoch, since removing an absent edge would give it a negative
multiplicity that no graph algorithm means.

The invariant kept: a file is parsed and checked *whole* before anything is
returned, so a malformed line raises `InputFormatError` (naming the file, the line
number and what was expected) before any update reaches a dataflow.

Node names are ints when every node token of the files parses as an int, else
strings: the graph algorithms order labels (`min`), and ints and strings do not
compare.

>>> edges = parse_edges(["# a triangle", "1 2", "2,3", "3\\t1"], name="g.txt")
>>> edges
[(1, 2), (2, 3), (3, 1)]
>>> parse_changes(["1 - 2 3", "2 + 3 4"], edges, name="c.txt")
[(1, (2, 3), -1), (2, (3, 4), 1)]
>>> parse_edges(["1 2", "1 2 3"], name="g.txt")
Traceback (most recent call last):
...
ddflow.io.InputFormatError: g.txt, line 2: expected 'src dst' (two fields separated by a comma, a tab or spaces), got '1 2 3'
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from ddflow.errors import DataflowError

_SPLIT = re.compile(r"\s*,\s*|\s+")


class InputFormatError(DataflowError):
    """An input file has a line that is not what was expected.

    `path` is the file, `line` the 1-based line number (None when the problem is
    not one line's), `text` the offending line.
    """

    def __init__(self, message: str, *, path: str, line: int | None = None,
                 text: str | None = None) -> None:
        where = f"{path}, line {line}" if line is not None else path
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.text = text


def _fields(raw: str) -> list[str]:
    body = raw.split("#", 1)[0].strip()
    return [f for f in _SPLIT.split(body) if f] if body else []


def read_lines(path: str | Path) -> tuple[list[str], str]:
    """`(lines, name)` of a UTF-8 file (whatever the locale says); an unreadable file,
    or a path the OS refuses (a NUL byte in it), is an `InputFormatError` too.

    Lines end at a newline (`\n`, `\r\n` or `\r`) only, as editors and `wc -l`
    count them: `str.splitlines` would also break at a form feed or a vertical tab
    and make the line numbers in errors wrong."""
    try:
        return Path(path).read_text(encoding="utf-8").split("\n"), str(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise InputFormatError(f"cannot read the file ({reason})", path=str(path)) from exc


def _node_kind(tokens: Iterable[str]) -> type:
    """`int` if every token parses as an int, else `str` (see the module docstring)."""
    for tok in tokens:
        try:
            int(tok)
        except ValueError:
            return str
    return int


_EDGE = "expected 'src dst' (two fields separated by a comma, a tab or spaces)"
_CHANGE = ("expected 'EPOCH + src dst' or 'EPOCH - src dst' (epoch a non-negative int, "
           "then + or -, then two node fields)")


def edge_rows(lines: Iterable[str], name: str) -> list[tuple[str, int, list[str]]]:
    """`(name, line number, [src, dst])` for every edge line, node tokens unconverted."""
    out = []
    for n, raw in enumerate(lines, 1):
        f = _fields(raw)
        if not f:
            continue
        if len(f) != 2:
            raise InputFormatError(f"{_EDGE}, got {raw.strip()!r}", path=name, line=n,
                                   text=raw)
        out.append((name, n, f))
    return out


def change_rows(lines: Iterable[str], name: str) -> list[tuple[str, int, int, int, list[str]]]:
    """`(name, line number, epoch, sign, [src, dst])` per change line, nodes unconverted."""
    out = []
    for n, raw in enumerate(lines, 1):
        f = _fields(raw)
        if not f:
            continue
        if len(f) != 4 or f[1] not in ("+", "-"):
            raise InputFormatError(f"{_CHANGE}, got {raw.strip()!r}", path=name, line=n,
                                   text=raw)
        try:
            epoch = int(f[0])
        except ValueError:
            epoch = -1
        if epoch < 0:
            raise InputFormatError(f"{_CHANGE}; the epoch {f[0]!r} is not a non-negative int",
                                   path=name, line=n, text=raw)
        out.append((name, n, epoch, 1 if f[1] == "+" else -1, f[2:]))
    return out


def _check_changes(rows: list, edges: list, kind: Any, noun: str = "edge") -> list[tuple]:
    """Convert the change rows, sorted by epoch, refusing a removal of an absent edge
    (or fact: `kind` converts a row's fields to the record, a type converting each)."""
    present: dict = {}
    for e in edges:
        present[e] = present.get(e, 0) + 1
    convert = (lambda f: tuple(kind(t) for t in f)) if isinstance(kind, type) else kind
    out = []
    for name, n, epoch, sign, f in sorted(rows, key=lambda r: r[2]):  # stable in an epoch
        e = convert(f)
        count = present.get(e, 0) + sign
        if count < 0:
            raise InputFormatError(f"removes the {noun} {e!r} at epoch {epoch}, but it is not "
                                   f"present then (expected '-' only for a {noun} inserted "
                                   "before)", path=name, line=n)
        present[e] = count
        out.append((epoch, e, sign))
    return out


def load_graph(edges_path: str | Path, changes_path: str | Path | None = None,
               roots: Sequence[str] = ()) -> tuple[list[tuple], list[tuple], list]:
    """`(edges, changes, roots)` from the files, checked whole before returning.

    `changes` is `[(epoch, (src, dst), diff)]` sorted by epoch (file order kept
    within an epoch); the edges are at epoch 0.  Node tokens of both files and the
    roots are converted together (all ints, or all strings).  A root that is a node
    of neither file is refused: a misspelt root would otherwise be reported as
    reachable (from itself) and nothing else.
    """
    e_rows = edge_rows(*read_lines(edges_path))
    c_rows = change_rows(*read_lines(changes_path)) if changes_path is not None else []
    tokens = [t for *_, f in e_rows for t in f] + [t for *_, f in c_rows for t in f]
    kind = _node_kind(tokens + list(roots))
    edges = [tuple(kind(t) for t in f) for *_, f in e_rows]
    nodes = {kind(t) for t in tokens}
    root_list = [kind(r) for r in roots]
    absent = list(dict.fromkeys(r for r in root_list if r not in nodes))
    if absent:
        which = (f"the root {absent[0]!r} (--roots) is in no edge" if len(absent) == 1
                 else f"the roots {', '.join(map(repr, absent))} (--roots) are in no edge")
        also = f" nor in {changes_path}" if changes_path is not None else ""
        raise InputFormatError(f"{which} of this file{also} (expected nodes of the graph)",
                               path=str(edges_path))
    return edges, _check_changes(c_rows, edges, kind), root_list


#: The suffixes of the files `load_facts` reads, one file per input relation.
FACT_SUFFIXES = (".csv", ".tsv", ".txt")


def value(token: str) -> Any:
    """A field of a facts file: an int if it parses as one, else the string, as a
    Datalog program writes its constants (`3`, `'a'`).

    >>> value("3"), value("-2"), value("a b")
    (3, -2, 'a b')
    """
    try:
        return int(token)
    except ValueError:
        return token


def load_facts(directory: str | Path, changes_path: str | Path | None = None
               ) -> tuple[dict[str, list[tuple]], list[tuple]]:
    """`(facts, changes)`: one relation per file `NAME.csv` / `NAME.tsv` / `NAME.txt`
    of `directory` (one fact per line, fields separated by a comma, a tab or spaces,
    the same number on every line), and a change stream of lines `EPOCH + NAME
    field ...` / `EPOCH - NAME field ...`, as `[(epoch, (NAME, fact), diff)]` sorted by
    epoch.  Everything is checked before returning; a change may only remove a fact
    present at its epoch, and must name a relation of `directory` with its arity.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise InputFormatError("expected a directory of facts files (NAME.csv, NAME.tsv "
                               "or NAME.txt, one per input relation)", path=str(directory))
    facts: dict[str, list[tuple]] = {}
    arity: dict[str, int] = {}
    for path in sorted(folder.iterdir()):
        if path.suffix not in FACT_SUFFIXES or not path.is_file():
            continue
        if path.stem in facts:
            raise InputFormatError(f"a second file for relation {path.stem!r}", path=str(path))
        lines, name = read_lines(path)
        rows = []
        for n, raw in enumerate(lines, 1):
            f = _fields(raw)
            if not f:
                continue
            if path.stem in arity and len(f) != arity[path.stem]:
                raise InputFormatError(f"expected {arity[path.stem]} fields, as on the first "
                                       f"line, got {len(f)}: {raw.strip()!r}", path=name,
                                       line=n, text=raw)
            arity[path.stem] = len(f)
            rows.append(tuple(value(t) for t in f))
        facts[path.stem] = rows
    c_rows: list = []
    if changes_path is not None:
        lines, name = read_lines(changes_path)
        for n, raw in enumerate(lines, 1):
            f = _fields(raw)
            if not f:
                continue
            if len(f) < 4 or f[1] not in ("+", "-") or not f[0].isdigit():
                raise InputFormatError("expected 'EPOCH + NAME field ...' or 'EPOCH - NAME "
                                       "field ...' (epoch a non-negative int), got "
                                       f"{raw.strip()!r}", path=name, line=n, text=raw)
            rel = f[2]
            if rel not in facts:
                raise InputFormatError(f"relation {rel!r} has no facts file in {directory} "
                                       f"(expected one of {', '.join(sorted(facts)) or 'none'})",
                                       path=name, line=n, text=raw)
            if arity.get(rel, len(f) - 3) != len(f) - 3:
                raise InputFormatError(f"relation {rel!r} has {arity[rel]} fields in its "
                                       f"facts file, this change {len(f) - 3}", path=name,
                                       line=n, text=raw)
            c_rows.append((name, n, int(f[0]), 1 if f[1] == "+" else -1, f[2:]))
    present = [(rel, fact) for rel, rows in facts.items() for fact in rows]
    changes = _check_changes(c_rows, present,
                             lambda f: (f[0], tuple(value(t) for t in f[1:])), noun="fact")
    return facts, changes


def counted(n: int, noun: str) -> str:
    """`n` and `noun`, pluralised with an "s" unless `n == 1`: the CLI's counts.

    >>> counted(1, "edge"), counted(6000, "edge"), counted(0, "change")
    ('1 edge', '6,000 edges', '0 changes')
    """
    return f"{n:,} {noun if n == 1 else noun + 's'}"


def parse_edges(lines: Iterable[str], name: str = "<input>") -> list[tuple]:
    """The edges of an in-memory edge list (ints if every node parses as one)."""
    rows = edge_rows(lines, name)
    kind = _node_kind(t for *_, f in rows for t in f)
    return [tuple(kind(t) for t in f) for *_, f in rows]


def parse_changes(lines: Iterable[str], edges: Sequence[tuple], name: str = "<input>",
                  kind: type = int) -> list[tuple[int, Any, int]]:
    """The `(epoch, edge, diff)` changes of an in-memory change stream over `edges`."""
    return _check_changes(change_rows(lines, name), list(edges), kind)


__all__ = ["InputFormatError", "load_graph", "load_facts", "edge_rows", "change_rows",
           "parse_edges", "parse_changes", "counted", "value", "FACT_SUFFIXES"]
