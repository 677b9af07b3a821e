"""Scope boundaries and feedback: the operators that make `iterate` work.

Inside a loop, times are `Product(outer, round)`.  `Enter` brings an outer
collection in at round 0 (`EnterAt` at a round chosen per record); `Leave` drops
the round, so the outer collection accumulates every round's changes, which sum to
the loop's limit; `Feedback` carries a collection to the next round.  All three are
linear; what sets them apart is how they move *time*, which progress tracking
reads from `summary`.

The fixpoint law: a variable `x` set to `f(x)` satisfies, at every `(outer, r)`,
`acc(x, (o, r + 1)) = acc(f(x), (o, r))`, and `leave` yields the limit.

`Feedback` also watches convergence: a change that would enter round
`max_rounds + 1` either raises `ConvergenceError` naming the loop, the outer time,
the round and the last changes (and whether they recur with a period, the signature
of an oscillating loop), or with `on_limit="truncate"` is dropped.  What it keeps
for that is bounded: the last rounds' changes of an outer time, only near the limit,
and only until the input frontier has passed that outer time.  It also keeps a log of
the most recent `LOG_ENTRIES` (outer time, round) entries for round-by-round views
(`Dataflow.loop_rows()`), a ring, so a long-running loop neither grows it nor makes a
step record more than the entries it wrote.

>>> from lattice import Product as P
>>> fb = Feedback(max_rounds=10, name="loop")
>>> fb.on_input(0, [("x", P(0, 3), 1), ("y", P(0, 3), 1), ("y", P(0, 3), -1)])
>>> fb.on_frontier([Antichain([P(0, 4)])])
>>> fb.take_output()
[('x', Product(0, 4), 1)]
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Iterator, Sequence

from lattice import Antichain, Product, less_equal, sort_key
from operators.base import Operator, Update, as_rows
from ddflow import columnar
from ddflow.columnar import Columns
from operators.undo import UndoDict
from ddflow.errors import ConvergenceError
from ddflow.summaries import ENTER, LEAVE, NEXT_ROUND
from ddflow.updates import consolidate, entered

#: Records kept per (outer time, round) in the loop log, for display.
LOG_SAMPLE = 12
#: (outer time, round) entries the loop log keeps, the most recent ones: enough for
#: every round of the last few outer times of the loops the notebooks and benchmarks
#: draw, and a bound on the memory of a loop fed for ever.
LOG_ENTRIES = 4096
#: Rounds of history kept near the limit to recognise an oscillation.
_PERIOD_WINDOW = 8


class Enter(Operator):
    """`t -> Product(t, 0)`: an outer collection seen inside a loop."""

    summary = ENTER
    takes_columns = True

    def __init__(self, name: str = "enter") -> None:
        super().__init__(name)

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        if type(updates) is Columns:
            # Int times gain a round column; times already Products stay rows.
            self.emit(entered(as_rows(updates)) if updates.product
                      else columnar.entered(updates))
            return
        self.emit(entered(updates))



class EnterAt(Enter):
    """`t -> Product(t, round_of(record))`: records enter at chosen rounds."""

    takes_columns = False

    def __init__(self, round_of: Callable[[Any], int], name: str = "enter_at") -> None:
        super().__init__(name)
        self.round_of = round_of

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        out = []
        for d, t, r in updates:
            try:
                rnd = self.round_of(d)
            except Exception as exc:  # noqa: BLE001 - user code
                raise self.user_error(exc, d, t) from exc
            if type(rnd) is not int or rnd < 0:
                raise self.user_error(ValueError(f"round must be an int >= 0, got {rnd!r}"), d, t)
            out.append((d, Product(t, rnd), r))
        self.emit(out)


class Leave(Operator):
    """`Product(t, r) -> t`: the loop's changes of every round, seen outside."""

    summary = LEAVE

    def __init__(self, name: str = "leave") -> None:
        super().__init__(name)

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        self.emit([(d, t.outer, r) for d, t, r in updates])



class Feedback(Operator):
    """`Product(o, r) -> Product(o, r + 1)`, with the loop's convergence guard.

    A round's changes are held until that time is complete at the feedback's input,
    then consolidated and passed on: the variable feeds back `result - source`, whose
    halves may arrive in different passes, and what cancels must not travel (nor be
    logged as a change).
    """

    _state = ("_log", "_log_next", "_recent", "truncated")
    _append_only = ("_held",)       # extended, then swapped for the updates still held
    _private_buffers = _append_only
    _caches = ("_caps",)
    summary = NEXT_ROUND

    def __init__(self, max_rounds: int | None = None, on_limit: str = "raise",
                 name: str = "feedback", loop: str | None = None) -> None:
        if on_limit not in ("raise", "truncate"):
            raise ValueError(f"on_limit must be 'raise' or 'truncate', not {on_limit!r}")
        super().__init__(name)
        #: The loop as the user built it (`iterate(..., name=...)`), which errors
        #: name; the variable `name` only when the two differ.
        self.loop = loop or name
        self.max_rounds = max_rounds
        self.on_limit = on_limit
        # The loop log, a ring: slot -> ((outer time, round), changes, sample), the
        # entry numbered n in slot n % LOG_ENTRIES; `_log_next` numbers the next one.
        self._log: dict[int, tuple] = UndoDict()
        self._log_next = 0
        # outer time -> its last rounds' changes, kept near the limit only.
        self._recent: dict[Any, deque] = UndoDict()
        self._held: list[Update] = []
        self.truncated = 0

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        self._held.extend(updates)
        self._caps = None

    def capabilities(self) -> list:
        return self.pending_capabilities(_next_rounds(self._held))

    def wants_frontier(self) -> bool:
        return bool(self._held)

    def on_frontier(self, frontiers: Sequence[Antichain]) -> None:
        frontier = frontiers[0]
        if self._held:
            ready, rest = [], []
            for u in self._held:
                (rest if frontier.less_equal(u[1]) else ready).append(u)
            self._held = rest
            if ready:
                self._caps = None
            if ready:
                self._forward(self.consolidate(ready))
        if self._recent:
            self._forget_finished(frontier)

    def _forward(self, updates: list[Update]) -> None:
        out = []
        limit = self.max_rounds
        entries: dict[tuple, list] = {}     # (outer, round) -> [changes, sample]
        nexts: dict = {}        # one next time per distinct time, not one per update
        for d, t, r in updates:
            nxt = nexts.get(t)
            if nxt is None:
                nxt = nexts[t] = Product(t.outer, t.inner + 1)
            if limit is not None and nxt.inner > limit:
                if self.on_limit == "truncate":
                    self.truncated += 1
                    continue
                raise self._not_converged(t.outer, nxt.inner, updates)
            entry = entries.get((t.outer, nxt.inner))
            if entry is None:
                entries[(t.outer, nxt.inner)] = [1, [(d, r)]]
            else:
                entry[0] += 1
                if len(entry[1]) < LOG_SAMPLE:
                    entry[1].append((d, r))
            out.append((d, nxt, r))
        # A time is forwarded once, when it is complete: each (outer, round) gets
        # one entry, appended to the ring (the oldest entry gives way).
        for key, (n, sample) in entries.items():
            self._log[self._log_next % LOG_ENTRIES] = (key, n, tuple(sample))
            self._log_next += 1
        if limit is not None:
            self._remember(out)
        self.emit(out)

    @property
    def log(self) -> dict[tuple, tuple]:
        """The loop log, oldest entry first: (outer time, round) -> (changes, sample
        of changed records), for the most recent `LOG_ENTRIES` (outer time, round)."""
        ring, n = self._log, self._log_next
        out: dict[tuple, tuple] = {}
        for seq in range(max(0, n - LOG_ENTRIES), n):
            key, changes, sample = ring[seq % LOG_ENTRIES]
            if key in out:      # not expected (see _forward); merged all the same
                c0, s0 = out[key]
                changes, sample = c0 + changes, (s0 + sample)[:LOG_SAMPLE]
            out[key] = (changes, sample)
        return out


    # -- convergence diagnostics ----------------------------------------------
    def _remember(self, out: list[Update]) -> None:
        """Keep the last rounds' changes per outer time, only near the limit."""
        near = self.max_rounds - 2 * _PERIOD_WINDOW
        by_time: dict[Any, list] = {}
        for d, t, r in out:
            if t.inner > near:
                by_time.setdefault((t.outer, t.inner), []).append((d, r))
        recent = self._recent
        for (outer, rnd), changes in by_time.items():
            q = recent.touch(outer)
            if q is None:
                q = recent[outer] = deque(maxlen=2 * _PERIOD_WINDOW + 1)
            q.append((rnd, frozenset(_sum_changes(changes).items())))

    def _forget_finished(self, frontier: Antichain) -> None:
        """Drop the windows of outer times the input frontier has passed: no change
        can reach them any more, so no diagnostic will ask for them."""
        recent = self._recent
        for outer in [o for o in recent
                      if not any(less_equal(f.outer, o) for f in frontier.elements)]:
            del recent[outer]

    def _not_converged(self, outer: Any, rnd: int, updates: list[Update]) -> ConvergenceError:
        last = consolidate([(d, t.inner + 1, r) for d, t, r in updates if t.outer == outer])
        history = list(self._recent.get(outer, ()))
        period = _period(history)
        variable = f" (variable '{self.name}')" if self.name != self.loop else ""
        msg = (f"iterate loop '{self.loop}'{variable} did not converge within max_rounds="
               f"{self.max_rounds} at outer time {outer!r}: changes still flow into round {rnd}; "
               f"last changes: {last[:8]!r}{' ...' if len(last) > 8 else ''}")
        if period and _drift(history, period):
            msg += (f". The same changes recur every {period} round(s) and do not cancel: "
                    "the loop's contents grow without bound (a loop without distinct can "
                    "count the same records again every round)")
        elif period:
            msg += (f". The same changes recur every {period} round(s): the loop oscillates "
                    "(a loop without distinct can cancel and re-add records forever)")
        err = ConvergenceError(msg, operator=self.loop, time=Product(outer, rnd))
        err.outer_time, err.round, err.last_changes, err.period = outer, rnd, last, period
        return err

    def loop_rows(self) -> list[dict]:
        """The per-(outer time, round) log as rows: time, round, changes, sample."""
        return [{"outer": o, "round": r, "changes": n, "sample": list(s)}
                for (o, r), (n, s) in sorted(self.log.items(),
                                             key=lambda kv: (sort_key(kv[0][0]), kv[0][1]))]


def _sum_changes(changes: list) -> dict:
    acc: dict = {}
    for d, r in changes:
        acc[d] = acc.get(d, 0) + r
    return {d: r for d, r in acc.items() if r}


def _drift(history: list, period: int) -> dict:
    """What one period of the recurring changes adds up to: nothing when the loop
    oscillates (its contents come back), the change per period when they grow."""
    acc: dict = {}
    for _rnd, changes in history[-period:]:
        for d, r in changes:
            acc[d] = acc.get(d, 0) + r
    return {d: r for d, r in acc.items() if r}


def _period(history: list) -> int | None:
    """The least k such that each of the last rounds repeats the one k rounds before."""
    if len(history) < 3:
        return None
    by_round = dict(history)
    rounds = sorted(by_round)
    last = rounds[-1]
    for k in range(1, _PERIOD_WINDOW + 1):
        checks = [r for r in rounds if r - k in by_round and r > last - 2 * k - 1]
        if len(checks) >= 2 and all(by_round[r] == by_round[r - k] for r in checks):
            return k
    return None


def _next_rounds(held: list) -> Iterator[Product]:
    """The times one round after those of `held` (a generator: nothing is computed
    until `pending_capabilities` needs it)."""
    for t in {u[1] for u in held}:
        yield Product(t.outer, t.inner + 1)
