"""The `ddflow` command, called in-process: help, the demo, `run` on files, bad files.

The demo is run small (200 nodes) so the test stays fast; what it checks is the
line stating agreement with networkx.  `run` is checked against hand-computed
changes per epoch, and a malformed file must be rejected with its line number
before anything is applied (nothing printed for any epoch).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ddflow import DataflowError
from ddflow.cli import main
from ddflow.io import InputFormatError, load_graph


def _write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_help_lists_the_commands(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("demo", "run", "bench"):
        assert command in out


def test_demo_agrees_with_networkx(capsys: pytest.CaptureFixture) -> None:
    assert main(["demo", "--nodes", "200", "--edges", "600", "--epochs", "6"]) == 0
    out = capsys.readouterr().out
    assert "check against networkx" in out
    assert "all 7 epochs agree" in out
    assert "answers and work per epoch" in out


def test_run_prints_the_changes_per_epoch(tmp_path: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    edges = _write(tmp_path, "edges.csv", "# src,dst\n1,2\n2,3\n\n3,4  # a comment\n")
    changes = _write(tmp_path, "changes.txt", "2 + 4 1\n1 - 2 3\n")
    assert main(["run", "bfs", "--edges", edges, "--changes", changes, "--roots", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [
        "epoch 0: 4 changes", "  + (1, 0)", "  + (2, 1)", "  + (3, 2)", "  + (4, 3)",
        "epoch 1: 2 changes", "  - (3, 2)", "  - (4, 3)",
        "epoch 2: 0 changes",
    ]


def test_run_reads_string_nodes_and_tabs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    edges = _write(tmp_path, "edges.tsv", "a\tb\nb\tc\nc\ta\nd\te\n")
    assert main(["run", "components", "--edges", edges]) == 0
    out = capsys.readouterr().out
    assert "  + (c, a)" in out and "  + (e, d)" in out


@pytest.mark.parametrize("edges_text, changes_text, where, what", [
    ("1 2\n2 3 4\n", None, "edges.txt, line 2", "expected 'src dst'"),
    ("1 2\n", "1 + 2 3\n\n1 * 2 3\n", "changes.txt, line 3", "expected 'EPOCH + src dst'"),
    ("1 2\n", "1 + 2 3\nsoon - 1 2\n", "changes.txt, line 2", "not a non-negative int"),
    ("1 2\n", "1 + 2 3\n2 - 3 4\n", "changes.txt, line 2", "not present"),
])
def test_a_malformed_file_is_rejected_with_its_line_and_nothing_applied(
        tmp_path: Path, capsys: pytest.CaptureFixture, edges_text: str,
        changes_text: str | None, where: str, what: str) -> None:
    args = ["run", "reachability", "--edges", _write(tmp_path, "edges.txt", edges_text)]
    if changes_text is not None:
        args += ["--changes", _write(tmp_path, "changes.txt", changes_text)]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert where in captured.err and what in captured.err
    assert "epoch" not in captured.out       # nothing was fed, nothing printed


def test_input_format_error_is_a_dataflow_error_naming_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "edges.txt", "1 2\n\n# fine\nx\n")
    with pytest.raises(InputFormatError) as exc:
        load_graph(path)
    assert isinstance(exc.value, DataflowError)
    assert exc.value.path == path and exc.value.line == 4


def test_run_without_a_readable_file_exits_2(tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "bfs", "--edges", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_run_triangles(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("ddflow.query")
    edges = _write(tmp_path, "g.txt", "1 2\n2 3\n1 3\n3 4\n")
    changes = _write(tmp_path, "c.txt", "1 + 2 4\n2 - 1 3\n")
    assert main(["run", "triangles", "--edges", edges, "--changes", changes]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == ["epoch 0: 1 change", "  + (1, 2, 3)",
                       "epoch 1: 1 change", "  + (2, 3, 4)",
                       "epoch 2: 1 change", "  - (1, 2, 3)"]
