"""Which session updates a failed `run()` comes from: `err.inputs`.

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

Three kinds of units are searched:
* **pending** updates, withdrawn from a trial by leaving them out;
* **fed** rows an engine holds where they were fed (`engine.fed()`, the Spark
  engine's DataFrame inputs, `ddflow.engine.fed`), withheld by the engine, and
  blamed as one unit each, `(session, rows, None, None)`;
* **accepted** updates (`session.open_updates`): taken by an earlier successful run
  at a time its frontier had not passed, so this run, whose `advance_to` completes
  that time, is the first to finish their work (a reduce evaluates a time once it
  is complete).  A trial "withdraws" one by its retraction at its own time, which
  the session's frontier at the last successful run still allows.  They join the
  search only when withdrawing every pending and fed unit cannot make the step run
  (then every unit is searched together, with a budget of its own: a failure may
  need both kinds withdrawn), and are listed in `err.accepted` as well, which
  `discard(err)` retracts.

What stays out of reach, so `err.inputs == ()` and `drop()` is the way on: data a
piece added since the last run imported; an update accepted at a time its own
input's frontier has since passed though another input held the time open (its
retraction would change answers already final); rows fed from a DataFrame that a
run has taken (they are the shards' alone).

The invariant it keeps, and what makes the recovery recipe true: the updates not
blamed were run together in one successful trial, so once the blamed ones are
withdrawn (`session.discard(err)`) the next `run()` does what that trial did (for
user functions that are functions of their arguments).  It costs about
`2 log2(n)` trials for one culprit among `n` pending updates, each a whole step,
and a few when a guess (the record or the key the error names) holds it; past
`MAX_TRIALS` a search blames the smallest withdrawal found to work so far.  User
functions are called again in the trials, as they are when a step is retried.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from ddflow.errors import (ConvergenceError, DataError, DataflowError, DiffError, TimeError,
                           UserFunctionError)

#: Errors of the data: a step without the right updates would not raise them.
BLAMED = (UserFunctionError, DataError, DiffError, TimeError, ConvergenceError)
#: Trials one search may run before it blames what is left untried as a whole.
MAX_TRIALS = 100

PENDING, FED, ACCEPTED = "pending", "fed", "accepted"


def blame(df: Any, err: DataflowError, taken: list) -> tuple[tuple, tuple] | None:
    """`(inputs, accepted)` for `err`, raised by a step given `taken` (`(session,
    updates)` pairs) and rolled back: the units whose processing raised it, each
    `(session, data, time, diff)` (fed rows `(session, rows, None, None)`), and those
    of them that an earlier run accepted (see the module's docstring).  `((), ())`
    if the step fails without any of them; None when not determined (an error that
    is not the data's).  The sessions are not touched."""
    if not isinstance(err, BLAMED):
        return None
    sessions = [s for s, _u in taken]
    fed = getattr(df.engine, "fed", None)
    units = [(s, u, PENDING) for s, updates in taken for u in updates]
    units += [(rows.session, rows, FED) for rows in (fed() if fed is not None else [])]
    units += [(s, u, ACCEPTED) for s in sessions for u in s.open_updates]
    budget = [MAX_TRIALS]
    runs_without = _trials(df, sessions, units, budget)
    first = [n for n, unit in enumerate(units) if unit[2] != ACCEPTED]
    accepted = len(first) < len(units)
    culprits = _search(runs_without, units, budget, err, first, give_up=accepted)
    if not culprits and accepted:
        budget[0] = MAX_TRIALS      # a budget of its own: the first may be spent
        culprits = _search(runs_without, units, budget, err, list(range(len(units))))
    inputs = tuple((s, u, None, None) if kind == FED else (s, *u)
                   for s, u, kind in (units[n] for n in culprits))
    return inputs, tuple(e for n, e in zip(culprits, inputs) if units[n][2] == ACCEPTED)


def _trials(df: Any, sessions: list, units: list,
            budget: list[int]) -> Callable[[list[int]], bool]:
    """`runs_without(withdrawn)`: whether the step runs without the units at those
    indices (pending ones left out, fed ones withheld, accepted ones retracted)."""
    def runs_without(withdrawn: list[int]) -> bool:
        budget[0] -= 1
        out = set(withdrawn)
        by_session: dict = {id(s): [] for s in sessions}
        held = []
        for n, (s, u, kind) in enumerate(units):    # each session's, in their order
            if kind == PENDING and n not in out:
                by_session[id(s)].append(u)
            elif kind == FED and n in out:
                held.append(u)
            elif kind == ACCEPTED and n in out:
                by_session[id(s)].append((u[0], u[1], -u[2]))
        try:
            with (df.engine.withholding(held) if held else contextlib.nullcontext()):
                df.engine.run(df, [(s, by_session[id(s)]) for s in sessions], keep=False)
            return True
        except DataflowError:
            return False
    return runs_without


def _search(runs_without: Callable[[list[int]], bool], units: list, budget: list[int],
            err: DataflowError, candidates: list[int], give_up: bool = False) -> list[int]:
    """Indices among `candidates` to blame: a guess whose withdrawal lets the step
    run (the smallest part of it that does), or else a smallest withdrawal found by
    `_ddmin`; [] if none does.  `give_up`: at once when withdrawing every
    candidate does not let the step run (a later search over more units follows)."""
    if not candidates:
        return []
    for guess in _guesses(err, units, candidates):
        if runs_without(guess):
            return _ddmin(guess, runs_without, budget, valid=True)
    if len(candidates) == 1:
        # The failed step itself was the trial with it; without it, does it run?
        return candidates if runs_without(candidates) else []
    valid = runs_without(candidates)
    if give_up and not valid:
        return []
    return _ddmin(candidates, runs_without, budget, valid=valid)


def _guesses(err: DataflowError, units: list, candidates: list[int]) -> list[list[int]]:
    """The likely culprits first: the updates among `candidates` of the record the
    failing operator names, at its time, then at any time (right when it is the
    first operator reading an input), then those of its key (a reduce names its
    group, `(key, values)`, and `(key, value)` records feed it)."""
    def same(a: Any, b: Any) -> bool:
        try:
            return bool(a == b)
        except Exception:  # noqa: BLE001 - a record whose equality does not answer
            return False
    plain = [n for n in candidates if units[n][2] != FED]
    of_record = [n for n in plain if same(units[n][1][0], err.record)]
    at_time = [n for n in of_record if same(units[n][1][1], err.time)]
    of_key: list[int] = []
    if type(err.record) is tuple and len(err.record) == 2:
        key = err.record[0]
        of_key = [n for n in plain if type(units[n][1][0]) is tuple and units[n][1][0]
                  and same(units[n][1][0][0], key)]
    guesses: list[list[int]] = []
    for g in (at_time, of_record, of_key):
        if g and g not in guesses:
            guesses.append(g)
    return guesses


def _ddmin(everything: list[int], runs_without: Any, budget: list[int],
           valid: bool | None = None) -> list[int]:
    """A 1-minimal set of updates whose withdrawal lets the step run (Zeller and
    Hildebrandt's ddmin over the withdrawn set): chunks, then their complements, at
    growing granularity.  Unlike adding updates one chunk at a time to a set known to
    run, it does not assume an update can only cause a failure: a reduce whose group
    is fine with two values and fails with one, or a pending retraction that mends a
    committed record, is blamed right.  `[]` when no withdrawal found lets it run
    (nothing pending is to blame); out of trials, the smallest valid set so far.
    `valid`: whether withdrawing `everything` lets it run, when already known."""
    if valid is None:
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
