"""Shard states kept where they ran, rebuilt from their log anywhere else: the log's
laws on a toy state, then on BSP shards (no Spark: `InProcessShards` runs the same
supersteps, in simulated processes)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings, strategies as st

import ddflow
from ddflow.algorithms.graphs import reachability
from ddflow.engine.bsp import InProcessShards
from ddflow.engine.shard_log import DirectoryStore, MemoryStore, Resident, ShardLog, Token
from ddflow.engine.superstep import replay
from ddflow.sharding import shard_of
from ddflow.testing import evaluate
from tests.ddflow.engine.cases import CASES


def _append(worker: list, entry: int) -> None:
    worker.append(entry)


def _stores(tmp_path):
    return [MemoryStore(), DirectoryStore(str(tmp_path / "log"))]


@pytest.mark.parametrize("which", [0, 1], ids=["memory", "directory"])
def test_a_log_rebuilds_the_state_it_names_and_nothing_else(tmp_path, which):
    """Toy state: a list, a superstep appends its entry.  Every way of finding the
    state (kept, a stale copy caught up, rebuilt from the base) gives the state the
    token names; a copy from another branch is never used."""
    log = ShardLog(_stores(tmp_path)[which], "u", max_entries=4, min_base_bytes=10_000)
    import pickle
    token = log.create(0, 1, pickle.dumps([]))
    state: list = []
    history = {token.version: (token, [])}
    for version in range(2, 12):
        if log.due(token):                            # every 4th superstep compacts
            assert len(history) % 4 == 1
            token = log.compact(token, pickle.dumps(state))
        state = state + [version]
        token = log.append(token, version, pickle.dumps(version))
        history[version] = (token, list(state))
    assert token.base == 9 and token.log == (10, 11)
    here = Resident()
    loaded = log.load(token, here, _append)
    assert (loaded.how, loaded.worker) == ("rebuilt", state) and loaded.replayed == 2
    here.keep(history[10][0], [9, 10])                 # a copy one superstep behind
    loaded = log.load(token, here, _append)
    assert (loaded.how, loaded.replayed, loaded.worker[-2:]) == ("replayed", 1, [10, 11])
    here.keep(history[5][0], list(history[5][1]))     # across the last compaction
    loaded = log.load(token, here, _append)
    assert (loaded.how, loaded.replayed, loaded.worker) == ("replayed", 6, state)
    here.keep(token, ["kept as is"])
    assert log.load(token, here, _append).how == "resident"
    # A copy at a version the token's chain does not hold (a rolled-back branch, or
    # before the last two bases) is not caught up: the state is rebuilt.
    for stale in (Token("u", 0, 99), history[4][0]):
        here.keep(stale, ["other"])
        assert log.load(token, here, _append).worker == state
    assert log.collect_garbage([token]) > 0
    assert sorted(log.store.names("u/0")) == sorted(token.names())
    assert log.load(token, Resident(), _append).worker == state


def test_compaction_follows_the_bytes_of_the_changes():
    """A base is rewritten once the entries since it weigh as much: what is written
    over many supersteps stays within a small factor of what they logged."""
    import pickle
    log = ShardLog(MemoryStore(), "u", max_entries=10_000, min_base_bytes=0)
    state: list = list(range(2000))
    token = log.create(0, 1, pickle.dumps(state))
    logged = written = 0
    for version in range(2, 3000):
        entry = pickle.dumps(list(range(version % 7)))
        if log.due(token):
            blob = pickle.dumps(state)
            token = log.compact(token, blob)
            written += len(blob)
        state.append(version)
        token = log.append(token, version, entry)
        logged += len(entry)
        written += len(entry)
    assert written <= 3 * logged


def test_resident_copies_of_other_engines_make_room():
    here = Resident(capacity=2)
    for uid in ("a", "b", "c"):
        here.keep(Token(uid, 0, 1), uid)
    assert len(here) == 2 and here.take("a", 0) is None
    for shard in range(3):                       # one engine's shards all stay
        here.keep(Token("d", shard, 1), shard)
    assert [here.take("d", s)[1] for s in range(3)] == [0, 1, 2]


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_a_shard_rebuilt_from_its_log_is_the_shard_that_ran(name, data):
    """After every run, each shard's worker rebuilt from its base and log (as a
    process that never ran it would) is the one that ran, field by field (but for
    the bookkeeping of undo records)."""
    build, inputs = CASES[name]
    inp = [list(x) for x in data.draw(inputs)]
    engines: list = []

    def make():
        engines.append(InProcessShards(2, max_entries=3))
        return engines[-1]

    def check(_run: int) -> None:
        engine = engines[-1]
        for s, state in enumerate(engine._states):
            ran = engine._worker(s, settle=True)
            rebuilt = engine._log.load(state.token, Resident(), replay)
            assert_same_state(rebuilt.worker, ran)

    assert evaluate(build, inp, schedule="each", engine=make, after_run=check) == \
        evaluate(build, inp, schedule="each")


_ATOMS = (int, float, str, bytes, bool, type(None), frozenset, set, range)
#: The bookkeeping of undo records (what a run would need to be undone, and counters
#: of that work), which a rebuilt worker never had: not state.
_UNDO_BOOKKEEPING = {"_undo", "_touched", "_told_before", "_imports_before",
                     "_undo_log", "undo_records", "undo_values"}


def assert_same_state(a, b, path: str = "worker", seen: set | None = None) -> None:
    """`a` and `b` hold equal values everywhere, walking objects field by field
    (which objects are shared may differ: pickling keeps what the log entries
    shared, not what the driver's arguments did; functions compare by code)."""
    seen = set() if seen is None else seen
    if (id(a), id(b)) in seen:
        return
    seen.add((id(a), id(b)))
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, _ATOMS):
        assert a == b, (path, a, b)
    elif callable(a) and hasattr(a, "__code__"):
        assert a.__code__.co_code == b.__code__.co_code, path
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), (path, len(a), len(b))
        for k, (x, y) in enumerate(zip(a, b)):
            assert_same_state(x, y, f"{path}[{k}]", seen)
    elif isinstance(a, dict):
        # Keys compare like values: a read cache is keyed by batches, which hash and
        # compare by identity, and a rebuilt worker holds equal batches, not the same.
        assert len(a) == len(b), (path, list(a), list(b))
        for (ka, va), (kb, vb) in zip(a.items(), b.items()):
            assert_same_state(ka, kb, f"{path} key {ka!r}", seen)
            assert_same_state(va, vb, f"{path}[{ka!r}]", seen)
    else:
        fields = dict(getattr(a, "__dict__", {}))
        for cls in type(a).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if hasattr(a, name):
                    fields[name] = getattr(a, name)
        assert fields or a == b or repr(a) == repr(b), (path, a, b)
        for name, value in fields.items():
            if name not in _UNDO_BOOKKEEPING:
                assert_same_state(value, getattr(b, name), f"{path}.{name}", seen)


def _graph(edges: int, seed: int = 5) -> set:
    rng = random.Random(seed)
    nodes = max(4, edges // 3)
    graph: set = set()
    while len(graph) < edges:
        graph.add((rng.randrange(nodes), rng.randrange(nodes)))
    return graph


def _reach_engine(edges: set, **kw):
    engine = InProcessShards(2, **kw)
    df = ddflow.Dataflow(engine=engine)
    e_in, e = df.new_collection()
    r_in, r = df.new_collection()
    cap = reachability(e, r).capture()
    for x in edges:
        e_in.insert(x)
    r_in.insert(0)
    e_in.advance_to(1)
    r_in.advance_to(1)
    df.run()
    return engine, df, e_in, r_in, cap


def test_a_one_edge_change_persists_the_change_not_the_state():
    """Bytes logged per busy superstep of a one-edge change do not follow the
    graph (10x more edges: within 2x), and no base is rewritten for it (after the
    first run after the load, which may compact the load's log)."""
    per_step = {}
    for edges in (300, 3000):
        engine, df, e_in, r_in, cap = _reach_engine(_graph(edges), processes=1,
                                                    max_entries=10_000)
        logged, rebuilt = [], 0
        for t in range(2, 9):
            before = engine.tally()
            e_in.insert((t, edges // 3 + t))        # a new node hanging off a reached one
            e_in.advance_to(t)
            r_in.advance_to(t)
            df.run()
            after = engine.tally()
            if t == 2:
                continue        # (it may compact the load's log)
            assert after["base_bytes"] == before["base_bytes"]
            logged.append((after["log_bytes"] - before["log_bytes"])
                          / (after["busy"] - before["busy"]))
            rebuilt += after["rebuilt"] - before["rebuilt"]
        assert rebuilt == 0                 # one process: every superstep found its worker
        per_step[edges] = sorted(logged)[len(logged) // 2]
    assert per_step[3000] <= 2 * per_step[300], per_step


def test_jobs_grow_with_the_log_of_supersteps_not_with_loop_rounds():
    """One edge that makes a 200-node path reachable: a loop round per node, every
    other one crossing shards (a round that stays on its shard runs in the same
    superstep), chained in a handful of jobs (4, 8, 16, ... supersteps)."""
    n = 200
    engine, df, e_in, r_in, cap = _reach_engine({(i, i + 1) for i in range(1, n)})
    jobs, steps = engine.jobs, engine.supersteps
    e_in.insert((0, 1))
    e_in.advance_to(2)
    r_in.advance_to(2)
    df.run()
    jobs, steps = engine.jobs - jobs, engine.supersteps - steps
    assert cap.at(1) == {v: 1 for v in range(n + 1)}
    assert max(r["round"] for r in df.loop_rows()) >= n
    crossings = sum(shard_of(i, 2) != shard_of(i + 1, 2) for i in range(n))
    assert steps >= crossings > n // 4
    assert jobs <= math.ceil(math.log2(steps / engine.chain + 1)), (jobs, steps)


CALLS: list = []


def _invert(x: int) -> int:
    CALLS.append(x)
    return 10 // x


def _late(kv: tuple) -> tuple:
    """Runs after an exchange and a count: fails a later superstep than the first."""
    if kv[1] > 3:
        raise ValueError(f"count {kv[1]} too high")
    return kv


def test_a_run_failing_in_a_later_superstep_is_undone_too():
    engine = InProcessShards(2, processes=1)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection("numbers")
    out = c.map(_invert, name="invert").map(lambda v: v % 2).count().map(_late).capture()
    for t, x in enumerate((1, 2, 5), start=1):
        s.insert(x)
        s.advance_to(t)
        df.run()
    answer = out.at(2)
    for x in (3, 7, 9):
        s.insert(x)
    s.advance_to(4)
    steps = engine.supersteps
    with pytest.raises(ddflow.UserFunctionError, match="too high"):
        df.run()
    assert engine.supersteps - steps >= 2        # failed after the first superstep
    before = engine.tally()
    CALLS.clear()
    assert out.at(2) == answer
    s.discard(7)
    df.run()
    after = {k: engine.tally()[k] - before[k] for k in before}
    assert after["rebuilt"] == after["replayed"] == 0
    assert sorted(CALLS) == [3, 9]               # the pending records only
    assert out.at(3) == {(0, 2): 1, (1, 3): 1}


@pytest.mark.parametrize("processes", [1, 2])
def test_a_failed_run_is_undone_without_running_anything_again(processes):
    """A failed run's changes are undone by the undo records of the copies that
    started it: no shard is rebuilt and no user function runs again to read the
    answers of before or to run the next step.  With two processes, a copy that
    joined the run half-way has none: it is rebuilt from the log (re-running the
    supersteps it replays)."""
    engine = InProcessShards(2, processes=processes)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection("numbers")
    inv = c.map(_invert, name="invert").count().capture()
    for t, x in enumerate((1, 2, 5, 10), start=1):
        s.insert(x)
        s.advance_to(t)
        df.run()
    answer = inv.at(3)
    s.insert(0)
    s.insert(20)
    s.advance_to(5)
    with pytest.raises(ddflow.UserFunctionError):
        df.run()
    before = engine.tally()
    CALLS.clear()
    assert inv.at(3) == answer
    s.discard(0)
    df.run()
    after = {k: engine.tally()[k] - before[k] for k in before}
    assert inv.at(4) == {(10, 1): 1, (5, 1): 1, (2, 1): 1, (1, 1): 1, (0, 1): 1}
    if processes == 1:
        assert after["rebuilt"] == after["replayed"] == 0
        assert CALLS == [20]                 # the new record only: nothing re-ran
