"""`AltNeu(time, neu)`: a time `T` extended by a flag, ordered lexicographically.

From the delta-query design of McSherry's dogsdogsdogs: every input update is
presented at `AltNeu(t, True)`, and an update rule reads a relation either strictly
before (`AltNeu(t, False)`, "alt") or up to and including (`AltNeu(t, True)`, "neu")
the same `t`.  That lets rules for several relations changing at the same `t` act as
if they ran one after another, so no output is counted twice or missed.

Order: `(t1, n1) <= (t2, n2)` when `t1 < t2` strictly, or `t1 == t2` and `n1 <= n2`.
Join and meet follow differential dataflow's definition for this type: the join's
time is `join(t1, t2)`, and its flag is the OR of the flags of the operands whose
time equals that joined time (meet dually, with AND).

>>> AltNeu(3, False).less_equal(AltNeu(3, True)), AltNeu(3, True).less_equal(AltNeu(4, False))
(True, True)
>>> AltNeu(3, True).join(AltNeu(3, False)), AltNeu(3, True).join(AltNeu(4, False))
(AltNeu(3, True), AltNeu(4, False))
>>> from lattice import Product
>>> AltNeu(Product(1, 0), True).join(AltNeu(Product(0, 1), True))
AltNeu(Product(1, 1), False)
"""

from __future__ import annotations

from typing import Any

import attrs

from lattice.order import mismatch, join, less_equal, meet, minimum, same_lattice, sort_key
from lattice.errors import TimeError


@attrs.frozen(slots=True, order=False, repr=False, cache_hash=True)
class AltNeu:
    """A time with a boolean tie-breaker: `False` (alt) sorts before `True` (neu)."""

    time: Any
    neu: bool = False

    def less_equal(self, other: Any) -> bool:
        """Lexicographic: `time <=` the other's, with `neu` deciding between equal times."""
        if type(other) is not AltNeu:
            raise mismatch(self, other)
        if self.time == other.time:
            return self.neu <= other.neu
        return less_equal(self.time, other.time)

    def less_than(self, other: Any) -> bool:
        """`self <= other` and `self != other`."""
        return self.less_equal(other) and self != other

    def join(self, other: Any) -> AltNeu:
        """The least upper bound in the lexicographic order."""
        if type(other) is not AltNeu:
            raise mismatch(self, other)
        t = join(self.time, other.time)
        neu = (t == self.time and self.neu) or (t == other.time and other.neu)
        return AltNeu(t, bool(neu))

    def meet(self, other: Any) -> AltNeu:
        """The greatest lower bound in the lexicographic order."""
        if type(other) is not AltNeu:
            raise mismatch(self, other)
        t = meet(self.time, other.time)
        neu = (t != self.time or self.neu) and (t != other.time or other.neu)
        return AltNeu(t, bool(neu))

    def minimum(self) -> AltNeu:
        """The least time: the inner lattice's minimum, alt (`neu=False`)."""
        return AltNeu(minimum(self.time), False)

    def sort_key(self) -> tuple:
        """A key ordering times as `less_equal` does."""
        return (sort_key(self.time), self.neu)

    def same_lattice(self, other: Any) -> bool:
        """Whether `other` is an `AltNeu` over the same inner lattice."""
        return type(other) is AltNeu and same_lattice(self.time, other.time)

    def __repr__(self) -> str:
        return f"AltNeu({self.time!r}, {self.neu!r})"

    def __lt__(self, other: Any) -> bool:
        raise TimeError("'<' is not the lattice order of AltNeu; use lattice.less_equal "
                        "or lattice.less_than, and sort by lattice.sort_key")

    __le__ = __gt__ = __ge__ = __lt__
