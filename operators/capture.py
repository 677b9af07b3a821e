"""The capture sink and the read protocol every engine serves: `CaptureOp`, `read_since`.

This module isolates how an output's updates are recorded and read back in pieces,
as differential dataflow's `capture.rs` keeps capture and replay apart from any
consumer.  A `CaptureOp` appends each batch it receives to a journal; a reader holds
a `Cursor` ("n batches read, the last one was token k") and asks for what was
appended since (`read_since`, given every shard's journal; `journal_since` for one
shard, for engines that run it next to the shard).  It leaves out the reader the
user sees (`ddflow.capture.Capture`, built on this) and scheduling.

Invariant: a cursor never names a batch that is not in the journal it is read
against without the read saying so (`reset=True`): after a rollback a journal may
grow back past the same length with other batches, and the tokens tell them apart.
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from operator import itemgetter
from typing import Sequence

from operators.base import Operator

_data = itemgetter(0)

Cursor = tuple[tuple[int, int], ...]
"""Per worker: (batches read, token of the last batch read).  Opaque to readers."""


def _token(seed: int | None, previous: int) -> int:
    # Not a counter: a counter lives in the process, and the BSP and Spark engines
    # rebuild shards from pickles in other processes, where a counter restored with
    # the shard would hand out the same tokens again after a rollback.  Random
    # without a seed (the local engine); on a BSP shard, derived from the superstep
    # (`CaptureOp.seed`, a number never reused, even by a rolled-back run) and the
    # batch before, so that a shard rebuilt by replaying its logged supersteps hands
    # out the same tokens again.
    if seed is None:
        return int.from_bytes(os.urandom(8), "little")
    digest = hashlib.blake2b(f"{seed}:{previous}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class CaptureOp(Operator):
    """Sink recording every update it receives, in batches a reader can resume from.

    `updates` only grows (a rollback truncates it).  `marks` holds, per batch, the
    length of `updates` after it and a token, so that a cursor ("I have read n
    batches, the last one was token k") can tell the batch it read from another one
    that, after a rollback, grew the list back past the same length.  `seed`, when
    an engine sets it (`Worker.seed_tokens`), makes the tokens a function of it and
    of the batches before; None draws them at random.
    """

    _append_only = ("updates", "marks")

    def __init__(self, name: str = "capture") -> None:
        super().__init__(name)
        self.updates: list[tuple] = []
        self.marks: list[tuple[int, int]] = []
        self.seed: int | None = None

    def on_input(self, port: int, updates: list) -> None:
        self.records_in += len(updates)
        try:
            # Refuses unhashable data before keeping any: every record hashed in one
            # C-level pass (a consolidation only to find one cost 4% of a stream).
            deque(map(hash, map(_data, updates)), maxlen=0)
        except TypeError:
            self.consolidate(updates)       # raises the DataError naming the record
        if updates:
            self.updates.extend(updates)
            self.marks.append((len(self.updates),
                               _token(self.seed, self.marks[-1][1] if self.marks else 0)))

    @property
    def journal(self) -> tuple[list, list]:
        """`(marks, updates)`: what `read_since` needs (one attribute, so that the BSP
        engines fetch it from their shards in one job)."""
        return self.marks, self.updates


def read_since(journals: Sequence[tuple[list, list]], cursor: Cursor | None
               ) -> tuple[list, Cursor, bool]:
    """The updates appended to a capture's sinks since `cursor`: the engines'
    `captured_since`, given each worker's `CaptureOp.journal`.

    Returns `(updates, new cursor, reset)`.  `reset=True` means the updates are the
    whole history and the reader must drop what it built: the cursor is None, is
    for another number of workers, or names a batch that is no longer there (a step
    was rolled back after the read).

    >>> op = CaptureOp()
    >>> op.on_input(0, [("a", 0, 1)])
    >>> ups, cur, reset = read_since([op.journal], None)
    >>> ups, reset
    ([('a', 0, 1)], True)
    >>> op.checkpoint(); op.on_input(0, [("b", 1, 1)])
    >>> read_since([op.journal], cur)[::2]
    ([('b', 1, 1)], False)
    >>> mid = read_since([op.journal], cur)[1]
    >>> op.rollback(); op.on_input(0, [("c", 1, 1)])   # same length, another batch
    >>> read_since([op.journal], mid)[::2]
    ([('a', 0, 1), ('c', 1, 1)], True)
    """
    fresh = cursor is None or len(cursor) != len(journals)
    parts = [] if fresh else [journal_since(j, e) for j, e in zip(journals, cursor)]
    if fresh or any(ups is None for ups, _entry in parts):
        new_cursor = tuple(_entry(marks) for marks, _ups in journals)
        return [u for _marks, ups in journals for u in ups], new_cursor, True
    return [u for ups, _entry in parts for u in ups], tuple(e for _u, e in parts), False


def journal_since(journal: tuple[list, list], entry: tuple[int, int] | None
                  ) -> tuple[list | None, tuple[int, int]]:
    """One worker's part of `read_since`: the updates its journal appended since
    `entry` (a cursor's entry for it; None: from the start), or None if `entry` names
    a batch no longer there; and the entry for the journal as it is now.  Engines
    whose shards live elsewhere run this next to the shard, so that only the new
    updates travel.

    >>> journal_since(([(1, 7), (3, 9)], ["a", "b", "c"]), (1, 7))
    (['b', 'c'], (2, 9))
    >>> journal_since(([(1, 8)], ["a"]), (1, 7))[0] is None
    True
    """
    marks, ups = journal
    now = _entry(marks)
    if entry is None:
        return list(ups), now
    n, token = entry
    if n and not (len(marks) >= n and marks[n - 1][1] == token):
        return None, now
    return ups[marks[n - 1][0] if n else 0:], now


def _entry(marks: list) -> tuple[int, int]:
    return len(marks), marks[-1][1] if marks else 0


__all__ = ["CaptureOp", "Cursor", "journal_since", "read_since"]
