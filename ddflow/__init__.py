"""ddflow: differential dataflow in Python, over partially ordered time.

Build a `Dataflow`, feed it `(data, time, diff)` updates through input sessions, and
read the exact changes of its outputs at lattice times: ints, `Product(epoch, round)`
in loops, `AltNeu` in delta queries.  `help(ddflow.Dataflow)` and the other names below
document each part; REFERENCES.md lists the papers and posts the design follows.

The front door (`__all__`; loaded on first use, so that importing a core module such
as `ddflow.trace` or `ddflow.updates` does not pull in the engines):

    Dataflow        a graph of operators over changing collections; `new_collection`
    InputSession    feeds one input: insert, remove, update_at, advance_to
    Collection      a changing collection: map, join, reduce, iterate, capture ...
    Arranged        a collection indexed by key, shared by the operators that read it
    Variable        a loop variable inside `iterate`, set once from the loop body
    Capture         an output's updates, its content at a time (`at`), the changes at
                    one (`changes`), those since the last read (`drain`), and why a
                    record is there (`explain`)
    LocalEngine     the default engine (`Dataflow(workers=W)` simulates W workers)
    SparkEngine     the same operators, their state sharded over Spark partitions
    Circuit         the DBSP view: circuits of stream operators on the same engine
    query           conjunctive rules as worst-case optimal joins: query(rule, g=c)
    datalog         recursive Datalog programs with stratified negation: datalog(text, e=c)
    Product, AltNeu, Antichain
                    partially ordered times and frontiers (from `lattice`)

Subpackages, loaded on first use and listed by `dir(ddflow)`: `ddflow.algorithms`
(graph algorithms: reachability, bfs, components, transitive closure, SCC),
`ddflow.testing` (strategies, the law's oracle, `evaluate`), `ddflow.viz`,
`ddflow.engine`, `ddflow.circuit`, `ddflow.errors`.

The errors, all subclasses of `DataflowError` (`ddflow.errors`; each is also an
attribute of this package, `except ddflow.DataflowError:` catches every one):

    DataflowError, TimeError, DataError, DiffError, CompactionError, BatchError,
    SessionClosedError, GraphError, UserFunctionError, ConvergenceError,
    ProgressError, EngineUnavailableError (ExecutorEnvironmentError), NotFinalError,
    StaleReadError

and the warnings `DataflowWarning` and its `StalledRunWarning` (a `run()` whose inputs
have pending updates but did not move) and `NothingDiscardedWarning` (a `discard` that
withdrew nothing).  An error raised by `run()` names the inputs it comes from,
`err.inputs` (pending updates, or updates an earlier run accepted at a time this run
completes, `err.accepted`); `df.discard(err)` withdraws or retracts exactly those.
"""

from __future__ import annotations

from typing import Any

from ddflow.errors import *  # noqa: F401,F403 - every name of ddflow.errors.__all__

__version__ = "0.1.0"

#: The front door: name -> (module, attribute); attribute None hands out the module.
_LAZY = {
    "Dataflow": ("ddflow.dataflow", "Dataflow"),
    "InputSession": ("ddflow.input", "InputSession"),
    "Capture": ("ddflow.capture", "Capture"),
    "Collection": ("ddflow.collection", "Collection"),
    "Arranged": ("ddflow.collection", "Arranged"),
    "Variable": ("ddflow.collection", "Variable"),
    "LocalEngine": ("ddflow.engine.local", "LocalEngine"),
    "SparkEngine": ("ddflow.engine.spark", "SparkEngine"),
    "Circuit": ("ddflow.circuit", "Circuit"),
    "query": ("ddflow.query", None),       # the module, callable as the function
    "datalog": ("ddflow.programs", "datalog"),
    "Product": ("lattice", "Product"),
    "AltNeu": ("lattice", "AltNeu"),
    "Antichain": ("lattice", "Antichain"),
}

#: What `from ddflow import *` gives and `help(ddflow)` documents in full.  The errors
#: are attributes too (listed in the docstring above) but stay out of it: pydoc would
#: print each one's inherited exception boilerplate, ~70 lines apiece.
__all__ = sorted(_LAZY) + ["__version__"]

#: Subpackages and modules users reach by name: listed by `dir(ddflow)` and loaded on
#: first use (`ddflow.testing`, `ddflow.algorithms.graphs` for reachability, BFS, SCC,
#: triangles, `ddflow.viz` ...).
_SUBMODULES = ("algorithms", "circuit", "engine", "errors", "testing", "viz")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        import importlib
        try:
            return importlib.import_module(f"ddflow.{name}")
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] in ("ddflow", "lattice", "operators"):
                raise
            # An optional dependency (hypothesis for `testing`) is missing.  An
            # AttributeError, so that `help(ddflow)` and `inspect.getmembers`, which
            # read every name `dir()` lists, skip it instead of failing.
            raise AttributeError(f"ddflow.{name} needs {exc.name!r}, which is not "
                                 f"installed (pip install {exc.name})") from exc
    if name in _LAZY:
        import importlib
        module, attr = _LAZY[name]
        value = importlib.import_module(module)
        if attr is not None:
            value = getattr(value, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ddflow' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (the front door, the errors and warnings, `__version__`) and
    the subpackages: not the module's own machinery (`_LAZY`, `Any` ...)."""
    from ddflow import errors
    return sorted(set(_LAZY) | set(errors.__all__) | set(_SUBMODULES) | {"__version__"})
