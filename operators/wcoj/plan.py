"""Planning a delta query (McSherry's dogsdogsdogs): for each atom's update rule, the
order in which the other atoms extend its changes, variable by variable, and which indices
serve them.

Split from `operators.wcoj.delta`, which holds the operators that run a plan.  A
`RulePlan` lists, per step, the atoms that `count` / `propose` / `validate` the next
variable (or variables), with the key positions of the indices they read; atoms
before the changed one are read at `AltNeu(t, True)`, after it at `AltNeu(t, False)`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import attrs

KeyFn = Callable[[tuple], Any]


# -- key getters ----------------------------------------------------------------

def key_getter(positions: Sequence[int]) -> KeyFn:
    """`vals -> key`: the value itself for one position, a tuple for several, `()`
    for none.  Index and prefix sides use the same shape, so keys match.

    >>> key_getter([1])((7, 8, 9)), key_getter([2, 0])((7, 8, 9)), key_getter([])((7,))
    (8, (9, 7), ())
    """
    positions = tuple(positions)
    if not positions:
        return lambda vals: ()
    if len(positions) == 1:
        p = positions[0]
        return lambda vals: vals[p]
    if positions == tuple(range(len(positions))):
        n = len(positions)
        return lambda vals: vals[:n]
    import operator
    return operator.itemgetter(*positions)


def tuple_getter(positions: Sequence[int]) -> KeyFn:
    """`vals -> tuple of vals at positions` (always a tuple, also for one position).

    >>> tuple_getter([1])((7, 8, 9)), tuple_getter([2, 0])((7, 8, 9))
    ((8,), (9, 7))
    """
    positions = tuple(positions)
    if len(positions) == 1:
        p = positions[0]
        return lambda vals: (vals[p],)
    if positions == tuple(range(len(positions))):
        n = len(positions)
        return lambda vals: vals[:n]
    return key_getter(positions)


# -- the plan of one update rule --------------------------------------------------

@attrs.frozen
class Participant:
    """An atom taking part in one step of a rule.

    `key_src`/`ext_src`: positions, in the atom's (source) tuples, of the variables
    already bound (the index key) and of the step's new variables (the extension).
    `key_pre`: prefix positions of the key variables (same order as `key_src`);
    `full_pre`: prefix positions of every source position, after the step (the key
    of the validate index).  `neu`: the atom precedes the rule's own atom, so its
    entries at the prefix's time count (`<=`); otherwise only earlier ones (`<`).
    """

    atom: int
    source: int
    key_src: tuple
    ext_src: tuple
    key_pre: tuple
    full_pre: tuple
    neu: bool


@attrs.frozen
class Step:
    """Bind `new_vars` (none: a pure filter by atoms already fully bound)."""

    new_vars: tuple
    participants: tuple


@attrs.frozen
class RulePlan:
    """The update rule of atom `trigger`: its changes are the first prefixes (their
    variables first in `layout`), extended by `steps` until `layout` is complete."""

    trigger: int
    layout: tuple
    steps: tuple


def delta_plan(atoms: Sequence[Sequence[str]], sources: Sequence[int],
               trigger: int) -> RulePlan:
    """The rule for atom `trigger` of a query whose atoms bind `atoms[j]` (distinct
    variables, in the order of the atom's source tuples) from source `sources[j]`.

    An atom takes part in a step only when the step *completes* it (binds its last
    unbound variables), so its index entries carry true multiplicities and it
    never needs a derived (projected, distinct) index: that keeps every rule exact
    under any multiplicities and times, and the state linear in the inputs.  The
    next variable is the one completing the most atoms (most intersections); if
    none completes any atom, the step binds all unbound variables of the atom with
    fewest of them.

    >>> tri = [("x", "y"), ("y", "z"), ("x", "z")]
    >>> plan = delta_plan(tri, [0, 0, 0], trigger=1)
    >>> plan.layout, [(s.new_vars, [(p.atom, p.key_src, p.ext_src, p.neu)
    ...                              for p in s.participants]) for s in plan.steps]
    (('y', 'z', 'x'), [(('x',), [(0, (1,), (0,), True), (2, (1,), (0,), False)])])
    """
    n = len(atoms)
    bound: list = list(atoms[trigger])
    pos = {v: k for k, v in enumerate(bound)}
    first_seen: dict = {}
    for a in atoms:
        for v in a:
            first_seen.setdefault(v, len(first_seen))
    todo = [j for j in range(n) if j != trigger]
    steps = []

    def part(j: int, new: tuple) -> Participant:
        a = atoms[j]
        key_src = tuple(k for k, v in enumerate(a) if v in pos and v not in new)
        ext_src = tuple(a.index(v) for v in new)
        return Participant(j, sources[j], key_src, ext_src,
                           tuple(pos[a[k]] for k in key_src),
                           tuple(pos[v] for v in a), j < trigger)

    while todo:
        full = [j for j in todo if all(v in pos for v in atoms[j])]
        if full:
            steps.append(Step((), tuple(part(j, ()) for j in full)))
            todo = [j for j in todo if j not in full]
            continue
        unbound = {j: [v for v in atoms[j] if v not in pos] for j in todo}
        completes: dict = {}
        for j in todo:
            if len(unbound[j]) == 1:
                completes.setdefault(unbound[j][0], []).append(j)
        if completes:
            def rank(v: str) -> tuple:
                occurs = sum(v in atoms[j] for j in todo)
                return (len(completes[v]), occurs, -first_seen[v])
            v = max(completes, key=rank)
            new, members = (v,), completes[v]
        else:
            j = min(todo, key=lambda j: (len(unbound[j]), -(len(atoms[j]) - len(unbound[j])), j))
            new = tuple(unbound[j])
            members = [k for k in todo if set(unbound[k]) == set(new)]
        for v in new:
            pos[v] = len(bound)
            bound.append(v)
        steps.append(Step(new, tuple(part(j, new) for j in members)))
        todo = [j for j in todo if j not in members]
    return RulePlan(trigger, tuple(bound), tuple(steps))
