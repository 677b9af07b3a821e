"""Why is this record in my output?  One-off explanations of a capture's records.

Following Chothia, Liagouris, McSherry, Roscoe, "Explaining Outputs in Modern Data
Analytics" (VLDB 2016): an explanation of an output record is a subset of the input
that reproduces it, found by walking the dataflow *backward* from the record,
operator by operator, each demanding of its inputs what its output record needs.
This module isolates that walk and the replay that checks it; it leaves out the
maintained form (a backward dataflow kept up to date as inputs change).

How.  The dataflow's upstream cone of the capture is copied (`replicate`: the same
nodes, built by the same factories, with a capture on every node, loop nodes
included, so that each loop's rounds are seen: the "witness clone" of differential
dataflow's explanation rewrite, `interactive/src/explain/`) and fed the inputs accumulated at the
asked time `t`, all at the least time: by the accumulation law its output there is
the original's at `t`.  Then demands travel backward, a demand being "record `x` of
node `N`, accumulated at time `s`" (`s` is the least time outside loops, and
`Product(outer, round)` inside them):

* linear (map, filter, flat_map, explode, negate, inspect): the input records whose
  image holds `x` (the operator applied to each record alone);
* concat: `x` in every input holding it; arrange, consolidate, capture: `x` itself;
* join, join_map, join_core, semijoin: both sides of every matching pair giving `x`;
* reduce, count, sum, distinct, threshold, `distinct_trace`: the whole group of
  `x`'s key (the output is a function of the group), but for `min` / `max` only the
  records holding the winning value or a better one (those cancel in the full
  run; they alone give the same winner);
* enter: `x` outside, at the outer time; feedback (a loop variable): `x` one round
  earlier; leave: `x` inside at the *last round it changed* (for a record that only
  appears, the round it first appears, so reachability explains a node by the edges
  of its shortest paths from the roots, not by the whole reached graph);
* any other operator (worst-case optimal joins): everything its inputs hold then.

Every rule reads an input's *support* at `s`, not its accumulation: the records
with any update at or before `s` there, cancelled ones included.  A record that
cancels to zero in the full run (`x.antijoin(y)` holding `x`'s record and its
negation) may not cancel on a subset of the input, so a demand must reach it too:
`x.antijoin(y).concat(x)` explains `x`'s record by `y`'s as well, else the replay
would give it twice.

At the inputs the demands are the explanation, each record with its multiplicity
at `t`.  Outputs of other keys and updates after `t` never enter it.  Operators that
move records in time (`delay`, `join_function`) have no backward rule here and are
refused.  `Explanation.check()` replays a fresh copy on the explanation alone.
"""

from __future__ import annotations

from typing import Any, Iterable

from lattice import Product, join, less_equal
from ddflow.graph import Node, Scope, cone
from operators.capture import CaptureOp
from ddflow.errors import GraphError, TimeError

#: Linear stages with no backward rule here: they move records in time.
_TIMED_STAGES = ("delay", "join_function")


class Explanation:
    """The input records that reproduce `record` at `time` in a capture's output.

    `inputs`: for each input of the dataflow upstream of the capture, the records
    needed, `{data: multiplicity at time}`, keyed by the name given to
    `new_collection` (see `input_labels`: inputs sharing a name are told apart by
    `(name, position)`); `multiplicity`: the record's multiplicity in the output at
    `time`."""

    def __init__(self, capture: Any, record: Any, time: Any, multiplicity: Any,
                 inputs: dict[str, dict[Any, Any]]) -> None:
        self.capture = capture
        self.record = record
        self.time = time
        self.multiplicity = multiplicity
        self.inputs = inputs

    def size(self) -> int:
        """Records in the explanation, over all inputs."""
        return sum(len(recs) for recs in self.inputs.values())

    def check(self) -> bool:
        """Run a fresh copy of the dataflow on the explanation alone; True when the
        record comes out with the multiplicity the original capture holds at `time`
        (read from the capture itself, not from the copy the walk ran on, so a wrong
        copy cannot vouch for itself); a `GraphError` says otherwise."""
        got = replay(self.capture, self.inputs).get(self.record, 0)
        want = self.capture.at(self.time).get(self.record, 0)
        if got != want:
            raise GraphError(f"the explanation of {self.record!r} at {self.time!r} gives "
                             f"multiplicity {got!r}, not {want!r}",
                             operator=self.capture.node.name, record=self.record,
                             time=self.time)
        return True

    def __repr__(self) -> str:
        parts = ", ".join(f"{name!s}: {len(recs)}" for name, recs in self.inputs.items())
        return (f"Explanation({self.record!r} x{self.multiplicity} at {self.time!r}; "
                f"{parts})")


# -- the copy ---------------------------------------------------------------------

def input_labels(nodes: Iterable[Any]) -> dict[int, Any]:
    """`{id(input node): label}` for the inputs among `nodes`: its name, or, when
    several inputs share that name (`new_collection` allows it), `(name, position)`,
    position counting those inputs in the dataflow's order from 0.  Explanations key
    inputs by these labels, so that each stands for one node, never for two."""
    inputs = [n for n in nodes if n.kind == "input"]
    names: dict[str, int] = {}
    for n in inputs:
        names[n.name] = names.get(n.name, 0) + 1
    labels, seen = {}, {}
    for n in inputs:
        if names[n.name] == 1:
            labels[id(n)] = n.name
        else:
            labels[id(n)] = (n.name, seen.get(n.name, 0))
            seen[n.name] = seen.get(n.name, 0) + 1
    return labels


def replicate(target: Any, contents: dict[Any, dict], *, observe: bool, reader: type
              ) -> tuple[Any, dict[int, Any]]:
    """A fresh dataflow holding a copy of the cone of node `target` (a capture's, or
    any collection's), its inputs fed `contents` (`{input label: {data:
    multiplicity}}`, labels from `input_labels` of the cone) at the least time and
    closed, and run.  With `observe`, every copied node has a
    capture of its own (in loops too), else `target` alone; `reader` is the class
    reading them (`ddflow.capture.Capture`).  Returns the copy and
    `{id(original node): capture of its copy}`."""
    # The copy is made of the original's own classes (its `Dataflow`, the reader of
    # its captures): this module sits beside them in the front door, below neither.
    original = target.dataflow
    Dataflow = type(original)
    nodes = cone(target)
    labels = input_labels(nodes)
    for n in nodes:
        for stage in getattr(n, "stages", ()):
            if stage[0] in _TIMED_STAGES:
                raise GraphError(f"explain: '{n.name}' uses {stage[0]}, which moves "
                                 "records in time: explanations do not follow it",
                                 operator=n.name)
    copy = Dataflow(original.time, fuse=False)
    scopes: dict[int, Any] = {id(original.root): copy.root}

    def scope_of(s: Any) -> Any:
        if id(s) not in scopes:
            scopes[id(s)] = Scope(copy, scope_of(s.parent), s.name, s.max_rounds, s.on_limit)
        return scopes[id(s)]

    made: dict[int, Any] = {}
    sessions = []

    def lookup_for(ops: Any) -> Any:
        return lambda n: ops(made[id(n)])

    for n in nodes:
        if n.kind == "input":
            session, coll = copy.new_collection(n.name)
            made[id(n)] = coll.node
            sessions.append((session, contents.get(labels[id(n)], {})))
            continue
        inputs = [] if n.kind == "feedback" else [made[id(p)] for p in n.inputs]
        factory = n.factory
        made[id(n)] = Node(copy, scope_of(n.scope), n.name, n.kind, inputs,
                           lambda w, ops, factory=factory: factory(w, lookup_for(ops)),
                           n.exchange)
    for n in nodes:
        if n.kind == "feedback":
            for p in n.inputs:
                made[id(n)].inputs.append(made[id(p)])
                made[id(p)].consumers.append((made[id(n)], 0))
    watched = nodes if observe else [target]
    caps: dict[int, Any] = {}
    for n in watched:
        target = made[id(n)]
        if n.kind == "capture":
            target = target.inputs[0]
        node = Node(copy, target.scope, f"{n.name}.observed", "capture", [target],
                    lambda w, ops: CaptureOp("observed"))
        caps[id(n)] = reader(copy, node)
    least = copy.root.minimum
    for session, recs in sessions:
        for data, mult in recs.items():
            session.update_at(data, least, mult)
        session.close()
    copy.run()
    return copy, caps


def replay(capture: Any, contents: dict[Any, dict]) -> dict:
    """`capture`'s output at the least time of a fresh copy fed only `contents`."""
    copy, caps = replicate(capture.node, contents, observe=False, reader=type(capture))
    return caps[id(capture.node)].at(copy.root.minimum)


def contents_at(node: Any, time: Any, reader: type) -> dict:
    """The accumulation at `time` of any collection of the root scope (its node):
    read from the input itself, or from a copy of its cone fed the inputs there (read
    by `reader`, `ddflow.capture.Capture`)."""
    if node.kind == "input":
        return input_contents(node, time)[node.name]     # the cone is the input alone
    copy, caps = replicate(node, input_contents(node, time), observe=False, reader=reader)
    return caps[id(node)].at(copy.root.minimum)


# -- the backward walk ------------------------------------------------------------

def input_contents(node: Any, time: Any) -> dict[Any, dict]:
    """The accumulation at `time` of every input upstream of `node`, by label
    (`input_labels`)."""
    df = node.dataflow
    nodes = cone(node)
    labels = input_labels(nodes)
    out = {}
    for n in nodes:
        if n.kind == "input":
            session = next(s for s in df.sessions if s.node is n)
            out[labels[id(n)]] = session.contents(time)
    return out


def explain(capture: Any, record: Any, time: Any) -> Explanation:
    """The one-off explanation of `record` at `time` (see the module docstring)."""
    contents = input_contents(capture.node, time)
    copy, caps = replicate(capture.node, contents, observe=True, reader=type(capture))
    least = copy.root.minimum
    out = caps[id(capture.node)].at(least)
    mult = out.get(record, 0)
    if not mult:
        raise GraphError(f"explain: {record!r} is not in '{capture.node.name}' at "
                         f"{time!r}", operator=capture.node.name, record=record, time=time)
    walk = _Walk(copy, caps)
    demands = walk.run(capture.node, record, least)
    labels = input_labels(cone(capture.node))
    inputs: dict[Any, dict] = {label: {} for label in contents}
    for n, recs in demands.items():
        label = labels[id(n)]
        for data in recs:
            inputs[label][data] = contents[label][data]
    return Explanation(capture, record, time, mult, inputs)


class _Walk:
    """Demands travelling backward over the observed copy."""

    def __init__(self, copy: Any, caps: dict[int, Any]) -> None:
        self.copy = copy
        self.caps = caps
        self._support: dict[tuple, list] = {}
        self._raw: dict[int, list] = {}
        self._updates: dict[int, list] = {}
        self._lineage: dict[tuple, dict] = {}

    def updates(self, node: Any) -> list:
        u = self._updates.get(id(node))
        if u is None:
            u = self._updates[id(node)] = self.caps[id(node)].updates
        return u

    def support(self, node: Any, time: Any) -> list:
        """The records of `node` with any update at or before `time`, as the copy's
        operators sent them (before consolidation: cancelled records included), in
        first-seen order."""
        key = (id(node), time)
        out = self._support.get(key)
        if out is None:
            raw = self._raw.get(id(node))
            if raw is None:
                cap_node = self.caps[id(node)].node
                raw = self._raw[id(node)] = self.copy.engine.captured_since(cap_node, None)[0]
            out = self._support[key] = list(dict.fromkeys(
                d for d, s, _r in raw if less_equal(s, time)))
        return out

    def ops(self, node: Any) -> Any:
        # The copy's operator for an original node: for its parameters (join kind and
        # logic, reduce logic), never its state.
        cap_node = self.caps[id(node)].node
        return self.copy.engine.operators(cap_node.inputs[0])[0]

    def run(self, node: Any, record: Any, time: Any) -> dict:
        found: dict = {}
        seen: set = set()
        work = [(node, record, time)]
        while work:
            n, x, t = work.pop()
            if (id(n), x, t) in seen:
                continue
            seen.add((id(n), x, t))
            if n.kind == "input":
                found.setdefault(n, set()).add(x)
                continue
            work.extend(self.demand(n, x, t))
        return found

    def demand(self, n: Any, x: Any, t: Any) -> Iterable[tuple]:
        kind = n.kind
        ins = n.inputs
        if kind in ("capture", "consolidate"):
            return [(ins[0], x, t)]
        if kind == "arrange":
            op = self.ops(n)
            return [(ins[0], x[0] if op.by_self else x, t)]
        if kind == "concat":
            return [(p, x, t) for p in ins if x in self.support(p, t)]
        if kind == "linear":
            return [(ins[0], y, t) for y in self.linear_sources(n, x, t)]
        if kind == "enter":
            return [(ins[0], x, t[0])]
        if kind == "feedback":
            if t[1] == 0:
                return []
            return [(ins[0], x, Product(t[0], t[1] - 1))]
        if kind == "leave":
            return [(ins[0], x, self.settled(ins[0], x, t))]
        if kind == "join":
            return self.join_sources(n, x, t)
        if kind == "reduce":
            return self.group_sources(n, x, t)
        # No rule: everything the inputs hold then (sound, not concise).
        return [(p, y, t) for p in ins for y in self.support(p, t)]

    def linear_sources(self, n: Any, x: Any, t: Any) -> list:
        key = (id(n), t)
        lineage = self._lineage.get(key)
        if lineage is None:
            lineage = self._lineage[key] = {}
            op = n.factory(0, lambda _n: None)      # a fresh linear: no state read
            for y in self.support(n.inputs[0], t):
                op.on_input(0, [(y, t, 1)])
                for z, _s, r in op.take_output():
                    if r:
                        lineage.setdefault(z, []).append(y)
        return lineage.get(x, [])

    def join_sources(self, n: Any, x: Any, t: Any) -> list:
        key = (id(n), t)
        lineage = self._lineage.get(key)
        if lineage is None:
            lineage = self._lineage[key] = {}
            op = self.ops(n)
            left, right = n.inputs
            by_key: dict = {}
            for rec in self.support(right, t):
                by_key.setdefault(rec[0], []).append(rec)
            for a in self.support(left, t):
                for b in by_key.get(a[0], ()):
                    for z in _join_outputs(op, a, b):
                        lineage.setdefault(z, []).append((a, b))
        left, right = n.inputs
        out = []
        for a, b in lineage.get(x, ()):
            out.append((left, a, t))
            out.append((right, b, t))
        return out

    def group_sources(self, n: Any, x: Any, t: Any) -> list:
        from operators import reduce as red
        source = n.inputs[0]
        op = self.ops(n)
        logic = getattr(op, "logic", None)
        # A reduce gives (key, output); `distinct_trace` gives the record itself.
        k = x[0] if logic is not None else x
        group = [rec for rec in self.support(source, t) if rec[0] == k]
        # The winner's holders, and any record that would beat it were it not
        # cancelled in the full run (it may not be on a subset).
        if logic is red.min_logic:
            group = [rec for rec in group if rec[1] <= x[1]]
        elif logic is red.max_logic:
            group = [rec for rec in group if rec[1] >= x[1]]
        return [(source, rec, t) for rec in group]

    def settled(self, inner: Any, x: Any, t: Any) -> Any:
        """The round from which `x`'s accumulation inside the loop no longer changes
        at outer time `t`: the last round of an update of `x` there."""
        last = 0
        for y, s, r in self.updates(inner):
            if y == x and r and less_equal(s[0], t):
                last = max(last, s[1])
        return Product(t, last)


def _join_outputs(op: Any, a: tuple, b: tuple) -> list:
    k = a[0]
    if op.kind == "join":
        return [(k, (a[1], b[1]))]
    if op.kind == "semijoin":
        return [a]
    if op.kind == "map":
        return [op.logic(k, a[1], b[1])]
    return list(op.logic(k, a[1], b[1]))


def latest_final(capture: Any) -> Any:
    """`time=None` of `Capture.explain`: the latest time whose answer is final, for
    int times (one before the frontier; every captured time when it is empty).  A
    partially ordered root has no one latest final time: ask for one."""
    frontier = capture.frontier
    least = capture.node.scope.minimum
    if type(least) is int:
        if frontier.is_empty():
            return max((u[1] for u in capture.updates), default=least)
        low = min(frontier.elements)
        if low == least:
            raise TimeError(f"explain: nothing of '{capture.node.name}' is final yet: "
                            "advance the inputs and run()", operator=capture.node.name)
        return low - 1
    if frontier.is_empty():
        top = least
        for u in capture.updates:
            top = join(top, u[1])
        return top
    raise TimeError(f"explain: the times of '{capture.node.name}' are partially ordered, "
                    "so there is no one latest final time: give time=...",
                    operator=capture.node.name)


def latest_final_of(df: Any) -> Any:
    """The latest time every input of `df` has made final, for int times (one before
    the least open input's time; with all closed, the latest time any received)."""
    least = df.root.minimum
    if type(least) is not int:
        raise TimeError("the dataflow's times are partially ordered, so there is no one "
                        "latest final time: give time=...")
    open_times = [s.time for s in df.sessions if not s.closed]
    if open_times:
        if min(open_times) == least:
            raise TimeError("nothing is final yet: advance the inputs and run()")
        return min(open_times) - 1
    # `history_updates()`: an input keeps its compacted history in columns, and
    # `history` then holds only what arrived since.
    times = [u[1] for s in df.sessions for op in df.engine.operators(s.node)
             for u in (op.history_updates() if hasattr(op, "history_updates")
                       else getattr(op, "history", ()))]
    return max(times, default=least)


__all__ = ["Explanation", "cone", "contents_at", "explain", "input_labels", "latest_final",
           "latest_final_of", "replay", "replicate"]
