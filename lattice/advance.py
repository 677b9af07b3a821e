"""`advance_by`: move a time forward as far as a frontier makes indistinguishable.

Once nothing will be asked about times not in advance of frontier `F`, a time `t`
can be replaced by `advance_by(t, F)`, the meet over `f` in `F` of `join(t, f)`.
For every `s` in advance of `F`, `t <= s` exactly when `advance_by(t, F) <= s`, so
accumulations at those times are unchanged; and many distinct historical times
collapse onto a few, which is what keeps traces proportional to live data
(differential dataflow's logical compaction).

`advance_by(t, F)` is the *greatest* time with that property (differential
dataflow's `lattice.rs`: "the largest time indistinguishable under `frontier`"):
any `u` that compares with every time in advance of `F` as `t` does satisfies
`u <= advance_by(t, F)`; `t` itself is one such `u`.  The result need not itself
be in advance of a frontier of several elements (below, `Product(4, 7)` is not).

>>> from lattice import Product, Antichain
>>> advance_by(Product(3, 7), Antichain([Product(4, 8), Product(5, 3)]))
Product(4, 7)
>>> advance_by(2, Antichain([5])), advance_by(9, Antichain([5]))
(5, 9)
"""

from __future__ import annotations

from typing import Any

from lattice.order import join, meet
from lattice.antichain import Antichain


def advance_by(t: Any, frontier: Antichain) -> Any:
    """The greatest time that compares with every time in advance of `frontier` as `t` does.

    An empty frontier (nothing more will happen) leaves `t` unchanged.
    """
    elements = frontier.elements
    if not elements:
        return t
    if type(t) is int:
        # Total order: a frontier of ints has one element.
        f = elements[0]
        return t if t >= f else f
    result = join(t, elements[0])
    for f in elements[1:]:
        result = meet(result, join(t, f))
    return result
