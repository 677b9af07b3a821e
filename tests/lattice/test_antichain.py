"""`Antichain` against brute force, and `MutableAntichain` under a state machine.

Oracles: an antichain stands for the up-set of the times it was built from ("`s` is
in advance of `A`" iff some input time is `<= s`), so every method is checked
against that definition over the input list or over a whole small grid of times.
`MutableAntichain` is driven by a hypothesis `RuleBasedStateMachine` against a plain
dict of counts, with `_check()` as invariant.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant,
                                 rule, run_state_machine_as_test)

from lattice import (AltNeu, Antichain, MutableAntichain, Product, join, less_equal,
                     less_than, sort_key)
from lattice.errors import TimeError
from ddflow.testing.times import TIME_KINDS, antichains, times

kinds = pytest.mark.parametrize("kind", TIME_KINDS)
PROP = settings(max_examples=200)
MAX = 3  # component range 0..MAX: the grids below are the whole lattice drawn from


def all_times(kind: str, m: int = MAX) -> list[Any]:
    r = range(m + 1)
    return {
        "int": lambda: list(r),
        "product": lambda: [Product(a, b) for a in r for b in r],
        "product3": lambda: [Product(Product(a, b), c) for a in r for b in r for c in r],
        "altneu": lambda: [AltNeu(Product(a, b), n) for a in r for b in r
                           for n in (False, True)],
    }[kind]()


def time_lists(kind: str, max_size: int = 6) -> st.SearchStrategy[list[Any]]:
    return st.lists(times(kind, MAX), max_size=max_size)


def in_advance_brute(ts: list[Any], s: Any) -> bool:
    """The definition: `s` is in advance of the frontier of `ts`."""
    return any(less_equal(t, s) for t in ts)


# --- known answers -------------------------------------------------------------------

def test_known_answers() -> None:
    f = Antichain([Product(4, 8), Product(5, 3), Product(6, 9)])
    assert f.elements == (Product(4, 8), Product(5, 3))
    assert f.less_equal(Product(5, 8)) and not f.less_equal(Product(4, 4))
    assert f.less_equal(Product(4, 8)) and not f.less_than(Product(4, 8))
    assert f.less_than(Product(4, 9))
    assert Antichain.of(3, 1, 2) == Antichain([1]) and Antichain.of(3).insert(1) == Antichain([1])
    assert Antichain.of(Product(1, 0)).join(Antichain.of(Product(0, 1))) == \
        Antichain([Product(1, 1)])
    assert Antichain.of(Product(1, 0)).meet(Antichain.of(Product(0, 1))) == \
        Antichain([Product(0, 1), Product(1, 0)])
    assert repr(Antichain.of(2)) == "Antichain([2])" and list(Antichain.of(2)) == [2]
    assert len(f) == 2 and Product(5, 3) in f and Product(6, 9) not in f


def test_empty_antichain_is_finished() -> None:
    empty = Antichain()
    assert empty.is_empty() and len(empty) == 0 and empty == Antichain([])
    for kind in TIME_KINDS:
        for s in all_times(kind, 2):
            assert not empty.less_equal(s) and not empty.less_than(s)
            one = Antichain.of(s)
            assert one.dominates(empty)  # vacuously: nothing to be in advance of
            assert not empty.dominates(one)  # nothing is in advance of the empty one
            assert empty.join(one) == empty and one.join(empty) == empty
            assert empty.meet(one) == one and one.meet(empty) == one
    assert empty.dominates(empty)


# --- canonical form ------------------------------------------------------------------

@kinds
@PROP
@given(data=st.data())
def test_elements_are_the_minimal_input_times(kind: str, data: st.DataObject) -> None:
    ts = data.draw(time_lists(kind))
    a = Antichain(ts)
    els = a.elements
    assert set(els) <= set(ts)
    assert len(set(els)) == len(els)
    for x in els:  # mutually incomparable
        for y in els:
            assert x == y or not less_equal(x, y)
    for t in ts:  # every input time is above some element
        assert any(less_equal(e, t) for e in els)
    brute_minimal = {t for t in ts if not any(less_than(u, t) for u in ts)}
    assert set(els) == brute_minimal
    assert list(els) == sorted(els, key=sort_key)


@kinds
@PROP
@given(data=st.data())
def test_equal_up_sets_give_equal_antichains(kind: str, data: st.DataObject) -> None:
    ts = data.draw(time_lists(kind))
    a = Antichain(ts)
    # Same times in another order, duplicated, plus times above them: same frontier.
    shuffled = data.draw(st.permutations(ts))
    extra = [join(t, u) for t in ts for u in data.draw(time_lists(kind, 2))]
    b = Antichain(shuffled + ts + extra)
    assert a == b and hash(a) == hash(b) and a.elements == b.elements
    assert Antichain(a) == a and Antichain(a.elements) == a
    # Antichains are equal exactly when their up-sets (over the whole grid) are.
    c = Antichain(data.draw(time_lists(kind)))
    grid = all_times(kind)
    same_up_set = all(a.less_equal(s) == c.less_equal(s) for s in grid)
    assert (a == c) == same_up_set
    if a == c:
        assert hash(a) == hash(c)


@kinds
@PROP
@given(data=st.data())
def test_insert_is_construction_with_one_more_time(kind: str, data: st.DataObject) -> None:
    ts = data.draw(time_lists(kind))
    t = data.draw(times(kind, MAX))
    a = Antichain(ts)
    assert a.insert(t) == Antichain(ts + [t])
    assert a.insert(t).less_equal(t)
    assert (a.insert(t) == a) == a.less_equal(t)
    assert Antichain(ts) == a  # immutable: insert did not change a


# --- the order on frontiers, against the definition ----------------------------------

@kinds
@PROP
@given(data=st.data())
def test_less_equal_and_less_than_brute_force(kind: str, data: st.DataObject) -> None:
    ts = data.draw(time_lists(kind))
    a = Antichain(ts)
    for s in all_times(kind):
        assert a.less_equal(s) == in_advance_brute(ts, s)
        assert a.less_than(s) == any(less_than(t, s) for t in ts)


@kinds
@PROP
@given(data=st.data())
def test_dominates_is_up_set_inclusion(kind: str, data: st.DataObject) -> None:
    a = data.draw(antichains(kind, MAX, 4))
    b = data.draw(antichains(kind, MAX, 4))
    grid = all_times(kind)
    included = all(a.less_equal(s) for s in grid if b.less_equal(s))
    assert a.dominates(b) == included
    assert a.dominates(a)
    assert a.dominates(a.join(b)) and b.dominates(a.join(b))
    assert a.meet(b).dominates(a) and a.meet(b).dominates(b)
    if a.dominates(b) and b.dominates(a):
        assert a == b


@kinds
@PROP
@given(data=st.data())
def test_join_and_meet_brute_force(kind: str, data: st.DataObject) -> None:
    xs = data.draw(time_lists(kind, 4))
    ys = data.draw(time_lists(kind, 4))
    a, b = Antichain(xs), Antichain(ys)
    j, m = a.join(b), a.meet(b)
    for s in all_times(kind):
        # In advance of the join: of both; of the meet: of either.
        assert j.less_equal(s) == (in_advance_brute(xs, s) and in_advance_brute(ys, s))
        assert m.less_equal(s) == (in_advance_brute(xs, s) or in_advance_brute(ys, s))
    assert j == b.join(a) and m == b.meet(a)
    assert a.join(a) == a and a.meet(a) == a
    assert a.join(a.meet(b)) == a and a.meet(a.join(b)) == a


# --- MutableAntichain ----------------------------------------------------------------

def test_mutable_antichain_known_answers() -> None:
    m = MutableAntichain()
    assert m.is_empty() and m.frontier() == Antichain()
    assert m.update_iter([(Product(1, 0), 1), (Product(0, 1), 2)]) == \
        [(Product(0, 1), 1), (Product(1, 0), 1)]
    assert m.update_iter([(Product(1, 1), 1)]) == []  # above the frontier
    assert m.update_iter([(Product(0, 1), -1)]) == []  # count 2 -> 1
    assert m.update_iter([(Product(0, 1), -1)]) == [(Product(0, 1), -1)]
    assert m.frontier() == Antichain([Product(1, 0)])
    assert m.update_iter([(Product(0, 0), 1)]) == [(Product(0, 0), 1), (Product(1, 0), -1)]
    assert m.count(Product(1, 1)) == 1 and m.count(Product(5, 5)) == 0
    m._check()
    with pytest.raises(TimeError, match="negative"):
        m.update_iter([(Product(1, 1), -2)])
    assert MutableAntichain([(3, 1), (2, 1)]).frontier() == Antichain.of(2)


def test_mutable_antichain_failed_update_changes_nothing() -> None:
    m = MutableAntichain([(1, 1), (4, 1)])
    with pytest.raises(TimeError):
        # (0, +1) and (1, -1) are fine on their own; the batch fails as a whole.
        m.update_iter([(0, 1), (1, -1), (4, -2)])
    m._check()
    assert m.count(0) == 0 and m.count(1) == 1 and m.count(4) == 1
    assert m.frontier() == Antichain.of(1)
    with pytest.raises(TimeError):  # a count may not dip below zero within a batch
        m.update_iter([(7, -1), (7, 1)])
    assert m.count(7) == 0 and not m.less_equal(0) and m.less_equal(1)


class MutableAntichainMachine(RuleBasedStateMachine):
    """Counts per time against a dict model; subclassed once per time kind."""

    kind = "product"

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[Any, int] = {}

    @initialize(start=st.data())
    def start(self, start: st.DataObject) -> None:
        updates = start.draw(st.lists(st.tuples(times(self.kind, MAX),
                                                st.integers(0, 2)), max_size=3))
        self.m = MutableAntichain(updates)
        for t, d in updates:
            self.model[t] = self.model.get(t, 0) + d

    def _apply(self, updates: list[tuple[Any, int]]) -> None:
        """Apply to both, expecting TimeError exactly when some count would go
        negative along the way; check the reported frontier changes."""
        new = dict(self.model)
        negative = False
        for t, d in updates:
            new[t] = new.get(t, 0) + d
            negative = negative or new[t] < 0
        before = self.m.frontier()
        if negative:
            with pytest.raises(TimeError):
                self.m.update_iter(updates)
            assert self.m.frontier() == before
            return
        changes = self.m.update_iter(updates)
        self.model = new
        after = self.m.frontier()
        # Applying the changes to the previous frontier gives the new one.
        current = set(before.elements)
        for t, d in changes:
            if d == -1:
                assert t in current
                current.remove(t)
            else:
                assert d == 1 and t not in current
                current.add(t)
        assert current == set(after.elements)
        assert (changes == []) == (before == after)
        assert changes == sorted(changes, key=lambda td: (sort_key(td[0]), td[1]))

    @rule(data=st.data(), n=st.integers(1, 3))
    def add(self, data: st.DataObject, n: int) -> None:
        self._apply([(data.draw(times(self.kind, MAX)), n)])

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        held = sorted((t for t, n in self.model.items() if n > 0), key=sort_key)
        if not held:
            return
        t = data.draw(st.sampled_from(held))
        self._apply([(t, -data.draw(st.integers(1, self.model[t])))])

    @rule(data=st.data(), extra=st.integers(1, 2))
    def remove_below_zero(self, data: st.DataObject, extra: int) -> None:
        t = data.draw(times(self.kind, MAX))
        self._apply([(t, -(self.model.get(t, 0) + extra))])

    @rule(updates=st.data())
    def batch(self, updates: st.DataObject) -> None:
        pool = sorted(self.model, key=sort_key)
        t = st.sampled_from(pool) | times(self.kind, MAX) if pool else times(self.kind, MAX)
        self._apply(updates.draw(st.lists(st.tuples(t, st.integers(-2, 2)), max_size=5)))

    @invariant()
    def consistent(self) -> None:
        if not hasattr(self, "m"):
            return
        self.m._check()
        live = {t: n for t, n in self.model.items() if n}
        for t in set(self.model) | set(live):
            assert self.m.count(t) == live.get(t, 0)
        assert self.m.is_empty() == (not live)
        assert self.m.frontier() == Antichain(live)
        for s in all_times(self.kind, 2):
            assert self.m.less_equal(s) == in_advance_brute(list(live), s)


@kinds
def test_mutable_antichain_state_machine(kind: str) -> None:
    machine = type(f"MutableAntichainMachine_{kind}", (MutableAntichainMachine,),
                   {"kind": kind})
    run_state_machine_as_test(
        machine, settings=settings(max_examples=150, stateful_step_count=25))
