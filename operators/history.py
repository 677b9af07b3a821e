"""History replay: the per-key engine of `reduce`, after differential dataflow's.

What this module isolates: given one key's input history, its output history and
the *seed* times at which its input changed (or at which an evaluation was put off),
find every time where the output may need a correction, and the input and output
accumulations there, reading each history entry once instead of once per time.
It leaves out what the correction is (`operators.reduce` passes a function) and
where the histories come from (the traces).

The times to evaluate are the joins of one or more seeds with any subset of the
other times (`lattice.joins_above`); the replay finds them as it goes, the way
differential dataflow's `HistoryReplayer` does (McSherry et al., "Differential
dataflow", CIDR 2013; the `reduce` operator of the differential-dataflow crate):

* The histories are advanced by the meet of the seeds (joining a time with it does
  not change which later times it lies below) and consolidated, then walked in
  `sort_key` order, a linear extension of the partial order.  A time reached is
  *interesting* if it is a seed, a join made earlier, or lies above an interesting
  time already reached.
* At each time reached, joins with the interesting times met so far (and, at an
  interesting time, with the input and output updates met so far) are the new
  times still to visit: join times are created only when the walk reaches them.
* After each step the walk computes the meet of everything still ahead.  Every
  later evaluation lies above it, so an update met so far whose time is below it
  is folded into a *base* accumulation that needs no more comparisons, and the
  other updates and interesting times are joined with it (equal ones collapse).
  When the times ahead form a chain, as in the rounds of a loop, everything met
  folds into the base: the accumulation is updated incrementally.

* Once that meet is itself in advance of the frontier, every time still ahead
  waits: the walk stops, and the interesting times met so far, joined with the
  meet, are put off in place of every join still ahead (replayed later as seeds,
  they meet the same updates).  So the part of a history beyond the frontier, such
  as a key's later rounds in a loop, is not read at every round.

Times in advance of the frontier (`beyond`) are not evaluated: the interesting ones
are returned, to be seeds when the frontier has passed them.

A key with a handful of updates takes `replay_direct` instead, the definition
evaluated as it stands (every join of the seeds with the update times): below
some length the walk's sorting and bookkeeping cost more than it saves.

Totally ordered (int) times take a fast path (`replay_total`): there every time at
or after the least seed is interesting and no new join appears, so the walk is one
pass over the key's entries as stored, grouped by time, with running
accumulations.

>>> from lattice import Product as P
>>> def count(u, acc_in, acc_out):
...     n = sum(acc_in.values())
...     want = {n: 1} if n else {}
...     for o, r in acc_out.items():
...         want[o] = want.get(o, 0) - r
...     return want
>>> seeds = [P(1, 0), P(0, 1)]
>>> inputs = [KeyHistory.build([("a", P(1, 0), 1), ("b", P(0, 1), 1)], floor_of(seeds))]
>>> out, later, work = replay(seeds, inputs, [], lambda t: False, count)
>>> sorted(out, key=lambda e: (e[1].sort_key(), e[0]))
[(1, Product(0, 1), 1), (1, Product(1, 0), 1), (1, Product(1, 1), -2), (2, Product(1, 1), 1)]
"""

from __future__ import annotations

import heapq
from operator import itemgetter
from typing import Any, Callable, Iterable, Sequence

from lattice import join, joins_above, less_equal, meet, sort_key
from ddflow.key_history import KeyHistory, add_to

_first = itemgetter(0)

Correct = Callable[[Any, dict, dict], dict]
"""`correct(time, input accumulation, output accumulation) -> {output: diff}`."""


def replay(seeds: Iterable[Any], inputs: Sequence[KeyHistory], outputs: Sequence[KeyHistory],
           beyond: Callable[[Any], bool], correct: Correct) -> tuple[list[tuple], set, int]:
    """Replay one key's history from `seeds` (times of any lattice).

    `inputs` and `outputs` are the key's histories (one per batch), advanced by the
    meet of the seeds (`floor_of`); `beyond(t)` tells a time the frontier has not
    passed; `correct` gives the output updates owed at a time from the
    accumulations there.  Returns the corrections made as `(output, time, diff)`,
    the interesting times put off, and the updates read (the bases, the updates
    stepped through, and the accumulations read at each evaluation).
    """
    return _replay_partial(list(seeds), inputs, outputs, beyond, correct)


def floor_of(seeds: Iterable[Any]) -> Any:
    """The meet of the seeds: every time a replay from them evaluates is above it."""
    it = iter(seeds)
    f = next(it)
    for s in it:
        f = meet(f, s)
    return f


class _Walk:
    """Several `KeyHistory`s walked as one in `sort_key` order, without changing them."""

    __slots__ = ("histories", "pos", "stepped")

    def __init__(self, histories: Sequence[KeyHistory]) -> None:
        self.histories = [h for h in histories if h.start < len(h.entries)]
        self.pos = [h.start for h in self.histories]
        self.stepped = 0

    def base(self, histories: Sequence[KeyHistory]) -> dict:
        acc: dict = {}
        for h in histories:
            for v, r in h.base.items():
                add_to(acc, v, r)
        return acc

    def head(self) -> tuple | None:
        """`(sort key, time)` of the next update, or None when all are read."""
        best = None
        for h, p in zip(self.histories, self.pos):
            if p < len(h.entries):
                k = h.keys[p]
                if best is None or k < best[0]:
                    best = (k, h.entries[p][0])
        return best

    def meet(self) -> Any:
        """The meet of every update still ahead (None if none is)."""
        m = None
        for h, p in zip(self.histories, self.pos):
            if p < len(h.entries):
                m = h.meets[p] if m is None else meet(m, h.meets[p])
        return m

    def step_while(self, key: Any, buffer: dict) -> None:
        """Move the updates whose sort key is `key` into `buffer` (`(value, time) -> diff`)."""
        pos = self.pos
        for i, h in enumerate(self.histories):
            p = pos[i]
            entries, keys = h.entries, h.keys
            while p < len(entries) and keys[p] == key:
                t, v, r = entries[p]
                add_to(buffer, (v, t), r)
                p += 1
            self.stepped += p - pos[i]
            pos[i] = p


def replay_total(seeds: Iterable[int], inputs: Iterable[tuple], outputs: Iterable[tuple],
                 beyond: Callable[[Any], bool], correct: Correct
                 ) -> tuple[list[tuple], set, int]:
    """`replay` for int times, from the key's `(value, time, diff)` entries as stored.

    A chain: after advancing by the least seed every time ahead is interesting,
    joins are times already there, and once one time waits for the frontier every
    later one does (it alone is put off: replayed later as a seed, it reaches them).
    A time of another lattice raises `TimeError` when compared.
    """
    floor = min(seeds)
    acc_in: dict = {}
    acc_out: dict = {}
    ahead_in: dict = {}         # time -> [(value, diff)], times after the floor
    ahead_out: dict = {}
    work = 0
    for entries, acc, ahead in ((inputs, acc_in, ahead_in), (outputs, acc_out, ahead_out)):
        for v, t, r in entries:
            work += 1
            if t <= floor:
                add_to(acc, v, r)
            else:
                at = ahead.get(t)
                if at is None:
                    ahead[t] = [(v, r)]
                else:
                    at.append((v, r))
    times = {floor, *ahead_in, *ahead_out}
    times.update(s for s in seeds if s > floor)
    made: list[tuple] = []
    later: set = set()
    empty: list = []
    for u in sorted(times):
        if beyond(u):
            later.add(u)
            break
        for v, r in ahead_in.get(u, empty):
            add_to(acc_in, v, r)
        for o, r in ahead_out.get(u, empty):
            add_to(acc_out, o, r)
        work += len(acc_in) + len(acc_out)
        for o, r in correct(u, acc_in, acc_out).items():
            if r:
                made.append((o, u, r))
                add_to(acc_out, o, r)
    return made, later, work


def _all_below(seeds: set, inputs: Sequence[tuple], outputs: Sequence[tuple]) -> bool:
    """Whether every stored time lies at or below the one seed (loops, not `all()`
    over a generator: this runs once per key of a loop's pass)."""
    for u in seeds:
        for _v, t, _r in inputs:
            if not less_equal(t, u):
                return False
        for _o, t, _r in outputs:
            if not less_equal(t, u):
                return False
    return True


def replay_chain(seeds: Iterable[Any], inputs: Sequence[tuple], outputs: Sequence[tuple],
                 beyond: Callable[[Any], bool], correct: Correct
                 ) -> tuple[list[tuple], set, int] | None:
    """`replay` for a key whose seeds and stored times form a chain (any lattice),
    from its `(value, time, diff)` entries as stored; None when they do not.

    In a chain every join of two times is one of them, so the join-closure of the
    seeds is the times at or after the least seed, and the walk is `replay_total`'s
    (run on the times' positions in the chain).  A key of a loop's load has this
    shape: each of its rounds lies above the one before, all in one outer epoch.
    Commonest of all is one seed `u` with every stored time `<= u`: one evaluation,
    at `u`, from the sums of the entries.
    """
    seeds = set(seeds)
    if len(seeds) == 1 and _all_below(seeds, inputs, outputs):
        for u in seeds:
            if beyond(u):
                return [], {u}, 0
            acc_in: dict = {}
            acc_out: dict = {}
            for v, _t, r in inputs:
                add_to(acc_in, v, r)
            for o, _t, r in outputs:
                add_to(acc_out, o, r)
            made = [(o, u, r) for o, r in correct(u, acc_in, acc_out).items() if r]
            return made, set(), len(inputs) + len(outputs)    # each entry read once
    # A quick refusal before sorting: in a chain every time is comparable with a seed
    # (under churn a key's new times usually sit beside its older rounds).
    s0 = next(iter(seeds))
    times = set(seeds)
    for entries in (inputs, outputs):
        for _v, t, _r in entries:
            if t not in times:
                if not (less_equal(t, s0) or less_equal(s0, t)):
                    return None
                times.add(t)
    chain = sorted(times, key=sort_key)
    for i in range(1, len(chain)):
        if not less_equal(chain[i - 1], chain[i]):
            return None
    at = {t: i for i, t in enumerate(chain)}
    made, later, work = replay_total(
        [at[s] for s in seeds], [(v, at[t], r) for v, t, r in inputs],
        [(o, at[t], r) for o, t, r in outputs], lambda i: beyond(chain[i]),
        lambda i, acc_in, acc_out: correct(chain[i], acc_in, acc_out))
    return [(o, chain[i], r) for o, i, r in made], {chain[i] for i in later}, work


def replay_direct(seeds: Iterable[Any], inputs: Iterable[tuple], outputs: Iterable[tuple],
                  beyond: Callable[[Any], bool], correct: Correct
                  ) -> tuple[list[tuple], set, int]:
    """`replay` by its definition, from the key's `(value, time, diff)` entries as stored:
    every join of the seeds with the update times is evaluated (in `sort_key` order,
    each accumulation summed afresh), and those beyond the frontier are put off.

    For a key with a handful of updates this costs less than `replay`'s bookkeeping
    (sorting, suffix meets, the walk): differential dataflow's reduce likewise keeps
    its general machinery for histories long enough to pay for it.  Its work grows
    with (times evaluated) x (history), so a long history must go to `replay`.
    """
    # Consolidated first (a trace consolidates within batches, not across them):
    # updates that cancel make no join to evaluate or to put off.
    inputs = _consolidated(inputs)
    outputs = _consolidated(outputs)
    seeds = set(seeds)
    others = {t for _v, t, _r in inputs}
    others.update(t for _o, t, _r in outputs)
    made: list[tuple] = []
    later: set = set()
    work = 0
    for u in sorted(joins_above(seeds, others), key=sort_key):
        if beyond(u):
            later.add(u)
            continue
        acc_in: dict = {}
        acc_out: dict = {}
        for v, t, r in inputs:
            if less_equal(t, u):
                add_to(acc_in, v, r)
        for o, t, r in outputs:
            if less_equal(t, u):
                add_to(acc_out, o, r)
        work += len(inputs) + len(outputs)
        for o, r in correct(u, acc_in, acc_out).items():
            if r:
                made.append((o, u, r))
                outputs.append((o, u, r))
    return made, later, work


def _consolidated(entries: Iterable[tuple]) -> list[tuple]:
    acc: dict = {}
    for v, t, r in entries:
        add_to(acc, (v, t), r)
    return [(v, t, r) for (v, t), r in acc.items()]


def _fold(buffer: dict, base: dict, floor: Any) -> dict:
    """Join `buffer`'s times with `floor`: updates landing on it go to `base`."""
    kept: dict = {}
    for (v, t), r in buffer.items():
        a = join(t, floor)
        if a == floor:
            add_to(base, v, r)
        else:
            add_to(kept, (v, a), r)
    return kept


def _accumulate(base: dict, loose: dict, u: Any) -> dict:
    acc = dict(base)
    for (v, t), r in loose.items():
        if less_equal(t, u):
            add_to(acc, v, r)
    return acc


def _replay_partial(seeds: list, inputs: Sequence[KeyHistory], outputs: Sequence[KeyHistory],
                    beyond: Callable[[Any], bool], correct: Correct
                    ) -> tuple[list[tuple], set, int]:
    ins, outs = _Walk(inputs), _Walk(outputs)
    in_base = ins.base(inputs)      # value -> diff, below every time still ahead
    out_base = outs.base(outputs)
    work = len(in_base) + len(out_base)
    in_loose: dict = {}             # (value, time) -> diff, not known to be below
    out_loose: dict = {}
    seed_list = sorted(set(seeds), key=sort_key, reverse=True)   # next one last
    seed_meets: list = []           # seed_meets[i]: the meet of seed_list[:i + 1]
    for s in seed_list:
        seed_meets.append(s if not seed_meets else meet(seed_meets[-1], s))
    synth: list = []                # heap of (sort key, time): joins still to visit
    synth_set: set = set()
    current: list = []              # interesting times met so far
    made: list[tuple] = []
    later: set = set()
    while True:
        heads = [h for h in (ins.head(), outs.head()) if h is not None]
        if seed_list:
            heads.append((sort_key(seed_list[-1]), seed_list[-1]))
        if synth:
            heads.append(synth[0])
        if not heads:
            break
        now_key, now = min(heads, key=_first)
        ins.step_while(now_key, in_loose)
        outs.step_while(now_key, out_loose)
        interesting = False
        while synth and synth[0][1] == now:
            heapq.heappop(synth)
            synth_set.discard(now)
            interesting = True
        while seed_list and seed_list[-1] == now:
            seed_list.pop()
            seed_meets.pop()
            interesting = True
        if interesting:
            current.append(now)
        else:
            interesting = any(less_equal(t, now) for t in current)
        joins = {join(t, now) for t in current if not less_equal(t, now)}
        if interesting:
            joins.update(join(t, now) for _v, t in in_loose if not less_equal(t, now))
            joins.update(join(t, now) for _o, t in out_loose if not less_equal(t, now))
        for t in joins:
            if beyond(t):
                later.add(t)
            elif t not in synth_set:
                synth_set.add(t)
                heapq.heappush(synth, (sort_key(t), t))
        if beyond(now):
            if interesting:
                later.add(now)
        elif interesting:
            acc_in = _accumulate(in_base, in_loose, now)
            acc_out = _accumulate(out_base, out_loose, now)
            work += len(in_base) + len(in_loose) + len(out_base) + len(out_loose)
            for o, r in correct(now, acc_in, acc_out).items():
                if r:
                    made.append((o, now, r))
                    add_to(out_loose, (o, now), r)
        # Everything still ahead lies above `ahead`: fold what is below it.
        ahead = None
        for m in (ins.meet(), outs.meet(), seed_meets[-1] if seed_meets else None):
            if m is not None:
                ahead = m if ahead is None else meet(ahead, m)
        for _k, t in synth:
            ahead = t if ahead is None else meet(ahead, t)
        if ahead is None:
            break
        current = list({join(t, ahead) for t in current})
        if beyond(ahead):
            # Every time still ahead, and every join made from one, waits for the
            # frontier.  The interesting times met so far, advanced by `ahead`, stand
            # for all of them: replayed later as seeds, they meet the same updates
            # (all in advance of `ahead`) and make the same joins.  So the walk ends
            # here instead of reading the history that lies beyond the frontier.
            later.update(current)
            later.update(seed_list)
            later.update(t for _k, t in synth)
            break
        in_loose = _fold(in_loose, in_base, ahead)
        out_loose = _fold(out_loose, out_base, ahead)
    return made, later, work + ins.stepped + outs.stepped


__all__ = ["replay", "replay_total", "replay_chain", "replay_direct", "floor_of", "Correct"]
