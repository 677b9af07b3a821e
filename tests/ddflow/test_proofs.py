"""Datalog proof trees (`datalog(...).why(fact)`), checked against the plain
evaluator of tests/ddflow/test_datalog.py (which shares no code with ddflow): on
random stratified programs, every derived fact has a proof whose every node is an
instance of a rule of the program over facts of the model (negated atoms absent
from it), whose leaves are input facts, and which, for programs without negation,
derives the fact from its leaves alone; the model it is drawn from is the oracle's;
a proof has minimal height; the CLI prints one."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ddflow
from ddflow.cli import main
from ddflow.proofs import ANY, Derivations
from ddflow.programs import parse_program
from ddflow.query import QueryError
from tests.ddflow.test_datalog import _fire, _match, oracle, programs, render


def _run(rules, inputs):
    df = ddflow.Dataflow()
    sessions, colls = {}, {}
    for name in ("e", "f"):
        sessions[name], colls[name] = df.new_collection(name)
    out = ddflow.datalog(render(rules), **colls)
    for name, facts in inputs.items():
        for f in facts:
            sessions[name].insert(f)
        sessions[name].advance_to(1)
    df.run()
    return out


def _check_node(proof, by_text, model):
    if proof.rule is None:
        return
    rule = by_text[proof.rule]
    premises = {}
    for p in proof.premises:
        premises.setdefault(p.fact[0], set()).add(p.fact[1])
        assert p.fact[1] in model.get(p.fact[0], ()), p.fact
        assert p.height() < proof.height()
        _check_node(p, by_text, model)
    # The rule fires on exactly these premises to give the fact (negation aside) ...
    positive_rule = (rule[0], [lit for lit in rule[1] if lit[0] != "-"])
    assert proof.fact[1] in _fire(positive_rule, premises)
    # ... and each negated atom it lists is absent from the model.
    for name, values in proof.absent:
        pattern = tuple("_" if v is ANY else v for v in values)
        assert not any(_match(pattern, f, {}) is not None for f in model.get(name, ()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=programs(), seed=st.integers(0, 2**32))
def test_every_derived_fact_has_a_proof_over_the_model(rules, seed):
    rng = random.Random(seed)
    inputs = {"e": {(rng.randrange(3), rng.randrange(3)) for _ in range(rng.randrange(6))},
              "f": {(rng.randrange(3),) for _ in range(rng.randrange(3))}}
    model = oracle(rules, inputs)
    out = _run(rules, inputs)
    text = render(rules)
    by_text = {line: rule for line, rule in zip(text.splitlines(), rules)}
    program = parse_program(text, ["e", "f"])
    assert {n: s for n, s in Derivations(program, inputs).db.items() if n in model} == \
        {n: s for n, s in model.items() if s}
    full = {**model, **inputs}
    negation = any(lit[0] == "-" for _h, body in rules for lit in body)
    for name in sorted(model):
        for values in sorted(model[name])[:3]:
            proof = out.why((name, values))
            assert proof.fact == (name, values)
            _check_node(proof, by_text, full)
            leaves = proof.leaves()
            assert all(v in inputs[n] for n, v in leaves)
            if not negation:
                alone = {n: {v for m, v in leaves if m == n} for n in inputs}
                assert values in oracle(rules, alone)[name]


def test_a_proof_has_minimal_height_and_names_absent_facts():
    df = ddflow.Dataflow()
    e_in, e = df.new_collection("e")
    out = ddflow.datalog("""
        tc(x, y) :- e(x, y).
        tc(x, z) :- tc(x, y), e(y, z).
        acyclic(x) :- e(x, _), !tc(x, x).
    """, e=e)
    for edge in [(1, 2), (2, 3), (3, 4), (4, 5), (1, 4), (5, 2)]:
        e_in.insert(edge)
    e_in.advance_to(1)
    df.run()
    proof = out.why("tc(1, 5)")
    assert proof.leaves() == {("e", (1, 4)), ("e", (4, 5))} and proof.height() == 3
    assert str(proof) == "\n".join([
        "tc(1, 5)  <- tc(x, z) :- tc(x, y), e(y, z).",
        "  tc(1, 4)  <- tc(x, y) :- e(x, y).",
        "    e(1, 4)  (input)",
        "  e(4, 5)  (input)"])
    assert str(out.why("acyclic(1)")).splitlines()[-1] == "  !tc(1, 1)  (absent)"
    with pytest.raises(QueryError):
        out.why("acyclic(2)")           # 2 -> 3 -> 4 -> 5 -> 2: not derived
    e_in.remove((1, 4))
    e_in.advance_to(2)
    df.run()
    assert out.why("tc(1, 5)").height() == 5       # the proof follows the deletion
    assert out.why("tc(1, 5)", time=0).height() == 3


def test_the_cli_prints_a_proof(tmp_path: Path, capsys: pytest.CaptureFixture):
    program = tmp_path / "tc.dl"
    program.write_text("tc(x, y) :- e(x, y).\ntc(x, z) :- tc(x, y), e(y, z).\n")
    facts = tmp_path / "facts"
    facts.mkdir()
    (facts / "e.csv").write_text("1,2\n2,3\n3,4\n")
    assert main(["run", "datalog", "--program", str(program), "--facts", str(facts),
                 "--why", "tc(1, 4)", "--why", "tc(2, 3)"]) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index("why tc(1, 4) at epoch 0:")
    assert out[start + 1: start + 8] == [
        "tc(1, 4)  <- tc(x, z) :- tc(x, y), e(y, z).",
        "  tc(1, 3)  <- tc(x, z) :- tc(x, y), e(y, z).",
        "    tc(1, 2)  <- tc(x, y) :- e(x, y).",
        "      e(1, 2)  (input)",
        "    e(2, 3)  (input)",
        "  e(3, 4)  (input)",
        "why tc(2, 3) at epoch 0:"]
    assert main(["run", "datalog", "--program", str(program), "--facts", str(facts),
                 "--why", "tc(4, 1)"]) == 2
    assert "tc(4, 1) is not derived" in capsys.readouterr().err
