"""Column-wise checks for bulk input: many updates in, one check per column.

`InputSession.update_many` (and `insert_many`, `remove_many`) hand their columns
here: the records (a numpy array, a pandas DataFrame, or a sequence of records),
the times (one time, or one per record) and the diffs (one diff, or one per
record).  Each column is checked as a whole (a dtype, one comparison over an
array, each distinct time once), so 10^6 updates do not cost 10^6 Python-level
checks; where a column fails, the first failing row is found and named, with the
same error class `InputSession.update_at` raises for it (`DataError`, `TimeError`,
`DiffError`).  Nothing is recorded before every column has passed, so a refused
batch leaves the session as it was.

It leaves out where updates go (the session's pending list) and the row-at-a-time
checks (`ddflow.updates.checked_update`).  `InputSession.update_many` imports this
module when bulk input is first used.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from lattice import as_time, less_equal, same_lattice
from ddflow.diff import check_diff
from ddflow.errors import DataError, DiffError, TimeError
from ddflow.updates import NOT_SELF_EQUAL, not_self_equal

#: numpy kinds whose elements are hashable plain values once `tolist()`ed.
_PLAIN_KINDS = "iubfUS"


def records_of(data: Any, name: str) -> list:
    """The records of `data` as a list of hashable Python values (plain ints,
    floats, strings; tuples of them for a 2-D array or a DataFrame of several
    columns).  Raises `DataError` naming the first unusable row."""
    frame_columns = getattr(data, "columns", None)
    if frame_columns is not None and hasattr(data, "to_numpy"):
        # A pandas DataFrame: one array per column, rows as tuples (one column: scalars).
        cols = [_array_records(np.asarray(data[c].to_numpy()), name) for c in frame_columns]
        if not cols:
            raise DataError("update_many needs a DataFrame with at least one column",
                            operator=name)
        return cols[0] if len(cols) == 1 else list(zip(*cols))
    if isinstance(data, np.ndarray):
        if data.ndim == 1:
            return _array_records(data, name)
        if data.ndim == 2:
            if data.dtype.kind not in _PLAIN_KINDS:
                return _checked_hashable([tuple(r) for r in data.tolist()], name)
            _check_no_nan(data, name, lambda i: tuple(data[i].tolist()))
            return list(map(tuple, data.tolist()))
        raise DataError(f"update_many takes a 1-D or 2-D array, got {data.ndim}-D",
                        operator=name)
    if isinstance(data, (str, bytes)) or not hasattr(data, "__len__"):
        raise DataError(f"update_many needs an array, a DataFrame or a sequence of "
                        f"records, got {type(data).__name__}", operator=name, record=data)
    return _checked_hashable(list(data), name)


def _array_records(a: np.ndarray, name: str) -> list:
    if a.ndim != 1:
        raise DataError(f"a column must be 1-D, got shape {a.shape}", operator=name)
    if a.dtype.kind in _PLAIN_KINDS:
        _check_no_nan(a, name, lambda i: a[i].item())
        return a.tolist()
    return _checked_hashable(a.tolist(), name)


def _check_no_nan(a: np.ndarray, name: str, row: Callable[[int], Any]) -> None:
    """NaN is hashable but not equal to itself: consolidation could never cancel it."""
    if a.dtype.kind != "f":
        return
    bad = np.isnan(a) if a.ndim == 1 else np.isnan(a).any(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        raise DataError(f"row {i}: NaN is not a usable record (it is not equal to "
                        "itself, so its updates could never cancel)", operator=name,
                        record=row(i))


def _checked_hashable(records: list, name: str) -> list:
    try:
        hash(tuple(records))            # every element hashed, in C
    except TypeError:
        for i, r in enumerate(records):
            try:
                hash(r)
            except TypeError as exc:
                raise DataError(f"row {i}: data must be hashable ({exc}); use tuples, "
                                "not lists or dicts", operator=name, record=r) from exc
    for i, r in enumerate(records):     # as update_at refuses it, one record at a time
        kind = type(r)
        if kind is not int and kind is not str and not_self_equal(r):
            raise DataError(f"row {i}: {NOT_SELF_EQUAL}", operator=name, record=r)
    return records


def diffs_of(diffs: Any, n: int, records: list, name: str) -> list | int:
    """One checked diff for all rows (an int), or a list of `n` plain ints."""
    if isinstance(diffs, np.ndarray) or (hasattr(diffs, "__len__")
                                         and not isinstance(diffs, (str, bytes))):
        arr = diffs if isinstance(diffs, np.ndarray) else None
        if arr is not None and arr.dtype.kind in "iu":
            return _sized(arr.tolist(), n, "diffs", name)
        out = _sized(arr.tolist() if arr is not None else list(diffs), n, "diffs", name)
        if set(map(type, out)) <= {int}:
            return out
        for i, d in enumerate(out):
            try:
                out[i] = check_diff(d, operator=name, record=records[i])
            except DiffError as exc:
                raise DiffError(f"row {i}: {exc.message}", operator=name,
                                record=records[i]) from None
        return out
    return check_diff(diffs, operator=name)


def times_of(times: Any, n: int, session_time: Any, records: list,
             name: str) -> list | Any:
    """One checked time for all rows, or a list of `n` checked times (plain ints
    or `Product`s of them), each in advance of `session_time`."""
    if times is None:
        return session_time
    if isinstance(times, np.ndarray) and times.ndim == 1 and times.dtype.kind in "iu":
        if type(session_time) is not int:
            i = 0
            raise TimeError(f"row {i}: {times[0].item()!r} is not a time of this dataflow's "
                            f"lattice (times look like {session_time!r})", operator=name,
                            record=records[i] if records else None, time=times[0].item())
        _sized(times, n, "times", name)
        early = times < session_time
        if early.any():
            i = int(np.argmax(early))
            t = times[i].item()
            raise TimeError(f"row {i}: update at {t!r} is not in advance of the session's "
                            f"time {session_time!r} (time may not go backwards)",
                            operator=name, record=records[i], time=t)
        return times.tolist()
    if hasattr(times, "__len__") and not isinstance(times, (str, bytes)):
        times = _sized(list(times), n, "times", name)
        seen: dict = {}
        for i, t in enumerate(times):
            # Each distinct time is checked once (a load has few); the first row
            # holding a bad one is named.  Keyed by type too: True == 1 == 1.0, but
            # only the int is a time.
            try:
                ok = seen.get((type(t), t))
            except TypeError:
                ok = None
            if ok is None:
                ok = _checked_time(t, session_time, records[i], name, i)
                try:
                    seen[(type(t), t)] = ok
                except TypeError:
                    pass
            times[i] = ok
        return times
    return _checked_time(times, session_time, records[0] if records else None, name, None)


def _checked_time(t: Any, session_time: Any, record: Any, name: str,
                  row: int | None) -> Any:
    at = "" if row is None else f"row {row}: "
    t = as_time(t)
    if not same_lattice(t, session_time):
        raise TimeError(f"{at}{t!r} is not a time of this dataflow's lattice (times look "
                        f"like {session_time!r})", operator=name, record=record, time=t)
    if not less_equal(session_time, t):
        raise TimeError(f"{at}update at {t!r} is not in advance of the session's time "
                        f"{session_time!r} (time may not go backwards)",
                        operator=name, record=record, time=t)
    return t


def _sized(column: Sequence, n: int, what: str, name: str) -> Any:
    if len(column) != n:
        raise DataError(f"update_many got {n} records but {len(column)} {what}",
                        operator=name)
    return column


__all__ = ["records_of", "diffs_of", "times_of"]
