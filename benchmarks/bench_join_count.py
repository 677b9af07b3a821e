"""Incremental join + count: throughput and per-epoch latency (issue 3's workload).

Workload: a dimension of 10,000 keys `(key, group)` loaded first; then a stream of
100,000 fact updates `(key, value)` in epochs of 1,000, 10% of them deletions of
earlier facts.  Dataflow: `facts.join(dimension).map(group).count()`, i.e. the number
of facts per group, maintained incrementally.

Baselines measured in the same run on the same updates:
* `handwritten`: the same maintenance written by hand with dicts (the floor for
  anything in Python);
* `recompute`: recomputing the counts from scratch at every epoch.

Run: `python -m benchmarks.bench_join_count [--quick]`.
"""

from __future__ import annotations

import argparse
import random
from collections import Counter, defaultdict

from benchmarks.common import median, p90, save, table, timed

import ddflow


def workload(n_updates: int, epoch_size: int, n_keys: int, seed: int = 7):
    rng = random.Random(seed)
    dimension = [(k, k % 97) for k in range(n_keys)]
    live: list = []
    epochs = []
    serial = 0
    for _ in range(n_updates // epoch_size):
        batch = []
        for _ in range(epoch_size):
            if live and rng.random() < 0.10:
                fact = live.pop(rng.randrange(len(live)))
                batch.append((fact, -1))
            else:
                serial += 1
                fact = (rng.randrange(n_keys), serial)
                live.append(fact)
                batch.append((fact, 1))
        epochs.append(batch)
    return dimension, epochs


def run_ddflow(dimension, epochs):
    df = ddflow.Dataflow()
    f_in, facts = df.new_collection("facts")
    d_in, dim = df.new_collection("dimension")
    cap = facts.join(dim).map(lambda kv: kv[1][1]).count().capture()
    for row in dimension:
        d_in.insert(row)
    d_in.advance_to(1)
    f_in.advance_to(1)
    load, _ = timed(df.run)
    latencies = []
    for epoch, batch in enumerate(epochs, start=1):
        def step():
            # Feeding the session is part of the cost a user pays per epoch.
            for fact, diff in batch:
                f_in.update(fact, diff)
            f_in.advance_to(epoch + 1)
            d_in.advance_to(epoch + 1)
            df.run()
        dt, _ = timed(step)
        latencies.append(dt)
    return load, latencies, cap.at(len(epochs)), df


def run_handwritten(dimension, epochs):
    group = dict(dimension)
    counts: Counter = Counter()
    latencies = []
    for batch in epochs:
        def step():
            for (key, _v), diff in batch:
                counts[group[key]] += diff
        dt, _ = timed(step)
        latencies.append(dt)
    return latencies, {(g, n): 1 for g, n in counts.items() if n}


def run_recompute(dimension, epochs):
    group = dict(dimension)
    facts: Counter = Counter()
    latencies = []
    result = {}
    for batch in epochs:
        for fact, diff in batch:
            facts[fact] += diff

        def step():
            per: dict = defaultdict(int)
            for (key, _v), m in facts.items():
                if m:
                    per[group[key]] += m
            return {(g, n): 1 for g, n in per.items() if n}
        dt, result = timed(step)
        latencies.append(dt)
    return latencies, result


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10x smaller workload")
    args = ap.parse_args(argv)
    n, epoch, keys = (10_000, 1_000, 1_000) if args.quick else (100_000, 1_000, 10_000)
    dimension, epochs = workload(n, epoch, keys)
    load, lat, answer, df = run_ddflow(dimension, epochs)
    hand_lat, hand_answer = run_handwritten(dimension, epochs)
    re_lat, re_answer = run_recompute(dimension, epochs)
    assert answer == hand_answer == re_answer, "ddflow disagrees with the baselines"
    total = sum(lat)
    result = {
        "updates": n, "epoch_size": epoch, "keys": keys,
        "dimension_load_s": load,
        "ddflow_updates_per_s": n / total,
        "ddflow_epoch_ms_median": 1000 * median(lat), "ddflow_epoch_ms_p90": 1000 * p90(lat),
        "handwritten_epoch_ms_median": 1000 * median(hand_lat),
        "recompute_epoch_ms_median": 1000 * median(re_lat),
        "ratio_vs_handwritten": median(lat) / median(hand_lat),
        "ratio_vs_recompute": median(lat) / median(re_lat),
        "work_per_update": df.total_work() / (n + keys),
    }
    print(table(f"join + count: {n:,} updates in epochs of {epoch:,}, {keys:,} keys, 10% deletes",
                ["engine", "updates/s", "epoch ms (median)", "epoch ms (p90)", "x ddflow"],
                [["ddflow (local, 1 worker)", n / total, 1000 * median(lat), 1000 * p90(lat), 1.0],
                 ["hand-written dicts", n / sum(hand_lat), 1000 * median(hand_lat),
                  1000 * p90(hand_lat), median(hand_lat) / median(lat)],
                 ["recompute per epoch", n / sum(re_lat), 1000 * median(re_lat),
                  1000 * p90(re_lat), median(re_lat) / median(lat)]]))
    print(f"wrote {save('join_count', result)}")
    return result


if __name__ == "__main__":
    main()
