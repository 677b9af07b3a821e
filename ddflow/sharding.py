"""Stable assignment of keys to shards, identical in every process.

Python's `hash()` of a string changes with `PYTHONHASHSEED`, so two processes (two
simulated workers are fine, but a Spark driver and its executors are not) would
disagree on where a key lives.  `shard_of` hashes a canonical byte encoding with
CRC-32 instead; the local engine's `workers=W` and the Spark engine use the same
function, so their shards hold the same keys and can be compared one for one.

>>> shard_of("alice", 4), shard_of(("alice", 3), 4), shard_of(17, 4)
(0, 0, 1)
"""

from __future__ import annotations

import numbers
import struct
import zlib
from typing import Any

from ddflow.errors import DataError
from ddflow.values import compared_fields, plain


def canonical_bytes(x: Any) -> bytes:
    """A byte encoding of `x` that depends only on its value, never on the process.

    Values Python calls equal encode alike, so that equal keys meet on one shard
    (a join matches `1` with `1.0`, a count does not split `True` from `1`):

    * numbers by their numeric hash, which equal numbers share across types (`1`,
      `1.0`, `True`, `Fraction(1)`, numpy's `int64(1)`; `0.0` and `-0.0`) and which
      `PYTHONHASHSEED` does not salt; NaN, equal to nothing, encodes as NaN;
    * tuples, strs, bytes and frozensets of any subclass as their base type (a
      namedtuple `P(1, 2)` equals `(1, 2)`, a `str` Enum member its value), element
      by element; numpy scalars as their item; a dataclass by its compared fields.

    A type of its own is encoded by its name and `repr` (equal only to itself).

    >>> from collections import namedtuple
    >>> P = namedtuple("P", "x y")
    >>> canonical_bytes(1) == canonical_bytes(1.0) == canonical_bytes(True)
    True
    >>> canonical_bytes(-0.0) == canonical_bytes(0.0), canonical_bytes(P(1, 2)) == canonical_bytes((1, 2))
    (True, True)
    """
    t = type(x)
    if t is str:
        b = x.encode("utf-8", "surrogatepass")
        return b"s" + struct.pack(">I", len(b)) + b
    if t is int or t is float or t is bool:
        return _number(x)
    if t is tuple:
        return b"(" + b"".join(canonical_bytes(e) for e in x) + b")"
    if x is None:
        return b"N"
    if t is bytes:
        return b"b" + struct.pack(">I", len(x)) + x
    if t is frozenset:
        return b"{" + b"".join(sorted(canonical_bytes(e) for e in x)) + b"}"
    # Subclasses and other types whose instances may equal the plain ones above
    # (`ddflow.values`: numpy scalars, a str Enum, a dataclass's compared fields).
    p = plain(x)
    if p is not x:
        return canonical_bytes(p)
    if isinstance(x, numbers.Number):
        return _number(x)
    if isinstance(x, tuple):
        return canonical_bytes(tuple(x))
    if isinstance(x, frozenset):
        return canonical_bytes(frozenset(x))
    fields = compared_fields(x)
    if fields is not None:
        return b"d" + t.__qualname__.encode() + b":" + canonical_bytes(fields)
    r = repr(x)
    if " at 0x" in r:
        raise DataError(
            f"cannot shard a {t.__name__}: its repr depends on its memory address; "
            "give the type a value-based __repr__, or key by a tuple of plain values",
            record=x)
    return b"r" + t.__qualname__.encode() + b":" + r.encode()


def _number(x: Any) -> bytes:
    # Python's numeric hash is the same for equal numbers of any type, and is not
    # salted by PYTHONHASHSEED (only str, bytes and datetime hashes are).
    if x != x:
        return b"nan"
    try:
        return b"n" + str(hash(x)).encode()
    except TypeError:
        raise DataError(f"cannot shard the unhashable number {x!r}", record=x) from None


def shard_of(key: Any, shards: int) -> int:
    """The shard in `range(shards)` that owns `key`."""
    if shards == 1:
        return 0
    return zlib.crc32(canonical_bytes(key)) % shards
