"""The BSP driver (in-process shards, in one simulated process or landing at random in
two, as Spark's Python workers run them) agrees with the local engine on every
operator family and on loops; it rolls back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import ddflow
from ddflow.engine.bsp import InProcessShards
from ddflow.testing import evaluate
from tests.ddflow.engine.cases import CASES

# Every test here runs with batches in rows and in columns (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("both_layouts")


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=40)
@given(data=st.data(), shards=st.sampled_from([1, 2, 3]),
       schedule=st.sampled_from(["once", "each"]), processes=st.sampled_from([1, 2]))
def test_agree_bsp_with_local(name, data, shards, schedule, processes):
    build, inputs = CASES[name]
    inp = [list(x) for x in data.draw(inputs)]
    local = evaluate(build, inp, schedule=schedule)
    bsp = evaluate(build, inp, schedule=schedule,
                   engine=lambda: InProcessShards(shards, processes=processes))
    assert bsp == local


def test_bsp_rolls_back_a_failed_step():
    df = ddflow.Dataflow(engine=InProcessShards(2))
    s, c = df.new_collection("numbers")
    ok = c.map(lambda x: (x % 3, x)).count().capture()
    inv = c.map(lambda x: 10 // x, name="invert").capture()
    for x in (1, 2, 3):
        s.insert(x)
    s.advance_to(1)
    df.run()
    before = (ok.updates, inv.updates)
    s.insert(0)
    s.insert(5)
    s.advance_to(2)
    with pytest.raises(ddflow.UserFunctionError) as err:
        df.run()
    assert err.value.operator == "invert" and err.value.record == 0
    assert (ok.updates, inv.updates) == before
    s.discard(0)
    df.run()
    assert inv.at(1) == {10: 1, 5: 1, 3: 1, 2: 1}


def test_bsp_convergence_error_names_the_loop():
    df = ddflow.Dataflow(engine=InProcessShards(2))
    s, c = df.new_collection()
    c.iterate(lambda x: x.map(lambda v: 1 - v), max_rounds=20, name="flip").capture()
    s.insert(0)
    s.close()
    with pytest.raises(ddflow.ConvergenceError, match="flip.*oscillates|oscillates") as err:
        df.run()
    assert err.value.period == 2


def test_bsp_metrics_and_loop_rows_come_from_the_shards():
    df = ddflow.Dataflow(engine=InProcessShards(2))
    e_in, e = df.new_collection()
    r_in, r = df.new_collection()
    CASES["reachability"][0](e, r).capture()
    for a in range(6):
        e_in.insert((a, a + 1))
    r_in.insert(0)
    e_in.close()
    r_in.close()
    df.run()
    rows = df.metrics()
    assert sum(r["records_in"] for r in rows) > 0
    assert max(r["round"] for r in df.loop_rows()) >= 6
