"""The operator catalogue of the "Notes on DBSP" (section 2.9), each a thin layer over
engine operators.

What this module isolates: the meaning of each of the notes' operators on streams of
Z-sets, and which engine operator computes it in which form (`DELTA` or `INTEGRAL`,
see the package docstring).  It implements no join, reduce or distinct of its own:
`join_stream`, `join_trace` and `incremental_join` are `Collection.join_map`;
`aggregate` is `Collection.reduce`; `distinct` is `Collection.distinct`;
`distinct_trace` is `operators.distinct_trace` (times `Product(int, int)`) or
`Collection.distinct`; `consolidate` is `Collection.consolidate`.

Argument order and names follow the notes (`filter(is_positive, zset)`,
`join_stream(join_fun, a, b)`, `join_trace(join_fun, zset, trace)`), so their worked
examples read as written.

Which form an operator computes in, and why it is correct:

* Linear operators (map, filter, index_with, negate, plus, minus, inspect, delay):
  the engine applies them update by update, so `L(DELTA C) = DELTA L(C)` and
  `acc(L(C), t) = L(acc(C, t))`: any form in, the same form out.
* Pointwise non-linear operators (distinct, aggregate, join_stream, join_trace): the
  engine law `acc(F(C), t) = f(acc(C, t))` says that on an `INTEGRAL` collection the
  engine operator *is* the lifted `f`, tick by tick.  Inputs in `DELTA` form are first
  converted (`C - z^-1 C` accumulates to the Z-set of each tick), so the output is in
  `INTEGRAL` form.
* Incremental operators (distinct_trace, distinct_incremental, incremental_join): on a
  `DELTA` collection the engine operator computes `D . f . I`, DBSP's incremental
  version of `f` (the engine is incremental by construction).  They take and give
  `DELTA` form: compiling `differentiate(distinct(integrate(s)))` gives *the same
  engine graph* as `distinct_incremental(s)`, the incrementalisation theorem
  `Q^Delta = D . Q . I` made literal.
* `integrate` and `differentiate` only re-read a collection (`integrate(DELTA C) =
  INTEGRAL C`, `differentiate(INTEGRAL C) = DELTA C`); the other two cases convert first.

Conversions need a root z^-1, so in a child circuit every operator takes its inputs in
the form it computes in, or raises `GraphError` naming the form it needs.  Which root
z^-1 is the engine's `delay` and which the driver's is said in `ddflow.circuit.core`.

This module builds on `ddflow.circuit.core` and attaches the `Stream` shorthands
(`s + t`, `s - t`, `-s`, `s.map(f)`, `s.filter(p)`, `s.index_with(k)`, `s.distinct()`,
`s.delay()`, `s.integrate()`, `s.differentiate()`) to its class when imported, so that
imports run one way: core knows nothing of the catalogue.

>>> from ddflow.circuit import Circuit
>>> c = Circuit()
>>> xs = c.source("xs")
>>> pointwise = c.sink(distinct(xs))                       # distinct of each tick's Z-set
>>> incremental = c.sink(distinct_incremental(xs))         # the change of distinct(I(xs))
>>> xs.extend({"a": 2, "b": 1}); c.tick()
0
>>> xs.extend({"a": -1, "b": -1}); c.tick()
1
>>> pointwise.at(0), pointwise.at(1)
({'a': 1, 'b': 1}, {})
>>> incremental.at(0), incremental.at(1)
({'a': 1, 'b': 1}, {'b': -1})
"""

from __future__ import annotations

from typing import Any, Callable

from operators.reduce import count_logic, max_logic, min_logic, sum_logic
from ddflow.errors import GraphError
from ddflow.updates import consolidate as _consolidate

from ddflow.circuit.core import DELTA, INTEGRAL, Circuit, Stream, TraceStream
from ddflow.circuit.sinks import Record


# -- forms -------------------------------------------------------------------------------

def _in_form(stream: Stream, form: str) -> Any:
    """A collection holding `stream` in `form` (see `Circuit.in_form`)."""
    return stream.circuit.in_form(stream, form)


def _stream(x: Any, what: str) -> Stream:
    if not isinstance(x, Stream):
        raise GraphError(f"{what} takes a Z-set stream, got {x!r}")
    return x


def _trace(x: Any, what: str) -> TraceStream:
    if isinstance(x, TraceStream):
        return x
    if isinstance(x, Stream):
        return integrate_trace(x)
    raise GraphError(f"{what} takes a trace, got {x!r}")


def _same_circuit(*xs: Any) -> Circuit:
    circuit = xs[0].circuit
    for x in xs[1:]:
        if x.circuit is not circuit:
            raise GraphError(f"{x!r} and {xs[0]!r} belong to different circuits")
    return circuit


# -- linear ------------------------------------------------------------------------------

def map(f: Callable[[Any], Any], zset_: Stream) -> Stream:  # noqa: A001 - the notes' name
    """Map (2.9.7): each element `x` becomes `f(x)`; linear, any form.

    (The notes' Map example repeats their Filter example; see the tests.)
    """
    s = _stream(zset_, "map")
    return s.circuit.add_operator("map", [s], s.collection.map(f, name="map"), s.form)


def filter(predicate: Callable[[Any], bool], zset_: Stream) -> Stream:  # noqa: A001
    """Filter (2.9.4): keep the elements for which `predicate` holds; linear, any form."""
    s = _stream(zset_, "filter")
    return s.circuit.add_operator("filter", [s], s.collection.filter(predicate, name="filter"),
                               s.form)


def index_with(key_function: Callable[[Any], Any], zset_: Stream) -> Stream:
    """Index With (2.9.5): `x` becomes `(key_function(x), x)`, an indexed Z-set; linear."""
    s = _stream(zset_, "index_with")
    coll = s.collection.map(lambda x: (key_function(x), x), name="index_with")
    return s.circuit.add_operator("index_with", [s], coll, s.form)


def negate(zset_: Stream) -> Stream:
    """Negate (2.9.8): every weight flips sign; linear, any form."""
    s = _stream(zset_, "negate")
    return s.circuit.add_operator("negate", [s], s.collection.negate(name="negate"), s.form,
                               label="\u2212x")


def plus(*zsets: Stream) -> Stream:
    """Plus (2.9.15): weights of equal elements add (the engine's `concat`)."""
    streams = [_stream(z, "plus") for z in zsets]
    if not streams:
        raise GraphError("plus needs at least one stream")
    circuit = _same_circuit(*streams)
    form = streams[0].form if all(s.form == streams[0].form for s in streams) else INTEGRAL
    colls = [_in_form(s, form) for s in streams]
    out = colls[0].concat(*colls[1:], name="plus") if len(colls) > 1 else colls[0]
    return circuit.add_operator("plus", streams, out, form, label="+")


def minus(a: Stream, b: Stream) -> Stream:
    """Minus (2.9.14): `a`'s weights less `b`'s."""
    a, b = _stream(a, "minus"), _stream(b, "minus")
    circuit = _same_circuit(a, b)
    form = a.form if a.form == b.form else INTEGRAL
    out = _in_form(a, form).concat(_in_form(b, form).negate(), name="minus")
    return circuit.add_operator("minus", [a, b], out, form, label="\u2212")


def inspect(callback: Callable[[list], Any], zset_: Stream) -> Stream:
    """Inspect (2.9.6): call `callback(triples)` with each Z-set of the stream, as
    sorted `(data, time, weight)` triples, and pass the stream on unchanged.

    At the root the callback runs at the end of every tick (empty Z-sets included);
    in a child, at the end of the root tick, once per `(epoch, iteration)` at which
    the stream changed, in time order.  The Z-sets are read by time from a capture of
    the stream, on the driver (not an engine `inspect`, whose callback would run in an
    operator that the BSP engines keep elsewhere), so every engine calls back alike.
    """
    s = _stream(zset_, "inspect")
    record = Record(s.circuit, s)
    out = s.circuit.add_operator("inspect", [s], s.collection, s.form)

    def close_tick(tick: int) -> None:
        for t in record.close_tick(tick):
            callback(_consolidate((d, t, w) for d, w in record.at(t).items()))

    s.circuit.root.tick_listeners.append(close_tick)
    return out


def delay(zset_: Stream) -> Stream:
    """Delay (2.9.10), z^-1: the stream one clock cycle later (the previous Z-set).

    At the root, one tick later, the engine's `delay` operator (updates move from `t`
    to `t + 1`); in a child, one iteration later, an engine `Variable`.  Linear, any
    form.
    """
    s = _stream(zset_, "delay")
    return s.circuit.add_operator("delay", [s], s.circuit.shifted(s.collection), s.form,
                               label="z^-1")


z1 = delay


# -- integration and differentiation -----------------------------------------------------

def integrate(zset_: Stream) -> Stream:
    """DBSP's I: the running sum, `I(s)[t] = s[0] + ... + s[t]`.

    A `DELTA` collection read as `INTEGRAL` is its own integral, so this costs
    nothing on a delta stream; on an integral stream it first builds the running sum
    of its collection's accumulations (`R = C + z^-1 R`).  Root circuit only.
    """
    s = _stream(zset_, "integrate")
    _root_only(s, "integrate")
    return s.circuit.add_operator("integrate", [s], _in_form(s, DELTA), INTEGRAL, label="I")


def differentiate(zset_: Stream) -> Stream:
    """DBSP's D: `D(s)[t] = s[t] - s[t - 1]`, that is `s - z^-1(s)`.

    Free on an integral stream (its collection read as `DELTA`); on a delta stream
    the collection `C - z^-1 C`.  Root circuit only.
    """
    s = _stream(zset_, "differentiate")
    _root_only(s, "differentiate")
    return s.circuit.add_operator("differentiate", [s], _in_form(s, INTEGRAL), DELTA, label="D")


def _root_only(s: Stream, what: str) -> None:
    if s.circuit.depth:
        raise GraphError(f"{what} runs along the root clock; inside a child, export() "
                         "sums a stream over the iterations of each epoch")


# -- traces ------------------------------------------------------------------------------

def integrate_trace(zset_: Stream) -> TraceStream:
    """The trace of every update of `zset_` so far, each at its tick: the notes'
    `trace = trace_append(s, z1_trace(trace))` in one node (DBSP's integrate_trace)."""
    s = _stream(zset_, "integrate_trace")
    return s.circuit.add_trace_operator("integrate_trace", [s], _in_form(s, DELTA), 0,
                                     label="I (trace)")


def delay_trace(trace: TraceStream | Stream) -> TraceStream:
    """Delay Trace (2.9.9), z1_trace: the trace as it was one clock cycle earlier.

    Given a Z-set stream `s` (as the notes write `z1_trace(a)`), the delayed trace
    of `s`'s updates.  Nothing is computed: the trace is read `lag + 1` cycles late.
    """
    if isinstance(trace, Stream):
        s = trace
        return s.circuit.add_trace_operator("delay_trace", [s], _in_form(s, DELTA), 1,
                                         label="z^-1 (trace)")
    if not isinstance(trace, TraceStream):
        raise GraphError(f"delay_trace takes a trace or a Z-set stream, got {trace!r}")
    return trace.circuit.add_trace_operator("delay_trace", [trace], trace.collection,
                                         trace.lag + 1, trace.timed, label="z^-1 (trace)")


z1_trace = delay_trace


def _append(name: str, zset_: Stream, trace: TraceStream, timed: bool) -> TraceStream:
    s = _stream(zset_, name)
    if not isinstance(trace, TraceStream):
        raise GraphError(f"{name} takes a Z-set stream and a trace, got {trace!r}")
    circuit = _same_circuit(s, trace)
    own = trace.lag == 1 and trace.collection is _in_form_or_none(s, DELTA)
    if own:
        # The DBSP idiom: appending s's Z-set to its own trace of the previous tick.
        return circuit.add_trace_operator(name, [s, trace], trace.collection, 0,
                                       timed and trace.timed)
    # Any other trace: its content at t plus the Z-set of s at t.
    coll = trace.accumulation().concat(_in_form(s, INTEGRAL), name=name)
    return circuit.add_trace_operator(name, [s, trace], coll, 0, False)


def _in_form_or_none(s: Stream, form: str) -> Any:
    """The collection holding `s` in `form` if there is one already (builds nothing)."""
    return s.circuit.in_form_or_none(s, form)


def trace_append(zset_: Stream, trace: TraceStream) -> TraceStream:
    """Trace Append (2.9.16): `trace` with the Z-set of `zset_` inserted at the
    current time.  `trace_append(s, z1_trace(s))` is `integrate_trace(s)`, timestamps
    kept.  Appending to another trace gives a trace read by its accumulation only
    (`timed=False`): its content at `t` is `trace`'s plus `s[t]`."""
    return _append("trace_append", zset_, trace, True)


def untimed_trace_append(zset_: Stream, trace: TraceStream) -> TraceStream:
    """Untimed Trace Append (2.9.17): like `trace_append`, the appended Z-set without a
    timestamp (`timed=False`: operators that read timestamps, `distinct_trace`,
    refuse it).  Every trace here is read by its accumulation, where the two agree."""
    return _append("untimed_trace_append", zset_, trace, False)


def consolidate(trace: TraceStream | Stream) -> Stream:
    """Consolidate (2.9.2): a trace's updates summed over their timestamps, as a Z-set
    (the engine's `consolidate`, read in integral form).  Given a Z-set stream, its
    trace (so the result is its integral)."""
    if isinstance(trace, Stream):
        coll = _in_form(trace, DELTA)
    elif isinstance(trace, TraceStream):
        coll = trace.accumulation()
    else:
        raise GraphError(f"consolidate takes a trace, got {trace!r}")
    return trace.circuit.add_operator("consolidate", [trace],
                                   coll.consolidate(name="consolidate"), INTEGRAL)


# -- non-linear, pointwise ---------------------------------------------------------------

def _from_logic(logic: Callable[[Any, list], list]) -> Callable[[list], Any]:
    """A reduce logic of `operators.reduce` (one `(value, 1)` or nothing) as a plain
    aggregate: the engine's count/sum/min/max serve the catalogue, not copies."""
    def aggregate_fn(values: list) -> Any:
        out = logic(None, values)
        return out[0][0] if out else None
    return aggregate_fn


#: Aggregate functions by name: each maps a key's `[(value, weight)]` to a result.
AGGREGATES: dict[str, Callable[[list], Any]] = {
    "count": _from_logic(count_logic), "sum": _from_logic(sum_logic),
    "min": _from_logic(min_logic), "max": _from_logic(max_logic)}


def aggregate(function: str | Callable[[list], Any], indexed: Stream) -> Stream:
    """Aggregate (2.9.1): per key of an indexed Z-set, `(key, function(values))` with
    weight 1, where `values` is the key's `[(value, weight)]` (nonzero weights).

    `function` is a name of `AGGREGATES` or a pure function; a result of `None`
    gives no output for the key.  The engine's `reduce`, on the integral form.
    """
    s = _stream(indexed, "aggregate")
    fn = AGGREGATES[function] if isinstance(function, str) else function
    if not callable(fn):
        raise GraphError(f"aggregate needs a function or one of {sorted(AGGREGATES)}")

    def logic(_key: Any, values: list) -> list:
        out = fn(values)
        return [] if out is None else [(out, 1)]

    name = function if isinstance(function, str) else getattr(function, "__name__", "fn")
    coll = _in_form(s, INTEGRAL).reduce(logic, name=f"aggregate({name})")
    return s.circuit.add_operator("aggregate", [s], coll, INTEGRAL, label=f"aggregate({name})")


def distinct(zset_: Stream) -> Stream:
    """Distinct (2.9.3): the elements of positive weight, with weight 1, tick by tick
    (the engine's `distinct` on the integral form)."""
    s = _stream(zset_, "distinct")
    return s.circuit.add_operator("distinct", [s], _in_form(s, INTEGRAL).distinct(), INTEGRAL)


def join_stream(join_fun: Callable[[Any, Any, Any], Any], a: Stream, b: Stream) -> Stream:
    """Join Stream (2.9.12): the indexed Z-sets of the same tick joined by key,
    `join_fun(key, v1, v2)`, weights multiplied (the engine's `join_map` on the
    integral forms)."""
    a, b = _stream(a, "join_stream"), _stream(b, "join_stream")
    circuit = _same_circuit(a, b)
    coll = _in_form(a, INTEGRAL).join_map(_in_form(b, INTEGRAL), join_fun, name="join_stream")
    return circuit.add_operator("join_stream", [a, b], coll, INTEGRAL)


def join_trace(join_fun: Callable[[Any, Any, Any], Any], zset_: Stream,
               trace: TraceStream | Stream) -> Stream:
    """Join Trace (2.9.13): this tick's indexed Z-set joined with everything `trace`
    holds, `join_fun(key, v_zset, v_trace)`, weights multiplied (`join_map` of the
    integral form with the trace's accumulation)."""
    a = _stream(zset_, "join_trace")
    t = _trace(trace, "join_trace")
    circuit = _same_circuit(a, t)
    coll = _in_form(a, INTEGRAL).join_map(t.accumulation(), join_fun, name="join_trace")
    return circuit.add_operator("join_trace", [a, t], coll, INTEGRAL)


def join_trace_flipped(join_fun: Callable[[Any, Any, Any], Any], zset_: Stream,
                       trace: TraceStream | Stream) -> Stream:
    """`join_trace` with `join_fun`'s value arguments swapped (the notes'
    `join_fun_flipped`): `join_fun(key, v_trace, v_zset)`."""
    a = _stream(zset_, "join_trace_flipped")
    t = _trace(trace, "join_trace_flipped")
    circuit = _same_circuit(a, t)
    coll = _in_form(a, INTEGRAL).join_map(t.accumulation(),
                                          lambda k, v1, v2: join_fun(k, v2, v1),
                                          name="join_trace_flipped")
    return circuit.add_operator("join_trace_flipped", [a, t], coll, INTEGRAL)


# -- incremental -------------------------------------------------------------------------

def incremental_join(join_fun: Callable[[Any, Any, Any], Any], a: Stream, b: Stream) -> Stream:
    """The notes' `incremental_join(join_fun, a, b)`, the change of the join of the
    integrals: `join_stream(a, b) + join_trace(a, z1_trace(b)) +
    join_trace_flipped(b, z1_trace(a))` for a root clock.  It is the engine's `join_map`
    on the delta forms, whose bilinear rule (`operators.join`) extends the formula to
    the partially ordered times of child circuits."""
    a, b = _stream(a, "incremental_join"), _stream(b, "incremental_join")
    circuit = _same_circuit(a, b)
    coll = _in_form(a, DELTA).join_map(_in_form(b, DELTA), join_fun, name="incremental_join")
    return circuit.add_operator("incremental_join", [a, b], coll, DELTA, label="join (incr.)")


def _own_trace(name: str, s: Stream, trace: Any, coll: Any) -> bool:
    if trace is None:
        return True
    if not isinstance(trace, TraceStream):
        raise GraphError(f"{name}'s second argument is a trace, got {trace!r}")
    return trace.collection is coll and trace.timed


def _distinct_delta(s: Stream, coll: Any, name: str) -> Any:
    if s.circuit.depth == 1:
        return coll.distinct_trace(name=name)
    return coll.distinct(name=name)


def distinct_trace(zset_: Stream, trace: TraceStream | None = None) -> Stream:
    """Distinct Trace (2.9.11): the change of distinct over `(epoch, iteration)` times.

    The Z-set at each time is what distinct of the accumulated input gains or loses
    there (the notes' w1/w2/w3 rule), so weights may be negative.  The trace argument
    is the operator's own (the engine arrangement of its input); passing it is
    allowed (`z1_trace(zset_)` or `integrate_trace(zset_)`), another trace is not.
    In a child of the root, `operators.distinct_trace`; elsewhere the engine's
    `distinct` (the same law for other lattices).  Delta form in and out.
    """
    s = _stream(zset_, "distinct_trace")
    coll = _in_form(s, DELTA)
    if not _own_trace("distinct_trace", s, trace, coll):
        raise GraphError("distinct_trace reads its own input's trace; for another trace "
                         "use distinct_incremental(zset, trace)")
    inputs = [s] if trace is None else [s, trace]
    return s.circuit.add_operator("distinct_trace", inputs,
                               _distinct_delta(s, coll, "distinct_trace"), DELTA)


def distinct_incremental(zset_: Stream, trace: TraceStream | None = None) -> Stream:
    """Distinct Incremental (2.9.18): the change of distinct when this tick's Z-set is
    added to `trace`: `distinct(trace + zset) - distinct(trace)`.

    With no trace, or `z1_trace(zset_)`, it is `D . distinct . I`, the engine's
    incremental `distinct` on the delta form (delta out).  With another trace, the
    formula itself on integral forms (integral out).
    """
    s = _stream(zset_, "distinct_incremental")
    coll = _in_form_or_none(s, DELTA)
    if trace is None or (isinstance(trace, TraceStream) and trace.lag == 1
                         and _own_trace("distinct_incremental", s, trace, coll)):
        if coll is None:
            coll = _in_form(s, DELTA)           # raises the form error
        inputs = [s] if trace is None else [s, trace]
        return s.circuit.add_operator("distinct_incremental", inputs,
                                   _distinct_delta(s, coll, "distinct_incremental"), DELTA)
    if not isinstance(trace, TraceStream):
        raise GraphError(f"distinct_incremental's second argument is a trace, got {trace!r}")
    circuit = _same_circuit(s, trace)
    before = trace.accumulation()
    after = before.concat(_in_form(s, INTEGRAL), name="distinct_incremental.after")
    out = after.distinct().concat(before.distinct().negate(), name="distinct_incremental")
    return circuit.add_operator("distinct_incremental", [s, trace], out, INTEGRAL)


# -- the Stream shorthands -----------------------------------------------------------------
# Attached here rather than defined in `ddflow.circuit.core`, which this module builds
# on: the methods call the catalogue, so defining them there would import it back.

def _plus(self: Stream, other: Stream) -> Stream:
    """`plus(self, other)`."""
    return plus(self, other)


def _minus(self: Stream, other: Stream) -> Stream:
    """`minus(self, other)`."""
    return minus(self, other)


def _negate(self: Stream) -> Stream:
    """`negate(self)`."""
    return negate(self)


def _map(self: Stream, f: Callable[[Any], Any]) -> Stream:
    """`map(f, self)`: each element `x` becomes `f(x)`."""
    return map(f, self)


def _filter(self: Stream, p: Callable[[Any], bool]) -> Stream:
    """`filter(p, self)`: the elements for which `p` holds."""
    return filter(p, self)


def _index_with(self: Stream, key: Callable[[Any], Any]) -> Stream:
    """`index_with(key, self)`: `x` becomes `(key(x), x)`."""
    return index_with(key, self)


def _distinct(self: Stream) -> Stream:
    """`distinct(self)`, tick by tick."""
    return distinct(self)


def _delay(self: Stream) -> Stream:
    """`delay(self)`: z^-1, one clock cycle later."""
    return delay(self)


def _integrate(self: Stream) -> Stream:
    """`integrate(self)`: DBSP's I, the running sum."""
    return integrate(self)


def _differentiate(self: Stream) -> Stream:
    """`differentiate(self)`: DBSP's D, `s - z^-1(s)`."""
    return differentiate(self)


for _name, _method in (("__add__", _plus), ("__sub__", _minus), ("__neg__", _negate),
                       ("map", _map), ("filter", _filter), ("index_with", _index_with),
                       ("distinct", _distinct), ("delay", _delay),
                       ("integrate", _integrate), ("differentiate", _differentiate)):
    setattr(Stream, _name, _method)
del _name, _method


__all__ = [
    "aggregate", "consolidate", "distinct", "filter", "index_with", "inspect", "map",
    "negate", "delay", "z1", "delay_trace", "z1_trace", "distinct_trace", "join_stream",
    "join_trace", "join_trace_flipped", "minus", "plus", "trace_append",
    "untimed_trace_append", "distinct_incremental", "incremental_join", "integrate",
    "differentiate", "integrate_trace", "AGGREGATES",
]
