"""Shared plumbing for benchmarks: timing, memory, tables, JSON results.

Benchmarks report time and memory as ratios against a baseline measured in the same
run (the machines are shared and noisy); tests never assert on time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

RESULTS = Path(__file__).resolve().parent / "results"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    value = fn()
    return time.perf_counter() - t, value


def peak_memory(fn: Callable[[], Any]) -> tuple[int, Any]:
    """Peak Python heap (bytes, tracemalloc) while `fn` runs."""
    tracemalloc.start()
    try:
        value = fn()
        return tracemalloc.get_traced_memory()[1], value
    finally:
        tracemalloc.stop()


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def p90(xs: Sequence[float]) -> float:
    if not xs:
        return float("nan")
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def table(title: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [title, line, "-" * len(line)]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def goals_table(title: str, goals: Iterable[dict]) -> str:
    """An issue's goals as judged by a run: `{"goal", "measured", "met"}` each, where
    `met` None means not judged (a size this run did not reach)."""
    return table(title, ["goal", "measured", "met"],
                 [[g["goal"], "-" if g["measured"] is None else g["measured"],
                   {True: "yes", False: "NO", None: "-"}[g["met"]]] for g in goals])


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:,.3f}" if abs(x) < 100 else f"{x:,.0f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def save(name: str, result: dict, path: Path | None = None) -> Path:
    """Write `result` as JSON to `path` (default `benchmarks/results/<name>.json`)."""
    path = RESULTS / f"{name}.json" if path is None else Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": name, "python": os.sys.version.split()[0], **result}
    path.write_text(json.dumps(result, indent=2, default=str))
    return path


def standard_args(module: str, doc: str, results: Path,
                  argv: Sequence[str] | None,
                  extra: Callable[[argparse.ArgumentParser], None] | None = None
                  ) -> argparse.Namespace:
    """The options every small benchmark takes: `--quick` (small sizes, for tests),
    `--seed` and `--out` (where the JSON goes, `results` by default); `extra` adds a
    benchmark's own."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{module}",
                                     description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (for tests)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(results), help="where to write the JSON")
    if extra is not None:
        extra(parser)
    return parser.parse_args(argv)
