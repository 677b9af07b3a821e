"""DataFrames in and out on the executors: the Spark engine's side of `ddflow.frames`.

Part of the Spark engine (`SparkEngine.feed_dataframe`, `SparkEngine.capture_dataframe`
call it; the front door finds those methods on the engine it runs, whatever engine
that is).  It isolates what runs on Spark's executors when a DataFrame meets the
dataflow: the rows are converted (`ddflow.frames`) and checked
(`ddflow.updates.checked_update`) where they are, and the driver sees a summary per
shard, never the rows.  pyspark is imported only when this code runs.

* In: every row becomes an update `(data, time, diff)`, checked as
  `InputSession.update_at` checks one, all or nothing: a bad row raises its typed
  error before any row of the frame is kept.  One Spark job converts and checks the
  rows, sends each update to the shard `shard_of(data)` names (the exchange an
  input's updates take), and persists them there in chunks; the driver collects
  only, per shard, a count and the minimal times (for progress tracking).  The next
  `run()` hands them to their shards (`SparkEngine.feed_rdd`).
* Out: a capture's consolidated updates as a DataFrame `(data, time, diff)`, or its
  accumulation at a final time `t` as `(data, count)`, built from the shards'
  captures on the executors.
"""

from __future__ import annotations

import operator
import pickle
from typing import Any, Iterable, Iterator

from lattice import Antichain, less_equal
from ddflow import frames
from ddflow.engine.superstep import dumps
from ddflow.errors import DataflowError
from ddflow.sharding import shard_of
from ddflow.updates import checked_update

#: Updates per record of a fed RDD: big enough that per-record costs vanish, small
#: enough that one record stays a few MB.
CHUNK = 20_000


def by_shard(key: int) -> int:
    """The partition function of every shard-keyed RDD.  One module-level object:
    Spark recognises equal partitioners by the identity of this function, and only
    then is a union of the driver's records and fed inputs narrow."""
    return key


# -- in ------------------------------------------------------------------------------

class _RowError:
    """A row's error on its way from an executor to the driver (first one wins)."""

    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


def _keyed_updates(rows: Iterable, data: list[int], time: int | None, diff: int | None,
                   session_time: Any, name: str, shards: int) -> Iterator[tuple]:
    """On an executor: `(shard, update)` per row, or one `(0, _RowError)` and stop."""
    for row in rows:
        try:
            u = checked_update(name, session_time, *frames.row_update(
                row, data, time, diff, session_time))
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


def shard_frame(session: Any, frame: Any, time: str | None, diff: str | None,
                shards: int) -> tuple[Any, Any, dict[int, list], int]:
    """Convert, check and shard the rows of `frame` for `session`'s input on the
    executors (one Spark job).  Returns `(chunks, persisted, stamps, count)`: the
    RDD of chunks for `SparkEngine.feed_rdd`, the persisted RDD it derives from,
    `{shard: minimal times}` and the number of rows; or raises the first bad row's
    typed error, keeping nothing."""
    from pyspark import StorageLevel
    data, t, d = frames.columns_of(session.name, frame.columns, time, diff)
    name, session_time = session.name, session.time
    keyed = frame.rdd.mapPartitions(
        lambda rows: _keyed_updates(rows, data, t, d, session_time, name, shards))
    fed = (keyed.partitionBy(shards, by_shard)
           .mapPartitionsWithIndex(_chunks, preservesPartitioning=True))
    fed.persist(StorageLevel.MEMORY_AND_DISK)
    summaries = fed.filter(_is_summary).map(lambda r: (r[0], r[1][1])).collect()
    errors = [s["error"] for _i, s in summaries if s["error"]]
    if errors:
        fed.unpersist()
        exc, cause = pickle.loads(errors[0])
        raise exc from cause
    stamps = {i: s["times"] for i, s in summaries if s["count"]}
    return fed.filter(_is_chunk), fed, stamps, sum(s["count"] for _i, s in summaries)


# -- out -----------------------------------------------------------------------------

def updates_frame(spark: Any, updates: Any, at: Any = None) -> Any:
    """The DataFrame of a capture whose updates are the RDD `updates` (not
    consolidated across shards): consolidated `(data, time, diff)`, or with `at`
    (a final time) the accumulation there, `(data, count)`."""
    if at is None:
        rows = (updates.map(lambda u: ((u[0], u[1]), u[2])).reduceByKey(operator.add)
                .filter(lambda kv: kv[1])
                .map(lambda kv: (kv[0][0], frames.value_of_time(kv[0][1]), kv[1])))
    else:
        rows = (updates.filter(lambda u: less_equal(u[1], at))
                .map(lambda u: (u[0], u[2])).reduceByKey(operator.add)
                .filter(lambda kv: kv[1]))
    return frames.to_dataframe(spark, rows, at is not None)
