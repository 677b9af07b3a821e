"""The graph-workloads benchmark runs at a tiny size (current tree only) and reports
what issue 21 asks for: every workload checked against networkx at every epoch, the
churn and recompute times, work per epoch and peak RSS.  No timing is asserted:
timings belong to the benchmark's output."""

from __future__ import annotations

import json

from benchmarks.graph_workloads_child import workload


def test_tiny_run_checks_every_workload_against_networkx(tmp_path) -> None:
    from benchmarks.bench_graph_workloads import SCALES, WORKLOADS, main

    out = tmp_path / "graph_workloads.json"
    result = main(["--scale", "tiny", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["benchmark"] == "graph_workloads" and saved["parent"] is None
    rows = saved["measured"]["tiny"]
    assert set(rows) == set(WORKLOADS)
    epochs = SCALES["tiny"]["epochs"]
    for name, row in rows.items():
        cur = row["current"]
        assert cur is not None, name
        assert cur["wrong_epochs"] == [] and cur["correct"], name
        assert cur["epochs_run"] == epochs and len(cur["nx_ms"]) == epochs + 1
        # Every churn epoch changed something, and its work was counted.
        assert all(w is not None and w > 0 for w in cur["work"]), name
        assert cur["peak_rss_mb"] > 0
    # Answers of the right size: reachability reaches the root at least.
    assert min(rows["reach"]["current"]["answer_sizes"]) >= 1
    goals = {g["goal"] for g in result["goals"]}
    assert goals == set()          # the goals are stated for small, medium and large only


def test_workload_is_a_window_of_distinct_edges() -> None:
    initial, steps = workload(50, 100, 5, 4, seed=3)
    live = list(initial)
    assert len(set(live)) == 100 and all(a != b for a, b in live)
    for removed, added in steps:
        assert removed == live[:5]          # the oldest edges leave first
        live = live[5:] + added
        assert len(set(live)) == 100 and all(a != b for a, b in live)
    assert workload(50, 100, 5, 4, seed=3) == (initial, steps)
