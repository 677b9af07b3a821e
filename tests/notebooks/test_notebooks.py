"""Every notebook in `notebooks/` runs green with a real kernel and draws a picture.

Each `notebooks/*.ipynb` is executed top to bottom by nbclient on the `python3`
kernel (ipykernel, resolved to this interpreter), the way a learner opens it in
Jupyter: the kernel's working directory is `notebooks/` and `PYTHONPATH` is unset,
so the kernel imports ddflow *as installed* (`pip install -e .`) and nothing else
from the checkout: a notebook that imports `benchmarks` or `tests` fails here as it
would in Jupyter.  The test fails if any cell raises, and if the notebook produced
no `image/png` output: every notebook promises at least one figure.  Notebooks are
committed without outputs, so the outputs checked here are always fresh.

Before running anything, the test asks the interpreter, from `notebooks/` and
without `PYTHONPATH`, where it finds `ddflow`: if that is another checkout (an
editable install points at one checkout only), the notebooks would test someone
else's code, and the test fails saying which checkout to install.

`MPLBACKEND=Agg` keeps matplotlib off any display; the notebooks select the inline
backend themselves (`%matplotlib inline`), which renders PNGs without one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
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


#: An import of the checkout's own non-package directories, which Jupyter cannot see.
CHECKOUT_ONLY = re.compile(r"^\s*(from|import)\s+(benchmarks|tests)\b", re.MULTILINE)


def _learner_env() -> dict[str, str]:
    """The environment of a learner's kernel: no PYTHONPATH, no display."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["MPLBACKEND"] = "Agg"
    return env


@pytest.fixture(scope="module")
def installed_here() -> None:
    """Fail unless the interpreter, started in `notebooks/` with no PYTHONPATH,
    imports this checkout's ddflow."""
    found = subprocess.run(
        [sys.executable, "-c", "import ddflow, lattice, operators; "
         "print(ddflow.__file__); print(lattice.__file__); print(operators.__file__)"],
        cwd=NOTEBOOKS, env=_learner_env(), capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, f"ddflow is not installed for {sys.executable}:\n{found.stderr}"
    elsewhere = [f for f in found.stdout.split() if not Path(f).resolve().is_relative_to(ROOT)]
    assert not elsewhere, (
        f"{sys.executable} imports {elsewhere}, not this checkout ({ROOT}): the notebooks "
        f"would run another checkout's code. Install this one: pip install -e '{ROOT}[test]'")


def test_there_are_notebooks() -> None:
    assert PATHS, f"no notebooks in {NOTEBOOKS}"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_imports_only_the_package(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    bad = [i for i, c in enumerate(nb.cells)
           if c.cell_type == "code" and CHECKOUT_ONLY.search(c.source)]
    assert not bad, (f"{path.name}: cells {bad} import from the checkout's benchmarks/ or "
                     "tests/, which a learner's kernel cannot import; move it into the package")


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_runs_and_draws(path: Path, installed_here: None,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel inherits this environment: as a learner's, with no PYTHONPATH.
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
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
