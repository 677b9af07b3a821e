"""`Dataflow.run(progress=...)`: the progress line shows the run's rounds (scheduler
passes) and records moved, as the engine counts them, and drawing it changes no
answer; the CLI draws it on standard error with `--progress`."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

import ddflow
from ddflow.algorithms.graphs import reachability
from ddflow.cli import main


def _chain(n: int) -> tuple[ddflow.Dataflow, ddflow.Capture, list]:
    df = ddflow.Dataflow()
    e_in, e = df.new_collection("edges")
    r_in, r = df.new_collection("roots")
    cap = reachability(e, r).capture()
    for i in range(n):
        e_in.insert((i, i + 1))
    r_in.insert(0)
    e_in.advance_to(1)
    r_in.advance_to(1)
    return df, cap, [e_in, r_in]


def test_progress_shows_the_rounds_and_records_the_engine_counted():
    df, cap, (e_in, r_in) = _chain(30)
    quiet, _cap, _e = _chain(30)
    quiet.run()
    seen: list = []
    engine = df.engine
    engine_observe = engine.observe

    def observe(on_pass):               # listen in on what the display is told
        engine_observe(None if on_pass is None else
                       (lambda p, r: (seen.append((p, r)), on_pass(p, r))))

    engine.observe = observe
    buf = io.StringIO()
    df.run(progress=Console(file=buf, width=120))
    line = buf.getvalue()
    rounds, records = (int(x.replace(",", "")) for x in
                       re.search(r"([\d,]+) rounds\s+([\d,]+) records", line).groups())
    assert rounds == engine.passes == quiet.engine.passes and rounds > 30
    assert records == engine.routed == quiet.engine.routed
    assert [p for p, _r in seen] == list(range(1, rounds + 1))     # once per pass
    assert cap.at(0) == dict.fromkeys(range(31), 1)

    # The next run shows only its own: a one-edge change at the chain's end.
    e_in.insert((30, 31))
    e_in.advance_to(2)
    r_in.advance_to(2)
    buf = io.StringIO()
    df.run(progress=Console(file=buf, width=120))
    rounds = int(re.search(r"([\d,]+) rounds", buf.getvalue()).group(1))
    assert 0 < rounds <= 3
    assert cap.changes(1) == [(31, 1, 1)]
    df.run()                            # and without: nobody is told any more
    assert len(seen) == 30 + 1 + rounds


def test_the_cli_draws_progress_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture):
    edges = tmp_path / "edges.csv"
    edges.write_text("1,2\n2,3\n")
    assert main(["run", "reachability", "--edges", str(edges), "--progress"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines()[1:] == ["epoch 0: 3 changes", "  + 1", "  + 2", "  + 3"]
    assert re.search(r"\d+ rounds\s+\d+ records", out.err)
