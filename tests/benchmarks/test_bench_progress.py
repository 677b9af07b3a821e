"""The progress benchmark runs at its quick sizes (current tree only): every chain
size with the edge tracker, the small ones with the paths tracker too, and the
reachability epochs with both; the trees' answers agree (the children check theirs).
No timing is asserted: timings belong to the benchmark's output."""

from __future__ import annotations

import json


def test_quick_run_measures_both_trackers(tmp_path) -> None:
    from benchmarks.bench_progress import QUICK, main

    out = tmp_path / "progress.json"
    result = main(["--quick", "--no-base", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["benchmark"] == "progress" and saved["base"] is None
    assert saved["chain"] == json.loads(json.dumps(result["chain"]))
    assert [row["steps"] for row in saved["chain"]] == list(QUICK["steps"])
    for row in saved["chain"]:
        assert row["nodes"] == 4 * row["steps"] + 2
        assert row["edges"]["tracker"] == "EdgeTracker"
        assert row["paths"]["tracker"] == "Tracker"
        assert row["auto"] == "paths"            # small graphs keep the paths tracker
        assert row["edges"]["first_run_ms"] > 0 and "base" not in row
    reach = saved["reach"]
    assert set(reach) == {"auto", "edges"}
    assert reach["auto"]["tracker"] == "Tracker" and reach["edges"]["tracker"] == "EdgeTracker"
    assert all(len(r["rep_medians"]) == QUICK["reps"] for r in reach.values())
