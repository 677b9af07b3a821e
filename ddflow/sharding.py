"""Stable assignment of keys to shards, identical in every process.

Python's `hash()` of a string changes with `PYTHONHASHSEED`, so two processes (two
simulated workers are fine, but a Spark driver and its executors are not) would
disagree on where a key lives.  `shard_of` hashes a canonical byte encoding with
CRC-32 instead; the local engine's `workers=W` and the Spark engine use the same
function, so their shards hold the same keys and can be compared one for one.

>>> shard_of("alice", 4), shard_of(("alice", 3), 4), shard_of(17, 4)
(0, 1, 0)
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from ddflow.errors import DataError


def canonical_bytes(x: Any) -> bytes:
    """A byte encoding of `x` that depends only on its value, never on the process."""
    t = type(x)
    if t is str:
        b = x.encode("utf-8", "surrogatepass")
        return b"s" + struct.pack(">I", len(b)) + b
    if t is int:
        return b"i" + str(x).encode()
    if t is tuple:
        return b"(" + b"".join(canonical_bytes(e) for e in x) + b")"
    if x is None:
        return b"N"
    if t is bool:
        return b"T" if x else b"F"
    if t is float:
        return b"f" + struct.pack(">d", x)
    if t is bytes:
        return b"b" + struct.pack(">I", len(x)) + x
    if t is frozenset:
        return b"{" + b"".join(sorted(canonical_bytes(e) for e in x)) + b"}"
    r = repr(x)
    if " at 0x" in r:
        raise DataError(
            f"cannot shard a {t.__name__}: its repr depends on its memory address; "
            "give the type a value-based __repr__, or key by a tuple of plain values",
            record=x)
    return b"r" + t.__qualname__.encode() + b":" + r.encode()


def shard_of(key: Any, shards: int) -> int:
    """The shard in `range(shards)` that owns `key`."""
    if shards == 1:
        return 0
    return zlib.crc32(canonical_bytes(key)) % shards
