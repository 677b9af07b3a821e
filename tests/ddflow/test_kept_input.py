"""A step's input kept as columns (`ddflow.kept_input`) gives every input back.

A failing step whose large plain input was kept as columns leaves the sessions'
pending updates as they were (same values, same order, repeats kept), the state
unchanged, and blames the record; the next run after `discard(err)` gives what a
step without it gives.  Each test runs with the switch on and off
(`KEEP_COLUMNS`), at int and `Product` times.  The round trip `rows(keep(u)) == u`
and the open updates after a success are checked under hypothesis.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import ddflow
from ddflow import UserFunctionError, columnar, kept_input
from ddflow.kept_input import KeptUpdates
from lattice import Antichain, Product

#: Enough updates for columns (`columnar.wants_columns` at the default threshold).
N = columnar.COLUMNAR_MIN + 100
BAD = (13, 14)


@pytest.fixture(params=[True, False], ids=["columns", "rows"])
def keep_columns(request, monkeypatch):
    monkeypatch.setattr(kept_input, "KEEP_COLUMNS", request.param)
    return request.param


def _time(product: bool, t: int):
    return Product(t, 0) if product else t


def _pending(product: bool, epoch: int) -> list[tuple]:
    """N plain updates at the epoch's time, a repeat and a retraction among them,
    and the record the map fails on."""
    t = _time(product, epoch)
    ups = [((i, i * 7 % 1000), t, 1) for i in range(N)]
    ups += [((3, 21), t, 1), ((5, 35), t, -1), (BAD, t, 1), ((1 << 40, 2), t, 2)]
    return ups


def _fails_on_bad(pair):
    if pair == BAD:
        raise ValueError("the bad record")
    return pair[1] % 10


@pytest.mark.parametrize("product", [False, True], ids=["int", "product"])
def test_a_failing_step_kept_as_columns_gives_every_input_back(keep_columns, product):
    df = ddflow.Dataflow(time=Product(0, 0) if product else 0)
    s, c = df.new_collection("pairs")
    out = c.map(_fails_on_bad).count().capture()
    # A first, successful step: the state the failed one must leave as it was.
    s.insert((1, 2)); s.insert((2, 9))
    s.advance_to(_time(product, 1)); df.run()
    committed = list(out.updates)
    contents = s.contents(_time(product, 0))
    given_updates = _pending(product, 1)
    s.extend(given_updates)
    assert isinstance(kept_input.keep(s.pending), KeptUpdates) == keep_columns
    s.advance_to(_time(product, 2))
    with pytest.raises(UserFunctionError) as info:
        df.run()
    err = info.value
    # Every input back, in its order, repeats and retractions kept; nothing applied.
    assert s.pending == given_updates
    assert [type(u[1]) for u in s.pending] == [type(u[1]) for u in given_updates]
    assert out.updates == committed
    assert s.contents(_time(product, 0)) == contents
    # Blamed: the record the map failed on, as the session holds it.
    assert [(x.name, d, t, r) for x, d, t, r in err.inputs] == [
        ("pairs", BAD, _time(product, 1), 1)]
    assert s.discard(err) == [(s, BAD, _time(product, 1), 1)]
    df.run()
    expect: dict = {}
    for d, _t, r in [((1, 2), 0, 1), ((2, 9), 0, 1)] + [
            u for u in given_updates if u[0] != BAD]:
        expect[d[1] % 10] = expect.get(d[1] % 10, 0) + r
    assert out.at(_time(product, 1)) == {(k, v): 1 for k, v in expect.items() if v}
    assert s.pending == []


@pytest.mark.parametrize("product", [False, True], ids=["int", "product"])
def test_updates_at_open_times_stay_open_after_a_kept_step(keep_columns, product):
    df = ddflow.Dataflow(time=Product(0, 0) if product else 0)
    s, c = df.new_collection("pairs")
    c.capture()
    early, late = _time(product, 1), _time(product, 5)
    ups = [((i, 1), early if i % 3 else late, 1) for i in range(N)]
    s.extend(ups)
    s.advance_to(_time(product, 2))
    df.run()
    assert s.open_updates == [u for u in ups if u[1] == late]


_PLAIN = st.one_of(st.integers(-2**70, 2**70),
                   st.tuples(st.integers(-5, 5), st.integers(-2**40, 2**40)))
_TIME = st.one_of(st.integers(0, 3), st.builds(Product, st.integers(0, 3), st.integers(0, 3)))


@settings(max_examples=60)
@given(st.lists(st.tuples(_PLAIN, _TIME, st.integers(-3, 3)), max_size=20),
       st.lists(_TIME, max_size=2))
def test_rows_of_kept_are_the_updates_given(ups, frontier):
    """`rows(keep(u)) == u`, values and types, for any mix (a mix that is not plain
    stays the list), and `in_advance` gives the open updates a row filter would."""
    with columnar.columnar(0):
        kept = kept_input.keep(ups)
    back = kept_input.rows(kept)
    assert back == ups
    assert [tuple(map(type, u)) for u in back] == [tuple(map(type, u)) for u in ups]
    try:
        f = Antichain(frontier)
    except Exception:  # noqa: BLE001 - times of two lattices: no frontier
        return
    try:
        expect = [u for u in ups if f.less_equal(u[1])]
    except Exception:  # noqa: BLE001 - a frontier of another lattice than the times
        return
    assert kept_input.in_advance(kept, f) in (ups, expect)
    if type(kept) is KeptUpdates:
        assert kept.in_advance(f) == expect


def test_small_or_not_plain_input_stays_a_list():
    small = [(1, 0, 1)]
    assert kept_input.keep(small) is small
    mixed = [("a", 0, 1)] * N
    assert kept_input.keep(mixed) is mixed
    with_tuples = [((i, 2), 0, 1) for i in range(N)]
    kept = kept_input.keep(with_tuples)
    assert type(kept) is KeptUpdates and kept.nbytes() < len(with_tuples) * 16
