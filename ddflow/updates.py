"""Update triples `(data, time, diff)` and the Z-set algebra over lists of them.

This module isolates what can be said about a collection written as plain update
triples (differential dataflow's representation; the timed Z-sets of the "Notes on
DBSP"): consolidation, accumulation at a time, and the group operations of Budiu's
"Implementing Z-sets".  It
leaves out storage (`ddflow.trace`) and operators (`operators/`).

Invariants kept:

* Consolidated output has no zero diffs and at most one triple per `(data, time)`
  (a Z-set never holds a zero weight).
* `consolidate` returns triples in one deterministic order: by data, then by
  `lattice.sort_key(time)` (never by `<` on times).  Data that Python cannot order
  (mixed types, `None`, times inside records) falls back to a key built from
  `(type name, repr)`, so output never depends on hash order; numbers of every type
  share one key space and tuples go element-wise, so values equal under `==` (`0`,
  `False`, `0.0`) stay one key, as they are one record to a dict.

Two readings of a list of triples are used, and the functions say which:

* as a Z-set whose elements are `(data, time)` pairs (the notes' "lists of
  triples"): `plus`, `negate`, `minus`, `positive`, `distinct` act pointwise on the
  weight of each `(data, time)`;
* as a changing collection (the accumulation law of McSherry et al.'s "Differential
  dataflow"):
  `accumulate(updates, t)` is its content at `t`, the sum of diffs at times `<= t`.

Untimed Z-sets are plain dicts `data -> diff` with no zero values: `zset`,
`zset_plus`, `zset_negate`, `zset_minus`, `zset_positive`, `zset_distinct`, and
`untimed` (the notes' Consolidate operator: forget times, sum weights).

Diffs are combined with Python operators (`+`, `-`, `not d` as the zero test), so
ints and `ddflow.diff.Diff` subclasses both work; `positive` and `distinct` compare
with 0, so they need ordered (int) diffs.

>>> consolidate([(("a", 1), 2, -1), (("a", 1), 0, 1), (("b", 0), 0, 1), (("b", 0), 0, -1)])
[(('a', 1), 0, 1), (('a', 1), 2, -1)]
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from itertools import islice
from operator import itemgetter, le
from typing import Any, Callable, Hashable, Iterable, Mapping

from lattice import DataflowError, Product, as_time, less_equal, same_lattice, sort_key

from ddflow.diff import check_diff
from ddflow.errors import DataError, DiffError, TimeError
from ddflow.values import compared_fields, plain

Update = tuple[Any, Any, Any]
"""An update triple `(data, time, diff)`."""


# --- deterministic order ----------------------------------------------------------

def _fallback_key(x: Any) -> tuple:
    """A key that exists for every value: `(type name, repr)`, refined so that the
    order stays natural where it can (numbers as numbers, strings as strings, tuples
    element-wise) and does not depend on hash order (set elements are sorted first).

    Values equal under `==` get equal keys (`ddflow.values`): `False`, `0`, `0.0`
    and `numpy.int64(0)` are one number, a namedtuple is the tuple of its items, a
    `str` Enum member its string, a dataclass its compared fields.  A dict (and so
    consolidation) takes them as one record, so the order must too: a key placed by
    one spelling and looked up by another would otherwise be two keys to a sorted
    trace, and a reduce would answer twice.  Built-in values come first, other
    types after them by name and `repr` (so no type's name can pose as a built-in's).

    >>> _fallback_key(False) == _fallback_key(0) == _fallback_key(0.0)
    True
    >>> sorted_data([(1, "a"), True, 0.5, "b"])
    [0.5, True, 'b', (1, 'a')]
    """
    x = plain(x)
    t = type(x)
    if t is int or t is float or t is bool or t is Fraction or t is Decimal:
        # a NaN is equal to nothing, and a Decimal NaN raises when compared
        return (0, "number", x) if x == x else (0, "nan", repr(x))
    if t is str or t is bytes:
        return (0, t.__name__, x)
    if isinstance(x, tuple):
        return (0, "tuple", tuple([_fallback_key(e) for e in x]))
    if t is complex:
        # equal to a real number when its imaginary part is 0, and unordered
        if not x.imag:
            return _fallback_key(x.real)
        return (0, "complex", (_fallback_key(x.real), _fallback_key(x.imag)))
    if isinstance(x, (frozenset, set)):
        return (0, "frozenset", tuple(sorted([_fallback_key(e) for e in x])))
    if x is None:
        return (0, "NoneType", "")
    fields = compared_fields(x)
    if fields is not None:
        return (1, t.__qualname__, 0, _fallback_key(fields))
    return (1, t.__qualname__, 1, repr(x))


fallback_key = _fallback_key
"""The public name of the order `sorted_data` and `sort_updates` fall back to."""


def sorted_data(items: Iterable[Any], key: Callable[[Any], Any] | None = None) -> list:
    """`items` sorted by their natural order, or, if `<` fails on them, by a key built
    from `(type name, repr)` (see `_fallback_key`).

    `key` extracts the data to sort by from each item (default: the item itself).

    >>> sorted_data([3, 1, 2]), sorted_data([10, "b", None, 9, (1, "a"), (1, 2)])
    ([1, 2, 3], [None, 9, 10, 'b', (1, 2), (1, 'a')])
    """
    items = list(items)
    try:
        out = sorted(items, key=key)
        if is_chain(out if key is None else list(map(key, out))):
            return out
    except UNORDERED:
        pass
    # Not totally ordered by `<` (mixed types, None, records holding times, whose
    # `<` raises TimeError, or frozensets, which `<` orders only partly): use a key
    # that always exists.
    if key is None:
        return sorted(items, key=_fallback_key)
    return sorted(items, key=lambda item: _fallback_key(key(item)))


#: What `<` raises on data it cannot order (a Decimal NaN raises an ArithmeticError).
UNORDERED = (TypeError, ValueError, ArithmeticError, DataflowError)


def is_chain(data: list) -> bool:
    """Whether sorted `data` is totally ordered by `<=`: each item `<=` the next.
    `sorted` trusts `<`; frozensets (subsets) and tuples holding them answer `<`
    without raising yet order only partly, and their sorted lists fail this.

    >>> is_chain([1, 2, 2, 3]), is_chain(sorted([frozenset({1}), frozenset({2})]))
    (True, False)
    """
    return len(data) < 2 or all(map(le, data, islice(data, 1, None)))


def sort_updates(updates: Iterable[Update]) -> list[Update]:
    """Triples sorted by data, then by `sort_key(time)` (data falls back as in `sorted_data`).

    >>> from lattice import Product
    >>> sort_updates([("x", Product(1, 0), 1), ("x", Product(0, 5), 1), (None, Product(2, 2), 3)])
    [(None, Product(2, 2), 3), ('x', Product(0, 5), 1), ('x', Product(1, 0), 1)]
    """
    return sort_updates_ordered(updates)[0]


def sort_updates_ordered(updates: Iterable[Update]) -> tuple[list[Update], bool]:
    """`sort_updates`, and whether the data were ordered by `<` (True) or by
    `fallback_key` (False): what an index that merges new triples into a sorted
    list (`ddflow.capture`) needs to keep producing the same order.

    >>> sort_updates_ordered([(2, 0, 1), (1, 0, 1)]), sort_updates_ordered([("a", 0, 1), (1, 0, 1)])
    (([(1, 0, 1), (2, 0, 1)], True), ([(1, 0, 1), ('a', 0, 1)], False))
    """
    items = list(updates)
    try:
        out = sorted(items, key=lambda u: (u[0], sort_key(u[1])))
        if is_chain([u[0] for u in out]):
            return out, True
    except UNORDERED:
        pass
    return sorted(items, key=lambda u: (_fallback_key(u[0]), sort_key(u[1]))), False


# --- consolidation and accumulation -------------------------------------------

def consolidate_unsorted(updates: Iterable[Update]) -> list[Update]:
    """Sum diffs per `(data, time)` and drop zeros; first-seen order, no sorting.

    The hot-path form of `consolidate`: one dict pass, one key tuple per input
    triple, one output triple per surviving `(data, time)`.

    >>> consolidate_unsorted([("b", 0, 1), ("a", 0, 1), ("b", 0, 2), ("a", 0, -1)])
    [('b', 0, 3)]
    """
    acc: dict = {}
    get = acc.get
    for data, time, diff in updates:
        k = (data, time)
        prev = get(k)
        acc[k] = diff if prev is None else prev + diff
    return [(k[0], k[1], d) for k, d in acc.items() if d]


def consolidate(updates: Iterable[Update]) -> list[Update]:
    """Sum diffs per `(data, time)`, drop zeros, sort by data then `sort_key(time)`.

    The Consolidate example of the "Notes on DBSP" (all at time 0, keys and values paired):

    >>> consolidate([((0, 0), 0, 1), ((0, 0), 0, -1), ((0, 1), 0, 1), ((0, 1), 0, 1),
    ...              ((1, 2), 0, 2), ((1, 3), 0, 1), ((1, 3), 0, -1), ((1, 4), 0, -1),
    ...              ((2, 2), 0, 1), ((2, 4), 0, 1)])
    [((0, 1), 0, 2), ((1, 2), 0, 2), ((1, 4), 0, -1), ((2, 2), 0, 1), ((2, 4), 0, 1)]
    """
    return sort_updates(consolidate_unsorted(updates))


def accumulate(updates: Iterable[Update], t: Any) -> dict[Any, Any]:
    """The collection at time `t`: data -> sum of diffs at times `<= t` (lattice order).

    Zero sums are dropped.  Under a partial order, `t` sees exactly the updates at
    times below it: here `(1, 0)` and `(0, 1)` are both below `(1, 1)`.

    >>> from lattice import Product
    >>> u = [("a", Product(0, 1), 1), ("b", Product(1, 0), 1), ("a", Product(1, 1), -1)]
    >>> accumulate(u, Product(1, 0)), accumulate(u, Product(1, 1)), accumulate(u, Product(0, 0))
    ({'b': 1}, {'b': 1}, {})
    """
    acc: dict = {}
    get = acc.get
    if type(t) is int:
        # Totally ordered ints: compare directly (a mixed-lattice time still goes
        # through `less_equal`, which raises TimeError).
        for data, time, diff in updates:
            if (time <= t) if type(time) is int else less_equal(time, t):
                prev = get(data)
                acc[data] = diff if prev is None else prev + diff
    else:
        for data, time, diff in updates:
            if less_equal(time, t):
                prev = get(data)
                acc[data] = diff if prev is None else prev + diff
    return {d: w for d, w in acc.items() if w}


def times_of(updates: Iterable[Update]) -> set:
    """The set of times at which `updates` has triples (zero diffs included).

    >>> sorted(times_of([("a", 3, 1), ("b", 1, 1), ("a", 3, -1)]))
    [1, 3]
    """
    return {time for _, time, _ in updates}


def by_time(updates: Iterable[Update]) -> dict[Any, list[Update]]:
    """The triples grouped by their time, each group in arrival order (no sorting,
    no consolidation: the bucketing operators do before they buffer).

    >>> by_time([("a", 3, 1), ("b", 1, 1), ("c", 3, -1)])
    {3: [('a', 3, 1), ('c', 3, -1)], 1: [('b', 1, 1)]}
    """
    if type(updates) is list:
        # The usual input of a stream of epochs is at one time (an initial load
        # all of it): one C-level pass sees it (1.5 ms for 44k triples against
        # 3.6 ms grouping them by a dict lookup each).
        times = set(map(itemgetter(1), updates))
        if len(times) == 1:
            return {times.pop(): list(updates)}
    groups: dict[Any, list[Update]] = {}
    for u in updates:
        bucket = groups.get(u[1])
        if bucket is None:
            groups[u[1]] = [u]
        else:
            bucket.append(u)
    return groups


def untimed(updates: Iterable[Update]) -> dict[Any, Any]:
    """Forget times and sum weights per data: the notes' Consolidate operator (trace
    in, untimed Z-set out), zeros dropped.

    >>> untimed([("a", 0, 1), ("a", 5, 1), ("b", 1, 1), ("b", 2, -1)])
    {'a': 2}
    """
    return zset((data, diff) for data, _, diff in updates)


# --- Z-set algebra over timed triples (element = (data, time)) ---------------------

def plus(a: Iterable[Update], b: Iterable[Update]) -> list[Update]:
    """Z-set sum: weights of equal `(data, time)` add, zeros are dropped.

    >>> plus([(("a", 1), 0, 1), (("a", 1), 2, -1)], [(("a", 1), 2, 1)])
    [(('a', 1), 0, 1)]
    """
    return consolidate([*a, *b])


def negate(a: Iterable[Update]) -> list[Update]:
    """Z-set negation: every weight flips sign.

    >>> negate([(("a", 1), 0, 1), (("a", 1), 2, -1)])
    [(('a', 1), 0, -1), (('a', 1), 2, 1)]
    """
    return consolidate([(data, time, -diff) for data, time, diff in a])


def minus(a: Iterable[Update], b: Iterable[Update]) -> list[Update]:
    """Z-set difference `a - b` (= `plus(a, negate(b))`).

    >>> minus([(("a", 1), 0, 1)], [(("a", 1), 0, 1), (("a", 1), 2, 1)])
    [(('a', 1), 2, -1)]
    """
    return consolidate([*a, *((data, time, -diff) for data, time, diff in b)])


def _require_ordered(d: Any) -> None:
    if type(d) is not int:
        raise DiffError(f"positive/distinct compare weights with 0, which needs int "
                        f"diffs; got {type(d).__name__} {d!r}")


def positive(a: Iterable[Update], set_: bool = False) -> list[Update]:
    """Keep the `(data, time)` elements of positive weight (`positive` of "Implementing
    Z-sets");
    with `set_`, truncate their weights to 1.

    This is pointwise on `(data, time)` elements, like the notes' examples; it is
    not the incremental distinct of a changing collection (that is an operator).

    >>> positive([(("a", 1), 0, 3), (("a", 1), 2, -1)])
    [(('a', 1), 0, 3)]
    >>> positive([(("a", 1), 0, 3), (("a", 1), 2, -1)], set_=True)
    [(('a', 1), 0, 1)]
    """
    out = []
    for data, time, diff in consolidate_unsorted(a):
        _require_ordered(diff)
        if diff > 0:
            out.append((data, time, 1 if set_ else diff))
    return sort_updates(out)


def distinct(a: Iterable[Update]) -> list[Update]:
    """`positive(a, set_=True)`: Distinct on a Z-set ("Implementing Z-sets"; "Notes on
    DBSP", 2.9.3).

    >>> distinct([(("a", 1), 0, 2), (("b", 1), 0, -1), (("a", 1), 2, 1)])
    [(('a', 1), 0, 1), (('a', 1), 2, 1)]
    """
    return positive(a, set_=True)


# --- untimed Z-sets: dict data -> diff, no zero values -------------------------------

def zset(pairs: Iterable[tuple[Hashable, Any]] | Mapping[Hashable, Any]) -> dict[Any, Any]:
    """An untimed Z-set from `(data, diff)` pairs or a mapping, weights summed, zeros dropped.

    >>> zset([("a", 1), ("b", 2), ("a", -1)])
    {'b': 2}
    """
    if isinstance(pairs, Mapping):
        pairs = pairs.items()
    acc: dict = {}
    get = acc.get
    for data, diff in pairs:
        prev = get(data)
        acc[data] = diff if prev is None else prev + diff
    return {d: w for d, w in acc.items() if w}


def zset_plus(a: Mapping[Any, Any], b: Mapping[Any, Any]) -> dict[Any, Any]:
    """Untimed Z-set sum.

    >>> zset_plus({"a": 1, "b": 1}, {"b": -1, "c": 2})
    {'a': 1, 'c': 2}
    """
    out = dict(a)
    get = out.get
    for data, diff in b.items():
        prev = get(data)
        out[data] = diff if prev is None else prev + diff
    return {d: w for d, w in out.items() if w}


def zset_negate(a: Mapping[Any, Any]) -> dict[Any, Any]:
    """Untimed Z-set negation.

    >>> zset_negate({"a": 1, "b": -2})
    {'a': -1, 'b': 2}
    """
    return {d: -w for d, w in a.items() if w}


def zset_minus(a: Mapping[Any, Any], b: Mapping[Any, Any]) -> dict[Any, Any]:
    """Untimed Z-set difference.

    >>> zset_minus({"a": 1, "b": 1}, {"b": 1, "c": 2})
    {'a': 1, 'c': -2}
    """
    return zset_plus(a, zset_negate(b))


def zset_positive(a: Mapping[Any, Any], set_: bool = False) -> dict[Any, Any]:
    """Untimed `positive`: keep positive weights (truncated to 1 with `set_`).

    >>> zset_positive({"a": 3, "b": -1}), zset_positive({"a": 3, "b": -1}, set_=True)
    ({'a': 3}, {'a': 1})
    """
    out = {}
    for data, diff in a.items():
        _require_ordered(diff)
        if diff > 0:
            out[data] = 1 if set_ else diff
    return out


def zset_distinct(a: Mapping[Any, Any]) -> dict[Any, Any]:
    """Untimed `distinct`.

    >>> zset_distinct({"a": 3, "b": -1, "c": 1})
    {'a': 1, 'c': 1}
    """
    return zset_positive(a, set_=True)


# --- an update as an input takes it ------------------------------------------------

def checked_update(name: str, session_time: Any, data: Any, time: Any, diff: Any) -> tuple:
    """`(data, time, diff)` as an input whose time is `session_time` takes it, or the
    typed error saying why not (naming the input `name`, the record and the time):
    `TimeError` (another lattice, or not in advance of `session_time`), `DataError`
    (unhashable data, or a NaN in it), `DiffError`.  One function for every way updates enter: a
    session's `update_at`, and rows of a DataFrame checked on Spark's executors.

    >>> checked_update("edges", 3, ("a", "b"), 5, 1)
    (('a', 'b'), 5, 1)
    >>> checked_update("edges", 3, ["a"], 5, 1)
    Traceback (most recent call last):
    ...
    ddflow.errors.DataError: data must be hashable (unhashable type: 'list'); use tuples, ...
    """
    time = as_time(time)
    check_lattice(name, session_time, time, data, "update_at")
    if not less_equal(session_time, time):
        raise TimeError(f"update at {time!r} is not in advance of the session's time "
                        f"{session_time!r} (time may not go backwards)",
                        operator=name, record=data, time=time)
    try:
        hash(data)
    except TypeError as exc:
        raise DataError(f"data must be hashable ({exc}); use tuples, not lists or dicts",
                        operator=name, record=data, time=time) from exc
    if not_self_equal(data):
        raise DataError(NOT_SELF_EQUAL, operator=name, record=data, time=time)
    return data, time, check_diff(diff, operator=name, record=data, time=time)


#: Why a record holding a value unequal to itself is refused (sessions, one at a
#: time or in bulk).
NOT_SELF_EQUAL = ("data must equal itself, and this record holds a NaN (or another value "
                  "unequal to itself): its updates would never cancel, nor meet in a join "
                  "or a count; map NaN to None or drop it first")


def not_self_equal(data: Any) -> bool:
    """Whether `data` holds a value unequal to itself (a float NaN, anywhere in a
    tuple or frozenset: in a key as in a value).  Such a record breaks the multiset:
    `insert(nan)` twice then `remove(nan)` would leave three entries.  A tuple is
    walked because tuple equality takes identical items as equal (`(nan,) == (nan,)`
    for one `nan` object), which would hide the NaN from `data != data`.

    >>> not_self_equal((1, ("a", float("nan")))), not_self_equal((1, 2.5))
    (True, False)
    """
    kind = type(data)
    if kind is int or kind is str or data is None:
        return False
    if kind is tuple or kind is frozenset or isinstance(data, (tuple, frozenset)):
        # (a namedtuple too: its equality takes identical items as equal like a tuple's)
        for x in data:          # (a loop, not any(map(...)): ints and strs cost no call)
            k = type(x)
            if k is not int and k is not str and not_self_equal(x):
                return True
        return False
    try:
        return bool(data != data)
    except Exception:  # noqa: BLE001 - a comparison that does not answer: not ours to judge
        return False


def check_lattice(name: str, session_time: Any, time: Any, data: Any, what: str) -> None:
    """A `TimeError` (naming the input `name`, `what` was called) unless `time` is a
    time of the lattice `session_time` belongs to."""
    if not same_lattice(time, session_time):
        raise TimeError(f"{what}: {time!r} is not a time of this dataflow's lattice "
                        f"(times look like {session_time!r})",
                        operator=name, record=data, time=time)


def entered(updates: Iterable[tuple]) -> list[tuple]:
    """`(data, t, diff)` triples with every time `t` read as `Product(t, 0)` (a
    collection entering a loop), one `Product` per distinct time: a bulk load has
    one time for 10^5-10^6 updates, and building a `Product` per update was 4 s of
    a 48 s profile (reachability, 600k edges), with a copy of each held in memory.

    >>> entered([("a", 1, 1), ("b", 1, -1)])
    [('a', Product(1, 0), 1), ('b', Product(1, 0), -1)]
    """
    memo: dict = {}
    out = []
    append = out.append
    for d, t, r in updates:
        p = memo.get(t)
        if p is None:
            p = memo[t] = Product(t, 0)
        append((d, p, r))
    return out


__all__ = [
    "Update", "fallback_key", "sorted_data", "sort_updates", "sort_updates_ordered",
    "checked_update", "check_lattice",
    "consolidate", "consolidate_unsorted",
    "accumulate", "times_of", "untimed", "plus", "negate", "minus", "positive",
    "distinct", "zset", "zset_plus", "zset_negate", "zset_minus", "zset_positive",
    "zset_distinct", "entered",
]

