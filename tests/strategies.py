"""Strategies and helpers shared by the test suite (the public ones live in ddflow.testing)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Sequence

from hypothesis import strategies as st

from ddflow.testing import (antichains, check_law, evaluate, keyed_updates, times,  # noqa: F401
                            updates)

SCHEDULES = st.sampled_from(["once", "each", "reverse"])


def assert_law(build: Callable[..., Any], f: Callable[..., dict],
               inputs: Sequence[Sequence[tuple]], schedule: str = "once",
               workers: int = 1) -> list[tuple]:
    """Run `build` on `inputs` and check the accumulation law against `f`."""
    out = evaluate(build, inputs, schedule=schedule, workers=workers)
    check_law(out, inputs, f)
    return out


def plain(fn: Callable[[Any, Any], Any]) -> Callable[[dict], dict]:
    """Lift a per-record function `fn(data, mult) -> iterable of (data, mult)` to dicts."""
    def f(coll: dict) -> dict:
        out: dict = defaultdict(int)
        for d, m in coll.items():
            for d2, m2 in fn(d, m):
                out[d2] += m2
        return dict(out)
    return f


def by_key(coll: dict) -> dict[Any, dict]:
    groups: dict = defaultdict(dict)
    for (k, v), m in coll.items():
        if m:
            groups[k][v] = groups[k].get(v, 0) + m
    return groups
