"""A step's input, kept for rollback and blame: large plain pending updates as columns.

What this isolates: the form in which `Dataflow` holds the updates a step took
from its sessions while the engine runs the step.  They are read only if the step
fails (given back to the sessions, `InputSession.restore_pending`, and searched for
the culprit, `ddflow.blame`) or, once it succeeds, for the updates still open
(`InputSession.accepted`).  Held as the rows they were given as, a load's input
stays for the whole step twice over: its triples and, through them, the data tuples
the engine has meanwhile turned into columns of its own (profiled on the
reachability load at 600k edges: 41.7 MB of triples and ~64 MB of edge tuples, ~184
bytes an edge of a ~500 bytes-an-edge peak).  Kept here instead as columns
(`columnar.encode_records(sort=False)`: their order and repeats kept) narrowed to
int32 where the values fit and to one row where a column is constant (the one time
and the diff 1 of a load): ~8 bytes an edge.  The engine is handed rows decoded
from them (`given`), which it alone holds and drops as it injects them.

The columns are made a slice of `CHUNK` updates at a time, each slice narrowed
before the next is encoded: encoding the whole list at once took its three
field lists and int64 arrays side by side (28 MB over the 124 MB of triples and
edge tuples at 600k edges: the load's peak RSS); a slice's are ~2 MB.

It leaves out data that is not plain (any Python value but ints, tuples of ints;
times but ints and `Product`s of ints; big ints) and small steps (below
`columnar.wants_columns`): those stay the list they were, as does everything
while `KEEP_COLUMNS` is off (the switch; the tests run both).

Invariant: `rows(keep(u)) == u` for every list `u` of `(data, time, diff)`
triples: the same values in the same order (equal, not the same objects).

>>> from lattice import Product
>>> ups = [((i, i + 1), Product(0, 0), 1) for i in range(5000)] + [((0, 1), Product(0, 0), 1)]
>>> kept = keep(ups)
>>> type(kept).__name__, len(kept), rows(kept) == ups
('KeptUpdates', 5001, True)
>>> kept.nbytes() // len(kept)          # two int32 a row; the time and the diff: one row
8
>>> kept.in_advance(Antichain([Product(0, 1)]))
[]
"""

from __future__ import annotations

import numpy as np

from lattice import Antichain
from ddflow import columnar
from ddflow.columnar import Columns

#: Whether a step keeps its large plain input as columns (False: as the rows
#: given, the path before; both give every input back the same).
KEEP_COLUMNS = True

#: Updates encoded at a time by `keep` (see the module docstring).
CHUNK = 1 << 16

_I32 = np.iinfo(np.int32)


class KeptUpdates:
    """Pending updates as narrowed columns, in their order, repeats kept."""

    __slots__ = ("_cols", "_len")

    def __init__(self, cols: Columns) -> None:
        self._len = len(cols)
        self._cols = _narrowed(cols)

    def __len__(self) -> int:
        return self._len

    def nbytes(self) -> int:
        """Bytes held by the columns (a constant column counts its one row)."""
        c = self._cols
        return sum(_held(a) for a in (c.keys, c.vals, c.times, c.diffs))

    def _columns(self, rows: np.ndarray | None = None) -> Columns:
        c = self._cols

        def wide(a: np.ndarray) -> np.ndarray:
            return np.array(a if rows is None else a[rows], dtype=np.int64)
        return Columns(wide(c.keys), wide(c.vals), wide(c.times), wide(c.diffs),
                       c.kshape, c.vshape, c.product)

    def columns(self) -> Columns:
        """The updates as record columns (`columnar.encode_records(sort=False)`'s
        layout, int64), in the order given: what an engine that takes columns is
        handed."""
        return self._columns()

    def rows(self) -> list[tuple]:
        """The updates as `(data, time, diff)` triples, in the order given."""
        return columnar.records(self._columns())

    def in_advance(self, frontier: Antichain) -> list[tuple]:
        """The updates at times in advance of `frontier` (not complete: still open
        after the step, `InputSession.accepted`), decoding only those."""
        elements = frontier.elements
        if not elements:
            return []
        f = columnar.encode_frontier(elements, self._cols.product)
        if f is None:       # a frontier not of the columns' times: compare as rows
            return [u for u in self.rows() if frontier.less_equal(u[1])]
        times = self._cols.times
        mask = columnar.in_advance_of(np.array(times, dtype=np.int64), f)
        if not mask.any():
            return []
        return columnar.records(self._columns(np.flatnonzero(mask)))


def keep(updates: list, chunk: int | None = None) -> list | KeptUpdates:
    """`updates` in the form a step keeps them: columns when many and plain (and
    `KEEP_COLUMNS`), else the list itself.  Encoded `chunk` (default `CHUNK`, read
    at the call: a test may patch it) updates at a time."""
    n = len(updates)
    chunk = chunk or CHUNK
    if not KEEP_COLUMNS or not columnar.wants_columns(n):
        return updates
    parts = []
    for i in range(0, n, chunk):
        cols = columnar.encode_records(updates[i:i + chunk], sort=False)
        if cols is None or (parts and cols.layout() != parts[0].layout()):
            return updates
        parts.append(_narrowed(cols))
    whole = _joined(parts)
    # The bound `encode_records` puts on diffs, for the whole list (a slice's is
    # looser): the engine consolidates what it is handed.
    if columnar.abs_max(whole.diffs) >= columnar.DIFF_LIMIT // n:
        return updates
    return KeptUpdates(whole)


def rows(kept: list | KeptUpdates) -> list:
    """The kept updates as the list of triples given (`keep`'s inverse)."""
    return kept if type(kept) is list else kept.rows()


def in_advance(kept: list | KeptUpdates, frontier: Antichain) -> list:
    """Those of the kept updates a step leaves open at `frontier`: the list itself
    (its reader filters it), or the decoded open ones of columns."""
    return kept if type(kept) is list else kept.in_advance(frontier)


def given(kept: list, columns: bool = False) -> list:
    """`(session, updates)` pairs of rows from `(session, kept)` pairs: a new list the
    caller does not hold, so that the engine that takes it holds the decoded rows
    alone and can let them go once injected.  `columns`: for an engine that takes
    record columns (`takes_columns`), kept columns are handed over as such, never
    decoded."""
    return [(s, k.columns() if columns and type(k) is KeptUpdates else rows(k))
            for s, k in kept]


def _narrowed(cols: Columns) -> Columns:
    return Columns(_narrow(cols.keys), _narrow(cols.vals), _narrow(cols.times),
                   _narrow(cols.diffs), cols.kshape, cols.vshape, cols.product)


def _joined(parts: list[Columns]) -> Columns:
    """Narrowed columns of one layout, one after the other, narrowed; `parts` is
    emptied: each slice is let go once copied (the whole is made beside one slice,
    not beside all of them)."""
    if len(parts) == 1:
        return parts.pop()
    p = parts[0]
    fields = [[c.keys for c in parts], [c.vals for c in parts], [c.times for c in parts],
              [c.diffs for c in parts]]
    n = sum(len(c) for c in parts)
    parts.clear()

    def column(arrays: list[np.ndarray]) -> np.ndarray:
        first = arrays[0]
        if all(_constant(a) and a.dtype == first.dtype and np.array_equal(a[:1], first[:1])
               for a in arrays):
            return np.broadcast_to(first[:1], (n, *first.shape[1:]))
        out = np.empty((n, *first.shape[1:]), dtype=np.result_type(*arrays))
        at = 0
        while arrays:
            a = arrays.pop(0)
            out[at:at + len(a)] = a
            at += len(a)
        return _narrow(out)
    return Columns(*(column(f) for f in fields), p.kshape, p.vshape, p.product)


def _constant(a: np.ndarray) -> bool:
    """Whether `a` is one row broadcast (`_narrow`'s constant form)."""
    return len(a) == 0 or a.size == 0 or a.strides[0] == 0


def _narrow(a: np.ndarray) -> np.ndarray:
    """`a` in fewer bytes with the same values: one row broadcast when every row is
    the first, int32 when the values fit."""
    if len(a) == 0 or a.size == 0 or a.strides[0] == 0:
        return a
    if bool((a == a[0]).all()):
        return np.broadcast_to(a[:1].copy(), a.shape)
    if a.dtype != np.int32 and int(a.min()) >= _I32.min and int(a.max()) <= _I32.max:
        return a.astype(np.int32)
    return a


def _held(a: np.ndarray) -> int:
    return a.base.nbytes if a.base is not None and a.strides[0] == 0 else a.nbytes


__all__ = ["KEEP_COLUMNS", "KeptUpdates", "keep", "rows", "in_advance", "given"]
