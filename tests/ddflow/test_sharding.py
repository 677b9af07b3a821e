"""Keys Python calls equal land on one shard, in every process.

`shard_of` must agree with equality: a join across workers matches `1` with `1.0`
and `True`, a count over them does not split, whatever the types.  And it must not
depend on the process (`PYTHONHASHSEED` salts `hash()` of strs on Spark executors).
"""

from __future__ import annotations

import fractions
import os
import subprocess
import sys
from collections import namedtuple

import pytest
from hypothesis import given, strategies as st

import ddflow
from ddflow.engine.bsp import InProcessShards
from ddflow.engine.local import LocalEngine
from ddflow.sharding import canonical_bytes, shard_of

P = namedtuple("P", "x y")


class Name(str):
    pass


#: Groups of values that are equal in Python, of different types.
EQUAL = [
    [1, 1.0, True, fractions.Fraction(1), complex(1, 0)],
    [0, 0.0, -0.0, False],
    [2.5, fractions.Fraction(5, 2)],
    [(1, 2), P(1, 2), (1.0, True + 1)],
    [("a", (0, 1)), ("a", P(False, 1.0))],
    ["k", Name("k")],
    [frozenset({1, 2}), frozenset({1.0, 2})],
    [2 ** 70, float(2 ** 70)],
]


@pytest.mark.parametrize("group", EQUAL, ids=lambda g: repr(g[0]))
def test_equal_values_encode_alike(group):
    assert all(v == group[0] for v in group)
    assert len({canonical_bytes(v) for v in group}) == 1
    assert len({shard_of(v, 7) for v in group}) == 1


# Plain values, and for each an equal one of other types: ints as floats, bools or
# Fractions, tuples as namedtuples, strs as a str subclass.
_PLAIN = st.recursive(
    st.integers(-3, 3) | st.text("ab", max_size=2) | st.none(),
    lambda inner: st.lists(inner, max_size=3).map(tuple), max_leaves=8)


@st.composite
def _variant(draw, x):
    if type(x) is int:
        options = [x, float(x), fractions.Fraction(x)] + ([bool(x)] if x in (0, 1) else [])
        options += [-0.0] if x == 0 else []
        return draw(st.sampled_from(options))
    if type(x) is str:
        return draw(st.sampled_from([x, Name(x)]))
    if type(x) is tuple:
        parts = tuple(draw(_variant(e)) for e in x)
        if len(x) == 2 and draw(st.booleans()):
            return P(*parts)
        return parts
    return x


@given(st.data(), _PLAIN)
def test_equal_values_of_any_types_share_a_shard(data, x):
    y = data.draw(_variant(x))
    assert x == y
    assert canonical_bytes(x) == canonical_bytes(y)
    assert shard_of(x, 5) == shard_of(y, 5)


def test_unequal_values_mostly_do_not_share_a_shard():
    # Not a promise (shards are few), but a spread: the encoding keeps values apart.
    assert len({shard_of(i, 16) for i in range(200)}) == 16
    assert canonical_bytes("1") != canonical_bytes(1) != canonical_bytes((1,))


def test_numpy_numbers_shard_as_their_values():
    np = pytest.importorskip("numpy")
    assert shard_of(np.int64(7), 5) == shard_of(7, 5) == shard_of(np.float32(7.0), 5)


def test_nan_has_one_encoding():
    assert canonical_bytes(float("nan")) == canonical_bytes(float("nan"))


def test_shards_do_not_depend_on_the_process():
    keys = ["alice", ("bob", 3), 1.5, P("x", 2), frozenset({"a", "b"})]
    here = [shard_of(k, 11) for k in keys]
    code = ("from collections import namedtuple; from ddflow.sharding import shard_of; "
            "P = namedtuple('P', 'x y'); "
            "print([shard_of(k, 11) for k in ['alice', ('bob', 3), 1.5, P('x', 2), "
            "frozenset({'a', 'b'})]])")
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed,
                   PYTHONPATH=os.pathsep.join(sys.path))
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                             capture_output=True, text=True).stdout
        assert out.strip() == str(here)


ENGINES = {"local3": lambda: LocalEngine(workers=3), "bsp3": lambda: InProcessShards(3)}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_join_matches_equal_keys_of_different_types(engine):
    df = ddflow.Dataflow(engine=ENGINES[engine]())
    left_in, left = df.new_collection("left")
    right_in, right = df.new_collection("right")
    cap = left.join(right).map(lambda kv: kv[1]).capture()
    for key, tag in [(1, "int"), ((1, 2), "tuple"), (0.0, "zero"), ("k", "str")]:
        left_in.insert((key, tag))
    for key, tag in [(1.0, "float"), (True, "bool"), (P(1, 2), "named"), (-0.0, "negzero"),
                     (Name("k"), "Name")]:
        right_in.insert((key, tag))
    left_in.close(); right_in.close(); df.run()
    assert cap.at(0) == {("int", "float"): 1, ("int", "bool"): 1, ("tuple", "named"): 1,
                         ("zero", "negzero"): 1, ("str", "Name"): 1}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_count_does_not_split_equal_records(engine):
    df = ddflow.Dataflow(engine=ENGINES[engine]())
    s, c = df.new_collection()
    counts = c.count().capture()
    for x in [1, 1.0, True, (1, 2), P(1, 2), 0.0, -0.0, 0]:
        s.insert(x)
    s.close(); df.run()
    answer = counts.at(0)
    assert sorted(answer.items(), key=repr) == sorted(
        {(1, 3): 1, ((1, 2), 2): 1, (0.0, 3): 1}.items(), key=repr)
