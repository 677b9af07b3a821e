"""Delta queries, generic join and binary joins agree: with networkx, with nested loops.

The oracle of the accumulation law is a plain nested-loop evaluation
of the rule over the accumulated relations, written here independently of the
parser and the planners: multiplicities multiply across atoms, bindings sum.
"""

from __future__ import annotations

import pytest

import random
from collections import defaultdict

import networkx as nx
from hypothesis import given, settings, strategies as st

import ddflow
from ddflow.query import query
from ddflow.testing import check_law, evaluate, updates

# Every test here runs with batches in rows and in columns (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("both_layouts")

# Query shapes: (rule text, body as (relation, terms), head).  Terms: variable names
# (str) or constants (int, written in the rule as is).
TRIANGLE = ("tri(x, y, z) :- g(x, y), g(y, z), g(x, z)",
            [("g", ("x", "y")), ("g", ("y", "z")), ("g", ("x", "z"))], ("x", "y", "z"))
CYCLE4 = ("c(a, b, c, d) :- g(a, b), g(b, c), g(c, d), g(d, a)",
          [("g", ("a", "b")), ("g", ("b", "c")), ("g", ("c", "d")), ("g", ("d", "a"))],
          ("a", "b", "c", "d"))
CLIQUE4 = ("k(a, b, c, d) :- g(a, b), g(a, c), g(a, d), g(b, c), g(b, d), g(c, d)",
           [("g", ("a", "b")), ("g", ("a", "c")), ("g", ("a", "d")), ("g", ("b", "c")),
            ("g", ("b", "d")), ("g", ("c", "d"))], ("a", "b", "c", "d"))
MIXED = ("q(x, z) :- r(x, y, 1), s(y, z), s(z, x), t(x, x)",
         [("r", ("x", "y", 1)), ("s", ("y", "z")), ("s", ("z", "x")), ("t", ("x", "x"))],
         ("x", "z"))


def nested_loop(body, head, relations: dict) -> dict:
    """Every way of picking one tuple per atom that agrees on variables and
    constants; the head tuple's multiplicity is the product of the picks'."""
    out: dict = defaultdict(int)

    def go(i: int, env: dict, w: int) -> None:
        if i == len(body):
            out[tuple(env[v] for v in head)] += w
            return
        name, terms = body[i]
        for tup, m in relations[name].items():
            if len(tup) != len(terms):
                continue
            env2 = dict(env)
            for term, x in zip(terms, tup):
                if not isinstance(term, str):
                    if x != term:
                        break
                elif env2.setdefault(term, x) != x:
                    break
            else:
                go(i + 1, env2, w * m)

    go(0, {}, 1)
    return {k: v for k, v in out.items() if v}


def _strategies(kind: str) -> list[str]:
    return ["delta", "binary", "generic"] if kind == "int" else ["delta", "binary"]


def _check_shape(shape, inputs: list, names: list[str], kind: str, schedule: str,
                 workers: int = 1) -> None:
    rule, body, head = shape

    def f(*accs):
        return nested_loop(body, head, dict(zip(names, accs)))

    outs = {}
    for strategy in _strategies(kind):
        out = evaluate(lambda *cs: query(rule, strategy=strategy, **dict(zip(names, cs))),
                       inputs, schedule=schedule, workers=workers)
        check_law(out, inputs, f)
        outs[strategy] = out
    # Equal accumulations everywhere (checked by the law) and, consolidated, equal updates
    # for int times, where every strategy emits at the input times.
    if kind == "int":
        assert outs["delta"] == outs["binary"] == outs["generic"]


def _edges(n: int):
    return st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))


KINDS = st.sampled_from(["int", "product"])
SCHEDULES = st.sampled_from(["once", "each"])


@settings(max_examples=120)
@given(data=st.data(), kind=KINDS, schedule=SCHEDULES)
def test_agree_triangle(data, kind, schedule):
    g = data.draw(updates(kind, data=_edges(4), max_value=2, max_size=20))
    _check_shape(TRIANGLE, [g], ["g"], kind, schedule)


@settings(max_examples=60)
@given(data=st.data(), kind=KINDS, schedule=SCHEDULES)
def test_agree_four_cycle(data, kind, schedule):
    g = data.draw(updates(kind, data=_edges(4), max_value=2, max_size=12))
    _check_shape(CYCLE4, [g], ["g"], kind, schedule)


@settings(max_examples=50)
@given(data=st.data(), kind=KINDS, schedule=SCHEDULES)
def test_agree_four_clique(data, kind, schedule):
    g = data.draw(updates(kind, data=_edges(3), max_value=2, max_size=12))
    _check_shape(CLIQUE4, [g], ["g"], kind, schedule)


@settings(max_examples=60)
@given(data=st.data(), kind=KINDS, schedule=SCHEDULES)
def test_agree_constants_repeats_three_relations(data, kind, schedule):
    r = data.draw(updates(kind, data=st.tuples(st.integers(0, 2), st.integers(0, 2),
                                               st.integers(0, 1)), max_value=2, max_size=8))
    s = data.draw(updates(kind, data=_edges(3), max_value=2, max_size=8))
    t = data.draw(updates(kind, data=_edges(3), max_value=2, max_size=6))
    _check_shape(MIXED, [r, s, t], ["r", "s", "t"], kind, schedule)


@settings(max_examples=20)
@given(data=st.data(), kind=KINDS)
def test_agree_triangle_three_workers(data, kind):
    g = data.draw(updates(kind, data=_edges(4), max_value=2, max_size=14))
    _check_shape(TRIANGLE, [g], ["g"], kind, "each", workers=3)


def test_agree_with_networkx_over_thirty_epochs():
    rng = random.Random(5)
    nodes = range(12)
    df = ddflow.Dataflow()
    s, g = df.new_collection()
    caps = {strategy: query(TRIANGLE[0], g=g, strategy=strategy).capture()
            for strategy in ("delta", "generic", "binary")}
    graph = nx.Graph()
    graph.add_nodes_from(nodes)
    # Undirected edges stored once as (low, high): each triangle x < y < z matches the
    # directed pattern exactly once.
    for epoch in range(30):
        for _ in range(rng.randint(1, 6)):
            a, b = sorted(rng.sample(nodes, 2))
            if graph.has_edge(a, b):
                graph.remove_edge(a, b)
                s.remove((a, b))
            else:
                graph.add_edge(a, b)
                s.insert((a, b))
        s.advance_to(epoch + 1)
        df.run()
        expected = {tuple(sorted(c)): 1 for c in nx.enumerate_all_cliques(graph) if len(c) == 3}
        for strategy, cap in caps.items():
            assert cap.at(epoch) == expected, (strategy, epoch)
    assert caps["delta"].updates == caps["generic"].updates == caps["binary"].updates


@settings(max_examples=60)
@given(data=st.data(), schedule=SCHEDULES)
def test_agree_triangle_compacting_every_epoch(data, schedule):
    """Product times over more epochs, the half joins releasing their indices at
    every epoch (`Product(low - 1, 0)`): still the law at every time."""
    from unittest import mock
    import operators.wcoj.half_join as half_join_module
    g = data.draw(updates("product", data=_edges(4), max_value=5, max_size=24))
    with mock.patch.object(half_join_module, "RELEASE_EVERY", 1):
        _check_shape(TRIANGLE, [g], ["g"], "product", schedule)
