"""The Datalog benchmark runs at its quick sizes: every program's maintained answer
agrees with the from-scratch semi-naive evaluator after every change, and a change
costs a small fraction of the load's work.  No timing is asserted: timings belong
to the benchmark's output."""

from __future__ import annotations

import json

from benchmarks import bench_datalog


def test_quick_run_agrees_and_reports_work_per_change(tmp_path, capsys) -> None:
    out = tmp_path / "datalog.json"
    result = bench_datalog.main(["--quick", "--out", str(out)])
    assert json.loads(out.read_text())["programs"] == result["programs"]
    assert len(result["programs"]) == 5
    for label, row in result["programs"].items():
        assert row["agree"], label
        assert row["changes"] == 2 * result["config"]["changes"]
        assert len(row["change_ms"]) == len(row["change_work"]) == row["changes"]
        assert row["derived_facts"] > 0, label
        assert row["median_change_work"] < row["load_work"] / 10, (label, row)
    # One speed goal per workload (five kinds of input at the quick sizes) and the
    # work goal, each judged on the row it names.
    speed = [g for g in result["goals"] if "from-scratch" in g["goal"]]
    assert len(speed) == 5 and len(result["goals"]) == 6
    for g in speed:
        label = g["goal"].split("largest input: ", 1)[1]
        row = result["programs"][label]
        assert g["met"] == (row["speedup"] >= bench_datalog.SPEEDUP_GOAL), g
    printed = capsys.readouterr().out
    assert "speedup" in printed and "max work" in printed and str(out) in printed
    assert "the issue's goals" in printed


def test_random_dag_is_a_dag_of_the_asked_size() -> None:
    import random
    rng = random.Random(2)
    edges = bench_datalog.random_dag(50, 120, rng)
    assert len(edges) == 120 and all(0 <= a < b < 50 for a, b in edges)
    new = bench_datalog.fresh_forward_edge(rng, edges, 50)
    assert new not in edges and new[0] < new[1]


def test_seminaive_evaluators_agree_with_a_naive_fixpoint() -> None:
    """The baselines are fast hand-written loops: check them against the plainest
    fixpoint on small inputs, so that the benchmark's agreement means something."""
    import random
    rng = random.Random(3)
    rel = bench_datalog.points_to_program(30, rng)
    pt = set(rel["addr"])
    while True:
        new = set(pt)
        new |= {(p, a) for p, q in rel["assign"] for q2, a in pt if q == q2}
        new |= {(p, a) for p, q in rel["load"] for q2, r in pt if q2 == q
                for r2, a in pt if r2 == r}
        new |= {(r, a) for p, q in rel["store"] for p2, r in pt if p2 == p
                for q2, a in pt if q2 == q}
        if new == pt:
            break
        pt = new
    assert bench_datalog.seminaive_pt(rel)["pt"] == pt
    par = bench_datalog.level_tree(5, 4, rng)
    sg = {(x, y) for x, p in par for y, p2 in par if p == p2 and x != y}
    while True:
        new = sg | {(x, y) for x, a in par for a2, b in sg if a == a2 for y, b2 in par if b == b2}
        if new == sg:
            break
        sg = new
    assert bench_datalog.seminaive_sg({"par": par})["sg"] == sg
