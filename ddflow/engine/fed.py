"""Inputs fed where they are: updates on the executors, waiting for the next run.

`InputSession.insert_dataframe` on the Spark engine checks and shards a DataFrame's
rows on the executors (`spark_io.shard_frame`); the driver keeps only a handle,
`FedRows`, until a run takes them.  The handle is also what a failed run blames when
those rows are the culprits (`ddflow.blame`): rows that never pass through the
driver cannot be named one by one, so they are blamed, and withdrawn by
`discard(err)`, as the frame they came in (`(session, rows, None, None)` in
`err.inputs`).  Once a run has taken them they are the shards' alone: unlike a
driver's update (`InputSession.open_updates`), fed rows at a time that run left
incomplete cannot be retracted by `discard(err)` later.  No pyspark here: the handle
only holds what the engine gave it.
"""

from __future__ import annotations

from typing import Any, Iterable


class FedRows:
    """One DataFrame's rows for `session`'s input, on the executors until a run takes
    them: `rdd` (chunks partitioned by shard), `stamps` (`{shard: minimal times}`),
    `count` rows, and `persisted`, the cached RDD to release once they ran or were
    withdrawn."""

    __slots__ = ("session", "rdd", "stamps", "count", "persisted")

    def __init__(self, session: Any, rdd: Any, stamps: dict, count: int, persisted: Any) -> None:
        self.session, self.rdd, self.stamps = session, rdd, stamps
        self.count, self.persisted = count, persisted

    def __repr__(self) -> str:
        return (f"<{self.count} row(s) fed to input '{self.session.name}' by "
                "insert_dataframe, on the executors>")


def fed_messages(records: Iterable, node: int, feed: int) -> Iterable:
    """Fed chunks as superstep messages `(src, seq, node, port, updates)`: source -2
    (before the driver's -1), sequence by feed then chunk, so a recomputed task
    receives them in the same order."""
    for dest, (_tag, (k, updates)) in records:
        yield dest, ("M", (-2, (feed << 32) + k, node, 0, updates))
