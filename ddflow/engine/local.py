"""The local engine: every operator in one process, W simulated workers.

It compiles the dataflow into a `Plan`, instantiates each node's operator once per
worker, and runs them all in one `Worker` (`ddflow.engine.worker`: the pass loop and
router every engine shares).  Progress is global and exact: the worker's tracker
counts every worker's pointstamps.  An update goes to the worker that produced it,
except into a keyed operator (an arrangement), which receives each update on the
worker `shard_of(key, W)`: the exchange.

Rollback: each operator is checkpointed the first time a step touches it (from then
on it records what the step overwrites, `operators.undo`); if anything raises, the
touched operators are rolled back and queued work is dropped before the error
reaches the caller (who gives the sessions their updates back, `Dataflow.run`);
otherwise they commit.
"""

from __future__ import annotations

from typing import Any

from ddflow.engine.plan import Plan, instantiate
from ddflow.engine.worker import Worker
from ddflow.arguments import positive_int
from operators.capture import Cursor, read_since


class LocalEngine:
    """Run a dataflow in this process, as `workers` simulated workers."""

    #: Whether a step's input kept as columns (`ddflow.kept_input`) is handed over
    #: as record columns, which the operators that take them pass on without a
    #: tuple per update (`Operator.takes_columns`); False: decoded rows (the switch).
    takes_columns = True

    def __init__(self, workers: int = 1) -> None:
        self.workers = positive_int(workers, "workers")
        self._worker: Worker | None = None
        self._index: dict[int, int] = {}
        # Whether a step has succeeded: until one has, the worker's tracker has never
        # been told the inputs' frontiers (a rolled-back first step returns it to that
        # state), so its frontiers are empty and would call every time final.  The
        # same holds for nodes added since (`grow`): the first `_stepped_nodes` have run.
        self._stepped = False
        self._stepped_nodes = 0
        self._timed = False

    # -- compile -------------------------------------------------------------
    def compile(self, df: Any) -> None:
        """Build every worker's operators and the plan, once, before the first run."""
        nodes = list(df.nodes)
        ops = [instantiate(nodes, w) for w in range(self.workers)]
        plan = Plan.of_operators(nodes, ops[0])
        self._index = {id(n): i for i, n in enumerate(nodes)}
        self._worker = Worker(plan, range(self.workers), self.workers, ops)
        self._worker.timed = self._timed

    def grow(self, df: Any, growth: Any) -> None:
        """Operators were added to the running dataflow (`ddflow.graph.grow`):
        instantiate them next to the running ones, which stay as they are."""
        nodes = list(df.nodes)
        worker = self._worker
        ops = [instantiate(nodes, w, worker.ops[w][:growth.start], growth)
               for w in range(self.workers)]
        worker.grow(Plan.of_operators(nodes, ops[0]), ops, growth)
        self._index = {id(n): i for i, n in enumerate(nodes)}

    # -- run -----------------------------------------------------------------
    def run(self, df: Any, taken: list, keep: bool = True) -> None:
        """One step: feed the updates taken from the sessions (`(session, updates)`
        pairs) and run until nothing can move; on failure, roll every operator back.
        With `keep=False` a trial: rolled back even when it succeeds, so only whether
        it raises is learnt (what `ddflow.blame` runs to find `err.inputs`)."""
        worker = self._worker
        worker.begin()
        try:
            worker.import_contents()
            for session, updates in taken:
                i = self._index[id(session.node)]
                worker.set_input_frontier(i, session.frontier())
                worker.inject(i, updates)
            # The caller keeps the step's input in a form of its own for a failure
            # (`ddflow.kept_input`) and hands these rows over: held here for the whole
            # step, a load's rows would outlive their trip into the operators.
            taken = updates = None
            worker.drain()
        except BaseException:
            worker.rollback()
            raise
        if not keep:
            worker.rollback()
            return
        worker.commit()
        self._stepped = True
        self._stepped_nodes = len(worker.plan.nodes)

    # -- what front-door objects read -------------------------------------------
    @property
    def passes(self) -> int:
        """Sweeps of the work list so far (a back edge starts a new one)."""
        return self._worker.passes if self._worker else 0

    @property
    def visits(self) -> int:
        """Node visits so far (a node visited on W workers counts once)."""
        return self._worker.visits if self._worker else 0

    @property
    def routed(self) -> int:
        """Records moved along edges so far."""
        return self._worker.routed if self._worker else 0

    def observe(self, on_pass: Any) -> None:
        """Call `on_pass(passes, routed)` at the start of every pass of the runs to
        come (None: stop): what `Dataflow.run(progress=True)` draws."""
        if self._worker is not None:
            self._worker.on_pass = on_pass

    def time_operators(self, on: bool) -> None:
        """Measure each operator's hook calls in CPU time (`Operator.cpu_ns`) from the
        next run on."""
        self._timed = on
        if self._worker is not None:
            self._worker.timed = on

    def operators(self, node: Any) -> list:
        """The operator instances of `node`, one per worker ([] before the first run)."""
        i = self._index.get(id(node))
        if i is None:
            return []       # not compiled yet (built since the last run)
        return [ops[i] for ops in self._worker.ops]

    def captured_since(self, node: Any, cursor: Cursor | None) -> tuple[list, Cursor, bool]:
        """The updates a capture node recorded since `cursor` (None: from the start),
        a cursor for the next call, and whether they are the whole history because
        the reader must start over (see `operators.capture.read_since`)."""
        return read_since([op.journal for op in self.operators(node)], cursor)

    def frontier(self, node: Any) -> tuple | None:
        """The input frontiers of `node` now (None before the first successful run)."""
        i = self._index.get(id(node))
        if i is None or i >= self._stepped_nodes:
            return None     # no successful step has run it yet
        return self._worker.frontier(i)
