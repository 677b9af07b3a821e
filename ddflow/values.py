"""Which values Python's `==` makes one: what an order or an encoding of records must
agree with.

A dict, and so consolidation, takes `1`, `1.0`, `True`, `numpy.int64(1)` and
`Fraction(1)` as one record, a namedtuple as the tuple of its items, a `str` Enum
member as its string, and two instances of one dataclass with equal fields as one.
Every place that orders records (`ddflow.updates.fallback_key`) or places them by
key (`ddflow.sharding.canonical_bytes`) must see them as one too, or a trace holds
one key twice and a reduce answers twice.  This module says, once, what plain
built-in value a record stands for.

>>> import numpy as np
>>> from enum import Enum
>>> class Color(str, Enum):
...     RED = "red"
>>> from enum import IntEnum
>>> class Level(IntEnum):
...     HIGH = 2
>>> plain(np.int64(3)), plain(np.bool_(True)), plain(Color.RED), plain(Level.HIGH), plain(2.5)
(3, True, 'red', 2, 2.5)
"""

from __future__ import annotations

import dataclasses
import numbers
from decimal import Decimal
from fractions import Fraction
from typing import Any

#: Types whose instances are their own plain value.
_PLAIN = frozenset([int, float, bool, str, bytes, tuple, frozenset, type(None),
                    Fraction, Decimal, complex])


def plain(x: Any) -> Any:
    """The built-in value `x` equals when its type only wraps one, else `x` itself:
    a numpy scalar as its `.item()`, a `str` or `bytes` subclass (a `str` Enum) as
    the string it compares as, another `numbers.Integral` as an `int`, another
    `numbers.Real` as a `float`.  Containers are left as they are (their items are
    the caller's to walk)."""
    t = type(x)
    if t in _PLAIN:
        return x
    if t.__module__ == "numpy" and getattr(x, "shape", None) == ():
        return x.item()        # numpy's bool_ is not a numbers.Number
    if isinstance(x, str):
        return str.__str__(x)  # a str Enum's str() is its name, not its value
    if isinstance(x, bytes):
        return bytes(x)
    if isinstance(x, numbers.Number):
        # subclasses (an IntEnum, an int subclass of a library) and other registered
        # numbers, as the built-in number they equal
        for base in (Fraction, Decimal, complex):
            if isinstance(x, base):
                return base(x)
        if isinstance(x, numbers.Integral):
            return int(x)
        if isinstance(x, numbers.Real):
            return float(x)
    return x


def compared_fields(x: Any) -> tuple | None:
    """The values a dataclass's generated `__eq__` compares, in order, or `None` for
    anything else (two instances of one such class are equal when these are)."""
    params = getattr(type(x), "__dataclass_params__", None)
    if params is None or not params.eq or isinstance(x, type):
        return None
    return tuple([getattr(x, f.name) for f in dataclasses.fields(x) if f.compare])
