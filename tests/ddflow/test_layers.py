"""Imports point down the layers and never close a cycle; no module reads another's
`_private` names.

The layers, lowest first, are declared here (`LAYERS`): every module of `lattice/`,
`ddflow/` and `operators/` belongs to exactly one, and may import only from its own
layer or the ones below.  Every import counts: top-level, inside functions (lazy)
and under `if TYPE_CHECKING:` alike, read from the source with `ast`, so an import
that runs late, or only for the type checker, cannot hide a cycle.  (The package
`ddflow` hands out its front-door names with `importlib` on first use, which is not
an import of the package's own: `ddflow/__init__` imports only `ddflow.errors`.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lattice", "ddflow", "operators")

#: Lowest first.  A name ending in ".*" stands for every module below that package.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("lattice: order theory", ("lattice", "lattice.*")),
    ("core data and the graph model",
     ("ddflow", "ddflow.errors", "ddflow.arguments", "ddflow.diff", "ddflow.values", "ddflow.updates",
      "ddflow.gc_pause", "ddflow.columnar", "ddflow.column_join", "ddflow.column_batch",
      "ddflow.kept_input",
      "ddflow.bulk_input",
      "ddflow.batch", "ddflow.key_history", "ddflow.trace", "ddflow.summaries", "ddflow.progress",
      "ddflow.progress_edges",
      "ddflow.sharding", "ddflow.frames", "ddflow.graph")),
    ("operators", ("operators", "operators.*")),
    ("engines", ("ddflow.engine", "ddflow.engine.*")),
    ("the front door",
     ("ddflow.input", "ddflow.capture", "ddflow.collection", "ddflow.layout", "ddflow.viz",
      "ddflow.blame", "ddflow.dataflow", "ddflow.explain", "ddflow.explain_conjunctive",
      "ddflow.explain_flow",
      "ddflow.introspection",
      "ddflow.run_progress")),
    ("built on the front door",
     ("ddflow.syntax", "ddflow.proofs", "ddflow.query", "ddflow.programs", "ddflow.algorithms",
      "ddflow.algorithms.*", "ddflow.circuit", "ddflow.circuit.*", "ddflow.testing",
      "ddflow.testing.*", "ddflow.io", "ddflow.bench", "ddflow.demo", "ddflow.cli")),
]


def _modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()
TREES = {m: ast.parse(p.read_text(), str(p)) for m, p in MODULES.items()}


def _resolve(name: str) -> str | None:
    """The module of ours `name` names, or the nearest package of ours holding it."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _lazy_names() -> dict[str, str]:
    """The front door's names that `ddflow/__init__` hands out lazily, each with the
    module that defines it: `from ddflow import Dataflow` imports `ddflow.dataflow`."""
    for node in TREES["ddflow"].body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "_LAZY"):
            return {name: where[0] for name, where in ast.literal_eval(node.value).items()}
    raise AssertionError("ddflow/__init__.py no longer defines _LAZY: update this scan")


LAZY = _lazy_names()


def imports_of(module: str) -> set[str]:
    """Every module of ours `module` imports, wherever the import statement is,
    including a lazy name of the package (`from ddflow import Dataflow`, or
    `ddflow.Dataflow` after `import ddflow`) as an import of its own module."""
    is_package = MODULES[module].name == "__init__.py"
    found = set()
    for node in ast.walk(TREES[module]):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "ddflow" and node.attr in LAZY and module != "ddflow"):
            found.add(_resolve(LAZY[node.attr]))
        elif isinstance(node, ast.Import):
            found |= {_resolve(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[:len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                if base == "ddflow" and a.name in LAZY and module != "ddflow":
                    found.add(_resolve(LAZY[a.name]))
                else:
                    found.add(full if full in MODULES else _resolve(base))
    return found - {None, module}


def layer_of(module: str) -> int:
    hits = [i for i, (_name, members) in enumerate(LAYERS)
            if module in members or any(m.endswith(".*") and module.startswith(m[:-1])
                                        for m in members)]
    assert len(hits) == 1, f"{module} must be in exactly one layer of LAYERS, is in {hits}"
    return hits[0]


def test_every_module_is_in_one_layer():
    assert len(MODULES) > 60
    for module in MODULES:
        layer_of(module)


def test_imports_point_down():
    upward = [f"{m} ({LAYERS[layer_of(m)][0]}) imports {d} ({LAYERS[layer_of(d)][0]})"
              for m in sorted(MODULES) for d in sorted(imports_of(m))
              if layer_of(d) > layer_of(m)]
    assert upward == []


def test_no_import_cycles():
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    graph.add_edges_from((m, d) for m in MODULES for d in imports_of(m))
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert cycles == []


def test_the_scan_sees_lazy_and_type_checking_imports():
    """The scanner is the test: an import inside a function or under TYPE_CHECKING
    is an edge like any other."""
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from ddflow.dataflow import Dataflow\n"
                     "def f():\n    import ddflow.engine.spark\n")
    TREES["ddflow.graph"], saved = tree, TREES["ddflow.graph"]
    try:
        assert {"ddflow.dataflow", "ddflow.engine.spark"} <= imports_of("ddflow.graph")
    finally:
        TREES["ddflow.graph"] = saved


def test_the_scan_sees_the_packages_lazy_names():
    """`from ddflow import Collection` reaches the front door, not the package."""
    tree = ast.parse("import ddflow\ndef f():\n    from ddflow import Collection\n"
                     "def g():\n    return ddflow.SparkEngine\n")
    TREES["ddflow.graph"], saved = tree, TREES["ddflow.graph"]
    try:
        assert {"ddflow.collection", "ddflow.engine.spark"} <= imports_of("ddflow.graph")
    finally:
        TREES["ddflow.graph"] = saved


def test_the_graph_model_imports_only_lattice_arguments_and_errors():
    assert imports_of("ddflow.graph") <= {"lattice", "ddflow", "ddflow.arguments",
                                          "ddflow.errors"}


def test_nothing_outside_the_spark_engine_imports_pyspark():
    spark = {"ddflow.engine.spark", "ddflow.engine.spark_io", "ddflow.engine.spark_session"}
    users = sorted(m for m, tree in TREES.items() if m not in spark
                   for node in ast.walk(tree)
                   if isinstance(node, (ast.Import, ast.ImportFrom))
                   and any(n.split(".")[0] == "pyspark"
                           for n in ([a.name for a in node.names]
                                     if isinstance(node, ast.Import) else [node.module or ""])))
    assert users == []


# -- private names stay private ------------------------------------------------------

def _defined(tree: ast.AST) -> set[str]:
    """Every name a module defines: functions, classes, assigned names and
    attributes, and names listed in strings (`_state`, `__slots__`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
    return names


def _members(tree: ast.AST) -> set[str]:
    """The names a module defines as members of its objects: what its classes define
    (methods, class attributes, strings in class bodies such as `__slots__`) and the
    attributes it assigns.  A module-level function `_f` is not one: a read `x._f`
    cannot mean it, so a same-named helper must not hide a read of another module's
    private member (catalogue's `_in_form` once hid `circuit._in_form`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in ast.walk(node):
                if item is not node and isinstance(
                        item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(item.name)
                elif isinstance(item, ast.Name) and isinstance(item.ctx, ast.Store):
                    names.add(item.id)
                elif isinstance(item, ast.Constant) and isinstance(item.value, str):
                    names.add(item.value)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return names


def private_reads(module: str, defined: dict[str, set[str]]) -> list[str]:
    """`x._name` where `x` is not `self`/`cls` and `_name` is defined by another of
    our modules and is not a member of this one's objects, and `from ours import
    _name`; `_check` is allowed."""
    ours = set().union(*defined.values())
    own = _members(TREES[module])
    found = []
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Attribute):
            name = node.attr
            if (not name.startswith("_") or name.startswith("__") or name == "_check"
                    or (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    or name in own or name not in ours):
                continue
            found.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.ImportFrom) and node.module
              and node.module.split(".")[0] in PACKAGES):
            found += [f"{module}:{node.lineno}: from {node.module} import {a.name}"
                      for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_reads_another_modules_private_names():
    defined = {m: _defined(t) for m, t in TREES.items()}
    found = [hit for m in sorted(MODULES) for hit in private_reads(m, defined)]
    assert found == []


@pytest.mark.parametrize("source, hit", [
    ("def f(df):\n    return df._compiled\n", "df._compiled"),
    ("from ddflow.progress import _minimal_times\n", "import _minimal_times"),
])
def test_the_private_scan_finds_a_read(source, hit):
    defined = {m: _defined(t) for m, t in TREES.items()}
    TREES["ddflow.frames"], saved = ast.parse(source), TREES["ddflow.frames"]
    try:
        defined["ddflow.frames"] = _defined(TREES["ddflow.frames"])
        defined["ddflow.dataflow"] = defined["ddflow.dataflow"] | {"_compiled"}
        assert any(hit in f for f in private_reads("ddflow.frames", defined))
    finally:
        TREES["ddflow.frames"] = saved


# -- the circuit view's modules import in one direction ------------------------------

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
