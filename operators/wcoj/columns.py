"""The half joins' index reads over columns: many prefixes at one int time at once.

What this isolates: for a batch of prefix keys, the entries an index holds for each
key, read from the index's columnar batches (`ddflow.columnar.Columns`) by one binary
search per key and batch (`ddflow.column_join.key_rows`), and the three reductions
the half joins of `operators.wcoj.delta` make of them: per key the sum of |diff|
(`count`), the entries at
or before the bound (`propose`), the sum of their diffs (`validate`).  A half join
at int times reads entries `s <= bound` (`bound` is `t` for an atom read "neu",
`t - 1` for "alt"), so the comparison is one column against a number.

It leaves out partially ordered times (their half joins compare sort keys and
carry a `lub` per prefix: `HalfJoin._partial`, in rows), building the output
records (the operators do: they know their record formats), and which batches are
read: `Reads.of` takes every batch of the index as columns, the row batches
encoded when few (`Trace.column_batches`), or gives None and the operator reads
key by key.  Law: the same entries, sums and flags as the row reads, which
`tests/operators/test_wcoj_columns.py` checks against them on random indices and
`tests/operators/test_agree_wcoj.py` through whole queries in both paths.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ddflow import columnar
from ddflow.column_join import group_sums, key_rows
from ddflow.columnar import DIFF_LIMIT, Columns, abs_max, decode_col

#: `Reads.of` encodes the index's row batches when they hold at most this many
#: updates per prefix (as `operators.join` does for a delta: beyond, the row
#: path's lookups cost less than encoding).
ENCODE_ROWS_PER_PREFIX = 4


class Reads:
    """The entries of an index for `n` prefix keys: per columnar batch `c`, how many
    rows each key has (`counts`, in key order) and those rows (`rows`, grouped by
    key), over every batch of the index."""

    __slots__ = ("n", "parts")

    def __init__(self, n: int, parts: list[tuple[Columns, np.ndarray, np.ndarray]]) -> None:
        self.n, self.parts = n, parts

    @classmethod
    def of(cls, trace: Any, keys: Sequence[Any]) -> Reads | None:
        """The reads of `keys` in `trace` (a `Trace`, or anything offering
        `column_batches`), or None when the keys or some batch are not plain, the
        layouts differ, times are not ints, or sums could leave int64: the caller
        then reads key by key."""
        batches = getattr(trace, "column_batches", None)
        if batches is None:
            return None
        cols = batches(ENCODE_ROWS_PER_PREFIX * len(keys))
        if cols is None:
            return None
        enc = columnar.encode_keys(keys)
        if enc is None:
            return None
        q, kshape = enc
        if any(c.kshape != kshape or c.product for c in cols):
            return None
        # Per-key sums add every batch's diffs in int64 (|sum| of them all bounded).
        if sum(abs_max(c.diffs) * len(c) for c in cols) >= DIFF_LIMIT:
            return None
        return cls(len(keys), [(c, *key_rows(c, q)) for c in cols])

    def work(self) -> int:
        """Index entries read (the half joins' `work` counter)."""
        return sum(int(counts.sum()) for _c, counts, _rows in self.parts)

    def count(self) -> list[int]:
        """Per key: the sum of |diff| of every entry, whatever its time (the cost
        estimate of `Count`)."""
        total = np.zeros(self.n, dtype=np.int64)
        for c, counts, rows in self.parts:
            total += group_sums(np.abs(c.diffs[rows]), counts)
        return total.tolist()

    def weights(self, bound: int) -> list[int]:
        """Per key: the sum of the diffs of its entries at or before `bound`."""
        w = np.zeros(self.n, dtype=np.int64)
        for c, counts, rows in self.parts:
            w += group_sums(np.where(c.times[rows, 0] <= bound, c.diffs[rows], 0), counts)
        return w.tolist()

    def entries(self, bound: int) -> tuple[list[int], list, list[int], bool]:
        """Every entry at or before `bound`: `(key index, value, diff)` as three
        lists, grouped by batch; and whether no `(key index, value)` repeats among
        them (known only for an index of one batch, where a key's entries of one
        value are adjacent rows; else False)."""
        idx: list = []
        vals: list = []
        diffs: list = []
        distinct = len(self.parts) <= 1
        for c, counts, rows in self.parts:
            li = np.repeat(np.arange(self.n), counts)
            keep = c.times[rows, 0] <= bound
            if not keep.all():
                li, rows = li[keep], rows[keep]
            v = c.vals[rows]
            if len(rows) > 1:
                same = (li[1:] == li[:-1]) & np.all(v[1:] == v[:-1], axis=1)
                distinct = distinct and not bool(same.any())
            idx.extend(li.tolist())
            vals.extend(decode_col(v, c.vshape))
            diffs.extend(c.diffs[rows].tolist())
        return idx, vals, diffs, distinct


__all__ = ["Reads", "ENCODE_ROWS_PER_PREFIX"]
