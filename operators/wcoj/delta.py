"""Delta queries with half joins: count, propose, validate (McSherry's dogsdogsdogs; Ammar,
McSherry, Salihoglu, Joglekar, "Distributed evaluation of subgraph queries").

What this isolates: the operators of a worst-case optimal *delta query* and the
plan of one update rule.  A query `Q = R_0 x R_1 x ... x R_{n-1}` (atoms joined on
shared variables) is maintained by one update rule per atom `i`,

    dQ/dR_i = dR_i x R_0 ... R_{i-1} (read up to and including t: "neu")
                   x R_{i+1} ... R_{n-1} (read strictly before t: "alt"),

each extending the changes `dR_i` variable by variable with the *other* atoms'
indices: every atom the next variable completes `count`s the prefix's extensions,
the one with the fewest `propose`s them, the others `validate` them.  Rules only
respond to their own `dR_i`; the indices are arrangements of the input relations
(a count index `key -> ()`, a propose index `key -> extension`, a validate index
`tuple -> ()`), each arranged once and shared by every rule, so the state is
linear in the inputs: no intermediate result is ever arranged.

The mechanism is the *half join*: for a prefix update `(p, t, r)` and the index
entries `(v, s, r2)` of `p`'s key, output `(f(p, v), t, r * r2)` for the entries
with `s` before `t` in the rule's sense, at the prefix's own time `t`.  "Before"
is dogsdogsdogs' `AltNeu`: entries are presented at `AltNeu(s, True)` and rule `i`
reads atom `j` at `AltNeu(t, j < i)`.  Here the comparison is made in the *total
order* `sort_key` of `AltNeu` (a linear extension, `(sort_key(s), True) <=
(sort_key(t), neu)`), as differential dataflow's `half_join` does: then every
combination of one update per atom (times `s_0 .. s_{n-1}`) is produced by exactly
one rule, the one whose `(sort_key(s_i), i)` is largest.

* Totally ordered (int) times: the linear extension is the order itself, the
  combination's time is `s_i = t`, so outputs are at the prefix's own time, and
  the rule reads `s <= t` (earlier atoms) or `s < t` (later atoms).
* Partially ordered times (`Product`): a combination's correct time is the lattice
  join of its times, which need not be any `s_i`.  The stream then keeps `t` (the
  time of the change `dR_i`, "initial time") as its timestamp, so capabilities
  and waiting are unchanged, and carries the join of the times met so far in the
  data: `(vals, lub)`.  `Stamp` starts it, `Delay` moves each result to its `lub`.
  (Comparing with the partial order instead would miss combinations whose times
  have no maximum, e.g. changes at `(1, 0)`, `(0, 1)` and `(0, 0)` that make a
  triangle at `(1, 1)`.)

Waiting: a half join reads entries up to `t`, so it holds a prefix at `t` (a
capability) until no element `f` of the index's input frontier could still bring
an entry that counts, `(sort_key(f), True) > (sort_key(t), neu)`; then it
processes it.  Compaction: with int times a reader may let the index compact to
`{low - 1}` (`low` the least time it may still process): every entry then compares
with every future `t >= low` as before, under `<=` and under `<`.  Under partial
orders `advance_by` can change the total-order comparison; but with times
`Product(epoch, round)` every prefix still to come is at an epoch `>= low`, before
which every entry counts whatever its round, so a reader lets the index advance
the epochs of older entries to `low - 1` (`HalfJoin._release_leading`).  Other
time shapes keep every time (the index is still consolidated per time).

Record formats along a rule (`P` is the payload: `vals` for ints, `(vals, lub)`
otherwise; `vals` the bound values in the rule's variable order):

* prefix: `P`
* counted: `(P, count, j)`: atom `j` proposes the fewest extensions so far
* proposed: `(P', j)`: extended by atom `j`, to be validated by the others

>>> from lattice import Antichain
>>> from operators.arrange import Arrange
>>> idx = Arrange(name="g by src")                     # propose index: src -> dst
>>> idx.on_input(0, [((1, 2), 0, 1), ((1, 3), 0, 1), ((1, 4), 1, 1)])
>>> idx.on_frontier([Antichain([1])]); _ = idx.take_output()
>>> prop = Propose(idx, neu=False, total=True, key=lambda vals: vals[0], name="propose")
>>> prop.on_input(0, [((1,), 1, 1)])                   # prefix (x=1) changes at t=1
>>> prop.on_frontier([Antichain([2]), Antichain([1])])  # entries before t=1 complete
>>> sorted(prop.take_output())                         # (1, 4) at 1 is not before 1
[((1, 2), 1, 1), ((1, 3), 1, 1)]
"""

from __future__ import annotations

from typing import Any

from lattice import join
from operators.arrange import Arrange
from operators.base import Operator, Update
from ddflow.updates import consolidate_unsorted

from operators.wcoj.half_join import HalfJoin, bulk_path, reads_before
from operators.wcoj.plan import (KeyFn, Participant, RulePlan, Step, delta_plan,  # noqa: F401
                                 key_getter, tuple_getter)


class Count(HalfJoin):
    """`count`: tag each prefix with the number of extensions atom `atom` would
    propose, keeping the least count seen so far (and its atom) along the chain.

    The count index holds `key -> ()` with diffs summing to the number of the
    atom's tuples with that key.  The count only chooses the proposer, and any
    choice gives the same result, so it estimates the proposal's *cost*: every
    entry the index holds for the key, whatever its time, as differential
    dataflow's `count` reads the current index (`sum |diff|`, so insertions and
    deletions not yet compacted both count).  Counting only the entries before
    `t` would be the size of the proposal, but a proposal reads the others too:
    on an initial load (everything at one time) every such count is 0 for the
    later atoms, and a tie could choose a hub with millions of entries.

    >>> from lattice import Antichain
    >>> from operators.arrange import Arrange
    >>> idx = Arrange(by_self=True, name="count by src")
    >>> idx.on_input(0, [(1, 0, 1), (1, 0, 1), (2, 0, 1)])   # node 1 has 2 out-edges
    >>> idx.on_frontier([Antichain([1])]); _ = idx.take_output()
    >>> c = Count(idx, neu=True, total=True, key=lambda vals: vals[0], atom=2, first=False,
    ...           name="count")
    >>> c.on_input(0, [(((1, 5), 7, 0), 3, 1), (((2, 5), 7, 0), 3, 1)])
    >>> c.on_frontier([Antichain([4]), Antichain([4])])
    >>> sorted(c.take_output())
    [(((1, 5), 2, 2), 3, 1), (((2, 5), 1, 2), 3, 1)]
    """

    def __init__(self, index: Arrange, neu: bool, total: bool, key: KeyFn, atom: int,
                 first: bool, name: str = "count") -> None:
        super().__init__(index, neu, total, name)
        self.key, self.atom, self.first = key, atom, first

    def _total(self, recs: list[Update], t: Any, bound: Any, out: list) -> None:
        first, j = self.first, self.atom
        reads = None
        if bulk_path(len(recs)):
            ps = [rec if first else rec[0] for rec, _t, _r in recs]
            reads = self._column_reads(ps)
        if reads is None:
            self._rows(recs, t, out)
            return
        counts = reads.count()
        if first:
            out.extend([((rec, c, j), t, r) for (rec, _t, r), c in zip(recs, counts)])
        else:
            out.extend([(((p, c, j) if c < rec[1] else rec), t, r)
                        for (rec, _t, r), p, c in zip(recs, ps, counts)])
        self.counted += len(recs)

    def _partial(self, recs: list[Update], t: Any, kt: tuple, memo: dict, out: list) -> None:
        self._rows(recs, t, out)

    def _rows(self, recs: list[Update], t: Any, out: list) -> None:
        get, key, j, first, ap = self.index.trace.get, self.key, self.atom, self.first, out.append
        total = self.total
        work = 0
        for rec, _t, r in recs:
            p = rec if first else rec[0]
            entries = get(key(p if total else p[0]))
            work += len(entries)
            c = 0
            for _v, _s, r2 in entries:
                # |diff| for int diffs; one per entry for other diff semirings.
                c += (r2 if r2 > 0 else -r2) if type(r2) is int else 1
            if first:
                ap(((rec, c, j), t, r))
            elif c < rec[1]:
                ap(((p, c, j), t, r))
            else:
                ap((rec, t, r))
        self.work += work
        self.counted += len(recs)

    def _unread(self, recs: list[Update], t: Any, out: list) -> None:
        # The atom's proposals are empty at `t`: count 0, so it proposes them (its
        # `Propose`, reading its own index, ends them).  Not dropped here: tuples of
        # one key can cancel in a count index (`(0, 0)` at -2 and `(0, 1)` at +2
        # leave key 0 no entry, and the propose index two), and the count only
        # chooses the proposer, where any choice is exact.
        j = self.atom
        if self.first:
            out.extend([((rec, 0, j), t, r) for rec, _t, r in recs])
        else:
            out.extend([(((rec[0], 0, j) if rec[1] > 0 else rec), t, r)
                        for rec, _t, r in recs])
        self.counted += len(recs)


class Propose(HalfJoin):
    """`propose`: extend each prefix by the values its key maps to in the index.

    With `atom=None` the input is plain prefixes (a step with one participant, no
    count and no validation) and so is the output.  Otherwise the input is counted
    records: those atom `atom` won are extended and tagged `(P', atom)` for the
    validators; the others (and records already proposed) pass through.
    `multi`: the extension binds several variables (the index value is a tuple).
    """

    def __init__(self, index: Arrange, neu: bool, total: bool, key: KeyFn,
                 atom: int | None = None, multi: bool = False, name: str = "propose",
                 finish: KeyFn | None = None) -> None:
        super().__init__(index, neu, total, name, finish)
        self.key, self.atom, self.multi = key, atom, multi

    def _mine(self, recs: list[Update], out: list) -> list[Update]:
        """The records this atom extends; the others pass to `out` unchanged."""
        j = self.atom
        if j is None:
            return recs
        # Two comprehensions: half the time of one loop appending to either list.
        out.extend([u for u in recs if len(u[0]) == 2 or u[0][2] != j])
        return [u for u in recs if len(u[0]) == 3 and u[0][2] == j]

    def _unread(self, recs: list[Update], t: Any, out: list) -> None:
        self._mine(recs, out)

    def _total(self, recs: list[Update], t: int, bound: int, out: list) -> None:
        j, multi = self.atom, self.multi
        recs = self._mine(recs, out)
        if not recs:
            return
        vals = [rec for rec, _t, _r in recs] if j is None else [rec[0] for rec, _t, _r in recs]
        reads = self._column_reads(vals)
        if reads is None:
            made = self._rows(recs, vals, t, bound)
        else:
            idx, exts, diffs, distinct = reads.entries(bound)
            rs = [r for _rec, _t, r in recs]
            if not multi:
                exts = [(v,) for v in exts]
            if j is None:
                made = [(vals[i] + v, t, rs[i] * r2) for i, v, r2 in zip(idx, exts, diffs)]
            else:
                made = [((vals[i] + v, j), t, rs[i] * r2) for i, v, r2 in zip(idx, exts, diffs)]
            if distinct and len(set(vals)) == len(vals):
                # Distinct prefixes, each extended by distinct values: nothing to
                # combine (and no zero diff: both factors are nonzero).
                if made:
                    self.proposed += len(made)
                    out.extend(made)
                return
        if made:
            made = consolidate_unsorted(made)
            self.proposed += len(made)
            out.extend(made)

    def _rows(self, recs: list[Update], vals_of: list, t: int, bound: int) -> list:
        get, key, j, multi = self.index.trace.get, self.key, self.atom, self.multi
        made: list = []
        ap = made.append
        work = 0
        for (_rec, _t, r), vals in zip(recs, vals_of):
            entries = get(key(vals))
            work += len(entries)
            for v, s, r2 in entries:
                if s <= bound:
                    nv = vals + v if multi else vals + (v,)
                    ap(((nv if j is None else (nv, j)), t, r * r2))
        self.work += work
        return made

    def _partial(self, recs: list[Update], t: Any, kt: tuple, memo: dict, out: list) -> None:
        get, key, j, multi = self.index.trace.get, self.key, self.atom, self.multi
        before = reads_before(memo, kt)
        made: list = []
        ap = made.append
        work = 0
        for rec, _t, r in self._mine(recs, out):
            vals, lub = rec if j is None else rec[0]
            entries = get(key(vals))
            work += len(entries)
            for v, s, r2 in entries:
                if before(s):
                    nv = (vals + v if multi else vals + (v,), lub if s == lub else join(lub, s))
                    ap(((nv if j is None else (nv, j)), t, r * r2))
        self.work += work
        if made:
            made = consolidate_unsorted(made)
            self.proposed += len(made)
            out.extend(made)


class Validate(HalfJoin):
    """`validate`: keep each proposed prefix whose tuple for atom `atom` is in the
    validate index (the atom's tuples arranged by themselves), multiplying by its
    multiplicity: a half semijoin.

    Proposed records `(P', j)` with `j == atom` (the atom proposed them) pass
    through; `last` strips the tag (the last validator of a step).  With
    `atom=None` the input and output are plain prefixes (a filter step: an atom
    whose variables are all bound already).

    >>> from lattice import Antichain
    >>> from operators.arrange import Arrange
    >>> g = Arrange(by_self=True, name="g")
    >>> g.on_input(0, [((2, 3), 0, 1), ((2, 4), 2, 1)])
    >>> g.on_frontier([Antichain([3])]); _ = g.take_output()
    >>> v = Validate(g, neu=True, total=True, key=lambda vals: (vals[1], vals[2]), atom=1,
    ...              last=True, name="validate")
    >>> v.on_input(0, [(((1, 2, 3), 0), 1, 1), (((1, 2, 4), 0), 1, 1), (((1, 2, 5), 1), 1, 1)])
    >>> v.on_frontier([Antichain([2]), Antichain([3])])
    >>> sorted(v.take_output())      # (2, 4) only arrives at 2; (1, 2, 5) was proposed by 1
    [((1, 2, 3), 1, 1), ((1, 2, 5), 1, 1)]
    """

    def __init__(self, index: Arrange, neu: bool, total: bool, key: KeyFn,
                 atom: int | None = None, last: bool = True, name: str = "validate",
                 finish: KeyFn | None = None) -> None:
        super().__init__(index, neu, total, name, finish)
        self.key, self.atom, self.last = key, atom, last

    def _unread(self, recs: list[Update], t: Any, out: list) -> None:
        j, last = self.atom, self.last
        if j is not None:
            out.extend([((rec[0] if last else rec), t, r) for rec, _t, r in recs
                        if rec[1] == j])

    def _total(self, recs: list[Update], t: int, bound: int, out: list) -> None:
        j, last = self.atom, self.last
        if j is None:
            todo = recs
            vals = [rec for rec, _t, _r in recs]
        else:
            todo, vals = [], []
            for u in recs:
                rec = u[0]
                if rec[1] == j:
                    out.append(((rec[0] if last else rec), t, u[2]))
                else:
                    todo.append(u)
                    vals.append(rec[0])
            if not todo:
                return
        reads = self._column_reads(vals)
        if reads is None:
            self._rows(todo, vals, t, bound, out)
            return
        n = len(out)
        keep_tag = not last and j is not None
        out.extend([((rec if keep_tag else v), t, r * w)
                    for (rec, _t, r), v, w in zip(todo, vals, reads.weights(bound)) if w])
        self.validated += len(out) - n

    def _rows(self, recs: list[Update], vals_of: list, t: int, bound: int,
              out: list) -> None:
        get, key, ap = self.index.trace.get, self.key, out.append
        keep_tag = not self.last and self.atom is not None
        work = kept = 0
        for (rec, _t, r), vals in zip(recs, vals_of):
            entries = get(key(vals))
            if not entries:
                continue
            work += len(entries)
            w = 0
            for _v, s, r2 in entries:
                if s <= bound:
                    w += r2
            if w:
                kept += 1
                ap(((rec if keep_tag else vals), t, r * w))
        self.work += work
        self.validated += kept

    def _partial(self, recs: list[Update], t: Any, kt: tuple, memo: dict, out: list) -> None:
        get, key, j, last, ap = self.index.trace.get, self.key, self.atom, self.last, out.append
        before = reads_before(memo, kt)
        work = kept = 0
        for rec, _t, r in recs:
            if j is None:
                p = rec
            else:
                p, by = rec
                if by == j:
                    ap(((p if last else rec), t, r))
                    continue
            vals, lub = p
            entries = get(key(vals))
            if not entries:
                continue
            work += len(entries)
            acc: dict = {}
            for _v, s, r2 in entries:
                if before(s):
                    l2 = lub if s == lub else join(lub, s)
                    acc[l2] = acc.get(l2, 0) + r2
            for l2, w in acc.items():
                if w:
                    kept += 1
                    p2 = (vals, l2)
                    ap(((p2 if last or j is None else (p2, by)), t, r * w))
        self.work += work
        self.validated += kept


class Index(Arrange):
    """An arrangement of `project(record)`: the count index (`project` gives the
    key, arranged by itself) or the propose index (`(key, extension)` pairs) of a
    relation, built without a separate map operator.

    >>> from lattice import Antichain
    >>> ix = Index(lambda t: (t[1], t[0]), name="g by dst")
    >>> ix.on_input(0, [((1, 2), 0, 1), ((3, 2), 0, 1)])
    >>> ix.on_frontier([Antichain([1])]); sorted(ix.trace.get(2))
    [(1, 0, 1), (3, 0, 1)]
    """

    def __init__(self, project: KeyFn, by_self: bool = False, name: str = "index") -> None:
        super().__init__(by_self, name)
        self.project = project
        # `project` reads rows: a columnar batch is decoded for it by the worker
        # (`Arrange` takes columns as they are, which would skip the projection).
        self.takes_columns = False

    def on_input(self, port: int, updates: list[Update]) -> None:
        project = self.project
        super().on_input(port, [(project(d), t, r) for d, t, r in updates])


class Stamp(Operator):
    """Partially ordered times: `(vals, t, r) -> ((vals, t), t, r)`, the join of the
    times met so far starts as the change's own time.

    >>> from lattice import Product
    >>> s = Stamp(); s.on_input(0, [((1, 2), Product(0, 1), 1)]); s.take_output()
    [(((1, 2), Product(0, 1)), Product(0, 1), 1)]
    """

    def __init__(self, name: str = "stamp") -> None:
        super().__init__(name)

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        self.emit([((d, t), t, r) for d, t, r in updates])


class Delay(Operator):
    """Partially ordered times: `((vals, lub), t, r) -> (head(vals), lub, r)`.

    Every `lub` is `>= t` (it is a join with `t`), so holding no capability is
    sound: progress tracking already accounts for outputs at or after the input.

    >>> from lattice import Product
    >>> d = Delay(lambda vals: vals[::-1])
    >>> d.on_input(0, [(((1, 2), Product(1, 1)), Product(1, 0), 1)]); d.take_output()
    [((2, 1), Product(1, 1), 1)]
    """

    def __init__(self, head: KeyFn, name: str = "delay") -> None:
        super().__init__(name)
        self.head = head

    def on_input(self, port: int, updates: list[Update]) -> None:
        self.records_in += len(updates)
        head = self.head
        self.emit([(head(vals), lub, r) for (vals, lub), _t, r in updates])


__all__ = ["HalfJoin", "Count", "Propose", "Validate", "Index", "Stamp", "Delay", "Participant",
           "Step", "RulePlan", "delta_plan", "key_getter", "tuple_getter"]
