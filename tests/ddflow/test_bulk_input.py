"""Bulk input (`InputSession.update_many` and friends): the same updates and the same
typed errors as one-at-a-time input, checked column-wise, all or nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ddflow
from ddflow.errors import DataError, DiffError, SessionClosedError, TimeError
from lattice import Product


def _session(name: str = "xs"):
    df = ddflow.Dataflow()
    s, c = df.new_collection(name)
    return df, s, c


@given(st.lists(st.tuples(st.tuples(st.integers(-5, 5), st.integers(-5, 5)),
                          st.integers(0, 4), st.integers(-3, 3)), max_size=30))
def test_update_many_equals_update_at(rows):
    _df, one, _ = _session()
    _df2, bulk, _ = _session()
    for d, t, r in rows:
        one.update_at(d, t, r)
    data = np.array([d for d, _t, _r in rows], dtype=np.int64).reshape(len(rows), 2)
    n = bulk.update_many(data, diffs=np.array([r for *_x, r in rows], dtype=np.int64),
                         times=np.array([t for _d, t, _r in rows], dtype=np.int64))
    assert n == len(rows)
    assert bulk.pending == one.pending
    assert all(type(x) is int for d, t, r in bulk.pending for x in (*d, t, r))


def test_forms_of_data():
    _df, s, _ = _session()
    s.insert_many(np.arange(3))
    s.remove_many([("a", 1)], times=[4])
    s.update_many(np.array([1.5, 2.5]), diffs=[2, 3], times=5)
    assert s.pending == [(0, 0, 1), (1, 0, 1), (2, 0, 1), (("a", 1), 4, -1),
                         (1.5, 5, 2), (2.5, 5, 3)]


def test_results_match_one_at_a_time():
    """A dataflow fed in bulk answers as one fed record by record."""
    answers = []
    for bulk in (False, True):
        df = ddflow.Dataflow()
        s, c = df.new_collection("pairs")
        cap = c.map(lambda kv: kv[0]).count().capture()
        rows = [(i % 7, i) for i in range(200)]
        if bulk:
            s.insert_many(np.array(rows))
        else:
            for r in rows:
                s.insert(r)
        s.advance_to(1)
        df.run()
        answers.append(cap.at(0))
    assert answers[0] == answers[1] and answers[0]


_NAN = float("nan")       # one object: records holding it compare equal by identity


@pytest.mark.parametrize("call, error, match, record, time", [
    (lambda s: s.update_many([(1,), [2], (3,)]), DataError, "row 1: data must be hashable",
     [2], None),
    (lambda s: s.update_many(np.array([1.0, np.nan])), DataError, "row 1: NaN", np.nan,
     None),
    # NaN inside a record of a sequence or an object array, refused as update_at does
    (lambda s: s.update_many([(3, 4), (4, _NAN)]), DataError, "row 1: data must equal itself",
     (4, _NAN), None),
    (lambda s: s.update_many(np.array([1, frozenset({_NAN})], dtype=object)), DataError,
     "row 1: data must equal itself", frozenset({_NAN}), None),
    (lambda s: s.update_many(np.array([1, 2, 3]), times=np.array([5, 1, 7])), TimeError,
     "row 1: update at 1 is not in advance", 2, 1),
    (lambda s: s.update_many([1, 2], times=[3, True]), TimeError, "row 1: True", 2, True),
    (lambda s: s.update_many([1, 2, 3], times=[5, 5, 0]), TimeError,
     "row 2: update at 0", 3, 0),
    (lambda s: s.update_many([1, 2], times=[Product(3, 0), 4]), TimeError,
     "row 0: Product", 1, Product(3, 0)),
    (lambda s: s.update_many([1, 2, 3], diffs=[1, 0.5, 1]), DiffError, "row 1: a float",
     2, None),
    (lambda s: s.update_many(np.array([1, 2]), diffs=np.array([True, False])), DiffError,
     "row 0: a bool", 1, None),
    (lambda s: s.update_many([1, 2, 3], diffs=[1, 1]), DataError, "3 records but 2 diffs",
     None, None),
    (lambda s: s.update_many(np.zeros((2, 2, 2))), DataError, "1-D or 2-D", None, None),
    (lambda s: s.update_many(5), DataError, "needs an array", 5, None),
])
def test_refused_batch_names_the_row_and_changes_nothing(call, error, match, record, time):
    _df, s, _ = _session()
    s.advance_to(2)
    s.insert("kept")
    before = s.pending
    with pytest.raises(error, match=match) as err:
        call(s)
    assert err.value.operator == "xs"
    if record is not None:
        if isinstance(record, float):
            assert np.isnan(err.value.record)
        else:
            assert err.value.record == record
    if time is not None:
        assert err.value.time == time
    assert s.pending == before
    assert s.time == 2


def test_closed_session_refuses():
    _df, s, _ = _session()
    s.close()
    with pytest.raises(SessionClosedError):
        s.insert_many([1, 2])
    assert s.pending == []


def test_pandas_frame():
    pd = pytest.importorskip("pandas")
    _df, s, _ = _session()
    s.insert_many(pd.DataFrame({"a": [1, 2], "b": [3, 4]}))
    s.insert_many(pd.DataFrame({"a": [9]}))
    assert s.pending == [((1, 3), 0, 1), ((2, 4), 0, 1), (9, 0, 1)]
