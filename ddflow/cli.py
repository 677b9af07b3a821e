"""The `ddflow` command: the demo, graph algorithms on the user's files, the benchmarks.

What this module isolates: argument parsing and printing.  The work is done by
`ddflow.demo` (the demo), `ddflow.algorithms.graphs` and `ddflow.query` (the
algorithms of `ddflow run`), `ddflow.io` (reading files, all-or-nothing) and
`ddflow.bench` (the benchmarks).

* `ddflow demo`: incremental reachability, BFS and triangles on a generated graph,
  a progress bar over epochs, a summary table, and one line stating agreement with
  networkx.
* `ddflow run ALGORITHM --edges FILE [--changes FILE] [--roots NODE[,NODE...]] [--engine ...]`:
  one algorithm on an edge list, then on each epoch of a change stream; prints the
  changes of the output per epoch.  Input files are parsed and checked whole first,
  so a malformed line is reported (file, line, what was expected; exit status 2)
  before any update is applied.
* `ddflow run datalog --program FILE --facts DIR [--changes FILE] [--why FACT]`: a
  Datalog program (`ddflow.datalog`) over one facts file per input relation, then
  each epoch of a change stream (`EPOCH + NAME field ...`); prints each derived
  relation's changes per epoch as `+ name(a, b)` / `- name(a, b)`, and with `--why`
  a proof tree of each fact asked about at the last epoch (`ddflow.proofs`).
* `--progress` (on `run`) draws each epoch's `run()` as a line of rounds and records
  on standard error.
* `ddflow bench`: runs the benchmarks and prints their tables.

Exit status: 0 on success, 1 when the demo disagrees with its oracle, 2 on bad
arguments, bad input or an engine that cannot start (one line on stderr, never a
traceback), 141 (128 + SIGPIPE, as the shell reports a process stopped by a closed
pipe) when the reader of the output goes away, as in `ddflow run ... | head`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, NoReturn, Sequence

import ddflow
from ddflow.errors import DataflowError
from ddflow.io import InputFormatError, counted, load_graph

#: `ddflow run`'s algorithms: name -> (needs roots, what a record is).
ALGORITHMS: dict[str, tuple[bool, str]] = {
    "reachability": (True, "node reachable from a root"),
    "bfs": (True, "(node, distance from the nearest root)"),
    "components": (False, "(node, least node of its weakly connected component)"),
    "scc": (False, "(node, least node of its strongly connected component)"),
    "closure": (False, "(src, dst) joined by a path of one or more edges"),
    "triangles": (False, "(x, y, z) with edges x->y, y->z, x->z"),
    "datalog": (False, "a fact of a relation the program derives"),
}

__all__ = ["main", "run_algorithm", "run_datalog", "ALGORITHMS", "InputFormatError"]

#: Exit status when stdout's reader closed the pipe (the shell's 128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


def _count(least: int) -> Callable[[str], int]:
    """An argparse type: an int of at least `least` (argparse turns the error into
    exit status 2 and one line naming the option)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an int, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"expected an int >= {least}, got {value}")
        return value
    parse.__name__ = f"int >= {least}"
    return parse


def _nodes(text: str) -> list[str]:
    """An argparse type for `--roots`: one node or a comma-separated list of them."""
    nodes = [t.strip() for t in text.split(",") if t.strip()]
    if not nodes:
        raise argparse.ArgumentTypeError(f"expected NODE[,NODE...], got {text!r}")
    return nodes


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line: the error and where to find usage.

    `commands` maps a command's name to its own parser (set on the top parser), so
    a check made after parsing reports as that command's argparse would.
    """

    commands: dict[str, "_Parser"]

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> _Parser:
    p = _Parser(
        prog="ddflow",
        description="Differential dataflow in Python, over partially ordered time.",
        epilog="exit status: 0 success, 1 the demo disagrees with its oracle, 2 bad "
               "arguments or input or an engine that cannot start, 141 the reader of "
               "the output went away")
    p.add_argument("--version", action="version", version=f"ddflow {ddflow.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="incremental graph analytics on a generated graph, "
                                       "checked epoch by epoch against networkx")
    demo.add_argument("--nodes", type=_count(1), default=2000,
                      help="graph size (default 2000)")
    demo.add_argument("--edges", type=_count(1), default=None,
                      help="distinct edges, self loops included, at most nodes^2 "
                           "(default 3 per node, capped at nodes^2)")
    demo.add_argument("--epochs", type=_count(0), default=40,
                      help="single-edge epochs (default 40)")
    demo.add_argument("--workers", type=_count(1), default=1,
                      help="simulated workers (default 1)")
    demo.add_argument("--seed", type=int, default=1)
    demo.add_argument("--no-triangles", action="store_true",
                      help="leave the triangle query out")

    run = sub.add_parser("run", help="run a graph algorithm on your edge list and changes",
                         description="Run ALGORITHM on the edges of FILE (epoch 0), then on "
                                     "each epoch of the change stream; print the output's "
                                     "changes per epoch as '+ record' / '- record'.")
    run.add_argument("algorithm", choices=sorted(ALGORITHMS), metavar="ALGORITHM",
                     help="one of: " + ", ".join(sorted(ALGORITHMS)))
    run.add_argument("--edges", metavar="FILE",
                     help="edge list (every algorithm but datalog): 'src dst' per line, "
                          "separated by a comma, tab or spaces; '#' starts a comment")
    run.add_argument("--changes", metavar="FILE",
                     help="change stream: 'EPOCH + src dst' or 'EPOCH - src dst' per line "
                          "(datalog: 'EPOCH + NAME field ...' / 'EPOCH - NAME field ...')")
    run.add_argument("--program", metavar="FILE",
                     help="datalog: the program, rules 'head(x, ..) :- body.' and facts")
    run.add_argument("--facts", metavar="DIR",
                     help="datalog: one file NAME.csv / NAME.tsv / NAME.txt per input "
                          "relation, one fact per line")
    run.add_argument("--roots", type=_nodes, action="extend", metavar="NODE[,NODE...]",
                     help="roots of reachability / bfs, comma-separated, the option "
                          "repeatable (default: the first edge's source); each must be "
                          "a node of the edge list or the change stream")
    run.add_argument("--engine", choices=("local", "spark"), default="local",
                     help="where to run (default local)")
    run.add_argument("--workers", type=_count(1), default=1,
                     help="simulated workers of the local engine (default 1)")
    run.add_argument("--why", action="append", metavar="FACT", default=[],
                     help="datalog: after the last epoch, print a proof tree of FACT "
                          "(say 'tc(1, 4)'): the rules and input facts deriving it; "
                          "repeatable")
    run.add_argument("--progress", action="store_true",
                     help="draw each epoch's run() as a progress line of rounds and "
                          "records on standard error")

    bench = sub.add_parser("bench", help="run the benchmarks and print their tables")
    bench.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    bench.add_argument("--quick", action="store_true", help="smaller workloads")
    p.commands = sub.choices
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The `ddflow` command: parse `argv` (default `sys.argv[1:]`), run, return the
    exit status (see the module docstring)."""
    try:
        status = _main(argv)
        sys.stdout.flush()      # a closed pipe shows here, not at interpreter exit
        return status
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly.  Point stdout at devnull so
        # the interpreter's final flush does not raise again, as the Python docs
        # advise (library/signal, "Note on SIGPIPE").
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _silence_stdout() -> None:
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return              # not a real file (an in-process capture): nothing to flush
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        try:
            import rich  # noqa: F401 - the demo's progress bar and table
        except ImportError:
            print("ddflow demo needs rich: pip install -e '.[test]' (or pip install rich)",
                  file=sys.stderr)
            return 2
        edges = args.edges if args.edges is not None else min(3 * args.nodes,
                                                               args.nodes ** 2)
        if edges > args.nodes ** 2:
            parser.commands["demo"].error(
                f"argument --edges: {edges:,} distinct edges cannot fit in {args.nodes:,} "
                f"nodes (at most {args.nodes ** 2:,}, self loops included)")
        from ddflow.demo import run_demo
        return run_demo(nodes=args.nodes, edges=edges, epochs=args.epochs,
                        workers=args.workers, seed=args.seed,
                        triangles=not args.no_triangles)
    if args.command == "run":
        run = parser.commands["run"]
        datalog = args.algorithm == "datalog"
        for option, needed in (("--edges", not datalog), ("--program", datalog),
                               ("--facts", datalog)):
            given = getattr(args, option[2:]) is not None
            if needed and not given:
                run.error(f"{args.algorithm} needs {option}")
            if given and not needed:
                run.error(f"argument {option}: not an option of {args.algorithm}")
        if datalog and args.roots:
            run.error("argument --roots: not an option of datalog")
        if args.why and not datalog:
            run.error(f"argument --why: not an option of {args.algorithm}")
        try:
            if datalog:
                return run_datalog(args.program, args.facts, args.changes,
                                   engine=args.engine, workers=args.workers,
                                   progress=args.progress, why=args.why)
            return run_algorithm(args.algorithm, args.edges, args.changes, roots=args.roots,
                                 engine=args.engine, workers=args.workers,
                                 progress=args.progress)
        except DataflowError as exc:
            print(f"ddflow run: {exc}", file=sys.stderr)
            return 2
    if args.command == "bench":
        from ddflow.bench import run_benchmarks
        return run_benchmarks(args.names, quick=args.quick)
    parser.error(f"unknown command {args.command}")
    return 2


# --------------------------------------------------------------------------------------
# ddflow run


def _build(algorithm: str, edges: Any, roots: Any) -> Any:
    from ddflow.algorithms import graphs
    if algorithm == "reachability":
        return graphs.reachability(edges, roots)
    if algorithm == "bfs":
        return graphs.bfs(edges, roots)
    if algorithm == "components":
        return graphs.connected_components(edges)
    if algorithm == "scc":
        return graphs.strongly_connected_components(edges)
    if algorithm == "closure":
        return graphs.transitive_closure(edges)
    if algorithm == "triangles":
        from ddflow.demo import TRIANGLES
        return _require_query()(TRIANGLES, g=edges)
    raise ValueError(f"unknown algorithm {algorithm!r}")


def _require_query() -> Callable:
    try:
        from ddflow.query import query
    except ImportError as exc:
        raise ddflow.EngineUnavailableError(
            "triangles needs ddflow.query (worst-case optimal joins), which this "
            f"installation lacks ({exc})") from exc
    return query


def _engine(name: str) -> Any:
    """The engine for `--engine`: None (local) or a SparkEngine, imported lazily."""
    if name == "local":
        return None
    try:
        try:
            SparkEngine = ddflow.SparkEngine       # the front door, once it exports it
        except AttributeError:
            from ddflow.engine.spark import SparkEngine
    except ImportError as exc:
        raise ddflow.EngineUnavailableError(
            f"--engine spark: the Spark engine is not available here ({exc}); "
            "use --engine local") from exc
    return SparkEngine()


def run_algorithm(algorithm: str, edges_path: str, changes_path: str | None = None, *,
                  roots: Sequence[str] | None = None, engine: str = "local",
                  workers: int = 1, out: Callable[[str], Any] = print,
                  progress: Any = False) -> int:
    """`ddflow run`: parse both files whole, then feed epoch by epoch and print
    (`progress`: what `Dataflow.run` takes, a progress line per epoch).

    Raises `InputFormatError` (nothing applied) on a malformed file, and
    `EngineUnavailableError` when the engine or a needed module is missing.
    """
    needs_roots, what = ALGORITHMS[algorithm]
    edges, changes, root_list = load_graph(edges_path, changes_path, roots or ())
    if algorithm == "triangles":
        _require_query()     # fail before starting any engine
    if needs_roots and not root_list:
        if not edges:
            raise InputFormatError("expected at least one edge (no --roots given, and the "
                                   "default root is the first edge's source)",
                                   path=edges_path)
        root_list = [edges[0][0]]
    eng = _engine(engine)
    df = ddflow.Dataflow(engine=eng) if eng is not None else ddflow.Dataflow(workers=workers)
    e_in, e = df.new_collection("edges")
    r_in, r = df.new_collection("roots")
    captured = _build(algorithm, e, r).capture(algorithm)

    epochs = sorted({0} | {epoch for epoch, _e, _d in changes})
    by_epoch: dict[int, list] = {}
    for epoch, edge, diff in changes:
        by_epoch.setdefault(epoch, []).append((edge, diff))
    out(f"# ddflow run {algorithm}: {counted(len(edges), 'edge')}, "
        f"{counted(len(changes), 'change')} over {counted(len(epochs), 'epoch')}"
        + (f", roots {root_list}" if needs_roots else "")
        + f"; a record is {what}")
    try:
        for x in edges:
            e_in.update_at(x, 0, 1)
        if needs_roots:
            for x in root_list:
                r_in.update_at(x, 0, 1)
        for epoch in epochs:
            for edge, diff in by_epoch.get(epoch, ()):
                e_in.update_at(edge, epoch, diff)
            e_in.advance_to(epoch + 1)
            r_in.advance_to(epoch + 1)
            df.run(progress=progress)
            now = captured.changes(epoch)
            out(f"epoch {epoch}: {counted(len(now), 'change')}")
            for data, _t, diff in now:
                sign = "+" if diff > 0 else "-"
                mult = f"{abs(diff)} x " if abs(diff) != 1 else ""
                out(f"  {sign} {mult}{_show(data)}")
    finally:
        stop = getattr(eng, "stop", None)
        if stop is not None:
            stop()
    return 0


def run_datalog(program_path: str, facts_dir: str, changes_path: str | None = None, *,
                engine: str = "local", workers: int = 1, out: Callable[[str], Any] = print,
                progress: Any = False, why: Sequence[str] = ()) -> int:
    """`ddflow run datalog`: read the program and the facts whole, then feed epoch by
    epoch and print each derived relation's changes as `+ name(a, b)` / `- name(a, b)`.

    With `why`, then prints a proof tree of each of those facts at the last epoch
    (`ddflow.proofs`).

    Raises `InputFormatError` (nothing applied) on an unreadable or malformed file,
    `QueryError` on a program that cannot be planned or a fact to explain that is
    malformed or not derived.
    """
    from ddflow.io import read_lines, load_facts
    from ddflow.programs import datalog, parse_program
    from ddflow.proofs import parse_fact, show_fact
    questions = [parse_fact(f) for f in why]      # refuse a malformed one up front

    lines, _name = read_lines(program_path)
    text = "\n".join(lines)
    facts, changes = load_facts(facts_dir, changes_path)
    program = parse_program(text, facts)     # refuse a bad program before any engine
    eng = _engine(engine)
    df = ddflow.Dataflow(engine=eng) if eng is not None else ddflow.Dataflow(workers=workers)
    sessions, relations = {}, {}
    for name in program.inputs:
        sessions[name], relations[name] = df.new_collection(name)
    derived = datalog(text, **relations)
    # A program reading no input holds its facts in a dataflow of its own.
    df = next(iter(derived.values())).dataflow if derived and not sessions else df
    captures = {name: coll.capture(name) for name, coll in derived.items()}
    epochs = sorted({0} | {epoch for epoch, _f, _d in changes})
    by_epoch: dict[int, list] = {}
    for epoch, fact, diff in changes:
        by_epoch.setdefault(epoch, []).append((fact, diff))
    n_facts = sum(len(rows) for rows in facts.values())
    rules = sum(1 for c in program.clauses if c.body)
    strata = len(program.strata)
    out(f"# ddflow run datalog: {counted(rules, 'rule')} in {strata} "
        f"{'stratum' if strata == 1 else 'strata'}, {counted(n_facts, 'input fact')}, "
        f"{counted(len(changes), 'change')} over {counted(len(epochs), 'epoch')}; "
        f"derived: {', '.join(derived) or 'nothing'}")
    try:
        for name, session in sessions.items():
            for fact in facts[name]:
                session.update_at(fact, 0, 1)
        for epoch in epochs:
            for (name, fact), diff in by_epoch.get(epoch, ()):
                if name in sessions:        # a relation the program does not read
                    sessions[name].update_at(fact, epoch, diff)
            for session in sessions.values():
                session.advance_to(epoch + 1)
            df.run(progress=progress)
            now = [(name, u) for name, cap in captures.items() for u in cap.changes(epoch)]
            out(f"epoch {epoch}: {counted(len(now), 'change')}")
            for name, (data, _t, diff) in now:
                sign = "+" if diff > 0 else "-"
                mult = f"{abs(diff)} x " if abs(diff) != 1 else ""
                out(f"  {sign} {mult}{name}{_show(data)}")
        for fact in questions:
            proof = derived.why(fact, time=epochs[-1])
            out(f"why {show_fact(fact)} at epoch {epochs[-1]}:")
            for line in proof.lines():
                out(line)
    finally:
        stop = getattr(eng, "stop", None)
        if stop is not None:
            stop()
    return 0


def _show(data: Any) -> str:
    if isinstance(data, tuple):
        return "(" + ", ".join(_show(d) for d in data) + ")"
    return str(data)


if __name__ == "__main__":
    sys.exit(main())
