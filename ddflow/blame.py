"""Which pending session updates a failed `run()` comes from: `err.inputs`.

What this isolates: the search for the updates to blame, by re-running the failed
step on parts of its pending updates (engine trials: `engine.run(df, taken,
keep=False)`, rolled back whatever happens; the sessions are not touched).
Provenance by re-execution rather than by lineage kept in every operator: errors
are rare, lineage would cost every record of every step.  The search is the ddmin of
Zeller and Hildebrandt ("Simplifying and isolating failure-inducing input", TSE
2002) over the set withdrawn: chunks of the pending updates, then their complements,
at growing granularity, until no smaller withdrawal lets the step run.  It assumes
nothing about monotonicity: an update may cause a failure (a bad record) or prevent
one (a second value a reduce's group needs, a retraction that mends a committed
record), and both are blamed right.  One trial comes first: without the pending
updates of the record the error names (what a first operator reading an input sees),
when that lets the rest run, those are the culprits.

The invariant it keeps, and what makes the recovery recipe true: the updates not
blamed were run together in one successful trial, so once the blamed ones are
withdrawn (`session.discard(err)`) the next `run()` does what that trial did (for
user functions that are functions of their arguments).  It costs about
`2 log2(n)` trials for one culprit among `n` pending updates, each a whole step;
past `MAX_TRIALS` the smallest withdrawal found to work so far is blamed.  User
functions are called again in the trials, as they are when a step is retried.
"""

from __future__ import annotations

import contextlib
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
    not the data's).  Rows an engine holds where they were fed (`engine.fed()`, the
    Spark engine's DataFrame inputs, `ddflow.engine.fed`) are tried and blamed as
    one unit each, `(session, rows, None, None)`.  The step was rolled back; the
    sessions are not touched."""
    if not isinstance(err, BLAMED):
        return None
    fed = getattr(df.engine, "fed", None)
    pending = [(s, u) for s, updates in taken for u in updates]
    n_updates = len(pending)
    pending += [(rows.session, rows) for rows in (fed() if fed is not None else [])]
    if not pending:
        return ()
    culprits = _search(df, [s for s, _u in taken], pending, n_updates,
                       _guesses(err, pending[:n_updates]))
    return tuple((pending[n][0], *pending[n][1]) if n < n_updates
                 else (pending[n][0], pending[n][1], None, None) for n in culprits)


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


def _search(df: Any, sessions: list, pending: list, n_updates: int,
            guesses: list) -> list[int]:
    """Indices into `pending` to blame (see the module's docstring): a guess whose
    withdrawal lets the rest run, or else a smallest withdrawal found by `_ddmin`.
    Entries from `n_updates` on are fed rows, withheld from a trial by the engine."""
    budget = [MAX_TRIALS]

    def runs_without(withdrawn: list[int]) -> bool:
        budget[0] -= 1
        out = set(withdrawn)
        by_session: dict = {id(s): [] for s in sessions}
        for n, (s, u) in enumerate(pending[:n_updates]):   # each session's, in order
            if n not in out:
                by_session[id(s)].append(u)
        held = [pending[n][1] for n in out if n >= n_updates]
        try:
            with (df.engine.withholding(held) if held else contextlib.nullcontext()):
                df.engine.run(df, [(s, by_session[id(s)]) for s in sessions], keep=False)
            return True
        except DataflowError:
            return False

    for guess in guesses:
        if runs_without(guess):
            return guess
    if len(pending) == 1:
        # The failed step itself was the trial with it; without it, does it run?
        return [0] if runs_without([0]) else []
    return _ddmin(list(range(len(pending))), runs_without, budget)


def _ddmin(everything: list[int], runs_without: Any, budget: list[int]) -> list[int]:
    """A 1-minimal set of updates whose withdrawal lets the step run (Zeller and
    Hildebrandt's ddmin over the withdrawn set): chunks, then their complements, at
    growing granularity.  Unlike adding updates one chunk at a time to a set known to
    run, it does not assume an update can only cause a failure: a reduce whose group
    is fine with two values and fails with one, or a pending retraction that mends a
    committed record, is blamed right.  `[]` when no withdrawal found lets it run
    (nothing pending is to blame); out of trials, the smallest valid set so far."""
    valid = runs_without(everything)
    blamed, n = everything, 2
    while len(blamed) >= 2 and budget[0] > 0:
        size = -(-len(blamed) // n)
        chunks = [blamed[i:i + size] for i in range(0, len(blamed), size)]
        for chunk in chunks:
            if budget[0] > 0 and runs_without(chunk):
                blamed, n, valid = chunk, 2, True
                break
        else:
            for chunk in (chunks if n > 2 else []):
                taken_out = set(chunk)
                rest = [i for i in blamed if i not in taken_out]
                if budget[0] > 0 and runs_without(rest):
                    blamed, n, valid = rest, max(n - 1, 2), True
                    break
            else:
                if n >= len(blamed):
                    break
                n = min(len(blamed), 2 * n)
    return blamed if valid else []
