"""The order of times: the `Lattice` protocol, its free functions, and `Product`.

This module isolates the comparisons every other module makes on times: the free
functions (`less_equal`, `join`, `meet`, `minimum`, `sort_key`, ...) accept ints and
lattice objects alike, and `Product`, the time of every loop, lives next to them
because each needs the other (the hot functions compare `Product`s inline, and a
`Product` compares its coordinates with the free functions).  `lattice/__init__`
re-exports all of it.

`Product(outer, inner)` is the product order, the time of nested scopes:

`Product(a1, b1) <= Product(a2, b2)` exactly when `a1 <= a2` and `b1 <= b2`; join and
meet work component-wise.  Components may be ints or any lattice, so products nest
to any depth: `Product(Product(epoch, i), j)` is the time inside a doubly nested loop.
The order is partial: `Product(0, 1)` and `Product(1, 0)` are incomparable, and
their join `Product(1, 1)` is a time at which neither happened.

>>> a, b = Product(3, 7), Product(4, 6)
>>> a.less_equal(b), b.less_equal(a), a.join(b), a.meet(b)
(False, False, Product(4, 7), Product(3, 6))
>>> Product(Product(0, 1), 2).join(Product(Product(1, 0), 0))
Product(Product(1, 1), 2)
"""

from __future__ import annotations

import numbers
from operator import itemgetter
from typing import Any, Protocol, runtime_checkable

from lattice.errors import TimeError


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


def mismatch(a: Any, b: Any) -> TimeError:
    return TimeError(
        f"cannot compare times of different lattices: {a!r} ({type(a).__name__}) "
        f"and {b!r} ({type(b).__name__})")


def _not_a_time(a: Any, method: str, exc: AttributeError) -> Exception:
    """What to raise when calling the lattice method `method` of `a` raised `exc`: a
    `TimeError` if `a` has no such method (it is not a time), else `exc` itself (the
    method's own error)."""
    if getattr(type(a), method, None) is not None:
        return exc
    err = TimeError(f"not a time: {a!r} ({type(a).__name__}) is neither an int "
                    f"nor a lattice (it has no {method}())")
    err.__suppress_context__ = True     # as `raise err from None`
    return err


def less_equal(a: Any, b: Any) -> bool:
    """`a <= b` in the lattice order.

    >>> less_equal(3, 4), less_equal(Product(1, 2), Product(2, 1))
    (True, False)
    """
    ta = type(a)
    if ta is int:
        if type(b) is not int:
            raise mismatch(a, b)
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
    except AttributeError as exc:
        raise _not_a_time(a, "less_equal", exc)


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
            raise mismatch(a, b)
        return a if a >= b else b
    try:
        return a.join(b)
    except AttributeError as exc:
        raise _not_a_time(a, "join", exc)


def meet(a: Any, b: Any) -> Any:
    """Greatest lower bound of two times.

    >>> meet(3, 5), meet(Product(1, 5), Product(2, 0))
    (3, Product(1, 0))
    """
    if type(a) is int:
        if type(b) is not int:
            raise mismatch(a, b)
        return a if a <= b else b
    try:
        return a.meet(b)
    except AttributeError as exc:
        raise _not_a_time(a, "meet", exc)


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
    except AttributeError as exc:
        raise _not_a_time(t, "minimum", exc)


def sort_key(t: Any) -> Any:
    """A total-order key extending the partial order; use it, never `<`, to sort times.

    >>> sorted([Product(1, 0), Product(0, 5), Product(0, 0)], key=sort_key)
    [Product(0, 0), Product(0, 5), Product(1, 0)]
    """
    if type(t) is int:
        return t
    try:
        return t.sort_key()
    except AttributeError as exc:
        raise _not_a_time(t, "sort_key", exc)


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


class Product(tuple):
    """A pair of times under the product (component-wise) partial order.

    Stored as a 2-tuple, so that hashing and equality (the hottest operations on
    times: every trace, buffer and progress count is a dict keyed by them) run in C.
    `Product(a, b)` is therefore equal to the plain tuple `(a, b)`; times and data
    never share a dict, and `same_lattice` / `is_time` tell them apart by type.
    """

    __slots__ = ()

    def __new__(cls, outer: Any, inner: Any) -> Product:
        return tuple.__new__(cls, (outer, inner))

    def __getnewargs__(self) -> tuple:
        return tuple(self)

    outer = property(itemgetter(0), doc="The outer coordinate.")
    inner = property(itemgetter(1), doc="The inner coordinate (the round, in a loop).")

    def less_equal(self, other: Any) -> bool:
        """`self <= other` in the product order: both coordinates `<=`."""
        if type(other) is not Product:
            raise mismatch(self, other)
        so, si = self
        oo, oi = other
        # Both components are always compared (no early exit on the outer one), so a
        # time of a different nesting raises `TimeError` instead of answering False.
        if type(so) is int and type(oo) is int:
            outer_le = so <= oo
        else:
            outer_le = less_equal(so, oo)
        if type(si) is int and type(oi) is int:
            return outer_le and si <= oi
        inner_le = less_equal(si, oi)
        return outer_le and inner_le

    def less_than(self, other: Any) -> bool:
        """`self <= other` and `self != other`."""
        return self.less_equal(other) and self != other

    def join(self, other: Any) -> Product:
        """The least upper bound: the coordinate-wise join."""
        if type(other) is not Product:
            raise mismatch(self, other)
        so, si = self
        oo, oi = other
        if type(si) is int and type(oi) is int:
            i = si if si >= oi else oi
            if type(so) is int and type(oo) is int:
                return tuple.__new__(Product, (so if so >= oo else oo, i))
            if type(so) is Product and type(oo) is Product:
                # A loop in a loop: built inline, not through three nested calls.
                a, b = so
                c, d = oo
                if type(a) is int and type(b) is int and type(c) is int and type(d) is int:
                    return tuple.__new__(Product, (tuple.__new__(
                        Product, (a if a >= c else c, b if b >= d else d)), i))
        return Product(join(so, oo), join(si, oi))

    def meet(self, other: Any) -> Product:
        """The greatest lower bound: the coordinate-wise meet."""
        if type(other) is not Product:
            raise mismatch(self, other)
        so, si = self
        oo, oi = other
        if type(si) is int and type(oi) is int:
            i = si if si <= oi else oi
            if type(so) is int and type(oo) is int:
                return tuple.__new__(Product, (so if so <= oo else oo, i))
            if type(so) is Product and type(oo) is Product:
                a, b = so
                c, d = oo
                if type(a) is int and type(b) is int and type(c) is int and type(d) is int:
                    return tuple.__new__(Product, (tuple.__new__(
                        Product, (a if a <= c else c, b if b <= d else d)), i))
        return Product(meet(so, oo), meet(si, oi))

    def minimum(self) -> Product:
        """The least time of this lattice (both coordinates at their minimum)."""
        return Product(minimum(self.outer), minimum(self.inner))

    def sort_key(self) -> tuple:
        """A key whose order extends the product order (lexicographic on the coordinates)."""
        # Lexicographic on the components' keys: a linear extension of the product order.
        so, si = self
        if type(si) is int:
            if type(so) is int:
                return (so, si)
            if type(so) is Product:
                a, b = so
                if type(a) is int and type(b) is int:
                    return ((a, b), si)
        return (sort_key(so), sort_key(si))

    def same_lattice(self, other: Any) -> bool:
        """Whether `other` is a `Product` of the same coordinate lattices."""
        return (type(other) is Product and same_lattice(self.outer, other.outer)
                and same_lattice(self.inner, other.inner))

    def __repr__(self) -> str:
        return f"Product({self.outer!r}, {self.inner!r})"

    def __lt__(self, other: Any) -> bool:
        raise TimeError("'<' is not the lattice order of Product; use lattice.less_equal "
                        "or lattice.less_than, and sort by lattice.sort_key")

    __le__ = __gt__ = __ge__ = __lt__
    __hash__ = tuple.__hash__
