"""A run holds back Python's full garbage collections and gives the collector back as
it found it (`ddflow.dataflow.PAUSE_GC`, `RUN_THRESHOLDS`): after a run, after a
failing run, with the collector off, with the switch off; young collections go on,
so cycles a user function makes are freed during the run (a review: turning the
collector off held them all until the end)."""

from __future__ import annotations

import gc

import pytest

import ddflow
from ddflow import dataflow
from ddflow.errors import DataflowError


def _run(fail: bool = False, f=None) -> list[tuple]:
    """Run a small dataflow; returns the collector's thresholds seen inside its map."""
    seen: list[tuple] = []

    def g(x: int) -> int:
        seen.append(gc.get_threshold() if gc.isenabled() else None)
        if fail:
            raise ValueError("boom")
        return x + 1 if f is None else f(x)

    df = ddflow.Dataflow()
    s, c = df.new_collection()
    out = c.map(g).capture()
    s.insert(1)
    s.advance_to(1)
    df.run()
    assert out.at(0) == {2: 1}
    return seen


@pytest.fixture
def collector():
    was, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    (gc.enable if was else gc.disable)()


def test_full_collections_held_back_inside_the_run_and_back_after(collector) -> None:
    gc.enable()
    gc.set_threshold(700, 10, 10)
    assert _run() == [dataflow.RUN_THRESHOLDS]
    assert gc.isenabled() and gc.get_threshold() == (700, 10, 10)


def test_a_collector_turned_off_stays_off(collector) -> None:
    gc.disable()
    assert _run() == [None]
    assert not gc.isenabled()


def test_a_collector_a_user_function_turns_off_stays_off(collector) -> None:
    gc.enable()

    def off(x):
        gc.disable()
        return x + 1
    _run(f=off)
    assert not gc.isenabled()


def test_back_after_a_failing_run(collector) -> None:
    gc.enable()
    gc.set_threshold(700, 10, 10)
    with pytest.raises(DataflowError):
        _run(fail=True)
    assert gc.isenabled() and gc.get_threshold() == (700, 10, 10)


def test_the_switch_leaves_the_collector_alone(collector, monkeypatch) -> None:
    monkeypatch.setattr(dataflow, "PAUSE_GC", False)
    gc.enable()
    gc.set_threshold(700, 10, 10)
    assert _run() == [(700, 10, 10)]


class _Cyclic:
    freed = 0

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        _Cyclic.freed += 1


def test_cycles_a_user_function_makes_are_freed_during_the_run(collector) -> None:
    gc.enable()
    gc.collect()
    _Cyclic.freed = 0
    freed_before_the_end: list[int] = []
    n = 3 * dataflow.RUN_THRESHOLDS[0]

    def make_garbage(x: int) -> int:
        _Cyclic()
        if x == n - 1:
            freed_before_the_end.append(_Cyclic.freed)
        return x

    df = ddflow.Dataflow()
    s, c = df.new_collection()
    c.map(make_garbage).count().capture()
    s.update_many(list(range(n)))
    s.advance_to(1)
    df.run()
    assert freed_before_the_end[0] >= dataflow.RUN_THRESHOLDS[0] // 2
