"""Join: bilinear; the output time is the lattice join, the diffs multiply.

For updates `((k, a), ta, ra)` and `((k, b), tb, rb)` with equal keys the join produces
`(logic(k, a, b), join(ta, tb), ra * rb)` (McSherry, "Generalizing linear operators";
join_stream and join_trace of the "Notes on DBSP").  Bilinearity makes it incremental: for
new batches `dA`, `dB` and traces `A`, `B` holding everything before them,

    d(A x B) = dA x B + A x dB + dA x dB.

Both inputs are arrangements whose traces already contain the new batch when the
join runs (the arrangement inserts a batch before passing it on), so the join
computes `dA x B_full + A_full x dB - dA x dB`, which is the same sum.  Each
trace is read only at times in advance of the *other* input's frontier, so the
join lets each arrangement compact that far.

The law: for every time `t`, `acc(join(A, B), t) = join(acc(A, t), acc(B, t))`.

>>> from lattice import Antichain
>>> from operators.arrange import Arrange
>>> left, right = Arrange(name="left"), Arrange(name="right")
>>> j = JoinCore(left, right, kind="join")
>>> left.on_input(0, [(("k", "a"), 1, 2)]); right.on_input(0, [(("k", "x"), 2, 3)])
>>> for arr, port in ((left, 0), (right, 1)):
...     arr.on_frontier([Antichain()]); j.on_input(port, arr.take_output())
>>> j.on_frontier([Antichain(), Antichain()]); j.take_output()
[(('k', ('a', 'x')), 2, 6)]
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Callable, Iterable, Sequence

from lattice import Antichain, join
from operators.arrange import Arrange
from operators.base import Operator, Update
from ddflow import column_batch, column_join, columnar
from ddflow.columnar import Columns, wants_column_join

_KINDS = ("join", "map", "core", "semijoin")

#: Whether a large delta goes by `JoinCore._in_columns` (`set_join_columns`).
_columns_join = True

#: `_in_columns` encodes the traces' row batches when they hold at most this many
#: updates per delta update (beyond, the row path's lookups cost less).
_ENCODE_ROWS_PER_DELTA = 4


def set_join_columns(on: bool) -> bool:
    """Turn `JoinCore._in_columns` on or off; returns the previous setting.  Both
    give the same accumulations: the tests run each."""
    global _columns_join
    old, _columns_join = _columns_join, on
    return old


#: Whether a semijoin of ints passes its output on as record columns (False: rows).
_columns_out = True


def set_columns_out(on: bool) -> bool:
    """Turn the semijoin's columnar output on or off; returns the previous setting
    (both give the same accumulations: the tests run each)."""
    global _columns_out
    old, _columns_out = _columns_out, on
    return old


class JoinCore(Operator):
    """Join two arrangements by key; `kind` says what each matching pair becomes.

    * `"join"`: `(k, (a, b))`
    * `"map"`: `logic(k, a, b)`
    * `"core"`: every element of `logic(k, a, b)` (an iterable)
    * `"semijoin"`: `(k, a)` (the right side is arranged by self, values `()`)
    """

    n_inputs = 2
    # Each side's changes since the last frontier: extended, then swapped for fresh lists.
    _append_only = ("_pending_left", "_pending_right", "_cols_left", "_cols_right")
    _private_buffers = _append_only
    takes_columns = True
    _writes = ("left", "right")     # advance_reader moves the arrangements' compaction

    def __init__(self, left: Arrange, right: Arrange, kind: str = "join",
                 logic: Callable | None = None, name: str = "join") -> None:
        if kind not in _KINDS:
            raise ValueError(f"unknown join kind {kind!r}")
        super().__init__(name)
        self.left, self.right = left, right
        self.kind, self.logic = kind, logic
        self._rid_left = left.register_reader()
        self._rid_right = right.register_reader()
        self._pending_left: list[Update] = []
        self._pending_right: list[Update] = []
        # Record columns of pairs (`ddflow.columnar`) handed on by an arrangement.
        self._cols_left: list = []
        self._cols_right: list = []

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        if type(updates) is Columns:
            (self._cols_right if port else self._cols_left).append(updates)
        else:
            (self._pending_right if port else self._pending_left).extend(updates)

    def capabilities(self) -> Iterable[Any]:
        # Input waits here only until the frontier is told, in the same visit.
        if not (self._pending_left or self._pending_right or self._cols_left
                or self._cols_right):
            return ()
        return Antichain(chain((u[1] for q in (self._pending_left, self._pending_right)
                                for u in q),
                               (t for c in chain(self._cols_left, self._cols_right)
                                for t in column_batch.record_times(c)))).elements

    def wants_frontier(self) -> bool:
        # Idle, a move of the frontier would only advance compaction, which may lag
        # until the next input (later compaction is always sound).
        return bool(self._pending_left or self._pending_right or self._cols_left
                    or self._cols_right)

    def on_frontier(self, frontiers: Sequence[Antichain]) -> None:
        d_left, d_right = self._pending_left, self._pending_right
        c_left, c_right = self._cols_left, self._cols_right
        if d_left or d_right or c_left or c_right:
            self._pending_left, self._pending_right = [], []
            self._cols_left, self._cols_right = [], []
            done = (self._in_columns(d_left, d_right, c_left, c_right) if _columns_join
                    else None)
            if done is not None:
                self.emit(done)
            else:
                if c_left:
                    d_left = d_left + [u for c in c_left for u in columnar.records(c)]
                if c_right:
                    d_right = d_right + [u for c in c_right for u in columnar.records(c)]
                self._in_rows(d_left, d_right)
        # Future right batches only meet the left trace at times in advance of the
        # right frontier, and vice versa: that is how far each may compact.
        self.left.advance_reader(self._rid_left, frontiers[1])
        self.right.advance_reader(self._rid_right, frontiers[0])

    def _in_rows(self, d_left: list[Update], d_right: list[Update]) -> None:
        """Both deltas against the other side's trace, the pairs of the two deltas
        taken away, the outputs consolidated (a dict over the triples)."""
        out: list[Update] = []
        if d_left:
            self._against(d_left, self.right.trace, False, out)
        if d_right:
            self._against(d_right, self.left.trace, True, out)
            if d_left:
                by_key: dict[Any, list] = {}
                for (k, b), tb, rb in d_right:
                    by_key.setdefault(k, []).append((b, tb, rb))
                self._product(d_left, by_key.get, False, -1, out)
        self.emit(self.consolidate(out))

    def _in_columns(self, d_left: list[Update], d_right: list[Update],
                    c_left: Sequence = (), c_right: Sequence = ()) -> list | None:
        """`_in_rows` by the vectorized kernels, when the deltas are large and every
        batch of both traces is plain in one layout per side (the traces' row
        batches, if few, encoded: `Trace.column_batches`): each delta joined with
        the other side's batches and with the other delta (sign -1), the pairs
        consolidated in columns and decoded once (`ddflow.column_join.join_records`),
        not each decoded and the lot summed by a dict.  None (nothing done) when
        that does not apply."""
        kind = self.kind
        n = len(d_left) + len(d_right) + sum(map(len, c_left)) + sum(map(len, c_right))
        if kind not in ("join", "semijoin") or not (wants_column_join(n) or c_left
                                                     or c_right):
            return None
        # A delta is looked up in the other side's columns, so its own rows need no
        # order (the pairs are consolidated at the end); the right delta is also the
        # other side of the deltas' pairs, so it is sorted by key.
        dl = _delta(d_left, c_left, False)
        dr = _delta(d_right, c_right, True)
        if ((d_left or c_left) and dl is None) or ((d_right or c_right) and dr is None):
            return None
        limit = _ENCODE_ROWS_PER_DELTA * n
        lt, rt = self.left.trace, self.right.trace
        right_cols = rt.column_batches(limit) if dl is not None else []
        left_cols = lt.column_batches(limit) if dr is not None else []
        if right_cols is None or left_cols is None:
            return None
        lefts = left_cols + ([dl] if dl is not None else [])
        rights = right_cols + ([dr] if dr is not None else [])
        both = lefts + rights
        if len({c.kshape for c in both}) != 1 or len({c.product for c in both}) != 1 or len(
                {c.vshape for c in lefts}) > 1 or len({c.vshape for c in rights}) > 1:
            return None
        parts: list = []
        work = 0
        jobs = ([(dl, c, False, 1) for c in right_cols]
                + [(dr, c, True, 1) for c in left_cols]
                + ([(dl, dr, False, -1)] if dl is not None and dr is not None else []))
        for delta, other, flipped, sign in jobs:
            got = column_join.join_columns(delta, other, flipped, sign, kind)
            if got is None:
                return None
            made, pairs = got
            work += pairs
            if made is not None:
                parts.append(made)
        if not parts:
            self.work += work
            return []
        out = None
        if kind == "semijoin" and _columns_out:
            # Passed on as record columns: a map, an arrangement or a join after it
            # reads them without a tuple per pair (the engine decodes them for others).
            out = column_join.semijoin_columns(parts, lefts[0].vshape)
        if out is None:
            out = column_join.join_records(parts, lefts[0].vshape, rights[0].vshape, kind)
        if out is not None:
            self.work += work
        return out

    def _against(self, delta: list[Update], trace: Any, flipped: bool,
                 out: list[Update]) -> None:
        """`delta` paired with the other side's whole trace: against its columnar
        batches by the vectorized kernel (`ddflow.column_join.join_updates`) when the
        delta is large and plain and the output is a `join` or `semijoin`, against
        the rest record by record."""
        lookup = trace.get
        view = getattr(trace, "column_view", None)
        if (view is not None and self.kind in ("join", "semijoin")
                and wants_column_join(len(delta))):
            cols, rows_get = view()
            dc = columnar.encode(delta) if cols else None
            if dc is not None and all(c.kshape == dc.kshape and c.product == dc.product
                                      for c in cols):
                for c in cols:
                    made, pairs = column_join.join_updates(dc, c, flipped, 1, self.kind)
                    out.extend(made)
                    self.work += pairs
                lookup = rows_get
        self._product(delta, lookup, flipped, 1, out)

    def _product(self, delta: list[Update], lookup: Callable, flipped: bool,
                 sign: int, out: list[Update]) -> None:
        """Pair each delta update with the other side's history for its key."""
        kind, logic, ap = self.kind, self.logic, out.append
        work = 0
        for (k, x), tx, rx in delta:
            hist = lookup(k)
            if not hist:
                continue
            work += len(hist)
            rx = rx * sign
            for y, ty, ry in hist:
                a, b = (y, x) if flipped else (x, y)
                t = tx if tx == ty else join(tx, ty)
                r = ry * rx if flipped else rx * ry
                if kind == "join":
                    ap(((k, (a, b)), t, r))
                elif kind == "semijoin":
                    ap(((k, a), t, r))
                else:
                    try:
                        if kind == "map":
                            ap((logic(k, a, b), t, r))
                        else:
                            for o in logic(k, a, b):
                                ap((o, t, r))
                    except Exception as exc:  # noqa: BLE001 - user code
                        raise self.user_error(exc, (k, a, b), t) from exc
        self.work += work


def _delta(rows: list, cols: Sequence, sort: bool) -> Columns | None:
    """One side's delta as keyed columns: its rows encoded, its record columns of
    pairs keyed (`columnar.as_pairs`); sorted by key when `sort`.  None when nothing
    is there, or something is not plain or not of one layout."""
    parts = [column_batch.as_pairs(c) for c in cols]
    if rows:
        parts.append(columnar.encode(rows, sort=False))
    if not parts or any(p is None for p in parts):
        return None
    if sort:
        return columnar.merge(parts, None)
    return column_batch.concat(parts)
