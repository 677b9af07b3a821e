"""Run a dataflow on given update lists, the way the law tests and users check programs.

`evaluate(build, inputs)` builds a fresh `Dataflow` with one input per update list,
lets `build` wire the operators under test, feeds the updates, and returns the
captured output updates, consolidated.  `schedule` decides how the input arrives:

* `"once"`: everything at the least time, then `close()` and one `run()`;
* `"each"`: one update per `run()`, the sessions advancing as far as the remaining
  updates allow (the meet of their times), so frontiers move between runs;
* `"reverse"`: like `"each"` with the updates of equal time in reverse order.

Whatever the schedule, the accumulations must be the same (`test_batching_*`).
And with the stepwise schedules, finality is checked too: after every `run()` the
accumulation at each time the capture declares final (not in advance of its
frontier) is recorded, and must never change afterwards; an engine that called a
time complete too early fails here even when its final output is right.

>>> out = evaluate(lambda c: c.map(lambda x: x * 2), [[(1, 0, 1), (2, 3, 1)]])
>>> out
[(2, 0, 1), (4, 3, 1)]
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

from lattice import meet, minimum, sort_key
from ddflow.errors import GraphError, StalledRunWarning
from ddflow.testing.checks import listed, takes, triples
from ddflow.testing.oracle import accumulate, join_closure

#: The ways `evaluate` feeds its inputs (see `evaluate`).
SCHEDULES = ("once", "each", "reverse")


def evaluate(build: Callable[..., Any], inputs: Sequence[Sequence[tuple]], *,
             time: Any = None, workers: int = 1, schedule: str = "once",
             fuse: bool = True, dataflow_out: list | None = None,
             engine: Callable[[], Any] | None = None,
             after_run: Callable[[int], Any] | None = None) -> list[tuple]:
    """The consolidated output of `build(*collections)` fed with `inputs`.

    `inputs` is one list of `(data, time, diff)` triples per collection `build`
    takes.  `schedule` decides how they arrive (the answer must not depend on it):

    * `"once"`: everything at the least time, then `close()` and one `run()`;
    * `"each"`: one update per `run()`, in time order, the sessions advancing as far
      as the remaining updates allow, so frontiers move between runs; after every
      run, an accumulation the capture declares final must never change later
      (checked at the end: `AssertionError` naming the time);
    * `"reverse"`: like `"each"`, the updates of equal time in reverse order.

    `engine`, if given, makes the engine to run on (a fresh one per call), e.g.
    `lambda: SparkEngine(spark)`; otherwise the local engine with `workers`.
    `after_run(n)`, with a stepwise schedule, is called after the `n`-th `run()`
    (from 0): say, to add operators to the running dataflow.

    Misuse raises before anything runs: `GraphError` for an unknown `schedule` or a
    `build` that cannot take one collection per input list, `DataError` for an update
    that is not a `(data, time, diff)` triple (naming the input list).
    """
    from ddflow import Dataflow

    if schedule not in SCHEDULES:
        raise GraphError(f"evaluate: unknown schedule {schedule!r}; one of {SCHEDULES}")
    inputs = [triples(inp, f"evaluate input {n}")
              for n, inp in enumerate(listed(inputs, "evaluate's inputs"))]
    takes(build, len(inputs), "evaluate's build",
                 f"one collection per input list ({len(inputs)} given)")

    if time is None:
        first = next((u[1] for inp in inputs for u in inp), 0)
        time = minimum(first)
    if engine is not None:
        df = Dataflow(time=time, engine=engine(), fuse=fuse)
    else:
        df = Dataflow(time=time, workers=workers, fuse=fuse)
    sessions, collections = zip(*(df.new_collection() for _ in inputs)) if inputs else ((), ())
    cap = build(*collections).capture()
    finals = _Finality(inputs)
    if dataflow_out is not None:
        dataflow_out.append(df)
    if schedule == "once":
        for s, inp in zip(sessions, inputs):
            for d, t, r in inp:
                s.update_at(d, t, r)
    elif schedule in ("each", "reverse"):
        tagged = [(i, u) for i, inp in enumerate(inputs) for u in inp]
        tagged.sort(key=lambda iu: sort_key(iu[1][1]), reverse=(schedule == "reverse"))
        if schedule == "reverse":
            tagged.sort(key=lambda iu: sort_key(iu[1][1]))  # stable: equal times stay reversed
        for n, (i, (d, t, r)) in enumerate(tagged):
            sessions[i].update_at(d, t, r)
            rest = [u[1] for _j, u in tagged[n + 1:]]
            if rest:
                low = rest[0]
                for x in rest[1:]:
                    low = meet(low, x)
                for s in sessions:
                    s.advance_to(_forward(s.time, low))
            with warnings.catch_warnings():
                # Updates of one time split over several runs, on purpose: the runs
                # before the frontier moves complete nothing, which is what is tested.
                warnings.simplefilter("ignore", StalledRunWarning)
                df.run()
            finals.record(cap)
            if after_run is not None:
                after_run(n)
    for s in sessions:
        s.close()
    df.run()
    finals.verify(cap)
    return cap.updates


class _Finality:
    """Accumulations at times a capture called final, to check they never change."""

    def __init__(self, inputs: Sequence[Sequence[tuple]]) -> None:
        # The oracle's own closure and accumulation: not the library's.
        self.times = join_closure({u[1] for inp in inputs for u in inp})
        self.seen: dict = {}

    def record(self, cap: Any) -> None:
        updates = cap.updates
        for t in self.times:
            if t not in self.seen and cap.is_final(t):
                self.seen[t] = accumulate(updates, t)

    def verify(self, cap: Any) -> None:
        updates = cap.updates
        for t, acc in self.seen.items():
            now = accumulate(updates, t)
            if now != acc:
                raise AssertionError(f"the output at {t!r} was declared final as {acc!r} "
                                     f"but later became {now!r}")


def _forward(current: Any, low: Any) -> Any:
    """The session time to move to: `low` if it is not behind `current`."""
    from lattice import less_equal
    return low if less_equal(current, low) else current
