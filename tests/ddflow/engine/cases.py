"""Dataflows every engine must run identically: one per operator family, plus loops."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.strategies import keyed_updates, updates


# Loops over graphs take edges and roots as sets: with negative multiplicities
# x = distinct(E semijoin x + R) need not have a fixpoint at all (it can oscillate).
def _reach(e, r):
    e, r = e.distinct(), r.distinct()
    return r.iterate(lambda inner: e.enter(inner.scope).semijoin(inner)
                     .map(lambda kv: kv[1]).concat(r.enter(inner.scope)).distinct())


def _bfs(e, r):
    e, r = e.distinct(), r.distinct()

    def body(dist):
        step = (e.enter(dist.scope).join(dist)
                .map(lambda kv: (kv[1][0], kv[1][1] + 1)))
        return dist.concat(step).min()
    return r.map(lambda n: (n, 0)).iterate(body)


def _triangles(e):
    import ddflow
    return ddflow.query("tri(x, y, z) :- g(x, y), g(y, z), g(x, z)", g=e, strategy="delta")


EDGE = st.tuples(st.integers(0, 5), st.integers(0, 5))

#: name -> (build, strategy of the inputs); inputs are lists of update triples.
CASES = {
    "linear": (lambda c: c.map(lambda kv: kv[0] + kv[1]).filter(lambda x: x % 2 == 0)
               .flat_map(lambda x: [x, x + 1]).negate(),
               st.tuples(keyed_updates("int"))),
    "join": (lambda a, b: a.join(b), st.tuples(keyed_updates("product"),
                                               keyed_updates("product"))),
    "count": (lambda c: c.map(lambda kv: kv[0]).count(), st.tuples(keyed_updates("product3"))),
    "distinct_min": (lambda c: c.distinct().min(), st.tuples(keyed_updates("product"))),
    "reduce": (lambda c: c.reduce(lambda k, vs: [(len(vs), 1), (sum(v for v, _ in vs), -1)]),
               st.tuples(keyed_updates("int"))),
    "reachability": (_reach, st.tuples(updates("int", data=EDGE, max_size=25),
                                       updates("int", data=st.integers(0, 5), max_size=3))),
    "triangles_delta": (_triangles, st.tuples(updates("int", data=EDGE, max_size=25))),
    "bfs": (_bfs, st.tuples(updates("int", data=EDGE, max_size=25),
                            updates("int", data=st.integers(0, 5), max_size=3))),
}
