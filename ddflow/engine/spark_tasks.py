"""What runs inside the Spark engine's tasks, on the executors' Python workers.

A superstep's task (`task`), the reads of shards where they live (`each_shard` with
a `Reader`, `captured`, `journal_part`), and the heap care of a Python worker that
keeps millions of resident objects (`settle_heap`).  The driver side, which builds
the jobs out of these, is `ddflow.engine.spark`.
"""

from __future__ import annotations

import gc
import pickle
from typing import Any, Iterable

from ddflow.engine.bsp import open_worker, read_op
from ddflow.engine.shard_log import RESIDENT, ShardLog
from ddflow.engine.superstep import Stage, dumps, shard_superstep
from ddflow.errors import EngineUnavailableError, StaleReadError
from operators.capture import journal_since

#: Tasks between two full collections of this Python worker's frozen objects.
FULL_COLLECTION_EVERY = 500
_tasks_run = 0


def task(stage: Stage, index: int, records: Iterable) -> Iterable:
    """One Spark task: shard `index`'s superstep (`superstep.shard_superstep`), its
    worker kept in this Python worker process (`shard_log.RESIDENT`)."""
    yield from shard_superstep(index, records, stage, RESIDENT)
    settle_heap()


def settle_heap() -> None:
    """Move what this process holds now out of the cyclic collector's sight.

    The resident workers are millions of long-lived objects, and every full
    collection walked them all and found nothing (measured at 100k edges: 388 full
    collections, none collecting an object, 193 s of a 5-minute run; a dropped
    worker leaves no cycle, refcounting frees it).  `gc.freeze` spares them; a full
    collection now and then still reclaims any cycle a user function left."""
    global _tasks_run
    _tasks_run += 1
    if _tasks_run % FULL_COLLECTION_EVERY == 0:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


def records_of(records: list) -> list:
    return records


def is_state(r: tuple) -> bool:
    return r[1][0] == "S"


def payload(r: tuple) -> Any:
    return r[1][1]


def each_shard(log: ShardLog, records: Any, settle: bool, current: str | None,
                tokens: Iterable) -> Iterable:
    """`records(worker)` of each shard whose token comes in, its worker loaded as a
    superstep loads it (and kept; `settle`: without undo records).  `current`: the
    store name of the driver's current versions, checked first by a read that may
    be evaluated long after it was made (a DataFrame's lineage)."""
    tokens = list(tokens)
    if current is not None:
        require_current(log, current, tokens)
    for token in tokens:
        yield from records(open_worker(log, token, RESIDENT, settle))
    settle_heap()


def require_current(log: ShardLog, current: str, tokens: list) -> None:
    try:
        versions = pickle.loads(log.store.get(current))
    except (FileNotFoundError, KeyError):
        raise EngineUnavailableError(
            "this DataFrame reads a capture of a Spark engine that was stopped: its "
            "shards are gone (materialize it, say with .cache() and .count(), before "
            "stop())") from None
    for token in tokens:
        if versions[token.shard] != token.version:
            raise StaleReadError(
                f"this DataFrame was made from a capture before a later run() of its "
                f"dataflow (shard {token.shard} is at superstep {versions[token.shard]}, "
                f"the DataFrame read superstep {token.version}): make it again with "
                f"capture.to_spark(spark) after the run whose answer you want")


def keyed(transform: Any, worker: Any) -> list:
    return [(worker.shards[0], transform(worker))]


class Reader:
    """A picklable `worker -> value`: operator `i`'s `attr`, or the pickled worker."""

    def __init__(self, i: int | None = None, attr: Any = None) -> None:
        self.i, self.attr = i, attr

    def __call__(self, worker: Any) -> Any:
        return dumps(worker) if self.i is None else read_op(worker, self.i, self.attr)


def forget(uid: str, _: Any) -> Iterable:
    RESIDENT.drop(uid)
    return []


def captured(i: int, worker: Any) -> list:
    return worker.ops[0][i].updates


def journal_part(i: int, entries: Any, worker: Any) -> Any:
    shard = worker.shards[0]
    return journal_since(worker.ops[0][i].journal,
                         entries[shard] if entries is not None else None)
