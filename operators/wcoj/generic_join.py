"""Incremental Generic Join over Z-sets, one operator, tick by tick.

What this isolates: the algorithm of Finn Völkel's "WCOJ meets DBSP" as one state machine.
Each complete time `t` is a tick: the inputs' changes at `t` are the deltas
(`Δ_j`), everything at earlier times is the accumulated state `z1` (z^-1), and
the output at `t` is `Q(z1 + Δ) - Q(z1)`.  Ticks are processed in time order, so
this needs *totally ordered* (int) times: under a partial order `Q(acc(<t) + Δ) -
Q(acc(<t))` is not the change at `t` (for `Q(R) = R x R` with changes at `(1, 0)`
and `(0, 1)` it misses the cross terms at `(1, 1)`, where nothing changed), and
`on_input` raises `TimeError` for other times.  Use delta queries there.

The multi-way delta formula is applied *relation by relation*,

    Q(z1 + Δ) - Q(z1) = Σ_i  Q(new_0, .., new_{i-1}, Δ_i, z1_{i+1}, .., z1_{n-1}),

(`new = z1 + Δ`; for two relations: `ΔR x ΔS + ΔR x z1(S) + z1(R) x ΔS`), and
each term is a Generic Join: its variables are bound level by level (the term's
`Δ_i` variables first), and at each level every atom holding the variable is a
*prefix extender* over its `Δ`, `new` or `z1` state: all `count` their
extensions of the prefix, the one with the fewest `propose`s them, the others
`intersect`.  The post keeps the levels' intermediate weights at 1 (an atom
contributes the *support* of its projection until its last variable binds, and
its weight then), so each relation's weight is applied exactly once.

Why per relation first: the post's sketch applies the product rule per level to
the prefixes of the *delta* trie only, which never visits a prefix that did not
change itself, and so misses changes below it (a new edge `(y, z)` under an
unchanged `x` in the triangle query).  Unrolling by relation first keeps the
level-wise count / propose / intersect and is exact.

State (`z1`): per source relation its accumulated tuples, and per (relation, key
positions, extension position) an index `key -> value -> weight` (the
relation's multiplicity when the extension completes the tuple, else the number
of its tuples with that key and value: its support).  Rollback is the shared one of
`operators.undo`: every one of these is an `UndoDict`, so a step records the
tuples and index keys it wrote (an index key's before-image is its small
`value -> weight` dict), not a copy of the state.

Counters: `counted`, `proposed`, `validated` (intersection look-ups), `prefixes`
(intermediate records of every level), and `work`, their sum.

>>> tri = [("x", "y"), ("y", "z"), ("x", "z")]
>>> gj = GenericJoin(tri, [0, 0, 0], 1, head=("x", "y", "z"))
>>> gj.on_input(0, [((1, 2), 0, 1), ((2, 3), 0, 1), ((1, 3), 1, 1), ((2, 3), 2, -1)])
>>> from lattice import Antichain
>>> gj.on_frontier([Antichain([3])]); gj.take_output()
[((1, 2, 3), 1, 1), ((1, 2, 3), 2, -1)]
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import attrs

from lattice import Antichain
from operators.base import Operator, Update
from operators.undo import UndoDict
from operators.wcoj.plan import key_getter, tuple_getter
from ddflow.errors import TimeError
from ddflow.updates import consolidate_unsorted


@attrs.frozen
class Extender:
    """Atom `atom` at one level: its index `(source, key_src, ext_src)`, read in
    `mode` `"delta"` (the term's own `Δ_i`), `"new"` (`z1 + Δ`) or `"old"` (`z1`);
    `last`: the level completes the atom, so its weight applies."""

    atom: int
    source: int
    key_src: tuple
    ext_src: int
    key_pre: tuple
    last: bool
    mode: str


@attrs.frozen
class Level:
    var: str
    extenders: tuple


@attrs.frozen
class GJPlan:
    """The Generic Join of the term of atom `trigger`: one level per variable."""

    trigger: int
    order: tuple
    levels: tuple


def generic_plan(atoms: Sequence[Sequence[str]], sources: Sequence[int],
                 trigger: int) -> GJPlan:
    """Levels for the term of atom `trigger`: its variables first (its `Δ` is the
    small relation that should drive the join), then greedily the variable held by
    most atoms that already share a bound variable.

    >>> plan = generic_plan([("x", "y"), ("y", "z"), ("x", "z")], [0, 0, 0], 2)
    >>> [(l.var, [(e.atom, e.mode, e.last) for e in l.extenders]) for l in plan.levels]
    [('x', [(0, 'new', False), (2, 'delta', False)]), ('z', [(1, 'new', False), (2, 'delta', True)]), ('y', [(0, 'new', True), (1, 'new', True)])]
    """
    first_seen: dict = {}
    for a in atoms:
        for v in a:
            first_seen.setdefault(v, len(first_seen))
    order = list(atoms[trigger])
    while len(order) < len(first_seen):
        bound = set(order)

        def rank(v: str) -> tuple:
            linked = sum(1 for a in atoms if v in a and bound.intersection(a))
            return (linked, sum(v in a for a in atoms), -first_seen[v])
        order.append(max((v for v in first_seen if v not in bound), key=rank))
    pos = {v: k for k, v in enumerate(order)}
    levels = []
    for lv, v in enumerate(order):
        exts = []
        for j, a in enumerate(atoms):
            if v not in a:
                continue
            key_src = tuple(k for k, w in enumerate(a) if pos[w] < lv)
            mode = "delta" if j == trigger else ("new" if j < trigger else "old")
            exts.append(Extender(j, sources[j], key_src, a.index(v),
                                 tuple(pos[a[k]] for k in key_src),
                                 all(pos[w] <= lv for w in a), mode))
        levels.append(Level(v, tuple(exts)))
    return GJPlan(trigger, tuple(order), tuple(levels))


class _View:
    """One extender during one tick: count / propose / intersect over its state."""

    __slots__ = ("old", "d", "mode", "last")

    def __init__(self, old: dict, d: dict, mode: str, last: bool) -> None:
        self.old, self.d, self.mode, self.last = old, d, mode, last

    def count(self, k: Any) -> int:
        mode = self.mode
        if mode == "old":
            return len(self.old.get(k, ()))
        if mode == "delta":
            return len(self.d.get(k, ()))
        # An upper bound: the proposer is a heuristic choice, zero is still exact.
        return len(self.old.get(k, ())) + len(self.d.get(k, ()))

    def propose(self, k: Any) -> list[tuple[Any, Any]]:
        mode, last = self.mode, self.last
        if mode == "old":
            m = self.old.get(k)
            if not m:
                return []
            return list(m.items()) if last else [(v, 1) for v in m]
        if mode == "delta":
            m = self.d.get(k)
            if not m:
                return []
            return list(m.items()) if last else [(v, 1) for v in m]
        old, d = self.old.get(k) or {}, self.d.get(k) or {}
        if last:
            merged = dict(old)
            for v, w in d.items():
                merged[v] = merged.get(v, 0) + w
            return [(v, w) for v, w in merged.items() if w]
        out = [(v, 1) for v, c in old.items() if c + d.get(v, 0) > 0]
        out.extend((v, 1) for v, f in d.items() if f > 0 and v not in old)
        return out

    def intersect(self, k: Any, cands: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        mode, last = self.mode, self.last
        if mode == "new":
            old, d = self.old.get(k), self.d.get(k)
            if not old and not d:
                return []
            old, d = old or {}, d or {}
            if last:
                out = []
                for v, w in cands:
                    f = old.get(v, 0) + d.get(v, 0)
                    if f:
                        out.append((v, w * f))
                return out
            return [(v, w) for v, w in cands if old.get(v, 0) + d.get(v, 0) > 0]
        m = (self.old if mode == "old" else self.d).get(k)
        if not m:
            return []
        if last:
            out = []
            for v, w in cands:
                f = m.get(v)
                if f:
                    out.append((v, w * f))
            return out
        return [(v, w) for v, w in cands if v in m]


class GenericJoin(Operator):
    """Völkel's incremental Generic Join ("WCOJ meets DBSP") of `atoms` over int times.

    `atoms[j]` are the distinct variables of atom `j`, in the order of its source
    tuples, read from input port `sources[j]`; the output is the `head` variables'
    values, as a tuple, with multiplicity the product of the atoms'.
    """

    _state = ("_acc", "_indexes", "_pending")
    _caches = ("_caps",)
    _counters = ("counted", "proposed", "validated", "prefixes")

    def __init__(self, atoms: Sequence[Sequence[str]], sources: Sequence[int],
                 n_sources: int, head: Sequence[str], name: str = "generic_join") -> None:
        super().__init__(name)
        self.n_inputs = n_sources
        atoms = [tuple(a) for a in atoms]
        self.plans = [generic_plan(atoms, sources, i) for i in range(len(atoms))]
        self._heads = [tuple_getter([p.order.index(v) for v in head]) for p in self.plans]
        self._trigger_sources = [sources[p.trigger] for p in self.plans]
        # Per source: tuple -> multiplicity.  A tuple: the family never changes.
        self._acc: tuple[dict, ...] = tuple(UndoDict() for _ in range(n_sources))
        ids = {(e.source, e.key_src, e.ext_src, e.last)
               for p in self.plans for lv in p.levels for e in lv.extenders}
        # index id -> key -> value -> weight.  The id -> index map is fixed after
        # construction; `_indexes` lists the same indices for rollback.
        self._index: dict[tuple, dict] = {i: UndoDict() for i in sorted(ids)}
        self._indexes = tuple(self._index.values())
        self._by_source: list[list] = [[] for _ in range(n_sources)]
        for i in sorted(ids):
            self._by_source[i[0]].append((i, key_getter(i[1]), i[2], i[3]))
        self._getters = {(e.atom, e.key_pre): key_getter(e.key_pre)
                         for p in self.plans for lv in p.levels for e in lv.extenders}
        # time -> its updates as (port, data, diff), in arrival order (a list that
        # only grows until the tick takes it).
        self._pending: dict[int, list[tuple]] = UndoDict()
        self.counted = self.proposed = self.validated = self.prefixes = 0

    # -- input and progress -------------------------------------------------------
    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        by_time: dict[int, list[tuple]] = {}
        for d, t, r in updates:
            if type(t) is not int:
                raise TimeError("the generic join processes ticks in time order and needs "
                                "totally ordered (int) times; use delta queries for "
                                f"partially ordered ones (got {t!r})",
                                operator=self.name, record=d, time=t)
            tick = by_time.get(t)
            if tick is None:
                by_time[t] = [(port, d, r)]
            else:
                tick.append((port, d, r))
        self._pending.extend_lists(by_time)
        self._caps = None

    def capabilities(self) -> Iterable[Any]:
        return self.pending_capabilities(self._pending)

    def wants_frontier(self) -> bool:
        return bool(self._pending)

    def on_frontier(self, frontiers: Sequence[Antichain]) -> None:
        if not self._pending:
            return
        low = None
        for f in frontiers:
            if f.elements and (low is None or f.elements[0] < low):
                low = f.elements[0]
        ready = sorted(t for t in self._pending if low is None or t < low)
        for t in ready:
            self.times_visited += 1
            self._tick(t, self._pending.pop(t))
        if ready:
            self._caps = None

    # -- one tick -------------------------------------------------------------------
    def _tick(self, t: int, ups: list[tuple]) -> None:
        sums: list[dict] = [{} for _ in range(self.n_inputs)]
        for port, data, r in ups:
            d = sums[port]
            d[data] = d.get(data, 0) + r
        deltas = [{k: w for k, w in d.items() if w} for d in sums]
        views: dict = {}
        out: list[Update] = []
        for plan, head, src in zip(self.plans, self._heads, self._trigger_sources):
            if not deltas[src]:
                continue   # its Δ_i is empty: the term is zero
            for p, w in self._term(plan, deltas, views):
                out.append((head(p), t, w))
        self._commit(deltas)
        if out:
            self.emit(consolidate_unsorted(out))

    def _term(self, plan: GJPlan, deltas: list[dict], views: dict) -> list[tuple]:
        prefixes: list[tuple] = [((), 1)]
        counted = proposed = validated = made = 0
        for level in plan.levels:
            exts = [(self._getters[(e.atom, e.key_pre)], self._view(e, deltas, views))
                    for e in level.extenders]
            nxt: list[tuple] = []
            for p, w in prefixes:
                keys = []
                best = -1
                low = 0
                for n, (kg, x) in enumerate(exts):
                    k = kg(p)
                    c = x.count(k)
                    counted += 1
                    keys.append(k)
                    if best < 0 or c < low:
                        best, low = n, c
                    if not c:
                        break
                if not low:
                    continue
                cands = exts[best][1].propose(keys[best])
                proposed += len(cands)
                for n, (kg, x) in enumerate(exts):
                    if n == best or not cands:
                        continue
                    validated += len(cands)
                    cands = x.intersect(keys[n], cands)
                for v, f in cands:
                    nxt.append((p + (v,), w * f))
            made += len(nxt)
            prefixes = nxt
            if not prefixes:
                break
        self.counted += counted
        self.proposed += proposed
        self.validated += validated
        self.prefixes += made
        self.work += counted + proposed + validated
        return prefixes

    def _view(self, e: Extender, deltas: list[dict], views: dict) -> _View:
        iid = (e.source, e.key_src, e.ext_src, e.last)
        old = self._index[iid]
        if e.mode == "old":
            return _View(old, {}, "old", e.last)
        vk = (iid, e.mode == "delta" or e.last)
        d = views.get(vk)
        if d is None:
            d = views[vk] = self._delta_view(iid, deltas[e.source], counting=e.mode == "delta")
        return _View(old, d, e.mode, e.last)

    def _delta_view(self, iid: tuple, delta: dict, counting: bool) -> dict:
        """`key -> value -> x` for this tick's `Δ` of one index: the diff (for a
        completing extension), the number of `Δ`'s tuples (`counting`: the term's
        own `Δ_i`), or the change of the support (`z1 -> new`)."""
        source, key_src, ext, last = iid
        kg = key_getter(key_src)
        acc = self._acc[source]
        out: dict = {}
        for tup, r in delta.items():
            k, v = kg(tup), tup[ext]
            if last:
                x = r
            elif counting:
                x = 1
            else:
                m = acc.get(tup, 0)
                x = (m + r != 0) - (m != 0)
                if not x:
                    continue
            inner = out.get(k)
            if inner is None:
                out[k] = {v: x}
            else:
                inner[v] = inner.get(v, 0) + x
        return out

    # -- commit (z1 := z1 + Δ) -----------------------------------------------------------
    def _commit(self, deltas: list[dict]) -> None:
        for s, delta in enumerate(deltas):
            if not delta:
                continue
            acc = self._acc[s]
            indexes = [(self._index[iid], kg, ext, last)
                       for iid, kg, ext, last in self._by_source[s]]
            for tup, r in delta.items():
                m = acc.get(tup, 0)
                m2 = m + r
                if m2:
                    acc[tup] = m2
                else:
                    acc.pop(tup, None)
                flip = (m2 != 0) - (m != 0)
                for index, kg, ext, last in indexes:
                    if not last and not flip:
                        continue
                    k, v = kg(tup), tup[ext]
                    inner = index.touch(k)     # its weights change in place below
                    if inner is None:
                        inner = index[k] = {}
                    x2 = m2 if last else inner.get(v, 0) + flip
                    if x2:
                        inner[v] = x2
                    else:
                        inner.pop(v, None)
                        if not inner:
                            del index[k]

    def trace_records(self) -> int:
        """Records held: accumulated tuples plus index entries."""
        return (sum(len(a) for a in self._acc)
                + sum(len(m) for index in self._index.values() for m in index.values()))

    def _check(self) -> None:
        """Invariants: no zero multiplicity, indices agree with the accumulated state."""
        for s, acc in enumerate(self._acc):
            assert all(acc.values()), f"zero multiplicity in source {s}"
            for iid, kg, ext, last in self._by_source[s]:
                want: dict = {}
                for tup, m in acc.items():
                    inner = want.setdefault(kg(tup), {})
                    inner[tup[ext]] = m if last else inner.get(tup[ext], 0) + 1
                assert self._index[iid] == want, f"index {iid} out of date"


__all__ = ["GenericJoin", "GJPlan", "Level", "Extender", "generic_plan"]
