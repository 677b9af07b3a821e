"""Why is this record in my output?  Explanations of a capture's records.

Following Chothia, Liagouris, McSherry, Roscoe, "Explaining Outputs in Modern Data
Analytics" (VLDB 2016): an explanation of an output record is a subset of the input
that reproduces it, found by a *backward* dataflow running beside the forward one,
each operator demanding of its inputs what its demanded output records need (the
rules: `ddflow.explain_flow`).  This module gives it two faces over that one
construction:

* `MaintainedExplanation` (`Dataflow.explain(capture)`): the backward dataflow
  built in the capture's own dataflow, its questions an input session, its
  explanations captures maintained by every `run()`;
* `explain` (`Capture.explain(record, time)`): the one-question convenience.  The
  upstream cone of the capture is copied (`replicate`: the same nodes, built by the
  same factories) and fed the inputs accumulated at `time`, all at the least time
  (by the accumulation law its output there is the original's at `time`); the
  backward dataflow is built on the copy with the one question, and read.

Both key the explanation by input (`input_labels`), each demanded record with its
multiplicity at the time.  Outputs of other keys and updates after the time never
enter it.  `Explanation.check()` replays a fresh copy on the explanation alone and
compares with the original capture.
"""

from __future__ import annotations

from typing import Any, Iterable

import attrs

from lattice import join
from ddflow.errors import DataError, GraphError, TimeError
from ddflow.explain_flow import TIMED_STAGES, BackwardFlow
from ddflow.graph import Node, Scope, cone
from operators.capture import CaptureOp


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


class MaintainedExplanation:
    """The explanation of a capture's records, maintained as a dataflow in the
    capture's own dataflow (`Dataflow.explain`; see `ddflow.explain_flow`).

    `questions`: an `InputSession` of the records to explain (insert, remove,
    `advance_to` and `close` it like any input: an explanation at a time is final
    once the questions are too).  `captures`: per input upstream of the capture
    (labelled as `Explanation.inputs`), a `Capture` of records `(question, input
    record)`: what each question present at a time demands, with the input record's
    multiplicity then, updated at every `run()`.  `explanation(record, time)` reads
    one question's (with its `check()`), `inputs(time)` all of them together;
    `work()` counts what maintaining it cost."""

    def __init__(self, capture: Any) -> None:
        self.capture = capture
        df = capture.dataflow
        mark = len(df.nodes)
        with df.building():
            self.questions, asked = df.new_collection(f"{capture.node.name}.questions")
            flow = BackwardFlow(capture.node, asked)
            labels = input_labels(flow.nodes)
            self.captures = {labels[id(n)]: flow.inputs[id(n)].capture(
                f"explain.{labels[id(n)]}") for n in flow.nodes if n.kind == "input"}
            # Read back through a capture, which every engine serves (a BSP engine
            # keeps an input's contents on its shards).
            self._asked = asked.capture("explain.asked")
        self._collection = type(asked)
        #: The nodes of the explanation (those of its questions input included).
        self.nodes = df.nodes[mark:]
        #: Set by `drop()`: the explanation is no longer maintained nor readable.
        self.dropped = False

    def drop(self) -> None:
        """Stop maintaining the explanation: its questions session is closed and its
        operators dropped from the dataflow (`Dataflow.drop`), so that a `run()`
        does no more work for it and the arrangements it read stop holding back
        compaction for it.  Reading it afterwards raises a `GraphError`; `work()`
        gives what it cost until then.  `Dataflow.drop` of the capture it explains
        drops it too; dropping twice does nothing."""
        if self.dropped:
            return
        df = self.capture.dataflow
        # A run lets dropped operators' counters go: what they cost is kept here.
        self._spent = self.work()
        if not self.questions.closed:
            self.questions.close()
        for cap in [*self.captures.values(), self._asked]:
            if not cap.node.dropped:
                df.drop(cap)
        # Collections of the backward flow nothing reads (a support no rule asked
        # for) were outputs of their own: dropped too, until none is left.
        while True:
            dangling = [n for n in self.nodes if not n.dropped and n.kind != "input"
                        and all(c.dropped for c, _p in n.consumers)]
            if not dangling:
                break
            df.drop(self._collection(dangling[0]))
        self.dropped = True
        if self in df.explanations:
            df.explanations.remove(self)

    def _time(self, time: Any) -> Any:
        if self.dropped:
            name = self.capture.node.name
            raise GraphError(f"the explanation of '{name}' was dropped (drop()): it has "
                             "no answers any more; build it again to ask again",
                             operator=name)
        return latest_final_of(self.capture.dataflow) if time is None else time

    def asked(self, time: Any = None) -> dict:
        """The questions present at `time` (`{record: multiplicity}`)."""
        return dict(self._asked.at(self._time(time)))

    def explanation(self, record: Any, time: Any = None) -> Explanation:
        """The explanation of question `record` at `time` (default: the latest final
        time), as `Capture.explain` gives it, read from the maintained captures.
        A `GraphError` when `record` is not asked then or not in the capture's output
        then; a `NotFinalError` when `time` is not final."""
        time = self._time(time)
        name = self.capture.node.name
        try:
            asked = self.asked(time).get(record, 0)
        except TypeError:
            asked = 0           # unhashable: never asked
        if not asked:
            raise GraphError(f"explain: {record!r} is not a question of '{name}' at "
                             f"{time!r}: insert it into the questions first",
                             operator=name, record=record, time=time)
        if asked < 0:
            # Removed more often than inserted: the demand of a negative question
            # cancels the positive ones, so what the captures hold explains nothing.
            raise GraphError(f"explain: {record!r} is asked {asked!r} times at {time!r} "
                             f"(removed from the questions of '{name}' more often than "
                             "inserted): only a question asked a positive number of "
                             "times has an explanation", operator=name, record=record,
                             time=time)
        inputs = {label: {x: m for (q, x), m in cap.at(time).items() if q == record}
                  for label, cap in self.captures.items()}
        mult = self.capture.at(time).get(record, 0)
        if not mult:
            raise GraphError(f"explain: {record!r} is not in '{name}' at {time!r}",
                             operator=name, record=record, time=time)
        return Explanation(self.capture, record, time, mult, inputs)

    def inputs(self, time: Any = None) -> dict[Any, dict]:
        """The explanation of every question at `time` together: `{input label:
        {data: multiplicity at time}}` (each question as `explanation` reads it;
        a question asked a negative number of times, having none, is left out)."""
        time = self._time(time)
        out: dict[Any, dict] = {label: {} for label in self.captures}
        for record, asked in self.asked(time).items():
            if asked < 0:
                continue
            for label, recs in self.explanation(record, time).inputs.items():
                out[label].update(recs)
        return out

    def work(self) -> int:
        """Records processed by the explanation's operators so far (records in plus
        trace records read, as `Dataflow.total_work` counts them)."""
        if self.dropped:
            return self._spent
        ids = {n.id for n in self.nodes}
        return sum(row["records_in"] + row["work"]
                   for row in self.capture.dataflow.metrics() if row["id"] in ids)


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


def replicate(target: Any, contents: dict[Any, dict], *, observe: bool, reader: type,
              prepare: Any = None, time: Any = None) -> tuple[Any, dict[int, Any]]:
    """A fresh dataflow holding a copy of the cone of node `target` (a capture's, or
    any collection's), its inputs fed `contents` (`{input label: {data:
    multiplicity}}`, labels from `input_labels` of the cone) at the least time and
    closed, and run.  With `observe`, every copied node has a
    capture of its own (in loops too), else `target` alone; `reader` is the class
    reading them (`ddflow.capture.Capture`); `prepare(copy, captures)`, when given,
    builds more on the copy before it runs; `time`, the copy's least time (default:
    the original's).  Returns the copy and `{id(original node): capture of its
    copy}`."""
    # The copy is made of the original's own classes (its `Dataflow`, the reader of
    # its captures): this module sits beside them in the front door, below neither.
    original = target.dataflow
    Dataflow = type(original)
    nodes = cone(target)
    labels = input_labels(nodes)
    for n in nodes:
        for stage in getattr(n, "stages", ()):
            if stage[0] in TIMED_STAGES:
                raise GraphError(f"explain: '{n.name}' uses {stage[0]}, which moves "
                                 "records in time: explanations do not follow it",
                                 operator=n.name)
    copy = Dataflow(original.time if time is None else time, fuse=False)
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
        if n.conjunctive is not None:       # the plan's description, over the copies
            made[id(n)].conjunctive = attrs.evolve(
                n.conjunctive, sources=tuple(made[id(s)] for s in n.conjunctive.sources))
    watched = nodes if observe else [target]
    caps: dict[int, Any] = {}
    for n in watched:
        target = made[id(n)]
        if n.kind == "capture":
            target = target.inputs[0]
        node = Node(copy, target.scope, f"{n.name}.observed", "capture", [target],
                    lambda w, ops: CaptureOp("observed"))
        caps[id(n)] = reader(copy, node)
    if prepare is not None:
        prepare(copy, caps)
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
    sessions = [next(s for s in df.sessions if s.node is n) for n in nodes
                if n.kind == "input"]
    away = [s.name for s in sessions if df.compiled and not s.readable()]
    if away:
        # A one-off copy starts from the inputs' contents, which an engine keeping
        # them on its shards hands back only through `fetch` (BSP, Spark); the
        # maintained explanation runs beside the forward side, on every engine.
        engine = type(df.engine).__name__
        raise DataError(f"explain: the contents of input(s) {', '.join(map(repr, away))} "
                        f"are kept on the {engine}'s shards, which do not hand them back, "
                        f"so a one-off explanation of '{node.name}' cannot start from them: "
                        "use df.explain(capture), the maintained explanation, which runs "
                        "on every engine", operator=node.name, time=time)
    return {labels[id(s.node)]: s.contents(time) for s in sessions}


class Asking:
    """The copy a capture's one-off explanations at one time are read from: the
    cone fed the inputs of that time, with a backward flow whose questions come one
    per (int) time of the copy, each read at its own; demands are tagged by their
    question, so an earlier one never shows in a later one's answer.  Building and
    compiling the copy is most of an explanation's cost: a second record at the
    same time is one small incremental run."""

    def __init__(self, capture: Any, time: Any) -> None:
        self.time = time
        self.contents = input_contents(capture.node, time)
        built: dict = {}

        def ask(copy: Any, caps: dict) -> None:
            observed = caps[id(capture.node)]
            session, questions = copy.new_collection("explain.questions")
            flow = BackwardFlow(observed.node, questions)
            built["session"] = session
            built["inputs"] = {id(n): flow.inputs[id(n)].capture("explain.input")
                               for n in flow.nodes if n.kind == "input"}
            built["labels"] = input_labels(flow.nodes)

        # The copy runs at int times whatever the original's: its inputs hold one
        # time's contents, and the questions take one time each.
        self.copy, caps = replicate(capture.node, self.contents, observe=False,
                                    reader=type(capture), prepare=ask, time=0)
        self.output = caps[id(capture.node)].at(0)
        self.session = built["session"]
        self.inputs = built["inputs"]
        self.labels = built["labels"]
        self.answers: dict = {}

    def explain(self, capture: Any, record: Any) -> Explanation:
        try:
            mult = self.output.get(record, 0)
        except TypeError:
            mult = 0            # unhashable: in no output
        if not mult:
            raise GraphError(f"explain: {record!r} is not in '{capture.node.name}' at "
                             f"{self.time!r}", operator=capture.node.name, record=record,
                             time=self.time)
        if record not in self.answers:
            t = self.session.time
            self.session.update_at(record, t, 1)
            self.session.advance_to(t + 1)
            self.copy.run()
            inputs: dict[Any, dict] = {label: {} for label in self.contents}
            for node_id, cap in self.inputs.items():
                inputs[self.labels[node_id]] = {x: m for (q, x), m in cap.at(t).items()
                                                if q == record}
            self.answers[record] = inputs
        inputs = {label: dict(recs) for label, recs in self.answers[record].items()}
        return Explanation(capture, record, self.time, mult, inputs)


def explain(capture: Any, record: Any, time: Any) -> Explanation:
    """The one-off explanation of `record` at `time`: the maintained one
    (`ddflow.explain_flow.BackwardFlow`) built on a copy of the dataflow fed the
    inputs accumulated at `time` (`Asking`), asked this one question.  (The copy is
    not kept: `Capture.explain` keeps it on the capture, for the next record asked
    at the same time.)"""
    return Asking(capture, time).explain(capture, record)


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


__all__ = ["Asking", "Explanation", "MaintainedExplanation", "cone", "contents_at", "explain", "input_labels", "latest_final",
           "latest_final_of", "replay", "replicate"]
