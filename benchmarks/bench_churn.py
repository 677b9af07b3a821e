"""Churn: 10^6 updates over a fixed live set; compaction keeps every trace near live size.

Workload: 10,000 live facts `(key, serial)` over 1,000 keys, and a dimension mapping
each key to one of 97 groups, loaded first; then epochs in which 1,000 random live
facts are removed and 1,000 new ones inserted (2,000 updates), so the live set stays
at 10,000, until 10^6 updates have been fed.  Dataflow:

    facts.join(dimension).map(group).count()     facts per group
    facts.map(key).distinct()                    keys present

The answers are folded into dicts by `inspect` rather than captured: a capture keeps
every update it sees (its history), which grows with the churn by design.

Memory must follow the live data, not the history: every arrangement's trace is
compacted as its readers' frontiers advance (`Trace.set_logical_compaction`), and
merging collapses a record's insertion and later deletion once both are advanced to
the frontier (McSherry, Murray, Isaacs, Isard, "Differential dataflow", CIDR 2013;
the `advance_by` of differential dataflow's traces).  The bound checked after every
epoch: every trace holds at most 2x the live records.

Reported: per trace, its record count at checkpoints next to its own live records
(the distinct records of its accumulation at the last complete epoch) and the live
set; the largest ratio seen over all epochs; tracemalloc's current and peak heap;
process CPU time.  Baseline, same run, same updates, also under tracemalloc: the same
answers maintained by hand with dicts.

Run: `python -m benchmarks.bench_churn [--quick]` (`--quick`: 20,000 updates).
"""

from __future__ import annotations

import argparse
import random
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks.common import save, table

import ddflow
from ddflow.updates import accumulate

GROUPS = 97
FULL = {"updates": 1_000_000, "live": 10_000, "keys": 1_000, "churn": 1_000, "checkpoints": 10}
QUICK = {"updates": 20_000, "live": 2_000, "keys": 200, "churn": 200, "checkpoints": 5}
#: Every trace holds at most this many times the live records.
BOUND = 2.0


def workload(updates: int, live: int, keys: int, churn: int,
             seed: int = 7) -> tuple[list, list, list]:
    """`(dimension, initial facts, epochs)`: each epoch is `[(fact, diff)]`, `churn`
    removals of random live facts and as many insertions of new ones."""
    rng = random.Random(seed)
    dimension = [(k, k % GROUPS) for k in range(keys)]
    serial = 0
    facts = []
    for _ in range(live):
        serial += 1
        facts.append((rng.randrange(keys), serial))
    current = list(facts)
    epochs = []
    for _ in range(max(0, updates - live) // (2 * churn)):
        batch = []
        for _ in range(churn):
            i = rng.randrange(len(current))
            batch.append((current[i], -1))
            serial += 1
            current[i] = (rng.randrange(keys), serial)
            batch.append((current[i], 1))
        epochs.append(batch)
    return dimension, facts, epochs


def _group(kv: tuple) -> int:
    return kv[1][1]


def _key(kv: tuple) -> int:
    return kv[0]


def _fold_into(answer: dict) -> Callable[[tuple], None]:
    """An `inspect` callback keeping `answer` equal to the accumulated collection (the
    times are epochs, each complete when the next one's updates arrive)."""
    def fold(update: tuple) -> None:
        data, _time, diff = update
        n = answer.get(data, 0) + diff
        if n:
            answer[data] = n
        else:
            del answer[data]
    return fold


def _traces(df: Any) -> list[tuple[str, Any]]:
    """`(operator name, trace)` of every operator owning a trace (arrangements' input
    traces, reductions' output traces), over every worker."""
    out = []
    for node in df.nodes:
        for op in df.engine.operators(node):
            if node.kind == "input":
                out.append((f"{node.name}#{node.id}", _InputHistory(op)))
            for attr in ("trace", "out_trace"):
                trace = getattr(op, attr, None)
                if trace is not None:
                    out.append((f"{node.name}#{node.id}", trace))
    return out


class _InputHistory:
    """An input's kept history (what a piece added later imports) read as a trace."""

    def __init__(self, op: Any) -> None:
        self.op = op

    def updates(self) -> list:
        # An input keeps its compacted history of plain records in columns and only
        # what arrived since in `history` (`history_updates()` reads both).
        read = getattr(self.op, "history_updates", None)
        return read() if read is not None else self.op.history

    def record_count(self) -> int:
        return len(self.updates())

    def batch_count(self) -> int:
        return 1

    def accumulate(self, time: Any) -> dict:
        # Compacted to the input's frontier: its times read there, not before.
        frontier = self.op.frontier.elements
        return accumulate(self.updates(), frontier[0] if frontier else time)


def _heap() -> int | None:
    """The traced heap now (bytes), or None when tracemalloc is off."""
    return tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None


def run_ddflow(dimension: list, facts: list, epochs: list, checkpoints: int,
               workers: int = 1, on_epoch: Callable[[int, list], None] | None = None
               ) -> dict[str, Any]:
    """Feed the churn through the dataflow; return answers, trace figures and timings.

    `on_epoch(epoch, [(trace name, trace)])` is called after every epoch (the test
    checks the bounds there)."""
    df = ddflow.Dataflow(workers=workers)
    f_in, f = df.new_collection("facts")
    d_in, d = df.new_collection("dimension")
    facts_by_key = f.arrange_by_key(name="facts.arranged")
    per_group = (facts_by_key.join(d.arrange_by_key(name="dimension.arranged"), name="join")
                 .map(_group, name="group").count(name="count"))
    keys = f.map(_key, name="key").distinct(name="distinct")
    # A capture keeps every update it sees (its history is what `Capture.updates`
    # returns), which would grow with the churn: the answers are folded into dicts.
    answers: dict[str, dict] = {"per_group": {}, "keys": {}}
    per_group.inspect(_fold_into(answers["per_group"]), name="per_group")
    keys.inspect(_fold_into(answers["keys"]), name="keys")
    live = len(facts)
    for row in dimension:
        d_in.insert(row)
    for fact in facts:
        f_in.insert(fact)
    f_in.advance_to(1)
    d_in.advance_to(1)
    cpu = time.process_time()
    df.run()
    every = max(1, len(epochs) // max(1, checkpoints))
    rows: list[dict] = []
    heaps: list[tuple[int, int | None]] = []
    worst: dict[str, float] = {}
    for epoch, batch in enumerate(epochs, start=1):
        for fact, diff in batch:
            f_in.update(fact, diff)
        f_in.advance_to(epoch + 1)
        d_in.advance_to(epoch + 1)
        df.run()
        traces = _traces(df)
        for name, trace in traces:
            worst[name] = max(worst.get(name, 0.0), trace.record_count() / live)
        if on_epoch is not None:
            on_epoch(epoch, traces)
        if epoch % every == 0 or epoch == len(epochs):
            rows.extend(_checkpoint(df, epoch, live))
            heaps.append((epoch, _heap()))
    cpu = time.process_time() - cpu
    return {**answers, "checkpoints": rows, "worst_ratio_to_live": worst, "cpu_s": cpu,
            "heap_current": _heap(), "heap_at_checkpoints": heaps}


def _checkpoint(df: Any, epoch: int, live: int) -> list[dict]:
    """Per trace: records held, its own live records at the last complete epoch
    (what full compaction would leave), and both ratios."""
    merged: dict[str, list[int]] = {}
    for name, trace in _traces(df):
        own = len(trace.accumulate(epoch))
        acc = merged.setdefault(name, [0, 0, 0])
        acc[0] += trace.record_count()
        acc[1] += own
        acc[2] += trace.batch_count()
    return [{"epoch": epoch, "trace": name, "records": n, "own_live": own, "batches": b,
             "live_set": live, "ratio_to_live_set": n / live,
             "ratio_to_own_live": n / own if own else None}
            for name, (n, own, b) in merged.items()]


def run_handwritten(dimension: list, facts: list, epochs: list) -> dict[str, Any]:
    """The same two answers, maintained with dicts."""
    group = dict(dimension)
    cpu = time.process_time()
    live: Counter = Counter(facts)
    per_group: Counter = Counter(group[k] for k, _s in facts)
    per_key: Counter = Counter(k for k, _s in facts)
    for batch in epochs:
        for fact, diff in batch:
            live[fact] += diff
            if not live[fact]:
                del live[fact]
            per_group[group[fact[0]]] += diff
            per_key[fact[0]] += diff
    cpu = time.process_time() - cpu
    return {"per_group": {(g, n): 1 for g, n in per_group.items() if n},
            "keys": {k: 1 for k, n in per_key.items() if n > 0}, "cpu_s": cpu,
            "heap_current": _heap()}


def traced(fn: Callable[[], dict]) -> dict:
    """`fn()` under tracemalloc, with the peak heap added (`fn` reports the current
    heap itself, at its end, while its state is alive)."""
    tracemalloc.start()
    try:
        result = fn()
        result["heap_peak"] = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_churn",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 updates (for tests)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default=None, help="where to write the JSON "
                        "(default benchmarks/results/churn.json)")
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    dimension, facts, epochs = workload(size["updates"], size["live"], size["keys"],
                                        size["churn"], args.seed)
    updates = len(facts) + sum(len(b) for b in epochs)
    dd = traced(lambda: run_ddflow(dimension, facts, epochs, size["checkpoints"],
                                   workers=args.workers))
    hand = traced(lambda: run_handwritten(dimension, facts, epochs))
    agree = dd["per_group"] == hand["per_group"] and dd["keys"] == hand["keys"]
    worst = max(dd["worst_ratio_to_live"].values())
    result = {
        "sizes": size, "seed": args.seed, "workers": args.workers, "updates": updates,
        "epochs": len(epochs), "answers_agree": agree,
        "bound": BOUND, "within_bound": worst <= BOUND, "worst_ratio_to_live": worst,
        "worst_ratio_per_trace": dd["worst_ratio_to_live"],
        "checkpoints": dd["checkpoints"],
        "ddflow": {k: dd[k] for k in ("cpu_s", "heap_current", "heap_peak",
                                      "heap_at_checkpoints")},
        "handwritten": {k: hand[k] for k in ("cpu_s", "heap_current", "heap_peak")},
        "ratio_cpu_vs_handwritten": dd["cpu_s"] / hand["cpu_s"] if hand["cpu_s"] else None,
        "ratio_heap_peak_vs_handwritten": dd["heap_peak"] / hand["heap_peak"],
    }
    print(table(f"churn: {updates:,} updates, {size['live']:,} live facts, "
                f"{len(epochs):,} epochs of {2 * size['churn']:,} (traces at checkpoints)",
                ["epoch", "trace", "records", "own live", "batches", "/ own live",
                 "/ live set"],
                [[r["epoch"], r["trace"], r["records"], r["own_live"], r["batches"],
                  "-" if r["ratio_to_own_live"] is None else r["ratio_to_own_live"],
                  r["ratio_to_live_set"]] for r in dd["checkpoints"]]))
    print()
    mib = 1 / (1 << 20)
    print(table("memory and time (both under tracemalloc; process CPU time)",
                ["run", "heap current MiB", "heap peak MiB", "CPU s", "updates/s"],
                [["ddflow (local)", dd["heap_current"] * mib, dd["heap_peak"] * mib,
                  dd["cpu_s"], updates / dd["cpu_s"]],
                 ["hand-written dicts", hand["heap_current"] * mib, hand["heap_peak"] * mib,
                  hand["cpu_s"], updates / max(hand["cpu_s"], 1e-9)]]))
    print("heap at checkpoints (MiB): " + ", ".join(
        f"{e}: {h * mib:.2f}" for e, h in dd["heap_at_checkpoints"]))
    print(f"worst trace / live set over every epoch: {worst:.3f} (bound {BOUND}); "
          f"answers agree with the hand-written baseline: {agree}")
    path = save("churn", result, Path(args.out) if args.out else None)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
