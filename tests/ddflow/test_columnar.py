"""The columnar layout (`ddflow.columnar`) against the row layout: same batches, same
merges (with compaction), same joins; plain data only, everything else in rows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ddflow
from ddflow import column_join, columnar
from ddflow.batch import Batch, merge_batches
from ddflow.errors import BatchError
from ddflow.updates import consolidate
from lattice import Antichain, Product, advance_by, join
from ddflow.testing.updates import keyed_updates
from tests.strategies import SCHEDULES, assert_law

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
    li, ri, t, d = column_join.join_pairs(lc, rc)
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
        # Diffs that differ: a constant column is a read-only broadcast row
        # (`columnar._constant_or_taken`), which this test could not break.
        b = Batch.from_updates([((1, 2), 0, 1), ((1, 3), 0, 2)], Antichain([0]), Antichain())
    b._check()
    b.cols.diffs[0] = 0
    with pytest.raises(AssertionError, match="zero diff"):
        b._check()
    b.cols.diffs[0] = 1
    b.cols.vals[:, 0] = np.array([3, 2])
    with pytest.raises(AssertionError, match="not sorted"):
        b._check()


# -- diffs past int64: the columns decline, the answers stay exact (a review found
# the join's product and a merge's sum wrapping silently in numpy) -------------------

def _both(run):
    """`run()` in rows and in columns from the first update; the two answers."""
    old = columnar.set_columnar_min(None)
    try:
        rows = run()
        columnar.set_columnar_min(0)
        return rows, run()
    finally:
        columnar.set_columnar_min(old)


def test_a_join_whose_diff_products_leave_int64_stays_exact():
    def run():
        df = ddflow.Dataflow()
        a_in, a = df.new_collection("a")
        b_in, b = df.new_collection("b")
        out = a.join(b).capture()
        a_in.update((1, 10), 2**32)
        b_in.update((1, 20), 2**32)
        a_in.advance_to(1); b_in.advance_to(1); df.run()
        a_in.update((1, 11), 2**32)         # a delta against b's stored columns
        a_in.advance_to(2); b_in.advance_to(2); df.run()
        return sorted(out.updates, key=repr)
    rows, cols = _both(run)
    assert rows == cols == [((1, (10, 20)), 0, 2**64), ((1, (11, 20)), 1, 2**64)]


@pytest.mark.parametrize("diffs, total", [([2**61] * 4, 2**63), ([-2**63, -1], -2**63 - 1)])
def test_merged_sums_that_leave_int64_stay_exact(diffs, total):
    def run():
        df = ddflow.Dataflow()
        a_in, a = df.new_collection("a")
        cap = a.count().capture()
        for e, d in enumerate(diffs):
            a_in.update(7, d)
            a_in.advance_to(e + 1); df.run()
        return cap.at(len(diffs) - 1)
    rows, cols = _both(run)
    assert rows == cols == {(7, total): 1}


def test_why_after_the_inputs_close_reads_the_columnar_history():
    def run():
        df = ddflow.Dataflow()
        e_in, e = df.new_collection("e")
        out = ddflow.datalog("p(x, y) :- e(x, y).", e=e)
        e_in.insert_many([(i, i + 1) for i in range(50)])
        e_in.advance_to(1); df.run()
        e_in.insert_many([(i, i + 2) for i in range(101)])
        e_in.close(); df.run()
        return str(out.why("p(7, 9)"))
    rows, cols = _both(run)
    assert rows == cols and "e(7, 9)" in cols


@given(data=st.data(), layout=LAYOUTS)
def test_key_reads_from_columns_agree_with_decoded_rows(data, layout):
    """`Batch.get` of a columnar batch (binary search in its columns, nothing decoded)
    gives each key's entries as the decoded rows do, for stored and absent keys."""
    ups = data.draw(_plain_updates(*layout))
    cols = columnar.encode(ups)
    if cols is None or not len(cols):
        return
    decoded = columnar.decode(cols)
    probes = list(decoded) + ([5, -9, 2**70] if cols.kshape < 0 else [(9, 9), (0, -9)])
    for key in probes:
        got = columnar.key_entries(cols, key)
        assert got is not None
        assert sorted(got, key=repr) == sorted(decoded.get(key, ()), key=repr)
    # Keys equal to an int key without being ints go the decoded way (dict equality).
    assert columnar.key_entries(cols, 1.0) is None and columnar.key_entries(cols, True) is None


def test_batch_get_serves_columns_then_decodes_once_read_widely():
    from ddflow import batch as batch_module
    ups = [((k, ()), 0, 1) for k in range(64)]
    with columnar.columnar(0):
        b = Batch.from_updates(ups, Antichain([0]), Antichain([1]))
        small = Batch.from_updates(ups, Antichain([0]), Antichain([1]))
    old = batch_module.COLUMN_READS_MIN, batch_module.COLUMN_READS
    batch_module.COLUMN_READS_MIN, batch_module.COLUMN_READS = 64, 8
    try:
        assert b.cols is not None and b._data is None
        assert b.get(3) == (((), 0, 1),) and b.get(99) == () and b._data is None
        for k in range(8):
            b.get(k)
        assert b._data is not None               # past COLUMN_READS reads: decoded
        batch_module.COLUMN_READS_MIN = 65
        assert small.get(3) == (((), 0, 1),) and small._data is not None   # small: decoded
    finally:
        batch_module.COLUMN_READS_MIN, batch_module.COLUMN_READS = old
    assert b.get(3) == (((), 0, 1),) and b.get(1.0) == (((), 0, 1),)
    b._check()


@given(data=st.data(), layout=LAYOUTS)
def test_consolidate_records_is_consolidation(data, layout):
    ups = [(kv, t, r) for kv, t, r in data.draw(_plain_updates(*layout))]
    got = columnar.consolidate_records(ups)
    if got is None:             # nothing, or not plain (a value `()` inside the data)
        assert not ups or columnar.encode_records(ups) is None
        return
    assert consolidate(got) == consolidate(ups)
    if len(consolidate(ups)) == len(ups):
        assert got is ups                     # nothing combined: the list itself
    assert columnar.consolidate_records([("a", 0, 1)]) is None    # not plain: rows



@pytest.mark.parametrize("outer", [(0, (1 << 63) - 1), (1, (1 << 63) - 2)])
def test_product_times_spanning_int64_decode_as_rows_do(outer):
    """Product times whose components lie 2^63 apart: the distinct-time table's
    widths are Python ints (a review: int64 widths wrapped, and every decode of such
    a batch raised), so a loop over such epochs agrees in columns and in rows."""
    from ddflow.testing import evaluate
    ups = [((k, k + 1), outer[k % 2], 1) for k in range(20)]

    def build(a):
        return a.iterate(lambda x: x.concat(x.map(lambda r: (r[0], r[0]))).distinct())
    with columnar.columnar(None):
        rows = evaluate(build, [ups])
    with columnar.columnar(0):
        cols = evaluate(build, [ups])
    assert sorted(cols, key=repr) == sorted(rows, key=repr) and len(rows) == 40


@given(data=st.data(), product=st.booleans(), key_tuple=st.booleans(),
       flipped=st.booleans(), sign=st.sampled_from([1, -1]),
       kind=st.sampled_from(["join", "semijoin"]))
def test_join_records_is_the_consolidated_join(data, product, key_tuple, flipped, sign, kind):
    """`join_columns` (the delta's rows in any order) then `join_records` give the
    consolidated bilinear join, the left value first: what `JoinCore._in_columns`
    emits."""
    times = PRODUCT_TIMES if product else INT_TIMES
    delta = data.draw(_plain_updates(times, key_tuple, -1))
    other = data.draw(_plain_updates(times, key_tuple, 0 if kind == "semijoin" else 2))
    dc, oc = columnar.encode(delta, sort=False), columnar.encode(other)
    if dc is None or oc is None:
        return
    got = column_join.join_columns(dc, oc, flipped, sign, kind)
    assert got is not None
    made, pairs = got
    (ls, lc), (rs, rc) = ((oc.vshape, oc), (dc.vshape, dc)) if flipped else \
        ((dc.vshape, dc), (oc.vshape, oc))
    out = column_join.join_records([made], ls, rs, kind) if made is not None else []
    want = []
    for (k, x), tx, rx in delta:
        for (ko, y), ty, ry in other:
            if k == ko:
                a, b = (y, x) if flipped else (x, y)
                want.append(((k, a) if kind == "semijoin" else (k, (a, b)),
                             join(tx, ty), sign * rx * ry))
    assert consolidate(out) == consolidate(want) == sorted(out, key=lambda u: (
        u[0], u[1].sort_key() if product else u[1]))
    # Pairs of stored rows (the other side consolidated, zeros dropped).
    assert pairs == sum(1 for (k, _x), _t, _r in columnar.updates(dc)
                        for (ko, _y), _u, _s in columnar.updates(oc) if k == ko)


@given(data=st.data(), layout=LAYOUTS)
def test_from_records_is_from_updates_paired(data, layout):
    """A by-self arrangement's batch from its records (encoded without the pairs in
    columns) holds what `from_updates` of the `((d, ()), t, r)` pairs holds."""
    recs = [(kv, t, r) for kv, t, r in data.draw(_plain_updates(*layout))]
    lo, up = Antichain([Product(0, 0) if layout[0] is PRODUCT_TIMES else 0]), Antichain()
    with columnar.columnar(None):
        rows = Batch.from_updates([((d, ()), t, r) for d, t, r in recs], lo, up)
    for threshold in (0, None):
        with columnar.columnar(threshold):
            b = Batch.from_records(recs, lo, up)
        b._check()
        assert _rows(b) == _rows(rows)


def test_from_records_names_a_record_outside_the_batch():
    with columnar.columnar(0):
        with pytest.raises(BatchError, match="upper") as err:
            Batch.from_records([(1, 1, 1), (3, 9, 1)], Antichain([0]), Antichain([5]))
    assert err.value.record == (3, ()) and err.value.time == 9


def _joined(a: dict, b: dict) -> dict:
    out: dict = {}
    for (k, x), m in a.items():
        for (k2, y), n in b.items():
            if k == k2 and m * n:
                out[(k, (x, y))] = out.get((k, (x, y)), 0) + m * n
    return out


def _counted(c: dict) -> dict:
    totals: dict = {}
    for record, m in c.items():
        totals[record] = totals.get(record, 0) + m
    return {(record, t): 1 for record, t in totals.items() if t}


def _projected(joined: dict) -> dict:
    out: dict = {}
    for (k, (_x, y)), m in joined.items():
        out[(k, y)] = out.get((k, y), 0) + m
    return out


@settings(max_examples=20)
@given(st.sampled_from(["product", "int"]), st.data(), SCHEDULES)
def test_join_and_count_obey_the_law_when_traces_mix_layouts(kind, data, schedule):
    """At a middle threshold a trace holds row batches beside columnar ones, which
    neither `both_layouts` layout makes (threshold 0: all columns; None: all rows):
    the join pairs a delta with both kinds (`Trace.column_batches` encodes the rows)
    and the count's numpy corrections read both.  (A review noted the gap.)"""
    a = data.draw(keyed_updates(kind, max_size=120))
    b = data.draw(keyed_updates(kind, max_size=120))
    old = columnar.set_columnar_min(64)
    try:
        assert_law(lambda x, y: x.join(y), _joined, [a, b], schedule)
        assert_law(lambda x, y: x.join(y).map(lambda kv: (kv[0], kv[1][1])).count(),
                   lambda x, y: _counted(_projected(_joined(x, y))),
                   [a, b], schedule)
    finally:
        columnar.set_columnar_min(old)
