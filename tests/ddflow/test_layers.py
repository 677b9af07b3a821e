"""Imports point down (lattice, core data, operators, the front door, the CLI): the
front door does not import its fluent API or its pictures, and the circuit view's modules
import in one direction.

The front door's parts above `ddflow.dataflow` (`Collection`, `to_dot`) are registered
on it when their modules are imported; these tests check both that nothing imports
upward and that the registered parts are there when `ddflow.Dataflow` is handed out.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ddflow
from ddflow.errors import GraphError

ROOT = Path(__file__).resolve().parents[2]


def _modules_after(code: str) -> set[str]:
    """The `ddflow` modules in `sys.modules` after running `code` in a fresh process."""
    probe = code + "; import sys; print(' '.join(m for m in sys.modules if m.startswith('ddflow')))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, cwd=ROOT, env={**os.environ})
    return set(out.stdout.split())


def test_dataflow_module_imports_nothing_above_it():
    loaded = _modules_after("import ddflow.dataflow")
    assert "ddflow.dataflow" in loaded
    assert "ddflow.collection" not in loaded and "ddflow.viz" not in loaded
    assert not any(m.startswith(("ddflow.circuit", "ddflow.engine.spark")) for m in loaded)


def test_front_door_registers_its_collection_type_and_renderer():
    loaded = _modules_after("import ddflow; df = ddflow.Dataflow(); df.new_collection(); "
                            "assert df.to_dot().startswith('digraph')")
    assert {"ddflow.collection", "ddflow.viz"} <= loaded


def test_dataflow_without_its_registrars_says_what_to_import():
    code = ("from ddflow.dataflow import Dataflow; from ddflow.errors import GraphError\n"
            "try:\n    Dataflow().new_collection()\n"
            "except GraphError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT, env={**os.environ})
    assert "ddflow.collection was never imported" in out.stdout


def test_register_refuses_unknown_names():
    from ddflow.dataflow import register
    with pytest.raises(GraphError, match="registered as 'graph'"):
        register("graph", object())
    df = ddflow.Dataflow()
    _s, coll = df.new_collection("xs")
    assert type(coll) is ddflow.Collection


def _function_level_imports(path: Path) -> list[tuple[int, str]]:
    """`(line, module)` for every import inside a function body in `path`."""
    found = []
    for fn in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.append((node.lineno, node.module))
                found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
            elif isinstance(node, ast.Import):
                found += [(node.lineno, a.name) for a in node.names]
    return found


CIRCUIT_MODULES = sorted((ROOT / "ddflow" / "circuit").glob("*.py"))


@pytest.mark.parametrize("path", CIRCUIT_MODULES, ids=[p.stem for p in CIRCUIT_MODULES])
def test_circuit_modules_have_no_function_level_imports_of_each_other(path):
    inner = [(line, m) for line, m in _function_level_imports(path)
             if m == "ddflow.circuit" or m.startswith("ddflow.circuit.")]
    assert inner == [], f"{path.name} imports circuit modules inside functions: {inner}"


def test_circuit_core_imports_no_catalogue_or_draw():
    """core sits below catalogue and draw: they attach their methods to its classes."""
    tree = ast.parse((ROOT / "ddflow" / "circuit" / "core.py").read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not modules & {"ddflow.circuit.catalogue", "ddflow.circuit.draw", "ddflow.circuit"}
    assert len(CIRCUIT_MODULES) >= 5
