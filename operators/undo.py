"""Rollback that costs what a step touched: the undo records every operator shares.

What this isolates: recording, while a step runs, the *before-image* of whatever an
operator's hooks overwrite, so that a failed step can be undone and a successful one
forgotten.  It leaves out when steps begin and end (the engine decides, through
`Operator.checkpoint` / `commit` / `rollback` in `operators.base`).  The invariant it
keeps: a structure is never copied whole; a step's records cost the keys and
attributes it wrote, times the size of the values at those keys.

The records, by kind of state:

* keyed state lives in an `UndoDict`.  While it records, the first write of a step
  to a key (set, delete, pop ...) saves that key's before-image: `MISSING` if the
  key was absent, a shallow copy of a set, dict or deque value, a `Prefix` (the list
  and its length) of a list value, and the value itself otherwise (times, frontiers,
  counts, tuples: immutable).  A hook that mutates a value in place (`s.add(t)` on
  the set at `d[k]`) calls `d.touch(k)` first, which saves the same image.  Later
  writes of the step to that key record nothing: rollback needs the first image only.
* a trace (`ddflow.trace.Trace`) holds immutable batches: its own `snapshot()`, a
  tuple of references in O(#batches), is its record.
* an append-only list (a capture's updates, a buffer that grows until it is swapped
  for a fresh list): a `Prefix`, undone by truncation.
* scalars (frontiers, counters, the attribute holding a structure, in case a hook
  replaces it): their value, by reference.

The convention that makes list records sound: a list reachable from recorded state
only grows (append, extend) or is replaced by another list; it is never shrunk,
reordered or overwritten in place.  A hook that needs that swaps in a fresh list.

Sources: the before-image undo log of database recovery, written once per item and
replayed on abort: Gray and Reuter, "Transaction Processing: Concepts and Techniques"
(Morgan Kaufmann, 1993); Mohan, Haderle, Lindsay, Pirahesh and Schwarz, "ARIES: A
Transaction Recovery Method Supporting Fine-Granularity Locking and Partial Rollbacks
Using Write-Ahead Logging", ACM TODS 17(1), 1992.

>>> d = UndoDict({"a": {1}, "b": [1]})
>>> d.checkpoint()
>>> d.touch("a").add(2); d.touch("b").append(2); d["c"] = 3; del d["a"]
>>> d.rollback()                     # three records: a (a copy), b (a prefix), c (missing)
(3, 1)
>>> d == {"a": {1}, "b": [1]}       # the items, not their order: "a" comes back last
True
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable



class _Missing:
    """The before-image of a key that was absent."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Prefix:
    """The record of a list that may only grow: the list itself and its length.

    (A plain slotted class rather than an attrs one: one is made per list per step,
    and attrs' frozen `__init__` costs several times more.)"""

    __slots__ = ("items", "length")

    def __init__(self, items: list | None, length: int) -> None:
        self.items = items
        self.length = length

    def __repr__(self) -> str:
        return f"Prefix(length={self.length})"

    def restore(self) -> list:
        if self.items is None:
            return []
        del self.items[self.length:]
        return self.items


#: The record of an operator's private list that was empty (`Operator._private_buffers`):
#: it restores to a fresh empty list and keeps no reference to the one it replaced.
EMPTY = Prefix(None, 0)


def before_image(value: Any) -> tuple[Any, int]:
    """What must be kept of `value` to put it back after in-place mutation, and how
    many values that copied.

    >>> before_image({1, 2}), before_image((1, 2))
    (({1, 2}, 2), ((1, 2), 0))
    """
    t = type(value)
    if t is list:
        return Prefix(value, len(value)), 0
    if t is set or t is dict or t is deque:
        return value.copy(), len(value)
    if isinstance(value, (list, set, dict, deque)):
        raise TypeError(f"journaled state holds a {t.__name__}, a subclass of a mutable "
                        "container: store plain lists, sets, dicts or deques")
    return value, 0


def _put_back(image: Any) -> Any:
    return image.restore() if type(image) is Prefix else image


class _FromEmpty:
    """The record of a dict that was empty at `checkpoint()`: every key's image is
    `MISSING`, so none is written (a load's first step writes every key of a
    reduce's pending times, and the per-key records were ~30 bytes a key held until
    the step ended), and rollback empties the dict."""

    __slots__ = ()

    def __contains__(self, key: Any) -> bool:
        return True         # already recorded: as absent

    def __len__(self) -> int:
        return 0


_FROM_EMPTY = _FromEmpty()


class UndoDict(dict):
    """A dict that, between `checkpoint()` and `commit()` / `rollback()`, saves the
    before-image of each key a step writes, once.

    Reads cost what a dict's cost.  Writes (`d[k] = v`, `del d[k]`, `pop`, `popitem`,
    `setdefault`, `update`, `clear`) save the key's image when recording; a value
    mutated in place must be announced with `touch(k)`.  Not recording (the default,
    and always outside an engine's step), a write costs one attribute test.
    Pickles and deep-copies as its items only: records never outlive a step.
    """

    __slots__ = ("_undo", "_copied")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        dict.__init__(self, *args, **kwargs)
        self._undo: dict | None = None
        self._copied = 0

    def __reduce__(self) -> tuple:
        return (type(self), (dict(self),))

    # -- recording -------------------------------------------------------------------
    def _save(self, key: Any) -> None:
        image, copied = before_image(dict.get(self, key, MISSING))
        self._undo[key] = image      # type: ignore[index]  # only called while recording
        self._copied += copied

    def touch(self, key: Any, default: Any = None) -> Any:
        """The value at `key` (or `default`), about to be mutated in place: its
        before-image is saved first, once per step."""
        undo = self._undo
        if undo is not None and key not in undo:
            self._save(key)
        return dict.get(self, key, default)

    def extend_lists(self, groups: dict) -> None:
        """Append each group's items to the list at its key (a new list where there is
        none): a batch grouped by key first is recorded once per key, not per item."""
        for key, items in groups.items():
            existing = self.touch(key)
            if existing is None:
                self[key] = items
            else:
                existing.extend(items)

    def set_many(self, items: dict) -> None:
        """`self[k] = v` for every item: at C speed when nothing needs recording (not
        recording, or the dict was empty at `checkpoint()`)."""
        undo = self._undo
        if undo is None or undo is _FROM_EMPTY:
            dict.update(self, items)
            return
        for key, value in items.items():
            self[key] = value

    def pop_many(self, keys: Iterable[Any]) -> None:
        """`del self[k]` for every key (each present)."""
        undo = self._undo
        if undo is None or undo is _FROM_EMPTY:
            deque(map(self._delete, keys), maxlen=0)
            return
        for key in keys:
            del self[key]

    _delete = dict.__delitem__

    def checkpoint(self) -> None:
        """Start recording (a second call while recording does nothing).  An empty
        dict records nothing per key: its rollback is `clear()`."""
        if self._undo is None:
            self._undo = {} if self else _FROM_EMPTY    # type: ignore[assignment]
            self._copied = 0

    def commit(self) -> tuple[int, int]:
        """Forget the records and stop recording.  Returns (records, values copied)."""
        undo, self._undo = self._undo, None
        return (0, 0) if undo is None else (len(undo), self._copied)

    def rollback(self) -> tuple[int, int]:
        """Put every recorded key back as it was at `checkpoint()`; stop recording.
        Returns (records, values copied).  Keys re-inserted go to the end of the
        iteration order: the items are restored, not their order."""
        undo, self._undo = self._undo, None
        if undo is None:
            return (0, 0)
        if undo is _FROM_EMPTY:
            dict.clear(self)
            return (0, 0)
        for key, image in undo.items():
            if image is MISSING:
                dict.pop(self, key, None)
            else:
                dict.__setitem__(self, key, _put_back(image))
        return (len(undo), self._copied)

    # -- every way a dict can be written ----------------------------------------------
    def __setitem__(self, key: Any, value: Any) -> None:
        undo = self._undo
        if undo is not None and key not in undo:
            self._save(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        undo = self._undo
        if undo is not None and key not in undo:
            self._save(key)
        dict.__delitem__(self, key)

    def pop(self, key: Any, *default: Any) -> Any:
        undo = self._undo
        if undo is not None and key not in undo and dict.__contains__(self, key):
            self._save(key)
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[Any, Any]:
        if self._undo is not None and self:
            key = next(reversed(self))       # the item dict.popitem removes (LIFO)
            if key not in self._undo:
                self._save(key)
        return dict.popitem(self)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        # The value returned is usually mutated next, so this saves like `touch`.
        undo = self._undo
        if undo is not None and key not in undo:
            self._save(key)
        return dict.setdefault(self, key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> UndoDict:
        self.update(other)
        return self

    def clear(self) -> None:
        if self._undo is not None:
            for key in list(self):
                if key not in self._undo:
                    self._save(key)
        dict.clear(self)


def undo_dicts(value: Any) -> Iterable[UndoDict]:
    """The `UndoDict`s held by an attribute's value: itself, or the members of a
    tuple of them (a fixed family of structures, such as one per input)."""
    if isinstance(value, UndoDict):
        yield value
    elif type(value) is tuple:
        for v in value:
            yield from undo_dicts(v)


__all__ = ["UndoDict", "Prefix", "EMPTY", "MISSING", "before_image", "undo_dicts"]
