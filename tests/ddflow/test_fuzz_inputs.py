"""Fuzzing what reads user text: the CLI's file readers, the CLI itself, the rule parser.

Whatever bytes a file holds and whatever arguments are given, the readers raise only
`InputFormatError` (a `DataflowError`) naming the file and, for a bad line, its number;
`ddflow` run in-process exits 0 or 2 with a one-line message and never a traceback; the
rule parser of `ddflow.query` either parses or raises `QueryError`.  Inputs are built
from fragments that reach the readers' branches (separators, comments, signs, epochs,
long numbers, odd whitespace, invalid UTF-8) rather than uniform noise, which would
almost never get past the first check.  Each test runs a bounded number of examples so
the suite stays fast.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.cli import ALGORITHMS, main
from ddflow.io import InputFormatError, load_graph, parse_changes, parse_edges
from ddflow.query import QueryError, parse, query

# -- text that reaches the readers' branches -------------------------------------------

_GOOD_NODE = st.sampled_from(["1", "2", "3", "4", "0", "a", "b", "c"])
_ODD_NODE = st.sampled_from(["-1", "+2", "007", "1_0", "ä", "x y", "9" * 40, "9" * 5000,
                             "١", "1.5", "", "#", "'q'"])


def _rarely(common: st.SearchStrategy, rare: st.SearchStrategy) -> st.SearchStrategy:
    """`rare` about one time in ten: most lines must be good for a run to get far."""
    # (`one_of` would not do: it draws its branches about evenly however often one is
    # listed.)
    return st.sampled_from([common] * 9 + [rare]).flatmap(lambda chosen: chosen)


_NODE = _rarely(_GOOD_NODE, _ODD_NODE)
_SEP = _rarely(st.sampled_from([" ", ",", "\t"]),
               st.sampled_from([" , ", "  ", ",,", "\x0c", "\u00a0", ";"]))
_TAIL = _rarely(st.just(""), st.sampled_from([" # comment", "#", " ", "\r", "\x00",
                                              " extra"]))


@st.composite
def _edge_line(draw: st.DrawFn) -> str:
    if draw(st.sampled_from(range(20))) == 19:   # rare (draws lean to index 0)
        return draw(st.text(max_size=12))
    return draw(_NODE) + draw(_SEP) + draw(_NODE) + draw(_TAIL)


@st.composite
def _change_line(draw: st.DrawFn) -> str:
    if draw(st.sampled_from(range(20))) == 19:   # rare (draws lean to index 0)
        return draw(st.text(max_size=12))
    epoch = draw(_rarely(st.sampled_from(["0", "1", "2", "3"]),
                         st.sampled_from(["-1", "x", "1e3", "99999", "9" * 5000])))
    sign = draw(_rarely(st.sampled_from(["+", "-"]), st.sampled_from(["*", "", "+-"])))
    return (epoch + draw(_SEP) + sign + draw(_SEP) + draw(_NODE) + draw(_SEP) + draw(_NODE)
            + draw(_TAIL))


def _lines(line: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(line, max_size=8).map("\n".join)


def _content(line: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    """A file's bytes: lines of the format, encoded, sometimes damaged or replaced."""
    encoded = _lines(line).map(lambda s: s.encode("utf-8", "surrogatepass"))
    damaged = st.tuples(encoded, st.binary(max_size=4)).map(lambda p: p[0] + p[1])
    return _rarely(encoded, st.one_of(damaged, st.binary(max_size=40)))


_FUZZ = settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _write(folder: Path, name: str, data: bytes) -> str:
    path = folder / name
    path.write_bytes(data)
    return str(path)


def _names_file_and_line(exc: InputFormatError, paths: dict[str, int]) -> None:
    """The error names one of the files, and a line of it that exists (if any)."""
    assert exc.path in paths, exc.path
    assert str(exc).startswith(exc.path)
    if exc.line is not None:
        assert 1 <= exc.line <= paths[exc.path]
        assert f"line {exc.line}" in str(exc)


# -- the readers ------------------------------------------------------------------------


@_FUZZ
@given(edges=_content(_edge_line()), changes=st.none() | _content(_change_line()),
       roots=st.lists(_NODE, max_size=3))
def test_load_graph_raises_only_input_format_errors(tmp_path: Path, edges: bytes,
                                                     changes: bytes | None,
                                                     roots: list[str]) -> None:
    paths = {_write(tmp_path, "edges.txt", edges): max(1, len(edges.splitlines()))}
    changes_path = None
    if changes is not None:
        changes_path = _write(tmp_path, "changes.txt", changes)
        paths[changes_path] = max(1, len(changes.splitlines()))
    try:
        got_edges, got_changes, got_roots = load_graph(next(iter(paths)), changes_path, roots)
    except InputFormatError as exc:
        assert isinstance(exc, ddflow.DataflowError)
        _names_file_and_line(exc, paths)
        return
    # What was accepted is well formed: pairs of one node type, epochs >= 0, +-1 diffs.
    nodes = [n for e in got_edges for n in e] + [n for _t, e, _d in got_changes for n in e]
    assert all(len(e) == 2 for e in got_edges)
    assert len({type(n) for n in nodes + got_roots}) <= 1
    assert all(t >= 0 and d in (1, -1) for t, _e, d in got_changes)
    assert set(got_roots) <= set(nodes)


@_FUZZ
@given(text=st.one_of(_lines(_edge_line()), st.text(max_size=60)))
def test_parse_edges_and_changes_raise_only_input_format_errors(text: str) -> None:
    lines = text.splitlines()
    try:
        edges = parse_edges(lines, name="e.txt")
    except InputFormatError as exc:
        _names_file_and_line(exc, {"e.txt": max(1, len(lines))})
        return
    try:
        parse_changes(lines, edges, name="c.txt")
    except InputFormatError as exc:
        _names_file_and_line(exc, {"c.txt": max(1, len(lines))})


def test_unreadable_paths_are_input_format_errors(tmp_path: Path) -> None:
    for path in (str(tmp_path), str(tmp_path / "absent.txt"), "bad\x00path", ""):
        with pytest.raises(InputFormatError) as exc:
            load_graph(path)
        assert exc.value.path == path and exc.value.line is None


# -- the command, in-process ------------------------------------------------------------


def _run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:       # argparse: --help, --version, usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _check_outcome(code: int, err: str) -> None:
    assert "Traceback" not in err, err
    assert code in (0, 2), (code, err)
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith("ddflow"), err


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(algorithm=st.sampled_from(sorted(ALGORITHMS)), edges=_content(_edge_line()),
       changes=st.none() | _content(_change_line()),
       roots=st.none() | st.lists(_NODE.filter(lambda n: len(n) < 50), min_size=1,
                                  max_size=2).map(",".join))
def test_ddflow_run_on_fuzzed_files_exits_0_or_2_in_one_line(
        tmp_path: Path, algorithm: str, edges: bytes, changes: bytes | None,
        roots: str | None) -> None:
    argv = ["run", algorithm, "--edges", _write(tmp_path, "edges.txt", edges)]
    if changes is not None:
        argv += ["--changes", _write(tmp_path, "changes.txt", changes)]
    if roots is not None:
        argv += ["--roots=" + roots]
    code, out, err = _run_cli(argv)
    _check_outcome(code, err)
    if code == 0:
        assert out.startswith(f"# ddflow run {algorithm}:")


_VALUES = st.sampled_from(["0", "-5", "1", "2", "9", "x", "1e9", "", "1,2", ",", "local",
                           "sparkish", "FILE", "--"])
#: Per command, its options (each followed by a value) and its lone words: pairs of an
#: option and a value are what reach the checks of values.
_GRAMMAR = {
    "run": (["--edges", "--changes", "--roots", "--workers", "--engine", "-x"],
            ["reachability", "bfs", "scc", "triangles", "nope", "--help", "--roots=9",
             "--", "FILE", "EDGES", "EDGES", "EDGES"]),
    "demo": (["--workers", "--edges", "--nodes", "--epochs", "--seed", "-x"],
             ["--no-triangles", "--help", "nope", "--"]),
    "bench": ([], ["--help"]),
    "": (["--edges", "-x"], ["--help", "--version", "nope", "run", "demo"]),
}


@st.composite
def _argv(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(sorted(_GRAMMAR)))
    options, words = _GRAMMAR[command]
    arg = st.sampled_from(words).map(lambda w: [w])
    if options:
        arg = st.one_of(st.tuples(st.sampled_from(options), _VALUES).map(list), arg)
    argv = [command] if command else []
    if command == "bench":
        return argv + ["--help"]            # never run the benchmarks themselves
    for chunk in draw(st.lists(arg, max_size=4)):
        argv += chunk
    return argv


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=_argv())
def test_ddflow_on_fuzzed_arguments_exits_0_or_2_in_one_line(tmp_path: Path,
                                                              argv: list[str]) -> None:
    # "FILE" stands for a small edge list, "EDGES" for `--edges FILE`; a demo runs
    # on a handful of nodes only (argparse keeps the last value of an option).
    path = _write(tmp_path, "g.txt", b"1 2\n2 3\n3 1\n")
    expand = {"FILE": [path], "EDGES": ["--edges", path]}
    argv = [x for w in argv for x in expand.get(w, [w])]
    if argv[:1] == ["demo"]:
        argv += ["--nodes", "3", "--epochs", "1"]
    code, _out, err = _run_cli(argv)
    _check_outcome(code, err)


# -- the rule parser --------------------------------------------------------------------

_RULE_PARTS = st.sampled_from(["q", "p", "g", "h", "(", ")", ",", ".", ":-", ":", "-",
                               "x", "y", "z", "_", "'a'", "'", '"b\\"', "\\", "1", "-2",
                               "9" * 5000, " ", "\n", "\t", "é", "%", "q(x)", "g(x,y)",
                               "g(x, y), g(y, z)", "q(x, y, z) :- "])


_TERM = st.sampled_from(["x", "y", "z", "x", "y", "z", "_", "1", "2", "-2", "'a'", '"b\\"c"'])


@st.composite
def _rule(draw: st.DrawFn) -> str:
    """A well-formed rule over `g` (and sometimes an unknown `h`), often mutated."""
    bodies = [draw(st.lists(_TERM, min_size=n, max_size=n))
              for n in draw(st.lists(st.sampled_from([2, 2, 2, 1, 3]), min_size=1,
                                     max_size=3))]
    atoms = [draw(st.sampled_from(["g", "g", "g", "h"])) + "(" + ", ".join(terms) + ")"
             for terms in bodies]
    bound = sorted({v for terms in bodies for v in terms if v in ("x", "y", "z")})
    head_vars = draw(st.lists(st.sampled_from(bound or ["x"]), min_size=1, max_size=3,
                              unique=True))
    if draw(st.sampled_from(range(10))) == 9:
        head_vars.append("w")                   # unbound: refused
    head = "q(" + ", ".join(head_vars) + ")"
    text = head + " :- " + ", ".join(atoms) + draw(st.sampled_from(["", "."]))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = text[:at] + draw(_RULE_PARTS) + text[at:]
        else:
            text = text[:at] + text[at + 1:]
    return text


@settings(max_examples=300)
@given(rule=st.one_of(_rule(), st.lists(_RULE_PARTS, max_size=14).map("".join),
                      st.text(max_size=40)))
def test_the_rule_parser_raises_only_query_errors(rule: str) -> None:
    try:
        parsed = parse(rule)
    except QueryError as exc:
        assert isinstance(exc, ddflow.DataflowError)
        if exc.position is not None:
            assert 0 <= exc.position <= len(rule)
        return
    assert parsed.text == rule and parsed.body


@settings(max_examples=60)
@given(rule=_rule(), strategy=st.sampled_from([None, "delta", "generic", "binary", "other"]))
def test_planning_a_fuzzed_rule_raises_only_query_errors(rule: str,
                                                         strategy: str | None) -> None:
    df = ddflow.Dataflow()
    g_in, g = df.new_collection("g")
    try:
        out = query(rule, strategy=strategy, g=g).capture()
    except QueryError:
        return
    # A rule that plans also runs: over a triangle and a loop, the answer is a set of
    # tuples of the head's arity.
    for edge in [(1, 2), (2, 3), (1, 3), (2, 2)]:
        g_in.insert(edge)
    g_in.advance_to(1)
    if 2 not in {len(a.terms) for a in parse(rule).body}:
        # Pairs fed to a relation whose atoms take another arity: a DataError at the
        # relation's boundary naming it, rolled back (issue 24).
        with pytest.raises(ddflow.DataError, match="relation 'g' takes tuples of arity"):
            df.run()
        assert g_in.pending
        return
    df.run()
    arity = len(parse(rule).head.terms)
    assert all(type(t) is tuple and len(t) == arity for t in out.at(0))


def test_a_5000_digit_constant_is_a_query_error() -> None:
    # Python refuses to convert ints of more than 4,300 digits (a ValueError); the
    # parser reports it at the number instead.
    rule = "q(x) :- g(x, " + "9" * 5000 + ")"
    with pytest.raises(QueryError) as exc:
        parse(rule)
    assert exc.value.position == rule.index("9")


def test_line_numbers_count_newlines_only(tmp_path):
    """A form feed inside a line does not start a new one (hypothesis found errors
    naming line 5 of a four-line file)."""
    path = _write(tmp_path, "edges.txt", b"1 1\n1 1\n1 1\nx y\x0c1")
    with pytest.raises(InputFormatError) as err:
        load_graph(path)
    assert err.value.line == 4
