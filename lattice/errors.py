"""The one exception base of the project, defined at the bottom layer.

`lattice` sits below every other package and imports nothing from them, yet the
project promises a single `DataflowError` base that every typed error derives from.
So the base lives here and `ddflow.errors` re-exports it: `ddflow.DataflowError` is
the name users catch, and `lattice.errors.DataflowError` is the same class.
"""

from __future__ import annotations

from typing import Any


class DataflowError(Exception):
    """Base of every error ddflow raises on purpose.

    Carries, where known, the operator, the record and the time involved, so a
    message can name all three and a handler can inspect them.  An error raised by
    a `run()` also carries `inputs`: the session updates `(session, data, time,
    diff)` whose processing failed (`()` when none is to blame: the failing
    operator meets data already held, say a question added since the last run
    failing on what it imported;
    `None` where not determined).  `record` and `time` are what the failing
    operator saw, which past the first operator (a chain of maps, a join, a loop's
    round) is not what a session holds: `session.discard(err)` withdraws `inputs`.
    `accepted` lists those of `inputs` that an earlier run took at a time this run
    completes (no longer pending: `discard(err)` retracts them at their time).
    """

    inputs: tuple | None = None
    accepted: tuple = ()

    def __init__(self, message: str, *, operator: str | None = None,
                 record: Any = None, time: Any = None) -> None:
        parts = [message]
        if operator is not None:
            parts.append(f"operator: {operator}")
        if record is not None:
            parts.append(f"record: {record!r}")
        if time is not None:
            parts.append(f"time: {time!r}")
        super().__init__("; ".join(parts))
        self.message = message
        self.operator = operator
        self.record = record
        self.time = time


class TimeError(DataflowError):
    """A timestamp is misused: wrong lattice type, going backwards, or sorted by `<`."""
