"""Count and distinct where a key's times form a chain: one evaluation, no replay.

`operators.reduce` replays a key's history at every time in the join-closure of
its pending times (`operators.history`).  In the commonest pass of a bulk load or
of a stream of epochs that machinery has nothing to do: the key has one pending
time `u`, complete, and every stored update of the key, input and output, is at a
time `<= u` (the key's times form a chain ending at `u`).  Then the join-closure
is `{u}`, the accumulations at `u` are the sums of everything stored, and the
only correction is `logic(acc_in) - acc_out` at `u`: exactly what the replay
computes, without its per-key sorting, closures and bookkeeping.

This module isolates that case for the built-in logics whose result depends only
on the key's total count over the single value `()` of a by-self arrangement:
`count` (`{total: 1}`) and `distinct` (`{(): 1}` when the total is positive).  A
key outside the case (another pending time, a stored time not `<= u`, a value
other than `()`) is declined and goes the general way.

The law is the reduce's: `acc(out, u)[(k, o)] = logic(k, acc(in, u)[k])[o]`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from lattice import less_equal

#: The fewest keys a reduce evaluates at once for this path to be taken (unless the
#: bulk path is forced on for every size, `set_columnar_min(0)`, as the tests do).
#: Below it, a small epoch keeps the general path, whose work the engine-core
#: benchmark and the notebooks' counters were measured on: the chain path was
#: built for bulk passes, and on one-key epochs it only adds a pass over the keys.
CHAIN_MIN_KEYS = 64

#: `logic -> f(total)` giving the desired `{output: diff}` for a key whose values
#: are all `()` with total count `total` (empty: the key is absent).
_TOTAL_LOGICS: dict[Callable, Callable[[int], dict]] = {}


def register_total_logic(logic: Callable, desired: Callable[[int], dict]) -> None:
    """Declare that `logic(key, [((), total)])` is `desired(total)` (and nothing
    when the total is zero), so `chain_corrections` may evaluate it directly."""
    _TOTAL_LOGICS[logic] = desired


def supports(logic: Callable) -> bool:
    return logic in _TOTAL_LOGICS


def chain_corrections(keys: Iterable[tuple[Any, Any]], inputs: Callable[[Any], list],
                      outputs: Callable[[Any], list], logic: Callable,
                      made: list) -> tuple[list, int]:
    """For each `(key, u)`: if every stored input and output update of the key is at a
    time `<= u` and every input value is `()`, append the key's corrections at `u`
    as `((key, output), u, diff)` to `made`; otherwise decline it.

    `inputs(key)` / `outputs(key)` give the key's stored `(value, time, diff)`
    entries (`Trace.get`).  Returns the declined `(key, u)` and the entries read.
    """
    desired_of = _TOTAL_LOGICS[logic]
    declined: list = []
    work = 0
    append = made.append
    for key, u in keys:
        ins = inputs(key)
        outs = outputs(key)
        work += len(ins) + len(outs)
        total = 0
        ok = True
        if type(u) is int:
            for v, t, r in ins:
                if t > u or v != ():
                    ok = False
                    break
                total += r
            if ok:
                for _o, t, _r in outs:
                    if t > u:
                        ok = False
                        break
        else:
            for v, t, r in ins:
                if v != () or not less_equal(t, u):
                    ok = False
                    break
                total += r
            if ok:
                for _o, t, _r in outs:
                    if not less_equal(t, u):
                        ok = False
                        break
        if not ok:
            declined.append((key, u))
            continue
        corrections = desired_of(total) if total else {}
        if outs:
            corrections = dict(corrections)
            for o, _t, r in outs:
                corrections[o] = corrections.get(o, 0) - r
        for o, r in corrections.items():
            if r:
                append(((key, o), u, r))
    return declined, work


__all__ = ["chain_corrections", "register_total_logic", "supports"]
