"""`ddflow.datalog` against a plain stratified bottom-up evaluator written here.

The oracle evaluates a program given as Python structures (the test renders the
same structures to text for `datalog`): strata by Ullman's relaxation (a relation's
stratum is at least that of each relation it reads, and above that of each it
negates), then each stratum's rules naively to their fixpoint, with set semantics
(Abiteboul, Hull, Vianu, "Foundations of Databases", section 15.2).  It shares no
code with `ddflow.programs`.

Families: `test_oracle_*` (every derived relation accumulates, at every time of the
join-closure of the input times, to what the oracle computes from the inputs'
sets; at `Product` times and at int epochs), `test_batching_*` (one batch or one
fact per run), `test_errors_*` (each refusal, its message and caret), `test_work_*`
(a one-fact change costs far less than the initial load).
"""

from __future__ import annotations

import itertools
import operator
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.query import QueryError
from benchmarks import bench_datalog
from ddflow.testing import check_law, evaluate
from lattice import Product
from tests.strategies import SCHEDULES

# -- the oracle --------------------------------------------------------------------------
# A program: a list of rules (head, body); head = (name, terms); a body literal is
# ("+", name, terms), ("-", name, terms) or (op, term, term) for a comparison.  Terms:
# a str is a variable ("_" a fresh one), an int a constant.

_OPS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


def render(rules: list) -> str:
    def terms(ts: tuple) -> str:
        return ", ".join(map(str, ts))
    lines = []
    for (name, head), body in rules:
        if not body:
            lines.append(f"{name}({terms(head)}).")
            continue
        lits = []
        for lit in body:
            if lit[0] == "+":
                lits.append(f"{lit[1]}({terms(lit[2])})")
            elif lit[0] == "-":
                lits.append(f"!{lit[1]}({terms(lit[2])})")
            else:
                lits.append(f"{lit[1]} {lit[0]} {lit[2]}")
        lines.append(f"{name}({terms(head)}) :- {', '.join(lits)}.")
    return "\n".join(lines)


def _match(terms: tuple, fact: tuple, env: dict) -> dict | None:
    if len(terms) != len(fact):
        return None
    env = dict(env)
    for t, v in zip(terms, fact):
        if isinstance(t, int):
            if t != v:
                return None
        elif t != "_":
            if t in env and env[t] != v:
                return None
            env[t] = v
    return env


def _value(t, env):
    return t if isinstance(t, int) else env[t]


def _fire(rule: tuple, db: dict) -> set:
    (name, head), body = rule
    envs = [{}]
    for lit in body:
        if lit[0] == "+":
            envs = [e2 for e in envs for fact in db.get(lit[1], ())
                    for e2 in [_match(lit[2], fact, e)] if e2 is not None]
    for lit in body:
        if lit[0] == "-":
            envs = [e for e in envs
                    if not any(_match(lit[2], fact, e) is not None for fact in db.get(lit[1], ()))]
        elif lit[0] in _OPS:
            envs = [e for e in envs if _OPS[lit[0]](_value(lit[1], e), _value(lit[2], e))]
    return {tuple(_value(t, e) for t in head) for e in envs}


def oracle(rules: list, inputs: dict) -> dict:
    """name -> set of tuples: the stratified model of `rules` over `inputs`."""
    derived = {name for (name, _), _ in rules}
    level = dict.fromkeys(derived, 0)
    changed = True
    while changed:
        changed = False
        for (name, _), body in rules:
            for lit in body:
                if lit[0] in "+-" and lit[1] in derived:
                    need = level[lit[1]] + (lit[0] == "-")
                    if level[name] < need:
                        level[name] = need
                        changed = True
                        assert need <= len(derived), "not stratifiable"
    db = {k: set(v) for k, v in inputs.items()}
    for n in derived:
        db.setdefault(n, set())
    for s in sorted(set(level.values())):
        mine = [r for r in rules if level[r[0][0]] == s]
        while True:
            new = {n: set(db[n]) for n in derived}
            for r in mine:
                new[r[0][0]] |= _fire(r, db)
            if all(new[n] == db[n] for n in derived):
                break
            db.update(new)
    return {n: db[n] for n in derived}


def test_oracle_itself_on_transitive_closure() -> None:
    got = oracle(TC, {"e": {(1, 2), (2, 3), (3, 1), (4, 5)}})
    assert got["tc"] == {(a, b) for a in (1, 2, 3) for b in (1, 2, 3)} | {(4, 5)}


# -- classic programs ----------------------------------------------------------------------

TC = [(("tc", ("x", "y")), [("+", "e", ("x", "y"))]),
      (("tc", ("x", "z")), [("+", "tc", ("x", "y")), ("+", "e", ("y", "z"))])]

# Same generation over a parent relation par(child, parent).
SG = [(("sg", ("x", "y")), [("+", "par", ("x", "p")), ("+", "par", ("y", "p")),
                            ("!=", "x", "y")]),
      (("sg", ("x", "y")), [("+", "par", ("x", "a")), ("+", "sg", ("a", "b")),
                            ("+", "par", ("y", "b"))])]

# Reachable from a root, but not through a blocked node; and the nodes reachable only
# because of blocking being ignored (negation of a recursive relation, one stratum up).
REACH = [(("reach", ("x",)), [("+", "root", ("x",)), ("-", "blocked", ("x",))]),
         (("reach", ("y",)), [("+", "reach", ("x",)), ("+", "e", ("x", "y")),
                              ("-", "blocked", ("y",))]),
         (("any", ("x",)), [("+", "root", ("x",))]),
         (("any", ("y",)), [("+", "any", ("x",)), ("+", "e", ("x", "y"))]),
         (("cut", ("x",)), [("+", "any", ("x",)), ("-", "reach", ("x",))])]

# Mutual recursion: even and odd path lengths from node 0 (two Variables, one loop).
EVEN_ODD = [(("even", (0,)), []),
            (("odd", ("y",)), [("+", "even", ("x",)), ("+", "e", ("x", "y"))]),
            (("even", ("y",)), [("+", "odd", ("x",)), ("+", "e", ("x", "y"))])]

# No recursion: negation of a pattern with two variables, constants, repeated
# variables, `_`, comparisons, a cyclic (triangle) body.
MISC = [(("oneway", ("x", "y")), [("+", "e", ("x", "y")), ("-", "e", ("y", "x"))]),
        (("loop", ("x",)), [("+", "e", ("x", "x"))]),
        (("from0", ("y",)), [("+", "e", (0, "y")), ("!=", "y", 0)]),
        (("tri", ("x", "y", "z")), [("+", "e", ("x", "y")), ("+", "e", ("y", "z")),
                                    ("+", "e", ("z", "x")), ("<", "x", "y"), ("<=", "x", "z")]),
        (("sink", ("x",)), [("+", "e", ("_", "x")), ("-", "e", ("x", "_"))])]

PROGRAMS = {"tc": (TC, {"e": 2}), "sg": (SG, {"par": 2}), "misc": (MISC, {"e": 2}),
            "reach": (REACH, {"root": 1, "blocked": 1, "e": 2}),
            "even_odd": (EVEN_ODD, {"e": 2})}


def _tagged(out: dict):
    names = sorted(out)
    first, *rest = [out[n].map(lambda t, n=n: (n, t)) for n in names]
    return first.concat(*rest) if rest else first


def _model(rules: list, names: list):
    def f(*accs: dict) -> dict:
        inputs = {n: {d for d, m in acc.items() if m > 0} for n, acc in zip(names, accs)}
        return {(n, t): 1 for n, ts in oracle(rules, inputs).items() for t in ts}
    return f


def _set_history(domain: list, kind: str, rng: random.Random) -> list:
    """Updates under which every record accumulates to 0 or 1 at every time: most
    records are inserted at some `a`, about half of those deleted at some `b > a`
    (dense inputs, so that joins and negations bite)."""
    def time():
        return rng.randrange(4) if kind == "int" else Product(rng.randrange(3),
                                                              rng.randrange(3))
    out = []
    for d in domain:
        if rng.random() < 0.25:
            continue
        a = time()
        out.append((d, a, 1))
        if rng.random() < 0.5:
            b = time()
            if a.less_equal(b) if kind != "int" else a <= b:
                if b != a:
                    out.append((d, b, -1))
    return out


def _domain(arity: int, values: int) -> list:
    return list(itertools.product(range(values), repeat=arity))


def _run(rules: list, arities: dict, histories: list, kind: str, strategy, schedule: str,
         workers: int = 1):
    names = sorted(arities)
    text = render(rules)

    def build(*colls):
        return _tagged(ddflow.datalog(text, strategy=strategy, **dict(zip(names, colls))))
    time = 0 if kind == "int" else Product(0, 0)
    out = evaluate(build, histories, time=time, schedule=schedule, workers=workers)
    check_law(out, histories, _model(rules, names))
    return out


@pytest.mark.parametrize("program", sorted(PROGRAMS))
@pytest.mark.parametrize("strategy", ["delta", "binary"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), kind=st.sampled_from(["int", "product"]),
       schedule=SCHEDULES)
def test_oracle_classic_programs(program, strategy, seed, kind, schedule) -> None:
    _classic(program, strategy, seed, kind, schedule, 1)


def _classic(program, strategy, seed, kind, schedule, workers) -> None:
    rng = random.Random(seed)
    rules, arities = PROGRAMS[program]
    histories = []
    for name in sorted(arities):
        dom = _domain(arities[name], 4 if arities[name] == 1 else 3)
        histories.append(_set_history(dom, kind, rng))
    _run(rules, arities, histories, kind, strategy, schedule, workers)


@pytest.mark.parametrize("program", ["sg", "misc"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), kind=st.sampled_from(["int", "product"]),
       schedule=SCHEDULES)
def test_oracle_classic_programs_on_three_workers(program, seed, kind, schedule) -> None:
    """Sharded by key: the rules' shared indexes (same generation's self-join reads
    one index of `par` on both sides) exchange their records like any other."""
    _classic(program, "binary", seed, kind, schedule, 3)


# -- random programs --------------------------------------------------------------------------

_ARITY = {"e": 2, "f": 1, "p0": 2, "p1": 1, "p2": 2}


@st.composite
def programs(draw) -> list:
    """Random stratifiable programs over inputs e/2, f/1 and derived p0..p2: a random
    order of the derived relations; a rule may read any input and any relation not
    later in the order, and negate inputs and strictly earlier relations."""
    order = draw(st.permutations(["p0", "p1", "p2"]))
    rules = []
    for k, name in enumerate(order):
        for _ in range(draw(st.integers(1, 2))):
            readable = ["e", "f"] + list(order[:k + 1])
            negatable = ["e", "f"] + list(order[:k])
            body = []
            variables = ["x", "y", "z"]
            for _ in range(draw(st.integers(1, 3))):
                rel = draw(st.sampled_from(readable))
                terms = tuple(draw(st.sampled_from(variables + ["_", 0, 1]))
                              for _ in range(_ARITY[rel]))
                body.append(("+", rel, terms))
            bound = sorted({t for lit in body for t in lit[2] if isinstance(t, str) and t != "_"})
            choices = bound + [0, 1]
            if draw(st.booleans()):
                rel = draw(st.sampled_from(negatable))
                body.append(("-", rel, tuple(draw(st.sampled_from(choices + ["_"]))
                                             for _ in range(_ARITY[rel]))))
            if bound and draw(st.booleans()):
                body.append((draw(st.sampled_from(sorted(_OPS))), draw(st.sampled_from(bound)),
                             draw(st.sampled_from(choices))))
            head = tuple(draw(st.sampled_from(choices)) for _ in range(_ARITY[name]))
            rules.append(((name, head), body))
    if draw(st.booleans()):
        name = draw(st.sampled_from(["p0", "p1", "p2"]))
        rules.append(((name, tuple(draw(st.integers(0, 2)) for _ in range(_ARITY[name]))), []))
    return rules


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=programs(), seed=st.integers(0, 2**32),
       kind=st.sampled_from(["int", "product"]), strategy=st.sampled_from([None, "delta", "binary"]))
def test_oracle_random_programs(rules, seed, kind, strategy) -> None:
    rng = random.Random(seed)
    histories = []
    for name in ("e", "f"):
        dom = _domain(_ARITY[name], 3)
        histories.append(_set_history(dom, kind, rng))
    _run(rules, {"e": 2, "f": 1}, histories, kind, strategy, "once")


# -- batches and singletons, retraction of cut-off cycles -----------------------------------

def _epochs(text: str, inputs: dict, epochs: list, strategy=None) -> list[dict]:
    """Run `text` with the changes of `epochs` (a list of {name: [(tuple, diff)]}), one
    run per epoch; the derived relations' content after each."""
    df = ddflow.Dataflow()
    sessions, colls = {}, {}
    for name in inputs:
        sessions[name], colls[name] = df.new_collection(name=name)
    caps = {n: c.capture() for n, c in ddflow.datalog(text, strategy=strategy,
                                                      **colls).items()}
    states = []
    for epoch, changes in enumerate(epochs):
        for name, ups in changes.items():
            for t, d in ups:
                sessions[name].update(t, d)
        for s in sessions.values():
            s.advance_to(epoch + 1)
        df.run()
        states.append({n: {d for d, m in c.at(epoch).items() if m} for n, c in caps.items()})
    return states


def test_batching_one_batch_or_one_fact_per_epoch() -> None:
    rng = random.Random(5)
    edges = [(rng.randrange(12), rng.randrange(12)) for _ in range(30)]
    text = render(TC)
    batch = _epochs(text, ["e"], [{"e": [(e, 1) for e in edges]}])
    singles = _epochs(text, ["e"], [{"e": [(e, 1)]} for e in edges])
    assert batch[-1] == singles[-1] == oracle(TC, {"e": set(edges)})
    for k, state in enumerate(singles):
        assert state == oracle(TC, {"e": set(edges[:k + 1])})


@pytest.mark.parametrize("strategy", ["delta", "binary"])
def test_oracle_cut_off_cycle_is_retracted(strategy) -> None:
    text = render(REACH)
    epochs = [{"root": [((0,), 1)], "e": [((0, 1), 1), ((1, 2), 1), ((2, 1), 1)]},
              {"e": [((0, 1), -1)]},
              {"blocked": [((2,), 1)], "e": [((0, 1), 1)]}]
    states = _epochs(text, ["root", "blocked", "e"], epochs, strategy)
    assert states[0]["reach"] == {(0,), (1,), (2,)}
    assert states[1]["reach"] == {(0,)} and states[1]["any"] == {(0,)}
    assert states[2]["reach"] == {(0,), (1,)} and states[2]["cut"] == {(2,)}


def test_oracle_facts_in_the_text_and_given_relation_with_rules() -> None:
    df = ddflow.Dataflow()
    e_in, e = df.new_collection()
    out = ddflow.datalog("e(5, 6). e(6, 7).  % facts add to the given e\n"
                         "tc(x, y) :- e(x, y). tc(x, z) :- tc(x, y), e(y, z).", e=e)
    caps = {n: c.capture() for n, c in out.items()}
    e_in.insert((7, 8))
    e_in.close()
    df.run()
    assert set(caps["e"].at(0)) == {(5, 6), (6, 7), (7, 8)}
    assert set(caps["tc"].at(0)) == {(5, 6), (6, 7), (7, 8), (5, 7), (6, 8), (5, 8)}


def test_not_and_bang_are_the_same_negation_and_share_keys() -> None:
    df = ddflow.Dataflow()
    e_in, e = df.new_collection()
    out = ddflow.datalog("a(x) :- e(x, _), not e(_, x).\nb(x) :- e(x, _), !e(_, x).", e=e)
    keys = [n for n in df.nodes if n.name.endswith(".keys")]
    caps = {n: c.capture() for n, c in out.items()}
    for edge in [(1, 2), (2, 3), (4, 4)]:
        e_in.insert(edge)
    e_in.close()
    df.run()
    assert caps["a"].at(0) == caps["b"].at(0) == {(1,): 1}
    assert len({n.id for n in keys}) == 1


def test_program_of_facts_only_builds_its_own_dataflow() -> None:
    out = ddflow.datalog("p(1, 'a'). p(2, 'b'). q(x) :- p(x, 'b').")
    cap = out["q"].capture()
    out["q"].dataflow.run()
    assert cap.at(0) == {(2,): 1}


def test_strategies_pick_joins_inside_loops() -> None:
    """Delta queries inside a loop run at `Product(epoch, round)` times; a triangle
    rule (cyclic) gets them by default, a chain rule binary joins."""
    df = ddflow.Dataflow()
    _, e = df.new_collection()
    ddflow.datalog("t(x, y) :- e(x, y). t(x, z) :- t(x, y), t(y, z), e(x, z).", e=e)
    kinds = {n.kind for n in df.nodes if n.scope.parent is not None}
    assert "wcoj" in kinds
    df2 = ddflow.Dataflow()
    _, e2 = df2.new_collection()
    ddflow.datalog("t(x, y) :- e(x, y). t(x, z) :- t(x, y), e(y, z).", e=e2)
    kinds2 = {n.kind for n in df2.nodes if n.scope.parent is not None}
    assert "wcoj" not in kinds2 and "join" in kinds2


def test_rules_share_sources_and_indexes() -> None:
    """Same generation joins `par` by its parent column three times (a self-join in
    the first rule, both sides of the second): one index serves them all, and one
    index of `sg` by its first column.  Points-to reads `pt` by its first column in
    three rules: one index."""
    df = ddflow.Dataflow()
    _, par = df.new_collection()
    ddflow.datalog(render(SG), par=par, strategy="binary")
    arranged = [n for n in df.nodes if n.kind == "arrange"]
    by_key = {n.inputs[0].name: n for n in arranged if n.name == "arrange_by_key"}
    assert sorted(by_key) == ["par(v0, v1).by[1]", "sg(v0, v1).by[0]", "sg.rule1.key"]
    par_index = by_key["par(v0, v1).by[1]"]
    readers = [(n.name, n.inputs.count(par_index)) for n in df.nodes if par_index in n.inputs]
    assert sorted(readers) == [("sg.rule0.join1", 2), ("sg.rule1.join1", 1),
                               ("sg.rule1.join2", 1)]
    df2 = ddflow.Dataflow()
    colls = {n: df2.new_collection()[1] for n in ("addr", "assign", "load", "store")}
    ddflow.datalog(bench_datalog.PT, **colls)
    pt_index = [n for n in df2.nodes
                if n.kind == "arrange" and n.inputs[0].name == "pt(v0, v1).by[0]"]
    assert len(pt_index) == 1
    assert sorted({n.name.split(".")[1] for n in df2.nodes if pt_index[0] in n.inputs}) == \
        ["rule1", "rule2", "rule3"]


def test_mutual_recursion_is_one_loop_with_a_variable_each() -> None:
    df = ddflow.Dataflow()
    _, e = df.new_collection()
    ddflow.datalog(render(EVEN_ODD), e=e)
    loops = {n.scope for n in df.nodes if n.scope.parent is not None}
    feedback = [n.name for n in df.nodes if n.kind == "feedback"]
    assert len(loops) == 1 and sorted(feedback) == ["even", "odd"]


# -- errors ----------------------------------------------------------------------------------

def _error(text: str, **given) -> QueryError:
    df = ddflow.Dataflow()
    colls = {name: df.new_collection()[1] for name in given or ["e"]}
    with pytest.raises(QueryError) as info:
        ddflow.datalog(text, **colls)
    n_nodes = len(df.nodes)
    assert n_nodes == len(colls), "a refused program leaves the dataflow as it was"
    return info.value


def _caret_at(err: QueryError, text: str, needle: str) -> None:
    """The caret of `err` stands under the first `needle` of its line in `text`."""
    line, caret = str(err).split("\n")[-2:]
    assert text.find(needle) == err.position
    assert line.strip().startswith(text[text.rfind("\n", 0, err.position) + 1:
                                        err.position].strip()[:5])
    assert caret.index("^") - 2 == err.position - (text.rfind("\n", 0, err.position) + 1)


@pytest.mark.parametrize("text,needle,message", [
    ("p(x, y) :- e(x, z).", "y) :-", "unsafe rule: head variable 'y' is not bound"),
    ("p(x) :- e(x, _), !e(x, y).", "y).", "variable 'y' of the negated atom 'e'"),
    ("p(x) :- e(x, _), x < w.", "w.", "compared variable 'w' is not bound"),
    ("p(x) :- e(x, _), _ < x.", "_ <", "'_' cannot be compared"),
    ("p(x) :- e(x, y).\nq(x) :- e(x, y, z).", "e(x, y, z)",
     "relation 'e' is used with 3 arguments here and with 2 at line 1, column 9"),
    ("p(x) :- e(x, y).\np(x, y) :- e(x, y).", "p(x, y)", "relation 'p' is used with 2"),
    ("p(x) :- e(x, y), h(y).", "h(y)", "unknown relation 'h': no rule or fact derives it"),
    ("p(x) :- e(x, y), !p(y).", "p(y)",
     "negation through recursion: p depends on !p (cycle p -> !p)"),
    ("p(x) :- e(x, y), not q(y).\nq(x) :- p(x).", "q(y)",
     "negation through recursion: p depends on !q (cycle p -> !q -> p)"),
    ("p(x) :- !e(x, x).", "p(x)", "a rule needs at least one positive atom"),
    ("p(x).", "x)", "a fact lists constants only"),
    ("p(x) :- e(x, y)", "", "expected ',' or '.', found the end of the program"),
    ("p(x) :- e(x, y), x ~ y.", "~", "unexpected character '~'"),
    ("p(x) :- e(x, y), x y.", "y.", "expected an atom or a comparison"),
    ("p(_) :- e(x, y).", "_)", "'_' stands for a fresh variable"),
])
def test_errors_with_caret(text: str, needle: str, message: str) -> None:
    err = _error(text)
    assert message in str(err)
    if needle:
        _caret_at(err, text, needle)
    else:
        assert err.position == len(text)


def test_errors_name_line_and_column_in_a_long_program() -> None:
    text = "tc(x, y) :- e(x, y).\ntc(x, z) :- tc(x, y), e(y, z).\nbad(x) :- tc(x, _), !bad(x)."
    err = _error(text)
    assert "(line 3, column 22)" in str(err)
    assert str(err).endswith("  bad(x) :- tc(x, _), !bad(x). (line 3, column 22)\n"
                             + " " * 23 + "^")


def test_errors_bad_arguments() -> None:
    df = ddflow.Dataflow()
    _, e = df.new_collection()
    with pytest.raises(QueryError, match="unknown strategy 'generic'"):
        ddflow.datalog("p(x) :- e(x, _).", strategy="generic", e=e)
    with pytest.raises(QueryError, match="must be a Collection"):
        ddflow.datalog("p(x) :- e(x, _).", e=[(1, 2)])
    with pytest.raises(QueryError, match="a program is a string"):
        ddflow.datalog(42, e=e)


# -- work ------------------------------------------------------------------------------------

def test_work_one_fact_change_on_transitive_closure_of_a_random_dag_is_below_1pct() -> None:
    """2,000 nodes, 6,000 edges drawn uniformly among the pairs `a < b` (a uniform
    random DAG; its closure has about 10^5 pairs, where a uniform random digraph's
    giant strongly connected component makes 3.5 * 10^6): each of 10 random one-edge
    changes (5 inserts of absent forward edges, then 5 deletes of present edges)
    costs at most 1% of the initial load's work."""
    rng = random.Random(1)
    edges = bench_datalog.random_dag(2000, 6000, rng)
    steps = bench_datalog.changes(
        {"e": edges}, lambda: ("e", bench_datalog.fresh_forward_edge(rng, edges, 2000)), 5,
        rng)
    df = ddflow.Dataflow()
    e_in, e = df.new_collection()
    tc = ddflow.datalog(render(TC), e=e)["tc"].capture()
    for edge in sorted(edges):
        e_in.insert(edge)
    e_in.advance_to(1)
    df.run()
    load = df.total_work()
    before = load
    now = set(edges)
    for epoch, (_name, edge, d) in enumerate(steps, 1):
        e_in.update(edge, d)
        e_in.advance_to(epoch + 1)
        df.run()
        work = df.total_work() - before
        before = df.total_work()
        assert 0 < work <= load // 100, (edge, d, work, load)
        (now.add if d > 0 else now.discard)(edge)
    # The oracle joins naively (too slow here): a search from every node instead.
    succ: dict = {}
    for a, b in now:
        succ.setdefault(a, set()).add(b)
    closure = set()
    for a in succ:
        seen, todo = set(), list(succ[a])
        while todo:
            b = todo.pop()
            if b not in seen:
                seen.add(b)
                todo.extend(succ.get(b, ()))
        closure |= {(a, b) for b in seen}
    assert len(closure) > 50_000
    assert {d for d, m in tc.at(len(steps)).items() if m} == closure
