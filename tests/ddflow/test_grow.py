"""Dataflows that grow after `run()`: new operators over running collections.

A piece added after a run imports the arrangements it reads (an input keeps its own)
or re-derives a collection from its nearest arranged ancestors; its capture answers
at every time in advance of `Capture.since` exactly as the same piece built before
the first run would.  Checked at `Product` times on every in-process engine, with
the work on import counted, dropping, errors and rollback.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.engine.bsp import InProcessShards
from ddflow.engine.local import LocalEngine
from ddflow.errors import GraphError, TimeError, UserFunctionError
from ddflow.testing import evaluate
from ddflow.updates import accumulate
from lattice import Product, join, join_closure, less_equal
from tests.strategies import times

# Every test here runs with batches and input histories in rows and in columns
# (tests/conftest.py): a grown piece imports an input's columnar history.
pytestmark = pytest.mark.usefixtures("both_layouts")

ENGINES = {
    "local": lambda: LocalEngine(),
    "workers3": lambda: LocalEngine(workers=3),
    "bsp": lambda: InProcessShards(3),
}


def _reach(edges, roots):
    return roots.iterate(max_rounds=50, logic=lambda inner: edges.enter(inner.scope).semijoin(inner)
                         .map(lambda kv: kv[1]).concat(roots.enter(inner.scope)).distinct())


#: What the running dataflow offers a new piece: inputs (imported whole), an
#: arrangement (shared), a derived collection and a loop result (both re-derived).
SOURCES = {
    "input": lambda a, b, base: a,
    "derived": lambda a, b, base: base["swapped"],
    "loop": lambda a, b, base: base["reach"].map(lambda x: (x % 2, x)),
}

#: New pieces, each reading one source and the other input.
PIECES = {
    "count": lambda src, b: src.map(lambda kv: kv[0]).count(),
    "distinct": lambda src, b: src.map(lambda kv: kv[1]).distinct(),
    "join": lambda src, b: src.join(b),
    "antijoin": lambda src, b: src.antijoin(b.map(lambda kv: kv[0])),
    "min": lambda src, b: src.min(),
    "reach": lambda src, b: _reach(src, b.map(lambda kv: kv[0])),
}


def _base(a, b) -> dict:
    """The running dataflow: a join (arranging both inputs), a derived collection, a
    loop; all captured so they run."""
    base = {"joined": a.join(b), "swapped": a.map(lambda kv: (kv[1], kv[0])),
            "reach": _reach(a, b.map(lambda kv: kv[0]))}
    for c in base.values():
        c.capture()
    return base


def _grown(inputs, source: str, piece: str, at: int, engine) -> tuple[list, object]:
    """Feed `inputs` one update per run; after the `at`-th run add the piece; return
    its capture's updates and its `since`."""
    made: dict = {}

    def build(a, b):
        made["args"] = (a, b, _base(a, b))
        return made["args"][2]["joined"]

    def after_run(n: int) -> None:
        if n == at:
            a, b, base = made["args"]
            made["cap"] = PIECES[piece](SOURCES[source](a, b, base), b).capture()

    evaluate(build, inputs, time=Product(0, 0), engine=engine, schedule="each",
             after_run=after_run)
    return made["cap"].updates, made["cap"].since


def _fresh(inputs, source: str, piece: str, engine) -> list:
    def build(a, b):
        base = _base(a, b)
        return PIECES[piece](SOURCES[source](a, b, base), b)
    return evaluate(build, inputs, time=Product(0, 0), engine=engine)


def _retracted(record, time, later):
    """A record inserted at `time`, and withdrawn again at `time` joined with `later`
    if that is given: accumulations stay non-negative, so every loop converges."""
    out = [(record, time, 1)]
    if later is not None:
        out.append((record, join(time, later), -1))
    return out


pairs = st.lists(st.builds(_retracted, st.tuples(st.integers(0, 3), st.integers(0, 3)),
                           times("product"), st.none() | times("product")),
                 max_size=6).map(lambda groups: [u for g in groups for u in g])


growth_cases = dict(a=pairs, b=pairs, source=st.sampled_from(sorted(SOURCES)),
                    piece=st.sampled_from(sorted(PIECES)), at=st.integers(0, 12))


@pytest.mark.parametrize("engine", ["local", "workers3"])
@settings(max_examples=40, deadline=None)
@given(**growth_cases)
def test_a_piece_added_after_run_agrees_with_a_fresh_dataflow(engine, a, b, source, piece, at):
    """The law for growth: at every time in advance of `since` (every time of the
    join-closure of the inputs' times, and their joins with `since`), the new piece's
    accumulation equals that of the same piece built before the first run."""
    _check_growth(engine, a, b, source, piece, at)


@settings(max_examples=10, deadline=None)
@given(**growth_cases)
def test_a_piece_added_after_run_agrees_on_the_bsp_driver(a, b, source, piece, at):
    """The same on the BSP driver (shards pickled between supersteps, imports crossing
    shards as messages): fewer examples, each costs about a second."""
    _check_growth("bsp", a, b, source, piece, at)


def _check_growth(engine, a, b, source, piece, at):
    at = min(at, len(a) + len(b) - 1)      # one run per update: add it after one of them
    assume(at >= 0)
    got, since = _grown([a, b], source, piece, at, ENGINES[engine])
    want = _fresh([a, b], source, piece, ENGINES[engine])
    times = join_closure({u[1] for u in a + b} | {Product(0, 0)})
    if since is not None:
        times = {t for t in join_closure(times | {since}) if less_equal(since, t)}
    for t in times:
        assert accumulate(got, t) == accumulate(want, t), (t, since)


def _toggled(n_toggles: int, live: int, arrange: bool):
    """An input with `live` records, one of them inserted and removed `n_toggles`
    times, epoch after epoch; optionally arranged (by a running join)."""
    df = ddflow.Dataflow()
    s, c = df.new_collection("c")
    if arrange:
        c.join(c).capture()
    else:
        c.map(lambda kv: kv).capture()
    for k in range(live):
        s.insert((k, k))
    t = 0
    for _ in range(n_toggles):
        s.insert(("hot", 0))
        t += 1
        s.advance_to(t)
        df.run()
        s.remove(("hot", 0))
        t += 1
        s.advance_to(t)
        df.run()
    return df, s, c


@pytest.mark.parametrize("arrange", [False, True], ids=["input", "arrangement"])
def test_work_on_import_follows_the_imported_contents_not_their_history(arrange):
    """A count added after 10 or 400 toggles of one record reads the same number of
    records: the live ones (the input's history and the arrangement are compacted)."""
    reads = []
    for toggles in (10, 400):
        df, s, c = _toggled(toggles, live=50, arrange=arrange)
        counts = c.map(lambda kv: kv[0]).count()
        cap = counts.capture()
        s.advance_to(2 * toggles + 1)
        df.run()
        assert cap.at(2 * toggles) == {(k, 1): 1 for k in range(50)}
        rows = {r["operator"]: r for r in df.metrics()}
        reads.append(sum(r["records_in"] for name, r in rows.items()
                         if name.startswith(("count", "arrange_by_self"))
                         and r["id"] >= counts.node.id - 3))
    assert reads[0] == reads[1] <= 2 * 50 + 4, reads


def test_input_history_stays_within_twice_the_live_records():
    df, s, c = _toggled(300, live=100, arrange=False)
    (op,) = df.engine.operators(s.node)
    assert op.trace_records() <= 2 * 100


def test_join_over_a_running_arrangement_shares_it():
    """`edges.join(...)` after a run reuses the running arrangement of `edges`: no
    second arrangement of it, and its trace is read, not rebuilt."""
    df = ddflow.Dataflow()
    s, edges = df.new_collection("edges")
    edges.join(edges).capture()
    arrangements = [n for n in df.nodes if n.kind == "arrange"]
    for e in [(1, 2), (2, 3)]:
        s.insert(e)
    s.advance_to(1)
    df.run()
    later = edges.join(edges.map(lambda e: (e[1], e[0]))).capture()
    s.advance_to(2)
    df.run()
    assert [n for n in df.nodes if n.kind == "arrange" and n.inputs[0] is edges.node] \
        == arrangements
    assert later.at(1) == {(2, (3, 1)): 1}


def test_dropping_a_piece_releases_its_hold_on_compaction():
    """After `drop`, the arrangement the dropped join read compacts again: one record
    toggled for 200 epochs leaves its trace small; a dropped reader that kept its hold
    (release disabled) lets the history pile up."""
    def churn(release: bool) -> int:
        df = ddflow.Dataflow()
        s, c = df.new_collection("c")
        keys_in, keys = df.new_collection("keys")
        kept = c.semijoin(keys).capture()
        s.insert((1, "x"))
        keys_in.insert(1)
        s.advance_to(1); keys_in.advance_to(1)
        df.run()
        # A question joining c with an input that stays at time 2: its join may still
        # read c's trace at 2, so c's arrangement cannot compact past it.
        held_in, held = df.new_collection("held")
        extra = c.join(held).capture()
        held_in.insert((1, "h"))
        for session in (s, keys_in, held_in):
            session.advance_to(2)
        df.run()
        assert extra.since == 1 and extra.at(1) == {(1, ("x", "h")): 1}
        if not release:
            for op in df.engine.operators(extra.node.inputs[0]):
                op.release = lambda: None
        df.drop(extra)
        for t in range(2, 202):
            (s.insert if t % 2 == 0 else s.remove)((1, "y"))
            s.advance_to(t + 1); keys_in.advance_to(t + 1)
            df.run()
        assert kept.at(200) == {(1, "x"): 1, (1, "y"): 1}
        arranged = c.arrange_by_key().node
        return sum(op.trace_records() for op in df.engine.operators(arranged))

    assert churn(release=True) <= 10
    assert churn(release=False) >= 100


def test_a_dropped_piece_stops_and_the_rest_goes_on():
    df = ddflow.Dataflow()
    s, c = df.new_collection("c")
    total = c.count().capture()
    s.insert("a")
    s.advance_to(1)
    df.run()
    doubled = c.map(lambda x: x * 2).capture()
    df.drop(doubled)
    s.insert("b")
    s.advance_to(2)
    df.run()
    assert total.at(1) == {("a", 1): 1, ("b", 1): 1}
    assert doubled not in df.captures
    assert all(n.dropped for n in df.nodes if n.name == "map")
    with pytest.raises(GraphError, match="input"):
        df.drop(c)
    # A dropped capture's reads say so (they raised a bare AttributeError once the
    # engine had moved on), and its repr does not read anything.
    for read in (lambda: doubled.updates, lambda: doubled.at(1), lambda: doubled.frontier,
                 lambda: doubled.is_final(1)):
        with pytest.raises(GraphError, match="capture 'capture' was dropped"):
            read()
    assert repr(doubled) == "Capture('capture', dropped)"


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_total_work_never_decreases_when_a_piece_is_dropped(engine):
    """`total_work` keeps what dropped operators did: the total never goes down, and
    after a drop each run adds exactly the work of the operators still running."""
    df = ddflow.Dataflow(engine=ENGINES[engine]())
    s, c = df.new_collection("c")
    c.count().capture()
    kept = set(df.nodes)
    totals = []

    def work(n) -> int:
        return sum(op.records_in + op.work for op in df.engine.operators(n))

    def epoch(t: int) -> dict:
        """Run epoch `t`; return what the operators built so far did in it."""
        before = {n: work(n) for n in df.nodes}
        for x in range(3 * t, 3 * t + 5):
            s.update(x % 7, 1 if t % 2 else -1)
        s.advance_to(t + 1)
        df.run()
        totals.append(df.total_work())
        return {n: work(n) - before.get(n, 0) for n in df.nodes if not n.dropped}

    s.insert(0)
    epoch(1)
    piece = c.map(lambda x: (x % 3, x)).join(c.map(lambda x: (x % 3, -x))).capture()
    epoch(2)
    epoch(3)
    assert sum(work(n) for n in df.nodes if n not in kept) > 0
    before_drop = df.total_work()
    df.drop(piece)
    assert df.total_work() == before_drop        # dropping takes nothing away
    for t in range(4, 7):
        grew = epoch(t)
        assert set(grew) == kept                 # only the kept operators still count
        assert totals[-1] - totals[-2] == sum(grew.values()) > 0
    assert totals == sorted(totals)


def test_reading_before_since_is_refused_and_says_when_the_piece_was_added():
    df = ddflow.Dataflow()
    s, c = df.new_collection("c")
    c.capture()
    s.insert("a")
    s.advance_to(3)
    df.run()
    late = c.count().capture()
    s.advance_to(4)
    df.run()
    assert late.since == 3 and late.at(3) == {("a", 1): 1}
    with pytest.raises(TimeError, match="added to the running dataflow at 3"):
        late.at(2)


def test_nothing_is_added_inside_a_loop_that_has_run():
    df = ddflow.Dataflow()
    s, c = df.new_collection("c")
    scopes = []
    c.iterate(lambda inner: scopes.append(inner) or inner.map(lambda x: x)).capture()
    s.insert(1)
    s.advance_to(1)
    df.run()
    with pytest.raises(GraphError, match="already run"):
        scopes[0].map(str)
    with pytest.raises(GraphError, match="already run"):
        c.enter(scopes[0].scope)
    # ... and the dataflow is untouched: a new loop over the same input works.
    again = c.iterate(lambda inner: inner.map(lambda x: min(x + 1, 3))).capture()
    s.advance_to(2)
    df.run()
    assert again.at(1) == {3: 1}


def test_a_new_piece_that_fails_rolls_back_and_imports_again():
    """A user function of a new piece raising at its first run rolls the step back;
    once fixed, the import happens again and the answer is whole."""
    df = ddflow.Dataflow()
    s, c = df.new_collection("c")
    c.capture()
    for x in (1, 2, 3):
        s.insert(x)
    s.advance_to(1)
    df.run()
    broken = {"on": True}

    def f(x):
        if broken["on"] and x == 2:
            raise ValueError("boom")
        return x * 10

    cap = c.map(f).count().capture()
    s.insert(4)
    s.advance_to(2)
    with pytest.raises(UserFunctionError, match="boom"):
        df.run()
    broken["on"] = False
    df.run()
    assert cap.at(1) == {(10, 1): 1, (20, 1): 1, (30, 1): 1, (40, 1): 1}


def test_a_new_input_after_run_joins_running_collections():
    df = ddflow.Dataflow()
    s, c = df.new_collection("c")
    c.capture()
    s.insert((1, "x"))
    s.advance_to(1)
    df.run()
    s2, d = df.new_collection("d")
    cap = c.join(d).capture()
    s2.insert((1, "y"))
    s.advance_to(2)
    s2.advance_to(2)
    df.run()
    assert cap.at(1) == {(1, ("x", "y")): 1}


def test_a_new_reader_of_a_compacted_arrangement_under_product_times():
    """A join added over an arrangement already compacted to `{(0, 1)}`, whose other
    input is at `(1, 0)`: the new reader promises less than the trace's compaction,
    which must not move back (it reads at times in advance of both)."""
    df = ddflow.Dataflow(time=Product(0, 0))
    (e_in, e), (r_in, r), (l_in, lab) = (df.new_collection(n) for n in "erl")
    e.join(lab).capture()
    l_in.insert((0, "a"))
    e_in.advance_to(Product(0, 1)); r_in.advance_to(Product(1, 0)); l_in.advance_to(Product(0, 1))
    df.run()
    cap = r.map(lambda n: (n, n)).join(lab).capture()
    r_in.insert(0)
    for s in (e_in, r_in, l_in):
        s.advance_to(Product(2, 2))
    df.run()
    assert cap.since == Product(1, 1)
    assert cap.at(Product(1, 1)) == {(0, (0, "a")): 1}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_piece_not_run_yet_reads_as_empty_and_not_final(engine):
    """Before the run that starts it, a new piece has no operators and no answer: its
    metrics are empty and `at` says it is not final (no KeyError, no wrong `{}`)."""
    from ddflow.errors import NotFinalError
    df = ddflow.Dataflow(engine=ENGINES[engine]())
    s, c = df.new_collection("c")
    c.capture()
    s.insert(1)
    s.advance_to(1)
    df.run()
    late = c.count().capture()
    assert df.engine.operators(late.node) == [] and late.updates == []
    assert len(df.metrics()) == len(df.nodes)
    with pytest.raises(NotFinalError):
        late.at(1)


def test_drop_refuses_what_others_still_read_and_building_on_what_was_dropped():
    df = ddflow.Dataflow()
    s, c = df.new_collection("c")
    doubled = c.map(lambda x: 2 * x, name="double")
    doubled.count().capture()
    s.insert(1)
    s.advance_to(1)
    df.run()
    with pytest.raises(GraphError, match="'double' is still read by"):
        df.drop(doubled)
    pairs = c.map(lambda x: (x, x))
    join = pairs.join(pairs)
    joined = join.capture()
    s.advance_to(2)
    df.run()
    df.drop(joined)
    with pytest.raises(GraphError, match="was dropped"):
        join.map(str)
    with pytest.raises(GraphError, match="was dropped"):
        pairs.join(pairs)           # only the dropped piece read it: it went too
    # Asked again, the question is built afresh and answers.
    pairs = c.map(lambda x: (x, x))
    again = pairs.join(pairs).capture()
    s.insert(2)
    s.advance_to(3)
    df.run()
    assert again.at(2) == {(1, (1, 1)): 1, (2, (2, 2)): 1}


def test_an_arrangement_dropped_with_its_reader_is_built_afresh():
    """`kv.join(kv)` arranges the input `kv`; dropped with the join, the arrangement
    is not handed out again by the collection's cache."""
    df = ddflow.Dataflow()
    s, kv = df.new_collection("kv")
    kv.capture()
    first = kv.join(kv).capture()
    s.insert((1, "a"))
    s.advance_to(1)
    df.run()
    df.drop(first)
    s.advance_to(2)
    df.run()
    old = [n for n in df.nodes if n.kind == "arrange"]
    assert old and all(n.dropped for n in old)
    again = kv.join(kv).capture()
    s.insert((1, "b"))
    s.advance_to(3)
    df.run()
    assert not kv.arrange_by_key().node.dropped
    assert again.at(2) == {(1, (x, y)): 1 for x in "ab" for y in "ab"}


def _spin(x):
    """A loop body that never converges on the record 'spin'."""
    return x.map(lambda w: w + "!" if w.startswith("spin") else w).distinct()


#: New questions that fail on data the dataflow already holds (so on the import):
#: no pending update is to blame, so the way out is `drop`.
FAILING = {
    "user_function": (lambda c: c.map(lambda w: 1 // (len(w) - 4), name="bad"),
                      UserFunctionError),
    "convergence": (lambda c: c.iterate(_spin, max_rounds=8, name="spinner"),
                    ddflow.ConvergenceError),
}


@pytest.mark.parametrize("how", sorted(FAILING))
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_failed_new_question_does_not_poison_the_dataflow(engine, how):
    """A question added after run() that fails on the loaded data is rolled back with
    its import; dropping it leaves the plan consistent: the old answers go on, and a
    new question afterwards answers like a fresh dataflow (issue 24, case 1)."""
    build, error = FAILING[how]
    df = ddflow.Dataflow(engine=ENGINES[engine]())
    s, c = df.new_collection("words")
    counts = c.count().capture()
    for w in ("spin", "word", "abc"):
        s.insert(w)
    s.advance_to(1)
    df.run()
    bad = build(c).capture()
    s.advance_to(2)                 # the loaded data completes: the question runs
    with pytest.raises(error):
        df.run()
    with pytest.raises(error):      # still failing: the import was kept, not lost
        df.run()
    df.drop(bad)
    df.run()
    assert counts.at(1) == {("spin", 1): 1, ("word", 1): 1, ("abc", 1): 1}
    s.remove("abc")
    s.insert("more")
    s.advance_to(3)
    df.run()
    lengths = c.map(len).capture()
    s.insert("x")
    s.advance_to(4)
    df.run()
    assert counts.at(3) == {("spin", 1): 1, ("word", 1): 1, ("more", 1): 1, ("x", 1): 1}
    assert counts.is_final(3) and lengths.is_final(3)
    assert lengths.at(3) == {4: 3, 1: 1}
    # A second failing question, dropped too, and the dataflow still runs.
    bad2 = build(c).capture()
    s.advance_to(5)
    with pytest.raises(error):
        df.run()
    df.drop(bad2)
    s.remove("x")
    s.advance_to(6)
    df.run()
    assert lengths.at(5) == {4: 3}
    assert counts.at(5) == {("spin", 1): 1, ("word", 1): 1, ("more", 1): 1}
