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

from lattice.errors import DataflowError, TimeError
from lattice.order import (Lattice, Product, as_time, is_time, join, less_equal, less_than,
                           meet, minimum, same_lattice, sort_key)
from lattice.altneu import AltNeu
from lattice.antichain import Antichain, MutableAntichain
from lattice.advance import advance_by
from lattice.closure import join_closure, joins_above

__all__ = [
    "Lattice", "Product", "AltNeu", "Antichain", "MutableAntichain", "advance_by",
    "less_equal", "less_than", "join", "meet", "minimum", "sort_key", "same_lattice",
    "is_time", "as_time", "join_closure", "joins_above", "DataflowError", "TimeError",
]
