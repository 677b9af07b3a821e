"""Regression tests for the holes of the front door (issue 14): each was reproduced first.

A failed build call leaves the graph exactly as it was; arguments are checked with
typed errors saying what is expected; reads at times that are not final refuse
unless asked for a partial answer; a run that can complete nothing says so; numbers
that are `numbers.Integral` serve as times and diffs; errors name the operator the
user called; `discard` withdraws only what it is told to.
"""

from __future__ import annotations

import numbers
import warnings

import pytest

import ddflow
from ddflow import (DataError, DiffError, GraphError, NotFinalError, StalledRunWarning,
                    TimeError, UserFunctionError)
from ddflow.engine.bsp import InProcessShards
from ddflow.engine.local import LocalEngine
from lattice import Product


class Tick(int):
    """An integer type that is not `int` (as numpy's int64 is not)."""


class Count:
    """A `numbers.Integral` that does not subclass int (registered, as numpy does)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __int__(self) -> int:
        return self.n

    __index__ = __int__

    def __eq__(self, other: object) -> bool:
        return int(self) == other

    def __hash__(self) -> int:
        return hash(self.n)


numbers.Integral.register(Count)


def _graph(df: ddflow.Dataflow) -> tuple:
    """Everything a build call may change, by value."""
    return ([(n.id, n.name, n.kind, [p.id for p in n.inputs],
              sorted((c.id, port) for c, port in n.consumers)) for n in df.nodes],
            len(df.captures), len(df.sessions), df._ids)


def _words() -> tuple:
    df = ddflow.Dataflow()
    s, c = df.new_collection("words")
    return df, s, c


# -- a failed build call leaves the graph as it was --------------------------------

@pytest.mark.parametrize("call", [
    lambda c: c.join([(1, 2)]),
    lambda c: c.semijoin([1]),
    lambda c: c.antijoin(5),
    lambda c: c.join_map([1], lambda k, a, b: a),
    lambda c: c.join_core(c, "not a function"),
    lambda c: c.iterate(lambda x: x, max_rounds="10"),
    lambda c: c.iterate(lambda x: [x]),
    lambda c: c.iterate(lambda x: x.map(lambda y: y).join(5)),
    lambda c: c.threshold(3),
    lambda c: c.enter("root"),
], ids=["join", "semijoin", "antijoin", "join_map", "join_core_logic",
        "max_rounds", "iterate_result", "iterate_body", "threshold", "enter"])
def test_a_failed_build_call_leaves_the_graph_as_it_was(call):
    df, s, c = _words()
    out = c.map(lambda w: (w, 1)).count().capture()
    before = _graph(df)
    with pytest.raises(GraphError):
        call(c)
    assert _graph(df) == before
    assert c._arranged == {}                # no arrangement cached either
    # The user fixes the call; the dataflow runs, with nothing of the failure in it.
    pairs = c.map(lambda w: (w, len(w)))
    joined = pairs.join(pairs).capture()
    s.insert("ab"); s.advance_to(1); df.run()
    assert joined.at(0) == {("ab", (2, 2)): 1}
    assert out.at(0) == {(("ab", 1), 1): 1}


def test_build_ids_continue_where_they_were_after_a_failed_call():
    df, s, c = _words()
    with pytest.raises(GraphError):
        c.join(5)
    assert c.map(str).node.id == 1


# -- arguments --------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["10", 0, -5, 2.5, True, None.__class__])
def test_iterate_max_rounds_must_be_a_positive_int(bad):
    df, s, c = _words()
    with pytest.raises(GraphError, match="max_rounds must be a positive int") as err:
        c.iterate(lambda x: x, max_rounds=bad)
    assert err.value.operator.startswith("iterate")


def test_iterate_max_rounds_takes_any_integral_and_none():
    df, s, c = _words()
    loops = [c.iterate(lambda x: x, max_rounds=Tick(3)).capture(),
             c.iterate(lambda x: x, max_rounds=Count(4)).capture(),
             c.iterate(lambda x: x, max_rounds=None).capture()]
    s.insert("a"); s.close(); df.run()
    assert [cap.at(0) for cap in loops] == [{"a": 1}] * 3


@pytest.mark.parametrize("kwargs, error, says", [
    ({"engine": "spark"}, GraphError, "engine must be an engine object"),
    ({"engine": object()}, GraphError, "it has no compile"),
    ({"time": 5}, TimeError, "least time of the root lattice, here 0"),
    ({"time": Product(1, 1)}, TimeError, "here Product(0, 0)"),
    ({"time": "0"}, TimeError, "the least time of the root lattice"),
    ({"time": Product}, TimeError, "the least time of the root lattice"),
    ({"workers": 0}, GraphError, "workers must be a positive int"),
    ({"workers": "2"}, GraphError, "workers must be a positive int"),
    ({"fuse": "no"}, GraphError, "fuse must be True or False"),
])
def test_dataflow_arguments_are_checked(kwargs, error, says):
    with pytest.raises(error) as err:
        ddflow.Dataflow(**kwargs)
    assert says in str(err.value)


def test_dataflow_takes_int_and_integral_least_times():
    assert ddflow.Dataflow(time=int).time == 0
    assert type(ddflow.Dataflow(time=Tick(0)).time) is int
    assert ddflow.Dataflow(time=Product(Count(0), 0)).time == Product(0, 0)
    assert ddflow.Dataflow(workers=Tick(2)).engine.workers == 2


@pytest.mark.parametrize("call, error, says", [
    (lambda c: c.map(5), GraphError, "map needs a function"),
    (lambda c: c.inspect(print, on_frontier=3), GraphError, "inspect needs a function"),
    (lambda c: c.reduce(None), GraphError, "reduce needs a function"),
    (lambda c: c.join_map(c, 3), GraphError, "join_map needs a function"),
    (lambda c: c.enter(None), GraphError, "enter needs a loop's scope"),
    (lambda c: c.enter_at(c.scope, lambda x: 0), GraphError, "enter_at enters exactly one"),
    (lambda c: c.capture(in_loop="yes"), GraphError, "in_loop must be True or False"),
    (lambda c: c.map(str, name=7), GraphError, "name must be a str"),
    (lambda c: c.iterate("body"), GraphError, "iterate needs a function"),
    (lambda c: c.iterate(lambda x: x, on_limit="stop"), GraphError, "on_limit"),
    (lambda c: ddflow.Variable(c.scope), GraphError, "a Variable lives in a loop scope"),
])
def test_builder_arguments_are_checked(call, error, says):
    df, s, c = _words()
    before = _graph(df)
    with pytest.raises(error) as err:
        call(c)
    assert says in str(err.value) and _graph(df) == before


# -- raw exceptions and misleading messages -----------------------------------------

def test_session_misuse_raises_typed_errors():
    df, s, c = _words()
    with pytest.raises(DataError, match="extend needs an iterable") as err:
        s.extend(5)
    assert err.value.operator == "words"
    with pytest.raises(DataError, match="insert_dataframe needs a Spark DataFrame"):
        s.insert_dataframe([("a", 0, 1)])
    assert s.pending == []


def test_collections_of_two_dataflows_are_reported_as_such():
    _, _, a = _words()
    _, _, b = _words()
    for call in (lambda: a.concat(b), lambda: a.join(b), lambda: a.semijoin(b)):
        with pytest.raises(GraphError, match="belong to different dataflows"):
            call()


@pytest.mark.parametrize("build, operator", [
    (lambda c: c.join(c.map(lambda x: (x, x))), "join"),
    (lambda c: c.min(), "min"),
    (lambda c: c.reduce(lambda k, vs: [(len(vs), 1)], name="mine"), "mine"),
])
@pytest.mark.parametrize("workers", [1, 3])
def test_a_record_that_is_not_a_pair_blames_the_operator_called(build, operator, workers):
    df = ddflow.Dataflow(workers=workers)
    s, c = df.new_collection("numbers")
    build(c).capture()
    s.insert(5); s.advance_to(3); s.update_at((1, 2), 3); s.advance_to(4)
    with pytest.raises(DataError) as err:
        df.run()
    assert err.value.operator.startswith(operator) and err.value.record == 5
    assert err.value.time == 0 and "pairs" in str(err.value)
    assert "arrange_by_key" not in err.value.operator


def test_an_unhashable_map_output_names_the_map():
    df, s, c = _words()
    c.map(lambda w: [w], name="listify").capture()
    s.insert("a"); s.advance_to(1)
    with pytest.raises(DataError, match="listify produced unhashable data") as err:
        df.run()
    assert err.value.operator == "listify" and err.value.record == ["a"]
    assert err.value.time == 0


def test_an_unhashable_output_reaching_an_arrangement_names_the_map():
    df, s, c = _words()
    c.map(lambda w: (w, [w]), name="listify").distinct().capture()
    s.insert("a"); s.advance_to(1)
    with pytest.raises(DataError, match="listify produced unhashable data"):
        df.run()


@pytest.mark.parametrize("logic, says", [
    (lambda k, vs: 5, "it returned 5"),
    (lambda k, vs: [(1, 2, 3)], "it gave (1, 2, 3)"),
    (lambda k, vs: ["ab"], "it gave 'ab'"),
    (lambda k, vs: "ab", "it returned 'ab'"),
    (lambda k, vs: [([1], 1)], "is unhashable"),
    (lambda k, vs: [(1, 0.5)], "the diff of 1 is 0.5"),
])
def test_a_reduce_logic_of_the_wrong_shape_is_a_data_error(logic, says):
    df, s, c = _words()
    c.map(lambda w: (w, 1)).reduce(logic, name="shape").capture()
    s.insert("a"); s.advance_to(1)
    with pytest.raises(DataError) as err:
        df.run()
    assert says in str(err.value) and err.value.operator == "shape" and err.value.time == 0
    assert err.value.record == ("a", [(1, 1)])


def test_a_reduce_logic_raising_typeerror_itself_is_a_user_function_error():
    df, s, c = _words()
    c.map(lambda w: (w, 1)).reduce(lambda k, vs: [(k + 1, 1)], name="bad").capture()
    s.insert("a"); s.advance_to(1)
    with pytest.raises(UserFunctionError) as err:
        df.run()
    assert isinstance(err.value.__cause__, TypeError) and err.value.operator == "bad"


# -- integers of other types as times and diffs --------------------------------------

@pytest.mark.parametrize("integer", [Tick, Count])
def test_integral_times_and_diffs_are_accepted_as_ints(integer):
    df, s, c = _words()
    cap = c.count().capture()
    s.update_at("a", integer(2), integer(3))
    s.advance_to(integer(1))
    s.update("b", integer(2))
    s.extend([("c", integer(1), integer(1))])
    s.advance_to(integer(3)); df.run()
    assert all(type(u[1]) is int and type(u[2]) is int for u in cap.updates)
    assert cap.at(integer(2)) == {("a", 3): 1, ("b", 2): 1, ("c", 1): 1}
    with pytest.raises(DiffError):
        s.update("d", True)             # bool stays refused, as before


def test_numpy_integers_as_times_and_diffs():
    np = pytest.importorskip("numpy")
    df = ddflow.Dataflow(time=Product(0, 0))
    s, c = df.new_collection()
    cap = c.map(lambda kv: kv).sum().capture()
    s.update_at(("k", 5), Product(np.int64(0), np.int32(1)), np.int64(2))
    s.advance_to(Product(np.int64(1), np.int64(2))); df.run()
    assert cap.at(Product(np.int64(0), np.int64(1))) == {("k", 10): 1}
    assert type(cap.updates[0][1][0]) is int


# -- reads that refuse to lie ------------------------------------------------------------

def test_at_a_time_not_final_names_the_inputs_to_advance():
    df = ddflow.Dataflow()
    a, xs = df.new_collection("xs")
    b, ys = df.new_collection("ys")
    c, zs = df.new_collection("zs")              # not upstream of the capture
    cap = xs.concat(ys).count().capture()
    a.insert(1); b.insert(1); c.insert(9)
    with pytest.raises(NotFinalError, match="run"):
        cap.at(0)                                # before any run
    a.advance_to(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StalledRunWarning)
        df.run()
    with pytest.raises(NotFinalError) as err:
        cap.at(0)
    message = str(err.value)
    assert "'ys'" in message and "'xs'" not in message and "'zs'" not in message
    assert "advance_to" in message and "partial=True" in message and err.value.time == 0
    assert cap.at(0, partial=True) == {}         # on purpose: nothing complete yet
    b.advance_to(1)
    with pytest.raises(NotFinalError, match=r"run\(\) the dataflow"):
        cap.at(0)                                # advanced, not run yet
    df.run()
    assert cap.at(0) == {(1, 2): 1}


def test_at_a_time_of_another_lattice_is_a_time_error():
    df, s, c = _words()
    cap = c.capture()
    s.close(); df.run()
    with pytest.raises(TimeError, match="not a time of this capture"):
        cap.at(Product(0, 0))


def test_at_inside_a_loop_names_the_root_inputs():
    df = ddflow.Dataflow()
    s, c = df.new_collection("seed")
    rounds = []
    c.iterate(lambda x: _capture_rounds(x, rounds)).capture()
    s.insert(3); s.advance_to(1); df.run()
    assert rounds[0].at(Product(0, 5)) == {0: 1, 1: 1, 2: 1, 3: 1}
    with pytest.raises(NotFinalError, match="advance_to.* past 1 .*'seed'"):
        rounds[0].at(Product(1, 0))


def _capture_rounds(x, out):
    out.append(x.capture(in_loop=True))
    return x.map(lambda n: max(n - 1, 0)).concat(x).distinct()


def test_a_run_whose_inputs_did_not_move_warns():
    df, s, c = _words()
    cap = c.count().capture()
    s.insert("a")
    with pytest.warns(StalledRunWarning, match="'words' .*advance_to"):
        df.run()
    with pytest.raises(NotFinalError):
        cap.at(0)
    s.advance_to(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StalledRunWarning)
        df.run()                                   # it moved: no warning
        df.run()                                   # nothing pending: no warning
        s.close()
        s2_df, s2, c2 = _words()
        s2.insert("x"); s2.close(); s2_df.run()    # closed: complete
    assert cap.at(0) == {("a", 1): 1}


# -- engines agree before the first run ----------------------------------------------------

@pytest.mark.parametrize("engine", [lambda: LocalEngine(), lambda: LocalEngine(workers=3),
                                    lambda: InProcessShards(2)], ids=["local", "w3", "bsp"])
def test_every_engine_answers_empty_before_the_first_run(engine):
    df = ddflow.Dataflow(engine=engine())
    s, c = df.new_collection()
    cap = c.count().capture()
    assert cap.updates == [] and df.engine.captured_since(cap.node, None)[0] == []
    assert df.total_work() == 0 and all(r["records_in"] == 0 for r in df.metrics())
    assert df.engine.operators(cap.node) == [] and repr(cap) == "Capture('capture', 0 updates)"
    s.insert("a"); s.close(); df.run()
    assert cap.updates == [(("a", 1), 0, 1)]


# -- discard withdraws what it is told to ---------------------------------------------

def test_discard_at_the_time_an_error_names_keeps_the_other_updates():
    df = ddflow.Dataflow()
    s, c = df.new_collection("xs")
    cap = c.delay(lambda x, t: t if x != "late" or t < 2 else t - 1).count().capture()
    s.insert("late")                     # fine at time 0
    s.advance_to(2)
    s.insert("late")                     # moved back at time 2: an error
    s.insert("ok")
    s.advance_to(3)
    with pytest.raises(TimeError) as err:
        df.run()
    assert err.value.record == "late" and err.value.time == 2
    assert s.discard(err.value.record, err.value.time) == [("late", 2, 1)]
    assert s.pending == [("late", 0, 1), ("ok", 2, 1)]
    df.run()
    assert cap.at(2) == {("late", 1): 1, ("ok", 1): 1}


def test_discard_with_a_diff_takes_only_the_exact_updates():
    df, s, c = _words()
    s.update("a", 2); s.update("a", -1); s.update("b")
    assert s.discard("a", 0, -1) == [("a", 0, -1)]
    assert s.discard("a", 1) == [] and s.discard("zzz") == []
    assert s.discard("a") == [("a", 0, 2)] and s.pending == [("b", 0, 1)]


@pytest.mark.parametrize("call, says", [
    (lambda c: c.child(max_rounds="3"), "max_rounds must be a positive int"),
    (lambda c: c.child(max_rounds=0), "not 0"),
    (lambda c: c.run("3"), "run(ticks) takes a number of ticks"),
    (lambda c: c.run(-1), "not -1"),
])
def test_circuit_numeric_arguments_are_checked(call, says):
    from ddflow.circuit import Circuit
    circuit = Circuit("calc")
    with pytest.raises(GraphError) as err:
        call(circuit)
    assert says in str(err.value) and circuit.nodes == []
    circuit.run(Tick(2))
    assert circuit.time == 2


def test_dir_lists_public_names_and_subpackages_only():
    """`dir(ddflow)` is what a user may reach: the front door, the errors, the
    subpackages (each reachable by attribute), not the module's machinery."""
    import importlib
    names = dir(ddflow)
    for gone in ("Any", "annotations", "_LAZY", "_REGISTRARS", "_SUBMODULES"):
        assert gone not in names
    assert set(ddflow.__all__) <= set(names)
    assert set(ddflow.errors.__all__) <= set(names)
    for sub in ("algorithms", "testing", "viz", "engine", "circuit", "errors"):
        assert sub in names
        assert getattr(ddflow, sub) is importlib.import_module(f"ddflow.{sub}")
    assert all(not n.startswith("_") or n == "__version__" for n in names)
    assert callable(ddflow.algorithms.reachability)
    for name in names:
        getattr(ddflow, name)       # every listed name resolves


def test_a_convergence_error_names_the_loop_as_built_not_its_second_variable():
    """A loop built as `iterate(..., name="walks")` with a second `Variable("odd")`
    that never converges: the error names the loop 'walks' (and the variable)."""
    df = ddflow.Dataflow()
    s, roots = df.new_collection("roots")

    def walks(even):
        odd = ddflow.Variable(even.scope, name="odd")
        odd.set(odd.collection.map(lambda v: v + 1).concat(even).distinct())
        return even.concat(odd.collection.filter(lambda v: v < 0))
    out = roots.iterate(walks, max_rounds=6, name="walks").capture()
    s.insert(0)
    s.advance_to(1)
    with pytest.raises(ddflow.ConvergenceError) as info:
        df.run()
    err = info.value
    assert err.operator == "walks"
    assert "iterate loop 'walks' (variable 'odd') did not converge" in str(err)
    assert [(x.name, d) for x, d, _t, _r in err.inputs] == [("roots", 0)]
    s.discard(err)
    df.run()
    assert out.at(0) == {}


def test_help_works_without_the_test_extra():
    # dir(ddflow) lists `testing`, which needs hypothesis (the [test] extra); pydoc
    # reads every listed name, so a missing optional dependency must not break it.
    import subprocess
    import sys
    code = ("import sys; sys.modules['hypothesis'] = None\n"
            "import pydoc, ddflow\n"
            "assert 'Dataflow' in pydoc.render_doc(ddflow)\n"
            "try:\n    ddflow.testing\nexcept AttributeError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert "needs 'hypothesis'" in out.stdout
