"""Engines schedule operators and move batches along edges.

Every engine compiles the front door's graph into one `Plan` (`ddflow.engine.plan`)
and runs the operators of each shard in a `Worker` (`ddflow.engine.worker`), the one
pass loop and router: `LocalEngine` runs one worker for all of its W simulated
workers in this process; the BSP driver (`ddflow.engine.bsp`) runs one per shard in
supersteps (`ddflow.engine.superstep`), its shards run in this process
(`InProcessShards`) or in Spark tasks (`ddflow.engine.spark.SparkEngine`), kept where
they ran and logged to be rebuilt anywhere else (`ddflow.engine.shard_log`).  What the front door asks of an
engine is the `Engine` protocol below.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Engine(Protocol):
    """The contract between the front door and an engine: the methods `Dataflow` and
    `Capture` call, and nothing else (`Dataflow` refuses an engine lacking one).
    Nodes are the graph's descriptions (`ddflow.graph`); an engine keeps the
    operator instances and everything else it runs to itself.

    An engine may offer more, looked up by name where it is used: `feed_dataframe`
    and `capture_dataframe` (the Spark engine's) take DataFrames where they are;
    an engine holding fed rows offers `fed()` (the `ddflow.engine.fed.FedRows`
    waiting for the next run), `withholding(rows)` (a context in which runs leave
    them waiting: `ddflow.blame`'s trials) and `unfeed(rows)` (`discard(err)`)."""

    def compile(self, df: Any) -> None:
        """Build the plan of `df`'s (prepared) graph and instantiate its operators."""

    def grow(self, df: Any, growth: Any) -> None:
        """Take the operators added to the running dataflow (a `graph.Growth`) next to
        the running ones, which keep their state; the next `run` first hands the new
        ones the contents they import."""

    def run(self, df: Any, taken: list, keep: bool = True) -> None:
        """Feed `taken`, the updates taken from `df`'s sessions (`(session, updates)`
        pairs), and do all the work their frontiers allow; on any error, put the
        engine's state back as it was before and re-raise (the caller gives the
        sessions their updates back).  With `keep=False`, a trial: put the state
        back even on success (what `ddflow.blame` runs to find `err.inputs`)."""

    def operators(self, node: Any) -> list:
        """`node`'s operators (or views of their counters), one per shard ([] before
        `node` is compiled)."""

    def captured_since(self, node: Any, cursor: Any) -> tuple[list, Any, bool]:
        """The updates capture `node` recorded since `cursor` (None: from the start), a
        cursor for the next call, and whether they are the whole history because the
        reader must start over (`operators.capture.read_since`)."""

    def frontier(self, node: Any) -> tuple | None:
        """`node`'s input frontiers as of the end of the last run (None before)."""
