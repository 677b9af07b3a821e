"""The stream path's switches (issue 22), each side against the law and the other.

An input passes a step's plain updates on as record columns
(`ddflow.input.INPUT_COLUMNS`), a run of maps its plain results
(`operators.linear.MAP_COLUMNS`), and the count's chain kernel seals its output
batch from its own columns.  With the switches on and off, a join, map and count
(the join+count stream of `benchmarks/bench_join_count_ab.py`) answers to the
accumulation law at int and `Product` times, and an epoch stream does the same
work either way (the operators' counters agree).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

import ddflow
from ddflow import input as ddflow_input
from ddflow.columnar import set_columnar_min
from ddflow.errors import DataError, DiffError
from operators.linear import set_map_columns
from tests.strategies import SCHEDULES, assert_law, keyed_updates

KINDS = st.sampled_from(["product", "int"])


def _switches(on: bool) -> tuple:
    old = ddflow_input.INPUT_COLUMNS, set_map_columns(on)
    ddflow_input.INPUT_COLUMNS = on
    return old


def _restore(old: tuple) -> None:
    ddflow_input.INPUT_COLUMNS = old[0]
    set_map_columns(old[1])


@pytest.fixture(scope="module", params=["columns", "rows"])
def stream_path(request):
    """Every plain batch takes the column paths (threshold 0) with the switches on,
    and the triples with them off.  (Module-scoped: hypothesis refuses
    function-scoped fixtures around examples.)"""
    old_min = set_columnar_min(0)
    old = _switches(request.param == "columns")
    yield request.param
    _restore(old)
    set_columnar_min(old_min)


def _join_count(a: dict, b: dict) -> dict:
    """`a.join(b).map(key).count()` of two accumulations of `(key, value)` pairs."""
    per_a: dict = {}
    per_b: dict = {}
    for side, acc in ((per_a, a), (per_b, b)):
        for (k, _v), m in acc.items():
            side[k] = side.get(k, 0) + m
    out = {}
    for k, n in per_a.items():
        total = n * per_b.get(k, 0)
        if total:
            out[(k, total)] = 1
    return out


@settings(max_examples=80)
@given(data=st.data(), schedule=SCHEDULES)
def test_join_map_count_law(stream_path, data, schedule):
    kind = data.draw(KINDS)
    a = data.draw(keyed_updates(kind))
    b = data.draw(keyed_updates(kind))
    assert_law(lambda x, y: x.join(y).map(lambda kv: kv[0]).count(), _join_count, [a, b],
               schedule)


@settings(max_examples=60)
@given(data=st.data(), schedule=SCHEDULES)
def test_map_of_plain_and_other_results_law(stream_path, data, schedule):
    """Results that are plain go as columns, others (strs, nested tuples) as triples:
    the same law either way."""
    kind = data.draw(KINDS)
    inp = data.draw(keyed_updates(kind))

    def f(acc: dict) -> dict:
        out: dict = {}
        for (k, v), m in acc.items():
            for d in ((k, v * 2), str(k), (k, (v,))):
                out[d] = out.get(d, 0) + m
        return {d: m for d, m in out.items() if m}
    assert_law(lambda c: c.map(lambda kv: (kv[0], kv[1] * 2)).concat(
        c.map(lambda kv: str(kv[0]))).concat(c.map(lambda kv: (kv[0], (kv[1],)))),
        f, [inp], schedule)


def _stream(on: bool, epochs: list) -> tuple[dict, list]:
    old = _switches(on)
    try:
        df = ddflow.Dataflow()
        a_in, a = df.new_collection("A")
        b_in, b = df.new_collection("B")
        cap = a.join(b).map(lambda kv: kv[0]).count().capture()
        for e, batch in enumerate(epochs):
            for rel, key, ident, diff in batch:
                (a_in, b_in)[rel].update((key, ident), diff)
            a_in.advance_to(e + 1)
            b_in.advance_to(e + 1)
            df.run()
        counters = [{k: v for k, v in m.items() if k != "cpu_ns"} for m in df.metrics()]
        return dict(cap.at(len(epochs) - 1)), counters
    finally:
        _restore(old)


def test_an_epoch_stream_does_the_same_work_either_way():
    """Epochs of 600 updates (above the default threshold of the column paths, 256):
    the same answer and the same counters (records in and out, work, evaluations,
    trace sizes) with the switches on and off, and the answer is the recompute's."""
    rng = random.Random(5)
    live: tuple[list, list] = ([], [])
    epochs, serial = [], 0
    for _ in range(8):
        batch = []
        for _ in range(600):
            rel = rng.randrange(2)
            if live[rel] and rng.random() < 0.2:
                key, ident = live[rel].pop(rng.randrange(len(live[rel])))
                batch.append((rel, key, ident, -1))
            else:
                serial += 1
                live[rel].append((rng.randrange(150), serial))
                batch.append((rel, *live[rel][-1], 1))
        epochs.append(batch)
    on, on_counters = _stream(True, epochs)
    off, off_counters = _stream(False, epochs)
    assert on == off
    assert on_counters == off_counters
    acc = ({}, {})
    for (rel, key, ident, diff) in (u for b in epochs for u in b):
        acc[rel][(key, ident)] = acc[rel].get((key, ident), 0) + diff
    assert on == _join_count(*acc)
    assert on_counters[-2]["work"] > 0          # the count did evaluate


@pytest.mark.parametrize("on", [True, False])
def test_bad_updates_raise_and_leave_the_session_unchanged(on):
    """`update`'s own check of the commonest update (a tuple of ints or strs) lets
    nothing else through: the typed errors of `update_at`, nothing recorded, and the
    dataflow runs on."""
    old = _switches(on)
    try:
        df = ddflow.Dataflow()
        s, c = df.new_collection("s")
        cap = c.map(lambda x: x).capture()
        s.update((1, "a"), 1)
        for bad, diff, err in [([1, 2], 1, DataError), ((1, float("nan")), 1, DataError),
                               ((1, [2]), 1, DataError), ((1, 2), 1.5, DiffError)]:
            with pytest.raises(err):
                s.update(bad, diff)
            assert s.pending == [((1, "a"), 0, 1)]
        s.advance_to(1)
        df.run()
        assert dict(cap.at(0)) == {(1, "a"): 1}
    finally:
        _restore(old)


@pytest.mark.parametrize("on", [True, False])
def test_a_failed_step_of_column_input_rolls_back_whole(on):
    """A step whose input went on as columns (300 updates) fails in a map after it:
    the input's history, the arrangement and the count are as before the step, the
    culprit is named and discarded, and the next run answers as if it never came."""
    old = _switches(on)
    try:
        df = ddflow.Dataflow()
        s, c = df.new_collection("s")

        def f(x):
            if x == (7, -1):
                raise ValueError("poisoned")
            return x[0] % 10
        cap = c.map(f).count().capture()
        for i in range(300):
            s.update((i, i), 1)
        s.advance_to(1)
        df.run()
        before = s.contents(0)
        for i in range(300):
            s.update((i + 300, i), 1)
        s.update((7, -1), 1)
        s.advance_to(2)
        with pytest.raises(ddflow.DataflowError) as err:
            df.run()
        assert [u[1:] for u in err.value.inputs] == [((7, -1), 1, 1)]
        assert s.contents(0) == before
        df.discard(err.value)
        df.run()
        assert s.contents(1) == {(i, i % 300): 1 for i in range(600)}
        assert dict(cap.at(1)) == {(d, 60): 1 for d in range(10)}
    finally:
        _restore(old)
