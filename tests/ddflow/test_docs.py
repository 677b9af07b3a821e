"""The package documents itself: `dir`, `help`, docstrings on everything public.

What a user reaches from `ddflow.__all__` (the front door, with the public methods and
properties of its classes), the errors, and the sessions and collections they are
handed must each carry a docstring; no docstring in the packages may send the reader
to a document they do not have (internal notes by number, an architecture file, a
sibling directory): public sources are cited by author and title (REFERENCES.md).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import pydoc
import re
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import pytest

import ddflow
import lattice
import operators
from ddflow import errors

ROOT = Path(ddflow.__file__).resolve().parents[1]


def _public_members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties `cls` defines itself (inherited ones are
    checked on the class that defines them; builtins' are not ours)."""
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value) or isinstance(value, property):
            yield name, value


def _front_door() -> Iterator[tuple[str, Any]]:
    for name in ddflow.__all__:
        value = getattr(ddflow, name)
        if name.startswith("__"):
            continue
        yield name, value
        if inspect.isclass(value):
            for cls in value.__mro__:
                if cls.__module__.split(".")[0] in ("ddflow", "lattice", "operators"):
                    for member, obj in _public_members(cls):
                        yield f"{name}.{member} ({cls.__qualname__})", obj


def _missing(items: Iterator[tuple[str, Any]]) -> list[str]:
    return sorted({name for name, obj in items if not (inspect.getdoc(obj) or "").strip()})


def test_every_public_callable_of_the_front_door_has_a_docstring() -> None:
    assert _missing(_front_door()) == []


def test_the_front_door_walk_reaches_what_users_call() -> None:
    # The walk must see the methods a user calls, or the test above proves nothing.
    names = {n.split(" ")[0] for n, _ in _front_door()}
    for expected in ("Dataflow.new_collection", "Dataflow.run", "Collection.join",
                     "Collection.iterate", "Capture.at", "InputSession.update_at",
                     "Product.join", "Antichain.insert"):
        assert expected in names


def test_sessions_collections_and_errors_have_docstrings() -> None:
    df = ddflow.Dataflow()
    session, collection = df.new_collection("x")
    loop = {}

    def body(inner: Any) -> Any:
        loop["variable"] = inner
        return inner

    collection.iterate(body)
    objects = [type(session), type(collection), type(collection.arrange_by_key())]
    items = [(f"{type(o).__name__}.{n}", v) for o in (session, collection)
             for n, v in _public_members(type(o))]
    items += [(f"{c.__name__}.{n}", v) for c in objects for n, v in _public_members(c)]
    items += [(name, getattr(errors, name)) for name in errors.__all__]
    assert _missing(iter(items)) == []
    for method in ("insert", "remove", "update", "update_at", "advance_to", "frontier"):
        assert inspect.getdoc(getattr(session, method))
    # Attributes are documented in their class's docstring.
    assert "`scope`" in inspect.getdoc(type(collection))
    assert "`collection`" in inspect.getdoc(ddflow.Variable)


def test_dir_lists_the_lazy_front_door_and_the_errors() -> None:
    names = dir(ddflow)
    for name in list(ddflow.__all__) + list(errors.__all__):
        assert name in names
    assert "Dataflow" in names and "Collection" in names


def test_help_is_the_overview_and_the_front_door_without_exception_boilerplate() -> None:
    text = pydoc.render_doc(ddflow, renderer=pydoc.plaintext)
    # Every exported name and every error is named in the overview.
    doc = ddflow.__doc__
    for name in list(ddflow.__all__) + list(errors.__all__):
        if not name.startswith("__"):
            assert re.search(rf"\b{name}\b", doc), name
    # No error class is rendered in full (each one is ~70 lines of inherited
    # BaseException methods), and nothing else inherits from BaseException here.
    assert "Methods inherited from builtins.BaseException" not in text
    assert "with_traceback" not in text
    for name in errors.__all__:
        assert f"class {name}(" not in text


def _modules() -> Iterator[ModuleType]:
    for package in (ddflow, lattice, operators):
        yield package
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            yield importlib.import_module(info.name)


_INTERNAL = re.compile(r"[Ss]eeds? 00\d|ARCHITECTURE|\.\./shared|STYLE point|seeds/README")


def _docstrings(module: ModuleType) -> Iterator[tuple[str, str]]:
    if module.__doc__:
        yield module.__name__, module.__doc__
    for name, obj in vars(module).items():
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(obj):
            if obj.__doc__:
                yield f"{module.__name__}.{name}", obj.__doc__
            for member, value in vars(obj).items():
                value = getattr(value, "__func__", value)
                doc = getattr(value, "__doc__", None) if (
                    inspect.isfunction(value) or isinstance(value, property)) else None
                if doc:
                    yield f"{module.__name__}.{name}.{member}", doc
        elif inspect.isfunction(obj) and obj.__doc__:
            yield f"{module.__name__}.{name}", obj.__doc__


def test_no_docstring_cites_a_document_users_do_not_have() -> None:
    modules = list(_modules())
    assert len(modules) > 30           # the walk reached the whole of all three packages
    found = [where for m in modules for where, doc in _docstrings(m) if _INTERNAL.search(doc)]
    assert found == []


@pytest.mark.parametrize("folder", ["ddflow", "lattice", "operators", "tests", "benchmarks",
                                    "notebooks"])
def test_no_source_comment_or_notebook_cites_internal_documents(folder: str) -> None:
    # Comments and notebooks are not docstrings; read the text itself.
    hits = []
    for path in sorted((ROOT / folder).rglob("*")):
        if path.suffix not in (".py", ".ipynb", ".md") or "__pycache__" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        if path.name == "test_docs.py":
            continue                    # this file spells the patterns out
        hits += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in _INTERNAL.finditer(text)]
    assert hits == []


def test_references_and_license_exist() -> None:
    refs = " ".join((ROOT / "REFERENCES.md").read_text(encoding="utf-8").split())
    for title in ("Differential dataflow", "Naiad", "Foundations of differential dataflow",
                  "Shared arrangements", "DBSP", "Implementing Z-sets", "Notes on DBSP",
                  "Generalizing linear operators", "dogsdogsdogs", "WCOJ meets DBSP",
                  "Worst-case optimal join algorithms", "Leapfrog Triejoin"):
        assert title in refs, title
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
