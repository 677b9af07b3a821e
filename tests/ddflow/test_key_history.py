"""`KeyHistory`: advanced by a floor, moved on along later floors, always equal to
building it afresh at the floor it has reached."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from ddflow.key_history import KeyHistory
from ddflow.testing import times
from ddflow.testing.times import grid
from ddflow.updates import accumulate
from lattice import join, less_equal

KINDS = st.sampled_from(["product", "product3", "int"])


@settings(max_examples=300)
@given(data=st.data())
def test_advance_along_floors_equals_building_afresh(data):
    kind = data.draw(KINDS)
    updates = data.draw(st.lists(st.tuples(st.integers(0, 3), times(kind, 3),
                                           st.sampled_from([-2, -1, 1, 2])), max_size=25))
    floor = data.draw(times(kind, 3))
    h = KeyHistory.build(updates, floor)
    h._check(updates)
    for _ in range(data.draw(st.integers(1, 4))):
        # The next floor is in advance of the last (a join keeps it so).
        floor = join(floor, data.draw(times(kind, 3)))
        h.advance(floor)
        h._check(updates)
        for u in grid(kind, 4):
            if not less_equal(floor, u):
                continue
            acc = dict(h.base)
            for t, v, r in h.ahead():
                if less_equal(t, u):
                    acc[v] = acc.get(v, 0) + r
            assert {v: r for v, r in acc.items() if r} == accumulate(updates, u)


def test_a_chain_of_floors_touches_each_update_once():
    """Floors climbing the rounds of a loop: each update is touched when the floor
    reaches it, not at every move."""
    from lattice import Product as P
    updates = [(r % 3, P(0, r), 1 if r % 2 else -1) for r in range(100)]
    h = KeyHistory.build(updates, P(1, 0))
    touched = sum(h.advance(P(1, r)) for r in range(1, 100))
    assert touched == 99
    assert len(h.ahead()) == 0
