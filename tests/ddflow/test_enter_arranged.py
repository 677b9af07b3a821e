"""`Arranged.enter`: a loop reads an outer arrangement with times mapped on read
(`t -> Product(t, 0)`) instead of arranging the entered collection again."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

import ddflow
from ddflow.testing import updates
from tests.strategies import SCHEDULES, assert_law

KINDS = st.sampled_from(["int", "product"])


def _reach(edges, roots, reuse: bool = True):
    """Nodes reachable from the roots (both as sets).  The edges are arranged
    outside the loop; with `reuse` the loop reads that arrangement (`enter` of an
    arranged collection), without it the loop enters a copy and arranges it."""
    links = edges.distinct()
    links.arrange_by_key()
    start = roots.distinct()
    entering = links if reuse else links.map(lambda e: e, name="copy")

    def step(reached):
        scope = reached.scope
        return (reached.map(lambda n: (n, ()))
                .join_map(entering.enter(scope), lambda _s, _u, d: d)
                .concat(start.enter(scope)).distinct())
    return start.iterate(step)


def _reach_oracle(edges: dict, roots: dict) -> dict:
    links = {e for e, m in edges.items() if m > 0}
    seen = {n for n, m in roots.items() if m > 0}
    todo = list(seen)
    while todo:
        s = todo.pop()
        for a, b in links:
            if a == s and b not in seen:
                seen.add(b)
                todo.append(b)
    return {n: 1 for n in seen}


@settings(max_examples=100, deadline=None)
@given(data=st.data(), kind=KINDS, schedule=SCHEDULES, workers=st.sampled_from([1, 3]))
def test_law_of_a_loop_reading_an_entered_arrangement(data, kind, schedule, workers):
    pairs = st.tuples(st.integers(0, 4), st.integers(0, 4))
    edges = data.draw(updates(kind, data=pairs, max_value=3, max_size=24))
    roots = data.draw(updates(kind, data=st.integers(0, 4), max_value=2, max_size=4))
    assert_law(_reach, _reach_oracle, [edges, roots], schedule, workers)


def _arranged_records(reuse: bool) -> tuple[dict, dict]:
    df = ddflow.Dataflow()
    e_in, edges = df.new_collection()
    r_in, roots = df.new_collection()
    out = _reach(edges, roots, reuse).capture()
    for i in range(200):
        e_in.insert((i, i + 1))
    r_in.insert(0)
    for epoch, cut in enumerate([100, 50], start=1):
        e_in.remove((cut, cut + 1))
        e_in.advance_to(epoch)
        r_in.advance_to(epoch)
        df.run()
    assert out.at(1) == {n: 1 for n in range(51)}
    by_scope: dict = {}
    for row in df.metrics():
        if row["kind"] == "arrange":
            key = "root" if row["scope"] == "root" else "loop"
            by_scope[key] = by_scope.get(key, 0) + row["records_in"]
    reads = {row["operator"]: row["work"] for row in df.metrics() if row["kind"] == "join"}
    return by_scope, reads


def test_entered_arrangement_arranges_nothing_again():
    """The edges, arranged outside the loop, are read inside it as they are: the
    loop arranges none of their 200 updates again (a copy entered instead is), and
    the join reads the same records either way."""
    once, reads_once = _arranged_records(True)
    again, reads_again = _arranged_records(False)
    assert once["root"] == again["root"]
    assert again["loop"] - once["loop"] == 200
    assert reads_once == reads_again


def test_readers_inside_compact_the_outer_trace_by_their_epochs():
    """A reader at `Product(o, r)` and later reads outer times up to `o`: the outer
    trace may compact to `{o}`, not further; entered, its times read at round 0."""
    from lattice import Antichain, Product
    from operators.arrange import Arrange, EnteredArrangement
    outer = Arrange(name="links")
    entered = EnteredArrangement(outer)
    rid = entered.register_reader()
    outer.on_input(0, [(("a", 1), 0, 1), (("a", 2), 1, 1)])
    outer.on_frontier([Antichain([2])])
    entered.on_input(0, outer.take_output())
    assert sorted(entered.take_output()) == [(("a", 1), Product(0, 0), 1),
                                             (("a", 2), Product(1, 0), 1)]
    entered.advance_reader(rid, Antichain([Product(1, 5), Product(3, 0)]))
    assert outer.trace.logical_compaction == Antichain([1])
    outer.trace.compact()
    assert sorted(entered.trace.get("a")) == [(1, Product(1, 0), 1), (2, Product(1, 0), 1)]
