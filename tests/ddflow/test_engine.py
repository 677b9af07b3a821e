"""The local engine: fusion, metrics, batching, workers, partially ordered roots."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given, settings

import ddflow
from lattice import Antichain, Product
from ddflow.sharding import shard_of
from ddflow.testing import evaluate
from tests.strategies import keyed_updates


def _chain(c):
    return (c.map(lambda kv: (kv[0], kv[1] * 2)).filter(lambda kv: kv[1] > 1)
            .flat_map(lambda kv: [kv, (kv[0] + 10, kv[1])]).negate().negate())


def test_fusion_same_result_fewer_batches():
    results, batches, nodes = {}, {}, {}
    for fuse in (True, False):
        df = ddflow.Dataflow(fuse=fuse)
        s, c = df.new_collection()
        cap = _chain(c).count().capture()
        for epoch in range(5):
            for x in range(20):
                s.insert((x % 4, x + epoch))
            s.advance_to(epoch + 1)
            df.run()
        results[fuse] = cap.updates
        linear = [r for r in df.metrics() if r["kind"] == "linear"]
        batches[fuse] = sum(r["batches_out"] for r in linear)
        nodes[fuse] = len(linear)
    assert results[True] == results[False]
    assert nodes[True] == 1 and nodes[False] == 5
    assert batches[True] * 5 == batches[False]      # one batch per step instead of five


def test_fusion_keeps_shared_collections():
    df = ddflow.Dataflow()
    s, c = df.new_collection()
    m = c.map(lambda x: x + 1)
    a = m.map(lambda x: x * 2).capture()
    b = m.map(lambda x: x * 3).capture()
    s.insert(1)
    s.close()
    df.run()
    assert a.updates == [(4, 0, 1)] and b.updates == [(6, 0, 1)]


def test_metrics_rows_and_work_following_the_change():
    df = ddflow.Dataflow()
    a_in, a = df.new_collection()
    b_in, b = df.new_collection()
    a.join(b).map(lambda kv: kv[0]).count().capture()
    for k in range(1000):
        a_in.insert((k, 0))
        b_in.insert((k, 1))
    a_in.advance_to(1)
    b_in.advance_to(1)
    df.run()
    rows = df.metrics()
    assert {"operator", "records_in", "records_out", "work", "times_visited",
            "trace_records", "batches_out"} <= set(rows[0])
    load = df.total_work()
    a_in.insert((7, 5))
    a_in.advance_to(2)
    b_in.advance_to(2)
    df.run()
    change = df.total_work() - load
    assert 0 < change <= 30 and load > 100 * change
    trace = {r["operator"]: r["trace_records"] for r in df.metrics()}
    assert trace["count"] == 1000 + 2   # one count per key, plus key 7's correction


@settings(max_examples=100)
@given(a=keyed_updates("product"), b=keyed_updates("product"))
def test_batching_join_reduce(a, b):
    """Any split of the input into steps gives the same consolidated output."""
    def build(x, y):
        return x.join(y).map(lambda kv: (kv[0], kv[1][0] + kv[1][1])).min()
    outs = [evaluate(build, [a, b], schedule=s) for s in ("once", "each", "reverse")]
    assert outs[0] == outs[1] == outs[2]


@settings(max_examples=100)
@given(a=keyed_updates("product3"))
def test_agree_workers_join_count(a):
    def build(x):
        return x.join(x).map(lambda kv: kv[1]).count()
    assert evaluate(build, [a], workers=1) == evaluate(build, [a], workers=3, schedule="each")


def test_workers_own_keys_by_stable_hash():
    df = ddflow.Dataflow(workers=3)
    s, c = df.new_collection()
    c.map(lambda x: (x, 1)).count().capture()
    keys = [f"key{i}" for i in range(30)]
    for k in keys:
        s.insert((k, 0))
    s.close()
    df.run()
    arrange = next(n for n in df.nodes if n.kind == "arrange")
    for w, op in enumerate(df.engine.operators(arrange)):
        for k in op.trace.keys():
            assert shard_of(k, 3) == w
    assert sum(len(op.trace.keys()) for op in df.engine.operators(arrange)) == 30
    # The same in every process, whatever PYTHONHASHSEED says (crc32, not hash()).
    code = ("from ddflow.sharding import shard_of;"
            "print([shard_of(k, 3) for k in ['key%d' % i for i in range(30)]])")
    for seed in ("1", "2"):
        got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}, check=True).stdout
        assert got.strip() == str([shard_of(k, 3) for k in keys])


def test_partially_ordered_root_frontier_and_finality():
    df = ddflow.Dataflow(time=Product(0, 0))
    s, c = df.new_collection()
    cap = c.map(lambda kv: kv[0]).count().capture()
    s.update_at(("k", "a"), Product(1, 0), 1)
    s.update_at(("k", "b"), Product(0, 1), 1)
    s.advance_to(Product(1, 1))
    df.run()
    # (1,0) and (0,1) are complete; (1,1) is not, and its correction is still pending.
    assert cap.frontier == Antichain([Product(1, 1)])
    assert cap.is_final(Product(1, 0)) and not cap.is_final(Product(1, 1))
    assert cap.at(Product(1, 0)) == {("k", 1): 1}
    s.close()
    df.run()
    assert cap.at(Product(1, 1)) == {("k", 2): 1}
    assert cap.frontier == Antichain()


def test_nothing_completes_before_the_frontier_moves():
    df = ddflow.Dataflow()
    s, c = df.new_collection()
    cap = c.count().capture()
    s.insert("a")
    df.run()
    assert cap.updates == [] and not cap.is_final(0)
    s.advance_to(1)
    df.run()
    assert cap.updates == [(("a", 1), 0, 1)] and cap.is_final(0)


def test_big_weights_do_not_overflow():
    out = evaluate(lambda c: c.join(c).map(lambda kv: kv[0]).count(),
                   [[(("k", 1), 0, 2 ** 40)]])
    assert out == [(("k", 2 ** 80), 0, 1)]


def test_capture_inside_a_loop_keeps_round_times_on_every_engine():
    """A capture in a loop scope records each round's changes at `Product(t, round)`,
    read from the driver, so the BSP engine (operators pickled between supersteps)
    answers like the local one."""
    from ddflow.engine.bsp import InProcessShards

    def run(engine):
        df = ddflow.Dataflow(engine=engine)
        s, xs = df.new_collection("xs")
        inner = []

        def logic(x):
            step = x.concat(x.map(lambda v: min(v + 1, 3))).distinct()
            inner.append(step.capture("rounds", in_loop=True))
            return step

        out = xs.iterate(logic).capture()
        s.insert(0)
        s.advance_to(1)
        df.run()
        return inner[0], out

    for engine in (ddflow.LocalEngine(1), ddflow.LocalEngine(3), InProcessShards(2)):
        rounds, out = run(engine)
        assert out.at(0) == {0: 1, 1: 1, 2: 1, 3: 1}
        assert rounds.updates == [(0, Product(0, 0), 1), (1, Product(0, 0), 1),
                                  (2, Product(0, 1), 1), (3, Product(0, 2), 1)]
        assert rounds.at(Product(0, 1)) == {0: 1, 1: 1, 2: 1}
