"""DataFrames in and out: feed a collection from a Spark DataFrame, turn a capture into one.

Part of the Spark engine: the only other module that imports pyspark (lazily).

* `feed_dataframe(session, frame, time=None, diff=None)`: every row becomes an update
  `(data, time, diff)`; `data` is the row's other columns (one column: its value;
  several: a tuple in column order); the time and diff columns are optional
  (defaults: the session's current time, +1).  Rows stream to the driver with
  `toLocalIterator` and go through the session's checks, all or nothing: a bad row
  raises before any row of the frame is kept.
* `capture_to_spark(capture, spark)` / `capture_to_pandas(capture)`: the capture's
  consolidated updates as rows `(data, time, diff)`; tuple data become a struct,
  lattice times their `repr` (ints stay ints).
"""

from __future__ import annotations

from typing import Any

from ddflow.errors import DataError, EngineUnavailableError


def _row_update(row: Any, columns: list[str], time_col: str | None, diff_col: str | None,
                default_time: Any) -> tuple:
    values = [row[c] for c in columns]
    data = values[0] if len(values) == 1 else tuple(values)
    return (data, row[time_col] if time_col else default_time,
            row[diff_col] if diff_col else 1)


def feed_dataframe(session: Any, frame: Any, time: str | None = None,
                   diff: str | None = None) -> int:
    """Add every row of the Spark DataFrame `frame` to `session`; returns the count."""
    columns = [c for c in frame.columns if c not in (time, diff)]
    for name in (time, diff):
        if name is not None and name not in frame.columns:
            raise DataError(f"the DataFrame has no column {name!r} (columns: {frame.columns})",
                            operator=session.name)
    if not columns:
        raise DataError("the DataFrame has no data column besides time and diff",
                        operator=session.name)
    updates = [_row_update(r, columns, time, diff, session.time) for r in frame.toLocalIterator()]
    session.extend(updates)
    return len(updates)


def _rows(capture: Any) -> list[tuple]:
    return [(d, t if type(t) is int else repr(t), r) for d, t, r in capture.updates]


def capture_to_spark(capture: Any, spark: Any) -> Any:
    """The capture's updates as a Spark DataFrame with columns data, time, diff."""
    rows = _rows(capture)
    if not rows:
        from pyspark.sql.types import LongType, StringType, StructField, StructType
        schema = StructType([StructField("data", StringType()), StructField("time", LongType()),
                             StructField("diff", LongType())])
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(rows, ["data", "time", "diff"])


def capture_to_pandas(capture: Any) -> Any:
    """The capture's updates as a pandas DataFrame with columns data, time, diff."""
    try:
        import pandas as pd
    except ImportError as exc:
        raise EngineUnavailableError("pandas is not installed: `pip install pandas` to get "
                                     "captures as pandas DataFrames") from exc
    return pd.DataFrame(_rows(capture), columns=["data", "time", "diff"])
