"""Hypothesis strategies for timestamps and frontiers of every lattice ddflow ships.

`times(kind)` draws times of one lattice: `"int"`, `"product"` (`Product(a, b)`),
`"product3"` (`Product(Product(a, b), c)`, the time of a loop inside a partially
ordered outer time) or `"altneu"` (`AltNeu(Product(a, b), neu)`).  Components are
small (`0..max_value`) on purpose: small grids make incomparable times, shared joins
and collisions likely, which is where bugs hide.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from lattice import AltNeu, Antichain, Product
from ddflow.errors import GraphError

TIME_KINDS = ("int", "product", "product3", "altneu")


def times(kind: str = "product", max_value: int = 3) -> st.SearchStrategy[Any]:
    """Times of the lattice named by `kind`, with every component in `0..max_value`."""
    c = st.integers(0, max_value)
    if kind == "int":
        return c
    if kind == "product":
        return st.builds(Product, c, c)
    if kind == "product3":
        return st.builds(Product, st.builds(Product, c, c), c)
    if kind == "altneu":
        return st.builds(AltNeu, st.builds(Product, c, c), st.booleans())
    raise GraphError(f"unknown time kind {kind!r}; expected one of {TIME_KINDS}")


def grid(kind: str, max_value: int) -> list[Any]:
    """Every time of the lattice named by `kind` with components in `0..max_value`:
    a sublattice (closed under join and meet), for exhaustive checks on small grids.

    >>> len(grid("product", 2)), grid("int", 2)
    (9, [0, 1, 2])
    """
    r = range(max_value + 1)
    if kind == "int":
        return list(r)
    if kind == "product":
        return [Product(a, b) for a in r for b in r]
    if kind == "product3":
        return [Product(Product(a, b), c) for a in r for b in r for c in r]
    if kind == "altneu":
        return [AltNeu(Product(a, b), n) for a in r for b in r for n in (False, True)]
    raise GraphError(f"unknown time kind {kind!r}; expected one of {TIME_KINDS}")


def minimum_of(kind: str) -> Any:
    """The least time of the lattice named by `kind`."""
    return {"int": 0, "product": Product(0, 0),
            "product3": Product(Product(0, 0), 0),
            "altneu": AltNeu(Product(0, 0), False)}[kind]


def antichains(kind: str = "product", max_value: int = 3,
               max_size: int = 4) -> st.SearchStrategy[Antichain]:
    """Frontiers (possibly empty) over the lattice named by `kind`."""
    return st.lists(times(kind, max_value), max_size=max_size).map(Antichain)


def nonempty_antichains(kind: str = "product", max_value: int = 3,
                        max_size: int = 4) -> st.SearchStrategy[Antichain]:
    return st.lists(times(kind, max_value), min_size=1, max_size=max_size).map(Antichain)
