"""The `ddflow` command, called in-process: help, the demo, `run` on files, bad files.

The demo is run small (200 nodes) so the test stays fast; what it checks is the
line stating agreement with networkx.  `run` is checked against hand-computed
changes per epoch, and a malformed file must be rejected with its line number
before anything is applied (nothing printed for any epoch).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ddflow
from ddflow import DataflowError
from ddflow.cli import EXIT_BROKEN_PIPE, main
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


# -- argument holes: exit 2 and one line, never a traceback or a hang ---------------------


def _one_line_error(capsys: pytest.CaptureFixture, argv: list[str]) -> str:
    """Run `argv`, which must be refused by argparse: exit 2, one line on stderr."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("argv, option", [
    (["demo", "--nodes", "0"], "--nodes"),
    (["demo", "--nodes", "-3"], "--nodes"),
    (["demo", "--edges", "-5"], "--edges"),
    (["demo", "--edges", "0"], "--edges"),
    (["demo", "--workers", "0"], "--workers"),
    (["demo", "--epochs", "-1"], "--epochs"),
    (["demo", "--nodes", "many"], "--nodes"),
    (["run", "bfs", "--edges", "g.txt", "--workers", "0"], "--workers"),
    (["run", "bfs", "--edges", "g.txt", "--roots", ","], "--roots"),
])
def test_bad_counts_are_argparse_errors(capsys: pytest.CaptureFixture, argv: list[str],
                                        option: str) -> None:
    assert f"argument {option}" in _one_line_error(capsys, argv)


def test_demo_refuses_more_edges_than_the_nodes_hold(capsys: pytest.CaptureFixture) -> None:
    # 3,000 distinct edges do not fit on 50 nodes (2,500 with self loops): this looped
    # forever drawing edges.
    err = _one_line_error(capsys, ["demo", "--nodes", "50", "--edges", "3000"])
    assert "3,000 distinct edges cannot fit in 50 nodes (at most 2,500" in err


def test_demo_on_few_nodes_caps_its_default_edges(capsys: pytest.CaptureFixture) -> None:
    # `--nodes 50` alone used to keep the default 6,000 edges and never return.
    assert main(["demo", "--nodes", "50", "--epochs", "2", "--no-triangles"]) == 0
    out = capsys.readouterr().out
    assert "50 nodes, 150 edges" in out and "all 3 epochs agree" in out


def test_demo_with_a_full_graph_and_singular_counts(capsys: pytest.CaptureFixture) -> None:
    # One node, its one self loop: removed at epoch 1, back at epoch 2 (the only slot).
    assert main(["demo", "--nodes", "1", "--edges", "1", "--epochs", "2"]) == 0
    out = capsys.readouterr().out
    assert "1 node, 1 edge, roots [0]; 2 single-edge epochs (1 worker," in out
    assert "all 3 epochs agree" in out


def test_roots_before_the_algorithm_do_not_swallow_it(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    edges = _write(tmp_path, "g.txt", "1 2\n2 3\n4 5\n")
    assert main(["run", "--roots", "1", "reachability", "--edges", edges]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# ddflow run reachability: 3 edges, 0 changes over 1 epoch, "
                             "roots [1]")
    assert out[1:] == ["epoch 0: 3 changes", "  + 1", "  + 2", "  + 3"]


def test_roots_are_comma_separated_and_repeatable(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    edges = _write(tmp_path, "g.txt", "1 2\n4 5\n6 7\n")
    assert main(["run", "reachability", "--roots", "1,4", "--roots", "6",
                 "--edges", edges]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "roots [1, 4, 6]" in out[0]
    assert sorted(out[2:]) == sorted(f"  + {n}" for n in (1, 2, 4, 5, 6, 7))


@pytest.mark.parametrize("roots, changes, named", [
    ("9", None, "the root 9 (--roots) is in no edge"),
    ("1,98,99", None, "the roots 98, 99 (--roots) are in no edge"),
    ("x", None, "the root 'x' (--roots) is in no edge"),
    ("9", "1 + 9 1\n", None),                     # a node of the change stream: fine
])
def test_roots_absent_from_the_graph_are_refused(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture, roots: str,
                                                 changes: str | None,
                                                 named: str | None) -> None:
    # They used to be reported reachable (from themselves), hiding a misspelt root.
    args = ["run", "reachability", "--edges", _write(tmp_path, "g.txt", "1 2\n2 3\n"),
            "--roots", roots]
    if changes is not None:
        args += ["--changes", _write(tmp_path, "c.txt", changes)]
    if named is None:
        assert main(args) == 0
        assert "epoch 1: 3 changes" in capsys.readouterr().out    # 9 reaches 1, 2, 3
        return
    assert main(args) == 2
    captured = capsys.readouterr()
    assert named in captured.err and "g.txt" in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.out == ""


def test_counts_are_pluralised(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    edges = _write(tmp_path, "g.txt", "1 2\n")
    changes = _write(tmp_path, "c.txt", "1 - 1 2\n")
    assert main(["run", "reachability", "--edges", edges, "--changes", changes]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# ddflow run reachability: 1 edge, 1 change over 2 epochs,")
    assert out[1] == "epoch 0: 2 changes" and "epoch 1: 1 change" in out


class _ClosedPipe:
    """A stdout whose reader went away."""

    def write(self, _text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_pipe_ends_quietly_in_process(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    edges = _write(tmp_path, "g.txt", "1 2\n2 3\n")
    monkeypatch.setattr("sys.stdout", _ClosedPipe())
    assert main(["run", "reachability", "--edges", edges]) == EXIT_BROKEN_PIPE == 141


def test_a_closed_pipe_ends_quietly_in_a_shell_pipeline(tmp_path: Path) -> None:
    # `ddflow run ... | head`: the reader closes before the output is flushed, so the
    # first write fails; nothing but silence on stderr, status 128 + SIGPIPE.
    edges = _write(tmp_path, "g.txt", "".join(f"{i} {i + 1}\n" for i in range(200)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(ddflow.__file__).parents[1])] + os.environ.get("PYTHONPATH", "").split(
            os.pathsep)))
    proc = subprocess.Popen([sys.executable, "-m", "ddflow.cli", "run", "reachability",
                             "--edges", edges], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.close()
    _out, err = proc.communicate(timeout=120)
    assert err.decode() == ""
    assert proc.returncode == 141
