"""The columnar layout (`ddflow.columnar`) against the row layout: same batches, same
merges (with compaction), same joins; plain data only, everything else in rows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from ddflow import columnar
from ddflow.batch import Batch, merge_batches
from ddflow.errors import BatchError
from ddflow.updates import consolidate
from lattice import Antichain, Product, advance_by, join

INT_TIMES = st.integers(0, 6)
PRODUCT_TIMES = st.builds(Product, st.integers(0, 3), st.integers(0, 3))
KEYS = st.one_of(st.integers(-3, 3).map(lambda k: ("i", k)),
                 st.tuples(st.integers(0, 2), st.integers(-2, 2)).map(lambda k: ("t", k)))


def _plain_updates(times, key_tuple: bool, val_width: int):
    key = st.tuples(st.integers(0, 2), st.integers(-2, 2)) if key_tuple else st.integers(-3, 3)
    val = (st.integers(-2, 2) if val_width < 0 else
           st.tuples(*[st.integers(-2, 2)] * val_width))
    return st.lists(st.tuples(st.tuples(key, val), times, st.integers(-3, 3)), max_size=40)


LAYOUTS = st.tuples(st.sampled_from([INT_TIMES, PRODUCT_TIMES]), st.booleans(),
                    st.sampled_from([-1, 0, 2]))


def _rows(batch: Batch) -> list:
    return consolidate(batch.update_list())


@given(data=st.data(), layout=LAYOUTS)
def test_encode_decode_round_trip(data, layout):
    ups = data.draw(_plain_updates(*layout))
    cols = columnar.encode(ups)
    if not consolidate(ups):
        assert cols is None or len(cols) == 0
        return
    assert cols is not None
    cols._check()
    assert consolidate(columnar.updates(cols)) == consolidate(ups)
    decoded = columnar.decode(cols)
    assert consolidate([((k, v), t, r) for k, es in decoded.items() for v, t, r in es]) \
        == consolidate(ups)


def _frontier(data, product: bool) -> Antichain:
    if product:
        return Antichain(data.draw(st.lists(PRODUCT_TIMES, min_size=1, max_size=3)))
    return Antichain([data.draw(INT_TIMES)])


@given(data=st.data(), layout=LAYOUTS, cuts=st.lists(st.integers(0, 40), max_size=3))
def test_batches_and_merges_agree_with_rows(data, layout, cuts):
    """Split into consecutive batches, merge with a compaction frontier: the columnar
    batch equals the row batch (after consolidation), and `_check()` holds."""
    times, key_tuple, vw = layout
    product = times is PRODUCT_TIMES
    ups = data.draw(_plain_updates(times, key_tuple, vw))
    bounds = sorted({0, len(ups), *[min(c, len(ups)) for c in cuts]})
    chunks = [ups[a:b] for a, b in zip(bounds, bounds[1:])] or [[]]
    since = _frontier(data, product)
    results = {}
    for name, threshold in (("rows", None), ("columns", 0)):
        with columnar.columnar(threshold):
            lo = Antichain([Product(0, 0) if product else 0])
            batches = [Batch.from_updates(c, lo, Antichain()) for c in chunks]
            merged = merge_batches(batches, since)
            for b in (*batches, merged):
                b._check()
            results[name] = ([_rows(b) for b in batches], _rows(merged))
            if name == "columns" and merged.len:
                assert merged.cols is not None
    assert results["rows"] == results["columns"]
    expect = consolidate([(d, advance_by(t, since), r) for d, t, r in ups])
    assert results["columns"][1] == expect


@given(data=st.data(), product=st.booleans(), key_tuple=st.booleans())
def test_join_pairs_is_the_bilinear_join(data, product, key_tuple):
    times = PRODUCT_TIMES if product else INT_TIMES
    left = data.draw(_plain_updates(times, key_tuple, -1))
    right = data.draw(_plain_updates(times, key_tuple, -1))
    lc, rc = columnar.encode(left), columnar.encode(right)
    if lc is None or rc is None:
        return
    li, ri, t, d = columnar.join_pairs(lc, rc)
    lu, ru = columnar.updates(lc), columnar.updates(rc)
    tt = [Product(*x) for x in t.tolist()] if product else t[:, 0].tolist()
    got = consolidate([((lu[i][0][0], (lu[i][0][1], ru[j][0][1])), u, r)
                       for i, j, u, r in zip(li.tolist(), ri.tolist(), tt, d.tolist())])
    want = consolidate([((ka, (a, b)), join(ta, tb), ra * rb)
                        for (ka, a), ta, ra in lu for (kb, b), tb, rb in ru if ka == kb])
    assert got == want


def test_not_plain_stays_in_rows():
    with columnar.columnar(0):
        lo, up = Antichain([0]), Antichain()
        for ups in ([(("a", 1), 0, 1)], [((1, 1.5), 0, 1)], [((True, 1), 0, 1)],
                    [((1, 2), 0, 1 << 70)], [((1, (2, 3)), 0, 1), ((1, (2,)), 0, 1)]):
            b = Batch.from_updates(ups, lo, up)
            assert b.cols is None and b.len == 1 + (len(ups) == 2)
            b._check()


def test_columnar_batch_refuses_times_outside_its_description():
    """The vectorized bounds check defers to the row path, which names the record."""
    with columnar.columnar(0):
        with pytest.raises(BatchError, match="upper") as err:
            Batch.from_updates([((1, 2), 1, 1), ((3, 4), 9, 1)], Antichain([0]),
                               Antichain([5]))
        assert err.value.record == (3, 4) and err.value.time == 9
        with pytest.raises(BatchError, match="lower"):
            Batch.from_updates([((1, 2), Product(0, 1), 1)], Antichain([Product(1, 0)]),
                               Antichain())


def test_columnar_check_catches_a_broken_layout():
    with columnar.columnar(0):
        b = Batch.from_updates([((1, 2), 0, 1), ((1, 3), 0, 1)], Antichain([0]), Antichain())
    b._check()
    b.cols.diffs[0] = 0
    with pytest.raises(AssertionError, match="zero diff"):
        b._check()
    b.cols.diffs[0] = 1
    b.cols.vals[:, 0] = np.array([3, 2])
    with pytest.raises(AssertionError, match="not sorted"):
        b._check()
