"""Shard states that stay live where they run, with a log that rebuilds them anywhere.

What this module isolates: where a BSP shard's `Worker` is between supersteps, and
how it is rebuilt when it is not there.  It knows nothing of Spark, of supersteps'
contents or of progress: the caller says how to re-apply one logged superstep
(`replay`).  No pyspark here.

* **Resident**: `Resident` keeps deserialized workers in the process, keyed by
  (engine uid, shard), each labelled with the version of the state it holds.  A
  Spark executor's Python worker process keeps its own (`RESIDENT`), so a superstep
  that lands where the previous one ran neither unpickles nor pickles the shard.
  A worker is taken out while a superstep mutates it and put back only once the
  superstep's log entry is written: a failure half-way leaves no mislabelled copy.
* **Log**: per shard, a *base* (the pickled worker at some version) and *entries*,
  each the inputs of one superstep that changed the shard since the base.  A
  superstep persists its entry, which is the size of what it received, not of the
  state.  `Token` names a state: its base and the entries after it.  Versions are
  the driver's superstep numbers, never reused (a rolled-back branch leaves numbers
  behind), so "the copy at version v" names one state only, and a copy at a version
  of the token's chain catches up by replaying the entries after it.
* **Compaction**: once the entries since the base weigh as much as the base (or
  number `max_entries`), the superstep writes a new base after its entry: what is
  written stays proportional to the changes (each byte of state is rewritten after
  as many bytes of changes, as in a log-structured merge), and a rebuild replays at
  most `max_entries` supersteps.  The chain before the base is kept until the next
  compaction, so a copy left on it catches up instead of being rebuilt.
* Nothing is deleted while a run may still read it: a Spark task recomputed after
  an executor loss reads the chain its lineage names.  The driver removes what no
  live token names after a run succeeded (`collect_garbage`).

Stores: `DirectoryStore` (files; a directory every executor and the driver see, for
a cluster a shared mount) and `MemoryStore` (in this process, for the in-process
BSP engine).  Writes are atomic (a temporary name, then a rename).
"""

from __future__ import annotations

import os
import pickle
import shutil
from collections import OrderedDict
from typing import Any, Callable

import attrs


@attrs.frozen
class Token:
    """Shard `shard`'s state: the base written at version `base`, then the logged
    supersteps `log` (versions, ascending), with their sizes in bytes.  `before`
    is the chain that led to the base (the previous base, then the entries up to
    and including `base`'s own superstep): a copy left on it catches up across
    the compaction instead of being rebuilt."""

    uid: str
    shard: int
    base: int
    log: tuple = ()
    base_bytes: int = 0
    log_bytes: int = 0
    before: tuple = ()

    @property
    def version(self) -> int:
        return self.log[-1] if self.log else self.base

    def names(self) -> list[str]:
        """The store names this state is rebuilt from (or caught up with)."""
        return [_name(self.uid, self.shard, self.base, "base")] + [
            _name(self.uid, self.shard, v, "log") for v in self.before[1:] + self.log]


def _name(uid: str, shard: int, version: int, kind: str) -> str:
    return f"{uid}/{shard}/{version:012d}.{kind}"


# -- stores ---------------------------------------------------------------------------

class DirectoryStore:
    """Named byte strings as files under `root` (picklable: it is the path)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def put(self, name: str, data: bytes) -> None:
        path = os.path.join(self.root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)       # a reader sees the whole file or none

    def get(self, name: str) -> bytes:
        with open(os.path.join(self.root, name), "rb") as f:
            return f.read()

    def names(self, prefix: str) -> list[str]:
        folder = os.path.join(self.root, prefix)
        if not os.path.isdir(folder):
            return []
        return [f"{prefix}/{n}" for n in os.listdir(folder) if not n.endswith(".tmp")]

    def delete(self, name: str) -> None:
        try:
            os.remove(os.path.join(self.root, name))
        except FileNotFoundError:
            pass

    def destroy(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class MemoryStore:
    """Named byte strings in this process (the in-process BSP engine's log)."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    def put(self, name: str, data: bytes) -> None:
        self._data[name] = bytes(data)

    def get(self, name: str) -> bytes:
        return self._data[name]

    def names(self, prefix: str) -> list[str]:
        return [n for n in self._data if n.startswith(prefix + "/")]

    def delete(self, name: str) -> None:
        self._data.pop(name, None)

    def destroy(self) -> None:
        self._data.clear()


# -- resident copies --------------------------------------------------------------------

class Resident:
    """Deserialized shard workers kept in this process, least recently used first out.

    At most `capacity` are kept, but a shard of the engine being served is never
    pushed out by another shard of the same engine (one engine's shards all fit)."""

    def __init__(self, capacity: int = 16) -> None:
        self.capacity = capacity
        self._live: OrderedDict[tuple[str, int], tuple[int, Any]] = OrderedDict()

    def take(self, uid: str, shard: int) -> tuple[int, Any] | None:
        """The copy of (uid, shard) and its version, taken out (None if none here)."""
        return self._live.pop((uid, shard), None)

    def keep(self, token: Token, worker: Any) -> None:
        self._live[(token.uid, token.shard)] = (token.version, worker)
        others = [k for k in self._live if k[0] != token.uid]
        while len(self._live) > self.capacity and others:
            del self._live[others.pop(0)]

    def drop(self, uid: str) -> None:
        for key in [k for k in self._live if k[0] == uid]:
            del self._live[key]

    def __len__(self) -> int:
        return len(self._live)


#: This process's copies: in a Spark executor, its Python worker's.
RESIDENT = Resident()


# -- the log ------------------------------------------------------------------------------

@attrs.define
class Loaded:
    """How a shard's worker was found: `how` is "resident", "replayed" (a copy
    caught up) or "rebuilt" (from the base), `replayed` entries re-applied."""

    worker: Any
    how: str
    replayed: int = 0


class ShardLog:
    """The bases and entries of one engine's shards in `store` (picklable when the
    store is: Spark tasks carry it)."""

    def __init__(self, store: Any, uid: str, max_entries: int = 1000,
                 min_base_bytes: int = 1 << 16) -> None:
        self.store = store
        self.uid = uid
        self.max_entries = max_entries
        self.min_base_bytes = min_base_bytes

    def create(self, shard: int, version: int, blob: bytes) -> Token:
        """A shard whose whole state is `blob` (a pickled worker) at `version`."""
        self.store.put(_name(self.uid, shard, version, "base"), blob)
        return Token(self.uid, shard, version, (), len(blob), 0)

    def load(self, token: Token, resident: Resident,
             replay: Callable[[Any, Any], None]) -> Loaded:
        """The worker in state `token`, taken out of `resident` (the caller puts it
        back with `Resident.keep` once done): the resident copy if it is at that
        version, caught up if it is at an earlier version of the token's chain,
        otherwise rebuilt from the base.  `replay(worker, entry)` re-applies one
        logged superstep."""
        got = resident.take(token.uid, token.shard)
        worker, todo, how = None, token.log, "rebuilt"
        if got is not None:
            version, copy = got
            chain = token.before + token.log if token.before else (token.base,) + token.log
            if version == token.version:
                return Loaded(copy, "resident")
            if version in chain:
                worker, how = copy, "replayed"
                todo = chain[chain.index(version) + 1:]
        if worker is None:
            worker = pickle.loads(self.store.get(token.names()[0]))
        for v in todo:
            replay(worker, pickle.loads(self.store.get(_name(self.uid, token.shard, v, "log"))))
        return Loaded(worker, how, len(todo))

    def append(self, token: Token, version: int, entry: bytes,
               worker: Callable[[], bytes]) -> tuple[Token, int, int]:
        """Persist superstep `version` of the shard (its `entry`), and compact:
        write the whole state (`worker()`, pickled) as a new base when the log has
        grown as heavy as the base or as long as `max_entries`.  Returns the new
        token and the bytes written as an entry and as a base."""
        log_bytes = token.log_bytes + len(entry)
        self.store.put(_name(self.uid, token.shard, version, "log"), entry)
        if (len(token.log) + 1 >= self.max_entries
                or log_bytes >= max(token.base_bytes, self.min_base_bytes)):
            # The entry stays too: copies on the old chain catch up through it.
            blob = worker()
            base = attrs.evolve(self.create(token.shard, version, blob),
                                before=(token.base,) + token.log + (version,))
            return base, len(entry), len(blob)
        return (attrs.evolve(token, log=token.log + (version,), log_bytes=log_bytes),
                len(entry), 0)

    def collect_garbage(self, live: list[Token]) -> int:
        """Delete every base and entry of these shards that no token in `live`
        names; returns how many went."""
        keep = {n for t in live for n in t.names()}
        gone = 0
        for shard in sorted({t.shard for t in live}):
            for name in self.store.names(f"{self.uid}/{shard}"):
                if name not in keep:
                    self.store.delete(name)
                    gone += 1
        return gone
