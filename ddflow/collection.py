"""The fluent API: `Collection`, `Arranged` and `Variable`, with differential dataflow's names.

A `Collection` is a changing multiset inside one scope of one dataflow; every method
adds an operator and returns a new collection.  Keyed operators take `(key, value)`
records.  Families and their laws live in `operators/`; this module only wires them.

>>> import ddflow
>>> df = ddflow.Dataflow()
>>> edges_in, edges = df.new_collection()
>>> by_dst = edges.map(lambda e: (e[1], e[0]))            # (mid, src)
>>> paths = by_dst.join(edges).map(lambda kv: kv[1]).capture()  # (src, dst) two hops
>>> edges_in.insert((1, 2)); edges_in.insert((2, 3)); edges_in.close(); df.run()
>>> paths.updates
[((1, 3), 0, 1)]
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable

from ddflow.dataflow import Capture, CaptureOp, Node, Scope
from ddflow.errors import GraphError
from operators.arrange import Arrange
from operators.distinct_trace import DistinctTrace
from operators.iterate import Enter, EnterAt, Feedback, Leave
from operators.join import JoinCore
from operators.linear import Concat, Consolidate, Linear
from operators import reduce as red
from ddflow.dataflow import register

_counter = itertools.count()


def _pair_key(d: Any) -> Any:
    return d[0]


def _self_key(d: Any) -> Any:
    return d


class Collection:
    """A collection of records changing over the times of its scope."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.scope: Scope = node.scope
        self.dataflow = node.dataflow
        self._arranged: dict[bool, Arranged] = {}

    def __repr__(self) -> str:
        return f"Collection({self.node.name!r}, scope={self.scope.name!r})"

    # -- linear ----------------------------------------------------------------
    def _linear(self, kind: str, fn: Any, name: str | None, *extra: Any) -> Collection:
        if kind != "negate" and not callable(fn):
            raise GraphError(f"{kind} needs a function, got {fn!r}", operator=kind)
        node = Node(self.dataflow, self.scope, name or kind, "linear", [self.node],
                    lambda w, ops: Linear(node.stages, node.name))
        node.stages = [(kind, fn, *extra)]
        return Collection(node)

    def map(self, f: Callable[[Any], Any], name: str | None = None) -> Collection:
        """Each record `x` becomes `f(x)`."""
        return self._linear("map", f, name)

    def filter(self, p: Callable[[Any], bool], name: str | None = None) -> Collection:
        """Keep the records for which `p(x)` is true."""
        return self._linear("filter", p, name)

    def flat_map(self, f: Callable[[Any], Iterable], name: str | None = None) -> Collection:
        """Each record `x` becomes every element of `f(x)`."""
        return self._linear("flat_map", f, name)

    def explode(self, f: Callable[[Any], Iterable[tuple]], name: str | None = None) -> Collection:
        """Each record `x` becomes `(y, r2)` for `(y, r2)` in `f(x)`, diffs multiplied."""
        return self._linear("explode", f, name)

    def join_function(self, f: Callable[[Any], Iterable[tuple]],
                      name: str | None = None) -> Collection:
        """Seed 003's general linear operator: `(x, t, r)` becomes `(y, join(t, t2), r * r2)`
        for each `(y, t2, r2)` in `f(x)`."""
        return self._linear("join_function", f, name)

    def delay(self, f: Callable[[Any, Any], Any], name: str | None = None) -> Collection:
        """Each update `(d, t, r)` moves to time `f(d, t)`, which must be `>= t`
        (a `TimeError` otherwise): `delay(lambda d, t: t + 1)` is a one-tick z^-1."""
        return self._linear("delay", f, name)

    def negate(self, name: str | None = None) -> Collection:
        """Every diff negated."""
        return self._linear("negate", None, name)

    def inspect(self, f: Callable[[tuple], Any], on_frontier: Callable | None = None,
                name: str | None = None) -> Collection:
        """Call `f((data, time, diff))` for each update, `on_frontier(antichain)` when the
        frontier moves; the collection passes through unchanged."""
        return self._linear("inspect", f, name, on_frontier)

    def concat(self, *others: Collection, name: str | None = None) -> Collection:
        """The sum of this collection and `others`."""
        for o in others:
            self._same_scope(o, "concat")
        node = Node(self.dataflow, self.scope, name or "concat", "concat",
                    [self.node] + [o.node for o in others],
                    lambda w, ops: Concat(1 + len(others), node.name))
        return Collection(node)

    def consolidate(self, name: str | None = None) -> Collection:
        """The same accumulations, with equal (data, time) updates summed per step."""
        node = Node(self.dataflow, self.scope, name or "consolidate", "consolidate",
                    [self.node], lambda w, ops: Consolidate(node.name))
        return Collection(node)

    # -- arrangements and joins -------------------------------------------------
    def arrange_by_key(self, name: str | None = None) -> Arranged:
        """Index `(key, value)` records by key (cached: arrange once, join many)."""
        return self._arrange(False, name)

    def arrange_by_self(self, name: str | None = None) -> Arranged:
        """Index records by themselves (values `()`), for semijoins and counting."""
        return self._arrange(True, name)

    def _arrange(self, by_self: bool, name: str | None) -> Arranged:
        if by_self not in self._arranged:
            label = name or ("arrange_by_self" if by_self else "arrange_by_key")
            node = Node(self.dataflow, self.scope, label, "arrange", [self.node],
                        lambda w, ops: Arrange(by_self, node.name),
                        exchange=_self_key if by_self else _pair_key)
            self._arranged[by_self] = Arranged(self, node, by_self)
            if self.dataflow._arrangement_log is not None:
                self.dataflow._arrangement_log.append((self, by_self))
        return self._arranged[by_self]

    def join(self, other: Collection | Arranged, name: str | None = None) -> Collection:
        """`(k, a)` and `(k, b)` give `(k, (a, b))` at the join of their times."""
        return self.arrange_by_key().join(other, name=name)

    def join_map(self, other: Collection | Arranged, logic: Callable[[Any, Any, Any], Any],
                 name: str | None = None) -> Collection:
        """`(k, a)` and `(k, b)` give `logic(k, a, b)`."""
        return self.arrange_by_key().join_map(other, logic, name=name)

    def join_core(self, other: Collection | Arranged,
                  logic: Callable[[Any, Any, Any], Iterable], name: str | None = None) -> Collection:
        """`(k, a)` and `(k, b)` give every element of `logic(k, a, b)`."""
        return self.arrange_by_key().join_core(other, logic, name=name)

    def semijoin(self, keys: Collection | Arranged, name: str | None = None) -> Collection:
        """The `(k, v)` records whose key is in `keys` (multiplicities multiply:
        `keys` should be distinct)."""
        return self.arrange_by_key().semijoin(keys, name=name)

    def antijoin(self, keys: Collection | Arranged, name: str | None = None) -> Collection:
        """The `(k, v)` records whose key is not in `keys` (`keys` should be distinct)."""
        return self.concat(self.semijoin(keys).negate(), name=name or "antijoin")

    # -- reduce family ------------------------------------------------------------
    def reduce(self, logic: Callable[[Any, list], Iterable[tuple]],
               name: str | None = None) -> Collection:
        """Per key, `logic(key, [(value, count)])` gives `[(output, diff)]`; records
        `(key, output)` result."""
        if not callable(logic):
            raise GraphError(f"reduce needs a function, got {logic!r}", operator="reduce")
        return self.arrange_by_key().reduce(logic, name=name)

    def count(self, name: str | None = None) -> Collection:
        """`(x, n)` for each record `x` present `n` times (`map(key).count()` counts keys)."""
        return self.arrange_by_self().reduce(red.count_logic, name=name or "count")

    def sum(self, name: str | None = None) -> Collection:
        """`(k, s)` with `s` the sum of the values of key `k`, times their counts."""
        return self.arrange_by_key().reduce(red.sum_logic, name=name or "sum")

    def min(self, name: str | None = None) -> Collection:
        """`(k, v)` with `v` the least value of key `k`."""
        return self.arrange_by_key().reduce(red.min_logic, name=name or "min")

    def max(self, name: str | None = None) -> Collection:
        """`(k, v)` with `v` the greatest value of key `k`."""
        return self.arrange_by_key().reduce(red.max_logic, name=name or "max")

    def distinct(self, name: str | None = None) -> Collection:
        """Each record once if its count is positive (see `operators.reduce.distinct_logic`)."""
        out = self.arrange_by_self().reduce(red.distinct_logic, name=name or "distinct")
        return out.map(_pair_key, name="distinct.key")

    def distinct_trace(self, name: str | None = None) -> Collection:
        """Seed 002's distinct for `Product(epoch, iteration)` times (the w1/w2/w3 rule);
        the same accumulations as `distinct`, reading only its input trace."""
        label = name or "distinct_trace"
        source = self.arrange_by_self()
        node = Node(self.dataflow, self.scope, label, "reduce", [source.node],
                    lambda w, ops: DistinctTrace(ops(source.node), node.name))
        return Collection(node)

    def threshold(self, f: Callable[[Any], Any], name: str | None = None) -> Collection:
        """Each record `x` with count `n` appears `f(n)` times."""
        out = self.arrange_by_self().reduce(red.threshold_logic(f), name=name or "threshold")
        return out.map(_pair_key, name="threshold.key")

    # -- scopes and loops ----------------------------------------------------------
    def enter(self, scope: Scope, name: str | None = None) -> Collection:
        """This collection inside a nested `scope`, at round 0 of every outer time."""
        chain = _scope_chain(self.scope, scope)
        node = self.node
        for inner in chain:
            node = Node(self.dataflow, inner, name or "enter", "enter", [node],
                        lambda w, ops: Enter(name or "enter"))
        return Collection(node)

    def enter_at(self, scope: Scope, round_of: Callable[[Any], int],
                 name: str | None = None) -> Collection:
        """Like `enter`, each record entering at round `round_of(record)`."""
        chain = _scope_chain(self.scope, scope)
        if len(chain) != 1:
            raise GraphError("enter_at enters exactly one level: enter the outer scopes first")
        node = Node(self.dataflow, scope, name or "enter_at", "enter", [self.node],
                    lambda w, ops: EnterAt(round_of, name or "enter_at"))
        return Collection(node)

    def leave(self, name: str | None = None) -> Collection:
        """The loop's limit, back in the parent scope."""
        if self.scope.parent is None:
            raise GraphError("leave() on a collection of the root scope")
        node = Node(self.dataflow, self.scope.parent, name or "leave", "leave", [self.node],
                    lambda w, ops: Leave(name or "leave"))
        return Collection(node)

    def iterate(self, logic: Callable[[Collection], Collection], *,
                max_rounds: int | None = 10_000, on_limit: str = "raise",
                name: str | None = None) -> Collection:
        """Repeat `x := logic(x)` from this collection until the fixpoint; return the limit.

        `logic` receives the loop variable, a collection in the new scope (its
        `.scope` is where other collections must `enter`).  A loop still changing at
        round `max_rounds` raises `ConvergenceError`, or with `on_limit="truncate"`
        stops there and returns what it has.
        """
        if on_limit not in ("raise", "truncate"):
            raise GraphError(f"on_limit must be 'raise' or 'truncate', not {on_limit!r}")
        name = name or f"iterate{next(_counter)}"
        with self.dataflow._building():
            scope = Scope(self.dataflow, self.scope, name, max_rounds, on_limit)
            variable = Variable(scope, self.enter(scope), name=name)
            result = logic(variable.collection)
            if not isinstance(result, Collection) or result.scope is not scope:
                raise GraphError(f"the logic of {name} must return a collection of its own "
                                 "scope (enter outer collections with .enter(inner.scope))",
                                 operator=name)
            variable.set(result)
            return result.leave()

    # -- output --------------------------------------------------------------------
    def capture(self, name: str | None = None, *, in_loop: bool = False) -> Capture:
        """Record every update reaching this collection (see `Capture`).

        A collection of a loop scope is refused unless `in_loop=True` (capturing the
        loop variable when the loop's result was meant is an easy slip): its updates
        keep the loop's times (`Product(outer, round)`), round by round, which
        `leave()` would sum away.  Like any capture it is read from the driver, so it
        serves every engine (an `inspect` callback runs in the operator, which on the
        BSP engines is a copy living elsewhere).
        """
        if self.scope.parent is not None and not in_loop:
            raise GraphError("capture() a collection of the root scope: leave() the loop "
                             "first, or capture(in_loop=True) to record its rounds")
        label = name or "capture"
        node = Node(self.dataflow, self.scope, label, "capture", [self.node],
                    lambda w, ops: CaptureOp(label))
        cap = Capture(self.dataflow, node)
        self.dataflow.captures.append(cap)
        return cap

    def _same_scope(self, other: Any, what: str) -> None:
        if not isinstance(other, (Collection, Arranged)):
            raise GraphError(f"{what} needs a collection, got {other!r}", operator=what)
        if other.scope is not self.scope:
            raise GraphError(f"{what}: collections of different scopes ({self.scope.name} and "
                             f"{other.scope.name}); enter() the outer one first", operator=what)


class Arranged:
    """A collection indexed by key, its trace shared by every operator that reads it."""

    def __init__(self, collection: Collection, node: Node, by_self: bool) -> None:
        self.collection = collection
        self.node = node
        self.by_self = by_self
        self.scope = collection.scope
        self.dataflow = collection.dataflow

    def _other(self, other: Collection | Arranged, by_self: bool = False) -> Arranged:
        self.collection._same_scope(other, "join")
        if isinstance(other, Collection):
            return other.arrange_by_self() if by_self else other.arrange_by_key()
        return other

    def _join(self, other: Arranged, kind: str, logic: Any, name: str) -> Collection:
        left = self
        node = Node(self.dataflow, self.scope, name, "join", [left.node, other.node],
                    lambda w, ops: JoinCore(ops(left.node), ops(other.node), kind, logic,
                                            node.name))
        return Collection(node)

    def join(self, other: Collection | Arranged, name: str | None = None) -> Collection:
        return self._join(self._other(other), "join", None, name or "join")

    def join_map(self, other: Collection | Arranged, logic: Callable, name: str | None = None
                 ) -> Collection:
        return self._join(self._other(other), "map", logic, name or "join_map")

    def join_core(self, other: Collection | Arranged, logic: Callable,
                  name: str | None = None) -> Collection:
        return self._join(self._other(other), "core", logic, name or "join_core")

    def semijoin(self, keys: Collection | Arranged, name: str | None = None) -> Collection:
        return self._join(self._other(keys, by_self=True), "semijoin", None, name or "semijoin")

    def reduce(self, logic: Callable, name: str | None = None) -> Collection:
        source = self
        node = Node(self.dataflow, self.scope, name or "reduce", "reduce", [self.node],
                    lambda w, ops: red.Reduce(ops(source.node), logic, node.name))
        return Collection(node)

    def as_collection(self) -> Collection:
        """The arranged records as a collection again."""
        out = Collection(self.node)
        return out.map(_pair_key, name="as_collection") if self.by_self else out


class Variable:
    """A loop variable: its value at round `r + 1` is what `set` gave it at round `r`.

    `Variable(scope)` starts empty; `Variable(scope, source)` starts as `source`
    (entered at round 0), like differential dataflow's `Variable::new_from`: it feeds
    back `result - source` so that the variable equals `result` one round later.
    """

    def __init__(self, scope: Scope, source: Collection | None = None,
                 name: str | None = None) -> None:
        if scope.parent is None:
            raise GraphError("a Variable lives in a loop scope, not the root")
        if source is not None and source.scope is not scope:
            raise GraphError("the source of a Variable must be in its scope (enter it)")
        label = name or f"variable{next(_counter)}"
        self.scope = scope
        self.source = source
        self.node = Node(scope.dataflow, scope, label, "feedback", [],
                         lambda w, ops: Feedback(scope.max_rounds, scope.on_limit, label))
        fed = Collection(self.node)
        self.collection = source.concat(fed, name=f"{label}.concat") if source is not None else fed
        self._set = False

    def set(self, result: Collection) -> Collection:
        """Close the loop: `result` at round `r` becomes the variable at round `r + 1`."""
        if self._set:
            raise GraphError(f"Variable '{self.node.name}' set twice", operator=self.node.name)
        if result.scope is not self.scope:
            raise GraphError("Variable.set needs a collection of the variable's scope")
        self.scope.dataflow._check_building(self.scope)
        delta = result.concat(self.source.negate()) if self.source is not None else result
        self.node.inputs.append(delta.node)
        delta.node.consumers.append((self.node, 0))
        self._set = True
        return result


def _scope_chain(outer: Scope, inner: Scope) -> list[Scope]:
    """The scopes from just inside `outer` down to `inner`."""
    chain = []
    s: Scope | None = inner
    while s is not None and s is not outer:
        chain.append(s)
        s = s.parent
    if s is None:
        raise GraphError(f"cannot enter scope {inner.name} from {outer.name}: not nested in it")
    return list(reversed(chain))


# `Dataflow.new_collection` hands out this type; the front door cannot import it.
register("collection", Collection)
