"""Traces: batches keep their descriptions, merging and compaction keep accumulations.

The oracle throughout is the plain list of updates a trace was fed: at every time in
advance of the trace's compaction frontier, `Trace.accumulate(t)` must equal
`accumulate(updates, t)` (compaction, as in McSherry et al.'s "Shared arrangements", never
changes an accumulation at a time in advance of the compaction frontier).  Grids are small
so that every point can be checked.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, invariant, precondition, rule)

from ddflow.diff import DiffVector
from ddflow.errors import BatchError, CompactionError, DataError, DiffError
from ddflow.testing import antichains, keyed_updates, minimum_of, nonempty_antichains
from ddflow.testing.times import grid
import ddflow.trace as trace_module
from ddflow import columnar
from ddflow.trace import Batch, Trace
from ddflow.updates import accumulate, consolidate
from lattice import Antichain, Product, advance_by, less_equal, sort_key

# Every test here runs with batches in rows and in columns (tests/conftest.py); the
# state machine (a unittest TestCase, which takes no fixtures) switches the layout
# itself, so its spines mix both.
both_layouts = pytest.mark.usefixtures("both_layouts")



def trace_of(ups, kind="product") -> Trace:
    lower = Antichain([minimum_of(kind)])
    tr = Trace(lower)
    tr.insert_updates(ups, lower, Antichain())
    return tr


def nested(tr: Trace, t) -> dict:
    """`accumulate(t)` rebuilt from `accumulate_key`, to test that read path too."""
    out = {}
    for key in tr.keys():
        for val, d in tr.accumulate_key(key, t).items():
            out[(key, val)] = d
    return out


# --- batches ---------------------------------------------------------------------

@both_layouts
def test_batch_from_updates_consolidates():
    b = Batch.from_updates([(("k", 1), 0, 1), (("k", 1), 0, 1), (("k", 2), 1, 1),
                            (("k", 2), 1, -1), (("j", 1), 2, 3)],
                           Antichain([0]), Antichain([3]))
    b._check()
    assert b.len == len(b) == 2
    assert b.data == {"k": ((1, 0, 2),), "j": ((1, 2, 3),)}
    assert b.since == b.lower == Antichain([0])
    assert consolidate(b.updates()) == [(("j", 1), 2, 3), (("k", 1), 0, 2)]


@both_layouts
def test_batch_rejects_times_outside_its_description():
    lower, upper = Antichain([Product(1, 0)]), Antichain([Product(3, 0), Product(1, 3)])
    ok = [(("k", "v"), Product(1, 2), 1), (("k", "v"), Product(2, 2), 1)]
    Batch.from_updates(ok, lower, upper)._check()
    with pytest.raises(BatchError) as info:
        Batch.from_updates(ok + [(("k", "v"), Product(0, 2), 1)], lower, upper)
    assert info.value.time == Product(0, 2) and info.value.record == ("k", "v")
    assert "lower" in str(info.value) and "Product(0, 2)" in str(info.value)
    with pytest.raises(BatchError, match="upper"):
        Batch.from_updates([(("k", "v"), Product(3, 1), 1)], lower, upper)
    with pytest.raises(BatchError, match="precede"):
        Batch.from_updates([], Antichain([5]), Antichain([2]))
    # An empty upper is unbounded; an empty lower admits nothing.
    Batch.from_updates([(("k", "v"), Product(9, 9), 1)], lower, Antichain())._check()
    with pytest.raises(BatchError):
        Batch.from_updates([(("k", "v"), 0, 1)], Antichain(), Antichain())


@both_layouts
def test_batch_rejects_bad_records():
    lo, up = Antichain([0]), Antichain()
    with pytest.raises(DataError):
        Batch.from_updates([("not a pair", 0, 1)], lo, up)
    with pytest.raises(DataError):
        Batch.from_updates([(([1], "v"), 0, 1)], lo, up)
    with pytest.raises(DataError):
        Batch.from_updates([(("k", "v"), 0)], lo, up)
    with pytest.raises(DiffError):
        Batch.from_updates([(("k", "v"), 0, 0.5)], lo, up)


@both_layouts
def test_batch_with_since_advances_times():
    b = Batch.from_updates([(("k", 1), 0, 1), (("k", 1), 2, 1)], Antichain([0]),
                           Antichain(), since=Antichain([3]))
    b._check()
    assert b.data == {"k": ((1, 3, 2),)}


# --- the trace API -----------------------------------------------------------------

@both_layouts
def test_empty_trace():
    for tr in (Trace(), Trace(Antichain([0]))):
        tr._check()
        assert tr.get("k") == [] and tr.values("k") == {} and tr.history("k", 1) == []
        assert tr.accumulate_key("k", 3) == {} and tr.accumulate(3) == {}
        assert tr.keys() == [] and tr.times("k") == set() and "k" not in tr
        assert len(tr) == tr.record_count() == tr.batch_count() == 0
        assert list(tr.cursor()) == []
        tr.compact()
        tr.restore(tr.snapshot())
        tr._check()
    assert Trace().upper is None and Trace().logical_compaction is None


@both_layouts
def test_trace_reads():
    tr = Trace(Antichain([0]))
    tr.insert_updates([(("a", 1), 0, 1), (("a", 2), 1, 1)], Antichain([0]), Antichain([2]))
    tr.insert_updates([(("a", 1), 2, -1), (("b", 1), 3, 1)], Antichain([2]),
                      Antichain([4]))
    tr._check()
    assert sorted(tr.get("a")) == [(1, 0, 1), (1, 2, -1), (2, 1, 1)]
    assert {v: sorted(h) for v, h in tr.values("a").items()} == \
        {1: [(0, 1), (2, -1)], 2: [(1, 1)]}
    assert sorted(tr.history("a", 1)) == [(0, 1), (2, -1)]
    assert tr.accumulate_key("a", 1) == {1: 1, 2: 1}
    assert tr.accumulate_key("a", 2) == {2: 1}
    assert tr.accumulate(3) == {("a", 2): 1, ("b", 1): 1}
    assert sorted(tr.keys()) == ["a", "b"] and "b" in tr and "c" not in tr
    assert tr.times("a") == {0, 1, 2}
    assert tr.upper == Antichain([4])
    assert list(tr.cursor()) == [("a", 1, 0, 1), ("a", 1, 2, -1), ("a", 2, 1, 1),
                                 ("b", 1, 3, 1)]


@both_layouts
def test_cursor_steps_and_consolidates_across_batches():
    tr = Trace()
    # Two batches that do not merge (the older is more than twice the newer)...
    tr.insert_updates([((k, 0), 0, 1) for k in range(5)] + [(("x", "v"), 1, 1)],
                      Antichain([0]), Antichain([2]))
    tr.insert_updates([(("x", "v"), 2, -1), (("y", None), 2, 1)], Antichain([2]),
                      Antichain([3]))
    assert tr.batch_count() == 2
    c = tr.cursor()
    seen = []
    while c.key_valid():
        while c.val_valid():
            seen.append((c.key(), c.val(), c.history()))
            c.step_val()
        c.step_key()
    # Mixed key types sort deterministically (ints before strs by type name).
    assert [k for k, _, _ in seen] == [0, 1, 2, 3, 4, "x", "y"]
    assert seen[5] == ("x", "v", [(1, 1), (2, -1)])
    # Histories that cancel only once compaction makes their times equal disappear.
    tr.insert_updates([(("y", None), 3, -1)], Antichain([3]), Antichain([4]))
    assert [k for k, *_ in tr.cursor()] == [0, 1, 2, 3, 4, "x", "x", "y", "y"]
    tr.set_logical_compaction(Antichain([4]))
    tr.compact()
    assert list(tr.cursor()) == [(k, 0, 4, 1) for k in range(5)]


@both_layouts
def test_compaction_frontier_cannot_move_backwards():
    tr = Trace(Antichain([Product(0, 0)]))
    tr.set_logical_compaction(Antichain([Product(1, 2)]))
    tr.set_logical_compaction(Antichain([Product(1, 2)]))   # staying put is fine
    with pytest.raises(CompactionError) as info:
        tr.set_logical_compaction(Antichain([Product(2, 1)]))
    assert "Product(1, 2)" in str(info.value) and "Product(2, 1)" in str(info.value)
    assert tr.logical_compaction == Antichain([Product(1, 2)])
    tr.set_logical_compaction(Antichain([Product(1, 3), Product(2, 2)]))
    tr.set_logical_compaction(Antichain())                   # the end: always allowed
    with pytest.raises(CompactionError):
        tr.set_logical_compaction(Antichain([Product(9, 9)]))


@both_layouts
def test_insert_before_the_upper_is_refused():
    tr = Trace(Antichain([0]))
    tr.insert_updates([(("a", 1), 0, 1)], Antichain([0]), Antichain([5]))
    with pytest.raises(BatchError, match="upper"):
        tr.insert_updates([(("a", 1), 3, 1)], Antichain([3]), Antichain([6]))
    assert tr.upper == Antichain([5]) and tr.accumulate(9) == {("a", 1): 1}
    tr.insert_updates([(("a", 1), 7, 1)], Antichain([7]), Antichain([8]))   # a gap is fine
    tr._check()


@both_layouts
def test_batches_merge_in_tiers():
    """O(FANIN log n) batches, and each record rewritten O(log n) times."""
    from ddflow.trace import FANIN
    tr = Trace(Antichain([0]))
    for i in range(1000):
        tr.insert_updates([((i % 7, i), i, 1)], Antichain([i]), Antichain([i + 1]))
        tr._check()
        assert tr.batch_count() <= (FANIN - 1) * (math.log(i + 1, FANIN) + 1)
    assert tr.record_count() == 1000
    assert tr.accumulate(499) == {(i % 7, i): 1 for i in range(500)}


@both_layouts
def test_snapshot_restore_round_trip():
    tr = Trace(Antichain([0]))
    tr.insert_updates([(("a", 1), 0, 1), (("b", 1), 1, 1)], Antichain([0]), Antichain([2]))
    snap = tr.snapshot()
    before = (tr.accumulate(5), tr.upper, tr.logical_compaction, tr.batch_count())
    tr.insert_updates([(("a", 1), 2, -1)], Antichain([2]), Antichain([3]))
    tr.set_logical_compaction(Antichain([3]))
    tr.compact()
    assert tr.accumulate(5) == {("b", 1): 1}
    tr.restore(snap)
    tr._check()
    assert (tr.accumulate(5), tr.upper, tr.logical_compaction, tr.batch_count()) == before
    # The restored trace is live again: it can take the rolled-back batch anew.
    tr.insert_updates([(("a", 1), 2, -1)], Antichain([2]), Antichain([3]))
    assert tr.accumulate(5) == {("b", 1): 1}


@both_layouts
def test_vector_diffs_in_a_trace():
    tr = trace_of([(("k", "v"), Product(0, 0), DiffVector(1, 5)),
                   (("k", "v"), Product(1, 0), DiffVector(1, 7)),
                   (("k", "v"), Product(0, 1), DiffVector(-1, -5))])
    tr.set_logical_compaction(Antichain([Product(1, 1)]))
    tr.compact()
    tr._check()
    assert tr.get("k") == [("v", Product(1, 1), DiffVector(1, 7))]


# --- compaction never changes accumulations in advance of the frontier --------------

KINDS = ["product", "product3", "altneu"]


@both_layouts
@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_compaction_preserves_accumulations(kind, data):
    n = 2 if kind == "product3" else 3
    ups = data.draw(keyed_updates(kind, max_value=n, max_size=25))
    frontier = data.draw(nonempty_antichains(kind, max_value=n + 1, max_size=3))
    tr = trace_of(ups, kind)
    tr.set_logical_compaction(frontier)
    tr.compact()
    tr._check()
    assert tr.batch_count() <= 1
    for t in grid(kind, n + 1):
        if frontier.less_equal(t):
            assert tr.accumulate(t) == accumulate(ups, t), t
            assert nested(tr, t) == accumulate(ups, t), t


@both_layouts
@settings(max_examples=60, deadline=None)
@given(keyed_updates("product", max_size=30), antichains("product", max_value=4))
def test_after_compact_no_zeros_and_no_duplicates(ups, frontier):
    tr = trace_of(ups)
    tr.set_logical_compaction(frontier)
    tr.compact()
    entries = [(k, v, t) for k in tr.keys() for v, t, d in tr.get(k)]
    assert all(d for k in tr.keys() for _, _, d in tr.get(k))
    assert len(entries) == len(set(entries)) == tr.record_count()
    # Every surviving time is the advanced form of an input time.
    assert {t for k in tr.keys() for t in tr.times(k)} <= \
        {advance_by(t, frontier) for _, t, _ in ups}


# --- batching: one batch or many, same accumulations -------------------------------

@both_layouts
@settings(max_examples=80, deadline=None)
@given(keyed_updates("product", max_value=4, max_size=40),
       st.lists(st.booleans(), min_size=6, max_size=6),
       st.one_of(st.none(), nonempty_antichains("product", max_value=3)))
def test_batching_one_vs_many(ups, cuts, since):
    one = trace_of(ups)
    # Many: slabs of outer time [i, j) cut where `cuts` says, each its own batch.
    many = Trace(Antichain([Product(0, 0)]))
    if since is not None:
        many.set_logical_compaction(since)
    bounds = [0] + [i for i in range(1, 6) if cuts[i]] + [6]
    for lo, hi in zip(bounds, bounds[1:]):
        slab = [u for u in ups if lo <= u[1].outer < hi]
        upper = Antichain([Product(hi, 0)]) if hi < 6 else Antichain()
        many.insert_updates(slab, Antichain([Product(lo, 0)]), upper)
        many._check()
    for t in grid("product", 5):
        if since is None or since.less_equal(t):
            assert many.accumulate(t) == one.accumulate(t) == accumulate(ups, t)


# --- the state machine --------------------------------------------------------------

GRID = grid("product", 4)
READ_GRID = grid("product", 5)
pairs = st.tuples(st.integers(0, 2), st.integers(0, 2))
diffs = st.sampled_from([-2, -1, 1, 2])


class TraceMachine(RuleBasedStateMachine):
    """Insert, compact, read, snapshot and roll back, with `_check()` after each step."""

    def __init__(self) -> None:
        super().__init__()
        self.layout = columnar.set_columnar_min(None)
        self.trace = Trace(Antichain([Product(0, 0)]))
        self.model: list = []
        self.saved: list = []

    @rule(data=st.data())
    def insert_batch(self, data):
        lower = self.trace.upper
        ahead = [t for t in GRID if lower.less_equal(t)]
        if not ahead:
            return
        upper = Antichain(data.draw(st.lists(st.sampled_from(ahead), min_size=1,
                                             max_size=3)))
        inside = [t for t in ahead if not upper.less_equal(t)]
        ups = []
        if inside:
            ups = data.draw(st.lists(st.tuples(pairs, st.sampled_from(inside), diffs),
                                     max_size=8))
        self.trace.insert_updates(ups, lower, upper)
        self.model.extend(ups)

    @rule(data=st.data())
    def advance_compaction(self, data):
        since = self.trace.logical_compaction
        ahead = [t for t in GRID if since.less_equal(t)]
        if not ahead:
            return
        new = Antichain(data.draw(st.lists(st.sampled_from(ahead), min_size=1, max_size=3)))
        self.trace.set_logical_compaction(new)

    @rule()
    def compact(self):
        self.trace.compact()
        assert self.trace.batch_count() <= 1

    @rule(data=st.data())
    def read(self, data):
        since = self.trace.logical_compaction
        ahead = [t for t in READ_GRID if since.less_equal(t)]
        if not ahead:
            return
        t = data.draw(st.sampled_from(ahead))
        expected = accumulate(self.model, t)
        assert self.trace.accumulate(t) == expected
        assert nested(self.trace, t) == expected

    @rule(data=st.data())
    def read_key_histories(self, data):
        """A reader's view at a floor: base plus the updates above it accumulate like
        the model at every time in advance of the floor and of the compaction
        frontier; kept histories (every key, however short, here) are moved on by
        later reads and checked by `_check()`."""
        since = self.trace.logical_compaction
        floors = [t for t in READ_GRID if since.less_equal(t)]
        if not floors:
            return
        floor = data.draw(st.sampled_from(floors))
        key = data.draw(st.integers(0, 2))
        old = trace_module._MEMO_MIN
        trace_module._MEMO_MIN = 1
        try:
            histories = self.trace.key_histories(key, floor)
        finally:
            trace_module._MEMO_MIN = old
        for u in [t for t in READ_GRID if less_equal(floor, t) and since.less_equal(t)]:
            acc: dict = {}
            for h in histories:
                for v, r in h.base.items():
                    acc[v] = acc.get(v, 0) + r
                for t, v, r in h.ahead():
                    if less_equal(t, u):
                        acc[v] = acc.get(v, 0) + r
            expected = {v: d for (k, v), d in accumulate(self.model, u).items() if k == key}
            assert {v: d for v, d in acc.items() if d} == expected, (key, floor, u)

    @rule()
    def snapshot(self):
        self.saved.append((self.trace.snapshot(), list(self.model)))

    @precondition(lambda self: self.saved)
    @rule()
    def restore(self):
        snap, model = self.saved.pop()
        self.trace.restore(snap)
        self.model = model

    @rule()
    def move_compaction_back(self):
        since = self.trace.logical_compaction
        behind = [t for t in GRID if not since.less_equal(t)]
        if behind:
            with pytest.raises(CompactionError):
                self.trace.set_logical_compaction(Antichain([behind[0]]))

    @rule(threshold=st.sampled_from([None, 0, 6 * columnar.BATCH_DIVISOR]))
    def switch_layout(self, threshold):
        """Rows, columns, or batches columnar from 6 updates: later batches and merges
        take it."""
        columnar.set_columnar_min(threshold)

    def teardown(self):
        columnar.set_columnar_min(self.layout)

    @invariant()
    def check(self):
        self.trace._check()


TraceMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40,
                                          deadline=None)
test_trace_state_machine = TraceMachine.TestCase


@both_layouts
def test_sort_key_is_a_linear_extension_on_the_test_grid():
    # The cursor sorts times by sort_key: on a grid, <= must imply key order.
    from lattice import less_equal
    for a, b in itertools.product(grid("altneu", 2), repeat=2):
        if less_equal(a, b):
            assert sort_key(a) <= sort_key(b)
