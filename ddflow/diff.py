"""Diff semirings: what the `diff` of an update triple may be, and how diffs combine.

This module isolates the algebra of diffs (weights, in Budiu's "Implementing Z-sets") from
data and time.  It leaves out everything about collections: Z-sets over diffs live in
`ddflow.updates`, stored ones in `ddflow.trace`.

The invariant it keeps: a diff is either a plain Python `int` or an instance of a
`Diff` subclass, and in both cases the engine may combine diffs with Python's own
operators, which is what its hot loops do:

* `a + b`, `-a`, `a - b`: the commutative group (accumulations and retractions);
* `a * b`: the ring product (join multiplies the diffs of the two matched records);
* `not a`: the zero test (zero diffs are dropped everywhere, the Z-set invariant).

Python ints are arbitrary precision, so the silent overflow "Implementing Z-sets" warns
about for 32-bit Java weights cannot happen here.  `bool` is not a diff (`True + True`
leaves the type), nor is `float`: floating-point addition rounds, so it is not associative
and has no exact inverse, and accumulations would depend on the order in which updates
happen to be summed.

A `Semiring` object (the `WeightType` of "Implementing Z-sets") describes a diff type from
the outside (`zero`, `one`, `plus`, `negate`, `multiply`, `is_zero`, `is_element`), for
code that must make a zero or a one without having a diff in hand.  `INTEGERS` describes
ints; `vectors(n)` describes `DiffVector`s of width `n`.

>>> v = DiffVector(1, 10) + DiffVector(1, 32)     # count and sum in one pass
>>> v, -v, 3 * v, v * DiffVector(2, 0), bool(v - v)
(DiffVector(2, 42), DiffVector(-2, -42), DiffVector(6, 126), DiffVector(4, 0), False)
>>> check_diff(2 ** 80) == 2 ** 80
True
"""

from __future__ import annotations

import abc
import numbers
from typing import Any, Iterator, Protocol, TypeVar, runtime_checkable

from ddflow.errors import DiffError

D = TypeVar("D")


@runtime_checkable
class Semiring(Protocol[D]):
    """A diff type seen from outside: Budiu's `WeightType` ("Implementing Z-sets"), plus
    `is_element`.

    `plus` and `negate` make a commutative group with identity `zero()`; `multiply`
    distributes over `plus` and has identity `one()`.  `is_element(d)` says whether
    `d` belongs to this diff type at all (used to validate input at the boundary).
    """

    def zero(self) -> D: ...
    def one(self) -> D: ...
    def plus(self, a: D, b: D) -> D: ...
    def negate(self, a: D) -> D: ...
    def multiply(self, a: D, b: D) -> D: ...
    def is_zero(self, a: D) -> bool: ...
    def is_element(self, a: Any) -> bool: ...


class IntegerSemiring:
    """The ring of Python ints (arbitrary precision: no overflow).

    >>> INTEGERS.plus(2 ** 64, 2 ** 64), INTEGERS.multiply(2 ** 64, 2 ** 64) == 2 ** 128
    (36893488147419103232, True)
    >>> INTEGERS.is_element(3), INTEGERS.is_element(True), INTEGERS.is_element(1.0)
    (True, False, False)
    """

    __slots__ = ()

    def zero(self) -> int:
        return 0

    def one(self) -> int:
        return 1

    def plus(self, a: int, b: int) -> int:
        return a + b

    def negate(self, a: int) -> int:
        return -a

    def multiply(self, a: int, b: int) -> int:
        return a * b

    def is_zero(self, a: int) -> bool:
        return a == 0

    def is_element(self, a: Any) -> bool:
        # `type(...) is int` rather than isinstance: bool subclasses int.
        return type(a) is int

    def __repr__(self) -> str:
        return "INTEGERS"


INTEGERS = IntegerSemiring()


class Diff(abc.ABC):
    """Base of custom diff types: implement the operators the engine calls.

    Subclasses implement `__add__`, `__neg__`, `__mul__` (by `int` and by their own
    type), `__bool__` (False exactly for the zero), `__eq__` and `__hash__`.  The base
    supplies `__sub__`, `__rsub__`, `__radd__` and `__rmul__` from them, assuming the
    multiplication is commutative (override `__rmul__` otherwise).

    The int `0` is accepted as the additive identity on either side of `+` and `-`,
    so `sum(diffs)` and `acc.get(k, 0) + d` work for every diff type.  An existing
    exact type (`fractions.Fraction`, say) can join with `Diff.register(Fraction)`.
    """

    __slots__ = ()

    @abc.abstractmethod
    def __add__(self, other: Any) -> Any: ...

    @abc.abstractmethod
    def __neg__(self) -> Any: ...

    @abc.abstractmethod
    def __mul__(self, other: Any) -> Any: ...

    @abc.abstractmethod
    def __bool__(self) -> bool: ...

    @abc.abstractmethod
    def __eq__(self, other: Any) -> bool: ...

    @abc.abstractmethod
    def __hash__(self) -> int: ...

    def __radd__(self, other: Any) -> Any:
        # The group is commutative, so `other + self` is `self + other`.
        return self.__add__(other)

    def __sub__(self, other: Any) -> Any:
        if type(other) is int and other == 0:
            return self
        if not isinstance(other, Diff):
            return NotImplemented
        return self + (-other)

    def __rsub__(self, other: Any) -> Any:
        return (-self).__add__(other)

    def __rmul__(self, other: Any) -> Any:
        return self.__mul__(other)


class DiffVector(Diff):
    """A fixed-width tuple of ints under component-wise `+` and `*`.

    Multiplying by an `int` scales every component, so a join of a vector-weighted
    collection with an int-weighted one stays exact.  Its use: compute several
    aggregates (count, sum, sum of squares ...) in one pass, each component being a
    separate Z-set weight.

    >>> DiffVector(1, 5) + 0, 0 + DiffVector(1, 5), sum([DiffVector(1, 5), DiffVector(2, -5)])
    (DiffVector(1, 5), DiffVector(1, 5), DiffVector(3, 0))
    >>> bool(DiffVector(0, 0)), DiffVector(2, 3) * DiffVector(4, 5), DiffVector(2, 3) * -1
    (False, DiffVector(8, 15), DiffVector(-2, -3))
    >>> DiffVector(1, 2) + DiffVector(1, 2, 3)
    Traceback (most recent call last):
    ...
    ddflow.errors.DiffError: cannot combine DiffVectors of widths 2 and 3
    """

    __slots__ = ("components",)
    components: tuple[int, ...]

    def __init__(self, *components: int) -> None:
        for c in components:
            if type(c) is not int:
                raise DiffError(f"DiffVector components must be ints, got {c!r} "
                                f"({type(c).__name__})")
        object.__setattr__(self, "components", components)

    @classmethod
    def _of(cls, components: tuple[int, ...]) -> DiffVector:
        # Internal constructor: components already known to be ints.
        v = object.__new__(cls)
        object.__setattr__(v, "components", components)
        return v

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("DiffVector is immutable")

    def _width_error(self, other: DiffVector) -> DiffError:
        return DiffError(f"cannot combine DiffVectors of widths "
                         f"{len(self.components)} and {len(other.components)}")

    def __add__(self, other: Any) -> Any:
        if type(other) is DiffVector:
            a, b = self.components, other.components
            if len(a) != len(b):
                raise self._width_error(other)
            return DiffVector._of(tuple([x + y for x, y in zip(a, b)]))
        if type(other) is int:
            if other == 0:
                return self
            raise DiffError(f"cannot add the int {other} to {self!r}: only 0 is a vector")
        return NotImplemented

    def __neg__(self) -> DiffVector:
        return DiffVector._of(tuple([-x for x in self.components]))

    def __mul__(self, other: Any) -> Any:
        if type(other) is int:
            return DiffVector._of(tuple([x * other for x in self.components]))
        if type(other) is DiffVector:
            a, b = self.components, other.components
            if len(a) != len(b):
                raise self._width_error(other)
            return DiffVector._of(tuple([x * y for x, y in zip(a, b)]))
        return NotImplemented

    def __bool__(self) -> bool:
        return any(self.components)

    def __eq__(self, other: Any) -> bool:
        if type(other) is DiffVector:
            return self.components == other.components
        return NotImplemented

    def __hash__(self) -> int:
        return hash((DiffVector, self.components))

    def __len__(self) -> int:
        return len(self.components)

    def __iter__(self) -> Iterator[int]:
        return iter(self.components)

    def __getitem__(self, i: int) -> int:
        return self.components[i]

    def __repr__(self) -> str:
        return f"DiffVector({', '.join(map(repr, self.components))})"

    def __reduce__(self) -> Any:
        # Picklable (the Spark engine ships diffs between processes).
        return (DiffVector, self.components)


class VectorSemiring:
    """The `Semiring` of `DiffVector`s of one width (component-wise operations).

    >>> s = vectors(2)
    >>> s.zero(), s.one(), s.is_zero(s.plus(s.one(), s.negate(s.one())))
    (DiffVector(0, 0), DiffVector(1, 1), True)
    >>> s.is_element(DiffVector(1, 2)), s.is_element(DiffVector(1)), s.is_element(1)
    (True, False, False)
    """

    __slots__ = ("width",)

    def __init__(self, width: int) -> None:
        if type(width) is not int or width < 0:
            raise DiffError(f"a vector width is a non-negative int, got {width!r}")
        self.width = width

    def zero(self) -> DiffVector:
        return DiffVector._of((0,) * self.width)

    def one(self) -> DiffVector:
        return DiffVector._of((1,) * self.width)

    def plus(self, a: DiffVector, b: DiffVector) -> DiffVector:
        return a + b

    def negate(self, a: DiffVector) -> DiffVector:
        return -a

    def multiply(self, a: DiffVector, b: DiffVector) -> DiffVector:
        return a * b

    def is_zero(self, a: DiffVector) -> bool:
        return not a

    def is_element(self, a: Any) -> bool:
        return type(a) is DiffVector and len(a.components) == self.width

    def __repr__(self) -> str:
        return f"vectors({self.width})"


def vectors(width: int) -> VectorSemiring:
    """The semiring of `DiffVector`s with `width` components."""
    return VectorSemiring(width)


def is_diff(d: Any) -> bool:
    """Whether `d` may serve as a diff: a plain `int` or a `Diff` instance.

    >>> is_diff(3), is_diff(True), is_diff(0.5), is_diff(DiffVector(1))
    (True, False, False, True)
    """
    return type(d) is int or isinstance(d, Diff)


def check_diff(d: Any, operator: str | None = None, record: Any = None,
               time: Any = None) -> Any:
    """Return `d` if it is a diff (any `numbers.Integral` but `bool`, made a plain
    `int`); raise `DiffError` (saying why not) otherwise.

    Called where diffs enter the dataflow (input sessions, user functions that
    produce diffs), not in hot loops.

    >>> check_diff(0.5, record="x")
    Traceback (most recent call last):
    ...
    ddflow.errors.DiffError: a float is not a diff: floating-point addition rounds, ...
    >>> check_diff(True)
    Traceback (most recent call last):
    ...
    ddflow.errors.DiffError: a bool is not a diff: ...
    """
    if type(d) is int or isinstance(d, Diff):
        return d
    if isinstance(d, numbers.Integral) and not isinstance(d, bool):
        return int(d)       # numpy's int64 and the like: a plain int from here on
    if isinstance(d, bool):
        why = ("a bool is not a diff: True + True == 2 leaves the type; "
               "write 1 or -1")
    elif isinstance(d, float):
        why = ("a float is not a diff: floating-point addition rounds, so it is not "
               "associative and has no exact inverse (not a group under rounding), and "
               "accumulations would depend on summation order; use ints, or an exact "
               "type registered with ddflow.diff.Diff")
    else:
        why = (f"{type(d).__name__} {d!r} is not a diff: diffs are ints or instances "
               f"of ddflow.diff.Diff (e.g. DiffVector)")
    raise DiffError(why, operator=operator, record=record, time=time)


__all__ = ["Semiring", "IntegerSemiring", "INTEGERS", "Diff", "DiffVector",
           "VectorSemiring", "vectors", "is_diff", "check_diff"]
