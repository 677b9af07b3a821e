"""Record columns as a batch between operators: a load without a tuple per update.

What this isolates: the helpers by which operators pass a batch of plain updates
on as record columns (`ddflow.columnar.encode_records`' layout: the data in
`keys`, no value columns) instead of a list of `(data, time, diff)` triples.  An
operator says it takes them (`Operator.takes_columns`: an input, an enter, an
arrangement, a join, a concat, a map whose function says how, `on_columns`); the
engine decodes such a batch for any other (`operators.base.as_rows`).  A load then
reaches its arrangements without a Python tuple per update (the reachability load
at 600k edges: from ~450 to ~320 bytes of state an edge).

It leaves out the kernels (`ddflow.columnar`, `ddflow.column_join`) and which
batches go columnar (a step's input kept as columns, `ddflow.kept_input`, handed to
an engine that takes them).  Invariant: every function here reads as the row
function it stands for (`columnar.records` of its result equals the rows').

>>> from ddflow import columnar
>>> c = columnar.encode_records([((1, 2), 0, 1), ((3, 4), 0, 1)])
>>> columnar.records(field(c, 1)), record_time_counts(c)
([(2, 0, 1), (4, 0, 1)], {0: 2})
>>> columnar.updates(as_pairs(c))
[((1, 2), 0, 1), ((3, 4), 0, 1)]
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ddflow.columnar import Columns, distinct_rows, times_list


def record_time_counts(c: Columns) -> dict:
    """How many rows of record columns sit at each time (their pointstamps)."""
    if len(c) == 0:
        return {}
    if c.product:
        uniq, inv = distinct_rows(c.times)
        counts = np.bincount(inv, minlength=len(uniq))
        return dict(zip(times_list(uniq, True), counts.tolist()))
    times = c.times[:, 0]
    first = times[0]
    if bool((times == first).all()):
        # One time (a step's batch, the commonest): no sort.
        return {int(first): len(times)}
    uniq, counts = np.unique(times, return_counts=True)
    return dict(zip(uniq.tolist(), counts.tolist()))


def record_times(c: Columns) -> list:
    """The distinct times of record columns."""
    return list(record_time_counts(c))


def as_pairs(c: Columns) -> Columns | None:
    """Record columns whose data are `(key, value)` pairs of ints, keyed: the first
    column the key, the second the value (sorted record columns stay sorted); None
    for any other data."""
    if c.kshape != 2 or c.vshape != 0:
        return None
    return Columns(c.keys[:, :1], c.keys[:, 1:], c.times, c.diffs, -1, -1, c.product)


def field(c: Columns, i: int) -> Columns | None:
    """Record columns of tuples of ints, each record replaced by its field `i` (an
    int): `map(lambda d: d[i])` without a tuple per update (neither sorted nor
    consolidated); None for any other data."""
    if c.vshape != 0 or c.kshape < 0 or not 0 <= i < c.kshape:
        return None
    return Columns(c.keys[:, i:i + 1], c.vals, c.times, c.diffs, -1, 0, c.product)


def concat(parts: Sequence[Columns]) -> Columns | None:
    """The rows of `parts` (one layout) one after the other, neither sorted nor
    consolidated (a join's delta, looked up row by row); None if layouts differ."""
    if len({p.layout() for p in parts}) != 1:
        return None
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    return Columns(np.concatenate([p.keys for p in parts]),
                   np.concatenate([p.vals for p in parts]),
                   np.concatenate([p.times for p in parts]),
                   np.concatenate([p.diffs for p in parts]),
                   first.kshape, first.vshape, first.product)


__all__ = ["record_time_counts", "record_times", "as_pairs", "field", "concat"]
