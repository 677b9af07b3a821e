"""The typed errors of ddflow: one base, `DataflowError`, and a subclass per kind.

Every error names, where it knows them, the operator, the record and the time
involved (attributes `operator`, `record`, `time`, and in the message).  Errors
caught at a boundary (an input session, an argument) leave the dataflow unchanged;
errors raised while a step runs (a user function failing, a loop not converging)
roll the step back before they reach the caller (see `Dataflow.run`).
"""

from __future__ import annotations

from lattice.errors import DataflowError, TimeError


class DataError(DataflowError):
    """A record is unusable where it is: unhashable, or not a `(key, value)` pair
    where a keyed operator needs one."""


class DiffError(DataflowError):
    """A diff is not an element of the diff semiring in use."""


class CompactionError(DataflowError):
    """A trace's compaction frontier was asked to move backwards."""


class BatchError(DataflowError):
    """A batch's updates lie outside its own description (lower / upper frontiers)."""


class SessionClosedError(DataflowError):
    """An input session was used after `close()`."""


class GraphError(DataflowError):
    """The dataflow graph is built wrongly: collections of different dataflows or
    scopes mixed, a Variable set twice or never, building after the first run."""


class UserFunctionError(DataflowError):
    """A user-supplied function raised; the original exception is `__cause__`."""


class ConvergenceError(DataflowError):
    """An `iterate` loop reached `max_rounds` without reaching a fixpoint."""


class ProgressError(DataflowError):
    """Progress bookkeeping broke: a pointstamp was released that was never held
    (an engine bug, never a user's: please report it)."""


class EngineUnavailableError(DataflowError):
    """An engine cannot start: Spark or Java missing, master unreachable, ..."""


class ExecutorEnvironmentError(EngineUnavailableError):
    """Spark executors run, but cannot run ddflow: their Python cannot import the
    project, or is another version than the driver's.  The message names their
    interpreter and what it said."""


class StaleReadError(DataflowError):
    """A lazy read of an engine's state (a DataFrame or RDD of a capture made with
    `Capture.to_spark`) was evaluated after a later `run()` of its dataflow: it would
    read shards that have moved on.  Build it again after the run you want to read."""


class NotFinalError(DataflowError):
    """An output was read at a time that is not final yet: some input may still
    change it.  The message names the inputs to `advance_to` past the time (then
    `run()`); `Capture.at(t, partial=True)` reads the partial answer on purpose."""


class DataflowWarning(UserWarning):
    """Base of the warnings ddflow gives (filter them with this class)."""


class StalledRunWarning(DataflowWarning):
    """`run()` was given updates that no input frontier has passed: they wait in the
    dataflow until the inputs named `advance_to` a later time (or `close()`)."""


class NothingDiscardedWarning(DataflowWarning):
    """`discard()` matched no pending update (a time or diff that is not the pending
    one's, a record already withdrawn or run): nothing was withdrawn."""


__all__ = [
    "DataflowError", "TimeError", "DataError", "DiffError", "CompactionError",
    "BatchError", "SessionClosedError", "GraphError", "UserFunctionError",
    "ConvergenceError", "ProgressError", "EngineUnavailableError", "ExecutorEnvironmentError",
    "NotFinalError", "StaleReadError",
    "DataflowWarning", "StalledRunWarning", "NothingDiscardedWarning",
]
