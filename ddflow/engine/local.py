"""The local engine: every operator in one process, W simulated workers.

Scheduling is a sequence of *passes*.  Each pass first computes every input frontier
from the current pointstamps (`ddflow.progress`), then visits the nodes in creation
order (a topological order once feedback edges are cut): each shard receives the
batches queued for it (`on_input`) and, if it received any or its frontier moved,
is told the frontier (`on_frontier`); whatever it emits is routed to its consumers'
queues.  Using the frontiers computed at the start of the pass is sound: every
update emitted during the pass stems from a pointstamp counted in that computation,
and times only grow along edges.  The run ends when a pass moves no data and leaves
the frontiers as they were: all work the input frontiers allow is done.

Workers: each node has one operator instance per worker.  An update goes to the
worker that produced it, except into a keyed operator (an arrangement), which
receives each update on the worker `shard_of(key, W)`: the exchange.

Rollback: before a step the engine checkpoints every operator (each then records
what the step overwrites, `operators.undo`) and copies the queues; if anything
raises, it rolls them back and gives the sessions their updates back before
re-raising, and otherwise commits them.
"""

from __future__ import annotations

from typing import Any

from ddflow.engine.shard import split_by_shard, visit
from ddflow.errors import GraphError
from ddflow.progress import input_frontiers
from ddflow.sharding import shard_of


class LocalEngine:
    """Run a dataflow in this process, as `workers` simulated workers."""

    def __init__(self, workers: int = 1) -> None:
        if type(workers) is not int or workers < 1:
            raise GraphError(f"workers must be a positive int, not {workers!r}")
        self.workers = workers
        self.passes = 0

    # -- compile -------------------------------------------------------------
    def compile(self, df: Any) -> None:
        prepare_graph(df)
        for node in df.nodes:
            node.shards = []
            for w in range(self.workers):
                node.shards.append(node.factory(w, lambda n, w=w: n.shards[w]))
            node.queues = [[[] for _ in range(max(1, len(node.inputs)))]
                           for _ in range(self.workers)]
        df._compiled = True

    # -- run -----------------------------------------------------------------
    def run(self, df: Any) -> None:
        if not df._compiled:
            self.compile(df)
        snapshot = _snapshot(df)
        taken = [(s, s.take_pending()) for s in df.sessions]
        try:
            for session, updates in taken:
                self._inject(session, updates)
            self._drain(df)
        except BaseException:
            _restore(df, snapshot)
            for session, updates in taken:
                session._pending[:0] = updates
            raise
        _commit(df)

    def _inject(self, session: Any, updates: list) -> None:
        node = session.node
        frontier = session.frontier()
        workers = self.workers
        buckets: list[list] = [[] for _ in range(workers)]
        if workers == 1:
            buckets[0] = updates
        else:
            for u in updates:
                buckets[shard_of(u[0], workers)].append(u)
        for w, op in enumerate(node.shards):
            op.frontier = frontier
            if buckets[w]:
                op.on_input(0, buckets[w])
                self._route(node, w, op.take_output())

    def _drain(self, df: Any) -> None:
        nodes = df.nodes
        last = None
        while True:
            self.passes += 1
            frontiers = input_frontiers(nodes)
            moved = False
            for node in nodes:
                fr = frontiers[node]
                for w, op in enumerate(node.shards):
                    had = visit(op, node.queues[w], fr, node.last_frontier)
                    if op._out:
                        self._route(node, w, op.take_output())
                        moved = True
                    moved = moved or had
                node.last_frontier = fr
            if not moved and frontiers == last:
                return
            last = frontiers

    def _route(self, node: Any, w: int, updates: list) -> None:
        workers = self.workers
        for consumer, port in node.consumers:
            if consumer.exchange is None or workers == 1:
                consumer.queues[w][port].extend(updates)
                continue
            for dest, part in split_by_shard(updates, consumer.exchange, workers,
                                             consumer.name).items():
                consumer.queues[dest][port].extend(part)

    # -- what front-door objects read -------------------------------------------
    def operators(self, node: Any) -> list:
        """The operator instances of `node`, one per worker."""
        return node.shards

    def captured(self, node: Any) -> list:
        """Every update a capture node has recorded, over all workers."""
        return [u for op in node.shards for u in op.updates]


def prepare_graph(df: Any) -> None:
    """What every engine does to a graph before its first run: refuse an unset
    Variable (before touching anything), then fuse linear chains if asked."""
    for node in df.nodes:
        if node.kind == "feedback" and not node.inputs:
            raise GraphError(f"Variable '{node.name}' was never set()", operator=node.name)
    if df.fuse:
        _fuse_linear(df)


def _fuse_linear(df: Any) -> None:
    """Merge each linear node into its sole linear consumer (seed 003's followed_by)."""
    kept = []
    for node in df.nodes:
        if node.kind == "linear" and len(node.inputs) == 1:
            producer = node.inputs[0]
            if (producer.kind == "linear" and producer.scope is node.scope
                    and len(producer.consumers) == 1 and len(producer.inputs) == 1):
                node.stages = producer.stages + node.stages
                node.name = f"{producer.name}>{node.name}"
                source = producer.inputs[0]
                node.inputs = [source]
                source.consumers = [(node, 0) if c is producer else (c, p)
                                    for c, p in source.consumers]
                kept.remove(producer)
        kept.append(node)
    df.nodes[:] = kept


def _snapshot(df: Any) -> list:
    # Every operator, before the step: a scheduler that knows which operators a step
    # touches need only checkpoint those, right before their first hook call.
    try:
        for node in df.nodes:
            for op in node.shards:
                op.checkpoint()
    except BaseException:
        _restore(df, [])        # those already recording stop, unchanged
        raise
    return [(node, [[list(q) for q in qs] for qs in node.queues], node.last_frontier)
            for node in df.nodes]


def _restore(df: Any, snapshot: list) -> None:
    for node in df.nodes:
        for op in node.shards:
            op.rollback()
    for node, queues, last in snapshot:
        node.queues = queues
        node.last_frontier = last


def _commit(df: Any) -> None:
    for node in df.nodes:
        for op in node.shards:
            op.commit()
