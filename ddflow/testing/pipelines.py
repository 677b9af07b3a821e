"""Random pipelines: a hypothesis strategy of operator chains, and their builder.

A pipeline is a list of step names drawn from `STEPS`, applied in order to a keyed
collection `a` of `(key, value)` ints, some steps reading a second keyed input `b`.
Every step keeps records `(key, value)` pairs of small ints, so any step can follow
any other, and together they cover every operator family: linear (`map`, `filter`,
`negate` + `concat`), join, semijoin, antijoin, the reduce family (`count`, `sum`,
`min`, `max`, `distinct`, `threshold`, a user `reduce`), `distinct_trace`, loops
(`iterate`, a nested `iterate`, one of them with `distinct_trace`), and a delta
query.  Some steps are not chains: `a` reaches their last operator both directly
and through an antijoin or a negation (`DAG_STEPS`), so that records cancel on one
branch and not on the other; `dags` draws pipelines holding at least one of them
(or of `REDUCE_BRANCH_STEPS`, where `a` reaches one operator both through a reduce
and through a linear operator).
Loops reach a fixpoint: their bodies end in a `distinct` over a finite
domain.  Used to test properties that must hold of *any* dataflow (explanations
reproduce their record; see tests/ddflow/test_explain.py).
"""

from __future__ import annotations

from typing import Any, Callable

from hypothesis import strategies as st


def _key_of(r: tuple) -> Any:
    return r[0]


def _rekey(r: tuple) -> tuple:
    return (r[1] % 4, r[0] % 4)


def _even(r: tuple) -> bool:
    return r[1] % 2 == 0


def _mix(r: tuple) -> tuple:
    return (r[0], (r[1][0] + r[1][1]) % 4)


def _distinct_keys(b: Any) -> Any:
    return b.map(_key_of).distinct()


def _step_body(b: Any) -> Callable[[Any], Any]:
    # Follow b's edges from each value: (k, v) and (v, w) in b give (k, w).
    def body(x: Any) -> Any:
        edges = b.enter(x.scope)
        hop = x.map(lambda r: (r[1], r[0])).join(edges).map(lambda r: (r[1][0], r[1][1]))
        return x.concat(hop).distinct()
    return body


def _step_body_trace(b: Any) -> Callable[[Any], Any]:
    def body(x: Any) -> Any:
        edges = b.enter(x.scope)
        hop = x.map(lambda r: (r[1], r[0])).join(edges).map(lambda r: (r[1][0], r[1][1]))
        if type(x.scope.minimum[0]) is not int:
            return x.concat(hop).distinct()     # distinct_trace takes Product(int, int)
        return x.concat(hop).distinct_trace()
    return body


def _nested(b: Any) -> Callable[[Any], Any]:
    def outer(x: Any) -> Any:
        edges = b.enter(x.scope)
        inner = x.iterate(_step_body(edges.map(lambda r: (r[1], r[0]))))
        return inner.concat(x.map(lambda r: (r[0], (r[1] + 1) % 4))).distinct()
    return outer


def _size(_k: Any, vals: list) -> list:
    return [(sum(1 for _v, c in vals if c > 0), 1)]


#: Step name -> how it transforms `(a, b)` into the next collection.
STEPS: dict[str, Callable[[Any, Any], Any]] = {
    "map": lambda a, b: a.map(_rekey),
    "filter": lambda a, b: a.filter(_even),
    "concat_negate": lambda a, b: a.concat(b, b.filter(_even).negate()),
    "join": lambda a, b: a.join(b).map(_mix),
    "semijoin": lambda a, b: a.semijoin(_distinct_keys(b)),
    "antijoin": lambda a, b: a.antijoin(_distinct_keys(b)),
    "count": lambda a, b: a.map(_key_of).count().map(lambda r: (r[0], r[1] % 4)),
    "sum": lambda a, b: a.sum().map(lambda r: (r[0], r[1] % 4)),
    "min": lambda a, b: a.min(),
    "max": lambda a, b: a.max(),
    "distinct": lambda a, b: a.distinct(),
    "threshold": lambda a, b: a.threshold(lambda n: 1 if n >= 2 else 0),
    "reduce": lambda a, b: a.reduce(_size),
    "iterate": lambda a, b: a.iterate(_step_body(b)),
    "iterate_trace": lambda a, b: a.iterate(_step_body_trace(b)),
    "nested_iterate": lambda a, b: a.iterate(_nested(b)),
    "delta_query": lambda a, b: _triangles(a, b),
    # DAGs: `a` directly and through an antijoin or a negation, into one operator.
    "antijoin_concat": lambda a, b: a.antijoin(_distinct_keys(b)).concat(a),
    "antijoin_join": lambda a, b: a.antijoin(_distinct_keys(b)).join(a).map(_mix),
    "minus_antijoin_min": lambda a, b: a.concat(a.antijoin(_distinct_keys(b)).negate()).min(),
    # `a` through a reduce and through a linear operator, into one operator: an
    # explanation demanding part of a key's group must not change the reduce there.
    "filter_concat_count": lambda a, b: a.filter(_even).concat(
        a.map(_key_of).count().filter(lambda r: r[1] == 1)),
    "join_min": lambda a, b: a.join(a.min()).map(_mix),
}

#: The steps in which `a` reaches an operator both directly and through a
#: negation (an antijoin negates too).
DAG_STEPS = ("antijoin_concat", "antijoin_join", "minus_antijoin_min")

#: The steps in which `a` reaches an operator both directly and through a reduce.
REDUCE_BRANCH_STEPS = ("filter_concat_count", "join_min")


def _triangles(a: Any, b: Any) -> Any:
    from ddflow.query import query
    out = query("p(x, z) :- a(x, y), b(y, z), a(x, z)", a=a, b=b, strategy="delta")
    return out


def pipelines(min_size: int = 1, max_size: int = 3, steps: tuple[str, ...] | None = None
              ) -> st.SearchStrategy[list[str]]:
    """Lists of step names (from `STEPS`, or `steps`)."""
    names = sorted(STEPS) if steps is None else list(steps)
    return st.lists(st.sampled_from(names), min_size=min_size, max_size=max_size)


def dags(max_size: int = 3, among: tuple[str, ...] = DAG_STEPS
         ) -> st.SearchStrategy[list[str]]:
    """Pipelines (as `pipelines`) holding at least one of `among` (`DAG_STEPS`, or
    `REDUCE_BRANCH_STEPS`), anywhere."""
    return pipelines(0, max_size - 1).flatmap(lambda before: st.builds(
        lambda dag, after: before + [dag] + after, st.sampled_from(among),
        pipelines(0, max_size - 1 - len(before))))


def build_pipeline(steps: list[str], a: Any, b: Any) -> Any:
    """`a` after each step of `steps` in turn (each may read `b`)."""
    for name in steps:
        a = STEPS[name](a, b)
    return a


__all__ = ["DAG_STEPS", "REDUCE_BRANCH_STEPS", "STEPS", "build_pipeline", "dags", "pipelines"]
