"""Join-closures: the times at which a non-linear operator's output may change.

The accumulation of a collection, as a function of time, is constant between the
joins of its update times: for a set `S` of times, every time `t` accumulates like
the join of `{s in S : s <= t}`.  So an operator like `reduce` only needs to
evaluate its logic at the join-closure of its input times, and after new times `N`
arrive, only at the closure times that lie above some new time:
`joins_above(N, S)`, every `n` joined with any subset of `S`.

>>> from lattice import Product
>>> sorted(join_closure([Product(1, 0, ), Product(0, 1)]), key=lambda t: t.sort_key())
[Product(0, 1), Product(1, 0), Product(1, 1)]
>>> joins_above([2], [1, 3, 5])
{2, 3, 5}
"""

from __future__ import annotations

from typing import Any, Iterable

from lattice.order import join, less_equal


def joins_above(seeds: Iterable[Any], others: Iterable[Any]) -> set:
    """All joins of one or more seeds with any subset of `others` (and of seeds).

    This is `{u in join_closure(seeds | others) : some seed <= u}`.
    """
    result = set(seeds)
    pool = set(others) | result
    if len(pool) == len(result) and len(result) <= 1:
        return result
    pool = list(pool)
    work = list(result)
    while work:
        u = work.pop()
        for s in pool:
            if less_equal(s, u):
                continue
            v = join(u, s)
            if v not in result:
                result.add(v)
                work.append(v)
    return result


def join_closure(times: Iterable[Any]) -> set:
    """Every finite join of a nonempty subset of `times`."""
    times = set(times)
    return joins_above(times, times)
