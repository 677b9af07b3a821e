"""The law for the linear family, at partially ordered times, by hypothesis."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings, strategies as st

from lattice import join, less_equal
from ddflow.testing import accumulate_all, evaluate, join_closure
from tests.strategies import SCHEDULES, assert_law, plain, times, updates

KINDS = st.sampled_from(["product", "product3", "int"])

CASES = {
    "map": (lambda c: c.map(lambda x: x % 3), plain(lambda d, m: [(d % 3, m)])),
    "filter": (lambda c: c.filter(lambda x: x % 2 == 0),
               plain(lambda d, m: [(d, m)] if d % 2 == 0 else [])),
    "flat_map": (lambda c: c.flat_map(lambda x: range(x)),
                 plain(lambda d, m: [(i, m) for i in range(d)])),
    "explode": (lambda c: c.explode(lambda x: [(x, 2), (x + 10, -1)]),
                plain(lambda d, m: [(d, 2 * m), (d + 10, -m)])),
    "negate": (lambda c: c.negate(), plain(lambda d, m: [(d, -m)])),
    "consolidate": (lambda c: c.consolidate(), plain(lambda d, m: [(d, m)])),
    "inspect": (lambda c: c.inspect(lambda u: None), plain(lambda d, m: [(d, m)])),
    "chain": (lambda c: c.map(lambda x: x + 1).filter(lambda x: x > 2).negate()
              .flat_map(lambda x: [x, x]),
              plain(lambda d, m: [(d + 1, -2 * m)] if d + 1 > 2 else [])),
}


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=60)
@given(data=st.data(), schedule=SCHEDULES)
def test_oracle_linear(name, data, schedule):
    kind = data.draw(KINDS)
    inp = data.draw(updates(kind))
    build, f = CASES[name]
    assert_law(build, f, [inp], schedule)


@settings(max_examples=200)
@given(data=st.data(), schedule=SCHEDULES)
def test_oracle_concat(data, schedule):
    kind = data.draw(KINDS)
    a, b, c = (data.draw(updates(kind)) for _ in range(3))
    assert_law(lambda x, y, z: x.concat(y, z.negate()),
               lambda x, y, z: {d: x.get(d, 0) + y.get(d, 0) - z.get(d, 0)
                                for d in set(x) | set(y) | set(z)},
               [a, b, c], schedule)


@settings(max_examples=200)
@given(data=st.data(), schedule=SCHEDULES)
def test_oracle_join_function(data, schedule):
    """"Generalizing linear operators": `(x, t, r)` -> `(y, join(t, t2), r * r2)`; its law
    depends on time."""
    kind = data.draw(st.sampled_from(["product", "int"]))
    t2s = data.draw(st.lists(times(kind), min_size=2, max_size=2))
    inp = data.draw(updates(kind))

    def logic(x):
        return [(x, t2s[0], x + 1), (x * 10, t2s[1], -1)]

    out = evaluate(lambda c: c.join_function(logic), [inp], schedule=schedule)
    seen = {u[1] for u in inp} | {u[1] for u in out} | set(t2s)
    for t in join_closure(seen):
        acc_in = accumulate_all(inp, [t])[t]
        expected: dict = defaultdict(int)
        for x, m in acc_in.items():
            for y, t2, r2 in logic(x):
                if less_equal(t2, t):
                    expected[y] += m * r2
        expected = {d: m for d, m in expected.items() if m}
        assert accumulate_all(out, [t])[t] == expected, t


def test_join_function_seed_003_example():
    """"Generalizing linear operators": `x` copies of `2x` from time `3x` until `4x`, for x
    in 0..9."""
    def logic(x):
        return [(2 * x, 3 * x, x), (2 * x, 4 * x, -x)]
    out = evaluate(lambda c: c.join_function(logic), [[(x, 0, 1) for x in range(10)]])
    from ddflow.updates import accumulate
    assert accumulate(out, 7) == {4: 2}          # x=2 lives 6..8; x=3 starts at 9
    assert accumulate(out, 9) == {6: 3}
    assert accumulate(out, 100) == {}
    assert all(t == join(0, t) for _d, t, _r in out)


@settings(max_examples=200)
@given(inp=updates("product"), schedule=SCHEDULES)
def test_oracle_delay(inp, schedule):
    """`delay(f)`: an update at `s` counts at every `t >= f(d, s)`, with f(d, s) >= s."""
    from lattice import Product

    def f(d, s):
        return Product(s.outer + d % 2, s.inner + d % 3)

    out = evaluate(lambda c: c.delay(f), [inp], schedule=schedule)
    seen = {u[1] for u in inp} | {u[1] for u in out} | {f(d, s) for d, s, _r in inp}
    for t in join_closure(seen):
        expected: dict = defaultdict(int)
        for d, s, r in inp:
            if less_equal(f(d, s), t):
                expected[d] += r
        assert accumulate_all(out, [t])[t] == {d: m for d, m in expected.items() if m}, t


def _present(lower, upper, x, t) -> bool:
    """The plain temporal filter: `x` is present at `t` from `lower(x)`, until `upper(x)`."""
    return less_equal(lower(x), t) and not less_equal(upper(x), t)


def _bounds(kind: str, draw) -> tuple:
    """A lower and an upper bound per record, drawn as tables over the records 0..9
    (so either may precede, follow or, at Product times, be incomparable to the other)."""
    lows = draw(st.lists(times(kind), min_size=10, max_size=10))
    ups = draw(st.lists(times(kind), min_size=10, max_size=10))
    return (lambda x: lows[x % 10]), (lambda x: ups[x % 10]), set(lows) | set(ups)


@settings(max_examples=200)
@given(data=st.data(), schedule=SCHEDULES)
def test_oracle_temporal_filter(data, schedule):
    """`temporal_filter(lower, upper)`: at every time `t`, the records of the input at
    `t` with `lower(x) <= t` and not `upper(x) <= t`, multiplicities kept."""
    kind = data.draw(st.sampled_from(["product", "int"]))
    lower, upper, bounds = _bounds(kind, data.draw)
    inp = data.draw(updates(kind))
    out = evaluate(lambda c: c.temporal_filter(lower, upper), [inp], schedule=schedule)
    seen = {u[1] for u in inp} | {u[1] for u in out} | bounds
    for t in join_closure(seen):
        expected = {x: m for x, m in accumulate_all(inp, [t])[t].items()
                    if _present(lower, upper, x, t)}
        assert accumulate_all(out, [t])[t] == expected, t


@settings(max_examples=200)
@given(data=st.data(), schedule=SCHEDULES)
def test_oracle_sliding_window(data, schedule):
    """`sliding_window(start, width)`: present from `start(x)` until `start(x) + width`
    (int times), or until `width(start(x))` (Product times: a window two epochs by one
    round wide)."""
    from lattice import Product
    kind = data.draw(st.sampled_from(["product", "int"]))
    starts = data.draw(st.lists(times(kind), min_size=10, max_size=10))
    start = lambda x: starts[x % 10]           # noqa: E731
    if kind == "int":
        width = data.draw(st.integers(0, 3))
        end = lambda s: s + width              # noqa: E731
    else:
        width = end = lambda s: Product(s.outer + 2, s.inner + 1)   # noqa: E731
    inp = data.draw(updates(kind))
    out = evaluate(lambda c: c.sliding_window(start, width), [inp], schedule=schedule)
    seen = {u[1] for u in inp} | {u[1] for u in out} | set(starts) | {end(s) for s in starts}
    for t in join_closure(seen):
        expected = {x: m for x, m in accumulate_all(inp, [t])[t].items()
                    if _present(start, lambda y: end(start(y)), x, t)}
        assert accumulate_all(out, [t])[t] == expected, t


def test_temporal_filter_bad_arguments():
    """Not a function (or, for a window, not a number either): a `GraphError` naming
    the operator, raised where the dataflow is built."""
    from ddflow import Dataflow
    from ddflow.errors import GraphError
    _s, c = Dataflow().new_collection()
    with pytest.raises(GraphError, match="temporal_filter"):
        c.temporal_filter(3, lambda x: 5)
    with pytest.raises(GraphError, match="sliding_window"):
        c.sliding_window(lambda x: x, "wide")


def test_temporal_filter_bound_not_a_time():
    """A bound that is not a time fails the run with a typed error naming the
    operator, the record and the bound, and the dataflow runs on once it is fixed."""
    from ddflow import Dataflow
    from ddflow.errors import DataflowError
    bounds = {"upper": "soon"}
    df = Dataflow()
    s, c = df.new_collection("xs")
    cap = c.temporal_filter(lambda x: 0, lambda x: bounds["upper"]).capture()
    s.insert(7)
    s.advance_to(1)
    with pytest.raises(DataflowError, match=r"bounds must be times.*'soon'.*operator: temporal_filter") as info:
        df.run()
    assert "record: 7" in str(info.value)
    assert cap.updates == []                                # nothing half done
    bounds["upper"] = 2
    df.run()
    assert cap.updates == [(7, 0, 1), (7, 2, -1)]
