"""Which pending session updates a failed `run()` comes from: `err.inputs`.

What this isolates: the search for the updates to blame, by re-running the failed
step on parts of its pending updates (engine trials: `engine.run(df, taken,
keep=False)`, rolled back whatever happens; the sessions are not touched).
Provenance by re-execution rather than by lineage kept in every operator: errors
are rare, lineage would cost every record of every step.  It is the delta debugging of Zeller and Hildebrandt ("Simplifying and
isolating failure-inducing input", TSE 2002) in its greedy form: updates are added
chunk by chunk to a set known to run, a chunk that fails is halved until single
updates are left, and those are the culprits.  One trial comes first: without the
pending updates of the record the error names (what a first operator reading an
input sees), when that lets the rest run, those are the culprits.

The invariant it keeps, and what makes the recovery recipe true: the updates not
blamed were run together in one successful trial, so once the blamed ones are
withdrawn (`session.discard(err)`) the next `run()` does what that trial did (for
user functions that are functions of their arguments).  It costs about
`2 log2(n)` trials per culprit among `n` pending updates, each a whole step; past
`MAX_TRIALS` the updates not yet tried are blamed as a whole (withdrawing them
still lets the rest run).  User functions are called again in the trials, as they
are when a step is retried.
"""

from __future__ import annotations

from typing import Any

from ddflow.errors import (ConvergenceError, DataError, DataflowError, DiffError, TimeError,
                           UserFunctionError)

#: Errors of the data: a step without the right updates would not raise them.
BLAMED = (UserFunctionError, DataError, DiffError, TimeError, ConvergenceError)
#: Trials one search may run before it blames what is left untried as a whole.
MAX_TRIALS = 100


def blame(df: Any, err: DataflowError, taken: list) -> tuple | None:
    """The updates of `taken` (the `(session, updates)` the failed step was given)
    whose processing raised `err`, as `(session, data, time, diff)`; `()` if the
    step fails without any of them, or None when not determined (an error that is
    not the data's).  The step was rolled back; the sessions are not touched."""
    if not isinstance(err, BLAMED):
        return None
    pending = [(s, u) for s, updates in taken for u in updates]
    if not pending:
        return ()
    culprits = _search(df, [s for s, _u in taken], pending, _guesses(err, pending))
    return tuple((pending[n][0], *pending[n][1]) for n in culprits)


def _guesses(err: DataflowError, pending: list) -> list[list[int]]:
    """The likely culprits first: the pending updates of the record the failing
    operator names, at its time, then at any time (right when it is the first
    operator reading an input)."""
    def same(a: Any, b: Any) -> bool:
        try:
            return bool(a == b)
        except Exception:  # noqa: BLE001 - a record whose equality does not answer
            return False
    of_record = [n for n, (_s, u) in enumerate(pending) if same(u[0], err.record)]
    at_time = [n for n in of_record if same(pending[n][1][1], err.time)]
    return [g for k, g in enumerate((at_time, of_record)) if g and (k == 0 or g != at_time)]


def _search(df: Any, sessions: list, pending: list, guesses: list) -> list[int]:
    """Indices into `pending` to blame (see the module's docstring): a guess whose
    withdrawal lets the rest run, or else the greedy search."""
    budget = [MAX_TRIALS]
    good: list[int] = []

    def runs(chosen: list[int]) -> bool:
        budget[0] -= 1
        by_session: dict = {id(s): [] for s in sessions}
        for n in sorted(chosen):            # each session's updates in their order
            by_session[id(pending[n][0])].append(pending[n][1])
        try:
            df.engine.run(df, [(s, by_session[id(s)]) for s in sessions], keep=False)
            return True
        except DataflowError:
            return False

    def search(chunk: list[int]) -> list[int]:
        if budget[0] <= 0:
            return chunk                    # out of trials: blamed as a whole
        if runs(good + chunk):
            good.extend(chunk)
            return []
        if len(chunk) == 1:
            return chunk
        mid = len(chunk) // 2
        return search(chunk[:mid]) + search(chunk[mid:])

    everything = list(range(len(pending)))
    for guess in guesses:
        withdrawn = set(guess)
        if runs([n for n in everything if n not in withdrawn]):
            return guess
    if not runs([]):
        return []                           # it fails with no pending update at all
    if len(everything) == 1:
        return everything                   # the failed step itself was the trial
    mid = len(everything) // 2
    return search(everything[:mid]) + search(everything[mid:])
