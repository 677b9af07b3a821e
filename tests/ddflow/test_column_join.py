"""`ddflow.column_join`'s key reads against a brute-force scan of the columns.

`key_rows` answers each query key with the stored rows of that key, grouped by
query in the order asked; from 256 queries into as many rows it binary-searches
in sorted query order and scatters the answers back (a review found that branch
never reached by a test, and a scatter that lost the query order undetected).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from ddflow import column_join, columnar


@pytest.mark.parametrize("n_rows, n_queries, pair", [(50, 40, False), (600, 300, False),
                                                     (9_000, 6_000, False),
                                                     (6_000, 5_000, True)])
def test_key_rows_are_every_row_of_each_key_in_query_order(n_rows, n_queries, pair):
    rng = random.Random(n_rows + n_queries)
    span = n_rows // 2

    def key():
        return (rng.randrange(span), rng.randrange(3)) if pair else rng.randrange(span)
    c = columnar.encode([((key(), rng.randrange(4)), rng.randrange(3), 1)
                         for _ in range(n_rows)])
    queries = [key() for _ in range(n_queries)]
    karr, _shape = columnar.encode_keys(queries)
    counts, rows = column_join.key_rows(c, karr)
    stored = [tuple(k) for k in c.keys.tolist()]
    want_counts, want_rows = [], []
    by_key: dict = {}
    for i, k in enumerate(stored):
        by_key.setdefault(k, []).append(i)
    for q in queries:
        hit = by_key.get(tuple(q) if pair else (q,), [])
        want_counts.append(len(hit))
        want_rows.extend(hit)
    assert counts.tolist() == want_counts
    assert rows.tolist() == want_rows
    assert len(c) >= 256 or n_rows == 50          # the larger cases take the sorted branch
    sums = column_join.group_sums(c.diffs[rows], counts)
    assert sums.tolist() == [sum(int(c.diffs[i]) for i in by_key.get(tuple(q) if pair else (q,), []))
                             for q in queries]
