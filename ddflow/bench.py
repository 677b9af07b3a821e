"""`ddflow bench`: find the benchmark scripts of the checkout and run them."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Sequence


def _benchmarks_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "benchmarks"


def available() -> list[str]:
    d = _benchmarks_dir()
    return sorted(p.stem[len("bench_"):] for p in d.glob("bench_*.py")) if d.is_dir() else []


def run_benchmarks(names: Sequence[str] = (), quick: bool = False) -> int:
    """Run the named benchmarks (all by default); each prints a table and writes JSON."""
    root = _benchmarks_dir()
    if not root.is_dir():
        print("no benchmarks/ directory next to the installed ddflow: run from a checkout "
              "installed with `pip install -e .`", file=sys.stderr)
        return 2
    names = list(names) or available()
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {available()}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(root.parent))
    for name in names:
        module = importlib.import_module(f"benchmarks.bench_{name}")
        module.main(["--quick"] if quick else [])
        print()
    return 0
