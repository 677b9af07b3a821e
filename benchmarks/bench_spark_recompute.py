"""ddflow on Spark against the plain PySpark recompute, in the same run and session.

The baseline is what a PySpark user writes without ddflow: keep the data as a
cached DataFrame plus the changes so far (rows with a `diff` column), and recompute
the answer from all of it after every change:

* join + count: facts `(k, v)` joined with a dimension `(k, cat)`, the number of
  facts per category: `facts.join(dim, "k").groupBy("cat").agg(sum("diff"))`;
* reachability from 3 roots along edges `(src, dst)`: the distinct current edges,
  then iterative DataFrame joins, one BFS level per iteration (semi-naive: only
  the nodes new at a level are joined again), each level made concrete with
  `localCheckpoint` so plans stay flat, until a level adds nothing.

Both recomputes live in the package (`ddflow.engine.spark_recompute`), so notebook 08
runs the same baseline this benchmark times.

ddflow gets the same data: the base through `insert_dataframe` (rows sharded on the
executors), the changes through its input sessions; its answer is read with
`Capture.at` after each `run()` (what moves is the change).  Per size: the initial
load, one-change steps (median of `--reps`), and a batch of 1,000 changes; after
each, the recompute of the same answer, and the two answers compared exactly.

Reported per step: wall-clock seconds (what the user waits), CPU seconds of the
whole process tree (driver, JVM, Python workers: the work, whoever does it), and
Spark jobs counted by Spark's own status tracker (one job group per measured step).
Sizes run in increasing order until the `--budget` (seconds, for the whole run) is
spent or the next size would not fit (projected from the last one); the largest
size that ran is stated.

Run: `python -m benchmarks.bench_spark_recompute [--quick] [--sizes 10000,100000]
[--budget 600] [--master local[2]]`.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from pathlib import Path
from typing import Any, Callable

import ddflow
from benchmarks.common import median, save, standard_args, table
from ddflow.algorithms.graphs import reachability
from ddflow.engine.spark_recompute import recompute_join_count, recompute_reachability

RESULTS = Path(__file__).resolve().parent / "results" / "spark_recompute.json"

ROOTS = (0, 1, 2)
BATCH = 1_000


# -- measuring ---------------------------------------------------------------------

def _ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0
    # utime, stime, cutime, cstime: fields 14-17 of stat (11-14 after the name).
    return sum(int(x) for x in fields[11:15])


def tree_ticks() -> dict[int, int]:
    """CPU ticks so far of this process and of every live process below it (the JVM
    and its Python workers), by pid."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    parents[int(entry)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except OSError:
                continue
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    mine, frontier = {os.getpid()}, [os.getpid()]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in mine:
                mine.add(child)
                frontier.append(child)
    return {p: _ticks(p) for p in mine}


def cpu_between(before: dict[int, int], after: dict[int, int]) -> float:
    """CPU seconds the process tree used between two `tree_ticks`: per process, the
    growth of its ticks (a process gone since counts nothing more; a new one counts
    all of its own)."""
    ticks = sum(max(0, t - before.get(p, 0)) for p, t in after.items())
    return ticks / os.sysconf("SC_CLK_TCK")


class Meter:
    """Wall seconds, process-tree CPU seconds and Spark jobs of one measured action.
    (CPU of a Python worker that exits during the action is lost: an undercount on
    either side, small next to the workers Spark keeps for reuse.)"""

    #: Job group numbers, unique in the process: the status tracker answers a group
    #: with every job ever run under its name, so a name reused by the next size's
    #: Meter (one session runs them all) counted the earlier sizes' jobs too.
    _groups = itertools.count(1)

    def __init__(self, spark: Any) -> None:
        self.sc = spark.sparkContext
        self.tracker = self.sc.statusTracker()

    def __call__(self, action: Callable[[], Any]) -> tuple[dict, Any]:
        group = f"bench-{next(Meter._groups)}"
        self.sc.setJobGroup(group, group)
        cpu, wall = tree_ticks(), time.perf_counter()
        value = action()
        wall, cpu = time.perf_counter() - wall, cpu_between(cpu, tree_ticks())
        jobs = len(self.tracker.getJobIdsForGroup(group))
        self.sc.setJobGroup("bench-idle", "untimed")
        return {"wall": wall, "cpu": cpu, "jobs": jobs}, value


# -- the data (the same formulas on the executors and here) -------------------------

def _src(i: int, nodes: int) -> int:
    return (i * 2654435761) % 4294967296 % nodes


def _dst(i: int, nodes: int) -> int:
    return (i * 1103515245 + 12345) % 2147483648 % nodes


def _key(i: int, keys: int) -> int:
    return (i * 2654435761) % 4294967296 % keys


def _unused(rng: random.Random, n: int, serial: list) -> int:
    """A base row not removed yet: each is removed at most once, so no record's
    multiplicity goes negative (where distinct and a recompute's filter would part)."""
    removed = serial[1]
    while True:
        i = rng.randrange(n)
        if i not in removed:
            removed.add(i)
            return i


class JoinCount:
    name = "join + count"

    def __init__(self, n: int) -> None:
        self.n, self.keys = n, max(10, n // 10)

    def base(self, spark: Any) -> Any:
        from pyspark.sql import functions as F
        return spark.range(self.n, numPartitions=4).select(
            (F.col("id") * 2654435761 % 4294967296 % self.keys).alias("k"),
            F.col("id").alias("v"))

    def dimension(self, spark: Any) -> Any:
        from pyspark.sql import functions as F
        return spark.range(self.keys, numPartitions=2).select(
            F.col("id").alias("k"), (F.col("id") % 97).alias("cat"))

    def changes(self, rng: random.Random, count: int, serial: list) -> list[tuple]:
        out = []
        for _ in range(count):
            if rng.random() < 0.5:
                i = _unused(rng, self.n, serial)
                out.append(((_key(i, self.keys), i), -1))
            else:
                serial[0] += 1
                out.append(((rng.randrange(self.keys), self.n + serial[0]), 1))
        return out

    def dataflow(self, df: Any) -> tuple:
        f_in, facts = df.new_collection("facts")
        d_in, dim = df.new_collection("dimension")
        cap = facts.join(dim).map(lambda kv: kv[1][1]).count().capture()
        return f_in, d_in, cap

    def load_other(self, session: Any, spark: Any) -> None:
        session.insert_dataframe(self.dimension(spark))

    def recompute(self, spark: Any, current: Any, extra: Any) -> Any:
        return recompute_join_count(current, extra)

    def recompute_answer(self, frame: Any) -> dict:
        return {(r["cat"], r["n"]): 1 for r in frame.collect()}

    def columns(self) -> str:
        return "k long, v long, diff long"


class Reachability:
    name = "reachability"

    def __init__(self, n: int) -> None:
        self.n, self.nodes = n, max(4, n // 2)

    def base(self, spark: Any) -> Any:
        from pyspark.sql import functions as F
        return spark.range(self.n, numPartitions=4).select(
            (F.col("id") * 2654435761 % 4294967296 % self.nodes).alias("src"),
            ((F.col("id") * 1103515245 + 12345) % 2147483648 % self.nodes).alias("dst"))

    def changes(self, rng: random.Random, count: int, serial: list) -> list[tuple]:
        out = []
        for _ in range(count):
            if rng.random() < 0.5:
                i = _unused(rng, self.n, serial)
                out.append(((_src(i, self.nodes), _dst(i, self.nodes)), -1))
            else:
                out.append(((rng.randrange(self.nodes), rng.randrange(self.nodes)), 1))
        return out

    def dataflow(self, df: Any) -> tuple:
        e_in, edges = df.new_collection("edges")
        r_in, roots = df.new_collection("roots")
        return e_in, r_in, reachability(edges, roots).capture()

    def load_other(self, session: Any, spark: Any) -> None:
        for r in ROOTS:
            session.insert(r)

    def recompute(self, spark: Any, current: Any, extra: Any) -> Any:
        return recompute_reachability(spark, current, ROOTS)

    def recompute_answer(self, frame: Any) -> dict:
        return {r["node"]: 1 for r in frame.collect()}

    def columns(self) -> str:
        return "src long, dst long, diff long"


# -- one workload at one size --------------------------------------------------------

def run_size(spark: Any, workload: Any, reps: int, seed: int) -> dict:
    from pyspark.sql import functions as F
    from ddflow.engine.spark import SparkEngine
    meter = Meter(spark)
    rng = random.Random(seed)
    engine = SparkEngine(spark, shards=2)
    df = ddflow.Dataflow(engine=engine)
    main_in, other_in, cap = workload.dataflow(df)
    base = workload.base(spark)
    extra = workload.dimension(spark).cache() if hasattr(workload, "dimension") else None
    if extra is not None:
        extra.count()

    def load() -> None:
        main_in.insert_dataframe(base)
        workload.load_other(other_in, spark)
        main_in.advance_to(1)
        other_in.advance_to(1)
        df.run()
    loaded, _ = meter(load)
    loaded["supersteps"] = engine.supersteps
    # The recompute's data: the base, cached (as the user would hold it), plus the
    # changes so far as rows with a diff.
    base_rows = base.withColumn("diff", F.lit(1)).cache()
    base_rows.count()
    changes: list[tuple] = []
    serial = [0, set()]          # new rows so far, base rows removed
    steps: dict[str, list] = {"one change": [], f"{BATCH:,} changes": []}
    time_now = 1
    plan = ["one change"] * reps + [f"{BATCH:,} changes"] * max(1, reps // 3)
    agree = True
    for kind in plan:
        batch = workload.changes(rng, 1 if kind == "one change" else BATCH, serial)
        changes.extend(batch)
        for data, diff in batch:
            main_in.update(data, diff)
        t = time_now
        time_now += 1
        main_in.advance_to(time_now)
        other_in.advance_to(time_now)

        def incremental() -> dict:
            df.run()
            return cap.at(t)
        before = engine.supersteps
        dd, answer = meter(incremental)
        dd["supersteps"] = engine.supersteps - before
        rows = [(*data, diff) for data, diff in changes]
        current = base_rows.unionByName(spark.createDataFrame(rows, workload.columns()))
        rc, frame = meter(lambda: workload.recompute(spark, current, extra))
        agree = agree and workload.recompute_answer(frame) == dict(answer)
        steps[kind].append({"ddflow": dd, "recompute": rc})
    engine.stop()
    base_rows.unpersist()
    if extra is not None:
        extra.unpersist()
    out = {"size": workload.n, "load": loaded, "agree": agree, "answer_size": len(answer)}
    for kind, runs in steps.items():
        out[kind] = {side: {m: median([r[side][m] for r in runs]) for m in ("wall", "cpu", "jobs")}
                     for side in ("ddflow", "recompute")}
        out[kind]["ddflow"]["jobs_max"] = max(r["ddflow"]["jobs"] for r in runs)
        out[kind]["ddflow"]["supersteps"] = median([r["ddflow"]["supersteps"] for r in runs])
        out[kind]["ratios"] = [r["recompute"]["wall"] / r["ddflow"]["wall"] for r in runs]
        out[kind]["runs"] = len(runs)
    return out


def _options(parser: Any) -> None:
    parser.add_argument("--sizes", help="comma-separated sizes (edges / facts); "
                        "default 10000,100000,1000000 (--quick: 2000)")
    parser.add_argument("--budget", type=float, default=600.0,
                        help="seconds for the whole run; larger sizes that would not fit "
                        "are not run (and said so)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--reps", type=int, default=3, help="one-change steps per size")


def main(argv: list[str] | None = None) -> dict:
    args = standard_args("bench_spark_recompute", __doc__, RESULTS, argv, _options)
    sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes else
             [2_000] if args.quick else [10_000, 100_000, 1_000_000])
    budget, reps = args.budget, args.reps
    own = {"--master": args.master}
    from ddflow.engine.spark import make_session
    spark = make_session(own["--master"], app="ddflow-bench-recompute")
    started = time.monotonic()
    result: dict = {"master": own["--master"], "budget_s": budget, "reps": reps,
                    "workloads": {}, "not_run": []}
    rows = []
    try:
        for cls in (JoinCount, Reachability):
            last = None
            for n in sizes:
                spent = time.monotonic() - started
                projected = last["seconds"] * n / last["size"] if last else 0.0
                if spent + projected > budget:
                    result["not_run"].append({"workload": cls.name, "size": n,
                                              "spent_s": spent, "projected_s": projected})
                    break
                t0 = time.monotonic()
                r = run_size(spark, cls(n), reps, args.seed)
                r["seconds"] = time.monotonic() - t0
                last = r
                result["workloads"].setdefault(cls.name, []).append(r)
                for kind in ("one change", f"{BATCH:,} changes"):
                    d, c = r[kind]["ddflow"], r[kind]["recompute"]
                    rows.append([cls.name, n, kind, d["wall"], d["jobs"], c["wall"], c["jobs"],
                                 c["wall"] / d["wall"], c["cpu"] / max(d["cpu"], 1e-9),
                                 "yes" if r["agree"] else "NO"])
    finally:
        spark.stop()
    print(table(f"ddflow on Spark vs plain PySpark recompute ({own['--master']}, same "
                "session; medians; speedup = recompute / ddflow)",
                ["workload", "size", "step", "ddflow s", "ddflow jobs", "recompute s",
                 "recompute jobs", "speedup wall", "speedup cpu", "same answer"], rows))
    for skipped in result["not_run"]:
        print(f"not run: {skipped['workload']} at {skipped['size']:,} (spent "
              f"{skipped['spent_s']:.0f} s, projected {skipped['projected_s']:.0f} s, "
              f"budget {budget:.0f} s)")
    print(f"wrote {save('spark_recompute', result, Path(args.out))}")
    return result


if __name__ == "__main__":
    main()
