"""DataFrames in and out: feed a collection from a Spark DataFrame, turn a capture into one.

Part of the Spark engine: the only other module that imports pyspark (lazily).  It
isolates the conversion between rows and update triples, and keeps it on the
executors when the dataflow runs on Spark: the driver sees a summary per shard,
never the rows.

* `feed_dataframe(session, frame, time=None, diff=None)`: every row becomes an update
  `(data, time, diff)`; `data` is the row's other columns (one column: its value;
  several: a tuple in column order); the time and diff columns are optional
  (defaults: the session's time, +1; a struct of two fields is a `Product` time).  Each row is checked as `InputSession.update_at`
  checks one (`ddflow.input.checked_update`), all or nothing: a bad row raises
  its typed error before any row of the frame is kept.
  - On a `SparkEngine`: one Spark job converts and checks the rows on the executors,
    sends each update to the shard `shard_of(data)` names (the exchange an input's
    updates take), and persists them there in chunks; the driver collects only, per
    shard, a count and the minimal times (for progress tracking).  The next `run()`
    hands them to their shards (`SparkEngine.feed_rdd`).
  - On any other engine, the rows stream to the driver (`toLocalIterator`).
* `capture_to_spark(capture, spark, at=None)`: the capture's consolidated updates as
  a DataFrame `(data, time, diff)`, or with `at=t` its accumulation at `t` as
  `(data, count)`; built on the executors from the shards' captures on a
  `SparkEngine`, from the driver's copy otherwise.  Tuple data become a struct;
  times are ints, `Product`s structs (as they come in), other lattices their `repr`.
"""

from __future__ import annotations

import operator
from typing import Any, Iterable, Iterator

from lattice import Antichain, Product, less_equal
from ddflow.input import checked_update
from ddflow.errors import DataError, DataflowError, EngineUnavailableError
from ddflow.sharding import shard_of

#: Updates per record of a fed RDD: big enough that per-record costs vanish, small
#: enough that one record stays a few MB.
CHUNK = 20_000


# -- in ------------------------------------------------------------------------------

def _columns(session: Any, frame: Any, time: str | None, diff: str | None) -> list[int]:
    for name in (time, diff):
        if name is not None and name not in frame.columns:
            raise DataError(f"the DataFrame has no column {name!r} (columns: {frame.columns})",
                            operator=session.name)
    data = [i for i, c in enumerate(frame.columns) if c not in (time, diff)]
    if not data:
        raise DataError("the DataFrame has no data column besides time and diff",
                        operator=session.name)
    return data


def _row_update(row: Any, data: list[int], time: int | None, diff: int | None,
                default_time: Any) -> tuple:
    values = [row[i] for i in data]
    return (values[0] if len(values) == 1 else tuple(values),
            default_time if time is None else time_of_value(row[time]),
            1 if diff is None else row[diff])


def time_of_value(value: Any) -> Any:
    """A time from a DataFrame value: an int as it is, a struct (a pair) as the
    `Product` of its two fields' times (anything else is left for the time check).

    >>> time_of_value(3), time_of_value((1, (2, 0)))
    (3, Product(1, Product(2, 0)))
    """
    if isinstance(value, tuple) and len(value) == 2:
        return Product(time_of_value(value[0]), time_of_value(value[1]))
    return value


def value_of_time(t: Any) -> Any:
    """The inverse for output: ints stay ints, a `Product` becomes a pair (a struct in
    the DataFrame), any other time its `repr`.

    >>> value_of_time(Product(1, Product(2, 0))), value_of_time(4)
    ((1, (2, 0)), 4)
    """
    if type(t) is int:
        return t
    if type(t) is Product:
        return (value_of_time(t[0]), value_of_time(t[1]))
    return repr(t)


def feed_dataframe(session: Any, frame: Any, time: str | None = None,
                   diff: str | None = None) -> int:
    """Add every row of the Spark DataFrame `frame` to `session`; returns the count."""
    data = _columns(session, frame, time, diff)
    t = None if time is None else frame.columns.index(time)
    d = None if diff is None else frame.columns.index(diff)
    from ddflow.engine.spark import SparkEngine
    engine = session.dataflow.engine
    if isinstance(engine, SparkEngine):
        session._check_open("insert_dataframe", None, None)
        return _feed_on_executors(engine, session, frame, data, t, d)
    updates = [_row_update(r, data, t, d, session.time) for r in frame.toLocalIterator()]
    session.extend(updates)
    return len(updates)


class _RowError:
    """A row's error on its way from an executor to the driver (first one wins)."""

    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


def _keyed_updates(rows: Iterable, data: list[int], time: int | None, diff: int | None,
                   session_time: Any, name: str, shards: int) -> Iterator[tuple]:
    """On an executor: `(shard, update)` per row, or one `(0, _RowError)` and stop."""
    from ddflow.engine.bsp import dumps
    for row in rows:
        try:
            u = checked_update(name, session_time, *_row_update(row, data, time, diff,
                                                                session_time))
            yield shard_of(u[0], shards), u
        except DataflowError as exc:
            yield 0, _RowError(dumps((exc, exc.__cause__)))
            return


def _chunks(index: int, records: Iterable) -> Iterator[tuple]:
    """On an executor, after the exchange: the shard's updates in chunks
    `(index, ("B", (k, updates)))`, then its summary `(index, ("T", {...}))`."""
    chunk: list = []
    k = count = 0
    low = None                       # the least time while every time is an int
    times: set = set()               # the times otherwise
    error = None
    for _key, u in records:
        if type(u) is _RowError:
            error = error or u.payload
            continue
        t = u[1]
        if type(t) is int and not times:
            if low is None or t < low:
                low = t
        else:
            times.add(t)
        chunk.append(u)
        count += 1
        if len(chunk) >= CHUNK:
            yield index, ("B", (k, chunk))
            k, chunk = k + 1, []
    if chunk:
        yield index, ("B", (k, chunk))
    if low is not None:
        times.add(low)
    yield index, ("T", {"count": count, "times": list(Antichain(times)), "error": error})


def _is_summary(r: tuple) -> bool:
    return r[1][0] == "T"


def _is_chunk(r: tuple) -> bool:
    return r[1][0] == "B"


def _feed_on_executors(engine: Any, session: Any, frame: Any, data: list[int],
                       time: int | None, diff: int | None) -> int:
    from pyspark import StorageLevel
    from ddflow.engine.spark import by_shard
    engine._prepare()
    shards = engine.fix_shards()
    name, session_time = session.name, session.time
    keyed = frame.rdd.mapPartitions(
        lambda rows: _keyed_updates(rows, data, time, diff, session_time, name, shards))
    fed = (keyed.partitionBy(shards, by_shard)
           .mapPartitionsWithIndex(_chunks, preservesPartitioning=True))
    fed.persist(StorageLevel.MEMORY_AND_DISK)
    summaries = fed.filter(_is_summary).map(lambda r: (r[0], r[1][1])).collect()
    engine.jobs += 1
    errors = [s["error"] for _i, s in summaries if s["error"]]
    if errors:
        fed.unpersist()
        import pickle
        exc, cause = pickle.loads(errors[0])
        raise exc from cause
    stamps = {i: s["times"] for i, s in summaries if s["count"]}
    count = sum(s["count"] for _i, s in summaries)
    if count:
        engine.feed_rdd(session, fed.filter(_is_chunk), stamps, count, persisted=fed)
    else:
        fed.unpersist()
    return count


# -- out -----------------------------------------------------------------------------

def _rows(updates: Iterable[tuple]) -> list[tuple]:
    return [(d, value_of_time(t), r) for d, t, r in updates]


def _empty(spark: Any, at: Any) -> Any:
    from pyspark.sql.types import LongType, StringType, StructField, StructType
    fields = [StructField("data", StringType())]
    fields += ([StructField("count", LongType())] if at is not None else
               [StructField("time", LongType()), StructField("diff", LongType())])
    return spark.createDataFrame([], StructType(fields))


def capture_to_spark(capture: Any, spark: Any, at: Any = None) -> Any:
    """The capture's updates as a Spark DataFrame with columns data, time, diff; with
    `at` (a final time, checked by `Capture.to_spark`), the accumulation there with
    columns data, count."""
    from ddflow.engine.spark import SparkEngine
    columns = ["data", "count"] if at is not None else ["data", "time", "diff"]
    engine = capture.dataflow.engine
    if isinstance(engine, SparkEngine) and capture.dataflow._compiled:
        updates = engine.captured_rdd(capture.node)
        if at is None:
            rows = (updates.map(lambda u: ((u[0], u[1]), u[2])).reduceByKey(operator.add)
                    .filter(lambda kv: kv[1])
                    .map(lambda kv: (kv[0][0], value_of_time(kv[0][1]), kv[1])))
        else:
            rows = (updates.filter(lambda u: less_equal(u[1], at))
                    .map(lambda u: (u[0], u[2])).reduceByKey(operator.add)
                    .filter(lambda kv: kv[1]))
        try:
            return spark.createDataFrame(rows, columns)
        except ValueError as exc:
            if "empty" not in str(exc):
                raise
            return _empty(spark, at)
    rows = (_rows(capture.updates) if at is None
            else list(capture.at(at).items()))
    return spark.createDataFrame(rows, columns) if rows else _empty(spark, at)


def capture_to_pandas(capture: Any) -> Any:
    """The capture's updates as a pandas DataFrame with columns data, time, diff."""
    try:
        import pandas as pd
    except ImportError as exc:
        raise EngineUnavailableError("pandas is not installed: `pip install pandas` to get "
                                     "captures as pandas DataFrames") from exc
    return pd.DataFrame(_rows(capture.updates), columns=["data", "time", "diff"])
