"""The `ddflow` command: the demo, graph algorithms on the user's files, the benchmarks.

What this module isolates: argument parsing and printing.  The work is done by
`ddflow.demo` (the demo), `ddflow.algorithms.graphs` and `ddflow.query` (the
algorithms of `ddflow run`), `ddflow.io` (reading files, all-or-nothing) and
`ddflow.bench` (the benchmarks).

* `ddflow demo`: incremental reachability, BFS and triangles on a generated graph,
  a progress bar over epochs, a summary table, and one line stating agreement with
  networkx.
* `ddflow run ALGORITHM --edges FILE [--changes FILE] [--roots ...] [--engine ...]`:
  one algorithm on an edge list, then on each epoch of a change stream; prints the
  changes of the output per epoch.  Input files are parsed and checked whole first,
  so a malformed line is reported (file, line, what was expected; exit status 2)
  before any update is applied.
* `ddflow bench`: runs the benchmarks and prints their tables.

Exit status: 0 on success, 1 when the demo disagrees with its oracle, 2 on bad
input or an engine that cannot start.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Sequence

import ddflow
from ddflow.errors import DataflowError
from ddflow.io import InputFormatError, load_graph

#: `ddflow run`'s algorithms: name -> (needs roots, what a record is).
ALGORITHMS: dict[str, tuple[bool, str]] = {
    "reachability": (True, "node reachable from a root"),
    "bfs": (True, "(node, distance from the nearest root)"),
    "components": (False, "(node, least node of its weakly connected component)"),
    "scc": (False, "(node, least node of its strongly connected component)"),
    "closure": (False, "(src, dst) joined by a path of one or more edges"),
    "triangles": (False, "(x, y, z) with edges x->y, y->z, x->z"),
}

__all__ = ["main", "ALGORITHMS", "InputFormatError"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ddflow",
        description="Differential dataflow in Python, over partially ordered time.")
    p.add_argument("--version", action="version", version=f"ddflow {ddflow.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="incremental graph analytics on a generated graph, "
                                       "checked epoch by epoch against networkx")
    demo.add_argument("--nodes", type=int, default=2000, help="graph size (default 2000)")
    demo.add_argument("--edges", type=int, default=6000, help="edges (default 6000)")
    demo.add_argument("--epochs", type=int, default=40, help="single-edge epochs (default 40)")
    demo.add_argument("--workers", type=int, default=1, help="simulated workers (default 1)")
    demo.add_argument("--seed", type=int, default=1)
    demo.add_argument("--no-triangles", action="store_true",
                      help="leave the triangle query out")

    run = sub.add_parser("run", help="run a graph algorithm on your edge list and changes",
                         description="Run ALGORITHM on the edges of FILE (epoch 0), then on "
                                     "each epoch of the change stream; print the output's "
                                     "changes per epoch as '+ record' / '- record'.")
    run.add_argument("algorithm", choices=sorted(ALGORITHMS), metavar="ALGORITHM",
                     help="one of: " + ", ".join(sorted(ALGORITHMS)))
    run.add_argument("--edges", required=True, metavar="FILE",
                     help="edge list: 'src dst' per line, separated by a comma, tab or "
                          "spaces; '#' starts a comment")
    run.add_argument("--changes", metavar="FILE",
                     help="change stream: 'EPOCH + src dst' or 'EPOCH - src dst' per line")
    run.add_argument("--roots", nargs="+", metavar="NODE",
                     help="roots of reachability / bfs (default: the first edge's source)")
    run.add_argument("--engine", choices=("local", "spark"), default="local",
                     help="where to run (default local)")
    run.add_argument("--workers", type=int, default=1,
                     help="simulated workers of the local engine (default 1)")

    bench = sub.add_parser("bench", help="run the benchmarks and print their tables")
    bench.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    bench.add_argument("--quick", action="store_true", help="smaller workloads")
    return p


def main(argv: Sequence[str] | None = None) -> int:
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
        from ddflow.demo import run_demo
        return run_demo(nodes=args.nodes, edges=args.edges, epochs=args.epochs,
                        workers=args.workers, seed=args.seed,
                        triangles=not args.no_triangles)
    if args.command == "run":
        try:
            return run_algorithm(args.algorithm, args.edges, args.changes, roots=args.roots,
                                 engine=args.engine, workers=args.workers)
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
                  workers: int = 1, out: Callable[[str], Any] = print) -> int:
    """`ddflow run`: parse both files whole, then feed epoch by epoch and print.

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
    out(f"# ddflow run {algorithm}: {len(edges):,} edges, {len(changes):,} changes over "
        f"{len(epochs)} epoch{'s' if len(epochs) != 1 else ''}"
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
            df.run()
            now = [u for u in captured.updates if u[1] == epoch]
            out(f"epoch {epoch}: {len(now)} change{'s' if len(now) != 1 else ''}")
            for data, _t, diff in now:
                sign = "+" if diff > 0 else "-"
                mult = f"{abs(diff)} x " if abs(diff) != 1 else ""
                out(f"  {sign} {mult}{_show(data)}")
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
