"""Every notebook in `notebooks/` runs green with a real kernel and draws a picture.

Each `notebooks/*.ipynb` is executed top to bottom by nbclient on the `python3`
kernel (ipykernel, resolved to this interpreter), from the `notebooks/` directory.
The test fails if any cell raises, and if the notebook produced no `image/png`
output: every notebook promises at least one figure.  Notebooks are committed
without outputs, so the outputs checked here are always fresh.

`MPLBACKEND=Agg` keeps matplotlib off any display; the notebooks select the inline
backend themselves (`%matplotlib inline`), which renders PNGs without one.
The kernel is another process started in `notebooks/`: `PYTHONPATH` puts this
checkout first, so it imports the code under test, not whichever copy the
interpreter has installed (an editable install points at one checkout only).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))

#: Seconds a single cell may take before the test fails (the notebooks take seconds).
CELL_TIMEOUT = 300


def test_there_are_notebooks() -> None:
    assert PATHS, f"no notebooks in {NOTEBOOKS}"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_runs_and_draws(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # The kernel imports this checkout's ddflow (a git worktree's, say), not whichever
    # one the environment has installed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    nb = nbformat.read(path, as_version=4)
    sources = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "assert " in sources, f"{path.name}: no claim is checked by an assert"
    stale = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not stale, f"{path.name}: outputs committed in cells {stale}; strip them"
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT,
                                     resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:
        pytest.fail(f"{path.name}: a cell failed:\n{exc}", pytrace=False)
    images = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                 if "image/png" in o.get("data", {}))
    assert images >= 1, f"{path.name} drew no figure"
