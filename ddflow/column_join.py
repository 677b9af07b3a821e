"""Keyed reads over sorted numpy columns: the sort-merge join and per-key sums.

`join_pairs` pairs every left row with the right rows of its key (a binary search
of each left key among the right side's sorted codes): output times are the
lattice joins, diffs multiply.  `join_updates` decodes those pairs to `join` /
`semijoin` output triples; `join_columns` leaves them in columns and
`join_records` consolidates many such parts and decodes once.  `key_rows` and
`group_sums` serve readers that sum per key straight from a batch's columns (the
count and distinct corrections of `operators.reduce_chain`).

It leaves the layout, its encoding and merging to `ddflow.columnar`, and when
columns are used to `ddflow.batch` and the operators.  Law: the bilinear join,
`join(A, B)[(k, (a, b)), t1 v t2] += A[(k, a), t1] * B[(k, b), t2]`, checked
against the row join in `tests/ddflow/test_columnar.py`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ddflow.columnar import (DIFF_LIMIT, Columns, abs_max, decode_col, gc_paused, merge,
                             times_list)


@gc_paused
def join_updates(delta: Columns, other: Columns, flipped: bool, sign: int,
                 kind: str) -> tuple[list, int]:
    """The `join` / `semijoin` outputs of delta rows against another side's columns:
    `((k, (a, b)), t, r)` or `((k, a), t, r)`, where `a` is the left value (the
    delta's unless `flipped`), `t` the lattice join, `r` the product of the diffs
    times `sign`; and the number of pairs (the other side's rows read)."""
    li, ri, times, diffs = join_pairs(delta, other)
    n = len(li)
    if not n:
        return [], 0
    keys = decode_col(delta.keys[li], delta.kshape)
    left, right = (other, ri) if flipped else (delta, li)
    a = decode_col(left.vals[right], left.vshape)
    t = times_list(times, delta.product)
    r = (diffs * sign).tolist() if sign != 1 else diffs.tolist()
    if kind == "semijoin":
        return list(zip(zip(keys, a), t, r)), n
    (rc, rix) = (delta, li) if flipped else (other, ri)
    b = decode_col(rc.vals[rix], rc.vshape)
    return list(zip(zip(keys, zip(a, b)), t, r)), n


def _width(shape: int) -> int:
    return 1 if shape < 0 else shape


def join_columns(delta: Columns, other: Columns, flipped: bool, sign: int,
                 kind: str) -> tuple[Columns | None, int] | None:
    """`join_updates` left in columns, for `join_records` to consolidate and decode
    once: the keys, the left value's columns then (for a `join`) the right value's
    side by side as the values, the lattice joins of the times, the products of the
    diffs times `sign`; and the number of pairs.  None when a product could leave
    int64 (the caller goes by `join_updates`, in Python ints)."""
    li, ri, times, diffs = join_pairs(delta, other)
    n = len(li)
    if not n:
        return None, 0
    if diffs.dtype == object:
        return None
    (a, ar), (b, br) = ((other, ri), (delta, li)) if flipped else ((delta, li), (other, ri))
    vals = a.vals[ar] if kind == "semijoin" else np.concatenate([a.vals[ar], b.vals[br]],
                                                                 axis=1)
    return Columns(delta.keys[li], vals, times, diffs * sign if sign != 1 else diffs,
                   delta.kshape, vals.shape[1], delta.product), n


@gc_paused
def join_records(parts: Sequence[Columns], lshape: int, rshape: int,
                 kind: str) -> list | None:
    """The consolidated sum of `join_columns` parts as `((k, (a, b)), t, r)` triples
    (`((k, a), t, r)` for a `semijoin`), `a` decoded by `lshape` and `b` by
    `rshape`; None when a sum could leave int64."""
    c = merge(parts, None)
    if c is None:
        return None
    if not len(c):
        return []
    keys = decode_col(c.keys, c.kshape)
    lw = _width(lshape)
    a = decode_col(c.vals[:, :lw], lshape)
    t = times_list(c.times, c.product)
    r = c.diffs.tolist()
    if kind == "semijoin":
        return list(zip(zip(keys, a), t, r))
    b = decode_col(c.vals[:, lw:], rshape)
    return list(zip(zip(keys, zip(a, b)), t, r))


@gc_paused
def semijoin_columns(parts: Sequence[Columns], lshape: int) -> Columns | None:
    """`join_records` of a `semijoin` as record columns of `(k, a)` pairs of ints
    (`ddflow.columnar`'s layout between operators), when keys and values are ints;
    None otherwise (or when a sum could leave int64)."""
    if lshape != -1 or any(p.kshape != -1 for p in parts):
        return None
    c = merge(parts, None)
    if c is None:
        return None
    return Columns(np.concatenate([c.keys, c.vals[:, :1]], axis=1),
                   np.empty((len(c), 0), dtype=np.int64), c.times, c.diffs, 2, 0, c.product)


def join_pairs(left: Columns, right: Columns) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                       np.ndarray]:
    """Every pair of a left row and a right row with equal keys: `(li, ri, times,
    diffs)`, the row indices into each side, the lattice join of the two times and
    the product of the diffs (a binary search of each left key among the right
    side's, which must be sorted by key; the left rows may come in any order)."""
    lk, rk = _key_codes(left.keys, right.keys)
    counts, ri = _gather(rk, lk)
    li = np.repeat(np.arange(len(lk)), counts)
    times = np.maximum(left.times[li], right.times[ri])
    if abs_max(left.diffs) * abs_max(right.diffs) >= DIFF_LIMIT:
        # A product could leave int64 (numpy would wrap it silently): Python ints.
        diffs = left.diffs[li].astype(object) * right.diffs[ri].astype(object)
    else:
        diffs = left.diffs[li] * right.diffs[ri]
    return li, ri, times, diffs


#: `_gather` sorts its queries first from this many (and as many sorted codes).
#: Measured (one box, loaded): 500 random queries into 40k codes, 323 us in query
#: order against 117 sorted; 300 into 2k, 69 against 46; 64 into 1k, 4 against 31
#: (the sort's fixed cost).  A stream's epoch asks a few hundred keys of each batch.
_SORT_QUERIES_MIN = 256


def _gather(sorted_codes: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each query code, the rows of `sorted_codes` equal to it: `(counts, rows)`,
    how many rows each query has and every such row index, grouped by query in
    query order (query `i`'s rows are `lo_i, lo_i + 1, ..., hi_i - 1`)."""
    if len(queries) >= _SORT_QUERIES_MIN and len(sorted_codes) >= _SORT_QUERIES_MIN:
        # Binary searches in query order jump about the sorted side (cache misses,
        # mispredicted branches); in sorted order they walk it.  Measured: 27k
        # random queries into 20k codes, both sides 7.0 ms in query order, 2.9 sorted
        # then scattered back.
        order = np.argsort(queries)
        q = queries[order]
        lo = np.empty(len(queries), dtype=np.int64)
        hi = np.empty(len(queries), dtype=np.int64)
        lo[order] = np.searchsorted(sorted_codes, q, side="left")
        hi[order] = np.searchsorted(sorted_codes, q, side="right")
    else:
        lo = np.searchsorted(sorted_codes, queries, side="left")
        hi = np.searchsorted(sorted_codes, queries, side="right")
    counts = hi - lo
    starts = np.cumsum(counts) - counts
    rows = np.arange(int(counts.sum())) - np.repeat(starts - lo, counts)
    return counts, rows


def key_rows(c: Columns, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stored rows of each of `keys` (an array in the layout of `c.keys`, as
    `encode_keys` gives): `(counts, rows)` as `_gather` (a binary search per key:
    the cost follows the keys asked and the rows they hold, not the batch)."""
    ck, qk = _key_codes(c.keys, keys)
    return _gather(ck, qk)


def group_sums(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per group of consecutive `values` (group `i` holds `counts[i]` of them), their
    sum; zero for an empty group."""
    out = np.zeros(len(counts), dtype=values.dtype)
    full = counts > 0
    if len(values):
        out[full] = np.add.reduceat(values, (np.cumsum(counts) - counts)[full])
    return out


def _key_codes(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One int per key row of each key column set, the same for equal keys on both
    sides and ordered as the keys are (lexicographically), so a side sorted by key
    stays sorted by code."""
    if left.shape[1] == 1:
        return left[:, 0], right[:, 0]
    both = np.concatenate([left, right])
    if left.shape[1] == 0 or len(both) == 0:
        return np.zeros(len(left), dtype=np.int64), np.zeros(len(right), dtype=np.int64)
    lo, hi = both.min(axis=0), both.max(axis=0)
    span = 1
    for a, b in zip(lo.tolist(), hi.tolist()):
        span *= b - a + 1
    if span < 1 << 62:
        # A composite code over the columns' ranges (one pass, no sort).
        codes = np.zeros(len(both), dtype=np.int64)
        for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
            codes = codes * (b - a + 1) + (both[:, i] - a)
    else:
        _u, codes = np.unique(both, axis=0, return_inverse=True)
        codes = codes.reshape(-1)
    return codes[:len(left)], codes[len(left):]


__all__ = ["join_pairs", "join_updates", "join_columns", "join_records", "key_rows",
           "group_sums"]
