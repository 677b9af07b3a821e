"""Checks of what users hand `ddflow.testing`: update lists and functions.

Misuse of the testing tools (a function of the wrong arity, pairs where triples are
due, a single list where a list of lists is) raises a typed `DataflowError` saying
what was expected, before anything runs, rather than a `TypeError` from deep inside.
"""

from __future__ import annotations

import inspect
from typing import Any

from ddflow.errors import DataError, GraphError


def listed(value: Any, what: str) -> list:
    """`value` as a list, or a `DataError` saying `what` must be one."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise DataError(f"{what} must be a list, got {value!r}")
    return list(value)


def triples(updates: Any, what: str) -> list:
    """`updates` as a list, each a `(data, time, diff)` triple, or a `DataError`
    naming the first that is not."""
    updates = listed(updates, what)
    for u in updates:
        if not isinstance(u, tuple) or len(u) != 3:
            raise DataError(f"{what}: updates are (data, time, diff) triples, got {u!r}",
                            record=u)
    return updates


def takes(f: Any, n: int, what: str, expects: str) -> None:
    """A `GraphError` unless `f` is callable with `n` positional arguments."""
    if not callable(f):
        raise GraphError(f"{what} must be a function ({expects}), not {f!r}")
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return      # a builtin without a signature: it will tell for itself
    try:
        sig.bind(*range(n))
    except TypeError:
        raise GraphError(f"{what} takes {expects}: it is called with {n} argument(s), "
                         f"and its signature is {sig}") from None
