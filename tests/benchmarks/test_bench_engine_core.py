"""The engine-core benchmark runs (quick sizes, current tree only, twice per workload)
and reports what the issue asks for; its answers agree between runs and with a plain
traversal.  No timing is asserted: timings belong to the benchmark's output."""

from __future__ import annotations

import json
from collections import defaultdict, deque

import pytest


def _plain_reachability(initial: list, roots: list, steps: list) -> list:
    """The final answer of the reachability workload, by breadth-first search."""
    edges = set(map(tuple, initial))
    for e, diff in steps:
        (edges.add if diff > 0 else edges.discard)(tuple(e))
    out = defaultdict(list)
    for a, b in edges:
        out[a].append(b)
    seen, todo = set(roots), deque(roots)
    while todo:
        for n in out[todo.popleft()]:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return sorted((n, 1) for n in seen)


def test_quick_run_reports_the_standing_guards_and_consistent_answers(tmp_path) -> None:
    from benchmarks.bench_engine_core import QUICK, main
    from benchmarks.bench_reachability import workload
    from benchmarks.engine_core_child import _digest

    out = tmp_path / "engine_core.json"
    result = main(["--quick", "--no-base", "--reps", "2", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["benchmark"] == "engine_core" and saved["base"] is None
    assert saved["measured"] == json.loads(json.dumps(result["measured"]))

    m = saved["measured"]
    assert set(m) == {"reach_2k", "reach_200k", "capture_100k", "profile"}
    for name in ("reach_2k", "reach_200k", "capture_100k"):
        s = m[name]
        cur = s["current"]
        assert "base" not in s and "ratio" not in s
        assert s["answers_agree"], name                  # two runs, one answer
        assert len(cur["per_rep_median_ms"]) == 2
        assert cur["median_ms"] > 0
    for name in ("reach_2k", "reach_200k"):
        c = QUICK[name]
        initial, roots, steps = workload(c["nodes"], c["edges"], c["roots"], c["changes"],
                                         saved["seed"])
        plain = _plain_reachability(initial, roots, steps)
        assert m[name]["answer"] == _digest(plain), name
        assert m[name]["current"]["answer_size"] == len(plain)
        assert m[name]["current"]["samples"] == 2 * 2 * c["changes"]
        passes = m[name]["current"]["passes_per_epoch"]
        assert passes is None or (len(passes) == 2 * c["changes"] and min(passes) >= 1)
    cap = m["capture_100k"]
    assert cap["current"]["samples"] == 2 * QUICK["capture_100k"]["reads"]
    assert cap["current"]["answer_size"] >= QUICK["capture_100k"]["records"] - 30

    p = m["profile"]
    assert p["epochs"] == 2 * QUICK["reach_2k"]["changes"]
    assert 0 <= p["progress_ms"] <= p["profiled_ms"]
    assert p["progress_share"] == pytest.approx(p["progress_ms"] / p["profiled_ms"])
    assert len(p["top"]) == 12
    assert all(f["calls"] >= 1 and f["tottime_ms"] <= f["cumtime_ms"] + 1e-6 for f in p["top"])

    goals = {g["goal"]: g for g in saved["goals"]}
    assert len(goals) == 4
    assert all(g["met"] is None for g in goals.values() if "base's speed" in g["goal"])
    assert isinstance(goals["progress tracking <= 15% of epoch CPU"]["met"], bool)
