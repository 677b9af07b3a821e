"""The driver's memory while a DataFrame input loads into ddflow on Spark.

Each size runs in a fresh driver process (so one size's garbage cannot hide in
another's): a SparkSession, a dataflow counting facts per key (1,000 keys), and a
warm-up step on a few rows so that every module is loaded; then the peak RSS is
reset (`/proc/self/clear_refs`) and the measured part runs: `insert_dataframe` of
N rows generated on the executors (`spark.range`), `run()`, and reading the answer
(`Capture.at`).  Reported: the driver process's peak RSS over its RSS before the
load, and the same for the JVM, which with a `local[...]` master is also the
executor (it caches the shards, so its growth is the executors' memory, not the
driver's).  The goal (issue 13): the driver's growth at 1M rows within 100 MB of
its growth at 100k.

Each size runs in a child (`spark_memory_child.py`); `--base REV` measures that
commit too, in a temporary worktree, interleaved with this one.

Run: `python -m benchmarks.bench_spark_driver_memory [--quick] [--sizes 100000,1000000]
[--base REV]`.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bench_engine_core import base_tree, run_child
from benchmarks.common import save, standard_args, table

RESULTS = Path(__file__).resolve().parent / "results" / "spark_driver_memory.json"
ROOT = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).resolve().parent / "spark_memory_child.py"


def _options(parser: Any) -> None:
    parser.add_argument("--sizes", help="comma-separated row counts (default 100000,1000000;"
                        " --quick: 10000,100000)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--base", help="also measure this commit (a temporary worktree), "
                        "interleaved with the current tree")


def main(argv: list[str] | None = None) -> dict:
    args = standard_args("bench_spark_driver_memory", __doc__, RESULTS, argv, _options)
    sizes = ([int(x) for x in args.sizes.split(",")] if args.sizes else
             [10_000, 100_000] if args.quick else [100_000, 1_000_000])
    trees = {"current": ROOT}
    with contextlib.ExitStack() as stack:
        if args.base:
            trees["base " + args.base] = stack.enter_context(base_tree(args.base))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="spark-mem-")))
        runs: dict[str, list] = {name: [] for name in trees}
        for n in sizes:
            for name, tree in trees.items():
                runs[name].append(run_child(tree, "load", {"size": n, "master": args.master},
                                            tmp, CHILD))
    mb = 1024 * 1024
    rows = [[name, r["size"], r["before"]["driver"] / mb, r["growth"]["driver"] / mb,
             r["before"]["jvm"] / mb, r["growth"]["jvm"] / mb, r["seconds"]]
            for name, rs in runs.items() for r in rs]
    print(table(f"Driver memory while a DataFrame input loads ({args.master}; MB; the JVM is "
                "also the executor in local mode)",
                ["tree", "rows", "driver RSS before", "driver peak growth", "JVM RSS before",
                 "JVM peak growth", "load+run+read s"], rows))
    result: dict = {"master": args.master, "runs": runs, "driver_growth_difference_mb": {}}
    for name, rs in runs.items():
        extra = (rs[-1]["growth"]["driver"] - rs[0]["growth"]["driver"]) / mb
        result["driver_growth_difference_mb"][name] = extra
        print(f"{name}: driver growth at {rs[-1]['size']:,} rows over {rs[0]['size']:,}: "
              f"{extra:+.1f} MB (goal: <= 100 MB)")
    print(f"wrote {save('spark_driver_memory', result, Path(args.out))}")
    return result


if __name__ == "__main__":
    main()
