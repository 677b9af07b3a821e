"""The `ddflow` command: the demo, and the benchmarks.

`ddflow demo` runs incremental graph analytics (reachability and BFS distances) on a
generated graph over a stream of edge insertions and deletions on the local engine,
checks every epoch against a plain Python recomputation, and prints answers and work
per epoch.  `ddflow bench` runs the benchmarks and prints their tables.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import ddflow


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ddflow",
        description="Differential dataflow in Python, over partially ordered time.")
    p.add_argument("--version", action="version", version=f"ddflow {ddflow.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="incremental graph analytics on a generated graph, "
                                       "checked epoch by epoch")
    demo.add_argument("--nodes", type=int, default=2000, help="graph size (default 2000)")
    demo.add_argument("--edges", type=int, default=6000, help="edges (default 6000)")
    demo.add_argument("--epochs", type=int, default=40, help="single-edge epochs (default 40)")
    demo.add_argument("--workers", type=int, default=1, help="simulated workers (default 1)")
    demo.add_argument("--seed", type=int, default=1)
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
        from ddflow.demo import run_demo
        return run_demo(nodes=args.nodes, edges=args.edges, epochs=args.epochs,
                        workers=args.workers, seed=args.seed)
    if args.command == "bench":
        from ddflow.bench import run_benchmarks
        return run_benchmarks(args.names, quick=args.quick)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
