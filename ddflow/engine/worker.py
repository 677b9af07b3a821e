"""The one pass loop and router that every engine runs.

A `Worker` holds the operators of one or more shards of a plan, the batches queued
for them, and a progress `Tracker` of every pointstamp it knows of: its operators'
capabilities, its queued batches (counted once per distinct time of a batch), the
messages it sent to shards held elsewhere, and the pointstamps of those other shards
as last reported (`set_external`).  The local engine runs one worker for all of its
W simulated workers; the BSP driver and the Spark engine run one per shard, in a
superstep.

Scheduling is a work list in node order (a topological order once feedback edges
are cut): a node is visited only when a batch was queued for it or its input
frontier moved and that gives it work (`Operator.wants_frontier`).  A visit first
delivers every queued batch to every shard of the node, accounts what that changed
(outputs routed, capabilities taken, the delivered batches released) and only then
reads the input frontier and tells it to the operators: so an operator that waits
for completeness acts in the same visit as the input that completes it, and a
change crosses a chain of reduces in one sweep.  A *pass* is one sweep of the work
list; a back edge (a loop's feedback) starts the next one, so a change takes one
pass more than the loop rounds it reaches.

What progress tracking is spared, and why it stays sound (a frontier is only ever
read in a visit, right after the recorded changes are pushed):
* a batch for an operator that never reads a frontier (a map, a concat, a capture)
  is handed to it at once, no pointstamp needed: nothing reads a frontier meanwhile;
* a queued batch is counted only if a frontier is read before its node takes it;
* an operator outside any loop takes its capabilities once per visit, after it has
  been told the frontier: what it holds cannot come back to its own inputs.
Exchange: an update goes to the shard that produced it, except into a keyed
operator, which receives it on shard `shard_of(key, shards)`.
"""

from __future__ import annotations

import heapq
from time import thread_time_ns
from typing import Any, Callable, Iterable, Sequence

from lattice import Antichain
from ddflow.engine.plan import Plan
from ddflow.errors import DataError
from ddflow.progress import time_counts
from ddflow.sharding import shard_of
from operators.base import Operator, as_rows
from operators.capture import CaptureOp


class Worker:
    """The operators of the shards `shards` (of `total`) of `plan`, and their loop."""

    def __init__(self, plan: Plan, shards: Sequence[int], total: int,
                 ops: Sequence[Sequence[Any]]) -> None:
        self.shards = list(shards)
        self.total = total
        self._local = {s: k for k, s in enumerate(self.shards)}
        self.told: list = [None] * len(plan.nodes)
        self.outbox: dict = {}
        self._external: dict = {}
        self._undo: list | None = None          # the operators a step touched
        self._touched: list[list[bool]] = []
        self._told_before: list | None = None
        self._imports: tuple = ()             # (producer, consumer, port, time) to hand over
        self._imports_before: tuple = ()
        self.passes = 0
        self.visits = 0
        self.routed = 0
        #: Called with `(passes, routed)` at the start of every pass (a progress
        #: display, `LocalEngine.observe`); None: nobody is watching.
        self.on_pass: Callable[[int, int], Any] | None = None
        #: Whether each hook call's CPU time is added to its operator's `cpu_ns`
        #: (`LocalEngine.time_operators`): off by default, since the thread clock is
        #: a system call (~0.8 us) per reading, twice per hook call.
        self.timed = False
        self._input_nodes: set[int] = set()   # nodes told an input frontier
        self._load(plan, ops)

    def _load(self, plan: Plan, ops: Sequence[Sequence[Any]]) -> None:
        """Take `plan` and its operators `ops[k][node]`, nothing queued, and count
        the pointstamps they hold (at construction, after a rollback, as it grows)."""
        self.plan = plan
        self.ops = [list(row) for row in ops]
        self.queues = [[[[] for _ in range(pn.n_ports)] for pn in plan.nodes]
                       for _ in self.shards]                         # [(batch, counts)]
        self.caps = [[frozenset() for _ in plan.nodes] for _ in self.shards]
        self._reported: list[list] = [[None] * len(plan.nodes) for _ in self.shards]
        # Nodes whose output reaches their own input ports (inside a loop).
        self._cyclic = plan.cyclic
        # Operators that never hold a capability are never asked.
        self._has_caps = [type(row[i]).capabilities is not Operator.capabilities
                          for row in self.ops[:1] for i in range(len(plan.nodes))]
        self.outbox = {}
        self._heap: list[int] = []
        self._scheduled: set[int] = set()
        self._uncounted: list = []            # (node, port, queue entry) not counted
        self.tracker = plan.tracker()
        for k in range(len(self.shards)):
            for i in range(len(plan.nodes)):
                self._sync_caps(k, i)
        external, self._external = self._external, {}
        self.set_external(external)
        self.tracker.propagate()
        self._schedule_untold()

    def grow(self, plan: Plan, ops: Sequence[Sequence[Any]], growth: Any) -> None:
        """The dataflow grew (`ddflow.graph.grow`): take the new plan and
        operators (the running ones among them, as they are), and remember what the
        running operators must hand the new ones (`import_contents`)."""
        told = self.told
        self.told = told[:growth.start] + [None] * (len(plan.nodes) - growth.start)
        for i in growth.dropped:
            self.told[i] = None
        # Other shards' pointstamps are kept by location, and the new plan numbers
        # locations anew (a port of a loop may now be where an int-timed one was):
        # they go, and the next superstep reports them again before any frontier
        # is read (found by the growing-dataflow state machine: a raw TypeError).
        self._external = {}
        self._load(plan, ops)
        # Imports still pending (a growth whose first run failed keeps them, see
        # `rollback`) go with the pieces `drop` took out: their reader is gone.
        gone = set(growth.dropped)
        pending = tuple(e for e in self._imports if e[0] not in gone and e[1] not in gone)
        self._imports = pending + tuple((*edge, growth.time) for edge in growth.imports)

    def import_contents(self) -> None:
        """Hand each new operator the contents of the running one it reads, as its
        first batch (on the shard the edge's exchange says)."""
        imports, self._imports = self._imports, ()
        for producer, consumer, port, time in imports:
            exchange = [c[2] for c in self.plan.nodes[producer].consumers
                        if c[0] == consumer and c[1] == port][0]
            for k, shard in enumerate(self.shards):
                contents = self.ops[k][producer].snapshot(time)
                if contents:
                    self._send(shard, consumer, port, exchange,
                               self.plan.nodes[consumer].name, contents)

    def seed_tokens(self, seed: int | None) -> None:
        """Captures draw their batch tokens from `seed` from now on (None: at random;
        see `operators.capture.CaptureOp`)."""
        for row in self.ops:
            for op in row:
                if type(op) is CaptureOp:
                    op.seed = seed

    # -- feeding -----------------------------------------------------------------
    def enqueue(self, shard: int, node: int, port: int, updates: list) -> None:
        """Queue a batch for `node`'s `port` on local shard `shard`.

        Its pointstamps are counted only if a frontier is read before the node takes
        the batch (`_count_queued`): a batch handed to the next node visited costs
        progress tracking nothing.
        """
        entry = [updates, None]
        self.queues[self._local[shard]][node][port].append(entry)
        self._uncounted.append((node, port, entry))
        self._schedule(node)

    def _count_queued(self) -> None:
        """Count the queued batches not yet counted: a frontier is about to be read.
        (The node being visited has just taken its own; any batch still queued, its
        own included, is counted.)"""
        ports, update_counts = self.plan.ports, self.tracker.update_counts
        for node, port, entry in self._uncounted:
            if entry[0] is not None:
                entry[1] = counts = time_counts(entry[0])
                update_counts(ports[node][port], counts)
        self._uncounted = []

    def inject(self, node: int, updates: list) -> None:
        """Queue an input's updates, each on the shard its data belongs to (a list of
        triples, or record columns, `ddflow.columnar`, on one shard)."""
        if self.total == 1:
            if len(updates):
                self.enqueue(self.shards[0], node, 0, updates)
            return
        updates = as_rows(updates)
        for dest, part in split_by_shard(updates, _identity, self.total, "input").items():
            self.enqueue(dest, node, 0, part)

    def set_input_frontier(self, node: int, frontier: Antichain) -> None:
        """An input's session moved: its operators' capability follows, and every
        input's compaction horizon (`InputOp.horizon`) with it."""
        self._input_nodes.add(node)
        moved = False
        for k, ops in enumerate(self.ops):
            op = ops[node]
            if op.frontier.elements != frontier.elements:   # (no Python-level __eq__)
                self._touch(k, node)
                op.frontier = frontier
                self._sync_caps(k, node)
                moved = True
        if moved:
            self._set_horizon()

    def _set_horizon(self) -> None:
        # The latest final time of the dataflow follows its slowest open input, so
        # every input keeps its history exact from the meet over the open inputs of
        # their frontiers one step behind (`InputOp.behind`; an input whose frontier
        # has not moved since it was first told holds every input's whole history:
        # an empty horizon).  Told before any stale value can matter: compaction
        # runs in `on_input`, after every frontier is set.
        for ops in self.ops:
            horizon = None
            for j in self._input_nodes:
                op = ops[j]
                if op.frontier.is_empty():
                    continue                    # closed: it holds nothing back
                if op.behind.is_empty():
                    horizon = op.behind
                    break
                horizon = op.behind if horizon is None else horizon.meet(op.behind)
            for j in self._input_nodes:
                ops[j].horizon = horizon

    def set_external(self, stamps: dict) -> None:
        """Pointstamps held elsewhere: `{location: {time: count}}`, replacing the last."""
        old, self._external = self._external, stamps
        tracker = self.tracker
        for location, counts in old.items():
            tracker.update_counts(location, counts, -1)
        for location, counts in stamps.items():
            tracker.update_counts(location, counts)

    def take_outbox(self) -> dict:
        """Messages for other shards, `{(dest, node, port): updates}`, handed over: from
        now on whoever delivers them counts them."""
        outbox, self.outbox = self.outbox, {}
        # Recorded, not pushed: the next superstep brings them back among the other
        # shards' pointstamps before anything reads a frontier here.
        for (_dest, node, port), updates in outbox.items():
            self.tracker.update_counts(self.plan.ports[node][port], time_counts(updates), -1)
        return outbox

    # -- the pass loop -----------------------------------------------------------
    def drain(self) -> None:
        """Visit scheduled nodes until none is: all the work the frontiers allow."""
        heap, scheduled = self._heap, self._scheduled
        last = len(self.plan.nodes)
        while True:
            while heap:
                i = heapq.heappop(heap)
                scheduled.discard(i)
                if i < last:
                    self.passes += 1
                    if self.on_pass is not None:
                        self.on_pass(self.passes, self.routed)
                last = i
                self._visit(i)
            # What the last visits changed is pushed lazily: at the next visit (so a
            # batch's hop from one queue to the next cancels out) or here, at the end.
            if self.tracker.changes:
                self._reschedule(self.tracker.propagate())
            if not heap:
                return

    def _visit(self, i: int) -> None:
        self.visits += 1
        ports = self.plan.ports[i]
        tracker = self.tracker
        had = []
        for k, queues in enumerate(self.queues):
            got = False
            for p, q in enumerate(queues[i]):
                if not q:
                    continue
                queues[i][p] = []
                batch = q[0][0] if len(q) == 1 else [u for b, _c in q for u in as_rows(b)]
                if not got:
                    self._touch(k, i)
                    got = True
                op = self.ops[k][i]
                if type(batch) is not list and not op.takes_columns:
                    batch = as_rows(batch)
                if self.timed:
                    start = thread_time_ns()
                    op.on_input(p, batch)
                    op.cpu_ns += thread_time_ns() - start
                else:
                    op.on_input(p, batch)
                # Not held while the operator works on: one that swaps its input out
                # (a join's pending delta) can let a load's rows go as it encodes them.
                batch = None
                for entry in q:
                    if entry[1] is not None:
                        tracker.update_counts(ports[p], entry[1], -1)
                    entry[0] = None         # taken: no longer a pointstamp
            if got:
                # What it keeps of the batch counts before its own frontier is read
                # only if its output can come back to it (a loop); otherwise its
                # capabilities are taken once, after it has been told the frontier.
                self._flush(k, i, caps=self._cyclic[i] or not self.plan.watched[i])
            had.append(got)
        # The delivered batches are released before the frontier is read: whatever
        # the operators still hold of them is in their capabilities (synced above),
        # so the frontier they are told is already past what they just received.
        if not self.plan.watched[i]:
            return      # nothing here acts on a frontier
        if self._uncounted:
            self._count_queued()
        moved, frontier = tracker.settle(i)
        if moved:
            self._reschedule(moved, reading=i)
        changed = frontier is not self.told[i] and frontier != self.told[i]
        self.told[i] = frontier
        for k, got in enumerate(had):
            if got or changed:
                if not got:
                    self._touch(k, i)
                if self.timed:
                    op = self.ops[k][i]
                    start = thread_time_ns()
                    op.on_frontier(frontier)
                    op.cpu_ns += thread_time_ns() - start
                else:
                    self.ops[k][i].on_frontier(frontier)
                self._flush(k, i)

    def _flush(self, k: int, i: int, caps: bool = True) -> None:
        op = self.ops[k][i]
        if op.output:
            self._route(i, self.shards[k], op.take_output())
        if caps and self._has_caps[i]:
            self._sync_caps(k, i)

    def _sync_caps(self, k: int, i: int) -> None:
        if not self._has_caps[i]:
            return
        reported = self.ops[k][i].capabilities()
        if not reported and not self.caps[k][i]:
            return
        last = self._reported[k]
        if reported is last[i]:
            return      # the same cached report as last time: nothing changed
        last[i] = reported
        new = frozenset(reported)
        old = self.caps[k][i]
        if new == old:
            return
        self.caps[k][i] = new
        diff = dict.fromkeys(new - old, 1)
        for t in old - new:
            diff[t] = -1
        self.tracker.update_counts(i, diff)

    def _route(self, i: int, shard: int, updates: list) -> None:
        total = self.total
        self.routed += len(updates)
        watched = self.plan.watched
        for j, port, exchange, name in self.plan.nodes[i].consumers:
            if (exchange is None or total == 1) and not watched[j]:
                # An operator that never reads a frontier takes the batch at once:
                # no frontier is read before it has passed it on, so the hop needs
                # no pointstamps (and no visit).
                k = self._local[shard]
                self._touch(k, j)
                op = self.ops[k][j]
                batch = updates
                if type(batch) is not list and not op.takes_columns:
                    batch = as_rows(batch)
                if self.timed:
                    start = thread_time_ns()
                    op.on_input(port, batch)
                    op.cpu_ns += thread_time_ns() - start
                else:
                    op.on_input(port, batch)
                batch = None
                self._flush(k, j)
            else:
                self._send(shard, j, port, exchange, name, updates)

    def _send(self, shard: int, j: int, port: int, exchange: Callable | None, name: str,
              updates: list) -> None:
        """Queue `updates` from `shard` for node `j`'s `port`: on the same shard, or
        on the shards the exchange says (an outbox message if held elsewhere)."""
        if exchange is None or self.total == 1:
            self.enqueue(shard, j, port, updates)
            return
        updates = as_rows(updates)
        for dest, part in split_by_shard(updates, exchange, self.total, name).items():
            if dest in self._local:
                self.enqueue(dest, j, port, part)
            else:
                self.outbox.setdefault((dest, j, port), []).extend(part)
                self.tracker.update_counts(self.plan.ports[j][port], time_counts(part))

    def _schedule_untold(self) -> None:
        # Every operator that reads frontiers hears its first one, even if no data
        # and no change ever reach it (an inspect waiting for completion).
        for i, watched in enumerate(self.plan.watched):
            if watched and self.told[i] is None:
                self._schedule(i)

    def _schedule(self, i: int) -> None:
        if i not in self._scheduled:
            self._scheduled.add(i)
            heapq.heappush(self._heap, i)

    def _reschedule(self, nodes: Iterable[int], reading: int | None = None) -> None:
        """Schedule the nodes whose frontier moved, if that gives them work (but not
        `reading`, whose frontier is being read right now)."""
        scheduled = self._scheduled
        only = self.ops[0] if len(self.ops) == 1 else None     # (no generator for one)
        for i in nodes:
            if i != reading and i not in scheduled and (
                    only[i].wants_frontier() if only is not None
                    else any(ops[i].wants_frontier() for ops in self.ops)):
                self._schedule(i)

    # -- reports -------------------------------------------------------------------
    def pointstamps(self) -> tuple[dict, dict]:
        """This worker's own capabilities `{node: [times]}` and queued batch times
        `{(node, port): [times]}` (minimal times only: enough for frontiers)."""
        caps: dict = {}
        for row in self.caps:
            for i, c in enumerate(row):
                if c:
                    caps.setdefault(i, set()).update(c)
        queued: dict = {}
        for queues in self.queues:
            for i, qs in enumerate(queues):
                for p, q in enumerate(qs):
                    for batch, _counts in q:
                        queued.setdefault((i, p), set()).update(time_counts(batch))
        return ({i: list(Antichain(ts)) for i, ts in caps.items()},
                {k: list(Antichain(ts)) for k, ts in queued.items()})

    def frontier(self, node: int) -> tuple[Antichain, ...]:
        return self.tracker.frontiers(node)

    # -- steps and rollback ----------------------------------------------------------
    def begin(self) -> None:
        """Start a step that `rollback` can undo: every operator is checkpointed the
        first time the step touches it, so undoing costs what the step touched."""
        self._undo = []
        self._touched = [[False] * len(self.plan.nodes) for _ in self.shards]
        self._told_before = list(self.told)
        self._imports_before = self._imports

    def commit(self) -> None:
        if self._undo is not None:
            for op in self._undo:
                op.commit()
        self._undo = None
        self._told_before = None

    def rollback(self) -> None:
        """Put every touched operator back, drop queued work, rebuild the counts."""
        if self._undo is not None:
            for op in self._undo:
                op.rollback()
            self.told = self._told_before
            self._imports = self._imports_before
        self._undo = None
        self._told_before = None
        self._load(self.plan, self.ops)

    def _touch(self, k: int, i: int) -> None:
        # An operator's checkpoint extends to the operators it writes (a reader
        # advancing its arrangement's compaction), so only the touched one is named.
        undo = self._undo
        if undo is not None:
            touched = self._touched[k]
            if not touched[i]:
                touched[i] = True
                op = self.ops[k][i]
                op.checkpoint()
                undo.append(op)


def split_by_shard(updates: list, exchange: Callable[[Any], Any], shards: int,
                   consumer: str) -> dict[int, list]:
    """Group `updates` by the shard owning `exchange(data)`."""
    out: dict[int, list] = {}
    for u in updates:
        try:
            key = exchange(u[0])
        except Exception as exc:  # noqa: BLE001 - a record of the wrong shape
            raise DataError(f"{consumer} needs (key, value) pairs ({exc})",
                            operator=consumer, record=u[0], time=u[1]) from exc
        dest = shard_of(key, shards)
        bucket = out.get(dest)
        if bucket is None:
            out[dest] = [u]
        else:
            bucket.append(u)
    return out


def _identity(x: Any) -> Any:
    return x
