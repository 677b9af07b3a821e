"""`ddflow run datalog`, called in-process through `main(argv)`: a program over a
directory of facts files and a change stream, checked against hand-computed changes
per epoch; bad programs and bad files exit 2 with one message and print no epoch."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddflow.cli import main
from ddflow.io import InputFormatError, load_facts

PROGRAM = """% reachable pairs, and the sources that reach no bad node
tc(x, y) :- e(x, y).
tc(x, z) :- tc(x, y), e(y, z).
safe(x) :- tc(x, _), not bad(x).
"""


def _files(tmp_path: Path, changes: str = "1 + e 3 1\n2 - e 2 3\n") -> list[str]:
    (tmp_path / "p.dl").write_text(PROGRAM)
    facts = tmp_path / "facts"
    facts.mkdir()
    (facts / "e.csv").write_text("# src, dst\n1,2\n2,3\n")
    (facts / "bad.tsv").write_text("3\n")
    (facts / "notes.md").write_text("not a relation")
    (tmp_path / "changes.txt").write_text(changes)
    return ["run", "datalog", "--program", str(tmp_path / "p.dl"), "--facts", str(facts),
            "--changes", str(tmp_path / "changes.txt")]


def test_run_datalog_prints_each_relations_changes_per_epoch(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(_files(tmp_path)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("# ddflow run datalog: 3 rules in 2 strata, 3 input facts, 2 changes "
                      "over 3 epochs; derived: tc, safe")
    assert out[1:] == [
        "epoch 0: 5 changes", "  + tc(1, 2)", "  + tc(1, 3)", "  + tc(2, 3)",
        "  + safe(1)", "  + safe(2)",
        # e(3, 1) closes a cycle through the bad node 3: nothing new is safe
        "epoch 1: 6 changes", "  + tc(1, 1)", "  + tc(2, 1)", "  + tc(2, 2)",
        "  + tc(3, 1)", "  + tc(3, 2)", "  + tc(3, 3)",
        # removing e(2, 3) cuts 2 off: it reaches nothing, so it is not safe either
        "epoch 2: 7 changes", "  - tc(1, 1)", "  - tc(1, 3)", "  - tc(2, 1)",
        "  - tc(2, 2)", "  - tc(2, 3)", "  - tc(3, 3)", "  - safe(2)"]


def test_run_datalog_refuses_a_bad_program_before_any_epoch(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    argv = _files(tmp_path)
    (tmp_path / "p.dl").write_text("tc(x, y) :- e(x, y).\nsafe(x) :- tc(x, _), !safe(x).\n")
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "negation through recursion: safe depends on !safe" in captured.err
    assert captured.err.rstrip().endswith("^")
    (tmp_path / "p.dl").write_text("q(x) :- e(x, _), missing(x).\n")
    assert main(argv) == 2
    assert "unknown relation 'missing'" in capsys.readouterr().err


@pytest.mark.parametrize("changes,message", [
    ("1 - e 5 6\n", "removes the fact ('e', (5, 6)) at epoch 1, but it is not present"),
    ("1 + h 1\n", "relation 'h' has no facts file"),
    ("1 + e 1 2 3\n", "relation 'e' has 2 fields in its facts file, this change 3"),
    ("x + e 1 2\n", "expected 'EPOCH + NAME field ...'"),
])
def test_run_datalog_refuses_bad_changes(tmp_path: Path, capsys: pytest.CaptureFixture,
                                         changes: str, message: str) -> None:
    assert main(_files(tmp_path, changes)) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err and "changes.txt, line 1" in captured.err


def test_facts_files_must_keep_one_arity(tmp_path: Path) -> None:
    (tmp_path / "e.csv").write_text("1,2\n3\n")
    with pytest.raises(InputFormatError, match=r"e.csv, line 2: expected 2 fields"):
        load_facts(tmp_path)
    with pytest.raises(InputFormatError, match="expected a directory"):
        load_facts(tmp_path / "e.csv")


def test_run_datalog_options_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    argv = _files(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv[:4])
    assert exc.value.code == 2 and "datalog needs --facts" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(argv + ["--edges", "x"])
    assert exc.value.code == 2 and "--edges: not an option of datalog" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["run", "closure"])
    assert exc.value.code == 2 and "closure needs --edges" in capsys.readouterr().err


def test_run_datalog_with_string_values_and_facts_in_the_program(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "p.dl").write_text("likes('ann', 'tea').\nboth(x) :- likes(x, y), drinks(x, y).\n")
    facts = tmp_path / "facts"
    facts.mkdir()
    (facts / "drinks.txt").write_text("ann tea\nbob tea\n")
    assert main(["run", "datalog", "--program", str(tmp_path / "p.dl"),
                 "--facts", str(facts)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == ["epoch 0: 2 changes", "  + likes(ann, tea)", "  + both(ann)"]
