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
  number `max_entries`), the shard's next superstep with no undo record open (the
  first of a run, see below) writes a new base: what is written stays proportional
  to the changes (each byte of state is rewritten after as many bytes of changes,
  as in a log-structured merge), and a rebuild replays about `max_entries`
  supersteps, plus one run's.  The chain before the base is kept until the next
  compaction, so a copy left on it catches up instead of being rebuilt.
* **Undo**: a copy that starts a run records what the run overwrites (the undo
  records every operator keeps, `operators.undo`), so that after a failed run the
  next superstep or read finds it undone at the run's start: a failed step costs
  no rebuild and re-runs no user function.  A copy that joins a run half-way
  records nothing; a failed run leaves it to be rebuilt.
* Nothing is deleted while a run may still read it: a Spark task recomputed after
  an executor loss reads the chain its lineage names.  The driver removes what no
  live token names after a run succeeded (`collect_garbage`).

Stores: `DirectoryStore` (files; a directory every executor and the driver see, for
a cluster a shared mount) and `MemoryStore` (in this process, for the in-process
BSP engine).  Writes are atomic (a temporary name, then a rename).
"""

from __future__ import annotations

import os
import uuid
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
        # Unique per writer: a retried or speculative task may write the same name
        # from another host of a shared mount at the same time.
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
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
        self._live: OrderedDict[tuple[str, int], tuple[int, Any, Any]] = OrderedDict()

    def take(self, uid: str, shard: int) -> tuple[int, Any, Any] | None:
        """The copy of (uid, shard), its version and the version its open undo
        records go back to (None if none), taken out (None if no copy here)."""
        return self._live.pop((uid, shard), None)

    def keep(self, token: Token, worker: Any, began: int | None = None,
             version: int | None = None) -> None:
        """Keep `worker`, at `version` (default: the token's), whose undo records
        (if `began` is not None) go back to version `began`."""
        self._live[(token.uid, token.shard)] = (
            token.version if version is None else version, worker, began)
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
    """How a shard's worker was found: `how` is "resident", "rolled_back" (a copy
    ahead of the state, on an abandoned branch, undone by its own undo records),
    "replayed" (a copy caught up) or "rebuilt" (from the base); `replayed` entries
    re-applied; `began` where the worker's open undo records go back to."""

    worker: Any
    how: str
    replayed: int = 0
    began: int | None = None


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

    def load(self, token: Token, resident: Resident, replay: Callable[[Any, Any], None],
             undo: Callable[[Any], None] | None = None) -> Loaded:
        """The worker in state `token`, taken out of `resident` (the caller puts it
        back with `Resident.keep` once done): the resident copy if it is at that
        version; if its undo records go back to that version, the copy undone
        (`undo(worker)`: a failed run's changes, without re-running anything); if it
        is at an earlier version of the token's chain, the copy caught up; otherwise
        rebuilt from the base.  `replay(worker, entry)` re-applies one logged
        superstep (re-running the user functions it ran)."""
        got = resident.take(token.uid, token.shard)
        worker, todo, how, began = None, token.log, "rebuilt", None
        if got is not None:
            version, copy, began = got
            chain = token.before + token.log if token.before else (token.base,) + token.log
            if version == token.version:
                return Loaded(copy, "resident", began=began)
            if began == token.version and undo is not None:
                undo(copy)
                return Loaded(copy, "rolled_back")
            if version in chain:
                worker, how = copy, "replayed"
                todo = chain[chain.index(version) + 1:]
        if worker is None:
            worker, began = pickle.loads(self.store.get(token.names()[0])), None
        for v in todo:
            replay(worker, pickle.loads(self.store.get(_name(self.uid, token.shard, v, "log"))))
        return Loaded(worker, how, len(todo), began)

    def append(self, token: Token, version: int, entry: bytes) -> Token:
        """Persist superstep `version` of the shard: its `entry`."""
        self.store.put(_name(self.uid, token.shard, version, "log"), entry)
        return attrs.evolve(token, log=token.log + (version,),
                            log_bytes=token.log_bytes + len(entry))

    def due(self, token: Token) -> bool:
        """Whether the shard's log should be compacted: it weighs as much as its
        base, or is `max_entries` long."""
        return bool(token.log) and (
            len(token.log) >= self.max_entries
            or token.log_bytes >= max(token.base_bytes, self.min_base_bytes))

    def compact(self, token: Token, blob: bytes) -> Token:
        """Write the shard's whole state `blob` (its worker at `token.version`,
        pickled) as its new base.  The entries stay for copies on the old chain."""
        return attrs.evolve(self.create(token.shard, token.version, blob),
                            before=(token.base,) + token.log)

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
