"""The DBSP view: DBSP's circuits and operator catalogue, compiled onto the engine.

A circuit (Budiu, McSherry, Ryzhyk, Tannen, "DBSP: automatic incremental view
maintenance for rich query languages", PVLDB 2023; and the RhizomeDB "Notes on DBSP") is
a graph of nodes over *streams*: a stream is a sequence of Z-sets `s[0], s[1], ...`, one
per tick of its circuit's clock.  This package is a view, not a second engine: building a
circuit builds a `ddflow.Dataflow` (`Circuit.dataflow`), every stream is an engine
`Collection`, every operator an engine operator, and `Circuit.tick()` is
`advance_to(t + 1)` on every input followed by `run()`, on any engine
(`Circuit(engine=...)`).  Modules, each importing only those before it: `base` (shared
names), `sinks` (what the driver reads from captures, by time: sinks, inspect, the
iteration clocks), `streams` (the six node types and the stream kinds), `core` (circuits,
the clock driver, root z^-1),
`catalogue` (the notes' operators, section 2.9, with integrate and differentiate; it
attaches the `Stream` shorthands), `draw` (graphviz text and matplotlib pictures; it
attaches `Circuit.to_dot` / `Circuit.draw`).

How a stream of Z-sets maps to update triples.  The engine holds a collection `C` as
update triples `(data, time, diff)`; write `C_t` for the Z-set of its updates at
time exactly `t` (`{data: sum of diff}`) and `acc(C, t)` for its accumulation, the
sum of `C_s` over `s <= t`.  A stream `s` is held by one collection `C` in one of two
*forms*:

* `DELTA`: `s[t] = C_t`.  The Z-set at tick `t` is the updates at time `t`, i.e. the
  differences of the accumulated collection: `s[t] = acc(C, t) - acc(C, t - 1)`.
  Sources are in this form (what is pushed at tick `t` is updated at time `t`).
* `INTEGRAL`: `s[t] = acc(C, t)`.  The Z-set at tick `t` is the accumulated collection.

So one collection holds two streams at once, its differences and their running sum,
and DBSP's integration and differentiation

    I(s)[t] = s[0] + ... + s[t]          D(s)[t] = s[t] - s[t - 1]  (= s - z^-1(s))

relate the two views: `I(DELTA C) = INTEGRAL C` and `D(INTEGRAL C) = DELTA C` cost
nothing (`integrate` and `differentiate` re-read the collection).  The other two
directions build a collection: `D(DELTA C) = DELTA (C - z^-1 C)` (since `C - z^-1 C`
accumulates at `t` to `C_t`), and `I(INTEGRAL C) = INTEGRAL R` with `R = C + z^-1 R`
(DBSP's integrator loop, whose updates at `t` are `acc(C, t)`: the whole value,
re-emitted every tick).

Why this is the right mapping: the engine's law `acc(F(C), t) = f(acc(C, t))`
(differential dataflow's accumulation law) says an engine operator on an `INTEGRAL`
collection is DBSP's lifted operator `f` tick by tick, and on a `DELTA` collection it is
`D . f . I`, DBSP's incremental operator: the engine *is* DBSP's incrementalised circuit.
`differentiate(distinct(integrate(s)))` compiles to exactly the engine graph of
`distinct_incremental(s)`.

Inside a child circuit, times are `Product(epoch, iteration)` and both forms read the
same way in the product order: `DELTA` is DBSP's doubly-incremental nested stream,
`INTEGRAL` the plain (non-incremental) iteration stream of each epoch.  `import` is the
engine's `enter` (the parent's Z-set at iteration 0 in delta form, the parent's value
at every iteration in integral form), `export` its `leave` (the sum over iterations:
the change of the fixed point, or the fixed point), `feedback` a `Variable`.

>>> from ddflow.circuit import Circuit, integrate, differentiate
>>> c = Circuit()
>>> s = c.source("s")
>>> i_s, d_s = c.sink(integrate(s)), c.sink(differentiate(s))
>>> for zs in ({"a": 1}, {"a": 1, "b": 1}, {}):
...     s.extend(zs); _ = c.tick()
>>> [i_s.at(t) for t in range(3)]
[{'a': 1}, {'a': 2, 'b': 1}, {'a': 2, 'b': 1}]
>>> [d_s.at(t) for t in range(3)]
[{'a': 1}, {'b': 1}, {'a': -1, 'b': -1}]
"""

# core first; catalogue and draw build on it and attach the `Stream` shorthands and
# `Circuit.to_dot` / `Circuit.draw` to its classes when imported.
from ddflow.circuit.core import (DELTA, INTEGRAL, NODE_KINDS, Circuit, Node, Sink,
                                 SourceStream, Stream, TraceStream)
from ddflow.circuit import draw as _draw  # noqa: F401 - attaches Circuit.to_dot, .draw
from ddflow.circuit.catalogue import (AGGREGATES, aggregate, consolidate, delay,
                                      delay_trace, differentiate, distinct,
                                      distinct_incremental, distinct_trace, filter,
                                      incremental_join, index_with, inspect, integrate,
                                      integrate_trace, join_stream, join_trace,
                                      join_trace_flipped, map, minus, negate, plus,
                                      trace_append, untimed_trace_append, z1, z1_trace)

__all__ = [
    "Circuit", "Node", "Stream", "SourceStream", "TraceStream", "Sink", "NODE_KINDS",
    "DELTA", "INTEGRAL", "AGGREGATES",
    "aggregate", "consolidate", "distinct", "filter", "index_with", "inspect", "map",
    "negate", "delay", "z1", "delay_trace", "z1_trace", "distinct_trace", "join_stream",
    "join_trace", "join_trace_flipped", "minus", "plus", "trace_append",
    "untimed_trace_append", "distinct_incremental", "incremental_join", "integrate",
    "differentiate", "integrate_trace",
]
