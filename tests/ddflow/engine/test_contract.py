"""One engine contract: `Dataflow` and `Capture` call the methods of `ddflow.engine.Engine`
and nothing else, and every engine answers them alike.

Each engine is driven from behind a guard that hands out only the contract's methods
(any other attribute is missing, as on an engine that implements the contract and no
more): compile, a step, a failed step rolled back (the sessions keep their updates),
a piece added after a run (grow), a piece dropped, reads of captures (captured_since,
frontier) and of counters (operators).  The answers are checked against the
accumulation law at every time, and against each other.
"""

from __future__ import annotations

import typing

import pytest

import ddflow
from ddflow.engine import Engine
from ddflow.engine.bsp import InProcessShards
from ddflow.engine.local import LocalEngine
from ddflow.errors import UserFunctionError
from ddflow.updates import accumulate, consolidate

CONTRACT = frozenset(name for name in vars(Engine)
                     if not name.startswith("_") and callable(getattr(Engine, name)))


class OnlyTheContract:
    """`engine` with every attribute outside the contract hidden; records the calls."""

    def __init__(self, engine: typing.Any) -> None:
        self.engine = engine
        self.called: set[str] = set()

    def __getattr__(self, name: str) -> typing.Any:
        if name not in CONTRACT:
            raise AttributeError(f"{name} is not part of the engine contract")
        self.called.add(name)
        return getattr(self.engine, name)


def _poison(x: int) -> int:
    if x == 13:
        raise ValueError("13 is refused")
    return x % 3


def drive(engine: typing.Any) -> dict:
    """Run the same session of questions on `engine`; return what was read."""
    guard = OnlyTheContract(engine)
    df = ddflow.Dataflow(engine=guard)
    s, c = df.new_collection("xs")
    counts = c.map(_poison).count().capture()
    for x in range(6):
        s.insert(x)
    s.advance_to(1)
    df.run()
    seen = {"first": counts.updates, "frontier": list(counts.frontier.elements)}

    s.insert(13)                         # a failing step: rolled back, updates kept
    s.advance_to(2)
    with pytest.raises(UserFunctionError) as err:
        df.run()
    # What the step failed on, found by trials (`run(df, taken, keep=False)`).
    assert [(x.name, d, t, r) for x, d, t, r in err.value.inputs] == [("xs", 13, 1, 1)]
    assert s.pending == [(13, 1, 1)]
    assert counts.updates == seen["first"]
    assert s.discard(13) == [(13, 1, 1)]

    s.remove(0)
    s.insert(7)
    df.run()
    late = c.distinct().capture()        # grow: added to the running dataflow
    s.advance_to(3)
    df.run()
    seen["late"] = late.updates
    seen["late_since"] = late.since
    df.drop(late)                        # drop: takes effect at the next run
    s.insert(8)
    s.close()
    df.run()
    seen["updates"] = counts.updates
    seen["at"] = {t: dict(counts.at(t)) for t in range(4)}
    seen["records_in"] = sum(r["records_in"] for r in df.metrics())
    assert guard.called == CONTRACT, f"not driven: {CONTRACT - guard.called}"
    return seen


def check(seen: dict) -> None:
    inputs = ([(x, 0, 1) for x in range(6)] + [(0, 2, -1), (7, 2, 1), (8, 3, 1)])
    for t in range(4):
        acc = accumulate([(x % 3, s, r) for x, s, r in inputs], t)
        assert seen["at"][t] == {(k, n): 1 for k, n in acc.items() if n}
    assert seen["first"] == [((0, 2), 0, 1), ((1, 2), 0, 1), ((2, 2), 0, 1)]
    assert seen["frontier"] == [1]
    assert seen["late_since"] == 2
    assert seen["late"] == consolidate([(x, 2, 1) for x in (1, 2, 3, 4, 5, 7)])


ENGINES = {"local": lambda: LocalEngine(), "w3": lambda: LocalEngine(workers=3),
           "bsp": lambda: InProcessShards(3, processes=2)}


def test_the_contract_is_what_dataflow_checks():
    from ddflow.dataflow import _ENGINE_METHODS
    assert CONTRACT == set(_ENGINE_METHODS)
    assert "captured" not in CONTRACT


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_engine_serves_the_front_door_through_the_contract(name):
    engine = ENGINES[name]()
    assert isinstance(engine, Engine)
    seen = drive(engine)
    check(seen)
    assert seen == drive(LocalEngine())


def test_an_engine_lacking_a_contract_method_is_refused():
    class NoGrow:
        def __init__(self) -> None:
            self.engine = LocalEngine()

        def __getattr__(self, name: str) -> typing.Any:
            if name == "grow":
                raise AttributeError(name)
            return getattr(self.engine, name)

    with pytest.raises(ddflow.GraphError, match="it has no grow"):
        ddflow.Dataflow(engine=NoGrow())


@pytest.mark.spark
def test_the_spark_engine_serves_the_front_door_through_the_contract(spark):
    from ddflow.engine.spark import SparkEngine
    engine = SparkEngine(spark, shards=2)
    try:
        assert isinstance(engine, Engine)
        seen = drive(engine)
        check(seen)
        assert seen == drive(LocalEngine())
    finally:
        engine.stop()
