"""A run pauses Python's cyclic garbage collector and gives it back as it found it
(`ddflow.dataflow.PAUSE_GC`): on, off, after a failing run, and with the switch off."""

from __future__ import annotations

import gc

import pytest

import ddflow
from ddflow import dataflow
from ddflow.errors import DataflowError


def _run(fail: bool = False) -> list[bool]:
    """Run a small dataflow; returns whether the collector was on inside its map."""
    seen: list[bool] = []

    def f(x: int) -> int:
        seen.append(gc.isenabled())
        if fail:
            raise ValueError("boom")
        return x + 1

    df = ddflow.Dataflow()
    s, c = df.new_collection()
    out = c.map(f).capture()
    s.insert(1)
    s.advance_to(1)
    df.run()
    assert out.at(0) == {2: 1}
    return seen


@pytest.fixture
def collector():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_paused_inside_the_run_and_back_after(collector) -> None:
    gc.enable()
    assert _run() == [False]
    assert gc.isenabled()


def test_a_collector_turned_off_stays_off(collector) -> None:
    gc.disable()
    assert _run() == [False]
    assert not gc.isenabled()


def test_back_after_a_failing_run(collector) -> None:
    gc.enable()
    with pytest.raises(DataflowError):
        _run(fail=True)
    assert gc.isenabled()


def test_the_switch_leaves_the_collector_alone(collector, monkeypatch) -> None:
    monkeypatch.setattr(dataflow, "PAUSE_GC", False)
    gc.enable()
    assert _run() == [True]
    assert gc.isenabled()
