"""Order theory for timestamps, and nothing else.

A timestamp type is a lattice: a partial order (`less_equal`) in which any two
elements have a least upper bound (`join`) and a greatest lower bound (`meet`).
This package isolates that algebra from data: it knows times, frontiers
(`Antichain`), progress counts (`MutableAntichain`) and `advance_by`, never records.

Invariants kept here:

* `<` never stands for the partial order.  Sorting uses `sort_key`, an explicit
  linear extension: `less_equal(a, b)` implies `sort_key(a) <= sort_key(b)`.
* Times of different lattices never compare: doing so raises `TimeError`.

Plain `int` is a lattice (a total order, minimum 0).  `Product` and `AltNeu` are the
partially ordered ones; a user type joins by implementing the `Lattice` protocol
(`less_equal`, `join`, `meet`, `minimum`, `sort_key`), no registration needed.

The free functions below accept ints and lattice objects alike; they are what the
engine calls in its hot loops.

>>> from lattice import Product, join, meet, less_equal
>>> join(Product(3, 7), Product(4, 6)), meet(Product(3, 7), Product(4, 6))
(Product(4, 7), Product(3, 6))
>>> less_equal(Product(3, 7), Product(4, 6))
False
"""

from __future__ import annotations

import numbers
from typing import Any, Protocol, runtime_checkable

from lattice.errors import DataflowError, TimeError


@runtime_checkable
class Lattice(Protocol):
    """What a user-defined timestamp type implements to be usable as a time.

    Instances must be immutable and hashable.  `minimum()` returns the least element
    of the lattice the instance belongs to (for nested types it has the same shape).
    `sort_key()` returns a totally ordered key that extends `less_equal`: `a <= b`
    implies `a.sort_key() <= b.sort_key()`, and distinct times have distinct keys
    (a linear extension), which `Antichain` relies on for its canonical order.
    `less_equal`, `join` and `meet` should raise `TimeError` for a time of another
    lattice.
    """

    def less_equal(self, other: Any) -> bool: ...
    def join(self, other: Any) -> Any: ...
    def meet(self, other: Any) -> Any: ...
    def minimum(self) -> Any: ...
    def sort_key(self) -> Any: ...


def _mismatch(a: Any, b: Any) -> TimeError:
    return TimeError(
        f"cannot compare times of different lattices: {a!r} ({type(a).__name__}) "
        f"and {b!r} ({type(b).__name__})")


def _not_a_time(a: Any, method: str) -> TimeError | None:
    """A `TimeError` if `a` lacks the lattice method `method`, else None."""
    if getattr(type(a), method, None) is None:
        return TimeError(f"not a time: {a!r} ({type(a).__name__}) is neither an int "
                         f"nor a lattice (it has no {method}())")
    return None


def check_int(a: Any, b: Any) -> None:
    """Raise `TimeError` unless `b` is, like the int `a`, a plain int."""
    if type(b) is not int:
        raise _mismatch(a, b)


def less_equal(a: Any, b: Any) -> bool:
    """`a <= b` in the lattice order.

    >>> less_equal(3, 4), less_equal(Product(1, 2), Product(2, 1))
    (True, False)
    """
    ta = type(a)
    if ta is int:
        if type(b) is not int:
            raise _mismatch(a, b)
        return a <= b
    if ta is Product and type(b) is Product:
        # The time of every loop, compared inline (this is the hottest call there is).
        ao, ai = a
        bo, bi = b
        if type(ai) is int and type(bi) is int:
            tao = type(ao)
            if tao is int and type(bo) is int:
                return ao <= bo and ai <= bi
            if tao is Product and type(bo) is Product:
                # The time of a loop in a loop (SCC's), also inline: through the
                # methods it is three calls deep, and it is as hot.
                aoo, aoi = ao
                boo, boi = bo
                if (type(aoo) is int and type(aoi) is int and type(boo) is int
                        and type(boi) is int):
                    return ai <= bi and aoo <= boo and aoi <= boi
    try:
        return a.less_equal(b)
    except AttributeError:
        err = _not_a_time(a, "less_equal")
        if err is None:
            raise
        raise err from None


def less_than(a: Any, b: Any) -> bool:
    """`a < b` in the lattice order: `a <= b` and `a != b`.

    >>> less_than(Product(1, 2), Product(1, 2)), less_than(Product(1, 2), Product(1, 3))
    (False, True)
    """
    return less_equal(a, b) and a != b


def join(a: Any, b: Any) -> Any:
    """Least upper bound of two times.

    >>> join(3, 5), join(Product(1, 5), Product(2, 0))
    (5, Product(2, 5))
    """
    if type(a) is int:
        if type(b) is not int:
            raise _mismatch(a, b)
        return a if a >= b else b
    try:
        return a.join(b)
    except AttributeError:
        err = _not_a_time(a, "join")
        if err is None:
            raise
        raise err from None


def meet(a: Any, b: Any) -> Any:
    """Greatest lower bound of two times.

    >>> meet(3, 5), meet(Product(1, 5), Product(2, 0))
    (3, Product(1, 0))
    """
    if type(a) is int:
        if type(b) is not int:
            raise _mismatch(a, b)
        return a if a <= b else b
    try:
        return a.meet(b)
    except AttributeError:
        err = _not_a_time(a, "meet")
        if err is None:
            raise
        raise err from None


def minimum(t: Any) -> Any:
    """The least element of the lattice `t` belongs to (`t` may be the type `int`).

    >>> minimum(7), minimum(int), minimum(Product(Product(2, 3), 4))
    (0, 0, Product(Product(0, 0), 0))
    """
    if t is int or type(t) is int:
        return 0
    if isinstance(t, type):
        raise TimeError(f"minimum() needs an instance of {t.__name__} to know its shape")
    try:
        return t.minimum()
    except AttributeError:
        err = _not_a_time(t, "minimum")
        if err is None:
            raise
        raise err from None


def sort_key(t: Any) -> Any:
    """A total-order key extending the partial order; use it, never `<`, to sort times.

    >>> sorted([Product(1, 0), Product(0, 5), Product(0, 0)], key=sort_key)
    [Product(0, 0), Product(0, 5), Product(1, 0)]
    """
    if type(t) is int:
        return t
    try:
        return t.sort_key()
    except AttributeError:
        err = _not_a_time(t, "sort_key")
        if err is None:
            raise
        raise err from None


def same_lattice(a: Any, b: Any) -> bool:
    """Whether `a` and `b` are times of the same lattice (same types, same nesting).

    >>> same_lattice(Product(1, 2), Product(0, 0)), same_lattice(Product(1, 2), 3)
    (True, False)
    """
    if type(a) is not type(b):
        return False
    if type(a) is int:
        return True
    shape = getattr(a, "same_lattice", None)
    return True if shape is None else shape(b)


def as_time(t: Any) -> Any:
    """`t` with every integer of another type (numpy's `int64`, any registered
    `numbers.Integral`) made a plain `int`, inside `Product`s too; anything else is
    returned as it is.  Called where times enter (input sessions, reads), so that the
    hot loops only ever meet plain ints.  `bool` stays a bool (it is not a time).

    >>> class Tick(int): pass
    >>> as_time(Tick(3)), type(as_time(Tick(3))), as_time(Product(Tick(1), 2)), as_time(True)
    (3, <class 'int'>, Product(1, 2), True)
    """
    if type(t) is int:
        return t
    if isinstance(t, numbers.Integral) and not isinstance(t, bool):
        return int(t)
    if type(t) is Product:
        outer, inner = t
        o, i = as_time(outer), as_time(inner)
        return t if (o is outer and i is inner) else Product(o, i)
    return t


def is_time(t: Any) -> bool:
    """Whether `t` can serve as a timestamp (a plain int or a `Lattice`)."""
    return type(t) is int or isinstance(t, Lattice)


from lattice.product import Product  # noqa: E402
from lattice.altneu import AltNeu  # noqa: E402
from lattice.antichain import Antichain, MutableAntichain  # noqa: E402
from lattice.advance import advance_by  # noqa: E402
from lattice.closure import join_closure, joins_above  # noqa: E402

__all__ = [
    "Lattice", "Product", "AltNeu", "Antichain", "MutableAntichain", "advance_by",
    "less_equal", "less_than", "join", "meet", "minimum", "sort_key", "same_lattice",
    "is_time", "as_time", "join_closure", "joins_above", "DataflowError", "TimeError",
]
