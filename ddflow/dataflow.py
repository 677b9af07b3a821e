"""The front door: `Dataflow`, a graph that runs (input sessions: `ddflow.input`).

A `Dataflow` is a graph of nodes (`ddflow.graph`) built through the `Collection` API
and run by an engine (`LocalEngine` by default).  It owns what users touch: `new_collection()`
returns an `InputSession` to feed `(data, time, diff)` updates and a `Collection`
to build on; `capture()` records an output (read through `ddflow.capture.Capture`,
re-exported here); `run()` does all the work the input frontiers allow.  Nothing
here computes: operators live in `operators/`, the scheduling in `ddflow/engine/`.

Boundary errors (bad time, unhashable data, closed session ...) are raised by the
session before anything is recorded, so the dataflow is unchanged.  Errors during
`run()` roll the whole step back (every operator's state, the captures and the
sessions' pending updates), so the dataflow stays usable: fix or retract the
offending input and run again.

>>> import ddflow
>>> df = ddflow.Dataflow()
>>> words_in, words = df.new_collection()
>>> counts = words.count().capture()
>>> words_in.insert("a"); words_in.insert("b"); words_in.insert("a")
>>> words_in.advance_to(1); df.run()
>>> counts.updates
[(('a', 2), 0, 1), (('b', 1), 0, 1)]
>>> words_in.remove("a"); words_in.advance_to(2); df.run()
>>> counts.at(1)
{('a', 1): 1, ('b', 1): 1}
"""

from __future__ import annotations

import contextlib
import gc
import warnings
from typing import Any, Iterator

from lattice import as_time, is_time, join, minimum, sort_key
from ddflow import graph, kept_input, viz
from ddflow.blame import blame
from ddflow.capture import Capture
from ddflow.collection import Collection
from ddflow.engine.local import LocalEngine
from ddflow.errors import (DataError, DataflowError, GraphError, NothingDiscardedWarning,
                           StalledRunWarning, TimeError)
from ddflow.graph import Graph, Node, Scope  # noqa: F401 - the graph model, re-exported
from ddflow.input import InputOp, InputSession
from operators.capture import CaptureOp  # noqa: F401 - re-exported from the front door


#: Whether a run holds back Python's full (oldest-generation) garbage collections
#: while the engine works.  A run allocates millions of small tuples (updates,
#: times, trace entries) that live on in traces, and every full collection walks
#: all of them: at 100k-300k nodes 42% of a graph load's CPU went to the collector
#: (17-26 full collections, each longer than the last: what grew faster than the
#: data at the large scale of `benchmarks/bench_graph_workloads.py`).  Young
#: collections go on (`RUN_THRESHOLDS`), so cycles a user function makes are still
#: freed during a long run (turning the collector off instead held 550 MB against
#: 141 MB for 200k cyclic records, a review); the thresholds are put back after the
#: run, and a collector the caller turned off is left alone.
PAUSE_GC = True
#: `gc.set_threshold` during a run: a young collection every 100k allocations, no
#: full one (measured on cc at 30k nodes: 85% of the gain of turning it off).
RUN_THRESHOLDS = (100_000, 1_000, 1 << 30)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    if not PAUSE_GC or not gc.isenabled():
        yield
        return
    saved = gc.get_threshold()
    gc.set_threshold(*RUN_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


class Dataflow(Graph):
    """A differential dataflow: build it with collections, feed it, run it.

    `time` is the least time of the root lattice, or the type `int`: `0` (the
    default), `Product(0, 0)` for a partially ordered root, or any user lattice's
    minimum.  `workers=W` simulates W workers with keys sharded by `shard_of`.
    `fuse=False` keeps adjacent linear operators apart (to compare).
    `timing=True` has the engine measure each operator's CPU time (`metrics()`'s
    `cpu_ns`; `logging()` turns it on too).
    """

    def __init__(self, time: Any = 0, *, workers: int = 1, engine: Any = None,
                 fuse: bool = True, timing: bool = False) -> None:
        time = _root_time(time)
        if type(fuse) is not bool:
            raise GraphError(f"fuse must be True or False, not {fuse!r}")
        if type(timing) is not bool:
            raise GraphError(f"timing must be True or False, not {timing!r}")
        super().__init__(time, fuse)
        self.sessions: list[InputSession] = []
        self.captures: list[Capture] = []
        #: The maintained explanations `explain()` built and not yet dropped.
        self.explanations: list[Any] = []
        if engine is None:
            engine = LocalEngine(workers=workers)
        else:
            _check_engine(engine)
            if workers != 1:
                raise GraphError("give workers to the engine, not to Dataflow, when passing "
                                 "an engine")
        self.engine = engine
        self._compiled = False
        self._ran = 0                   # nodes already running (built before a run())
        self._dropping = False
        #: Work done by operators since dropped (`drop`): `total_work` keeps counting
        #: it, so the total never goes down when a piece is taken away.
        self._retired_work = 0
        self._logging: Any = None       # ddflow.introspection.Logging, once asked for
        if timing:
            self._time_operators()

    @property
    def compiled(self) -> bool:
        """Whether the engine has compiled the graph (the first `run()` does)."""
        return self._compiled

    # -- building ------------------------------------------------------------
    def new_collection(self, name: str | None = None) -> tuple[InputSession, Any]:
        """A new input: `(InputSession, Collection)`."""
        name = name or f"input{len(self.sessions)}"
        node = Node(self, self.root, name, "input", [], lambda w, ops: InputOp(name))
        session = InputSession(self, node, name)
        self.sessions.append(session)
        return session, Collection(node)

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """`Graph.building`, and the sessions and captures a failed build call made
        are taken out too."""
        with super().building():
            n_captures, n_sessions = len(self.captures), len(self.sessions)

            def undo() -> None:
                del self.captures[n_captures:]
                del self.sessions[n_sessions:]
            self.on_undo(undo)
            yield

    # -- running -------------------------------------------------------------
    def run(self, progress: Any = False) -> None:
        """Do all the work the input frontiers allow.

        `progress=True` draws a `rich` progress line of the run's rounds (scheduler
        passes: a loop's back edge starts the next) and records moved, on standard
        error; a `rich.console.Console` draws it there (`ddflow.run_progress`).

        On any error the step is rolled back and the sessions keep their updates, so
        nothing is lost and nothing is half-applied.  An error of the data (a user
        function raising, a record of the wrong shape, a loop not converging) names
        the pending updates it comes from, `err.inputs` (found by re-running the step
        on parts of them, `ddflow.blame`): `df.discard(err)` (or any session's
        `discard(err)`) withdraws exactly those, and the next `run()` goes on.  An
        update an earlier run accepted at a time this run's `advance_to` completes
        (a reduce evaluates a time only once it is complete) is blamed too, listed
        in `err.accepted` as well, and `discard(err)` retracts it at its own time.
        With `err.inputs == ()` no input is to blame: the failing operator
        (`err.operator`) meets data the dataflow already holds, a piece added since
        the last run meeting what it imported (or an accepted update no longer
        retractable, `ddflow.blame`); `drop()` the failing piece and run again: the
        rest goes on.

        Updates complete only once their input's frontier passes their time.  When
        an input was given updates but its frontier has not moved since the last
        run (no `advance_to`, no `close`), none of them can complete: the run warns
        with a `StalledRunWarning` naming those inputs (and still does the work it
        can: linear operators pass the updates on, as partial answers).

        Operators built since the last `run()` join the running dataflow here, as in
        differential dataflow's interactive use: each imports the arrangements it
        reads (compacted to the current time; an input keeps its own), a collection
        that has none is re-derived from its nearest arranged ancestors, and a new
        capture's first updates are the whole accumulated answer at the time the
        piece was added (`Capture.since`), maintained like the rest from then on.
        """
        if not self._compiled:
            graph.prepare(self)
            self.engine.compile(self)
            self._compiled = True
            self._ran = len(self.nodes)
            self.mark_running()
        elif len(self.nodes) > self._ran or self._dropping:
            growth = graph.grow(self, self._ran)
            self.engine.grow(self, growth)
            for cap in self.captures:
                if cap.node in growth.added:
                    cap.since = growth.time
            self._ran = len(self.nodes)
            self._dropping = False
            self.mark_running()
        logging = self._logging
        stalled = [s for s in self.sessions if s.stalled()
                   and not (logging is not None and logging.is_logging(s))]
        started = self.root.minimum if self.time_ran is None else self.time_ran
        if progress is not False and progress is not None:
            from ddflow.run_progress import RunProgress
            with RunProgress(self.engine, None if progress is True else progress):
                self._step()
        else:
            self._step()
        time = self.root.minimum
        for s in self.sessions:
            time = join(time, s.time)
        if logging is not None:
            # The run's activity, logged at the time it started from, then run
            # through whatever reads the logging collections.  The user's step has
            # committed: if this one fails, only the logging is undone.
            saved = logging.save()
            logging.record(started, time)
            try:
                self._step(blame_inputs=False)
            except BaseException as err:
                # The user's step committed: its sessions ran, whatever stopped this.
                logging.restore(saved)
                for s in self.sessions:
                    if not logging.is_logging(s):
                        s.mark_ran()
                if isinstance(err, DataflowError):
                    raise _logging_failed(err) from err
                raise
        for s in self.sessions:
            s.mark_ran()
        self.time_ran = time
        if stalled:
            names = ", ".join(f"{s.name!r} (at {s.time!r})" for s in stalled)
            warnings.warn(StalledRunWarning(
                f"run(): the updates given to {names} cannot complete, since the input's "
                "frontier has not moved since the last run(): advance_to() a later time "
                "(or close()) the input, then run() again"), stacklevel=2)

    def _step(self, blame_inputs: bool = True) -> None:
        """One engine step over the sessions' pending updates.  The one rollback path
        of the sessions: an engine puts back its own state when a step fails, the
        sessions get their updates back here.  `blame_inputs=False` for the logging's
        step: its updates are the engine's own records, withdrawn by the logging's
        rollback, so there is nothing for a user to discard."""
        # Kept for a failure (and the open updates) in the least memory: a large
        # plain input as columns (`ddflow.kept_input`); the engine is handed rows
        # decoded from them that it alone holds, and lets go as it injects them.
        kept = [(s, kept_input.keep(s.take_pending())) for s in self.sessions]
        try:
            with _gc_paused():
                self.engine.run(self, kept_input.given(
                    kept, getattr(self.engine, "takes_columns", False)))
        except BaseException as exc:
            taken = kept_input.given(kept)
            for session, updates in taken:
                session.restore_pending(updates)
            if isinstance(exc, DataflowError) and exc.inputs is None:
                _with_inputs(exc, *(blame(self, exc, taken) or (None, ())
                                    if blame_inputs else ((), ())))
            raise
        if blame_inputs:    # the logging's own records are never the user's to blame
            for session, updates in kept:
                if self._logging is None or not self._logging.is_logging(session):
                    session.accepted(kept_input.in_advance(updates, session.frontier()))

    def drop(self, what: Any) -> None:
        """Remove a piece added for a question (a `Capture`, or a collection's
        operators) together with every operator only it needed; the arrangements those
        read stop holding back compaction for them.  Takes effect at the next `run()`.
        A maintained explanation (`explain()`) is dropped whole (its `drop()`), and
        dropping a capture drops the explanations of it first.
        """
        if any(what is mx for mx in self.explanations):
            what.drop()
            return
        node = getattr(what, "node", None)
        if node is None or node.dataflow is not self:
            raise GraphError(f"drop() takes a capture or collection of this dataflow, "
                             f"not {what!r}")
        if node.kind == "input":
            raise GraphError(f"drop(): '{node.name}' is an input; close() its session "
                             "instead", operator=node.name)
        for mx in [mx for mx in self.explanations if mx.capture is what]:
            mx.drop()           # first: they read the capture's upstream
        live_nodes = [n for n in self.nodes if not n.dropped and n is not node]
        # What stays: whatever still leads to an output (a node no one reads: a
        # capture, an inspect, a collection left dangling) other than this one.
        keep: set = set()
        stack = [n for n in live_nodes if not n.consumers]
        while stack:
            n = stack.pop()
            if id(n) not in keep:
                keep.add(id(n))
                stack.extend(n.inputs)
        doomed, stack = [], [node]
        seen: set = set()
        while stack:
            n = stack.pop()
            if id(n) in seen or id(n) in keep or n.kind == "input":
                continue
            seen.add(id(n))
            doomed.append(n)
            stack.extend(n.inputs)
        if id(node) in keep:
            readers = ", ".join(sorted({f"'{c.name}'" for c, _p in node.consumers
                                        if not c.dropped}))
            raise GraphError(f"drop(): '{node.name}' is still read by {readers}; drop "
                             "those first", operator=node.name)
        # Nothing runs between drop() and the next run(): the doomed operators'
        # counters are final now (an engine may reset them when it lets them go).
        self._retired_work += sum(self._work_of(n) for n in doomed)
        for n in doomed:
            n.dropped = True
        for c in self.captures:
            if c.node.dropped:
                c.asking = None     # its one-off explanations' copy goes with it
        self.captures = [c for c in self.captures if not c.node.dropped]
        self._dropping = True

    def discard(self, err: DataflowError) -> list[tuple]:
        """Undo the inputs a failed `run()` blamed (`err.inputs`) and return them as
        `(session, data, time, diff)`: a pending update is withdrawn (one copy per
        entry), an update an earlier run accepted (`err.accepted`) is retracted at
        its own time, rows fed from a DataFrame (`(session, rows, None, None)`) are
        withdrawn whole.  All or nothing: raises `DataError` for an error that
        names no inputs (not raised by a run, or not the data's fault) or one of
        whose inputs can no longer be undone; warns (`NothingDiscardedWarning`)
        when `err.inputs` is empty: no input is to blame, `drop()` the failing piece
        instead."""
        inputs = getattr(err, "inputs", None)
        if not isinstance(err, DataflowError) or inputs is None:
            raise DataError(f"discard(err) takes an error raised by run() that names the "
                            f"pending updates it comes from (err.inputs), not {err!r}")
        if not inputs:
            warnings.warn(NothingDiscardedWarning(
                "discard(err): no input is to blame for this error (err.inputs is "
                "empty): the failure comes from data already in the dataflow, which no "
                "discard can undo (see ddflow.blame); drop() the failing piece"),
                stacklevel=2)
            return []
        sessions = list({id(u[0]): u[0] for u in inputs}.values())
        for session in sessions:
            if session.dataflow is not self:
                raise DataError(f"discard(err): the error names input '{session.name}' "
                                "of another dataflow", operator=session.name)
        # Rows fed where they are (`ddflow.engine.fed`) are blamed as a whole; updates
        # an earlier run accepted (`err.accepted`) are retracted at their time.
        waiting = {id(rows): rows for rows in getattr(self.engine, "fed", list)()}
        fed = [u[1] for u in inputs if u[3] is None]
        if not all(waiting.get(id(rows)) is rows for rows in fed):
            raise DataError("discard(err): rows fed by insert_dataframe that the error "
                            "names are no longer waiting for a run")
        accepted = list(getattr(err, "accepted", ()))
        withdraw: dict = {id(s): [] for s in sessions}
        retract: dict = {id(s): [] for s in sessions}
        for u in inputs:
            if u in accepted:
                accepted.remove(u)
                retract[id(u[0])].append(u[1:])
            elif u[3] is not None:
                withdraw[id(u[0])].append(u[1:])
        for apply in (False, True):     # all or nothing: every session checks first
            for session in sessions:
                session.recover(withdraw[id(session)], retract[id(session)], apply=apply)
        for rows in fed:
            self.engine.unfeed(rows)
        return list(inputs)

    # -- observing -------------------------------------------------------------
    def logging(self) -> Any:
        """The engine's activity as collections, updated at every `run()` at the time
        the run started from: `.operators`, `.activity`, `.traces`, `.frontiers` (see
        `ddflow.introspection`).  Made once (later calls return the same), and it
        turns on the measuring of each operator's CPU time."""
        if self._logging is None:
            from ddflow.introspection import Logging
            self._time_operators()
            with self.building():
                self._logging = Logging(self)
        return self._logging

    def explain(self, capture: Any = None) -> Any:
        """Explanations of `capture`'s records, maintained as a dataflow beside this
        one (`ddflow.explain.MaintainedExplanation`): insert records to explain into
        its `questions` session; its `captures` hold the input records they demand,
        updated at every `run()` with work that follows the change.  With no
        `capture`, the dataflow's only one."""
        from ddflow.explain import MaintainedExplanation
        if capture is None:
            if not self.captures:
                raise GraphError("explain(): the dataflow has no captures: capture() the "
                                 "collection whose records to explain", operator="explain")
            if len(self.captures) > 1:
                raise GraphError(f"explain(): the dataflow has {len(self.captures)} "
                                 "captures: name the one to explain", operator="explain")
            capture = self.captures[0]
        if not isinstance(capture, Capture) or capture.dataflow is not self:
            raise GraphError(f"explain() needs a capture of this dataflow, not {capture!r}",
                             operator="explain")
        if capture.node.scope.parent is not None:
            raise GraphError("explain() explains a capture of the root scope",
                             operator=capture.node.name)
        mx = MaintainedExplanation(capture)
        self.explanations.append(mx)
        return mx

    def _time_operators(self) -> None:
        time_operators = getattr(self.engine, "time_operators", None)
        if time_operators is not None:
            time_operators(True)

    def metrics(self, per_worker: bool = False) -> list[dict]:
        """Work counters per operator (summed over workers unless `per_worker`):
        `records_in`, `records_out`, `batches_out`, `work`, `times_visited`, `cpu_ns`
        (CPU time in its hooks, measured on engines that time operators once asked:
        `Dataflow(timing=True)` or `logging()`; else 0), and the sizes of the traces
        it owns: `trace_records`, `trace_batches`, `trace_times` (distinct times)."""
        rows = []
        for node in self.nodes:
            shards = list(enumerate(self.engine.operators(node)))
            groups = [[s] for s in shards] if per_worker else [shards]
            for group in groups:
                row = {"id": node.id, "operator": node.name, "kind": node.kind,
                       "scope": node.scope.name}
                if per_worker:
                    row["worker"] = group[0][0]
                for key in ("records_in", "records_out", "batches_out", "work",
                            "times_visited"):
                    row[key] = sum(getattr(op, key) for _w, op in group)
                # Measured and sized where the engine hands over the operators
                # themselves; an engine reporting counters from elsewhere (the BSP
                # shards' views) has no clock or traces here: 0.
                row["cpu_ns"] = sum(getattr(op, "cpu_ns", 0) for _w, op in group)
                row["trace_records"] = sum(op.trace_records() for _w, op in group)
                traces = [tr for _w, op in group
                          for tr in getattr(op, "traces", tuple)()]
                row["trace_batches"] = sum(tr.batch_count() for tr in traces)
                row["trace_times"] = sum(tr.time_count() for tr in traces)
                rows.append(row)
        return rows

    def to_dot(self) -> str:
        """The dataflow graph as graphviz text (see `ddflow.viz.to_dot`)."""
        return viz.to_dot(self)

    def total_work(self) -> int:
        """Records processed by all operators since the dataflow was built: records in
        plus trace records read.  Operators taken away by `drop` keep the work they
        did in the total, so it never decreases: the difference between two readings
        is the work done in between."""
        return self._retired_work + sum(self._work_of(n) for n in self.nodes
                                        if not n.dropped)

    def _work_of(self, node: Node) -> int:
        return sum(op.records_in + op.work for op in self.engine.operators(node))

    def loop_rows(self) -> list[dict]:
        """Round-by-round log of every loop: outer time, round, changes, sample."""
        rows = []
        for node in self.nodes:
            if node.kind == "feedback":
                merged: dict = {}
                for op in self.engine.operators(node):
                    for key, (n, sample) in op.log.items():
                        m = merged.setdefault(key, [0, []])
                        m[0] += n
                        m[1].extend(sample[: max(0, 12 - len(m[1]))])
                for (outer, rnd), (n, sample) in sorted(
                        merged.items(), key=lambda kv: (sort_key(kv[0][0]), kv[0][1])):
                    rows.append({"loop": node.scope.name, "variable": node.name,
                                 "outer": outer, "round": rnd, "changes": n,
                                 "sample": sample})
        return rows


def _logging_failed(err: DataflowError) -> DataflowError:
    """`err`, raised by the logging's step, saying what a caller must know: the
    user's step of that run committed (its outputs moved), the logging's did not."""
    note = ("; run(): the dataflow's own step committed, the logging's step (run "
            "over df.logging()'s collections) was rolled back and is retried by the "
            "next run()")
    try:
        new = type(err)(err.message + note, operator=err.operator, record=err.record,
                        time=err.time)
    except TypeError:       # a subclass built otherwise: keep it, say it aside
        err.add_note(note[2:])
        return err
    new.inputs, new.accepted = err.inputs, err.accepted
    return new


def _with_inputs(err: DataflowError, inputs: tuple | None, accepted: tuple) -> None:
    """Attach `inputs` (and `accepted`, those of them an earlier run took) to `err`
    and say in its message what to do."""
    err.inputs, err.accepted = inputs, accepted
    if inputs is None:
        return
    if inputs:
        shown = ", ".join(f"{s.name}: {(d, t, r)!r}" if r is not None else f"{s.name}: {d!r}"
                          for s, d, t, r in inputs[:4])
        more = f" and {len(inputs) - 4} more" if len(inputs) > 4 else ""
        hint = (f"it comes from the update(s) {shown}{more}"
                + (f" ({len(accepted)} of them accepted by an earlier run at a time this "
                   "run completes)" if accepted else "")
                + ": session.discard(err) withdraws them"
                + (" (retracts those at their time)" if accepted else ""))
    else:
        hint = ("no input is to blame: the failing operator meets data the dataflow "
                "already holds (what a piece added since the last run() imported, or an "
                "update accepted earlier that can no longer be retracted, see "
                "ddflow.blame); drop() it")
    err.args = (f"{err.args[0]}; {hint}",) + err.args[1:]


def _root_time(time: Any) -> Any:
    """The root's least time from `Dataflow(time=...)`: the type `int`, or the least
    element of a lattice; anything else is a `TimeError` saying what is expected."""
    if time is int:
        return 0
    time = as_time(time)
    if isinstance(time, type) or not is_time(time):
        raise TimeError(f"Dataflow(time=...) takes the least time of the root lattice (0, "
                        f"Product(0, 0), a lattice's minimum()) or the type int, not "
                        f"{time!r}")
    least = minimum(time)
    if least != time:
        raise TimeError(f"Dataflow(time={time!r}): time is the least time of the root "
                        f"lattice, here {least!r}; to start later, advance_to({time!r}) "
                        "the inputs", time=time)
    return time


#: What `Dataflow` and `Capture` call on an engine (`ddflow.engine.Engine`).
_ENGINE_METHODS = ("compile", "grow", "run", "operators", "captured_since", "frontier")


def _check_engine(engine: Any) -> None:
    missing = [m for m in _ENGINE_METHODS if not callable(getattr(engine, m, None))]
    if missing:
        raise GraphError(f"engine must be an engine object (LocalEngine(workers=...), "
                         f"ddflow.engine.bsp.InProcessShards(...), SparkEngine(...)), not "
                         f"{engine!r}: it has no {', '.join(missing)}")
