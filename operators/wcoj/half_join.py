"""The half join: read an index for each prefix at its own time, once complete there.

What this isolates: the part every half join of a delta query shares
(`operators.wcoj.delta`'s `Count`, `Propose` and `Validate`, whose docstring
gives the rule law): holding prefixes at their times until the index's frontier
says no entry that counts can still come ("before" is dogsdogsdogs' `AltNeu` in
the total order `sort_key`: `(sort_key(s), True) <= (sort_key(t), neu)`),
releasing the index's compaction as the least pending time moves
(`RELEASE_EVERY`), and the bulk path (`bulk_path`, switch
`set_half_join_columns`): a large batch of prefixes at one int time read from the
index's columns at once (`operators.wcoj.columns.Reads`), after asking the
index's batch descriptions whether anything can count at all.  Each subclass says
what one prefix makes of the entries (`_total` at int times, `_partial` at
partially ordered ones, `_unread` when nothing counts).

Invariant: for prefix `(p, t, r)` and index entries `(v, s, r2)` of `p`'s key, a
subclass sees exactly the entries with `s` before `t` in the rule's sense, and
its outputs stay at `t`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from lattice import Antichain, Product, minimum, sort_key
from operators.arrange import Arrange
from operators.base import Operator, Update
from operators.undo import UndoDict
from ddflow.columnar import wants_column_join
from ddflow.updates import by_time

from operators.wcoj.columns import Reads
from operators.wcoj.plan import KeyFn


#: Int times: a half join lets its index compact once its least pending time has
#: moved this far since the last release.
RELEASE_EVERY = 8

#: Whether the half joins take a large batch of prefixes by the bulk path (`bulk_path`):
#: at int times read from the index's columns at once
#: (`operators.wcoj.columns.Reads`), not key by key (`set_half_join_columns`).
_half_join_columns = True


def set_half_join_columns(on: bool) -> bool:
    """Turn the half joins' bulk path (`bulk_path`) on or off; returns the previous
    setting.  Both give the same accumulations: the tests run each."""
    global _half_join_columns
    old, _half_join_columns = _half_join_columns, on
    return old


def bulk_path(n: int) -> bool:
    """Whether `n` prefixes at one time go by the bulk path: read from the index's
    columns, and first the index's batch descriptions asked whether anything can
    count at all (`HalfJoin._nothing_counts`); a few (a churn epoch's) go key by
    key, as before the bulk path."""
    return _half_join_columns and wants_column_join(n)


class HalfJoin(Operator):
    """Read an index for each prefix at its own time, once the index is complete there.

    Input 0 is the stream of prefixes; input 1 is an `Arrange` whose trace is read
    (its output batches are ignored: only its frontier matters).  Subclasses say
    what a prefix and its index entries become (`_total` for int times, `_partial`
    otherwise).  Counters beyond the base: `counted`, `proposed`, `validated`
    (records produced by each kind), and `work` counts index entries read.
    """

    n_inputs = 2
    # The index is the arrangement's state: rollback keeps the buffer, `_low`, the
    # counters, and extends to the index, whose compaction `_release` advances.
    _state = ("_buffer", "_low")
    _caches = ("_caps",)
    _counters = ("counted", "proposed", "validated")
    _writes = ("index",)

    def __init__(self, index: Arrange, neu: bool, total: bool, name: str,
                 finish: KeyFn | None = None) -> None:
        super().__init__(name)
        self.index = index
        self.neu = neu
        self.total = total
        #: The last operator of a rule maps its outputs to head tuples (and, under a
        #: partial order, moves them to their `lub`: sound, as `lub >= t`).
        self.finish = finish
        self._rid = index.register_reader()
        self._buffer: dict[Any, list[Update]] = UndoDict()   # stream time -> waiting prefixes
        self._low: Any = None
        self.counted = self.proposed = self.validated = 0

    def on_input(self, port: int, updates: list[Update]) -> None:
        if port:
            return   # the index's batches: it is read through its trace
        self.records_in += len(updates)
        self._buffer.extend_lists(by_time(updates))
        self._caps = None

    def capabilities(self) -> Iterable[Any]:
        return self.pending_capabilities(self._buffer)

    def wants_frontier(self) -> bool:
        return bool(self._buffer)

    def on_frontier(self, frontiers: Sequence[Antichain]) -> None:
        buf = self._buffer
        if buf:
            index_frontier = frontiers[1]
            out: list[Update] = []
            if self.total:
                # The index may still bring times >= f; entries count up to t (neu)
                # or below t (alt): t is safe once f > t, or f >= t.
                f = index_frontier.elements[0] if index_frontier.elements else None
                neu = self.neu
                ready = [t for t in buf if f is None or (t < f if neu else t <= f)]
                for t in ready:
                    bound = t if neu else t - 1
                    recs = buf.pop(t)
                    if bulk_path(len(recs)) and self._nothing_counts(lambda s: s <= bound):
                        self._unread(recs, t, out)
                    else:
                        self._total(recs, t, bound, out)
            else:
                keys = [(sort_key(f), True) for f in index_frontier.elements]
                memo: dict = {}
                ready = []
                for t in list(buf):
                    kt = (sort_key(t), self.neu)
                    if all(k > kt for k in keys):
                        ready.append(t)
                        recs = buf.pop(t)
                        if bulk_path(len(recs)) and self._nothing_counts(reads_before(memo, kt)):
                            self._unread(recs, t, out)
                        else:
                            self._partial(recs, t, kt, memo, out)
            if ready:
                self._caps = None
            if out:
                finish = self.finish
                if finish is None:
                    self.emit(out)
                elif self.total:
                    self.emit([(finish(vals), t, r) for vals, t, r in out])
                else:
                    self.emit([(finish(vals), lub, r) for (vals, lub), _t, r in out])
        if self.total:
            self._release(frontiers[0])
        else:
            self._release_leading(frontiers[0])

    def _release_leading(self, frontier: Antichain) -> None:
        """`Product(e, i)` times with int epochs `e`: let the index compact to
        `{Product(low - 1, min)}`, `low` the least epoch of a prefix still to come.

        Every prefix still to come is at an epoch `>= low`, and its half join reads
        an entry at `s` in the lexicographic `sort_key` order: an entry of an
        earlier epoch is before it whatever its round.  Advancing by that frontier
        moves only such entries, to epoch `low - 1` with their round kept, so every
        comparison is unchanged and so is every join with a `lub` (whose epoch is
        `>= low`).  Entries of old epochs then consolidate per round, and the index
        follows the live data instead of every change ever made.  Other time shapes
        keep every time (the index is still consolidated per time).
        """
        times = [*frontier.elements, *self._buffer]
        if not times or not all(type(t) is Product and type(t.outer) is int for t in times):
            return
        low = min(t.outer for t in times)
        if low < 1 or (self._low is not None and low < self._low + RELEASE_EVERY):
            return
        self._low = low
        floor = Product(low - 1, minimum(times[0].inner))
        self.index.advance_reader(self._rid, Antichain((floor,)))

    def _release(self, frontier: Antichain) -> None:
        """Let the index compact to `{low - 1}`, `low` the least time still to come.

        Released every `RELEASE_EVERY` ticks, not every tick: a lag of a few times
        costs a few uncompacted entries, and saves the shared arrangement from
        recomputing its readers' meet at every step.
        """
        low = frontier.elements[0] if frontier.elements else None
        for t in self._buffer:
            if low is None or t < low:
                low = t
        if low is None or low < 1 or (self._low is not None
                                      and low < self._low + RELEASE_EVERY):
            return
        self._low = low
        self.index.advance_reader(self._rid, Antichain((low - 1,)))

    def _nothing_counts(self, counts: Callable[[Any], bool]) -> bool:
        """Whether no entry of the index can count at this read (`counts(s)` says
        whether an entry at `s` does): every time of a batch is in advance of the
        batch's `lower`, and `sort_key` is monotone along the order, so when no
        element of any batch's `lower` counts, no entry does.  On an initial load,
        where every entry is at the load's time, that is every atom read strictly
        before it (`alt`): its proposals and validations are empty without a read.
        O(#batches)."""
        batches = getattr(self.index.trace, "batches", None)
        if batches is None:
            return False
        return not any(counts(low) for b in batches for low in b.lower.elements)

    def _unread(self, recs: list[Update], t: Any, out: list) -> None:
        """What the prefixes become when nothing of the index counts at `t`
        (`_nothing_counts`), without reading it."""
        raise NotImplementedError

    def _column_reads(self, prefixes: list) -> Reads | None:
        """The index's entries for the prefixes' keys (`self.key`) read from its
        columns, when the prefixes are many enough for the vectorized reads and
        everything is plain; None: read key by key."""
        if not bulk_path(len(prefixes)):
            return None
        reads = Reads.of(self.index.trace, list(map(self.key, prefixes)))
        if reads is not None:
            self.work += reads.work()
        return reads

    def _total(self, recs: list[Update], t: int, bound: int, out: list) -> None:
        raise NotImplementedError

    def _partial(self, recs: list[Update], t: Any, kt: tuple, memo: dict, out: list) -> None:
        raise NotImplementedError


def reads_before(memo: dict, kt: tuple) -> Callable[[Any], bool]:
    """`s -> (sort_key(s), True) <= kt`, with sort keys memoised per call."""
    def counts(s: Any) -> bool:
        k = memo.get(s)
        if k is None:
            k = memo[s] = (sort_key(s), True)
        return k <= kt
    return counts


__all__ = ["HalfJoin", "RELEASE_EVERY", "set_half_join_columns", "bulk_path", "reads_before"]
