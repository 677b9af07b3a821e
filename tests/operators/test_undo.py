"""Rollback that costs what a step touched (`operators.undo`), for every operator family.

Three checks:

* `UndoDict` against a plain-dict model: any sequence of writes between
  `checkpoint()` and `rollback()` leaves the items as they were.
* Each operator family, driven like an engine drives it (random batches and
  frontiers at `Product` times, every operator checkpointed right before its first
  hook call of a step): after a step, possibly failing half way, `rollback()` puts
  the state back exactly as at the checkpoint, and the rolled-back operators then
  behave as a twin that never ran the step (same outputs, same state).
* Counters: on a 200-node chain whose edge 195 -> 196 is toggled every epoch, the
  undo records a step writes stay flat from epoch 10 to epoch 600, while what a
  whole-state copy would touch grows with the loop's history.
"""

from __future__ import annotations

import copy
import pickle
from collections import deque
from typing import Any, Callable, Sequence
from unittest import mock

import pytest
from hypothesis import given, settings, strategies as st

import ddflow
import operators.iterate as iterate_module
from ddflow.algorithms.graphs import reachability
from operators.capture import CaptureOp
from ddflow.input import InputOp
from ddflow.errors import DataflowError
from ddflow.trace import Trace
from ddflow.testing.times import minimum_of
from ddflow.updates import consolidate
from lattice import Antichain, Product, join
from operators.arrange import Arrange
from operators.base import Operator
from operators.distinct_trace import DistinctTrace
from operators.iterate import Feedback
from operators.join import JoinCore
from operators.linear import Consolidate, Linear
from operators.reduce import Reduce, count_logic, min_logic
from operators.undo import MISSING, UndoDict
from operators.wcoj import Count, Delay, GenericJoin, Propose, Stamp, Validate

# -- materialising state ------------------------------------------------------------------


def _materialise(value: Any) -> Any:
    """A comparable, copyable form of one state attribute: traces by content (their
    accumulated updates, since and upper), dicts and deques by items."""
    if isinstance(value, Trace):
        content: dict = {}
        for b in value.batches:
            for key, entries in b.data.items():
                for val, t, r in entries:
                    content[(key, val, t)] = content.get((key, val, t), 0) + r
        return ("trace", {k: r for k, r in content.items() if r},
                value.logical_compaction, value.upper)
    if type(value) is tuple:
        return tuple(_materialise(v) for v in value)
    if isinstance(value, dict):
        return {k: _materialise(v) for k, v in value.items()}
    if isinstance(value, deque):
        return ("deque", list(value), value.maxlen)
    return value


def _multisets(value: Any) -> Any:
    """`value` with every list replaced by its items in a canonical order."""
    if isinstance(value, list):
        return sorted((_multisets(v) for v in value), key=repr)
    if isinstance(value, tuple):
        return tuple(_multisets(v) for v in value)
    if isinstance(value, dict):
        return {k: _multisets(v) for k, v in value.items()}
    return value


def state_view(op: Operator) -> dict:
    """Everything rollback promises to restore, deep-copied so later mutation cannot
    reach it: counters, declared state, append-only lists, pending output and the
    capabilities the caches describe."""
    view = {"counters": op.counters(), "out": list(op.output),
            "caps": frozenset(op.capabilities())}
    for attr in (*op._state, *op._append_only):
        view[attr] = _materialise(getattr(op, attr))
    if "marks" in view:
        # A capture's batch tokens are random by design (they tell a batch read
        # before a rollback from its replacement): compare where batches end.
        view["marks"] = [end for end, _token in view["marks"]]
    return copy.deepcopy(view)


# -- UndoDict against a model ---------------------------------------------------------------

_KEYS = st.integers(0, 5)
_VALUES = st.one_of(st.integers(0, 3), st.sets(st.integers(0, 3), max_size=3),
                    st.lists(st.integers(0, 3), max_size=3))
_WRITES = st.one_of(
    st.tuples(st.just("set"), _KEYS, _VALUES),
    st.tuples(st.just("del"), _KEYS),
    st.tuples(st.just("pop"), _KEYS),
    st.tuples(st.just("popitem")),
    st.tuples(st.just("setdefault"), _KEYS, _VALUES),
    st.tuples(st.just("update"), st.dictionaries(_KEYS, _VALUES, max_size=3)),
    st.tuples(st.just("clear")),
    st.tuples(st.just("mutate"), _KEYS, st.integers(0, 3)),
)


def _write(d: UndoDict, op: tuple) -> None:
    kind = op[0]
    if kind == "set":
        d[op[1]] = copy.copy(op[2])
    elif kind == "del" and op[1] in d:
        del d[op[1]]
    elif kind == "pop":
        d.pop(op[1], None)
    elif kind == "popitem" and d:
        d.popitem()
    elif kind == "setdefault":
        d.setdefault(op[1], copy.copy(op[2]))
    elif kind == "update":
        d.update(copy.deepcopy(op[1]))
    elif kind == "clear":
        d.clear()
    elif kind == "mutate":
        v = d.touch(op[1])           # in-place mutation of a nested value: announced
        if isinstance(v, set):
            v.add(op[2])
        elif isinstance(v, list):
            v.append(op[2])


def _named(writes: list) -> set:
    keys: set = set()
    for w in writes:
        if w[0] == "update":
            keys.update(w[1])
        elif len(w) > 1:
            keys.add(w[1])
    return keys


@settings(max_examples=200)
@given(st.lists(_WRITES, max_size=8), st.lists(_WRITES, max_size=12))
def test_undo_dict_rollback_restores_the_items(before: list, step: list) -> None:
    d = UndoDict()
    for w in before:
        _write(d, w)                 # not recording: writes record nothing
    expected = copy.deepcopy(dict(d))
    d.checkpoint()
    for w in step:
        _write(d, w)
    after = copy.deepcopy(dict(d))
    records, _copied = d.rollback()
    assert dict(d) == expected
    # At most one record per key the step wrote, however often it wrote it.
    assert records <= len(set(expected) | _named(step))
    d.checkpoint()
    for w in step:
        _write(d, w)
    replayed = copy.deepcopy(dict(d))
    replay_records, _copied = d.commit()
    if all(w[0] != "popitem" for w in step):
        # The same writes after a rollback give the same items (popitem aside: which
        # item it removes depends on the order, and rollback restores items only).
        assert replayed == after and replay_records == records
    assert d.rollback() == (0, 0) and dict(d) == replayed    # committed: nothing to undo


def test_undo_dict_records_once_per_key_and_never_travels() -> None:
    d = UndoDict({"a": {1, 2}, "b": [1]})
    d.checkpoint()
    d.checkpoint()                           # idempotent: the first images stay
    d.touch("a").add(3)
    d.touch("a").add(4)
    d["a"] = {9}
    d.touch("b").extend([2, 3])
    d["c"] = 1
    assert d._undo == {"a": {1, 2}, "b": mock.ANY, "c": MISSING}
    # Records stay out of copies and pickles: they belong to the running step.
    for clone in (copy.deepcopy(d), pickle.loads(pickle.dumps(d))):
        assert type(clone) is UndoDict and clone == d and clone._undo is None
    assert d.rollback() == (3, 2)            # a copy of {1, 2}; b by length; c missing
    assert d == {"a": {1, 2}, "b": [1]}


def test_plain_containers_in_state_are_refused() -> None:
    class Careless(Operator):
        _state = ("_seen",)

        def __init__(self) -> None:
            super().__init__("careless")
            self._seen: dict = {}

    op = Careless()
    with pytest.raises(TypeError, match="UndoDict"):
        op.checkpoint()
    op._seen = UndoDict()
    op.checkpoint()
    op.rollback()


# -- operator families, driven like an engine ----------------------------------------------

class Rig:
    """A few operators in topological order, driven as an engine drives them: every
    operator sees the same input frontier (sound here: no operator upstream of
    another holds capabilities below it), and is checkpointed right before its first
    hook call of a step (the lazy contract), so state other operators write reaches
    the undo records only through `_writes`."""

    def __init__(self, ops: Sequence[Operator], inputs: Sequence[tuple],
                 edges: dict[int, list[tuple[int, int]]], kind: str = "product",
                 is_poison: Callable[[tuple], bool] = lambda u: False,
                 poison: Callable[[Any], tuple] | None = None,
                 after: Callable[[list, Antichain], None] | None = None) -> None:
        self.ops = list(ops)
        self.inputs = inputs         # (op index, port, data strategy) per external input
        self.edges = edges           # op index -> [(consumer index, port)]
        self.kind = kind
        self.is_poison, self.poison, self.after = is_poison, poison, after
        self.frontier = Antichain([minimum_of(kind)])
        self._touched: list[Operator] = []
        self._saved_frontier = self.frontier
        for op in self.ops:                  # an engine's first pass: nothing yet complete
            op.on_frontier([self.frontier] * op.n_inputs)

    def _touch(self, op: Operator) -> None:
        if op not in self._touched:
            op.checkpoint()
            self._touched.append(op)

    def apply(self, batches: Sequence[list], frontier: Antichain) -> list[list]:
        """One step; the outputs of every operator, consolidated."""
        queues = [[[] for _ in range(op.n_inputs)] for op in self.ops]
        for (i, port, _data), ups in zip(self.inputs, batches):
            queues[i][port].extend(ups)
        moved = frontier != self.frontier
        self._saved_frontier, self.frontier = self.frontier, frontier   # the driver's state
        outs = []
        for i, op in enumerate(self.ops):
            qs = queues[i]
            if not moved and not any(qs):
                outs.append([])
                continue
            self._touch(op)
            if isinstance(op, InputOp):
                op.frontier = frontier
            for port, q in enumerate(qs):
                if q:
                    op.on_input(port, q)
            op.on_frontier([frontier] * op.n_inputs)
            if self.after is not None and i == 0:
                self.after(self.ops, frontier)     # the ops of this rig (or of its copy)
            out = op.take_output()
            outs.append(consolidate(out))
            for consumer, port in self.edges.get(i, ()):
                queues[consumer][port].extend(out)
        return outs

    def commit(self) -> None:
        for op in self._touched:
            op.commit()
        self._touched = []

    def rollback(self) -> None:
        for op in self._touched:
            op.rollback()
        self.frontier = self._saved_frontier
        self._touched = []

    def views(self) -> list[dict]:
        return [state_view(op) for op in self.ops]


def _boom(what: str) -> None:
    raise ValueError(f"poisoned {what}")


def _linear() -> Rig:
    def mapped(x: int) -> int:
        return _boom("map") if x == -1 else x + 1
    watched: list = []
    lin = Linear([("map", mapped), ("filter", lambda x: x % 3 != 0),
                  ("join_function", lambda x: [(x, Product(0, 1), 1), (x * 2, Product(1, 0), -1)]),
                  ("inspect", lambda u: None, watched.append)])
    return Rig([lin, Consolidate()], [(0, 0, st.integers(0, 4))], {0: [(1, 0)]},
               is_poison=lambda u: u[0] == -1, poison=lambda t: (-1, t, 1))


_PAIRS = st.tuples(st.integers(0, 3), st.integers(0, 3))


def _arrange() -> Rig:
    arr = Arrange(name="arrange")
    rid = arr.register_reader()      # a reader that compacts the trace as time passes
    return Rig([arr], [(0, 0, _PAIRS)], {},
               is_poison=lambda u: type(u[0]) is not tuple, poison=lambda t: (7, t, 1),
               after=lambda ops, f: ops[0].advance_reader(rid, f))


def _join() -> Rig:
    left, right = Arrange(name="left"), Arrange(name="right")

    def logic(k: int, a: int, b: int) -> tuple:
        return _boom("join") if a == -1 else (k, a + b)
    j = JoinCore(left, right, kind="map", logic=logic)
    return Rig([left, right, j], [(0, 0, _PAIRS), (1, 0, _PAIRS)], {0: [(2, 0)], 1: [(2, 1)]},
               is_poison=lambda u: u[0][1] == -1, poison=lambda t: ((1, -1), t, 1))


def _reduce(logic: Callable, by_self: bool) -> Callable[[], Rig]:
    def build() -> Rig:
        arr = Arrange(by_self=by_self)

        def poisoned(key: Any, vals: list) -> list:
            return _boom("reduce") if key == -1 else logic(key, vals)
        red = Reduce(arr, poisoned)
        key = (lambda u: u[0]) if by_self else (lambda u: u[0][0])
        # Few keys: a key with times pending from an earlier step often gets more.
        values = (st.integers(0, 2) if by_self
                  else st.tuples(st.integers(0, 1), st.integers(0, 3)))
        return Rig([arr, red], [(0, 0, values)],
                   {0: [(1, 0)]}, is_poison=lambda u: key(u) == -1,
                   poison=lambda t: ((-1 if by_self else (-1, 0)), t, 1))
    return build


def _distinct_trace() -> Rig:
    arr = Arrange(by_self=True)
    return Rig([arr, DistinctTrace(arr)], [(0, 0, st.integers(0, 4))], {0: [(1, 0)]})


def _feedback(max_rounds: int, on_limit: str) -> Callable[[], Rig]:
    def build() -> Rig:
        fb = Feedback(max_rounds=max_rounds, on_limit=on_limit)
        if on_limit == "raise":     # a change into round max_rounds + 1 is the poison
            return Rig([fb], [(0, 0, st.integers(0, 4))], {},
                       is_poison=lambda u: u[1].inner >= max_rounds,
                       poison=lambda t: (0, join(t, Product(0, max_rounds)), 1))
        return Rig([fb], [(0, 0, st.integers(0, 4))], {})
    return build


def _delta(total: bool) -> Callable[[], Rig]:
    """The half joins of dogsdogsdogs: Count and Propose by one index, Validate by another;
    at partially ordered times the prefixes are stamped with the join of the times
    met so far and delayed to it at the end, at int times they are plain."""
    def build() -> Rig:
        def key(vals: tuple) -> int:
            return _boom("propose key") if vals[0] == -1 else vals[0]
        idx = Arrange(name="g by src")
        members = Arrange(by_self=True, name="members")
        ops = [Stamp() if not total else Linear([("map", lambda vals: vals)]), idx, members,
               Count(idx, neu=True, total=total, key=key, atom=1, first=True),
               Propose(idx, neu=False, total=total, key=key),
               Validate(members, neu=True, total=total, key=lambda vals: vals[1]),
               Delay(lambda vals: vals) if not total else Linear([("map", lambda v: v)])]
        edges = {0: [(3, 0), (4, 0)], 1: [(3, 1), (4, 1)], 2: [(5, 1)], 4: [(5, 0)],
                 5: [(6, 0)]}
        inputs = [(0, 0, st.tuples(st.integers(0, 3))), (1, 0, _PAIRS),
                  (2, 0, st.integers(0, 3))]
        return Rig(ops, inputs, edges, kind="int" if total else "product",
                   is_poison=lambda u: u[0] == (-1,), poison=lambda t: ((-1,), t, 1))
    return build


def _generic_join() -> Rig:
    gj = GenericJoin([("x", "y"), ("y", "z"), ("x", "z")], [0, 0, 0], 1, head=("x", "y", "z"))
    return Rig([gj], [(0, 0, _PAIRS)], {}, kind="int",
               is_poison=lambda u: type(u[1]) is not int,
               poison=lambda t: ((1, 2), Product(t, 0), 1))


def _capture() -> Rig:
    return Rig([InputOp("input"), CaptureOp()], [(0, 0, st.integers(0, 4))], {0: [(1, 0)]},
               is_poison=lambda u: isinstance(u[0], list), poison=lambda t: ([1], t, 1))


FAMILIES: dict[str, Callable[[], Rig]] = {
    "linear": _linear,
    "arrange": _arrange,
    "join": _join,
    "count": _reduce(count_logic, by_self=True),
    "min": _reduce(min_logic, by_self=False),
    "distinct_trace": _distinct_trace,
    "feedback": _feedback(3, "truncate"),
    "feedback_raise": _feedback(2, "raise"),
    "delta_query": _delta(total=False),
    "delta_query_int": _delta(total=True),
    "generic_join": _generic_join,
    "capture": _capture,
}


def _later(t: Any, a: int, b: int) -> Any:
    """`t` moved `a` epochs and `b` rounds on (ints: `a` on)."""
    return t + a if type(t) is int else Product(t.outer + a, t.inner + b)


_OFFSETS = st.tuples(st.integers(0, 2), st.integers(0, 2))


def _draw_step(data: st.DataObject, rig: Rig) -> tuple[list[list], Antichain]:
    """Batches at times a little in advance of the current frontier, and a frontier
    that moves on a little (often splitting into incomparable elements): times close
    together are where partially ordered state builds up (a reduce's pending joins,
    a feedback's windows), and where rollback has the most to undo."""
    frontier = rig.frontier
    if not frontier.elements:
        return [[] for _ in rig.inputs], frontier
    at = st.builds(lambda f, ab: _later(f, *ab), st.sampled_from(frontier.elements), _OFFSETS)
    batches = [data.draw(st.lists(st.tuples(values, at, st.sampled_from([-1, 1, 2])),
                                  max_size=6)) for _i, _port, values in rig.inputs]
    moves = data.draw(st.lists(_OFFSETS, max_size=2))
    return batches, Antichain(_later(f, a, b) for f in frontier.elements for a, b in moves)


def _with_poison(data: st.DataObject, rig: Rig, batches: list[list]) -> list[list]:
    if rig.poison is None or not rig.frontier.elements or not data.draw(st.booleans()):
        return batches
    which = data.draw(st.integers(0, len(batches) - 1))
    batch = list(batches[which])
    t = batch[0][1] if batch else rig.frontier.elements[0]
    batch.insert(data.draw(st.integers(0, len(batch))), rig.poison(t))
    return [batch if i == which else b for i, b in enumerate(batches)]


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=200)
@given(data=st.data())
def test_rollback_restores_the_state_and_replay_agrees(family: str, data: st.DataObject) -> None:
    with mock.patch.object(iterate_module, "LOG_ENTRIES", 3):   # the log ring wraps
        rig = FAMILIES[family]()
        for _ in range(data.draw(st.integers(0, 6), label="steps before")):
            batches, frontier = _draw_step(data, rig)
            batches = [[u for u in b if not rig.is_poison(u)] for b in batches]
            rig.apply(batches, frontier)
            rig.commit()
        for _ in range(data.draw(st.integers(1, 3), label="rolled-back steps")):
            twin = copy.deepcopy(rig)        # never runs the rolled-back step
            batches, frontier = _draw_step(data, rig)
            clean = [[u for u in b if not rig.is_poison(u)] for b in batches]
            trial = _with_poison(data, rig, batches)
            at_checkpoint = rig.views()
            try:
                first = rig.apply(trial, frontier)
                failed = False
            except (DataflowError, ValueError):
                failed = True
            rig.rollback()
            assert rig.views() == at_checkpoint
            assert rig.frontier == twin.frontier
            replay = rig.apply(clean, frontier)
            expected = twin.apply(clean, frontier)
            assert replay == expected
            if not failed and trial == clean:
                assert first == expected
            # A rolled-back dict has its restored keys at the end of its iteration
            # order, so updates may be buffered in another order than the twin's:
            # the same multisets, compared as such.
            assert ([_multisets(v) for v in rig.views()]
                    == [_multisets(v) for v in twin.views()])
            rig.commit()
            twin.commit()


def _reduce_reader(arr: Arrange, _other: Arrange) -> Operator:
    return Reduce(arr, count_logic)


def _distinct_reader(arr: Arrange, _other: Arrange) -> Operator:
    return DistinctTrace(arr)


def _join_reader(arr: Arrange, other: Arrange) -> Operator:
    return JoinCore(other, arr, kind="join")


def _half_join_reader(arr: Arrange, _other: Arrange) -> Operator:
    return Propose(arr, neu=True, total=True, key=lambda vals: vals[0])


@pytest.mark.parametrize("reader", [_reduce_reader, _distinct_reader, _join_reader,
                                    _half_join_reader])
def test_a_reader_rolls_back_the_arrangement_it_compacts(reader: Callable) -> None:
    """A reader advances its arrangement's compaction frontier in its own hook: when a
    step checkpoints the reader alone, `_writes` extends the checkpoint to the
    arrangement, and rollback puts its readers, since and trace back."""
    total = reader is _half_join_reader
    t0, t1, late = (0, 1, 20) if total else (Product(0, 0), Product(1, 1), Product(3, 3))
    arr, other = Arrange(by_self=not total), Arrange(by_self=True)
    op = reader(arr, other)
    arr.on_input(0, [(((1, 2) if total else 1), t0, 1)])
    arr.on_frontier([Antichain([t1])])
    op.on_input(1 if op.n_inputs == 2 else 0, arr.take_output())
    op.on_frontier([Antichain([t1])] * op.n_inputs)
    op.take_output()                 # as an engine drains it after every hook
    before = state_view(arr), state_view(op)
    since = arr.trace.logical_compaction
    op.checkpoint()
    op.on_frontier([Antichain([late])] * op.n_inputs)
    assert arr.trace.logical_compaction != since          # the reader let it compact
    op.rollback()
    assert (state_view(arr), state_view(op)) == before
    assert arr.trace.logical_compaction == since and arr._undo_log is None


def test_feedback_keeps_a_bounded_log_and_windows_of_live_outer_times() -> None:
    fb = Feedback(max_rounds=20, name="loop")
    with mock.patch.object(iterate_module, "LOG_ENTRIES", 4):
        for rnd in range(6):
            fb.on_input(0, [("x", Product(0, rnd), 1), ("x", Product(0, rnd), 1)])
            fb.on_frontier([Antichain([Product(0, rnd + 1)])])
            fb.take_output()
        # Rounds 1..6 of outer time 0 were logged as they completed; the ring keeps
        # the most recent 4 entries, oldest first.
        assert list(fb.log) == [(0, 3), (0, 4), (0, 5), (0, 6)]
        assert len(fb._log) == 4 and fb.log[(0, 6)] == (1, (("x", 2),))
    # Near the limit (rounds above 20 - 16) the diagnostic keeps a window per outer time.
    assert [rnd for rnd, _changes in fb._recent[0]] == [5, 6]
    fb.on_input(0, [("y", Product(1, 5), 1)])
    fb.on_frontier([Antichain([Product(1, 0)])])
    assert fb._recent == {}                  # outer time 0 is over: its window is gone
    fb.on_frontier([Antichain([Product(1, 6)])])
    assert list(fb._recent) == [1]
    fb.on_frontier([Antichain()])
    assert fb._recent == {}


# -- counters: records per step stay flat over a long run --------------------------------

def _whole_state_size(op: Operator) -> int:
    """What copying every declared structure one level down touches: roughly what
    rollback copied on every run before `operators.undo`."""
    size = len(op._state) + len(op._append_only)
    for attr in op._state:
        value = getattr(op, attr)
        for part in value if type(value) is tuple else (value,):
            if isinstance(part, Trace):
                size += part.batch_count()
            elif isinstance(part, dict):
                size += len(part) + sum(len(v) for v in part.values()
                                        if isinstance(v, (set, list, dict, deque)))
    return size


def test_undo_records_per_step_stay_flat_on_a_long_toggling_chain() -> None:
    """The issue's measurement: reachability on a 200-node chain, one edge toggled
    per epoch for 600 epochs.  The records (and values copied) a step writes are the
    same at epoch 600 as at epoch 10, while what a whole-state copy would touch (the
    loop log grows by an entry per round per epoch) grows ninefold."""
    n, toggled = 200, 195
    df = ddflow.Dataflow()
    edges_in, edges = df.new_collection("edges")
    roots_in, roots = df.new_collection("roots")
    reach = reachability(edges, roots).capture()
    for i in range(n - 1):
        edges_in.insert((i, i + 1))
    roots_in.insert(0)
    edges_in.advance_to(1)
    roots_in.advance_to(1)
    df.run()
    ops = [op for node in df.nodes for op in df.engine.operators(node)]
    per_epoch: dict[int, tuple[int, int]] = {}
    whole: dict[int, int] = {}
    for epoch in range(1, 601):              # epoch e's change is at time e
        if epoch % 2:
            edges_in.remove((toggled, toggled + 1))
        else:
            edges_in.insert((toggled, toggled + 1))
        edges_in.advance_to(epoch + 1)
        roots_in.advance_to(epoch + 1)
        before = [(op.undo_records, op.undo_values) for op in ops]
        df.run()
        per_epoch[epoch] = (sum(op.undo_records for op in ops) - sum(r for r, _ in before),
                            sum(op.undo_values for op in ops) - sum(v for _, v in before))
        whole[epoch] = sum(_whole_state_size(op) for op in ops)
    assert reach.at(600) == {i: 1 for i in range(n)}           # the answer, still exact
    assert reach.at(599) == {i: 1 for i in range(toggled + 1)}
    for early, late in ((10, 600), (11, 599)):                 # an insertion, a removal
        records_early, values_early = per_epoch[early]
        records_late, values_late = per_epoch[late]
        assert 0 < records_late <= 2 * records_early and records_early <= 2 * records_late
        assert values_late <= 2 * max(values_early, 1)
    assert whole[600] >= 5 * whole[10]
    assert max(r for r, _v in per_epoch.values()) < whole[600] / 20
