"""The engine's own activity as collections: `Dataflow.logging()`.

Differential dataflow logs its operators' work, arrangement sizes and frontiers as
streams that dataflows of their own read (timely's and differential's logging, and
Materialize's introspection relations built on them).  This module does the same for
ddflow: four input collections of the dataflow, fed after every `run()` with what
the run changed, so that a user joins, counts, captures and plots them like any
other collection.  It isolates the bookkeeping (what was logged last, so a run logs
only its differences); it leaves out the measuring (the operators' counters, the
engine's clock and frontiers, read through `Dataflow.metrics()` and
`engine.frontier`).

The encoding is Materialize's: a measure is a record whose *multiplicity* is the
value, so the accumulation at a run's time is the value after that run, and a run's
updates are its increments (a `count()` per operator sums them, a `join` with
`operators` names them):

* `operators`: `(id, (name, kind, scope))`, present while the operator runs;
* `activity`: `(id, measure)` for measure in `records_in`, `records_out`,
  `batches_out`, `work`, `times_visited`, `cpu_ns`: the totals so far;
* `traces`: `(id, measure)` for `records`, `batches`, `times` (distinct times) of
  the traces an operator owns: their sizes now (they go down as well as up);
* `frontiers`: `(id, port, time)`, present while `time` is an element of the
  operator's input frontier at `port`: a frontier change is a retraction and an
  insertion.

A run's updates sit at the time the run started from (the join of the inputs' times
at the end of the run before; the least time at first), so "the run of epoch e" is
logged at `e` when inputs are advanced to `e + 1` before each run, and the inputs
are advanced to the new time, making the run's log final.  Operators built on
these collections (the introspection's own) are not logged: their work follows the
logging's, so their rows would never be final.
"""

from __future__ import annotations

from typing import Any

#: `Dataflow.metrics()` keys logged in `activity`, and in `traces` (by their names
#: there).
ACTIVITY = ("records_in", "records_out", "batches_out", "work", "times_visited", "cpu_ns")
TRACES = {"trace_records": "records", "trace_batches": "batches", "trace_times": "times"}


class Logging:
    """The four logging collections of a dataflow (see the module docstring); made
    once per dataflow by `Dataflow.logging()`."""

    def __init__(self, df: Any) -> None:
        self.dataflow = df
        sessions, collections = {}, {}
        for name in ("operators", "activity", "traces", "frontiers"):
            sessions[name], collections[name] = df.new_collection(f"logging.{name}")
        self.sessions = sessions
        #: `(id, (name, kind, scope))`: the operators running.
        self.operators = collections["operators"]
        #: `(id, measure)`, multiplicity the total so far.
        self.activity = collections["activity"]
        #: `(id, measure)`, multiplicity the size now.
        self.traces = collections["traces"]
        #: `(id, port, time)`: the elements of each input frontier.
        self.frontiers = collections["frontiers"]
        self._nodes = {id(s.node) for s in sessions.values()}
        self._last: dict[tuple, int] = {}       # (what, id, measure) -> value logged
        self._shown: set = set()                # operators logged as present
        self._frontier: dict[int, set] = {}     # id -> {(port, time)} logged

    def logged_nodes(self) -> list:
        """The nodes whose activity is logged: every node not downstream of a
        logging collection (those are the introspection's own)."""
        own = set(self._nodes)
        out = []
        for node in self.dataflow.nodes:
            if id(node) in own or any(id(p) in own for p in node.inputs):
                own.add(id(node))
            elif not node.dropped:
                out.append(node)
        return out

    def record(self, time: Any, upto: Any) -> None:
        """Log what changed since the last record at `time`, and advance the logging
        inputs to `upto`."""
        df = self.dataflow
        s = self.sessions
        nodes = self.logged_nodes()
        live = {n.id for n in nodes}
        rows = {r["id"]: r for r in df.metrics() if r["id"] in live}
        for node in nodes:
            if node.id not in self._shown:
                self._shown.add(node.id)
                s["operators"].update_at((node.id, (node.name, node.kind, node.scope.name)),
                                         time, 1)
            row = rows[node.id]
            for measure in ACTIVITY:
                self._log(s["activity"], "activity", node.id, measure, row[measure], time)
            for key, measure in TRACES.items():
                self._log(s["traces"], "traces", node.id, measure, row[key], time)
            frontier = df.engine.frontier(node)
            now = {(port, t) for port, f in enumerate(frontier or ()) for t in f.elements}
            was = self._frontier.get(node.id, set())
            for port, t in now - was:
                s["frontiers"].update_at((node.id, port, t), time, 1)
            for port, t in was - now:
                s["frontiers"].update_at((node.id, port, t), time, -1)
            self._frontier[node.id] = now
        for gone in self._shown - live:     # dropped since the last run
            node = next(n for n in df.nodes if n.id == gone)
            self._shown.discard(gone)
            s["operators"].update_at((node.id, (node.name, node.kind, node.scope.name)),
                                     time, -1)
            for port, t in self._frontier.pop(gone, ()):
                s["frontiers"].update_at((gone, port, t), time, -1)
        for session in s.values():
            session.advance_to(upto)

    def _log(self, session: Any, what: str, node_id: int, measure: str, value: int,
             time: Any) -> None:
        key = (what, node_id, measure)
        change = value - self._last.get(key, 0)
        if change:
            self._last[key] = value
            session.update_at((node_id, measure), time, change)

    def is_logging(self, session: Any) -> bool:
        """Whether `session` is one of the logging inputs (never stalled by the user)."""
        return id(session.node) in self._nodes


__all__ = ["ACTIVITY", "Logging", "TRACES"]
