"""The oracle of the one law: accumulated output equals the plain function, at every time.

The law of differential dataflow (McSherry, Murray, Isaacs, Isard, "Differential
dataflow"; Abadi, McSherry, Plotkin, "Foundations of differential dataflow"): an
operator `F` with plain (non-incremental) function `f` is
correct when `acc(F(C1, ...), t) == f(acc(C1, t), ...)` for every time `t`.  Checking
every time of a lattice is impossible, but both sides only change at times in the
join-closure of the times involved (every accumulation is constant between them), so
this module checks exactly those, plus the join of everything and any extra times a
test adds.  Under a partial order that closure holds times at which no input changed,
which is where an engine that only emits at input times goes wrong.

This module isolates the checking; it knows nothing of operators or engines, and
shares no code with what it checks: its `accumulate` and `join_closure` are its own,
written from the definitions (only the lattice's order and join, the definition of
time itself, come from `lattice`).

>>> from lattice import Product
>>> inp = [("a", Product(0, 1), 1), ("b", Product(1, 0), 1), ("a", Product(1, 1), -1)]
>>> out = [(d.upper(), t, w) for d, t, w in inp]
>>> check_law(out, [inp], lambda c: {d.upper(): w for d, w in c.items()})
>>> sorted(join_closure([Product(0, 1), Product(1, 0)]), key=lambda t: t.sort_key())
[Product(0, 1), Product(1, 0), Product(1, 1)]
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

from lattice import join, less_equal, sort_key

from ddflow.testing.checks import listed, takes, triples

Update = tuple[Any, Any, Any]


def accumulate(updates: Iterable[Update], t: Any) -> dict:
    """`data -> sum of diff over updates (data, s, diff) with s <= t`, zeros dropped:
    the definition, one update at a time (deliberately not `ddflow.updates`'s).

    >>> accumulate([("a", 0, 1), ("b", 1, 1), ("a", 2, -1)], 1)
    {'a': 1, 'b': 1}
    """
    acc: dict = {}
    for d, s, r in updates:
        if less_equal(s, t):
            acc[d] = acc.get(d, 0) + r
    return {d: r for d, r in acc.items() if r}


def join_closure(times: Iterable[Any]) -> set:
    """All joins of nonempty subsets of `times` (closure under pairwise join).

    Deliberately independent of `lattice.join_closure`, which `reduce` uses to pick
    the times it evaluates: the oracle must not share code with what it checks.

    >>> sorted(join_closure([1, 3, 2]))
    [1, 2, 3]
    """
    closure = set(times)
    work = list(closure)
    while work:
        a = work.pop()
        for b in list(closure):
            j = join(a, b)
            if j not in closure:
                closure.add(j)
                work.append(j)
    return closure


def accumulate_all(updates: Sequence[Update], times: Iterable[Any]) -> dict[Any, dict]:
    """`time -> accumulate(updates, time)` for every time in `times`.

    >>> accumulate_all([("a", 0, 1), ("a", 2, -1)], [0, 1, 2])
    {0: {'a': 1}, 1: {'a': 1}, 2: {}}
    """
    return {t: accumulate(updates, t) for t in times}


def _nonzero(m: Mapping[Any, Any]) -> dict:
    return {d: w for d, w in m.items() if w}


def _sorted_data(data: Iterable[Any]) -> list:
    data = list(data)
    try:
        return sorted(data)
    except TypeError:       # mixed types: any stable order will do for a message
        return sorted(data, key=lambda d: (type(d).__name__, repr(d)))


def _describe(t: Any, expected: dict, actual: dict) -> str:
    diffs = []
    for d in _sorted_data(set(expected) | set(actual)):
        e, a = expected.get(d, 0), actual.get(d, 0)
        if e != a:
            diffs.append(f"    {d!r}: expected {e!r}, got {a!r}")
    return (f"accumulation law fails at time {t!r}:\n"
            f"  expected f(inputs) = {expected!r}\n"
            f"  actual output      = {actual!r}\n"
            f"  differing entries:\n" + "\n".join(diffs))


def check_law(output: Sequence[Update], inputs: Sequence[Sequence[Update]],
              f: Callable[..., Mapping[Any, Any]], *, extra_times: Iterable[Any] = ()
              ) -> None:
    """Assert `accumulate(output, t) == f(*(accumulate(i, t) for i in inputs))` at every
    `t` of the join-closure of all input and output times, their overall join, and
    `extra_times`.  Zero multiplicities are ignored on both sides.

    `f` takes one dict `data -> multiplicity` (zeros dropped) per input and returns
    a dict `data -> multiplicity`; an `f` that cannot take that many raises
    `GraphError`, an update that is not a `(data, time, diff)` triple `DataError`.
    With no times at all there is nothing to check,
    except that the output accumulates to nothing.  Raises `AssertionError` naming the
    time, both accumulations and the entries that differ.

    >>> check_law([("A", 0, 1)], [[("a", 0, 1)]], lambda c: {d.upper(): w for d, w in c.items()})
    >>> check_law([("A", 1, 1)], [[("a", 0, 1)]], lambda c: {d.upper(): w for d, w in c.items()})
    Traceback (most recent call last):
    ...
    AssertionError: accumulation law fails at time 0:
      expected f(inputs) = {'A': 1}
      actual output      = {}
      differing entries:
        'A': expected 1, got 0
    """
    output = triples(output, "output")
    inputs = [triples(i, f"input {n}") for n, i in enumerate(listed(inputs, "inputs"))]
    takes(f, len(inputs), "check_law's f", "one dict per input")
    times = {u[1] for u in output}
    for inp in inputs:
        times |= {u[1] for u in inp}
    check = join_closure(times)
    if times:
        top = None
        for t in times:
            top = t if top is None else join(top, t)
        check.add(top)
    check.update(extra_times)
    if not check:
        leftover = _nonzero({d: w for d, _, w in output})
        if leftover:    # an explicit raise: `python -O` must not silence the oracle
            raise AssertionError(f"output without times accumulates to {leftover!r}")
        return
    for t in sorted(check, key=sort_key):
        expected = _nonzero(f(*[accumulate(inp, t) for inp in inputs]))
        actual = accumulate(output, t)
        if expected != actual:
            raise AssertionError(_describe(t, expected, actual))


__all__ = ["join_closure", "accumulate", "accumulate_all", "check_law"]
