"""Explanations of worst-case optimal joins (delta queries, Generic Join): a plan is
read as one conjunctive query, so a demanded head tuple, projected on each atom's
variables the head binds, selects that atom's records.  Over random small graphs
the explanation reproduces its record (`check()`), maintained equals one-off, and
holds only records agreeing with the record on some atom's projection (for a head
binding every variable: exactly the records of the record's bindings)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ddflow
from ddflow.query import atom_shape, parse, query, shape_matcher
from lattice import Product

pytestmark = pytest.mark.filterwarnings("ignore::ddflow.StalledRunWarning")

RULES = (
    "tri(x, y, z) :- g(x, y), g(y, z), g(x, z)",           # head binds every variable
    "ends(x, z) :- g(x, y), g(y, z), g(x, z)",             # a variable projected away
    "sq(a, b, c, d) :- g(a, b), g(b, c), g(c, d), g(a, d)",
    "fan(y, z) :- g(1, y), g(y, z), g(1, z)",              # a constant
    "two(x, y, z) :- g(x, y), h(y, z), h(x, z)",           # two relations
)

edge_sets = st.sets(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=12)


def _agrees(rule, name, record, z):
    """Whether input record `record` of relation `name` matches some atom of `rule`
    over it and agrees with head tuple `z` on the variables the head binds."""
    r = parse(rule)
    head = tuple(t.var for t in r.head.terms)
    for a in r.body:
        if a.name != name:
            continue
        vars_, shape = atom_shape(a)
        for x in shape_matcher(shape)(record):
            if all(x[k] == z[head.index(v)] for k, v in enumerate(vars_) if v in head):
                return True
    return False


def _bindings(rule, rels, z):
    """The records of every binding of `rule` giving `z` (for heads binding all)."""
    r = parse(rule)
    head = tuple(t.var for t in r.head.terms)
    value = dict(zip(head, z))
    out = {}
    for a in r.body:
        rec = tuple(value[t.var] if t.var is not None else t.value for t in a.terms)
        assert rec in rels[a.name]
        out.setdefault(a.name, {})[rec] = rels[a.name][rec]
    return out


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=edge_sets, h=edge_sets, cut=st.sets(st.tuples(st.integers(0, 4), st.integers(0, 4))),
       rule=st.sampled_from(RULES), strategy=st.sampled_from(["delta", "generic"]),
       product=st.booleans())
def test_worst_case_optimal_joins_explain_by_their_atoms_projections(g, h, cut, rule, strategy,
                                                                     product):
    """Two epochs (the second deletes some edges): every output record at each is
    explained as the one-off explains it and reproduces; when the head binds every
    variable, it holds only records agreeing with it on an atom's projection, and
    exactly its bindings' records."""
    if product:
        strategy = "delta"      # Generic Join takes int times only
    df = ddflow.Dataflow(Product(0, 0) if product else 0)
    g_in, gc = df.new_collection("g")
    h_in, hc = df.new_collection("h")
    rels = {"g": gc, "h": hc} if "h(" in rule else {"g": gc}
    cap = query(rule, strategy=strategy, **rels).capture()
    mx = df.explain(cap)
    first = Product(0, 0) if product else 0
    second = Product(1, 0) if product else 1
    g_in.extend([(e, first, 1) for e in g])
    h_in.extend([(e, first, 1) for e in h])
    g_in.extend([(e, second, -1) for e in g & cut])
    contents = ((first, {"g": dict.fromkeys(g, 1), "h": dict.fromkeys(h, 1)}),
                (second, {"g": dict.fromkeys(g - cut, 1), "h": dict.fromkeys(h, 1)}))
    # Every record of the output at its first time is a question from the start.
    plain = ddflow.Dataflow(Product(0, 0) if product else 0)
    pg_in, pg = plain.new_collection("g")
    ph_in, ph = plain.new_collection("h")
    pcap = query(rule, strategy=strategy,
                 **({"g": pg, "h": ph} if "h(" in rule else {"g": pg})).capture()
    pg_in.extend([(e, first, 1) for e in g]); ph_in.extend([(e, first, 1) for e in h])
    pg_in.close(); ph_in.close()
    plain.run()
    for z in pcap.at(first):
        mx.questions.update_at(z, first, 1)
    for s in (g_in, h_in, mx.questions):
        s.close()
    df.run()
    head_binds_all = rule.startswith(("tri", "sq", "two"))
    for t, now in contents:
        for z, m in cap.at(t).items():
            if not mx.asked(t).get(z):
                continue
            got = mx.explanation(z, t)
            assert got.inputs == cap.explain(z, t).inputs, (z, t)
            assert got.check()
            if head_binds_all:
                # (a head projecting a variable away keeps its half joins' rules:
                # sound, not this concise; `explain_conjunctive.conjunctive_plans`)
                for name, recs in got.inputs.items():
                    assert all(_agrees(rule, name, x, z) for x in recs), (z, name, recs)
                want = _bindings(rule, now, z)
                assert {k: v for k, v in got.inputs.items() if v} == want, (z, got.inputs)


@pytest.mark.parametrize("strategy", ["delta", "generic", "binary"])
def test_a_triangle_beside_fifty_unrelated_edges_is_explained_by_its_three(strategy):
    df = ddflow.Dataflow()
    g_in, g = df.new_collection("g")
    tri = query("tri(x, y, z) :- g(x, y), g(y, z), g(x, z)", strategy=strategy, g=g).capture()
    for e in [(1, 2), (2, 3), (1, 3)] + [(10 + i, 100 + i) for i in range(50)]:
        g_in.insert(e)
    g_in.advance_to(1)
    df.run()
    three = {"g": {(1, 2): 1, (2, 3): 1, (1, 3): 1}}
    ex = tri.explain((1, 2, 3))
    assert ex.inputs == three and ex.check()
    mx = df.explain(tri)
    mx.questions.insert((1, 2, 3))
    mx.questions.advance_to(2)
    g_in.advance_to(2)
    df.run()
    assert mx.explanation((1, 2, 3), 1).inputs == three


def test_a_cyclic_datalog_rule_inside_recursion_is_explained_by_its_atoms():
    """Delta queries inside a loop (Product times) explain and reproduce, one-off and
    maintained alike."""
    df = ddflow.Dataflow()
    e_in, e = df.new_collection("e")
    out = ddflow.datalog("""
        r(x, y) :- e(x, y), e(y, x).
        r(x, z) :- r(x, y), r(y, z), e(x, z).
    """, e=e)
    cap = out["r"].capture("r")
    noise = [(20 + i, 40 + i) for i in range(30)]
    edges = [(0, 1), (1, 0), (1, 2), (2, 1), (0, 2)] + noise
    for edge in edges:
        e_in.insert(edge)
    e_in.advance_to(1)
    df.run()
    ex = cap.explain((0, 2))
    assert ex.check()
    # The first rule binds every variable: read as one conjunctive query, it demands
    # only what its head tuples project onto.  The second projects `y` away, so it
    # keeps its half joins' rules (sound; not this concise: the noise edges reach it
    # through `r`), see `explain_conjunctive.conjunctive_plans`.
    assert {(0, 1), (1, 0), (1, 2), (2, 1), (0, 2)} <= set(ex.inputs["e"])
    mx = df.explain(cap)
    mx.questions.insert((0, 2))
    mx.questions.advance_to(2)
    e_in.advance_to(2)
    df.run()
    assert mx.explanation((0, 2), 1).inputs == ex.inputs


@pytest.mark.parametrize("strategy", ["delta", "generic"])
def test_a_projected_head_tuple_cancelled_between_bindings_is_explained_whole(strategy):
    """`ends(0, 5)` has two bindings, y=0 (+1) and y=2 (-1: `g` holds a negative
    record): net 0 in the full run.  An explanation holding only one of them would
    make it appear, so the record that cancels it must be demanded too (a review
    found the atom rule leaving it out: check() gave 3, not 2)."""
    df = ddflow.Dataflow()
    g_in, g = df.new_collection("g")
    ends = query("ends(x, z) :- g(x, y), g(y, z), g(x, z)", strategy=strategy, g=g)
    cap = ends.map(lambda r: r[0]).capture()
    maintained = df.explain(cap)
    g_in.extend([((0, 0), 0, 1), ((0, 5), 0, 1), ((0, 2), 0, 1), ((2, 5), 0, -1)])
    maintained.questions.insert(0)
    for s in (g_in, maintained.questions):
        s.advance_to(1)
    df.run()
    assert cap.at(0) == {0: 2}
    for ex in (maintained.explanation(0, 0), cap.explain(0, 0)):
        assert ex.inputs["g"][(2, 5)] == -1
        ex.check()
