"""Checks of the arguments users hand to the front door, in one place.

Builders (`iterate(max_rounds=...)`, `map(f)`, `Dataflow(workers=...)` ...) check
their arguments before they create anything, so that a bad call raises a typed
error naming the operator and leaves the dataflow as it was, and every builder words
the same mistake the same way.  Integers are any `numbers.Integral` (numpy's
included) but `bool`, made plain `int`s here.
"""

from __future__ import annotations

import numbers
from typing import Any

from ddflow.errors import GraphError


def positive_int(value: Any, what: str, operator: str | None = None) -> int:
    """`value` as a plain int if it is an integer `>= 1`; `GraphError` otherwise.

    >>> positive_int(3, "workers")
    3
    >>> positive_int("10", "max_rounds", operator="iterate")
    Traceback (most recent call last):
    ...
    ddflow.errors.GraphError: max_rounds must be a positive int, not '10' (str); operator: iterate
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 1:
        return int(value)
    raise GraphError(f"{what} must be a positive int, not {value!r} ({type(value).__name__})",
                     operator=operator)


def function(value: Any, what: str, operator: str) -> Any:
    """`value` if it is callable; `GraphError` naming the operator otherwise."""
    if not callable(value):
        raise GraphError(f"{operator} needs a function as {what}, got {value!r}",
                         operator=operator)
    return value


def name(value: Any, operator: str) -> Any:
    """`value` if it is None or a str (an operator's name); `GraphError` otherwise."""
    if value is not None and not isinstance(value, str):
        raise GraphError(f"name must be a str, not {value!r}", operator=operator)
    return value


def nonnegative_int(value: Any, what: str) -> int:
    """`value` as a plain int if it is an integer `>= 0`; `GraphError` otherwise.

    >>> nonnegative_int(0, "checkpoint_every")
    0
    >>> nonnegative_int(-1, "checkpoint_every")
    Traceback (most recent call last):
    ...
    ddflow.errors.GraphError: checkpoint_every must be an int >= 0, not -1 (int)
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0:
        return int(value)
    raise GraphError(f"{what} must be an int >= 0, not {value!r} ({type(value).__name__})")


def positive_seconds(value: Any, what: str) -> float:
    """`value` as a float if it is a real number of seconds `> 0`; `GraphError` otherwise.

    >>> positive_seconds(30, "executor_timeout")
    30.0
    >>> positive_seconds("30s", "executor_timeout")
    Traceback (most recent call last):
    ...
    ddflow.errors.GraphError: executor_timeout must be a number of seconds > 0, not '30s' (str)
    """
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0:
        return float(value)
    raise GraphError(f"{what} must be a number of seconds > 0, not {value!r} "
                     f"({type(value).__name__})")
