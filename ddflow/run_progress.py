"""A progress display for one `Dataflow.run()`: rounds (scheduler passes) and records.

This module isolates the drawing: a `rich` progress line that the engine's pass
loop moves (`engine.observe(on_pass)`, asked for by name: an engine without it, such
as the Spark driver, gets a line that shows only the run's end).  A *pass* is one
sweep of the scheduler's work list, and a loop's back edge starts the next one, so
passes count the rounds a change travels through loops (`ddflow.engine.worker`).
Records are the updates moved along edges.  It leaves out timing and ETA: a run has
no known end, so the bar pulses rather than fills.
"""

from __future__ import annotations

from typing import Any


class RunProgress:
    """A context manager drawing one run's progress on `console` (a `rich` Console;
    None: standard error).  `update(passes, routed)` takes the engine's running
    totals; the display shows what this run added to them."""

    def __init__(self, engine: Any, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, Progress, SpinnerColumn, TextColumn,
                                   TimeElapsedColumn)
        self.engine = engine
        self.console = console if console is not None else Console(stderr=True)
        self._progress = Progress(
            SpinnerColumn(), TextColumn("run()"), BarColumn(),
            TextColumn("{task.fields[rounds]:,} rounds"),
            TextColumn("{task.fields[records]:,} records"), TimeElapsedColumn(),
            console=self.console, transient=False)
        self._start = (getattr(engine, "passes", 0), getattr(engine, "routed", 0))
        self._task: Any = None
        #: What this run did, once it is over: `(rounds, records)`.
        self.rounds = 0
        self.records = 0

    def __enter__(self) -> RunProgress:
        self._progress.start()
        self._task = self._progress.add_task("run", total=None, rounds=0, records=0)
        observe = getattr(self.engine, "observe", None)
        if observe is not None:
            observe(self.update)
        return self

    def update(self, passes: int, routed: int) -> None:
        self.rounds = passes - self._start[0]
        self.records = routed - self._start[1]
        self._progress.update(self._task, rounds=self.rounds, records=self.records)

    def __exit__(self, *exc: Any) -> None:
        observe = getattr(self.engine, "observe", None)
        if observe is not None:
            observe(None)
        self.update(getattr(self.engine, "passes", self._start[0]),
                    getattr(self.engine, "routed", self._start[1]))
        self._progress.update(self._task, total=1, completed=1)
        self._progress.stop()


__all__ = ["RunProgress"]
