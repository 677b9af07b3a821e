"""Names shared by the circuit modules: node kinds, stream forms, tick arithmetic."""

from __future__ import annotations

from typing import Any, Callable

from lattice import Product

#: The six node types of the "Notes on DBSP" (RhizomeDB), section 2.8.
NODE_KINDS = ("operator", "child", "feedback", "import", "sink", "source")

#: The two ways a stream of Z-sets is held by an engine collection C (see the
#: package docstring): its differences (the Z-set at t = the updates at time t) or
#: its accumulation (the Z-set at t = acc(C, t)).
DELTA, INTEGRAL = "delta", "integral"

Hook = Callable[[int, Any], Any]


def root_tick(t: Any) -> int:
    while type(t) is Product:
        t = t.outer
    return t
