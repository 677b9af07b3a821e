"""Sorted numpy columns for batches of plain data, and the vectorized kernels over them.

This module isolates the columnar layout of a batch of keyed updates
`((key, val), time, diff)` when everything in it is *plain*: keys and values are
Python ints or tuples of ints (one width per column), times are ints or
`Product`s of two ints, diffs are ints small enough that sums stay in int64.
Such a batch is four arrays (`Columns`): `keys` (n x kw), `vals` (n x vw),
`times` (n x 1 or n x 2) and `diffs` (n), sorted by key, then value, then time
(a time's columns in lexicographic order: a linear extension of the product
order), consolidated (one row per `(key, val, time)`, no zero diff).  Where a
key's rows start is `offsets()`.

Kernels: `encode` (rows to columns, or None when the rows are not plain),
`consolidate` (lexsort, then `add.reduceat` over runs of equal rows), `advance`
(every time advanced by a frontier: `meet over f of join(t, f)`, component-wise
max then min), `merge` (concatenate, advance, consolidate), `decode` (back to the
row layout `key -> ((val, time, diff), ...)` and to update triples) and
`key_entries` (one key's entries by binary search).  The join over columns and
the per-key sums are `ddflow.column_join`'s.

It leaves out when columns are used (`ddflow.batch` chooses by size: numpy's
per-call cost loses to dicts below a few thousand rows, `columnar_min()`), and
arbitrary Python data, which stays in rows.  Invariant (`Columns._check()`, O(n)):
rows strictly increasing in (key, val, time), no zero diff, shapes consistent.
"""

from __future__ import annotations

from contextlib import contextmanager
from itertools import chain
from operator import itemgetter
from typing import Any, Iterator, Sequence

import numpy as np

from ddflow.gc_pause import gc_paused
from lattice import Product

#: Diffs whose sums could leave int64 stay in rows (Python ints do not overflow).
DIFF_LIMIT = 1 << 62

#: The columnar threshold the others derive from: operator outputs of at least this
#: many updates are consolidated by the columnar kernel (`wants_column_build`), an
#: input keeps its history in columns from it (`wants_columns`).  Measured (process
#: CPU per update, the result decoded for readers): merging parts that are already
#: columns costs 0.45-0.7 us against 0.6-1.6 us in rows from 1k updates up;
#: a merge re-encodes only its row parts, the small recent batches.
COLUMNAR_MIN = 4096

#: Batches (`Batch.from_updates`, `merge_batches`) go columnar from `COLUMNAR_MIN //
#: BATCH_DIVISOR` updates (256).  A batch's layout decides how every later step reads
#: it: a columnar one is merged at ~0.3 us an update against ~1 us in rows (measured
#: over the merges of the join+count stream), joined by the vectorized kernel instead
#: of a dict lookup per delta record, and summed per key by the count kernel without
#: being encoded first.  Built alone (process CPU, best of 5): 500 updates with
#: distinct keys 275 us in columns against 373 in rows, 250 even; 500 updates over
#: 170 keys 283 against 199, even from 1,000.  The join+count stream at 100k updates
#: in epochs of 1,000 (batches of ~500 and ~2,000) ran in 1,420-1,450 ms against
#: 1,810-1,940 with batches columnar from 4,096 (min of 3, loaded box); thresholds of
#: 128 to 1,024 measured alike there.
BATCH_DIVISOR = 16

#: Operator outputs are consolidated by the columnar kernel from `BUILD_FACTOR` times
#: `COLUMNAR_MIN` (`operators.base`).  Measured (process CPU, build then `update_list`, best of 3)
#: once encoding split fields by itemgetter and decoding ran without the cyclic GC:
#: columns win from 2k updates (2.2 ms against 1.4), 1.9x at 4k, 2.1x at 8k, 4x at
#: 64k; the reachability load at 200k nodes took 17 s against 21-24 s with 16.
BUILD_FACTOR = 1

_threshold: int | None = COLUMNAR_MIN


def columnar_min() -> int | None:
    """The size from which plain batches are columnar (None: never)."""
    return _threshold


def set_columnar_min(n: int | None) -> int | None:
    """Set the size from which plain batches are columnar (0: always, None: never);
    returns the previous setting.  Both layouts give the same accumulations: the
    tests force each in turn."""
    global _threshold
    old, _threshold = _threshold, n
    return old


@contextmanager
def columnar(n: int | None) -> Iterator[None]:
    """`set_columnar_min(n)` for the duration of a `with` block."""
    old = set_columnar_min(n)
    try:
        yield
    finally:
        set_columnar_min(old)


def wants_columns(n: int) -> bool:
    """Whether `n` updates are many enough for columns at the base threshold."""
    t = _threshold
    return t is not None and n >= t and n > 0


def wants_column_join(n: int) -> bool:
    """Whether a join should pair a delta of `n` updates with a trace's columnar
    batches by the vectorized kernel: its fixed cost (~50 us a batch) is that of
    ~30-50 per-record lookups, so from 1/32 of the merge threshold."""
    t = _threshold
    return t is not None and n >= t // 32 and n > 0


def wants_column_build(n: int) -> bool:
    """Whether an operator's output of `n` update triples should be consolidated by
    the columnar kernel (`consolidate_records`)."""
    t = _threshold
    return t is not None and n >= t * BUILD_FACTOR and n > 0


def wants_column_batch(n: int) -> bool:
    """Whether a batch of `n` updates (built from triples, or merged) should try
    columns: from `COLUMNAR_MIN // BATCH_DIVISOR` (at least 1 unless the threshold
    is 0, which puts every plain batch in columns)."""
    t = _threshold
    return t is not None and n > 0 and n >= (t and max(1, t // BATCH_DIVISOR))


class Columns:
    """A consolidated, sorted columnar batch body (see the module docstring).

    `kshape` / `vshape`: -1 for plain int keys / values, w >= 0 for tuples of w
    ints.  `product`: times are `Product(int, int)` (two columns) rather than ints.
    """

    __slots__ = ("keys", "vals", "times", "diffs", "kshape", "vshape", "product")

    def __init__(self, keys: np.ndarray, vals: np.ndarray, times: np.ndarray,
                 diffs: np.ndarray, kshape: int, vshape: int, product: bool) -> None:
        self.keys, self.vals, self.times, self.diffs = keys, vals, times, diffs
        self.kshape, self.vshape, self.product = kshape, vshape, product

    def __len__(self) -> int:
        return len(self.diffs)

    def nbytes(self) -> int:
        return self.keys.nbytes + self.vals.nbytes + self.times.nbytes + self.diffs.nbytes

    def layout(self) -> tuple:
        """What must agree for two column sets to be merged or joined."""
        return (self.kshape, self.vshape, self.product)

    def sort_columns(self) -> list[np.ndarray]:
        """Every column, most significant first: key, value, time."""
        return ([self.keys[:, i] for i in range(self.keys.shape[1])]
                + [self.vals[:, i] for i in range(self.vals.shape[1])]
                + [self.times[:, i] for i in range(self.times.shape[1])])

    def offsets(self) -> np.ndarray:
        """Row index where each distinct key starts, and `len` at the end."""
        return _run_starts([self.keys[:, i] for i in range(self.keys.shape[1])], len(self))

    def _check(self) -> None:
        n = len(self.diffs)
        assert self.keys.shape[0] == self.vals.shape[0] == self.times.shape[0] == n
        assert self.times.shape[1] == (2 if self.product else 1)
        assert self.keys.shape[1] == (1 if self.kshape < 0 else self.kshape)
        assert self.vals.shape[1] == (1 if self.vshape < 0 else self.vshape)
        assert bool(np.all(self.diffs != 0)), "zero diff in columns"
        if n > 1:
            cols = self.sort_columns()
            # Strictly increasing rows: the first differing column goes up.
            decided = np.zeros(n - 1, dtype=bool)
            for c in cols:
                up, down = c[1:] > c[:-1], c[1:] < c[:-1]
                assert not bool(np.any(down & ~decided)), "columns not sorted"
                decided |= up
            assert bool(np.all(decided)), "duplicate (key, val, time) in columns"


# -- encoding ------------------------------------------------------------------

def _encode_col(items: Sequence[Any], n: int) -> tuple[np.ndarray, int] | None:
    types = set(map(type, items))
    try:
        if types == {int}:
            return np.array(items, dtype=np.int64).reshape(n, 1), -1
        if types == {tuple}:
            widths = set(map(len, items))
            if len(widths) != 1:
                return None
            w = widths.pop()
            if w == 0:
                return np.empty((n, 0), dtype=np.int64), 0
            flat = list(chain.from_iterable(items))
            if set(map(type, flat)) != {int}:
                return None
            return np.array(flat, dtype=np.int64).reshape(n, w), w
    except OverflowError:
        return None
    return None


def _encode_times(times: Sequence[Any], n: int) -> tuple[np.ndarray, bool] | None:
    types = set(map(type, times))
    try:
        if types == {int}:
            return np.array(times, dtype=np.int64).reshape(n, 1), False
        if types == {Product}:
            # Few distinct times: check and convert each once, then index.
            distinct = dict.fromkeys(times)
            flat = list(chain.from_iterable(distinct))
            if set(map(type, flat)) != {int}:
                return None
            table = np.array(flat, dtype=np.int64).reshape(len(distinct), 2)
            if len(distinct) == 1:
                return np.repeat(table, n, axis=0), True
            index = {t: i for i, t in enumerate(distinct)}
            return table[np.array(list(map(index.__getitem__, times)), dtype=np.int64)], True
    except OverflowError:
        return None
    return None


#: `_split` transposes up to this many tuples by `zip(*updates)`.
_ZIP_MAX = 4096


def _split(updates: Sequence[Any], width: int) -> list[Sequence] | None:
    """The fields of equal-width tuples as one sequence each, or None if some element is
    not a tuple of that width.  (`zip(*updates)` passes every element as an argument
    of one call: 0.65 s for 600k triples against 0.07 s for these maps.)"""
    if set(map(type, updates)) != {tuple}:
        return None
    if len(updates) <= _ZIP_MAX:
        # Small: one transposing zip, whose strict mode checks the widths (44 us
        # against 68 for 500 triples; 2x slower than the maps at 20k).
        try:
            fields = list(zip(*updates, strict=True))
        except ValueError:
            return None
        return fields if len(fields) == width else None
    if set(map(len, updates)) != {width}:
        return None
    return [list(map(itemgetter(i), updates)) for i in range(width)]


@gc_paused
def encode(updates: Sequence[tuple], sort: bool = True) -> Columns | None:
    """Columns of `((key, val), time, diff)` triples (consolidated), or None when
    they are not all plain (then the caller keeps rows)."""
    n = len(updates)
    if not n:
        return None
    fields = _split(updates, 3)
    if fields is None:
        return None
    kvs, times, diffs = fields
    kv = _split(kvs, 2)
    if kv is None:
        return None
    return _encode_parts(kv[0], kv[1], times, diffs, n, sort)


@gc_paused
def encode_records(updates: Sequence[tuple], sort: bool = True) -> Columns | None:
    """Columns of unkeyed `(data, time, diff)` triples (the data as the key, the
    value `()`), consolidated; None when they are not all plain.  `sort=False`
    keeps them as given, in their order and with their repeats (not a batch: what
    `ddflow.kept_input` keeps to give a failed step's input back as it was)."""
    n = len(updates)
    if not n:
        return None
    fields = _split(updates, 3)
    if fields is None:
        return None
    data, times, diffs = fields
    return _encode_parts(data, None, times, diffs, n, sort)


@gc_paused
def encode_fields(data: Sequence[Any], times: Sequence[Any],
                  diffs: Sequence[Any]) -> Columns | None:
    """Record columns (`encode_records`' layout) of the fields of `(data, time, diff)`
    triples given apart, in their order and with their repeats (not consolidated);
    None when they are not all plain.  What an operator that computes its data on
    its own (a map) passes on without building the triples."""
    n = len(data)
    if not n:
        return None
    return _encode_parts(data, None, times, diffs, n, False)


def _encode_parts(keys: Sequence[Any], vals: Sequence[Any] | None, times: Sequence[Any],
                  diffs: Sequence[Any], n: int, sort: bool) -> Columns | None:
    if set(map(type, diffs)) != {int}:
        return None
    k = _encode_col(keys, n)
    if k is None:
        return None
    v = (np.empty((n, 0), dtype=np.int64), 0) if vals is None else _encode_col(vals, n)
    t = _encode_times(times, n) if v is not None else None
    if t is None:
        return None
    try:
        d = np.array(diffs, dtype=np.int64)
    except OverflowError:
        return None
    if abs_max(d) >= DIFF_LIMIT // max(n, 1):
        return None
    cols = Columns(k[0], v[0], t[0], d, k[1], v[1], t[1])
    return consolidate(cols) if sort else cols


def encode_frontier(elements: Sequence[Any], product: bool) -> np.ndarray | None:
    """A frontier's elements as rows of the time columns, or None if not plain."""
    if not elements:
        return np.empty((0, 2 if product else 1), dtype=np.int64)
    t = _encode_times(list(elements), len(elements))
    if t is None or t[1] != product:
        return None
    return t[0]


# -- kernels ---------------------------------------------------------------------

def _run_starts(cols: list[np.ndarray], n: int) -> np.ndarray:
    """Indices where a run of equal rows (over `cols`) starts, then `n`."""
    if n == 0:
        return np.zeros(1, dtype=np.int64)
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for c in cols:
        new[1:] |= c[1:] != c[:-1]
    return np.append(np.flatnonzero(new), n)


def _take(c: Columns, idx: np.ndarray, diffs: np.ndarray) -> Columns:
    return Columns(c.keys[idx], c.vals[idx], _constant_or_taken(c.times, idx),
                   _constant_or_taken(diffs, None), c.kshape, c.vshape, c.product)


def _constant_or_taken(a: np.ndarray, idx: np.ndarray | None) -> np.ndarray:
    """`a[idx]` (`a` if None), or, when every row of `a` is its first, that row
    broadcast (a read-only view holding one row): a load's one time and diffs of 1
    are 16-24 bytes an update of a trace held for as long as it lives (the columns
    are never written in place)."""
    n = len(a) if idx is None else len(idx)
    if n > 1 and bool((a == a[0]).all()):
        return np.broadcast_to(a[:1].copy(), (n, *a.shape[1:]))
    return a if idx is None else a[idx]


def consolidate(c: Columns) -> Columns:
    """Sort by (key, val, time), sum the diffs of equal rows, drop zeros."""
    n = len(c)
    cols = c.sort_columns()
    order, codes = _sort_order(cols, n)
    if codes is not None:
        # Runs of equal rows are runs of equal composite codes: one column to compare,
        # and the columns are gathered once, for the rows kept (at 600k rows the
        # permuted copies of every column were 14 MB of a 51 MB peak).
        starts = _run_starts([codes], n)[:-1]
    else:
        starts = _run_starts([x[order] for x in cols], n)[:-1]
    diffs = np.add.reduceat(c.diffs[order], starts) if n else c.diffs
    keep = diffs != 0
    idx = order[starts[keep]]
    return _take(c, idx, diffs[keep])


def _sort_order(cols: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The permutation sorting the rows lexicographically by `cols`, and the rows'
    composite codes in that order: one sort of a composite int64 key when the
    columns' ranges multiply below 2^62 (the usual case), else `lexsort` (one sort
    pass per column) and no codes."""
    if not cols or n < 2:
        return np.arange(n), None
    composite = np.zeros(n, dtype=np.int64)
    span = 1
    for c in cols:
        lo, hi = int(c.min()), int(c.max())
        width = hi - lo + 1
        span *= width
        if span >= 1 << 62:
            return np.lexsort(cols[::-1]), None
        composite *= width
        composite += c - lo
    order = np.argsort(composite)     # equal keys are equal rows: no need for stability
    return order, composite[order]


def advance(times: np.ndarray, frontier: np.ndarray) -> np.ndarray:
    """Each time advanced by the frontier (`lattice.advance_by`): the meet over its
    elements `f` of `join(t, f)`; ints and `Product`s of ints are component-wise."""
    if len(frontier) == 0:
        return times
    out = np.maximum(times, frontier[0])
    for f in frontier[1:]:
        out = np.minimum(out, np.maximum(times, f))
    return out


def in_advance_of(times: np.ndarray, frontier: np.ndarray) -> np.ndarray:
    """Per row: whether the time is in advance of (>=) some frontier element."""
    out = np.zeros(len(times), dtype=bool)
    for f in frontier:
        out |= np.all(times >= f, axis=1)
    return out


def abs_max(diffs: np.ndarray) -> int:
    """The largest |diff|, as a Python int (`np.abs` of -2**63 stays negative)."""
    return max(-int(diffs.min()), int(diffs.max())) if len(diffs) else 0


def merge(parts: Sequence[Columns], frontier: np.ndarray | None) -> Columns | None:
    """The consolidated sum of `parts` (one layout), times advanced by `frontier`;
    None when a sum could leave int64 (each part was bounded alone, not their sum):
    the caller merges rows, in Python ints."""
    if sum(abs_max(p.diffs) * len(p) for p in parts) >= DIFF_LIMIT:
        return None
    first = parts[0]
    times = np.concatenate([p.times for p in parts])
    if frontier is not None:
        times = advance(times, frontier)
    return consolidate(Columns(np.concatenate([p.keys for p in parts]),
                               np.concatenate([p.vals for p in parts]), times,
                               np.concatenate([p.diffs for p in parts]),
                               first.kshape, first.vshape, first.product))


# -- decoding ------------------------------------------------------------------

def decode_col(a: np.ndarray, shape: int) -> list:
    if shape < 0:
        return a[:, 0].tolist()
    if shape == 0:
        return [()] * len(a)
    return list(map(tuple, a.tolist()))


def decode_values(c: Columns, rows: np.ndarray) -> list:
    """The values of the given rows, as Python values."""
    return decode_col(c.vals[rows], c.vshape)


def decode_times(c: Columns) -> list:
    return times_list(c.times, c.product)


def times_list(times: np.ndarray, product: bool) -> list:
    if not product:
        return times[:, 0].tolist()
    if len(times) < 16:
        return [Product(o, i) for o, i in times.tolist()]
    # Few distinct times: build each `Product` once, indexed by a one-column code.
    uniq, inv = distinct_rows(times)
    objs = [Product(o, i) for o, i in uniq.tolist()]
    return list(map(objs.__getitem__, inv.tolist()))


def distinct_rows(times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of an n x 2 time array and each row's index among them.
    Profiled (reachability load, 200k nodes): `np.unique(axis=0)` spent 4 s of 48
    sorting rows as records; a composite int code over the (small) ranges of the two
    components takes a table lookup, or one 1-D sort when the ranges are large."""
    n = len(times)
    if n == 0:
        return times[:0], np.zeros(0, dtype=np.int64)
    # Bounds in Python ints: a width in int64 wraps for components 2^63 apart (a
    # review: outer times 0 and 2^63 - 1 crashed the decode).
    lo = [int(v) for v in times.min(axis=0)]
    width = [int(h) - l + 1 for h, l in zip(times.max(axis=0), lo)]
    span = width[0] * width[1]
    if span >= 1 << 62:
        uniq, inv = np.unique(times, axis=0, return_inverse=True)
        return uniq, inv.reshape(-1)
    code = (times[:, 0] - lo[0]) * width[1] + (times[:, 1] - lo[1])
    if span <= 4 * n + 1024:
        seen = np.zeros(span, dtype=bool)
        seen[code] = True
        present = np.flatnonzero(seen)
        rank = np.cumsum(seen) - 1
        inv = rank[code]
    else:
        present, inv = np.unique(code, return_inverse=True)
        inv = inv.reshape(-1)
    uniq = np.stack([present // width[1] + lo[0], present % width[1] + lo[1]], axis=1)
    return uniq, inv


@gc_paused
def decode(c: Columns) -> dict:
    """The row layout: `key -> ((val, time, diff), ...)`, keys in sorted order."""
    n = len(c)
    if not n:
        return {}
    entries = list(zip(decode_col(c.vals, c.vshape), decode_times(c), c.diffs.tolist()))
    starts = c.offsets()
    keys = decode_col(c.keys[starts[:-1]], c.kshape)
    bounds = starts.tolist()
    return dict(zip(keys, [tuple(entries[a:b]) for a, b in zip(bounds, bounds[1:])]))


@gc_paused
def updates(c: Columns) -> list[tuple]:
    """The batch as `((key, val), time, diff)` triples, in column order."""
    return list(zip(zip(decode_col(c.keys, c.kshape), decode_col(c.vals, c.vshape)),
                    decode_times(c), c.diffs.tolist()))


def entered(c: Columns) -> Columns:
    """The columns with every int time `t` read as `Product(t, 0)` (a trace of the
    enclosing scope read inside a loop)."""
    if c.product:
        raise ValueError("entering columns whose times are already Products")
    times = np.zeros((len(c), 2), dtype=np.int64)
    times[:, 0] = c.times[:, 0]
    return Columns(c.keys, c.vals, times, c.diffs, c.kshape, c.vshape, True)


@gc_paused
def consolidate_records(updates: list) -> list | None:
    """`(data, time, diff)` triples consolidated by the columnar kernels (sorted by
    data, then time), or None when they are not plain.  When nothing combines or
    cancels, `updates` itself: no dict of every `(data, time)`, no second list of
    tuples (profiled: 600k edges with Product times consolidated in 0.66 s against
    1.8 s by dict; for int times even, and no copy held at the peak)."""
    c = encode_records(updates)
    if c is None:
        return None
    return updates if len(c) == len(updates) else records(c)


@gc_paused
def records(c: Columns) -> list[tuple]:
    """Unkeyed columns (`encode_records`) back to `(data, time, diff)` triples."""
    return list(iter_records(c))


def iter_records(c: Columns) -> Iterator[tuple]:
    """`records(c)` one at a time: for a caller that makes rows of its own of them,
    so that the triples are not all held besides (72 bytes a record)."""
    return zip(decode_col(c.keys, c.kshape), decode_times(c), c.diffs.tolist())


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def key_entries(c: Columns, key: Any) -> tuple | None:
    """One key's `(val, time, diff)` entries (`()` if it has none) by binary search
    in the sorted key columns, decoding only its rows; None when `key` is not of the
    columns' plain layout (a float or bool can equal an int key: the caller reads
    the decoded rows, where Python's equality decides)."""
    kshape = c.kshape
    if kshape < 0:
        parts: tuple = (key,)
        if type(key) is not int:
            return None
    elif type(key) is not tuple or len(key) != kshape or not all(type(x) is int for x in key):
        return None
    else:
        parts = key
    lo, hi = 0, len(c)
    keys = c.keys
    for i, x in enumerate(parts):
        if not _INT64_MIN <= x <= _INT64_MAX:
            return ()
        col = keys[lo:hi, i]
        a = int(col.searchsorted(x, "left"))
        b = int(col.searchsorted(x, "right"))
        lo, hi = lo + a, lo + b
        if lo == hi:
            return ()
    return tuple(zip(decode_col(c.vals[lo:hi], c.vshape), times_list(c.times[lo:hi], c.product),
                     c.diffs[lo:hi].tolist()))


def encode_keys(keys: Sequence[Any]) -> tuple[np.ndarray, int] | None:
    """Keys as a key column set (`Columns.keys`, `kshape`), None if not plain."""
    return _encode_col(keys, len(keys)) if keys else None


def encode_times(times: Sequence[Any]) -> tuple[np.ndarray, bool] | None:
    """Times as time columns (`Columns.times`, `product`), None if not plain."""
    return _encode_times(times, len(times)) if times else None


__all__ = ["Columns", "encode", "encode_records", "encode_fields", "records", "iter_records",
           "entered",
           "encode_frontier", "encode_keys", "encode_times", "consolidate", "advance",
           "in_advance_of", "merge", "decode", "updates", "decode_values", "decode_col", "times_list",
           "abs_max", "gc_paused", "DIFF_LIMIT", "key_entries", "consolidate_records", "columnar",
           "columnar_min", "set_columnar_min", "wants_columns", "wants_column_build",
           "wants_column_batch", "BATCH_DIVISOR", "wants_column_join",
           "COLUMNAR_MIN", "BUILD_FACTOR", "distinct_rows"]
