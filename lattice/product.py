"""`Product(outer, inner)`: the product order, the time of nested scopes.

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

from typing import Any

from operator import itemgetter

from lattice import _mismatch, join, less_equal, meet, minimum, same_lattice, sort_key
from lattice.errors import TimeError


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
            raise _mismatch(self, other)
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
            raise _mismatch(self, other)
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
            raise _mismatch(self, other)
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
