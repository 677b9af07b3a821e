"""Benchmark: the engine core's standing guards, this checkout against the parent commit.

The guards every later issue keeps (the loops and bulk issues name the first): a
one-edge reachability epoch at 2k nodes / 6k edges and at 200k / 600k stays >= 0.9x
the speed of the parent commit of the work, measured in the same run; progress
tracking takes <= 15% of an epoch's CPU; `Capture.at(t)` with 100k captured updates
takes <= 10 ms.  (The engine-core issue that wrote this script asked for 3x and 10x
against ad1a9b2; that goal was met and closed.)

How it measures:

* The parent (`--base`, default `HEAD~1`; pass the commit your work started from)
  is checked out in a temporary `git worktree` (a directory `ddflow-bench-*`,
  removed at the end, also on error).
* Every measurement runs in a child process (`benchmarks/engine_core_child.py`)
  with `PYTHONPATH` and the working directory set to the tree measured, base and
  current interleaved, the order turned every other repetition (base, current,
  current, base ...), so drift on a shared machine hits both alike.  The children time **process CPU** (`time.process_time`)
  around the timed region only; the table gives medians over every epoch (or read)
  of every repetition, and the ratio base / current.
* The inputs are made here, once, with `bench_reachability.workload` (a random
  graph, 5 roots, one-edge inserts then deletes) and handed to both trees in a file,
  so both answer the same questions; their answers are compared.
* Workloads: (a) reachability at 2,000 nodes / 6,000 edges, 20 + 20 one-edge
  epochs; (b) the same at 200,000 / 600,000 (the initial load is measured but only
  epochs are compared); (c) 100,000 records captured over 100 epochs, then a few
  small steps, each followed by `at(latest final time)`.
* A cProfile of the 2k epochs in the current tree, three times (the one of median
  share is shown): their CPU, progress tracking's share (the inclusive time of calls
  into `ddflow/progress.py` from outside it), and the top functions by own time.  The scheduler's pass count (`engine.passes`), per
  epoch, where the engine has one.

Run from the repository root:

    python -m benchmarks.bench_engine_core              # ~5 minutes on 2 cores
    python -m benchmarks.bench_engine_core --quick      # small sizes, < 1 minute
    python -m benchmarks.bench_engine_core --no-base    # the current tree only

It prints tables and writes JSON to `benchmarks/results/engine_core.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from benchmarks.bench_reachability import workload
from benchmarks.common import goals_table, median, save, table
from ddflow.errors import DataflowError

REPO = Path(__file__).resolve().parent.parent
CHILD = Path(__file__).resolve().parent / "engine_core_child.py"
BASE = "HEAD~1"
NO_REGRESSION = 0.9  # the one-edge epoch at >= 0.9x the base's speed
PROFILES = 3        # profiles of the 2k epochs; the median share is reported

FULL = {
    "reach_2k": dict(task="reach", nodes=2_000, edges=6_000, roots=5, changes=20, reps=5),
    # Four repetitions: its epochs are as noisy as the small graph's on a shared
    # box, and two left the ratio swinging between 2.6x and 3.9x run to run.
    "reach_200k": dict(task="reach", nodes=200_000, edges=600_000, roots=5, changes=20,
                       reps=4, budget_s=480),
    "capture_100k": dict(task="capture", records=100_000, epochs=100, reads=5, changes=10,
                         reps=5),
}
QUICK = {
    "reach_2k": dict(task="reach", nodes=200, edges=600, roots=5, changes=5, reps=1),
    "reach_200k": dict(task="reach", nodes=20_000, edges=60_000, roots=5, changes=3, reps=1),
    "capture_100k": dict(task="capture", records=10_000, epochs=10, reads=3, changes=10,
                         reps=1),
}
#: A child slower than this on one workload is stopped (and the run fails).
CHILD_TIMEOUT_S = 900
#: Past this much wall time on one workload, no further repetition starts (the run
#: says so): at 200k nodes the initial load, not the epochs, is what takes minutes.
BUDGET_S = 600
TOP = 12


class BenchmarkError(DataflowError):
    """A child measurement failed, or the base tree could not be checked out."""


# -- the trees ----------------------------------------------------------------------

def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, text=True,
                          capture_output=True).stdout.strip()


@contextmanager
def base_tree(rev: str) -> Iterator[Path]:
    """A detached `git worktree` of `rev` in a temporary directory, removed on exit."""
    tmp = Path(tempfile.mkdtemp(prefix="ddflow-bench-"))
    path = tmp / "base"
    try:
        try:
            _git("worktree", "add", "--detach", str(path), rev)
        except subprocess.CalledProcessError as exc:
            raise BenchmarkError(f"cannot check out {rev!r}: {exc.stderr.strip()}") from exc
        yield path
    finally:
        if path.exists():
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(path)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def run_child(tree: Path, task: str, params: dict, tmp: Path, child: Path = CHILD,
              timeout: float = CHILD_TIMEOUT_S, env: dict | None = None) -> dict:
    """Run one measurement (`child`'s `task`) in a fresh interpreter importing
    ddflow from `tree`; `env`: variables set for it besides."""
    pfile = tmp / f"params-{task}-{os.getpid()}-{time.monotonic_ns()}.json"
    pfile.write_text(json.dumps(params))
    env = dict(os.environ, **(env or {}), PYTHONPATH=str(tree), PYTHONHASHSEED="0")
    # -P: the child's script directory (this checkout's benchmarks/) must not come
    # first on sys.path when the base tree is measured.
    cmd = [sys.executable, "-P", str(child), task, str(pfile)]
    try:
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise BenchmarkError(f"{task} in {tree} took over {timeout} s") from exc
    finally:
        pfile.unlink(missing_ok=True)
    if done.returncode != 0:
        raise BenchmarkError(f"{task} in {tree} failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    if Path(result["ddflow"]) != (tree / "ddflow").resolve():
        raise BenchmarkError(f"the child measured {result['ddflow']}, not {tree}")
    return result


# -- the measurements -----------------------------------------------------------------

def _inputs(config: dict, tmp: Path, seed: int) -> dict[str, Path]:
    files = {}
    for name, c in config.items():
        if c["task"] == "reach":
            initial, roots, steps = workload(c["nodes"], c["edges"], c["roots"], c["changes"],
                                             seed)
            files[name] = tmp / f"{name}.json"
            files[name].write_text(json.dumps({"initial": initial, "roots": roots,
                                                "steps": steps}))
    return files


def _params(name: str, c: dict, files: dict, seed: int) -> dict:
    if c["task"] == "reach":
        return {"workload": str(files[name]), "epochs": 2 * c["changes"], "top": TOP}
    # Records, epochs, small steps with their reads, changes per step.
    return {k: c[k] for k in ("records", "epochs", "reads", "changes")} | {"seed": seed}


def measure(trees: dict[str, Path], config: dict, seed: int, tmp: Path,
            notes: list[str], log: Any = print) -> dict:
    files = _inputs(config, tmp, seed)
    out: dict = {}
    for name, c in config.items():
        runs: dict[str, list] = {t: [] for t in trees}
        params = _params(name, c, files, seed)
        started = time.monotonic()
        budget = c.get("budget_s", BUDGET_S)
        for rep in range(c["reps"]):
            if rep and time.monotonic() - started > budget:
                notes.append(f"{name}: {rep} of {c['reps']} repetitions, the others "
                             f"would pass the {budget} s budget")
                break
            # Interleaved, the order turned every other repetition (base, current, then
            # current, base): a base always first read 0.92-0.96x for the same speed.
            pairs = list(trees.items())
            for tree_name, tree in (pairs if rep % 2 == 0 else pairs[::-1]):
                t0 = time.monotonic()
                runs[tree_name].append(run_child(tree, c["task"], params, tmp))
                log(f"  {name} rep {rep + 1}/{c['reps']} {tree_name}: "
                    f"{time.monotonic() - t0:.1f} s wall", file=sys.stderr)
        out[name] = _summarize(c, runs)
    # cProfile's clock is wall time: a child descheduled on a loaded machine charges
    # the wait to whatever function runs.  Three profiles; the one of median share.
    profiles = sorted((run_child(trees["current"], "profile",
                                 _params("reach_2k", config["reach_2k"], files, seed), tmp)
                       for _ in range(PROFILES)), key=lambda r: r["progress_share"])
    out["profile"] = dict(profiles[len(profiles) // 2],
                          shares=[r["progress_share"] for r in profiles])
    return out


def _summarize(c: dict, runs: dict[str, list]) -> dict:
    key = "epoch_ms" if c["task"] == "reach" else "read_ms"
    s: dict = {"task": c["task"], "unit": "CPU ms per " + ("epoch" if key == "epoch_ms"
                                                            else "read"),
               "config": {k: v for k, v in c.items() if k != "task"}}
    for tree, rs in runs.items():
        samples = [x for r in rs for x in r[key]]
        t = {"median_ms": median(samples), "per_rep_median_ms": [median(r[key]) for r in rs],
             "samples": len(samples), "answer_size": rs[0]["answer_size"]}
        if c["task"] == "reach":
            t["load_ms"] = median([r["load_ms"] for r in rs])
            passes = rs[0].get("passes")
            t["passes_per_epoch"] = passes
            t["median_passes"] = median(passes) if passes else None
        else:
            t["first_read_ms"] = median([r["first_read_ms"] for r in rs])
        s[tree] = t
    s["answers_agree"] = len({r["answer"] for rs in runs.values() for r in rs}) == 1
    s["answer"] = next(iter(runs.values()))[0]["answer"]
    if "base" in s:
        s["ratio"] = s["base"]["median_ms"] / s["current"]["median_ms"]
    return s


def goals(result: dict) -> list[dict]:
    """The standing guards, each with what this run measured."""
    m = result["measured"]
    rows = []
    for name in ("reach_2k", "reach_200k"):
        ratio = m[name].get("ratio")
        rows.append({"goal": f"{name} epoch >= {NO_REGRESSION}x the base's speed",
                     "measured": None if ratio is None else f"{ratio:.2f}x",
                     "met": None if ratio is None else ratio >= NO_REGRESSION})
    share = m["profile"]["progress_share"]
    rows.append({"goal": "progress tracking <= 15% of epoch CPU",
                 "measured": f"{share:.1%}", "met": share <= 0.15})
    cap = m["capture_100k"]
    rows.append({"goal": "Capture.at(t), 100k updates: <= 10 ms",
                 "measured": f"{cap['current']['median_ms']:.2f} ms",
                 "met": cap["current"]["median_ms"] <= 10})
    return rows


# -- output -----------------------------------------------------------------------------

def report(result: dict) -> str:
    m = result["measured"]
    has_base = result["base"] is not None
    rows = []
    for name in ("reach_2k", "reach_200k", "capture_100k"):
        s = m[name]
        c = s["config"]
        size = (f"{c['nodes']:,}/{c['edges']:,}, {2 * c['changes']} epochs" if s["task"] == "reach"
                else f"{c['records']:,} recs, {c['reads']} reads")
        first = "load_ms" if s["task"] == "reach" else "first_read_ms"
        rows.append([name, size, s["unit"],
                     s["base"]["median_ms"] if has_base else "-", s["current"]["median_ms"],
                     f"{s['ratio']:.2f}x" if has_base else "-",
                     f"{s['base'][first]:,.0f}" if has_base else "-",
                     f"{s['current'][first]:,.0f}",
                     _passes(s["current"].get("median_passes")),
                     "yes" if s["answers_agree"] else "NO"])
    out = [table(f"engine core: base {result['base'] or '(none)'} vs current "
                 f"{result['current']} (medians of process CPU time, {result['mode']})",
                 ["workload", "size", "unit", "base", "current", "base/current",
                  "base load|1st ms", "cur load|1st ms", "passes/epoch", "agree"], rows)]
    p = m["profile"]
    out.append("")
    out.append(table(
        f"cProfile, current tree, {p['epochs']} one-edge epochs at "
        f"{m['reach_2k']['config']['nodes']:,} nodes: {p['cpu_ms'] / p['epochs']:.2f} CPU ms"
        f"/epoch; progress tracking (calls into ddflow/progress.py) "
        f"{p['progress_share']:.1%} of profiled time (median of "
        f"{', '.join(f'{x:.1%}' for x in p.get('shares', [p['progress_share']]))})",
        ["function", "calls", "tottime ms", "cumtime ms"],
        [[f["function"], f["calls"], f["tottime_ms"], f["cumtime_ms"]] for f in p["top"]]))
    out.append("")
    out.append(goals_table("standing guards", result["goals"]))
    for note in result["notes"]:
        out.append(f"note: {note}")
    return "\n".join(out)


def _passes(x: float | None) -> str:
    if x is None:
        return "-"
    return str(int(x)) if x == int(x) else f"{x:.1f}"


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_engine_core",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (< 1 minute)")
    parser.add_argument("--base", default=BASE, help=f"the commit to compare with ({BASE})")
    parser.add_argument("--no-base", action="store_true",
                        help="measure the current tree only (no worktree)")
    parser.add_argument("--reps", type=int, default=None,
                        help="repetitions per workload and tree (default: per workload)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="where to write the JSON "
                        "(default benchmarks/results/engine_core.json)")
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    if args.reps is not None:
        config = {name: dict(c, reps=args.reps) for name, c in config.items()}
    current = _git("rev-parse", "--short", "HEAD")
    if _git("status", "--porcelain", "--untracked-files=no"):
        current += "+changes"
    notes: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ddflow-bench-inputs-") as tmp_name:
        tmp = Path(tmp_name)
        if args.no_base:
            measured = measure({"current": REPO}, config, args.seed, tmp, notes)
            base = None
        else:
            with base_tree(args.base) as tree:
                base = _git("rev-parse", "--short", args.base)
                measured = measure({"base": tree, "current": REPO}, config, args.seed,
                                   tmp, notes)
    for name in ("reach_2k", "reach_200k", "capture_100k"):
        if not measured[name]["answers_agree"]:
            notes.append(f"{name}: the answers differ between runs or trees")
    notes.append("the initial loads are measured, not compared (load column, CPU ms)")
    notes.append("cProfile adds a cost per Python call, so call-heavy code (progress "
                 "tracking) weighs more in the profile than in the unprofiled epochs")
    notes.append(f"wall time of the run: {time.monotonic() - started:.0f} s")
    result = {"mode": "quick" if args.quick else "full", "base": base, "current": current,
              "seed": args.seed, "measured": measured, "notes": notes}
    result["goals"] = goals(result)
    print(report(result))
    path = save("engine_core", result, Path(args.out) if args.out else None)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
