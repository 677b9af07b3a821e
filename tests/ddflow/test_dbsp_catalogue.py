"""The operator catalogue of the "Notes on DBSP" (section 2.9) on circuits: the worked
examples, and by hypothesis each operator against its plain Z-set function tick by tick
and against the engine's corresponding operator at every time (`test_oracle_*`,
`test_agree_*`).

The notes write Z-sets as `{element, timestamp, weight}` triples; here a triple at
timestamp `t` is pushed at tick `t`, and an expected output `{x, nil, w}` (no timestamp)
is the Z-set `{x: w}` of the tick the inputs were at.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings

from ddflow.circuit import (Circuit, aggregate, consolidate, delay, delay_trace,
                            differentiate, distinct, distinct_incremental, distinct_trace,
                            filter as c_filter, incremental_join, index_with, inspect,
                            integrate, integrate_trace, join_stream, join_trace,
                            join_trace_flipped, map as c_map, minus, negate, plus,
                            trace_append, untimed_trace_append, z1_trace)
from ddflow.testing import check_law, evaluate
from ddflow.updates import zset, zset_distinct, zset_minus, zset_plus
from lattice import Product
from tests.strategies import keyed_updates, updates

# -- helpers -----------------------------------------------------------------------------


def run(build, *inputs, ticks=None):
    """Build a circuit on one source per input (triples `(data, tick, weight)`), push
    each triple at its tick, run every tick, and return the circuit and what `build`
    returned (sinks)."""
    c = Circuit()
    sources = [c.source(f"in{k}") for k in range(len(inputs))]
    out = build(c, *sources)
    last = max((u[1] for inp in inputs for u in inp), default=0)
    for t in range(last + 1 if ticks is None else ticks):
        for src, inp in zip(sources, inputs):
            for d, s, w in inp:
                if s == t:
                    src.push(d, w)
        c.tick()
    return c, out


def per_tick(inp, t):
    """The Z-set of the triples at tick `t`."""
    return zset((d, w) for d, s, w in inp if s == t)


def integral(inp, t):
    """The running sum of the triples at ticks `<= t` (DBSP's I)."""
    return zset((d, w) for d, s, w in inp if s <= t)


def join_zsets(a, b, f=lambda k, v1, v2: (k, (v1, v2))):
    out = defaultdict(int)
    for (k1, v1), w1 in a.items():
        for (k2, v2), w2 in b.items():
            if k1 == k2:
                out[f(k1, v1, v2)] += w1 * w2
    return {d: w for d, w in out.items() if w}


def one_tick(build, *zsets):
    """Seed-style: every input at tick 0; the sink's Z-set at tick 0."""
    c, sink = run(lambda c, *s: c.sink(build(*s)),
                  *[[(d, 0, w) for d, w in z] for z in zsets])
    return sink.at(0)


# -- the worked examples of section 2.9 ----------------------------------------------


def test_aggregate_worked_example():
    out = one_tick(lambda s: aggregate("count", s),
                   [((1, "foo"), 1), ((1, "bar"), 1), ((2, "baz"), 1)])
    assert out == {(1, 2): 1, (2, 1): 1}


def test_consolidate_worked_example():
    # The seed writes the trace as 4-tuples {key, value, timestamp, weight}; the element
    # is the pair (key, value).  (It also has two typos, "{0, 1, 0, 1}." and
    # "{2, 4, 0 1}", read as the triples they mean.)
    trace = [((0, 0), 1), ((0, 0), -1), ((0, 1), 1), ((0, 1), 1), ((1, 2), 2),
             ((1, 3), 1), ((1, 3), -1), ((1, 4), -1), ((2, 2), 1), ((2, 4), 1)]
    out = one_tick(lambda s: consolidate(integrate_trace(s)), trace)
    assert out == {(0, 1): 2, (1, 2): 2, (1, 4): -1, (2, 2): 1, (2, 4): 1}


def test_distinct_worked_example():
    # {3, 0, 0} has weight 0: a Z-set has no such entry, so it is not pushed.
    out = one_tick(distinct, [(0, 1), (1, 2), (2, -1)])
    assert out == {0: 1, 1: 1}


def test_filter_worked_example():
    c, sink = run(lambda c, s: c.sink(c_filter(lambda x: x >= 1, s)),
                  [(0, 0, 1), (1, 0, 2), (2, 1, -3)])
    assert (sink.at(0), sink.at(1)) == ({1: 2}, {2: -3})


def test_map_example():
    # The notes' Map example repeats their Filter example (REFERENCES.md lists the
    # slip); this is the map the section describes, on the same input.
    c, sink = run(lambda c, s: c.sink(c_map(lambda x: x * 10, s)),
                  [(0, 0, 1), (1, 0, 2), (2, 1, -3)])
    assert (sink.at(0), sink.at(1)) == ({0: 1, 10: 2}, {20: -3})


def test_index_with_worked_example():
    c, sink = run(lambda c, s: c.sink(index_with(lambda e: e[0], s)),
                  [((0, 1, 1), 0, 1), ((1, 2, 1), 1, 1), ((1, 3, 2), 1, -1)])
    assert sink.at(0) == {(0, (0, 1, 1)): 1}
    assert sink.at(1) == {(1, (1, 2, 1)): 1, (1, (1, 3, 2)): -1}


def test_inspect_worked_example():
    seen = []
    c, sink = run(lambda c, s: c.sink(inspect(seen.append, s)), [(0, 1, 1), (1, 1, 1)])
    # The callback sees every tick's Z-set (tick 0 is empty), as triples.
    assert seen == [[], [(0, 1, 1), (1, 1, 1)]]
    assert sink.at(1) == {0: 1, 1: 1}


def test_negate_worked_example():
    assert one_tick(negate, [(0, 1), (1, -1), (2, -2)]) == {0: -1, 1: 1, 2: 2}


def test_join_stream_worked_example():
    a = [(("a", 1), 1), (("b", 2), 2), (("c", 2), 1)]
    b = [(("a", 1), 1), (("b", 3), 1), (("b", 4), -1)]
    out = one_tick(lambda x, y: join_stream(lambda k, v1, v2: (k, (v1, v2)), x, y), a, b)
    assert out == {("a", (1, 1)): 1, ("b", (2, 3)): 2, ("b", (2, 4)): -2}


def test_join_trace_worked_example():
    # The notes' join_fun builds {key, {v1, v2}} but its expected output prints flat
    # triples {:a, 1, 1}: a slip of the text; the flat form is used here.
    zs = [(("a", 0), 1), (("a", 0), -1), (("a", 1), 1), (("b", 2), 2), (("c", 2), 1)]
    trace = [(("a", 1), 1), (("b", -3), -1), (("b", 3), 1), (("b", 4), -1), (("c", 4), 1)]
    out = one_tick(lambda z, t: join_trace(lambda k, v1, v2: (k, v1, v2), z,
                                           integrate_trace(t)), zs, trace)
    assert out == {("a", 1, 1): 1, ("b", 2, -3): -2, ("b", 2, 3): 2, ("b", 2, 4): -2,
                   ("c", 2, 4): 1}


PLUS_A = [(0, 1), (1, 1), (2, 2), (3, 1)]
PLUS_B = [(0, 1), (1, -1), (2, 1)]


def test_minus_worked_example():
    assert one_tick(minus, PLUS_A, PLUS_B) == {1: 2, 2: 1, 3: 1}


def test_plus_worked_example():
    assert one_tick(plus, PLUS_A, PLUS_B) == {0: 2, 2: 3, 3: 1}


# distinct_trace (2.9.11): batches at (epoch, iteration) times.
B00 = {0: 1, 2: 1, 3: -1}
B01 = {5: 1}
B10 = {5: 1}
B11 = {0: 1, 1: 1, 2: -1, 3: 1, 4: -1}
DISTINCT_TRACE_EXPECTED = {Product(0, 0): {0: 1, 2: 1}, Product(0, 1): {5: 1},
                           Product(1, 0): {5: 1}, Product(1, 1): {1: 1, 2: -1, 5: -1}}


def test_distinct_trace_worked_example_in_a_child_circuit():
    """b_e0 enters at iteration 0 of epoch e (import), b_e1 one iteration later
    (import then z^-1); the child's distinct_trace gives the notes' four outputs.

    The notes' rule is read with the corrections of REFERENCES.md (d0 = 1 needs
    w1 <= 0; d1 = -1 needs w1 + w2 + w3 + w <= 0); its example is consistent with them.
    """
    c = Circuit()
    it0, it1 = c.source("iteration0"), c.source("iteration1")
    sub = c.child("nested")
    batch = plus(sub.import_stream(it0), delay(sub.import_stream(it1)))
    out = sub.sink(distinct_trace(batch))
    for e, (b0, b1) in enumerate([(B00, B01), (B10, B11)]):
        it0.extend(b0)
        it1.extend(b1)
        c.tick()
    assert {t: out.at(t) for t in out.times()} == DISTINCT_TRACE_EXPECTED


def test_distinct_trace_worked_example_as_seed_calls():
    """The notes' calls `distinct_trace(b, t)` with the traces t00..t11 it builds,
    through the pure step of `operators.distinct_trace`."""
    step = pytest.importorskip("operators.distinct_trace").distinct_trace_step
    P = Product
    b = {P(0, 0): B00, P(0, 1): B01, P(1, 0): B10, P(1, 1): B11}
    triples = {t: [(d, t, w) for d, w in z.items()] for t, z in b.items()}
    t00 = []
    t01 = t00 + triples[P(0, 0)]
    t10 = t01 + triples[P(0, 1)]
    t11 = t10 + triples[P(1, 0)]
    for t, trace in ((P(0, 0), t00), (P(0, 1), t01), (P(1, 0), t10), (P(1, 1), t11)):
        assert step(triples[t], trace, t) == DISTINCT_TRACE_EXPECTED[t]


# distinct incremental (2.9.18): one batch, three traces.
BATCH = [(0, 2), (2, 1), (3, -1)]
DISTINCT_INCREMENTAL_CASES = [
    ([(0, 0, 1)], {2: 1}),
    ([(2, 1, 1), (3, 1, 1)], {0: 1, 3: -1}),
    ([(0, 2, -1)], {0: 1, 2: 1}),
]


@pytest.mark.parametrize("trace, expected", DISTINCT_INCREMENTAL_CASES)
def test_distinct_incremental_worked_examples(trace, expected):
    # The batch's timestamps are nil, the trace's are 0, 1, 2: here the trace's updates
    # are pushed at their ticks and the batch at the tick after the last of them, with
    # the trace read as it stood before that tick (z1_trace).
    tb = max(t for _d, t, _w in trace) + 1
    c, sink = run(lambda c, b, t: c.sink(distinct_incremental(b, z1_trace(t))),
                  [(d, tb, w) for d, w in BATCH], trace)
    assert sink.at(tb) == expected
    pure = pytest.importorskip("operators.distinct_trace").distinct_incremental
    assert pure(dict(BATCH), zset((d, w) for d, _t, w in trace)) == expected


# -- item 3: the notes' incremental join against the engine's join ---------------------

def FLAT(k, v1, v2):
    """The join function of the notes' join_trace example: flat `(key, v1, v2)`."""
    return (k, v1, v2)


@settings(max_examples=40)
@given(keyed_updates(kind="int", max_value=7), keyed_updates(kind="int", max_value=7))
def test_agree_seed_incremental_join_with_engine_join(a_in, b_in):
    """join_stream(a, b) + join_trace(a, z1_trace(b)) + join_trace_flipped(b, z1_trace(a))
    is, tick by tick, the engine's join of the two collections."""
    f = FLAT

    def build(c, a, b):
        seed = (join_stream(f, a, b) + join_trace(f, a, z1_trace(b))
                + join_trace_flipped(f, b, z1_trace(a)))
        engine = a.collection.join_map(b.collection, f)
        return c.sink(seed), engine.capture()

    c, (seed, engine) = run(build, a_in, b_in, ticks=9)
    for t in range(9):
        assert seed.at(t) == {d: w for d, s, w in engine.updates if s == t}
        assert seed.at(t) == zset_minus(join_zsets(integral(a_in, t), integral(b_in, t), f),
                                        join_zsets(integral(a_in, t - 1),
                                                   integral(b_in, t - 1), f))
    check_law(engine.updates, [a_in, b_in], lambda a, b: join_zsets(a, b, f))


# -- every operator, tick by tick, against its plain Z-set function -------------------

def _agg(fn):
    def f(z):
        groups = defaultdict(list)
        for (k, v), w in z.items():
            groups[k].append((v, w))
        out = {}
        for k, vals in groups.items():
            r = fn(vals)
            if r is not None:
                out[(k, r)] = 1
        return out
    return f


def _count(vals):
    return sum(w for _v, w in vals)


def _vmin(vals):
    pos = [v for v, w in vals if w > 0]
    return min(pos) if pos else None


# name -> (circuit builder on one keyed delta source, plain function of (s, t) where s
# maps a tick to its Z-set and I a tick to the running sum)
UNARY = {
    "map": (lambda s: c_map(lambda kv: (kv[1], kv[0]), s),
            lambda x, I, t: zset(((v, k), w) for (k, v), w in x(t).items())),
    "filter": (lambda s: c_filter(lambda kv: kv[0] < 2, s),
               lambda x, I, t: {d: w for d, w in x(t).items() if d[0] < 2}),
    "index_with": (lambda s: index_with(lambda kv: kv[1], s),
                   lambda x, I, t: {(d[1], d): w for d, w in x(t).items()}),
    "negate": (negate, lambda x, I, t: {d: -w for d, w in x(t).items()}),
    "distinct": (distinct, lambda x, I, t: zset_distinct(x(t))),
    "aggregate_count": (lambda s: aggregate("count", s), lambda x, I, t: _agg(_count)(x(t))),
    "aggregate_min": (lambda s: aggregate("min", s), lambda x, I, t: _agg(_vmin)(x(t))),
    "consolidate": (consolidate, lambda x, I, t: I(t)),
    "integrate": (integrate, lambda x, I, t: I(t)),
    "differentiate": (differentiate, lambda x, I, t: zset_minus(x(t), x(t - 1))),
    "delay": (delay, lambda x, I, t: x(t - 1)),
    "delay_delay": (lambda s: delay(delay(s)), lambda x, I, t: x(t - 2)),
    "integrate_twice": (lambda s: integrate(integrate(s)),
                        lambda x, I, t: zset((d, w) for u in range(t + 1)
                                             for d, w in I(u).items())),
    "differentiate_integral": (lambda s: differentiate(integrate(s)), lambda x, I, t: x(t)),
    "distinct_incremental": (distinct_incremental,
                             lambda x, I, t: zset_minus(zset_distinct(I(t)),
                                                        zset_distinct(I(t - 1)))),
    "distinct_trace": (lambda s: distinct_trace(s, z1_trace(s)),
                       lambda x, I, t: zset_minus(zset_distinct(I(t)),
                                                  zset_distinct(I(t - 1)))),
    "distinct_of_integral": (lambda s: distinct(integrate(s)),
                             lambda x, I, t: zset_distinct(I(t))),
    "consolidate_trace_append": (lambda s: consolidate(trace_append(s, z1_trace(s))),
                                 lambda x, I, t: I(t)),
    "consolidate_z1_trace": (lambda s: consolidate(delay_trace(s)),
                             lambda x, I, t: I(t - 1)),
    "plus_mixed_forms": (lambda s: plus(s, integrate(s)),
                         lambda x, I, t: zset_plus(x(t), I(t))),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=25)
@given(inp=keyed_updates(kind="int", max_value=5))
def test_oracle_unary_operators_tick_by_tick(inp, name):
    build, f = UNARY[name]
    _c, sink = run(lambda c, s: c.sink(build(s)), inp, ticks=7)

    def x(t):
        return per_tick(inp, t) if t >= 0 else {}

    def I(t):
        return integral(inp, t)

    for t in range(7):
        assert sink.at(t) == f(x, I, t), (name, t)


BINARY = {
    "plus": (plus, lambda a, b, Ia, Ib, t: zset_plus(a(t), b(t))),
    "minus": (minus, lambda a, b, Ia, Ib, t: zset_minus(a(t), b(t))),
    "join_stream": (lambda a, b: join_stream(FLAT, a, b),
                    lambda a, b, Ia, Ib, t: join_zsets(a(t), b(t), FLAT)),
    "join_trace": (lambda a, b: join_trace(FLAT, a, integrate_trace(b)),
                   lambda a, b, Ia, Ib, t: join_zsets(a(t), Ib(t), FLAT)),
    "join_trace_z1": (lambda a, b: join_trace(FLAT, a, z1_trace(b)),
                      lambda a, b, Ia, Ib, t: join_zsets(a(t), Ib(t - 1), FLAT)),
    "join_trace_flipped": (lambda a, b: join_trace_flipped(FLAT, a, z1_trace(b)),
                           lambda a, b, Ia, Ib, t: join_zsets(Ib(t - 1), a(t), FLAT)),
    "incremental_join": (lambda a, b: incremental_join(FLAT, a, b),
                         lambda a, b, Ia, Ib, t: zset_minus(join_zsets(Ia(t), Ib(t), FLAT),
                                                            join_zsets(Ia(t - 1), Ib(t - 1),
                                                                       FLAT))),
    "distinct_incremental_other_trace": (
        lambda a, b: distinct_incremental(a, integrate_trace(b)),
        lambda a, b, Ia, Ib, t: zset_minus(zset_distinct(zset_plus(Ib(t), a(t))),
                                           zset_distinct(Ib(t)))),
    "trace_append_other_trace": (
        lambda a, b: consolidate(trace_append(a, z1_trace(b))),
        lambda a, b, Ia, Ib, t: zset_plus(Ib(t - 1), a(t))),
    "untimed_trace_append": (
        lambda a, b: consolidate(untimed_trace_append(a, integrate_trace(b))),
        lambda a, b, Ia, Ib, t: zset_plus(Ib(t), a(t))),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=25)
@given(a_in=keyed_updates(kind="int", max_value=5), b_in=keyed_updates(kind="int", max_value=5))
def test_oracle_binary_operators_tick_by_tick(a_in, b_in, name):
    build, f = BINARY[name]
    _c, sink = run(lambda c, a, b: c.sink(build(a, b)), a_in, b_in, ticks=7)

    def zs(inp):
        return lambda t: per_tick(inp, t) if t >= 0 else {}

    def ints(inp):
        return lambda t: integral(inp, t)

    for t in range(7):
        assert sink.at(t) == f(zs(a_in), zs(b_in), ints(a_in), ints(b_in), t), (name, t)


def test_inspect_sees_integral_values():
    seen = []
    _c, _sink = run(lambda c, s: c.sink(inspect(seen.append, integrate(s))),
                    [("a", 0, 1), ("b", 1, 1), ("a", 2, -1)])
    assert seen == [[("a", 0, 1)], [("a", 1, 1), ("b", 1, 1)], [("b", 2, 1)]]


# -- each catalogue operator agrees with the engine's, at every time ------------------

# name -> (circuit form of the engine operator on a delta stream, engine operator, plain f)
ENGINE = {
    "map": (lambda s: c_map(lambda kv: (kv[1], kv[0]), s),
            lambda c: c.map(lambda kv: (kv[1], kv[0])),
            lambda m: zset(((v, k), w) for (k, v), w in m.items())),
    "filter": (lambda s: c_filter(lambda kv: kv[0] < 2, s),
               lambda c: c.filter(lambda kv: kv[0] < 2),
               lambda m: {d: w for d, w in m.items() if d[0] < 2}),
    "negate": (negate, lambda c: c.negate(), lambda m: {d: -w for d, w in m.items()}),
    "index_with": (lambda s: index_with(lambda kv: kv[1], s),
                   lambda c: c.map(lambda kv: (kv[1], kv)),
                   lambda m: {(d[1], d): w for d, w in m.items()}),
    # D . f . I of the pointwise operators is the engine's incremental operator:
    "distinct": (lambda s: differentiate(distinct(integrate(s))), lambda c: c.distinct(),
                 zset_distinct),
    "distinct_incremental": (distinct_incremental, lambda c: c.distinct(), zset_distinct),
    "distinct_trace": (distinct_trace, lambda c: c.distinct(), zset_distinct),
    "aggregate_count": (lambda s: differentiate(aggregate("count", integrate(s))),
                        lambda c: c.reduce(lambda k, vals: [(sum(w for _v, w in vals), 1)]),
                        _agg(_count)),
    "consolidate": (lambda s: differentiate(consolidate(s)), lambda c: c.consolidate(),
                    lambda m: m),
}


@pytest.mark.parametrize("name", sorted(ENGINE))
@settings(max_examples=20)
@given(inp=keyed_updates(kind="int", max_value=5))
def test_agree_catalogue_with_engine_operators(inp, name):
    build, engine, f = ENGINE[name]
    _c, sink = run(lambda c, s: c.sink(build(s)), inp, ticks=7)
    expected = evaluate(engine, [inp])
    assert sink.updates == expected
    check_law(sink.updates, [inp], f)


def test_incrementalisation_is_literal():
    """differentiate(distinct(integrate(s))) compiles to the engine graph of
    distinct_incremental(s): the same operator on the same collection, nothing more."""
    c = Circuit()
    s = c.source()
    a = differentiate(distinct(integrate(s)))
    b = distinct_incremental(s)
    # Collection.distinct is arrange_by_self -> reduce -> map: both reduce the one
    # arrangement of the source's collection.
    ra, rb = a.collection.node.inputs[0], b.collection.node.inputs[0]
    assert ra.kind == rb.kind == "reduce"
    assert ra.inputs == rb.inputs == [s.collection.arrange_by_self().node]
    assert a.form == b.form == "delta"
    assert len(c.dataflow.sessions) == 1          # no delay was built
    assert not any("z^-1" in n.name for n in c.dataflow.nodes)   # nor an engine delay


@settings(max_examples=20)
@given(updates(kind="int", max_value=6))
def test_integrate_differentiate_are_inverse(inp):
    _c, (i_d, d_i, direct) = run(lambda c, s: (c.sink(integrate(differentiate(s))),
                                               c.sink(differentiate(integrate(s))),
                                               c.sink(s)), inp, ticks=8)
    for t in range(8):
        assert i_d.at(t) == d_i.at(t) == direct.at(t)
