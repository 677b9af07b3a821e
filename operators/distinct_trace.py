"""Distinct over `(epoch, iteration)` times: `distinct_trace` of the "Notes on DBSP"
(RhizomeDB, section 2.9.11).

What this module isolates: `distinct` specialised to times `Product(e, i)` whose
components are both ints, the time of a loop (`iterate`) in a dataflow with int
epochs.  It leaves out every other lattice (a time of any other shape raises
`TimeError`); `operators.reduce.Reduce` with `distinct_logic` is the general form.

The law it keeps (differential dataflow's accumulation law), for every time `t`:

    acc(distinct_trace(C), t) == {x: 1 for x with acc(C, t)[x] > 0}

The rule ("Notes on DBSP", 2.9.11, read with the corrections below).  For an
element `x` at `t = (e, i)`, sum the weights of `x`'s input updates in four parts:

* `w1`: at `(e0, i0)` with `e0 < e` and `i0 < i`  (earlier epoch, earlier round)
* `w2`: at `(e0, i)`  with `e0 < e`               (earlier epoch, this round)
* `w3`: at `(e, i0)`  with `i0 < i`               (this epoch, earlier round)
* `w`:  at exactly `(e, i)`

(updates at times not `<= t` are ignored).  Then

* `d0 = 1` when `w1 <= 0` and `w1 + w2 > 0`; `d0 = -1` when `w1 > 0` and `w1 + w2 <= 0`;
  else `d0 = 0`;
* `d1 = 1` when `w1 + w3 <= 0` and `w1 + w2 + w3 + w > 0`; `d1 = -1` when `w1 + w3 > 0`
  and `w1 + w2 + w3 + w <= 0`; else `d1 = 0`;
* the output at `t` is `x` with weight `d1 - d0` (nothing when it is 0).

Why it holds: with `D(e, i) = 1 if acc(C, (e, i))[x] > 0 else 0`, the four sums are
accumulations, `w1 = acc(e-1, i-1)`, `w1 + w2 = acc(e-1, i)`, `w1 + w3 = acc(e, i-1)`,
`w1 + w2 + w3 + w = acc(e, i)`, so `d0 = D(e-1, i) - D(e-1, i-1)`,
`d1 = D(e, i) - D(e, i-1)` and

    d1 - d0 = D(e, i) - D(e-1, i) - D(e, i-1) + D(e-1, i-1),

the difference of `D` over the grid cell ending at `t`.  Summed over all times
`<= t` these telescope to `D(t)`: that is the law.  The rule needs neither the
operator's own output nor a general accumulation: only four sums of the input.

Where it must act (the notes' "two classes of elements"): `d1 - d0` can only be
nonzero at `(e, i)` if `x` changed in epoch `e` at some round `<= i` and at round
`i` in some epoch `<= e`.  So the times to visit are (1) the times of new input, and
(2) the times `(e, i)` where `x` changed at `(e, i0 < i)` and at `(e0 < e, i)`: the
lattice joins of two input times, and nothing more (in two coordinates every finite
join is the join of two).  When input arrives at `n`, class 2 adds `(n.e, s.i)` for
each earlier-epoch change `s` at a later round (a future round of this epoch, which
stays pending beyond the frontier) and `(s.e, n.i)` for each later-epoch change at an
earlier round.  Like `Reduce`, a time is evaluated only when complete, in `sort_key`
order, and pending times are the operator's capabilities.

Compaction: the rule reads accumulations one epoch and one round behind the time it
evaluates, so the reader advances the shared trace only to the input frontier moved
back by `(1, 1)`; accumulations there, and so the four sums, stay exact.

Slips of the notes read through (REFERENCES.md lists the first two): `d0 = 1` needs
`w1 <= 0` (a "0" is missing), `d1 = -1` needs `w1 + w2 + w3 + w <= 0` (not `w4`); and
"if that element does not appear in the trace, it is returned with weight 1" holds
only for a positive weight `w` (the worked example drops `3` at `(0, 0)` and `4` at
`(1, 1)`, both absent from the trace with weight -1); the rule above gives that.

>>> from lattice import Antichain, Product as P
>>> from operators.arrange import Arrange
>>> arr = Arrange(by_self=True)
>>> op = DistinctTrace(arr, name="distinct_trace")
>>> arr.on_input(0, [("x", P(0, 1), 1), ("x", P(1, 0), 1), ("y", P(1, 1), -1)])
>>> arr.on_frontier([Antichain()]); op.on_input(0, arr.take_output())
>>> op.on_frontier([Antichain()])
>>> sorted(op.take_output(), key=lambda u: (u[1].sort_key(), u[0]))
[('x', Product(0, 1), 1), ('x', Product(1, 0), 1), ('x', Product(1, 1), -1)]
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from lattice import Antichain, Product, TimeError, sort_key
from operators.arrange import Arrange
from operators.base import Operator, Update
from operators.undo import UndoDict


def distinct_rule(w1: int, w2: int, w3: int, w: int) -> int:
    """The notes' `d1 - d0` from the four sums (see the module docstring).

    >>> distinct_rule(0, 1, 1, 0), distinct_rule(0, 0, 0, 1), distinct_rule(1, 0, 0, -1)
    (-1, 1, -1)
    """
    if w1 <= 0 and w1 + w2 > 0:
        d0 = 1
    elif w1 > 0 and w1 + w2 <= 0:
        d0 = -1
    else:
        d0 = 0
    w13 = w1 + w3
    w1234 = w13 + w2 + w
    if w13 <= 0 and w1234 > 0:
        d1 = 1
    elif w13 > 0 and w1234 <= 0:
        d1 = -1
    else:
        d1 = 0
    return d1 - d0


def _is_epoch_round(t: Any) -> bool:
    return type(t) is Product and type(t.outer) is int and type(t.inner) is int


def _time_error(name: str, record: Any, t: Any) -> TimeError:
    return TimeError(f"{name} (distinct_trace) needs times Product(epoch, iteration) of two "
                     f"ints, got {t!r} ({type(t).__name__})", operator=name, record=record,
                     time=t)


def _sums(entries: Iterable[tuple], e: int, i: int) -> tuple[int, int, int, int]:
    """`(w1, w2, w3, w)` of `(val, time, diff)` entries at the time `(e, i)`."""
    w1 = w2 = w3 = w = 0
    for _v, s, r in entries:
        se, si = s.outer, s.inner
        if se > e or si > i:
            continue           # not <= (e, i): no part of the accumulation
        if se < e:
            if si < i:
                w1 += r
            else:
                w2 += r
        elif si < i:
            w3 += r
        else:
            w += r
    return w1, w2, w3, w


def revisit_times(new: Iterable[Product], others: Iterable[Product]) -> set:
    """The times to (re)visit for an element whose input changed at the times `new`,
    given the times `others` of its other input (its trace).

    Class 1: the new times.  Class 2: `(e, i)` where the element changed at
    `(e, i0 < i)` and at `(e0 < e, i)`, one of them new.  A trace time at or after a
    new time is returned too: its accumulation changed (while pending it is no extra
    work).  Together: every `join(n, s)`, `n` new, `s` in `new | others`.

    >>> P = Product
    >>> sorted(revisit_times([P(1, 0)], [P(0, 3), P(2, 0)]), key=sort_key)
    [Product(1, 0), Product(1, 3), Product(2, 0)]
    >>> sorted(revisit_times([P(1, 2)], [P(0, 0), P(3, 1)]), key=sort_key)
    [Product(1, 2), Product(3, 2)]
    """
    new = list(new)
    out = set(new)
    others = set(others)
    others.update(new)
    for n in new:
        e, i = n.outer, n.inner
        for s in others:
            se, si = s.outer, s.inner
            if se < e:
                if si > i:
                    out.add(Product(e, si))     # a later round of this epoch
            elif se > e:
                if si < i:
                    out.add(Product(se, i))     # this round of a later epoch
                else:
                    out.add(s)
            elif si >= i:
                out.add(s)
    return out


class DistinctTrace(Operator):
    """Distinct of an `Arrange(by_self=True)` source over `Product(int, int)` times.

    Same shape as `Reduce`: pending times per element, evaluated once complete, in
    an order extending the product order; but the output at a time is the notes'
    rule on four sums of the element's input, and it emits records `x`.
    """

    _state = ("_fresh", "_pending", "_by_time", "_since")
    _caches = ("_caps",)
    _writes = ("source",)           # advance_reader moves the arrangement's compaction

    def __init__(self, source: Arrange, name: str = "distinct_trace") -> None:
        super().__init__(name)
        self.source = source
        self._rid = source.register_reader()
        # element -> new input times, not yet joined; element -> times to visit (joins done)
        self._fresh: dict[Any, set] = UndoDict()
        self._pending: dict[Any, set] = UndoDict()
        # time -> elements with a fresh or pending time there (in arrival order): a
        # pass visits only elements that have a newly complete time.
        self._by_time: dict[Any, dict] = UndoDict()
        self._since: Antichain | None = None

    def _index(self, x: Any, t: Any) -> None:
        by_time = self._by_time
        elements = by_time.get(t)
        if elements is None:
            by_time[t] = {x: None}
            self._caps = None
        elif x not in elements:
            by_time.touch(t)[x] = None

    def _unindex(self, x: Any, times: Iterable[Any]) -> None:
        by_time = self._by_time
        for t in times:
            elements = by_time.get(t)
            if elements is not None and x in elements:
                by_time.touch(t)
                del elements[x]
                if not elements:
                    del by_time[t]
                    self._caps = None

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        fresh = self._fresh
        for (x, _v), t, _r in updates:
            if not _is_epoch_round(t):
                raise _time_error(self.name, x, t)
            s = fresh.get(x)
            if s is None:
                fresh[x] = {t}
            elif t not in s:
                fresh.touch(x).add(t)
            self._index(x, t)

    def capabilities(self) -> Iterable[Any]:
        # A fresh time lies below every revisit time it will add.
        return self.pending_capabilities(self._by_time)

    def wants_frontier(self) -> bool:
        # Idle, a move of the frontier would only advance compaction, which may lag
        # until the next input (later compaction is always sound).
        return bool(self._by_time)

    def on_frontier(self, frontiers: Sequence[Antichain]) -> None:
        frontier = frontiers[0]
        if self._by_time:
            emitted: list[Update] = []
            elements: dict = {}
            for t in [t for t in self._by_time if not frontier.less_equal(t)]:
                elements.update(self._by_time[t])
            for x in elements:
                self._distinct_element(x, frontier, emitted)
            self.emit(emitted)
        self._advance(frontier)

    def _distinct_element(self, x: Any, frontier: Antichain, emitted: list[Update]) -> None:
        incomplete = frontier.less_equal
        new = self._fresh.get(x, ())
        times = self._pending.get(x, ())
        if all(incomplete(t) for t in new) and all(incomplete(t) for t in times):
            return  # every time to visit lies above an incomplete one
        self._unindex(x, [*new, *times])
        entries = self.source.trace.get(x)
        if new:
            # A new time is in advance of every frontier seen since it arrived, and
            # the trace is compacted at most to those frontiers moved back by (1, 1):
            # joining it with a compacted time gives what the original time gives.
            del self._fresh[x]
            times = set(times)
            times.update(revisit_times(new, {t for _v, t, _r in entries}))
        ready = [t for t in times if not incomplete(t)]
        later = {t for t in times if incomplete(t)}
        if later:
            self._pending[x] = later
            for t in later:
                self._index(x, t)
        else:
            self._pending.pop(x, None)
        ready.sort(key=sort_key)
        for t in ready:
            self.times_visited += 1
            self.work += len(entries)
            d = distinct_rule(*_sums(entries, t.outer, t.inner))
            if d:
                emitted.append((x, t, d))

    def _advance(self, frontier: Antichain) -> None:
        # Later evaluations are at times t in advance of `frontier`, and read
        # accumulations at t - (1, 0), t - (0, 1), t - (1, 1): keep those exact.
        if frontier.is_empty():
            back = frontier
        elif all(_is_epoch_round(f) for f in frontier):
            back = Antichain(Product(f.outer - 1, f.inner - 1) for f in frontier)
        else:
            return  # a frontier of another lattice: the first record will raise
        if back != self._since:
            self._since = back
            self.source.advance_reader(self._rid, back)


# -- the rule as pure functions (the notes' own examples) ------------------------

def distinct_incremental(batch: dict, trace_acc: dict) -> dict:
    """"Notes on DBSP", 2.9.18: the change of distinct when `batch` is added to `trace_acc`.

    Both arguments map elements to weights; the result maps each element whose
    presence (weight > 0) differs between `trace_acc` and `trace_acc + batch` to
    `+1` (now present) or `-1` (now absent).

    >>> distinct_incremental({0: 2, 2: 1, 3: -1}, {0: 1})
    {2: 1}
    """
    out = {}
    for x, w in batch.items():
        before = trace_acc.get(x, 0)
        was, now = before > 0, before + w > 0
        if was != now:
            out[x] = 1 if now else -1
    return out


def distinct_trace_step(batch_at_t: Iterable[tuple], trace_updates: Iterable[tuple],
                        t: Product) -> dict:
    """"Notes on DBSP", 2.9.11 on update lists: the output of distinct at `t = (e, i)`.

    `batch_at_t` holds the `(data, t, w)` updates at `t`; `trace_updates` the
    `(data, time, w)` updates seen before (at any times: those not `<= t` are
    ignored, and any at exactly `t` count with the batch).  The elements visited
    are the notes' two classes: those changed at `t`, and those changed at
    `(e, i0 < i)` and at `(e0 < e, i)`.  Returns `{data: d1 - d0}`, zeros dropped.

    >>> P = Product
    >>> distinct_trace_step([(5, P(1, 1), 0)], [(5, P(0, 1), 1), (5, P(1, 0), 1)], P(1, 1))
    {5: -1}
    """
    if not _is_epoch_round(t):
        raise _time_error("distinct_trace_step", None, t)
    e, i = t.outer, t.inner
    history: dict[Any, list] = {}
    changed = set()
    for d, s, w in batch_at_t:
        if s != t:
            raise TimeError(f"distinct_trace_step: batch update at {s!r}, not at {t!r}",
                            operator="distinct_trace_step", record=d, time=s)
        history.setdefault(d, []).append(((), s, w))
        changed.add(d)
    for d, s, w in trace_updates:
        if not _is_epoch_round(s):
            raise _time_error("distinct_trace_step", d, s)
        history.setdefault(d, []).append(((), s, w))
    out = {}
    for d, entries in history.items():
        this_epoch = any(s.outer == e and s.inner < i for _v, s, _w in entries)
        this_round = any(s.outer < e and s.inner == i for _v, s, _w in entries)
        at_t = any(s == t for _v, s, _w in entries)
        if not (d in changed or at_t or (this_epoch and this_round)):
            continue
        r = distinct_rule(*_sums(entries, e, i))
        if r:
            out[d] = r
    return out


__all__ = ["DistinctTrace", "distinct_rule", "distinct_incremental",
           "distinct_trace_step", "revisit_times"]
