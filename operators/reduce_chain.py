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

Two readings of the stored updates, one result: `chain_corrections` reads each
key's entries by `Trace.get` (which decodes a columnar batch into rows, kept beside
its columns); `chain_corrections_columns` reads the traces' columnar batches
directly (`ddflow.column_join.key_rows`: per key, the sum of its diffs and whether a
time lies beyond `u`, vectorized over all keys of the pass), and only the row
batches key by key.  The switch is `set_chain_columns` (on by default).
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Iterable

import numpy as np

from lattice import less_equal
from ddflow import column_join, columnar

#: The fewest keys a reduce evaluates at once for this path to be taken (unless the
#: bulk path is forced on for every size, `set_columnar_min(0)`, as the tests do).
#: Below it, a small epoch keeps the general path, whose work the engine-core
#: benchmark and the notebooks' counters were measured on: the chain path was
#: built for bulk passes, and on one-key epochs it only adds a pass over the keys.
CHAIN_MIN_KEYS = 64

#: `logic -> f(total)` giving the desired `{output: diff}` for a key whose values
#: are all `()` with total count `total` (empty: the key is absent).
_TOTAL_LOGICS: dict[Callable, Callable[[int], dict]] = {}

#: `logic -> f(totals)`, the same over an int64 array of totals: `(present, vals,
#: vshape)`, which totals have an output (of diff 1) and those outputs as value
#: columns of layout `vshape` (`ddflow.columnar`).  Lets a pass whose traces are all
#: columns subtract what was emitted in numpy (`_corrections_in_columns`).
_TOTAL_KERNELS: dict[Callable, Callable[[np.ndarray], tuple]] = {}

_first, _second = itemgetter(0), itemgetter(1)

#: Whether `chain_corrections_of` reads columnar batches by `chain_corrections_columns`.
_columns_on = True

#: Whether `chain_corrections_columns` subtracts the emitted outputs in numpy when
#: every batch it reads is columnar (`_corrections_in_columns`).
_vector_on = True


def set_chain_vector(on: bool) -> bool:
    """Turn `_corrections_in_columns` on or off; returns the previous setting.  Both
    give the same corrections: the tests run each."""
    global _vector_on
    old, _vector_on = _vector_on, on
    return old


def set_chain_columns(on: bool) -> bool:
    """Turn the columnar reading of the chain kernel on or off; returns the previous
    setting.  Both give the same corrections: the tests run each."""
    global _columns_on
    old, _columns_on = _columns_on, on
    return old


def register_total_logic(logic: Callable, desired: Callable[[int], dict],
                         kernel: Callable[[np.ndarray], tuple] | None = None) -> None:
    """Declare that `logic(key, [((), total)])` is `desired(total)` (and nothing
    when the total is zero), so `chain_corrections` may evaluate it directly;
    `kernel`, if given, is the same over an array of nonzero totals (see
    `_TOTAL_KERNELS`)."""
    _TOTAL_LOGICS[logic] = desired
    if kernel is not None:
        _TOTAL_KERNELS[logic] = kernel


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
        _correct(key, u, desired_of(total) if total else {},
                 [(o, r) for o, _t, r in outs], append)
    return declined, work


def chain_corrections_of(keys: list[tuple[Any, Any]], inputs: Any, outputs: Any,
                         logic: Callable, made: list,
                         made_columns: list | None = None) -> tuple[list, int]:
    """`chain_corrections` over two traces (`Trace` or anything with `get` and
    `column_view`): by their columns where they have some and the keys and times
    are plain (`chain_corrections_columns`), else key by key.  `made_columns`: see
    `chain_corrections_columns`."""
    if _columns_on:
        got = chain_corrections_columns(keys, inputs, outputs, logic, made, made_columns)
        if got is not None:
            return got
    return chain_corrections(keys, inputs.get, outputs.get, logic, made)


#: A pass reads every batch as columns (row batches encoded) when the row batches of
#: a trace hold at most this many updates per key evaluated; beyond, key by key.
ENCODE_ROWS_PER_KEY = 8


def chain_corrections_columns(keys: list[tuple[Any, Any]], inputs: Any, outputs: Any,
                              logic: Callable, made: list,
                              made_columns: list | None = None) -> tuple[list, int] | None:
    """`chain_corrections`, reading the `inputs` and `outputs` traces' columnar
    batches by vectorized kernels (no decoding of the batch): all of their batches
    when the row batches are few enough to encode (`Trace.column_batches`), else the
    columnar ones, and the row batches key by key.  None (nothing done) when neither
    trace has columns, or the keys or times are not plain in the columns' layout.

    `made_columns`, if a list: when the corrections were made in numpy
    (`_corrections_in_columns`), the same corrections are appended to it as one
    set of consolidated keyed columns (`ddflow.columnar`), which a caller may seal
    into its output batch without encoding the rows appended to `made`."""
    n = len(keys)
    limit = ENCODE_ROWS_PER_KEY * n
    in_cols = inputs.column_batches(limit)
    out_cols = outputs.column_batches(limit) if in_cols is not None else None
    in_rows = out_rows = None
    if in_cols is None or out_cols is None:
        in_cols, in_rows = inputs.column_view()
        out_cols, out_rows = outputs.column_view()
        if not in_cols and not out_cols:
            return None
    ks = columnar.encode_keys([k for k, _u in keys])
    us = columnar.encode_times([u for _k, u in keys])
    if ks is None or us is None:
        return None
    karr, kshape = ks
    uarr, product = us
    if any(c.kshape != kshape or c.product != product for c in in_cols + out_cols):
        return None
    late = np.zeros(n, dtype=bool)       # a stored time not <= u, or a value other than ()
    # Each batch's diffs sum below 2^62 in absolute value; two could overflow int64,
    # unless the batches' sums of |diff| together stay below that (a stream's diffs
    # of +-1: a bound read per batch by numpy, not a Python int per key).
    wide = len(in_cols) >= 2 and sum(
        columnar.abs_max(c.diffs) * len(c) for c in in_cols) >= 1 << 62
    total = np.zeros(n, dtype=object if wide else np.int64)
    work = 0
    for c in in_cols:
        counts, rows = column_join.key_rows(c, karr)
        work += len(rows)
        owner = np.repeat(np.arange(n), counts)
        late[owner[np.any(c.times[rows] > uarr[owner], axis=1)]] = True
        if c.vshape != 0:
            late[counts > 0] = True
        total += column_join.group_sums(c.diffs[rows], counts)
    prior_cols: list = []       # per output batch: (owner, rows) of the keys asked
    for c in out_cols:
        counts, rows = column_join.key_rows(c, karr)
        work += len(rows)
        owner = np.repeat(np.arange(n), counts)
        late[owner[np.any(c.times[rows] > uarr[owner], axis=1)]] = True
        prior_cols.append((c, owner, rows))
    if in_rows is None and _vector_on:
        kernel = _TOTAL_KERNELS.get(logic)
        if kernel is not None and _corrections_in_columns(
                keys, late, total, prior_cols, kernel, made,
                None if made_columns is None else (made_columns, karr, kshape, uarr,
                                                   product)):
            return [k for k, is_late in zip(keys, late.tolist()) if is_late], work
    col_outs: dict[int, list] = {}
    for c, owner, rows in prior_cols:
        for i, o, r in zip(owner.tolist(), columnar.decode_values(c, rows),
                           c.diffs[rows].tolist()):
            got = col_outs.get(i)
            if got is None:
                col_outs[i] = [(o, r)]
            else:
                got.append((o, r))
    desired_of = _TOTAL_LOGICS[logic]
    declined: list = []
    append = made.append
    for i, (key, u), is_late, tot in zip(range(n), keys, late.tolist(), total.tolist()):
        outs: list = []
        if in_rows is not None:
            ins = in_rows(key)
            outs = out_rows(key)
            work += len(ins) + len(outs)      # read, as `chain_corrections` counts them
            if not is_late:
                for v, t, r in ins:
                    if v != () or not less_equal(t, u):
                        is_late = True
                        break
                    tot += r
                else:
                    for _o, t, _r in outs:
                        if not less_equal(t, u):
                            is_late = True
                            break
        if is_late:
            declined.append((key, u))
            continue
        prior = col_outs.get(i)
        if prior is None and not outs:
            # The usual key of a bulk pass: nothing emitted before.
            if tot:
                for o, r in desired_of(tot).items():
                    append(((key, o), u, r))
            continue
        _correct(key, u, desired_of(tot) if tot else {},
                 list(prior or ()) + [(o, r) for o, _t, r in outs], append)
    return declined, work


def _corrections_in_columns(keys: list, late: np.ndarray, total: np.ndarray,
                            prior_cols: list, kernel: Callable, made: list,
                            as_columns: tuple | None = None) -> bool:
    """The corrections of the keys not `late` in numpy: the desired outputs of their
    totals (`kernel`, diff 1) less every output emitted before (`prior_cols`), summed
    per key and output, zeros dropped, appended to `made` as `((key, o), u, r)`.
    False (nothing done) when the outputs emitted before are not in the kernel's
    value layout or a total leaves int64.  `as_columns`: `(out, karr, kshape, uarr,
    product)`, the encoded keys and times of `keys`: the corrections are also
    appended to `out` as consolidated keyed columns."""
    ok = ~late
    if total.dtype == object:
        if len(total) and max(abs(int(x)) for x in total.tolist()) >= 1 << 62:
            return False
        total = total.astype(np.int64)
    idx = np.flatnonzero(ok & (total != 0))
    present, dvals, vshape = kernel(total[idx])
    owners = [idx[present]]
    vals = [dvals]
    diffs = [np.ones(len(dvals), dtype=np.int64)]
    for c, owner, rows in prior_cols:
        if c.vshape != vshape:
            return False
        keep = ok[owner]
        owners.append(owner[keep])
        vals.append(c.vals[rows[keep]])
        diffs.append(-c.diffs[rows[keep]])
    owner = np.concatenate(owners)
    if not len(owner):
        if as_columns is not None:
            as_columns[0].append(None)
        return True
    # One consolidation over (key index, output): `Columns` with the key index as key.
    sums = columnar.consolidate(columnar.Columns(
        owner.reshape(-1, 1), np.concatenate(vals), np.zeros((len(owner), 1), np.int64),
        np.concatenate(diffs), -1, vshape, False))
    if as_columns is not None:
        out, karr, kshape, uarr, product = as_columns
        kidx = sums.keys[:, 0]
        out.append(columnar.consolidate(columnar.Columns(
            karr[kidx], sums.vals, uarr[kidx], sums.diffs, kshape, vshape, product)))
    at = list(map(keys.__getitem__, sums.keys[:, 0].tolist()))
    made.extend(zip(zip(map(_first, at), columnar.decode_values(sums, np.arange(len(sums)))),
                    map(_second, at), sums.diffs.tolist()))
    return True


def _correct(key: Any, u: Any, desired: dict, emitted: list, append: Any) -> None:
    """Append `((key, o), u, r)` for every output `o` whose desired count less what
    was emitted before (`(o, r)` pairs) leaves `r != 0`."""
    corrections = dict(desired)
    for o, r in emitted:
        corrections[o] = corrections.get(o, 0) - r
    for o, r in corrections.items():
        if r:
            append(((key, o), u, r))


__all__ = ["chain_corrections", "chain_corrections_columns", "chain_corrections_of",
           "register_total_logic", "set_chain_columns", "set_chain_vector", "supports"]
