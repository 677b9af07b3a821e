"""A step's progress in the logs: what a BSP engine did, superstep by superstep.

On Spark one `run()` can take seconds to minutes; without a word in the logs a user
cannot tell a slow step from a hung one.  `StepLog` writes to a python logger (the
Spark engine's is `ddflow.spark`, the in-process BSP engine's `ddflow.bsp`):

* DEBUG, per superstep: its number, the exchange rounds it ran (an engine that runs
  several per Spark job reports them in its infos as `rounds`), the shards that
  worked, the records they sent to other shards, the Spark jobs so far, seconds;
* INFO, per run: supersteps, rounds, records moved, jobs, seconds, and whether it
  failed (the error itself reaches the caller).

It only reads the infos the shards report; it never changes what a step does.
"""

from __future__ import annotations

import logging
import time
from typing import Any


class StepLog:
    """The progress of one `run()`; `superstep` after each, `end` once."""

    def __init__(self, logger: logging.Logger, jobs: int = 0) -> None:
        self.log = logger
        self.t0 = self.last = time.perf_counter()
        self.jobs0 = jobs
        self.supersteps = self.rounds = self.records = 0

    def superstep(self, infos: list[dict], jobs: int = 0) -> None:
        now = time.perf_counter()
        self.supersteps += 1
        rounds = max((i.get("rounds", 1) for i in infos), default=1)
        records = sum(i.get("sent_records", 0) for i in infos)
        busy = sum(1 for i in infos if not i.get("skipped"))
        self.rounds += rounds
        self.records += records
        if self.log.isEnabledFor(logging.DEBUG):
            self.log.debug("superstep %d: %d round(s), %d of %d shard(s) busy, %d record(s) "
                           "sent, %d Spark job(s) so far, %.3f s", self.supersteps, rounds,
                           busy, len(infos), records, jobs - self.jobs0, now - self.last)
        self.last = now

    def end(self, jobs: int = 0, error: BaseException | None = None) -> None:
        self.log.log(logging.WARNING if error else logging.INFO,
                     "run %s: %d superstep(s), %d round(s), %d record(s) moved, "
                     "%d Spark job(s), %.3f s%s",
                     "failed and was rolled back" if error else "done",
                     self.supersteps, self.rounds, self.records, jobs - self.jobs0,
                     time.perf_counter() - self.t0,
                     f" ({type(error).__name__})" if error else "")

    def summary(self) -> dict[str, Any]:
        return {"supersteps": self.supersteps, "rounds": self.rounds,
                "records": self.records}
