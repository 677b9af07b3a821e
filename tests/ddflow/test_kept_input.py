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
from ddflow import UserFunctionError, column_batch, columnar, kept_input
from ddflow.kept_input import KeptUpdates
from lattice import Antichain, Product

#: Enough updates for columns (`columnar.wants_columns` at the default threshold).
N = columnar.COLUMNAR_MIN + 100
BAD = (13, 14)


@pytest.fixture(params=[(True, None), (True, 1000), (False, None)],
                ids=["columns", "columns-in-slices", "rows"])
def keep_columns(request, monkeypatch):
    """The switch on (whole, or in slices of 1,000: several slices joined under
    every test through the dataflow) and off."""
    on, chunk = request.param
    monkeypatch.setattr(kept_input, "KEEP_COLUMNS", on)
    if chunk:
        monkeypatch.setattr(kept_input, "CHUNK", chunk)
    return on


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
       st.lists(_TIME, max_size=2), st.sampled_from([1, 3, kept_input.CHUNK]))
def test_rows_of_kept_are_the_updates_given(ups, frontier, chunk):
    """`rows(keep(u)) == u`, values and types, for any mix (a mix that is not plain
    stays the list), and `in_advance` gives the open updates a row filter would;
    encoded whole or a few at a time (`chunk`), the slices joined."""
    with columnar.columnar(0):
        kept = kept_input.keep(ups, chunk)
        if type(kept) is KeptUpdates:   # a slice's layout is the whole's
            assert type(kept_input.keep(ups)) is KeptUpdates
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


def test_diffs_summing_past_the_bound_over_the_whole_stay_a_list():
    """Each slice's diffs are within `encode_records`' bound and the whole's are not:
    kept as columns, the engine's int64 consolidation of them would wrap around."""
    d = (1 << 50) - 1
    ups = [(7, 0, d)] * 8192
    assert type(kept_input.keep(ups[:4096], chunk=4096)) is KeptUpdates
    assert kept_input.keep(ups, chunk=4096) is ups


def test_small_or_not_plain_input_stays_a_list():
    small = [(1, 0, 1)]
    assert kept_input.keep(small) is small
    mixed = [("a", 0, 1)] * N
    assert kept_input.keep(mixed) is mixed
    with_tuples = [((i, 2), 0, 1) for i in range(N)]
    kept = kept_input.keep(with_tuples)
    assert type(kept) is KeptUpdates and kept.nbytes() < len(with_tuples) * 16


def test_slices_joined_keep_the_narrowed_layout():
    """Encoded in slices, the input is held as narrowly as whole: the constant time
    and diff one row, the keys int32; a layout that changes between slices (ints,
    then tuples) stays the list, as it does whole; a slice's constant that differs
    from the next's is a column."""
    ups = [((i, i + 1), 0, 1) for i in range(N)]
    kept = kept_input.keep(ups, chunk=1000)
    whole = kept_input.keep(ups)
    assert kept.nbytes() == whole.nbytes() == N * 8 + 2 * 8
    assert kept.rows() == ups
    mixed = [(i, 0, 1) for i in range(N // 2)] + [((i, 1), 0, 1) for i in range(N // 2)]
    assert kept_input.keep(mixed, chunk=1000) is mixed
    two_times = [((i, 1), i // 1000, 1) for i in range(N)]
    kept = kept_input.keep(two_times, chunk=1000)
    assert kept.rows() == two_times and kept.nbytes() == N * 8 + N * 4 + 8


# -- a load handed to the engine as columns (`LocalEngine.takes_columns`) ----------

@pytest.fixture(params=[True, False], ids=["handed-columns", "handed-rows"])
def handed_columns(request, monkeypatch):
    from ddflow.engine.local import LocalEngine
    monkeypatch.setattr(LocalEngine, "takes_columns", request.param)
    return request.param


@pytest.fixture(params=[True, False], ids=["semijoin-columns", "semijoin-rows"])
def columns_out(request):
    from operators.join import set_columns_out
    old = set_columns_out(request.param)
    yield request.param
    set_columns_out(old)


def _reach(edges, roots, product: bool, bad=None, library: bool = False):
    """Reachability (input, enter, arrangement by key, semijoin in a loop) whose
    map after the semijoin fails on the edge `bad` (once a round reaches it, after
    the load was arranged); the dataflow, sessions and capture."""
    def dst(e):
        if e == bad:
            raise ValueError("the bad edge")
        return e[1]

    def step(reached):
        scope = reached.scope
        return (ec.enter(scope).semijoin(reached).map(dst)
                .concat(rc.enter(scope)).distinct())
    df = ddflow.Dataflow(time=Product(0, 0) if product else 0)
    e_in, ec = df.new_collection("edges")
    r_in, rc = df.new_collection("roots")
    if library:     # its map of the semijoin's output takes columns (`on_columns`)
        from ddflow.algorithms import reachability
        out = reachability(ec, rc).capture()
    else:
        out = rc.iterate(step).capture()
    e_in.extend([(e, _time(product, 0), 1) for e in edges])
    r_in.extend([(r, _time(product, 0), 1) for r in roots])
    e_in.advance_to(_time(product, 1)); r_in.advance_to(_time(product, 1))
    return df, e_in, r_in, out


def _plain_reach(edges, roots) -> set:
    succ: dict = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    seen, stack = set(roots), list(roots)
    while stack:
        for b in succ.get(stack.pop(), ()):
            if b not in seen:
                seen.add(b); stack.append(b)
    return seen


@pytest.mark.parametrize("library", [True, False], ids=["library", "own-map"])
@pytest.mark.parametrize("product", [False, True], ids=["int", "product"])
def test_a_load_handed_as_columns_reaches_what_rows_do(keep_columns, handed_columns,
                                                       columns_out, product, library):
    import random
    rng = random.Random(5)
    edges = sorted({(rng.randrange(3000), rng.randrange(3000)) for _ in range(N)})
    df, e_in, r_in, out = _reach(edges, [0, 1, 2], product, library=library)
    df.run()
    assert {d for d, _m in out.at(_time(product, 0)).items()} == _plain_reach(edges, [0, 1, 2])
    # An epoch of deletions after the load: the columnar batches are the trace.
    gone = edges[: N // 2]
    for e in gone:
        e_in.remove(e)
    e_in.advance_to(_time(product, 2)); r_in.advance_to(_time(product, 2))
    df.run()
    assert {d for d, _m in out.at(_time(product, 1)).items()} == _plain_reach(
        edges[N // 2:], [0, 1, 2])


@pytest.mark.parametrize("product", [False, True], ids=["int", "product"])
def test_a_load_handed_as_columns_rolls_back_whole(keep_columns, handed_columns,
                                                   columns_out, product):
    """The map after the semijoin fails in a round, after the load was arranged and
    joined as columns: every operator is put back, the sessions get every update
    back, and the discarded edge's absence is the only difference after the rerun."""
    import random
    rng = random.Random(6)
    edges = sorted({(rng.randrange(2000), rng.randrange(2000)) for _ in range(N)})
    bad = edges[len(edges) // 3]
    df, e_in, r_in, out = _reach(edges, [bad[0]], product, bad=bad)
    given_edges = e_in.pending
    with pytest.raises(UserFunctionError) as info:
        df.run()
    assert e_in.pending == given_edges and out.updates == []
    # Nothing of the failed step stays in a trace (the arrangement's columnar batch,
    # the input's history) or in a buffer.
    assert sum(r["trace_records"] for r in df.metrics()) == 0
    assert all(not op.output and not op.capabilities() for node in df.nodes
               for op in df.engine.operators(node))
    assert [(s.name, d) for s, d, _t, _r in info.value.inputs] == [("edges", bad)]
    df.discard(info.value)
    df.run()
    rest = [e for e in edges if e != bad]
    assert {d for d, _m in out.at(_time(product, 0)).items()} == _plain_reach(rest, [bad[0]])


def test_column_helpers_agree_with_their_rows():
    """`field`, `as_pairs`, `record_time_counts` and `semijoin_columns` read as the
    row functions they stand for."""
    from collections import Counter
    from ddflow import column_join
    ups = [((i % 7, i % 5), Product(i % 2, 0), 1 + i % 3) for i in range(40)]
    c = columnar.encode_records(ups, sort=False)
    assert columnar.records(column_batch.field(c, 1)) == [(d[1], t, r) for d, t, r in ups]
    assert column_batch.field(c, 2) is None
    assert column_batch.record_time_counts(c) == Counter(t for _d, t, _r in ups)
    keyed = column_batch.as_pairs(c)
    assert columnar.updates(keyed) == ups
    right = columnar.encode([((k, ()), Product(0, 1), 1) for k in (1, 3)])
    made, _n = column_join.join_columns(keyed, right, False, 1, "semijoin")
    got = columnar.records(column_join.semijoin_columns([made], -1))
    expect = Counter()
    for (k, a), t, r in ups:
        if k in (1, 3):
            expect[((k, a), Product(t.outer, 1))] += r
    assert {(d, t): r for d, t, r in got} == dict(expect)
