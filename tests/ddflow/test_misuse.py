"""A catalogue of misuse: every case raises a typed error that names what it should,
and the dataflow gives the right answer afterwards.

One scaffold (`check`) serves every case.  It builds a `Scene`, a small live
dataflow (word counts, two-hop paths through a join, reachability through an
`iterate`) whose outputs each have a plain-Python oracle, lets the case wire its own
operators (with oracles too), then applies the misuse at its moment:

* `"build"`: a wrong builder call before the first run: the graph must be unchanged;
* `"call"`: a wrong call on a live dataflow (a session, a read): nothing recorded,
  no output changed;
* `"run"`: a bad update or a failing user function met by `run()`: the step is rolled
  back (no output changed) and the sessions keep their updates;
* `"question"`: a question added after `run()` that fails on the data already
  loaded: rolled back too, no pending update to blame (`err.inputs == ()`), and
  `drop()` takes it out without poisoning anything.

Then it recovers (the recipe: `discard(err)`, which must withdraw exactly the bad
updates fed, `err.inputs`; or `drop` for a question), feeds more changes, runs, and
checks every output against its oracle at every final time: the accumulation law,
`acc(F(C), t) == f(acc(C, t))`.  Each case asserts the error type (a `DataflowError`
subclass), fragments of its message, and the operator, record and time it carries,
where it has them.  Every case runs on the local engine, W = 3 and the in-process
BSP driver; the run-time ones at `Product` times too (fed at incomparable times).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import attrs
import pytest

import ddflow
from ddflow import (ConvergenceError, DataError, DataflowError, DiffError, GraphError,
                    NotFinalError, SessionClosedError, TimeError, UserFunctionError)
from ddflow.engine.bsp import InProcessShards
from ddflow.engine.local import LocalEngine
from ddflow.updates import accumulate
from lattice import Product, join, join_closure, less_equal

POISON = "poison"
NOW = "<the time of the bad update>"     # a `fields` value, resolved by the scaffold
BAD_NODE = 666


# -- the scene ---------------------------------------------------------------------

def _count(acc: dict) -> dict:
    return {(w, n): 1 for w, n in acc.items() if n}


def _paths(acc: dict) -> dict:
    out: dict = {}
    for (a, b), r in acc.items():
        for (b2, c), r2 in acc.items():
            if b == b2:
                out[(a, c)] = out.get((a, c), 0) + r * r2
    return {k: v for k, v in out.items() if v}


def _reach(acc: dict) -> dict:
    edges = {e for e, r in acc.items() if r > 0}
    seen = {a for a, _b in edges if a == 1}
    frontier = set(seen)
    while frontier:
        frontier = {b for a, b in edges if a in frontier} - seen
        seen |= frontier
    return dict.fromkeys(seen, 1)


ENGINES: dict[str, Callable[[], Any]] = {
    "local": lambda: LocalEngine(),
    "w3": lambda: LocalEngine(workers=3),
    "bsp": lambda: InProcessShards(2),
}


class Scene:
    """A small live dataflow with oracles for its outputs; what every case misuses."""

    def __init__(self, time: Any = 0, engine: str = "local") -> None:
        self.df = ddflow.Dataflow(time=time, engine=ENGINES[engine]())
        self.words_in, self.words = self.df.new_collection("words")
        self.edges_in, self.edges = self.df.new_collection("edges")
        self.pairs_in, self.pairs = self.df.new_collection("pairs")    # for keyed cases
        self.closed_in, self.closed = self.df.new_collection("closed")
        self.sessions = {"words": self.words_in, "edges": self.edges_in,
                         "pairs": self.pairs_in}
        self.log: dict[str, list] = {"words": [], "edges": [], "pairs": []}
        self.poison: list[tuple] = []       # (session name, data, time, diff) fed on purpose
        self.outputs: list[tuple] = []      # (name, capture, oracle of the input accs)
        self.watch("counts", self.words.count(), lambda a: _count(a["words"]))
        swapped = self.edges.map(lambda e: (e[1], e[0]), name="swap")
        self.watch("paths", swapped.join(self.edges).map(lambda kv: kv[1], name="hop"),
                   lambda a: _paths(a["edges"]))
        roots = self.edges.filter(lambda e: e[0] == 1).map(lambda e: e[0]).distinct()
        edges = self.edges
        self.watch("reach", roots.iterate(
            lambda r: edges.enter(r.scope).semijoin(r).map(lambda kv: kv[1])
            .concat(roots.enter(r.scope)).distinct(), name="reach"),
            lambda a: _reach(a["edges"]))

    # -- wiring and feeding ------------------------------------------------------------
    def watch(self, name: str, coll: Any, oracle: Callable[[dict], dict]) -> None:
        self.outputs.append((name, coll.capture(name), oracle))

    def feed(self, name: str, data: Any, diff: int = 1, time: Any = None) -> None:
        session = self.sessions[name]
        t = session.time if time is None else time
        session.update_at(data, t, diff)
        self.log[name].append((data, t, diff))

    def bad(self, name: str, data: Any, diff: Any = 1, time: Any = None) -> None:
        """Feed an update the run will choke on (withdrawn by `recover`)."""
        session = self.sessions[name]
        t = session.time if time is None else time
        session.update_at(data, t, diff)
        self.poison.append((name, data, t, diff))

    def later(self) -> tuple[Any, Any]:
        """Two times in advance of the inputs': for `Product` times incomparable ones
        (the answer at their join is one no input was given)."""
        t = self.words_in.time
        if type(t) is int:
            return t, t + 1
        return Product(t.outer + 1, t.inner), Product(t.outer, t.inner + 1)

    def next_time(self) -> Any:
        """A time past every update fed so far."""
        top = self.words_in.time
        for updates in self.log.values():
            for _d, t, _r in updates:
                top = join(top, t)
        return top + 1 if type(top) is int else Product(top.outer + 1, top.inner + 1)

    def step(self) -> None:
        """Advance every input past what it was fed, and run."""
        t = self.next_time()
        for s in self.sessions.values():
            s.advance_to(t)
        self.closed_in.close()
        self.df.run()

    def start(self) -> None:
        for w in ("a", "b", "a"):
            self.feed("words", w)
        for e in ((1, 2), (2, 3), (3, 4)):
            self.feed("edges", e)
        for kv in (("x", 1), ("x", 3), ("y", 2)):
            self.feed("pairs", kv)
        self.step()

    def recover(self, err: DataflowError) -> None:
        """The recipe: `discard(err)` withdraws the updates the error blames, which
        must be exactly those fed on purpose, nothing else."""
        assert err.inputs is not None, err
        blamed = sorted(((s.name, d, t, r) for s, d, t, r in err.inputs), key=repr)
        assert blamed == sorted(self.poison, key=repr), (blamed, self.poison)
        gone = self.words_in.discard(err)
        assert sorted(((s.name, d, t, r) for s, d, t, r in gone), key=repr) == blamed
        for name, data, t, diff in self.poison:
            assert (data, t, diff) not in self.sessions[name].pending
        self.poison = []

    def more(self) -> None:
        """Changes after the recovery, then a step: insertions and retractions."""
        a, b = self.later()
        self.feed("words", "c", 1, a); self.feed("words", "a", -1, b)
        self.feed("edges", (4, 5), 1, a); self.feed("edges", (2, 3), -1, b)
        self.feed("edges", (2, 4), 1, b)
        self.feed("pairs", ("y", 5), 1, a); self.feed("pairs", ("x", 1), -1, b)
        self.step()

    # -- observing ----------------------------------------------------------------------
    def snapshot(self) -> tuple:
        return ([cap.updates for _n, cap, _o in self.outputs],
                {n: s.pending for n, s in self.sessions.items()})

    def graph(self) -> tuple:
        return ([(n.id, n.name, [p.id for p in n.inputs],
                  sorted((c.id, p) for c, p in n.consumers)) for n in self.df.nodes],
                len(self.df.captures), len(self.df.sessions))

    def check(self) -> None:
        """Every output equals its oracle at every time of the join-closure of the
        times fed so far (all final by now)."""
        times = join_closure({t for updates in self.log.values() for _d, t, _r in updates})
        assert times
        for name, cap, oracle in self.outputs:
            for t in times:
                if cap.since is not None and not less_equal(cap.since, t):
                    continue        # added after a run(): it answers from `since` on
                assert cap.is_final(t), (name, t)
                accs = {k: accumulate(ups, t) for k, ups in self.log.items()}
                assert cap.at(t) == oracle(accs), (name, t)


# -- the cases -----------------------------------------------------------------------

@attrs.frozen
class Misuse:
    """One misuse: `act(scene)` at `moment` must raise `error` (for "run", `act`
    only feeds the bad update and `run()` raises), with `says` in the message and
    the error's `operator` / `record` / `time` equal to `fields` (a callable value
    is given the scene).  `build(scene)` wires the case's own operators first."""

    act: Callable[[Scene], Any]
    error: type
    says: tuple = ()
    fields: dict = attrs.Factory(dict)
    moment: str = "call"
    build: Callable[[Scene], Any] | None = None
    time: Any = 0


CASES: dict[str, Misuse] = {}


def case(name: str, *args: Any, **kwargs: Any) -> None:
    assert name not in CASES, name
    CASES[name] = Misuse(*args, **kwargs)


def _raise(exc: BaseException) -> Any:
    raise exc


# Sessions: times ---------------------------------------------------------------------
case("time_backwards", lambda s: s.words_in.update_at("x", 0, 1), TimeError,
     ("not in advance",), {"operator": "words", "record": "x", "time": 0})
case("advance_backwards", lambda s: s.words_in.advance_to(0), TimeError,
     ("move the session back",), {"operator": "words", "time": 0})
case("time_of_another_lattice", lambda s: s.words_in.update_at("x", Product(5, 0)),
     TimeError, ("not a time of this dataflow's lattice",),
     {"operator": "words", "record": "x", "time": Product(5, 0)})
case("time_a_string", lambda s: s.edges_in.update_at((1, 2), "later"), TimeError,
     ("not a time",), {"operator": "edges", "record": (1, 2), "time": "later"})
case("time_a_float", lambda s: s.words_in.update_at("x", 5.0), TimeError,
     ("not a time",), {"operator": "words", "time": 5.0})
case("time_none_advance", lambda s: s.words_in.advance_to(None), TimeError,
     ("advance_to",), {"operator": "words"})
case("time_bool", lambda s: s.words_in.update_at("x", True), TimeError,
     ("not a time",), {"operator": "words", "time": True})
case("product_int_time", lambda s: s.words_in.update_at("x", 3), TimeError,
     ("not a time of this dataflow's lattice",), {"operator": "words", "time": 3},
     time=Product(0, 0))
case("product_incomparable_advance", lambda s: s.words_in.advance_to(Product(5, 0)),
     TimeError, ("would move the session back",), {"operator": "words"},
     time=Product(0, 0))
case("product_nested_wrongly",
     lambda s: s.words_in.update_at("x", Product(Product(5, 5), 5)), TimeError,
     ("not a time of this dataflow's lattice",), {"operator": "words", "record": "x"},
     time=Product(0, 0))
case("product_time_in_the_past", lambda s: s.words_in.update_at("x", Product(0, 9)),
     TimeError, ("not in advance",), {"operator": "words", "time": Product(0, 9)},
     time=Product(0, 0))

# Sessions: data and diffs -----------------------------------------------------------------
case("unhashable_list", lambda s: s.words_in.insert(["a"]), DataError,
     ("hashable",), {"operator": "words", "record": ["a"], "time": 1})
case("unhashable_dict", lambda s: s.edges_in.insert({1: 2}), DataError,
     ("hashable",), {"operator": "edges", "record": {1: 2}})
case("unhashable_inside_tuple", lambda s: s.edges_in.insert((1, [2])), DataError,
     ("hashable",), {"operator": "edges", "record": (1, [2])})
case("diff_float", lambda s: s.words_in.update("x", 0.5), DiffError,
     ("float is not a diff",), {"operator": "words", "record": "x", "time": 1})
case("diff_bool", lambda s: s.words_in.update("x", True), DiffError,
     ("bool is not a diff",), {"operator": "words", "record": "x"})
case("diff_str", lambda s: s.words_in.update("x", "1"), DiffError,
     ("is not a diff",), {"operator": "words", "record": "x"})
case("closed_insert", lambda s: s.closed_in.insert("x"), SessionClosedError,
     ("after close()",), {"operator": "closed", "record": "x"})
case("closed_advance", lambda s: s.closed_in.advance_to(9), SessionClosedError,
     ("advance_to",), {"operator": "closed", "time": 9})
case("extend_not_triples", lambda s: s.words_in.extend([("x", 1)]), DataError,
     ("(data, time, diff) triples",), {"operator": "words", "record": ("x", 1)})
case("extend_one_bad_of_many",
     lambda s: s.words_in.extend([("x", 1, 1), ("y", 1, 1), ("z", 0, 1)]), TimeError,
     ("not in advance",), {"operator": "words", "record": "z", "time": 0})
case("extend_not_iterable", lambda s: s.words_in.extend(5), DataError,
     ("iterable",), {"operator": "words", "record": 5})
case("nan_data", lambda s: s.words_in.insert(float("nan")), DataError,
     ("must equal itself", "NaN"), {"operator": "words", "time": 1})
case("nan_in_a_key", lambda s: s.pairs_in.insert((float("nan"), 1)), DataError,
     ("must equal itself",), {"operator": "pairs", "time": 1})
case("nan_in_a_value_via_extend",
     lambda s: s.pairs_in.extend([(("x", 1), 1, 1), (("x", float("nan")), 1, 1)]),
     DataError, ("NaN",), {"operator": "pairs", "time": 1})
case("nan_time_float", lambda s: s.words_in.update_at("x", float("nan")), TimeError,
     ("not a time",), {"operator": "words"})
case("dataframe_a_list", lambda s: s.words_in.insert_dataframe([("x", 1, 1)]), DataError,
     ("Spark DataFrame",), {"operator": "words"})

# Reads -------------------------------------------------------------------------------------
case("read_not_final", lambda s: s.outputs[0][1].at(1), NotFinalError,
     ("on 'words', then run()", "partial=True"), {"operator": "counts", "time": 1})
case("read_far_future", lambda s: s.outputs[2][1].at(100), NotFinalError,
     ("'edges'",), {"operator": "reach", "time": 100})
case("read_other_lattice", lambda s: s.outputs[1][1].at(Product(0, 0)), TimeError,
     ("not a time of this capture",), {"operator": "paths", "time": Product(0, 0)})
case("read_a_string_time", lambda s: s.outputs[1][1].at("0"), TimeError,
     ("not a time of this capture",), {"operator": "paths"})
case("is_final_other_lattice", lambda s: s.outputs[0][1].is_final(Product(0, 0)),
     TimeError, ("not a time of this capture",), {"operator": "counts"})

# Building: wrong arguments ---------------------------------------------------------------
case("join_a_list", lambda s: s.edges.join([(1, 2)]), GraphError,
     ("join needs a collection",), {"operator": "join"}, moment="build")
case("semijoin_a_list", lambda s: s.edges.semijoin([1]), GraphError,
     ("semijoin needs a collection",), {"operator": "semijoin"}, moment="build")
case("antijoin_an_int", lambda s: s.edges.antijoin(5), GraphError,
     ("antijoin needs a collection",), {"operator": "antijoin"}, moment="build")
case("join_map_a_list", lambda s: s.edges.join_map([1], lambda k, a, b: a), GraphError,
     ("join_map needs a collection",), {"operator": "join_map"}, moment="build")
case("join_map_no_function", lambda s: s.edges.join_map(s.edges, None), GraphError,
     ("join_map needs a function",), {"operator": "join_map"}, moment="build")
case("map_no_function", lambda s: s.words.map("upper"), GraphError,
     ("map needs a function",), {"operator": "map"}, moment="build")
case("filter_no_function", lambda s: s.words.filter(True), GraphError,
     ("filter needs a function",), {"operator": "filter"}, moment="build")
case("flat_map_no_function", lambda s: s.words.flat_map([1, 2]), GraphError,
     ("flat_map needs a function",), {"operator": "flat_map"}, moment="build")
case("explode_no_function", lambda s: s.words.explode(5), GraphError,
     ("explode needs a function",), {"operator": "explode"}, moment="build")
case("join_function_no_function", lambda s: s.words.join_function(None), GraphError,
     ("join_function needs a function",), {"operator": "join_function"}, moment="build")
case("delay_no_function", lambda s: s.words.delay("t + 1"), GraphError,
     ("delay needs a function",), {"operator": "delay"}, moment="build")
case("inspect_on_frontier_not_callable", lambda s: s.words.inspect(print, on_frontier=3),
     GraphError, ("inspect needs a function as on_frontier",), {"operator": "inspect"},
     moment="build")
case("concat_an_int", lambda s: s.words.concat(s.edges, 5), GraphError,
     ("concat needs a collection, got 5",), {"operator": "concat"}, moment="build")
case("join_core_logic_not_callable", lambda s: s.pairs.join_core(s.pairs, 5), GraphError,
     ("join_core needs a function",), {"operator": "join_core"}, moment="build")
case("arrange_name_not_a_str", lambda s: s.pairs.arrange_by_key(name=("a",)), GraphError,
     ("name must be a str",), {"operator": "arrange"}, moment="build")
case("enter_at_round_not_callable",
     lambda s: s.words.iterate(lambda x: s.words.enter_at(x.scope, 3).concat(x)),
     GraphError, ("enter_at needs a function as round_of",), {"operator": "enter_at"},
     moment="build")
case("reduce_not_callable", lambda s: s.edges.reduce("sum"), GraphError,
     ("reduce needs a function",), {"operator": "reduce"}, moment="build")
case("threshold_not_callable", lambda s: s.words.threshold(2), GraphError,
     ("threshold needs a function",), {"operator": "threshold"}, moment="build")
case("name_not_a_str", lambda s: s.words.map(str, name=3), GraphError,
     ("name must be a str",), {"operator": "linear"}, moment="build")
case("capture_in_loop_not_bool", lambda s: s.words.capture(in_loop=1), GraphError,
     ("in_loop must be True or False",), {"operator": "capture"}, moment="build")
case("max_rounds_a_string", lambda s: s.words.iterate(lambda x: x, max_rounds="10",
                                                      name="loop"),
     GraphError, ("max_rounds must be a positive int",), {"operator": "loop"},
     moment="build")
case("max_rounds_zero", lambda s: s.words.iterate(lambda x: x, max_rounds=0, name="loop"),
     GraphError, ("max_rounds must be a positive int, not 0",), {"operator": "loop"},
     moment="build")
case("max_rounds_negative", lambda s: s.words.iterate(lambda x: x, max_rounds=-5,
                                                      name="loop"),
     GraphError, ("not -5",), {"operator": "loop"}, moment="build")
case("max_rounds_bool", lambda s: s.words.iterate(lambda x: x, max_rounds=True,
                                                  name="loop"),
     GraphError, ("not True",), {"operator": "loop"}, moment="build")
case("on_limit_unknown", lambda s: s.words.iterate(lambda x: x, on_limit="stop",
                                                   name="loop"),
     GraphError, ("on_limit must be",), {"operator": "loop"}, moment="build")

# Building: scopes, loops and dataflows mixed ----------------------------------------------
case("join_other_dataflow", lambda s: s.edges.join(ddflow.Dataflow().new_collection()[1]),
     GraphError, ("different dataflows",), {"operator": "join"}, moment="build")
case("concat_other_dataflow",
     lambda s: s.words.concat(ddflow.Dataflow().new_collection()[1]), GraphError,
     ("different dataflows",), {"operator": "concat"}, moment="build")
case("loop_body_not_entered", lambda s: s.words.iterate(lambda x: x.concat(s.words),
                                                        name="loop"),
     GraphError, ("different scopes", "enter()"), {"operator": "concat"}, moment="build")
case("loop_returns_outer", lambda s: s.words.iterate(lambda x: s.words, name="loop"),
     GraphError, ("must return a collection of its own scope",), {"operator": "loop"},
     moment="build")
case("loop_returns_a_list", lambda s: s.words.iterate(lambda x: [x], name="loop"),
     GraphError, ("must return a collection",), {"operator": "loop"}, moment="build")
case("loop_body_raises", lambda s: s.words.iterate(lambda x: _raise(KeyError("k")),
                                                   name="loop"),
     UserFunctionError, ("logic of loop raised KeyError",), {"operator": "loop"},
     moment="build")
case("capture_inside_loop", lambda s: s.words.iterate(lambda x: (x.capture(), x)[1]),
     GraphError, ("capture() a collection of the root scope",), moment="build")
case("enter_a_string", lambda s: s.words.enter("root"), GraphError,
     ("enter needs a loop's scope",), {"operator": "enter"}, moment="build")
case("enter_none", lambda s: s.words.enter(None), GraphError,
     ("got None",), {"operator": "enter"}, moment="build")
case("enter_other_dataflow",
     lambda s: ddflow.Dataflow().new_collection()[1].iterate(
         lambda x: s.words.enter(x.scope)),
     GraphError, ("different dataflow",), {"operator": "enter"}, moment="build")
case("leave_the_root", lambda s: s.words.leave(), GraphError,
     ("leave() on a collection of the root scope",), moment="build")
case("variable_in_the_root", lambda s: ddflow.Variable(s.words.scope), GraphError,
     ("a Variable lives in a loop scope",), moment="build")
case("dataflow_engine_a_string", lambda s: ddflow.Dataflow(engine="spark"), GraphError,
     ("engine must be an engine object", "'spark'"), moment="build")
case("dataflow_time_not_least", lambda s: ddflow.Dataflow(time=5), TimeError,
     ("least time of the root lattice, here 0",), {"time": 5}, moment="build")
case("dataflow_workers_zero", lambda s: ddflow.Dataflow(workers=0), GraphError,
     ("workers must be a positive int",), moment="build")


# Running: records of the wrong shape, failing user functions ---------------------------------
def _poison_words(s: Scene) -> None:
    s.bad("words", POISON)


def _wire(name: str, build: Callable, oracle: Callable) -> Callable[[Scene], None]:
    return lambda s: s.watch(name, build(s), oracle)


def _fails_on_poison(x: Any) -> Any:
    if x == POISON:
        raise ValueError("no poison here")
    return x


def _upper_acc(a: dict) -> dict:
    return {w.upper(): n for w, n in a["words"].items() if n}


case("join_non_pairs", lambda s: s.bad("pairs", 5), DataError,
     ("wj needs (key, value) pairs",), {"operator": "wj", "record": 5, "time": NOW},
     moment="run", build=_wire("wj", lambda s: s.pairs.join(s.pairs, name="wj"),
                               lambda a: _join_map(a["pairs"], pair=True)))
case("min_non_pairs", lambda s: s.bad("pairs", "abc"), DataError,
     ("min needs (key, value) pairs",), {"operator": "min", "record": "abc", "time": NOW},
     moment="run", build=_wire("min", lambda s: s.pairs.min(),
                               lambda a: _mins(a["pairs"])))
case("sum_triples", lambda s: s.bad("pairs", (1, 2, 3)), DataError,
     ("sum needs (key, value) pairs", "length 3"),
     {"operator": "sum", "record": (1, 2, 3), "time": NOW}, moment="run",
     build=_wire("sum", lambda s: s.pairs.sum(), lambda a: _sums(a["pairs"])))
case("map_raises", _poison_words, UserFunctionError, ("ValueError", "no poison here"),
     {"operator": "guard", "record": POISON, "time": NOW}, moment="run",
     build=_wire("guard", lambda s: s.words.map(_fails_on_poison, name="guard"),
                 lambda a: {w: n for w, n in a["words"].items() if n}))
case("filter_raises", _poison_words, UserFunctionError, ("function of filter",),
     {"operator": "keep", "record": POISON, "time": NOW}, moment="run",
     build=_wire("keep", lambda s: s.words.filter(lambda w: bool(_fails_on_poison(w)),
                                                  name="keep"),
                 lambda a: {w: n for w, n in a["words"].items() if n}))
case("flat_map_not_iterable", lambda s: s.bad("words", 7), UserFunctionError,
     ("function of flat_map", "TypeError"), {"operator": "letters", "record": 7, "time": NOW},
     moment="run",
     build=_wire("letters", lambda s: s.words.flat_map(lambda w: w if isinstance(w, str)
                                                       else 5, name="letters"),
                 lambda a: _letters(a["words"])))
case("map_unhashable_output", _poison_words, DataError,
     ("listify produced unhashable data",),
     {"operator": "listify", "record": [POISON], "time": NOW}, moment="run",
     build=_wire("listify", lambda s: s.words.map(lambda w: [w] if w == POISON else w,
                                                  name="listify"),
                 lambda a: {w: n for w, n in a["words"].items() if n}))
case("explode_float_diff", _poison_words, DiffError, ("float is not a diff",),
     {"operator": "weigh", "record": POISON, "time": NOW}, moment="run",
     build=_wire("weigh", lambda s: s.words.explode(
         lambda w: [(w, 0.5 if w == POISON else 2)], name="weigh"),
         lambda a: {w: 2 * n for w, n in a["words"].items() if n}))
case("delay_backwards", _poison_words, TimeError, ("forward",),
     {"operator": "later", "record": POISON, "time": NOW}, moment="run",
     build=_wire("later", lambda s: s.words.delay(
         lambda w, t: t - 1 if w == POISON else t, name="later"),
         lambda a: {w: n for w, n in a["words"].items() if n}))
case("join_function_other_lattice", _poison_words, TimeError, ("different lattices",),
     {"operator": "stamp", "record": POISON, "time": NOW}, moment="run",
     build=_wire("stamp", lambda s: s.words.join_function(
         lambda w: [(w, Product(0, 0) if w == POISON else 0, 1)], name="stamp"),
         lambda a: {w: n for w, n in a["words"].items() if n}))
case("delay_to_an_incomparable_time", _poison_words, TimeError, ("forward",),
     {"operator": "skew", "record": POISON, "time": NOW}, moment="run",
     build=_wire("skew", lambda s: s.words.delay(
         lambda w, t: Product(t.outer + 1, t.inner - 1) if w == POISON else t, name="skew"),
         lambda a: {w: n for w, n in a["words"].items() if n}), time=Product(0, 0))
case("join_function_int_time_in_product_dataflow", _poison_words, TimeError,
     ("different lattices",), {"operator": "stamp", "record": POISON, "time": NOW},
     moment="run",
     build=_wire("stamp", lambda s: s.words.join_function(
         lambda w: [(w, 0 if w == POISON else Product(0, 0), 1)], name="stamp"),
         lambda a: {w: n for w, n in a["words"].items() if n}), time=Product(0, 0))
case("inspect_raises", _poison_words, UserFunctionError, ("function of inspect",),
     {"operator": "look", "record": POISON, "time": NOW}, moment="run",
     build=_wire("look", lambda s: s.words.inspect(lambda u: _fails_on_poison(u[0]),
                                                   name="look"),
                 lambda a: {w: n for w, n in a["words"].items() if n}))
case("reduce_logic_raises", _poison_words, UserFunctionError,
     ("reduce logic given to lengths raised ValueError",),
     {"operator": "lengths", "record": (POISON, [((), 1)]), "time": NOW}, moment="run",
     build=_wire("lengths", lambda s: s.words.map(lambda w: (w, ())).reduce(
         lambda k, vs: [(len(_fails_on_poison(k)), 1)], name="lengths"),
         lambda a: {(w, len(w)): 1 for w, n in a["words"].items() if n}))
case("reduce_logic_wrong_shape", _poison_words, DataError,
     ("must return an iterable of (output, diff) pairs", "it gave 6"),
     {"operator": "shape", "record": (POISON, [((), 1)]), "time": NOW}, moment="run",
     build=_wire("shape", lambda s: s.words.map(lambda w: (w, ())).reduce(
         lambda k, vs: [len(k)] if k == POISON else [(len(k), 1)], name="shape"),
         lambda a: {(w, len(w)): 1 for w, n in a["words"].items() if n}))
case("sum_of_strings", lambda s: s.bad("pairs", ("y", "z")), UserFunctionError,
     ("reduce logic given to sum raised TypeError",), {"operator": "sum", "time": NOW},
     moment="run", build=_wire("sum", lambda s: s.pairs.sum(), lambda a: _sums(a["pairs"])))
case("join_map_logic_raises", lambda s: s.bad("edges", (2, BAD_NODE)), UserFunctionError,
     ("given to ratio raised ZeroDivisionError",),
     {"operator": "ratio", "record": (2, BAD_NODE, BAD_NODE), "time": NOW},
     moment="run",
     build=_wire("ratio", lambda s: s.edges.join_map(
         s.edges, lambda k, a, b: 1 // (b - BAD_NODE) if b == BAD_NODE else (k, a, b),
         name="ratio"), lambda a: _join_map(a["edges"])))
case("loop_body_function_raises", lambda s: s.bad("edges", (4, BAD_NODE)),
     UserFunctionError, ("ValueError", "the bad node is reached"),
     {"operator": "walk", "record": (4, BAD_NODE)},
     moment="run",
     build=_wire("walkers", lambda s: _walk(s), lambda a: _reach(a["edges"])))
case("loop_does_not_converge", lambda s: s.bad("words", "grow"), ConvergenceError,
     ("did not converge within max_rounds=20", "'grower'"), {"operator": "grower"},
     moment="run",
     build=_wire("grown", lambda s: s.words.iterate(
         lambda x: x.map(lambda w: w + "!" if w.startswith("grow") else w).distinct(),
         max_rounds=20, name="grower"),
         lambda a: {w: 1 for w, n in a["words"].items() if n > 0}))
case("non_pair_into_semijoin", lambda s: s.bad("pairs", 9), DataError,
     ("kept needs (key, value) pairs",), {"operator": "kept", "record": 9, "time": NOW},
     moment="run",
     build=_wire("kept", lambda s: s.pairs.semijoin(s.edges.map(lambda e: "xy"[e[0] % 2]),
                                                    name="kept"),
                 lambda a: _kept(a["pairs"], a["edges"])))


def _datalog_pairs(s: Scene) -> Any:
    return ddflow.datalog("q(x, y) :- p(x, y). r(y) :- q(_, y).", p=s.pairs)["r"]


def _query_pairs(s: Scene) -> Any:
    return ddflow.query("r(y) :- p(x, y), p(x, y)", p=s.pairs)


def _seconds(acc: dict, squared: bool = False) -> dict:
    out: dict = {}
    for (_k, v), r in acc.items():
        if r > 0:
            out[(v,)] = out.get((v,), 0) + (r * r if squared else 1)
    return out if squared else dict.fromkeys(out, 1)


for _bad, _what in ((5, "of type int, not a tuple"), ((1, 2, 3), "a tuple of arity 3"),
                    ("ab", "of type str")):
    case(f"datalog_fact_{type(_bad).__name__}_{len(str(_bad))}",
         lambda s, b=_bad: s.bad("pairs", b), DataError,
         ("relation 'p' takes tuples of arity 2", _what),
         {"operator": "p.check", "record": _bad, "time": NOW}, moment="run",
         build=_wire("datalog", _datalog_pairs, lambda a: _seconds(a["pairs"])))
case("query_relation_wrong_arity", lambda s: s.bad("pairs", ("x",)), DataError,
     ("relation 'p' takes tuples of arity 2", "a tuple of arity 1"),
     {"operator": "p.check", "record": ("x",), "time": NOW}, moment="run",
     build=_wire("query", _query_pairs, lambda a: _seconds(a["pairs"], squared=True)))


# Questions added after run() that fail on the data already loaded -------------------------
case("question_map_raises_on_loaded_data",
     lambda s: s.words.map(lambda w: 1 // (w != "a"), name="q1").capture(), UserFunctionError,
     ("ZeroDivisionError", "drop() it"), {"operator": "q1", "record": "a"},
     moment="question")
case("question_reduce_raises_on_loaded_data",
     lambda s: s.pairs.reduce(lambda k, vs: [(1 // (k != "y"), 1)], name="q2").capture(),
     UserFunctionError, ("reduce logic given to q2",), {"operator": "q2"},
     moment="question")
case("question_loop_does_not_converge_on_loaded_data",
     lambda s: s.words.iterate(lambda x: x.map(lambda w: w + "!").concat(x).distinct(),
                               max_rounds=5, name="q3").capture(),
     ConvergenceError, ("iterate loop 'q3'", "max_rounds=5"), {"operator": "q3"},
     moment="question")
case("question_query_of_the_wrong_arity_over_loaded_pairs",
     lambda s: ddflow.query("q(x) :- p(x, _, _)", p=s.pairs).capture(), DataError,
     ("relation 'p' takes tuples of arity 3", "a tuple of arity 2"),
     {"operator": "p.check"}, moment="question")
case("question_join_map_raises_on_loaded_edges",
     lambda s: s.edges.join_map(s.edges, lambda k, a, b: 1 // (k - 2), name="q5").capture(),
     UserFunctionError, ("given to q5 raised ZeroDivisionError",), {"operator": "q5"},
     moment="question")


def _sums(acc: dict) -> dict:
    out: dict = {}
    for (k, v), r in acc.items():
        out[k] = out.get(k, 0) + v * r
    present = {k for (k, _v), r in acc.items() if r}
    return {(k, out[k]): 1 for k in present}


def _letters(acc: dict) -> dict:
    out: dict = {}
    for w, n in acc.items():
        for ch in w:
            out[ch] = out.get(ch, 0) + n
    return {k: v for k, v in out.items() if v}


def _join_map(acc: dict, pair: bool = False) -> dict:
    """`acc` joined with itself: `(k, a, b)` records, or `(k, (a, b))` with `pair`."""
    out: dict = {}
    for (k, a), r in acc.items():
        for (k2, b), r2 in acc.items():
            if k == k2:
                rec = (k, (a, b)) if pair else (k, a, b)
                out[rec] = out.get(rec, 0) + r * r2
    return {k: v for k, v in out.items() if v}


def _mins(acc: dict) -> dict:
    least: dict = {}
    for (k, v), r in acc.items():
        if r > 0:
            least[k] = min(least.get(k, v), v)
    return {kv: 1 for kv in least.items()}


def _kept(pairs: dict, edges: dict) -> dict:
    keys: dict = {}
    for (a, _b), r in edges.items():
        keys["xy"[a % 2]] = keys.get("xy"[a % 2], 0) + r
    out = {(k, v): r * keys.get(k, 0) for (k, v), r in pairs.items()}
    return {kv: r for kv, r in out.items() if r}


def _no_bad_node(n: Any) -> Any:
    if n == BAD_NODE:
        raise ValueError("the bad node is reached")
    return n


def _walk(s: Scene) -> Any:
    roots = s.edges.filter(lambda e: e[0] == 1).map(lambda e: e[0]).distinct()
    edges = s.edges
    return roots.iterate(lambda r: edges.enter(r.scope).semijoin(r)
                         .map(lambda kv: _no_bad_node(kv[1]), name="walk")
                         .concat(roots.enter(r.scope)).distinct(), name="walkers")


# -- the scaffold -------------------------------------------------------------------------

def _fields_ok(err: DataflowError, fields: dict, bad_time: Any) -> None:
    text = str(err)
    for attr, want in fields.items():
        got = getattr(err, attr)
        if want is NOW:
            want = bad_time
        if attr == "operator":
            assert got == want or (isinstance(got, str) and got.startswith(want)), (got, want)
        else:
            assert got == want, (attr, got, want)
        assert repr(got) in text or str(got) in text, (attr, text)


def check(name: str, engine: str = "local", time: Any = None) -> DataflowError:
    """Build a scene, apply misuse `name`, assert the error, recover, check the answer."""
    m = CASES[name]
    scene = Scene(time=m.time if time is None else time, engine=engine)
    if m.build is not None:
        m.build(scene)
    bad_time = None
    if m.moment == "build":
        before = scene.graph()
        with pytest.raises(m.error) as info:
            m.act(scene)
        assert scene.graph() == before, "a failed build call changed the graph"
        scene.start()
    else:
        scene.start()
        if m.moment == "call":
            before = scene.snapshot()
            with pytest.raises(m.error) as info:
                m.act(scene)
            assert scene.snapshot() == before, "a refused call changed the dataflow"
        elif m.moment == "question":
            # A question added after run() that fails on the data already loaded:
            # no pending update is to blame (err.inputs == ()), drop() is the way out,
            # and nothing is poisoned: the other outputs go on, new questions work.
            before = scene.snapshot()
            question = m.act(scene)
            scene.feed("words", "late")
            t = scene.next_time()
            for s in scene.sessions.values():
                s.advance_to(t)
            with pytest.raises(m.error) as info:
                scene.df.run()
            assert scene.snapshot()[0] == before[0], "a failed question changed an output"
            assert info.value.inputs == (), info.value.inputs
            with pytest.warns(ddflow.NothingDiscardedWarning):
                assert scene.df.discard(info.value) == []
            scene.df.drop(question)
            scene.df.run()
            scene.watch("afterwards", scene.words.map(lambda w: (w, len(w))).count(),
                        lambda a: {((w, len(w)), n): 1 for w, n in a["words"].items() if n})
            scene.step()
        else:
            m.act(scene)
            bad_time = scene.poison[0][2]
            before = scene.snapshot()
            t = scene.next_time()
            for s in scene.sessions.values():
                s.advance_to(t)
            with pytest.raises(m.error) as info:
                scene.df.run()
            after = scene.snapshot()
            assert after[0] == before[0], "a failed run changed an output"
            assert after[1] == before[1], "a failed run lost pending updates"
            scene.recover(info.value)
            scene.df.run()
    err = info.value
    assert isinstance(err, DataflowError) and type(err) is m.error, type(err)
    for fragment in m.says:
        assert fragment in str(err), (fragment, str(err))
    _fields_ok(err, m.fields, bad_time)
    scene.check()
    scene.more()
    scene.check()
    return err


def _exercises(m: Misuse) -> tuple:
    """What a case exercises, as far as the scaffold can see without running it: its
    moment, the error, the message it checks, the fields it names, its lattice."""
    fields = tuple(sorted((k, repr(v)) for k, v in m.fields.items()))
    return (m.moment, m.error.__name__, m.says, fields, type(m.time).__name__)


def _kinds(m: Misuse) -> tuple:
    """The coarse kind of a case: where it strikes, what it raises, which operator
    it names and the first thing its message must say."""
    return (m.moment, m.error.__name__, m.fields.get("operator"), m.says[:1])


def test_the_catalogue_has_at_least_sixty_distinct_cases():
    # Fresh lambdas are always distinct, so cases are compared by what they check:
    # no two may expect the same (a copy), and there are >= 60 kinds of misuse.
    seen: dict = {}
    for name, m in CASES.items():
        assert _exercises(m) not in seen, (name, seen.get(_exercises(m)))
        seen[_exercises(m)] = name
    assert len({_kinds(m) for m in CASES.values()}) >= 60
    assert {m.moment for m in CASES.values()} == {"build", "call", "run", "question"}
    # The comparison sees a copy that differs only by its lambda.
    twin = attrs.evolve(CASES["map_raises"], act=lambda s: s.bad("words", POISON))
    assert _exercises(twin) == _exercises(CASES["map_raises"])


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_misuse(name, engine):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ddflow.StalledRunWarning)  # the scene advances
        check(name, engine)


RUN_CASES = sorted(n for n, m in CASES.items() if m.moment in ("run", "question"))


@pytest.mark.parametrize("name", sorted(set(RUN_CASES) - {"join_function_other_lattice",
                                                           "delay_backwards"}))
def test_misuse_at_run_at_partially_ordered_times(name):
    # The same misuse and recovery in a dataflow over Product times, fed at
    # incomparable times (two cases build on int times and have Product twins below).
    check(name, time=Product(0, 0))
