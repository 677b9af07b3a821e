"""One measurement of `bench_join_count_ab`, run in a child process inside the tree measured.

`bench_join_count_ab` runs this file with `PYTHONPATH` and the working directory set
to the tree being measured (this checkout, or a `git worktree` of the parent
commit), so one script times both.  It uses only public API both trees have
(`ddflow.Dataflow`, `new_collection`, `update`, `advance_to`, `run`, `join`, `map`,
`count`, `capture`, `Capture.at`) and imports nothing from `benchmarks`: its inputs
come in a JSON file the parent wrote.

CPU time is `time.process_time()` around each epoch: tell the epoch's updates,
advance both inputs, run (ddflow); or apply the updates to two multisets and
recompute the per-key join counts from scratch (`recompute`).

    python -P benchmarks/join_count_ab_child.py ddflow|recompute|profile PARAMS.json

prints one JSON object on stdout.
"""

from __future__ import annotations

import cProfile
import hashlib
import json
import os
import pstats
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

# This checkout's `benchmarks/rss.py` (peak RSS from VmHWM), found at the end of the
# path: the tree measured comes first (`PYTHONPATH`), and may be older.
sys.path.append(str(Path(__file__).resolve().parent))
import rss  # noqa: E402


def _digest(answer: dict) -> str:
    return hashlib.sha256(repr(sorted(answer.items())).encode()).hexdigest()[:16]


def _epochs(p: dict) -> list:
    with open(p["workload"]) as f:
        return json.load(f)["epochs"]


def run_ddflow(epochs: list, prof: cProfile.Profile | None = None) -> tuple[list[float], dict]:
    """The timed epochs (and, with `prof`, profiled: only them, not the final read)."""
    import ddflow

    df = ddflow.Dataflow()
    a_in, a = df.new_collection("A")
    b_in, b = df.new_collection("B")
    cap = a.join(b).map(lambda kv: kv[0]).count().capture()
    inputs = (a_in, b_in)
    cpu = []
    for e, batch in enumerate(epochs):
        c0 = time.process_time()
        if prof is not None:
            prof.enable()
        for rel, key, ident, diff in batch:
            inputs[rel].update((key, ident), diff)
        a_in.advance_to(e + 1)
        b_in.advance_to(e + 1)
        df.run()
        if prof is not None:
            prof.disable()
        cpu.append((time.process_time() - c0) * 1e3)
    return cpu, dict(cap.at(len(epochs) - 1))


def run_recompute(epochs: list) -> tuple[list[float], dict]:
    """The per-key counts of `A JOIN B ON key`, recomputed from the live relations
    at every epoch (only the relations themselves are maintained)."""
    live: tuple[Counter, Counter] = (Counter(), Counter())
    cpu = []
    answer: dict = {}
    for batch in epochs:
        c0 = time.process_time()
        for rel, key, ident, diff in batch:
            live[rel][(key, ident)] += diff
        per_a: Counter = Counter()
        for (key, _i), m in live[0].items():
            if m:
                per_a[key] += m
        per_b: Counter = Counter()
        for (key, _i), m in live[1].items():
            if m:
                per_b[key] += m
        answer = {(k, n * per_b[k]): 1 for k, n in per_a.items() if n and per_b[k]}
        cpu.append((time.process_time() - c0) * 1e3)
    return cpu, answer


def profile(epochs: list, top: int) -> dict:
    prof = cProfile.Profile()
    cpu = sum(run_ddflow(epochs, prof)[0])       # the timed epochs alone
    stats = pstats.Stats(prof)
    total = sum(s[2] for s in stats.stats.values())     # own time of every function
    rows = []
    for (path, line, fn), (cc, nc, tt, ct, _callers) in sorted(
            stats.stats.items(), key=lambda kv: -kv[1][2])[:top]:
        rows.append({"function": f"{os.path.relpath(path) if path.startswith('/') else path}"
                                 f":{line}({fn})",
                     "calls": nc, "tottime_ms": tt * 1e3, "cumtime_ms": ct * 1e3,
                     "share": tt / total if total else 0.0})
    return {"cpu_ms": cpu, "top": rows}


def main() -> None:
    task, pfile = sys.argv[1], sys.argv[2]
    with open(pfile) as f:
        p = json.load(f)
    epochs = _epochs(p)
    import ddflow
    out: dict[str, Any] = {"ddflow": os.path.dirname(os.path.abspath(ddflow.__file__))}
    if task == "profile":
        out.update(profile(epochs, p["top"]))
    else:
        cpu, answer = (run_ddflow if task == "ddflow" else run_recompute)(epochs)
        out.update(epoch_ms=cpu, answer=_digest(answer), answer_size=len(answer),
                   rss_peak_mb=rss.peak_mb())
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
