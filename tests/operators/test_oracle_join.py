"""The law for the join family (bilinear: joined times, multiplied diffs), by hypothesis."""

from __future__ import annotations

import pytest

from collections import defaultdict

from hypothesis import given, settings, strategies as st

import ddflow
from lattice import Product
from ddflow.testing import evaluate, join_closure
from tests.strategies import SCHEDULES, assert_law, by_key, keyed_updates, updates

# Every test here runs with batches in rows and in columns (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("both_layouts")

KINDS = st.sampled_from(["product", "product3", "int"])


def _join(a: dict, b: dict) -> dict:
    out: dict = defaultdict(int)
    ga, gb = by_key(a), by_key(b)
    for k in ga.keys() & gb.keys():
        for x, m in ga[k].items():
            for y, n in gb[k].items():
                out[(k, (x, y))] += m * n
    return dict(out)


def _semijoin(a: dict, keys: dict) -> dict:
    return {(k, v): m * keys.get(k, 0) for (k, v), m in a.items()}


@settings(max_examples=200)
@given(data=st.data(), schedule=SCHEDULES, workers=st.sampled_from([1, 3]))
def test_oracle_join(data, schedule, workers):
    kind = data.draw(KINDS)
    a, b = data.draw(keyed_updates(kind)), data.draw(keyed_updates(kind))
    assert_law(lambda x, y: x.join(y), _join, [a, b], schedule, workers)


@settings(max_examples=100)
@given(data=st.data(), schedule=SCHEDULES)
def test_oracle_self_join(data, schedule):
    kind = data.draw(KINDS)
    a = data.draw(keyed_updates(kind))
    assert_law(lambda x: x.join(x), lambda c: _join(c, c), [a], schedule)


@settings(max_examples=100)
@given(data=st.data(), schedule=SCHEDULES)
def test_oracle_join_map_and_core(data, schedule):
    kind = data.draw(KINDS)
    a, b = data.draw(keyed_updates(kind)), data.draw(keyed_updates(kind))

    def f(x, y):
        out: dict = defaultdict(int)
        for (k, (v, w)), m in _join(x, y).items():
            out[k + v * w] += m
            out[("core", k)] += 2 * m
        return dict(out)

    assert_law(lambda x, y: x.join_map(y, lambda k, v, w: k + v * w)
               .concat(x.join_core(y, lambda k, v, w: [("core", k), ("core", k)])),
               f, [a, b], schedule)


@settings(max_examples=200)
@given(data=st.data(), schedule=SCHEDULES)
def test_oracle_semijoin_antijoin(data, schedule):
    kind = data.draw(KINDS)
    a = data.draw(keyed_updates(kind))
    keys = data.draw(updates(kind, data=st.integers(0, 3)))
    assert_law(lambda x, k: x.semijoin(k.distinct()),
               lambda x, k: _semijoin(x, {d: 1 for d, m in k.items() if m > 0}),
               [a, keys], schedule)
    assert_law(lambda x, k: x.antijoin(k.distinct()),
               lambda x, k: {d: m - _semijoin(x, {d: 1 for d, m in k.items() if m > 0})[d]
                             for d, m in x.items()},
               [a, keys], schedule)


@settings(max_examples=100)
@given(data=st.data())
def test_output_times_are_joins_of_input_times(data):
    kind = data.draw(KINDS)
    a, b = data.draw(keyed_updates(kind)), data.draw(keyed_updates(kind))
    out = evaluate(lambda x, y: x.join(y), [a, b], schedule="each")
    closure = join_closure({u[1] for u in a + b})
    assert all(t in closure for _d, t, _r in out)


def test_seed_002_join_stream_example():
    """"Notes on DBSP", section 2.9.12: join_stream of two indexed Z-sets at one time."""
    a = [(("a", 1), 0, 1), (("b", 2), 0, 2), (("c", 2), 0, 1)]
    b = [(("a", 1), 0, 1), (("b", 3), 0, 1), (("b", 4), 0, -1)]
    out = evaluate(lambda x, y: x.join(y), [a, b])
    assert out == [(("a", (1, 1)), 0, 1), (("b", (2, 3)), 0, 2), (("b", (2, 4)), 0, -2)]


def test_seed_002_join_trace_example():
    """"Notes on DBSP", section 2.9.13: a batch against a trace.  The notes write the
    results as (k, v1, v2) triples; here they are (k, (v1, v2)) pairs."""
    zset = [(("a", 0), 0, 1), (("a", 0), 0, -1), (("a", 1), 0, 1), (("b", 2), 0, 2),
            (("c", 2), 0, 1)]
    trace = [(("a", 1), 0, 1), (("b", -3), 0, -1), (("b", 3), 0, 1), (("b", 4), 0, -1),
             (("c", 4), 0, 1)]
    out = evaluate(lambda x, y: x.join(y), [zset, trace])
    assert out == [(("a", (1, 1)), 0, 1), (("b", (2, -3)), 0, -2), (("b", (2, 3)), 0, 2),
                   (("b", (2, 4)), 0, -2), (("c", (2, 4)), 0, 1)]


def test_one_arrangement_serves_two_joins():
    df = ddflow.Dataflow()
    a_in, a = df.new_collection()
    b_in, b = df.new_collection()
    c_in, c = df.new_collection()
    arranged = a.arrange_by_key()
    j1 = arranged.join(b).capture()
    j2 = arranged.join(c).capture()
    for k in range(10):
        a_in.insert((k, "a"))
        b_in.insert((k, "b"))
        c_in.insert((k, "c"))
    for s in (a_in, b_in, c_in):
        s.close()
    df.run()
    assert len(j1.updates) == len(j2.updates) == 10
    arranges = [r for r in df.metrics() if r["kind"] == "arrange"]
    assert len(arranges) == 3            # a once (shared), b, c
    shared = [n for n in df.nodes if n.kind == "arrange" and
              sum(1 for c2, _ in n.consumers if c2.kind == "join") == 2]
    assert len(shared) == 1
    assert df.engine.operators(shared[0])[0].trace.record_count() == 10


def test_join_compacts_to_the_other_inputs_frontier():
    """Join lets each input's trace compact as far as the other's frontier: after many
    epochs of updates to one key, the trace holds O(1) distinct times, not O(epochs)."""
    df = ddflow.Dataflow()
    a_in, a = df.new_collection()
    b_in, b = df.new_collection()
    a.join(b).capture()
    for epoch in range(50):
        a_in.update(("k", 1), 1 if epoch % 2 == 0 else -1)
        b_in.update(("k", epoch % 3), 1)
        a_in.advance_to(epoch + 1)
        b_in.advance_to(epoch + 1)
        df.run()
    arrange_a = df.engine.operators(next(n for n in df.nodes if n.kind == "arrange"))[0]
    arrange_a.trace.compact()
    assert len(arrange_a.trace.times("k")) <= 2


def test_join_at_partial_order_known_answer():
    """(k,a)@(1,0) joined with (k,b)@(0,1) appears at (1,1), where no input changed."""
    out = evaluate(lambda x, y: x.join(y), [[(("k", "a"), Product(1, 0), 1)],
                                           [(("k", "b"), Product(0, 1), 3)]])
    assert out == [(("k", ("a", "b")), Product(1, 1), 3)]
