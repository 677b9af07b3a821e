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

import functools
import itertools
from typing import Any, Callable, Iterable

from ddflow import arguments
from ddflow.capture import Capture
from ddflow.graph import Node, Scope
from ddflow.errors import DataflowError, GraphError, UserFunctionError
from operators.arrange import Arrange, EnteredArrangement
from operators.distinct_trace import DistinctTrace
from operators.iterate import Enter, EnterAt, Feedback, Leave
from operators.join import JoinCore
from operators.linear import Concat, Consolidate, Linear, temporal_bounds
from operators import reduce as red
from operators.capture import CaptureOp

_counter = itertools.count()


def _pair_key(d: Any) -> Any:
    return d[0]


def _self_key(d: Any) -> Any:
    return d


class Collection:
    """A collection of records changing over the times of its scope.

    Attributes: `scope`, the scope whose times its updates carry (the dataflow's root
    scope, or the loop scope of an `iterate`; `enter(scope)` brings a collection into a
    nested one, `leave()` takes it out); `dataflow`, the `Dataflow` it belongs to;
    `node`, its node in the dataflow graph.
    """

    def __init__(self, node: Node) -> None:
        self.node = node
        self.scope: Scope = node.scope
        self.dataflow = node.dataflow
        self._arranged: dict[bool, Arranged] = {}
        #: The collection of the enclosing scope this one entered at round 0, whose
        #: arrangements it can read instead of arranging again (`Arranged.enter`).
        self._entered_from: Collection | None = None

    def __repr__(self) -> str:
        return f"Collection({self.node.name!r}, scope={self.scope.name!r})"

    # -- linear ----------------------------------------------------------------
    def _linear(self, kind: str, fn: Any, name: str | None, *extra: Any) -> Collection:
        if kind != "negate" and not callable(fn):
            raise GraphError(f"{kind} needs a function, got {fn!r}", operator=kind)
        if extra and extra[0] is not None:
            arguments.function(extra[0], "on_frontier", kind)
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
        """The general linear operator of McSherry's "Generalizing linear operators":
        `(x, t, r)` becomes `(y, join(t, t2), r * r2)`
        for each `(y, t2, r2)` in `f(x)`."""
        return self._linear("join_function", f, name)

    def temporal_filter(self, lower: Callable[[Any], Any], upper: Callable[[Any], Any],
                        name: str | None = None) -> Collection:
        """Each record `x` is present from time `lower(x)` until (not at) `upper(x)`:
        `join_function` emitting `(x, max(t, lower), +r)` and `(x, max(t, upper), -r)`
        (`operators.linear.temporal_bounds`).  A record arriving after its upper
        bound cancels at its arrival time: it is never seen.

        >>> from ddflow.testing import evaluate
        >>> evaluate(lambda c: c.temporal_filter(lambda x: 3, lambda x: 5),
        ...          [[("a", 0, 1), ("b", 4, 1), ("c", 6, 1)]])
        [('a', 3, 1), ('a', 5, -1), ('b', 4, 1), ('b', 5, -1)]
        """
        arguments.function(lower, "lower", "temporal_filter")
        arguments.function(upper, "upper", "temporal_filter")
        return self.join_function(temporal_bounds(lower, upper), name or "temporal_filter")

    def sliding_window(self, start: Callable[[Any], Any], width: Any,
                       name: str | None = None) -> Collection:
        """Each record `x` is present from `start(x)` (its event time, say) for `width`:
        until `start(x) + width` when `width` is a number (integer times), or until
        `width(start(x))` when it is a function of the start time (any lattice)."""
        arguments.function(start, "start", "sliding_window")
        if not callable(width) and (isinstance(width, bool) or not isinstance(width, (int, float))):
            raise GraphError(f"sliding_window needs a number or a function as width, got "
                             f"{width!r}", operator="sliding_window")
        end = width if callable(width) else (lambda s: s + width)
        return self.temporal_filter(start, lambda x: end(start(x)), name or "sliding_window")

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

    def _forget_if_undone(self, by_self: bool) -> None:
        # A failed build call takes the arrangement's node out again (`Graph.building`):
        # the cache must not hand it out after that.
        self.dataflow.on_undo(lambda: self._arranged.pop(by_self, None))

    def _arrange(self, by_self: bool, name: str | None, user: str | None = None) -> Arranged:
        cached = self._arranged.get(by_self)
        if cached is not None and cached.node.dropped:
            del self._arranged[by_self]     # its piece was dropped: arrange afresh
        if by_self not in self._arranged and self._entered_from is not None:
            outer = self._entered_from._arranged.get(by_self)
            if outer is not None:
                # Entered from an arranged collection: read its trace, arrange nothing.
                self._arranged[by_self] = outer.enter(self.scope, name)
                self._forget_if_undone(by_self)
        if by_self not in self._arranged:
            label = name or ("arrange_by_self" if by_self else "arrange_by_key")
            node = Node(self.dataflow, self.scope, label, "arrange", [self.node],
                        lambda w, ops: Arrange(by_self, node.name, users=tuple(node.users)),
                        exchange=_self_key if by_self else _pair_key)
            self._arranged[by_self] = Arranged(self, node, by_self)
            self._forget_if_undone(by_self)
        arranged = self._arranged[by_self]
        if user is not None and user not in arranged.node.users:
            # Errors about its records name the operators the user called, not it.
            arranged.node.users.append(user)
        return arranged

    def _keyed(self, what: str) -> Arranged:
        """The arrangement by key that `what` (join, reduce, min ...) reads."""
        return self._arrange(False, None, user=what)

    def join(self, other: Collection | Arranged, name: str | None = None) -> Collection:
        """`(k, a)` and `(k, b)` give `(k, (a, b))` at the join of their times."""
        self._same_scope(other, "join")
        return self._keyed(name or "join").join(other, name=name)

    def join_map(self, other: Collection | Arranged, logic: Callable[[Any, Any, Any], Any],
                 name: str | None = None) -> Collection:
        """`(k, a)` and `(k, b)` give `logic(k, a, b)`."""
        self._same_scope(other, "join_map")
        arguments.function(logic, "logic", "join_map")
        return self._keyed(name or "join_map").join_map(other, logic, name=name)

    def join_core(self, other: Collection | Arranged,
                  logic: Callable[[Any, Any, Any], Iterable], name: str | None = None) -> Collection:
        """`(k, a)` and `(k, b)` give every element of `logic(k, a, b)`."""
        self._same_scope(other, "join_core")
        arguments.function(logic, "logic", "join_core")
        return self._keyed(name or "join_core").join_core(other, logic, name=name)

    def semijoin(self, keys: Collection | Arranged, name: str | None = None) -> Collection:
        """The `(k, v)` records whose key is in `keys` (multiplicities multiply:
        `keys` should be distinct)."""
        self._same_scope(keys, "semijoin")
        return self._keyed(name or "semijoin").semijoin(keys, name=name)

    def antijoin(self, keys: Collection | Arranged, name: str | None = None) -> Collection:
        """The `(k, v)` records whose key is not in `keys` (`keys` should be distinct)."""
        self._same_scope(keys, "antijoin")
        label = name or "antijoin"
        return self.concat(self.semijoin(keys, name=label).negate(), name=label)

    # -- reduce family ------------------------------------------------------------
    def reduce(self, logic: Callable[[Any, list], Iterable[tuple]],
               name: str | None = None) -> Collection:
        """Per key, `logic(key, [(value, count)])` gives `[(output, diff)]`; records
        `(key, output)` result."""
        arguments.function(logic, "logic", "reduce")
        return self._keyed(name or "reduce").reduce(logic, name=name)

    def count(self, name: str | None = None) -> Collection:
        """`(x, n)` for each record `x` present `n` times (`map(key).count()` counts keys)."""
        return self._arrange(True, None, name or "count").reduce(red.count_logic,
                                                                 name=name or "count")

    def sum(self, name: str | None = None) -> Collection:
        """`(k, s)` with `s` the sum of the values of key `k`, times their counts."""
        return self._keyed(name or "sum").reduce(red.sum_logic, name=name or "sum")

    def min(self, name: str | None = None) -> Collection:
        """`(k, v)` with `v` the least value of key `k`."""
        return self._keyed(name or "min").reduce(red.min_logic, name=name or "min")

    def max(self, name: str | None = None) -> Collection:
        """`(k, v)` with `v` the greatest value of key `k`."""
        return self._keyed(name or "max").reduce(red.max_logic, name=name or "max")

    def distinct(self, name: str | None = None) -> Collection:
        """Each record once if its count is positive (see `operators.reduce.distinct_logic`)."""
        out = self._arrange(True, None, name or "distinct").reduce(red.distinct_logic,
                                                                   name=name or "distinct")
        return out.map(_pair_key, name="distinct.key")

    def distinct_trace(self, name: str | None = None) -> Collection:
        """The `distinct_trace` of the "Notes on DBSP" (RhizomeDB), for `Product(epoch,
        iteration)` times (the w1/w2/w3 rule);
        the same accumulations as `distinct`, reading only its input trace."""
        label = name or "distinct_trace"
        source = self.arrange_by_self()
        node = Node(self.dataflow, self.scope, label, "reduce", [source.node],
                    lambda w, ops: DistinctTrace(ops(source.node), node.name))
        return Collection(node)

    def threshold(self, f: Callable[[Any], Any], name: str | None = None) -> Collection:
        """Each record `x` with count `n` appears `f(n)` times."""
        arguments.function(f, "f", "threshold")
        out = self._arrange(True, None, name or "threshold").reduce(red.threshold_logic(f),
                                                                    name=name or "threshold")
        return out.map(_pair_key, name="threshold.key")

    # -- scopes and loops ----------------------------------------------------------
    def enter(self, scope: Scope, name: str | None = None) -> Collection:
        """This collection inside a nested `scope`, at round 0 of every outer time."""
        chain = _scope_chain(self.scope, scope, "enter")
        node = self.node
        for inner in chain:
            node = Node(self.dataflow, inner, name or "enter", "enter", [node],
                        lambda w, ops: Enter(name or "enter"))
        entered = Collection(node)
        if len(chain) == 1:
            entered._entered_from = self
        return entered

    def enter_at(self, scope: Scope, round_of: Callable[[Any], int],
                 name: str | None = None) -> Collection:
        """Like `enter`, each record entering at round `round_of(record)`."""
        chain = _scope_chain(self.scope, scope, "enter_at")
        arguments.function(round_of, "round_of", "enter_at")
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
        arguments.function(logic, "logic", "iterate")
        arguments.name(name, "iterate")
        name = name or f"iterate{next(_counter)}"
        with self.dataflow.building():
            scope = Scope(self.dataflow, self.scope, name, max_rounds, on_limit)
            variable = Variable(scope, self.enter(scope), name=name)
            try:
                result = logic(variable.collection)
            except DataflowError:
                raise
            except Exception as exc:  # noqa: BLE001 - user code, run while building
                raise UserFunctionError(f"the logic of {name} raised {type(exc).__name__}: "
                                        f"{exc}", operator=name) from exc
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
        if type(in_loop) is not bool:
            raise GraphError(f"in_loop must be True or False, not {in_loop!r}",
                             operator="capture")
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
        if other.dataflow is not self.dataflow:
            raise GraphError(f"{what}: the collections belong to different dataflows; "
                             "build both from the same Dataflow", operator=what)
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

    def _other(self, other: Collection | Arranged, what: str, by_self: bool = False) -> Arranged:
        self.collection._same_scope(other, what)
        if isinstance(other, Collection):
            return other._arrange(by_self, None, user=what)
        other._read_by(what)
        return other

    def _read_by(self, what: str) -> None:
        """Note that operator `what` reads this arrangement: errors about its records
        name the operators the user called."""
        if what not in self.node.users:
            self.node.users.append(what)

    def _join(self, other: Arranged, kind: str, logic: Any, name: str) -> Collection:
        self._read_by(name)
        left = self
        node = Node(self.dataflow, self.scope, name, "join", [left.node, other.node],
                    lambda w, ops: JoinCore(ops(left.node), ops(other.node), kind, logic,
                                            node.name))
        return Collection(node)

    def join(self, other: Collection | Arranged, name: str | None = None) -> Collection:
        """`Collection.join` against this arrangement: `(k, (a, b))` per match."""
        return self._join(self._other(other, name or "join"), "join", None, name or "join")

    def join_map(self, other: Collection | Arranged, logic: Callable, name: str | None = None
                 ) -> Collection:
        """`Collection.join_map` against this arrangement: `logic(k, a, b)` per match."""
        arguments.function(logic, "logic", "join_map")
        return self._join(self._other(other, name or "join_map"), "map", logic,
                          name or "join_map")

    def join_core(self, other: Collection | Arranged, logic: Callable,
                  name: str | None = None) -> Collection:
        """`Collection.join_core` against this arrangement: `logic(k, a, b)` yields records."""
        arguments.function(logic, "logic", "join_core")
        return self._join(self._other(other, name or "join_core"), "core", logic,
                          name or "join_core")

    def semijoin(self, keys: Collection | Arranged, name: str | None = None) -> Collection:
        """The records of this arrangement whose key is present in `keys`."""
        return self._join(self._other(keys, name or "semijoin", by_self=True), "semijoin",
                          None, name or "semijoin")

    def reduce(self, logic: Callable, name: str | None = None) -> Collection:
        """`Collection.reduce` reading this arrangement's trace."""
        arguments.function(logic, "logic", name or "reduce")
        self._read_by(name or "reduce")
        source = self
        node = Node(self.dataflow, self.scope, name or "reduce", "reduce", [self.node],
                    lambda w, ops: red.Reduce(ops(source.node), logic, node.name))
        return Collection(node)

    def enter(self, scope: Scope, name: str | None = None) -> Arranged:
        """This arrangement inside a nested `scope`: its trace read with times
        `t -> Product(t, 0)`, instead of arranging the entered collection again."""
        arranged: Arranged = self
        for inner in _scope_chain(self.scope, scope, "enter"):
            source = arranged
            label = name or f"{source.node.name}.enter"
            node = Node(self.dataflow, inner, label, "enter", [source.node],
                        lambda w, ops, source=source, label=label:
                        EnteredArrangement(ops(source.node), label))
            arranged = Arranged(Collection(node), node, self.by_self)
        return arranged

    def as_collection(self) -> Collection:
        """The arranged records as a collection again."""
        out = Collection(self.node)
        return out.map(_pair_key, name="as_collection") if self.by_self else out


class Variable:
    """A loop variable: its value at round `r + 1` is what `set` gave it at round `r`.

    `Variable(scope)` starts empty; `Variable(scope, source)` starts as `source`
    (entered at round 0), like differential dataflow's `Variable::new_from`: it feeds
    back `result - source` so that the variable equals `result` one round later.

    Attributes: `collection`, the variable's value as a `Collection` of its scope (what
    the loop body reads); `scope`, the loop scope; `source`, the starting collection or
    None.
    """

    def __init__(self, scope: Scope, source: Collection | None = None,
                 name: str | None = None) -> None:
        if not isinstance(scope, Scope) or scope.parent is None:
            raise GraphError(f"a Variable lives in a loop scope, not {scope!r}")
        if source is not None and source.scope is not scope:
            raise GraphError("the source of a Variable must be in its scope (enter it)")
        label = name or f"variable{next(_counter)}"
        self.scope = scope
        self.source = source
        with scope.dataflow.building():
            self.node = Node(scope.dataflow, scope, label, "feedback", [],
                             lambda w, ops: Feedback(scope.max_rounds, scope.on_limit, label,
                                                      loop=scope.name))
            fed = Collection(self.node)
            self.collection = (source.concat(fed, name=f"{label}.concat")
                               if source is not None else fed)
        self._set = False

    @property
    def dataflow(self) -> Any:
        """The `Dataflow` the loop belongs to."""
        return self.scope.dataflow

    def set(self, result: Collection) -> Collection:
        """Close the loop: `result` at round `r` becomes the variable at round `r + 1`."""
        if self._set:
            raise GraphError(f"Variable '{self.node.name}' set twice", operator=self.node.name)
        if result.scope is not self.scope:
            raise GraphError("Variable.set needs a collection of the variable's scope")
        self.scope.dataflow.check_building(self.scope)
        delta = result.concat(self.source.negate()) if self.source is not None else result
        self.node.inputs.append(delta.node)
        delta.node.consumers.append((self.node, 0))
        self._set = True
        return result


def _scope_chain(outer: Scope, inner: Scope, what: str) -> list[Scope]:
    """The scopes from just inside `outer` down to `inner`."""
    if not isinstance(inner, Scope):
        raise GraphError(f"{what} needs a loop's scope (the .scope of a collection inside "
                         f"an iterate, or of a Variable), got {inner!r}", operator=what)
    if inner.dataflow is not outer.dataflow:
        raise GraphError(f"{what}: the scope belongs to a different dataflow", operator=what)
    chain = []
    s: Scope | None = inner
    while s is not None and s is not outer:
        chain.append(s)
        s = s.parent
    if s is None:
        raise GraphError(f"cannot enter scope {inner.name} from {outer.name}: not nested in it",
                         operator=what)
    return list(reversed(chain))


def _builder(method: Callable) -> Callable:
    """Run a build call inside `Graph.building`: if it raises, every node it made
    is taken out again, so a failed call leaves the graph exactly as it was."""
    @functools.wraps(method)
    def build(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.dataflow.building():
            return method(self, *args, **kwargs)
    return build


# Every public method of these classes builds: one guard for all of them.
for _cls in (Collection, Arranged):
    for _name, _method in list(vars(_cls).items()):
        if not _name.startswith("_") and callable(_method):
            setattr(_cls, _name, _builder(_method))
del _cls, _name, _method
Variable.set = _builder(Variable.set)               # type: ignore[method-assign]

