"""The churn benchmark at a small size (20,000 updates): after every epoch, every trace
holds at most 2x the live records, of the live set and of its own collection; the
answers agree with a hand-written maintenance.  Counts, not times."""

from __future__ import annotations

import json

from benchmarks.bench_churn import BOUND, QUICK, main, run_ddflow, run_handwritten, workload


def test_every_trace_stays_within_twice_the_live_records() -> None:
    dimension, facts, epochs = workload(QUICK["updates"], QUICK["live"], QUICK["keys"],
                                        QUICK["churn"])
    live = len(facts)
    assert live + sum(len(b) for b in epochs) >= 0.95 * QUICK["updates"]
    seen: dict[str, int] = {}

    def on_epoch(epoch: int, traces: list) -> None:
        for name, trace in traces:
            records = trace.record_count()
            own = len(trace.accumulate(epoch))
            assert records <= BOUND * live, (epoch, name, records, live)
            assert records <= BOUND * own, (epoch, name, records, own)
            seen[name] = max(seen.get(name, 0), records)

    result = run_ddflow(dimension, facts, epochs, checkpoints=3, on_epoch=on_epoch)
    hand = run_handwritten(dimension, facts, epochs)
    assert result["per_group"] == hand["per_group"] and result["keys"] == hand["keys"]
    # Eight traces: the two inputs' own histories and their arrangements, count's and
    # distinct's input and output.
    assert len(seen) == 8
    facts_trace = next(n for name, n in seen.items() if name.startswith("facts.arranged"))
    assert facts_trace >= live         # the live facts themselves, at least


def test_quick_run_reports_the_bound_and_memory(tmp_path) -> None:
    out = tmp_path / "churn.json"
    result = main(["--quick", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["benchmark"] == "churn" and saved["answers_agree"]
    assert saved["within_bound"] and saved["worst_ratio_to_live"] <= BOUND
    assert saved["updates"] == result["updates"] >= 0.95 * QUICK["updates"]
    assert saved["ddflow"]["heap_peak"] > 0 and saved["handwritten"]["heap_peak"] > 0
    traces = {r["trace"] for r in saved["checkpoints"]}
    assert len(traces) == 8     # the inputs' histories among them
    for row in saved["checkpoints"]:
        assert row["records"] <= BOUND * row["live_set"]
        assert row["own_live"] > 0 and row["records"] <= BOUND * row["own_live"]
