"""ddflow: differential dataflow in Python, over partially ordered time.

Build a `Dataflow`, feed it `(data, time, diff)` updates through input sessions, and
read the exact changes of its outputs at lattice times: ints, `Product(epoch, round)`
in loops, `AltNeu` in delta queries.  The front-door names are loaded lazily, so that
importing a core module (`ddflow.trace`, `ddflow.updates`) does not pull in engines.
"""

from __future__ import annotations

from typing import Any

from ddflow.errors import (BatchError, CompactionError, ConvergenceError, DataError,
                           DataflowError, DataflowWarning, DiffError, EngineUnavailableError,
                           GraphError, NotFinalError, SessionClosedError, StalledRunWarning,
                           TimeError, UserFunctionError)

__version__ = "0.1.0"

_LAZY = {
    "Dataflow": ("ddflow.dataflow", "Dataflow"),
    "InputSession": ("ddflow.dataflow", "InputSession"),
    "Capture": ("ddflow.dataflow", "Capture"),
    "Collection": ("ddflow.collection", "Collection"),
    "Arranged": ("ddflow.collection", "Arranged"),
    "Variable": ("ddflow.collection", "Variable"),
    "LocalEngine": ("ddflow.engine.local", "LocalEngine"),
    "SparkEngine": ("ddflow.engine.spark", "SparkEngine"),
    "Circuit": ("ddflow.circuit", "Circuit"),
    "query": ("ddflow.query", None),       # the module, callable as the function
    "Product": ("lattice", "Product"),
    "AltNeu": ("lattice", "AltNeu"),
    "Antichain": ("lattice", "Antichain"),
}

__all__ = sorted(list(_LAZY) + [
    "DataflowError", "TimeError", "DataError", "DiffError", "CompactionError", "BatchError",
    "SessionClosedError", "GraphError", "UserFunctionError", "ConvergenceError",
    "EngineUnavailableError", "NotFinalError", "DataflowWarning", "StalledRunWarning",
    "__version__"])


#: Modules that register parts of the front door on `Dataflow` when imported (its
#: collection type, its `to_dot`): loaded before any front-door name is handed out,
#: since `ddflow.dataflow` may not import them (they sit above it).
_REGISTRARS = ("ddflow.collection", "ddflow.viz")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib
        module, attr = _LAZY[name]
        if module.startswith("ddflow."):
            for registrar in _REGISTRARS:
                importlib.import_module(registrar)
        value = importlib.import_module(module)
        if attr is not None:
            value = getattr(value, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ddflow' has no attribute {name!r}")
