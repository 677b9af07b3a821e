"""The introspection benchmark runs (quick sizes, this tree only) and reports each of
its tables; the per-time index read equals the scan it is compared with (asserted in
the child), an explanation holds a small share of the graph, and the maintained
explanation reports its work per epoch.  No timing is
asserted: timings belong to the benchmark's output."""

from __future__ import annotations

import json


def test_quick_run_reports_every_table(tmp_path, capsys) -> None:
    from benchmarks.bench_introspection import QUICK, main

    out = tmp_path / "introspection.json"
    assert main(["--quick", "--no-base", "--out", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert saved["benchmark"] == "introspection"
    assert set(saved["reach_2k"]["median_ms"]) == {"plain", "timing", "logging"}
    assert saved["reach_2k"]["epochs"]["plain"] == 2 * QUICK["changes"] * QUICK["reps"]
    ex = saved["explain_2k"]
    assert len(ex["sizes"]) == QUICK["reads"] and max(ex["sizes"]) < ex["edges"] // 4
    mx = saved["maintained_2k"]
    assert len(mx["work"]) == 2 * QUICK["changes"] and mx["build_work"] > 0
    printed = capsys.readouterr().out
    assert "changes(e)" in printed and "full recompute" in printed
    assert "one-off / this" in printed
