"""Reduce: per key, a function of the accumulated values, exact under partial orders.

`Reduce(logic)` reads `(key, value)` updates and maintains, for every key and time
`t`, the output `logic(key, acc(input[key], t))` as `(key, output)` records:

    acc(reduce(C), t)[(k, o)] = diff of o in logic(k, acc(C, t)[k])

`logic(key, values)` receives the nonzero `(value, count)` pairs sorted by value
(`ddflow.updates.sorted_data`: the natural order, or a `(type name, repr)` order for
values `<` cannot compare, such as records holding `Product` times) and returns
`(output, diff)` pairs.

Where it must act: the input accumulation only changes at joins of input times, so
the output can only need a correction at times in the join-closure of the input
times.  When new input times `N` arrive for a key, the times to (re)evaluate are
`joins_above(N, S)`, every new time joined with any subset of the key's other
input, output and pending times `S`: a time where no input changed, such as
`(1, 1)` for inputs at `(1, 0)` and `(0, 1)`, is among them.  A time is evaluated
only once the input frontier shows it complete; until then it stays *pending*
(and is a capability, so downstream frontiers wait for it).  Pending times are
kept even if later updates cancel the inputs that caused them: they may still owe
a correction.  Evaluation at `u`, in an order extending the partial order, emits
`logic(acc(input, u)) - acc(output, u)` at `u`.

How: by history replay (`operators.history`).  A key's complete pending times are
the seeds; its input and output histories are read once, advanced by the meet of
the seeds (`Trace.key_histories`, which keeps a key's long history in a batch
between reads), and walked in time order with running accumulations; the joins
above are created as the walk reaches them, and the walk stops where everything
ahead waits for the frontier.  Each evaluation reads the accumulation, not the
history.  A key whose seeds and stored times form a chain, as in a loop's load,
is walked once in that order (`replay_chain`, behind `Reduce.chain_replay`).
A key with a handful of updates is evaluated directly at every join of
its seeds with its update times (`replay_direct`), which costs less there.

The built-in logics below give differential dataflow's `count`, `sum`, `min`,
`max`, `distinct` and `threshold`.

>>> from lattice import Antichain, Product as P
>>> from operators.arrange import Arrange, lower_of
>>> arr = Arrange(by_self=True)
>>> red = Reduce(arr, count_logic, name="count")
>>> arr.on_input(0, [("k", P(1, 0), 1), ("k", P(0, 1), 1)])
>>> arr.on_frontier([Antichain()]); red.on_input(0, arr.take_output())
>>> red.on_frontier([Antichain()])
>>> sorted(red.take_output(), key=lambda u: (u[1].sort_key(), u[0], u[2]))
[(('k', 1), Product(0, 1), 1), (('k', 1), Product(1, 0), 1), (('k', 1), Product(1, 1), -2), (('k', 2), Product(1, 1), 1)]
"""

from __future__ import annotations

from itertools import repeat
from operator import itemgetter
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from lattice import Antichain
from operators.arrange import Arrange, lower_of
from operators.base import Operator, Update
from operators.history import floor_of, replay, replay_chain, replay_direct, replay_total
from operators.reduce_chain import (CHAIN_MIN_KEYS, chain_corrections_of,
                                    register_total_logic, supports)
from ddflow.columnar import columnar_min
from operators.undo import UndoDict
from ddflow.diff import check_diff
from ddflow.errors import DataError, DiffError
from ddflow.updates import sorted_data
from ddflow.trace import Batch, Trace

Logic = Callable[[Any, list], Iterable[tuple]]


def _value(pair: tuple) -> Any:
    return pair[0]


_time_of = itemgetter(1)


class Reduce(Operator):
    """Apply `logic` per key at every time where the input accumulation changes."""

    _state = ("_pending", "_by_time", "out_trace", "_upper", "_since")
    _caches = ("_caps",)
    _writes = ("source",)           # advance_reader moves the arrangement's compaction
    #: A key whose stored history (input and output) has fewer entries than this is
    #: replayed directly (`replay_direct`): a one-edge epoch touches many such keys,
    #: and for them the general replay's sorting and bookkeeping cost more than the
    #: evaluations.  Tests set it to 0 or to a large number to run either path alone.
    direct_below: int = 8
    #: Whether a key whose seeds and stored times form a chain is replayed as one
    #: (`replay_chain`): a loop's load evaluates most keys once per round, each time
    #: at a round above everything stored.  Tests run with it on and off.
    chain_replay: bool = True
    #: Input batches of at least this many updates add their pending times grouped by
    #: time (`_add_pending_keys`); smaller ones update by update.  Tests set it to 0
    #: or to a large number to run either path alone.
    bulk_pending_from: int = 256

    def __init__(self, source: Arrange, logic: Logic, name: str = "reduce") -> None:
        super().__init__(name)
        self.source = source
        self.logic = logic
        # A user's logic has its result checked (shape, diffs, hashable outputs);
        # the built-in ones below are known to return (output, int) pairs.
        self._check_result = logic not in _BUILT_IN
        self._rid = source.register_reader()
        self.out_trace = Trace()
        # key -> the time to evaluate, or a set of them; time -> keys pending there
        # (the index that lets a pass skip keys whose times all lie beyond the
        # frontier).
        self._pending: dict[Any, Any] = UndoDict()
        self._by_time: dict[Any, dict] = UndoDict()
        self._upper: Antichain | None = None
        self._since: Antichain | None = None

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        if len(updates) < self.bulk_pending_from:
            for (k, _v), t, _r in updates:
                self._add_pending(k, t)
            return
        # A bulk batch has few distinct times: its keys are grouped by time, and the
        # keys with nothing pending (all of them, in a load) are added at once.
        times = set(map(_time_of, updates))
        if len(times) == 1:
            # One time (an epoch's batch): its keys in one C-level pass.
            self._add_pending_keys(times.pop(), dict.fromkeys([kv[0] for kv, _t, _r in updates]))
            return
        by_t: dict = {}
        for (k, _v), t, _r in updates:
            ks = by_t.get(t)
            if ks is None:
                by_t[t] = {k: None}
            else:
                ks[k] = None
        for t, ks in by_t.items():
            self._add_pending_keys(t, ks)

    def _add_pending(self, key: Any, t: Any) -> None:
        """`t` pending for `key`.  One pending time is kept bare, more in a set: a
        load leaves one time at most keys, and a set apiece was ~200 bytes a key."""
        pending = self._pending
        s = pending.get(key)
        if s is None:
            pending[key] = t
        elif type(s) is set:
            if t in s:
                return
            pending.touch(key).add(t)
        elif s == t:
            return
        else:
            pending[key] = {s, t}
        by_time = self._by_time
        keys = by_time.get(t)
        if keys is None:
            by_time[t] = {key: None}     # a dict: keys stay in arrival order
            self._caps = None
        else:
            by_time.touch(t)[key] = None

    def _add_pending_keys(self, t: Any, keys: dict) -> None:
        """`t` pending for each of `keys` (a dict, values None), at once for the keys
        with nothing pending yet."""
        pending = self._pending
        held = [k for k in keys if k in pending] if pending else ()
        for k in held:
            del keys[k]
            self._add_pending(k, t)
        if not keys:
            return
        pending.set_many(dict.fromkeys(keys, t))
        by_time = self._by_time
        at = by_time.touch(t)
        if at is None:
            by_time[t] = keys
            self._caps = None
        else:
            at.update(keys)

    def capabilities(self) -> Iterable[Any]:
        return self.pending_capabilities(self._by_time)

    def wants_frontier(self) -> bool:
        # Idle, a move of the frontier would only advance compaction, which may lag
        # until the next input (later compaction is always sound).
        return bool(self._by_time)

    def on_frontier(self, frontiers: Sequence[Antichain]) -> None:
        frontier = frontiers[0]
        emitted: list[Update] = []
        # The chain kernel's corrections as keyed columns, if it made them so: the
        # output batch when nothing else was emitted (no rows encoded again).
        chained: list = []
        n_chained = 0
        if self._by_time:
            memo: dict = {}

            def beyond(t: Any) -> bool:
                # Whether `t` is still incomplete; asked for the same few times per key.
                b = memo.get(t)
                if b is None:
                    b = memo[t] = frontier.less_equal(t)
                return b

            # Only keys with a complete pending time can have anything to evaluate:
            # every candidate time lies above a pending one.
            complete = [t for t in self._by_time if not beyond(t)]
            if len(complete) == 1:
                # One complete time (a load's round): its keys as they are, not a
                # copy (5 MB at 190k keys); read whole before any is dropped.
                keys = self._by_time[complete[0]]
            else:
                keys = {}
                for t in complete:
                    keys.update(self._by_time[t])
            bulk = columnar_min()
            if (keys and bulk is not None and len(keys) >= min(CHAIN_MIN_KEYS, bulk)
                    and supports(self.logic)):
                keys = self._reduce_chains(keys, complete, emitted, chained)
            n_chained = len(emitted)
            for key in list(keys) if type(keys) is not list else keys:
                self._reduce_key(key, beyond, emitted)
        if emitted:
            lower = self._upper if self._upper is not None else lower_of(Antichain(), emitted,
                                                                          frontier)
            batch = None
            # Sealed as columns whatever their number: a loop's small rounds too (the
            # reachability load at 200k nodes held 286 bytes an edge so, 308 with the
            # rounds below the columnar batch size as rows).
            if (len(chained) == 1 and chained[0] is not None and n_chained == len(emitted)
                    and len(chained[0]) == n_chained):
                batch = Batch.from_columns(chained[0], lower, frontier)
            if batch is None:
                batch = Batch.from_updates(emitted, lower=lower, upper=frontier)
            self.out_trace.insert(batch)
            self.emit(emitted)
        self._upper = frontier
        # Later evaluations happen only at times in advance of this frontier.
        self.source.advance_reader(self._rid, frontier)
        if not frontier.is_empty() and frontier != self._since:
            self._since = frontier
            self.out_trace.set_logical_compaction(frontier)

    def _drop_pending(self, key: Any) -> None:
        """Forget the key's pending times (its evaluation takes them over)."""
        by_time = self._by_time
        s = self._pending.pop(key)
        for t in (s if type(s) is set else (s,)):
            keys = by_time.touch(t)
            keys.pop(key, None)
            if not keys:
                del by_time[t]
                self._caps = None

    def _drop_single(self, t: Any, keys: list) -> None:
        """Forget the pending time `t` of `keys`, each of which had `t` alone."""
        self._pending.pop_many(keys)
        by_time = self._by_time
        at = by_time[t]
        if len(at) == len(keys):
            del by_time[t]              # every key pending at `t` (a load's round)
            self._caps = None
            return
        at = by_time.touch(t)
        for k in keys:
            del at[k]
        if not at:
            del by_time[t]
            self._caps = None

    def _reduce_chains(self, keys: dict, complete: list, emitted: list[Update],
                       chained: list | None = None) -> list:
        """Evaluate the keys with one complete pending time whose stored times lie
        below it directly (`operators.reduce_chain`, the bulk path); returns the
        keys left for `_reduce_key`.  `keys` are those pending at the `complete`
        times: a key pending at one time alone is in that time's index entry."""
        pending, by_time = self._pending, self._by_time
        # Keys with several pending times go the general way; the others are
        # grouped by their one time as the index holds them (no per-key test of
        # the time: it is one of `complete`).
        rest = [key for key in keys if type(pending[key]) is set]
        several = set(rest)
        groups = [(t, [k for k in by_time[t] if k not in several] if several
                   else list(by_time[t])) for t in complete]
        single = [pair for t, ks in groups for pair in zip(ks, repeat(t))]
        if not single:
            return rest
        declined, work = chain_corrections_of(single, self.source.trace, self.out_trace,
                                              self.logic, emitted, chained)
        self.work += work
        left = {key for key, _u in declined}
        for u, ks in groups:
            if left:
                ks = [k for k in ks if k not in left]
            if ks:
                self._drop_single(u, ks)
                self.times_visited += len(ks)
        rest.extend(key for key, _u in declined)
        return rest

    def _reduce_key(self, key: Any, beyond: Callable[[Any], bool],
                    emitted: list[Update]) -> None:
        pending = self._pending[key]
        if type(pending) is not set:
            # The commonest case (a key touched once in a pass): no time to put back,
            # one index entry to drop.
            u = pending
            if beyond(u):
                return
            del self._pending[key]
            by_time = self._by_time
            keys = by_time.touch(u)
            del keys[key]
            if not keys:
                del by_time[u]
                self._caps = None
            seeds = [u]
        else:
            seeds = [t for t in pending if not beyond(t)]
            if not seeds:
                return  # every candidate lies above a pending time, so none is complete
            self._drop_pending(key)
            for t in pending:
                if beyond(t):
                    self._add_pending(key, t)   # no evaluation now can depend on it

        def correct(u: Any, acc_in: dict, acc_out: dict) -> dict:
            return self._correction(key, u, acc_in, acc_out)

        inputs = self.source.trace.get(key)
        outputs = self.out_trace.get(key)
        chained = None
        if all(type(t) is int for t in seeds):
            made, later, work = replay_total(seeds, inputs, outputs, beyond, correct)
        elif self.chain_replay and (chained := replay_chain(seeds, inputs, outputs, beyond,
                                                             correct)) is not None:
            made, later, work = chained
        elif len(inputs) + len(outputs) < self.direct_below:
            made, later, work = replay_direct(seeds, inputs, outputs, beyond, correct)
        else:
            floor = floor_of(seeds)
            made, later, work = replay(seeds, self.source.trace.key_histories(key, floor),
                                       self.out_trace.key_histories(key, floor), beyond,
                                       correct)
        self.work += work
        for u in later:
            self._add_pending(key, u)
        for o, u, r in made:
            emitted.append(((key, o), u, r))

    def _correction(self, key: Any, u: Any, acc_in: dict, acc_out: dict) -> dict:
        """`logic(key, acc_in) - acc_out`: the output updates owed at `u`."""
        self.times_visited += 1
        desired: dict = {}
        if acc_in:
            vals = sorted_data(acc_in.items(), key=_value)
            try:
                result = self.logic(key, vals)
            except Exception as exc:  # noqa: BLE001 - user code
                raise self.user_error(exc, (key, vals), u, what="reduce logic") from exc
            for o, r in (self._pairs(result, key, vals, u) if self._check_result
                         else result):
                if r:
                    desired[o] = desired.get(o, 0) + r
        for o, r in acc_out.items():
            desired[o] = desired.get(o, 0) - r
        return desired

    def _pairs(self, result: Any, key: Any, vals: list, time: Any) -> list:
        """The logic's `result` as a list of `(output, diff)` pairs with hashable
        outputs and proper diffs, checked here; a `DataError` naming this operator,
        the key with its values, and the time otherwise."""
        def wrong(what: str) -> DataError:
            return DataError(f"the logic of {self.name} must return an iterable of "
                             f"(output, diff) pairs; {what}", operator=self.name,
                             record=(key, vals), time=time)
        if isinstance(result, (str, bytes)) or not hasattr(result, "__iter__"):
            raise wrong(f"it returned {result!r}")
        try:
            pairs = list(result)
        except Exception as exc:  # noqa: BLE001 - a user generator failing midway
            raise self.user_error(exc, (key, vals), time, what="reduce logic") from exc
        for i, pair in enumerate(pairs):
            if type(pair) is not tuple or len(pair) != 2:
                raise wrong(f"it gave {pair!r}")
            o, r = pair
            if type(r) is not int:
                try:
                    pairs[i] = (o, check_diff(r))     # numpy ints become ints
                except DiffError as exc:
                    raise wrong(f"the diff of {o!r} is {r!r}: {exc.message}") from None
            try:
                hash(o)
            except TypeError:
                raise wrong(f"the output {o!r} is unhashable (use tuples, not lists "
                            "or dicts)") from None
        return pairs

    def trace_records(self) -> int:
        return self.out_trace.record_count()

    def traces(self) -> tuple:
        return (self.out_trace,)


# -- built-in logics -----------------------------------------------------------

def count_logic(key: Any, vals: list) -> list:
    """The total count of the key (records arranged by self: values are `()`)."""
    return [(sum(c for _v, c in vals), 1)]


def sum_logic(key: Any, vals: list) -> list:
    """The sum of values times their counts."""
    return [(sum(v * c for v, c in vals), 1)]


def min_logic(key: Any, vals: list) -> list:
    """The least value present with a positive count."""
    present = [v for v, c in vals if c > 0]
    return [(min(present), 1)] if present else []


def max_logic(key: Any, vals: list) -> list:
    """The greatest value present with a positive count."""
    present = [v for v, c in vals if c > 0]
    return [(max(present), 1)] if present else []


def threshold_logic(f: Callable[[Any], Any]) -> Logic:
    """Records arranged by self; output multiplicity `f(count)` (zero drops it)."""
    def logic(key: Any, vals: list) -> list:
        m = f(sum(c for _v, c in vals))
        return [((), m)] if m else []
    return logic


def distinct_logic(key: Any, vals: list) -> list:
    """Present once when the count is positive, absent otherwise ("Implementing
    Z-sets"; "Notes on DBSP", 2.9.3).

    Differential dataflow's `distinct` emits one copy for any nonzero count,
    negative included; this one follows those texts and drops negative counts.
    """
    return [((), 1)] if sum(c for _v, c in vals) > 0 else []


_BUILT_IN = (count_logic, sum_logic, min_logic, max_logic, distinct_logic)

# Their results given the total count of a key whose values are all `()`.
register_total_logic(count_logic, lambda total: {total: 1},
                     lambda totals: (np.ones(len(totals), dtype=bool), totals.reshape(-1, 1), -1))
register_total_logic(distinct_logic, lambda total: {(): 1} if total > 0 else {},
                     lambda totals: (totals > 0,
                                     np.empty((int((totals > 0).sum()), 0), np.int64), 0))
