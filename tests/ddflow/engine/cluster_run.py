"""The driver of the cluster tests, run by test_spark_cluster.py in its own process
(one SparkContext per process) against the standalone cluster its fixture started.

    python -m tests.ddflow.engine.cluster_run MASTER CHECKPOINT_DIR WORKER_PID... \
        [--scenarios a,b,...]

Prints one JSON line per scenario, `{"scenario": name, ...}` (`"error"` if it raised):

* `no_executor`: an application asking for more cores than any worker has gets an
  `EngineUnavailableError` naming the master within `executor_timeout`.
* `checkpoint_dir`: a cluster master needs `checkpoint_dir`; the engine works in its
  own subdirectory there and removes it at `stop()`, leaving the user's directory.
* `agree`: dataflows of `cases.CASES` give the local engine's output on the cluster;
  both executors ran tasks.
* `kill_state`: a join + count over a state of >= 100k records; while a task of a
  step's Spark job is running (seen through `sc.statusTracker()`), one executor of
  this application (by process ancestry: a descendant of a worker the fixture
  started, with this application's id on its command line) gets SIGKILL; every
  captured update must equal the local engine's.
* `kill_load`: the same, the executor killed while the job loading a DataFrame
  input (`insert_dataframe`) runs a task.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback

from tests.ddflow.engine.processes import descends_from, listening_pid, our_executors


class ExecutorKiller:
    """Kills one executor of this application while a job of `group` runs a task on it."""

    def __init__(self, sc, workers: set[int]) -> None:
        self.sc, self.workers = sc, workers
        self.tracker = sc.statusTracker()
        self.killed: dict | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def arm(self, group: str) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, args=(group,), daemon=True)
        self._thread.start()

    def disarm(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self, group: str) -> None:
        app = self.sc.applicationId
        while not self._stop.is_set() and self.killed is None:
            for job in self.tracker.getJobIdsForGroup(group):
                info = self.tracker.getJobInfo(job)
                if info is None or info.status != "RUNNING":
                    continue
                for stage_id in info.stageIds:
                    stage = self.tracker.getStageInfo(stage_id)
                    if stage is None or stage.numActiveTasks == 0:
                        continue
                    busy = [e.port for e in self.tracker.getExecutorInfos()
                            if e.numRunningTasks > 0]
                    ours = our_executors(self.workers, app)
                    for port in busy:
                        pid = listening_pid(port, ours)
                        if pid is not None and descends_from(pid, self.workers):
                            os.kill(pid, signal.SIGKILL)
                            self.killed = {"pid": pid, "job": job, "stage": stage.name,
                                           "active_tasks": stage.numActiveTasks,
                                           "executors_before": ours}
                            return
            time.sleep(0.003)


def _join_count(df):
    f_in, facts = df.new_collection("facts")
    d_in, dim = df.new_collection("dim")
    cap = facts.join(dim).map(lambda kv: kv[1][1]).count().capture()
    return f_in, d_in, cap


KEYS = 1000


def _facts_frame(spark, n: int):
    from pyspark.sql import functions as F
    return spark.range(n, numPartitions=4).select(
        ((F.col("id") * 7919) % KEYS).alias("k"), F.col("id").alias("v"))


def _facts(n: int) -> list:
    return [((i * 7919) % KEYS, i) for i in range(n)]


def _run_join_count(engine_factory, spark, n: int, changes: int, killer=None,
                    kill_at: str = "") -> dict:
    """Load n facts (a DataFrame on Spark, the same rows on the local engine), then
    `changes` one-fact steps; kill during the load or during the steps."""
    import ddflow
    engine = engine_factory()
    df = ddflow.Dataflow(engine=engine) if engine else ddflow.Dataflow(workers=2)
    f_in, d_in, cap = _join_count(df)
    for k in range(KEYS):
        d_in.insert((k, f"c{k % 10}"))
    if engine is not None:
        sc = spark.sparkContext
        sc.setJobGroup("ddflow-load", "load the facts")
        if kill_at == "load":
            killer.arm("ddflow-load")
        f_in.insert_dataframe(_facts_frame(spark, n))
        if kill_at == "load":
            killer.disarm()
    else:
        for fact in _facts(n):
            f_in.insert(fact)
    f_in.advance_to(1)
    d_in.advance_to(1)
    df.run()
    state = sum(r["trace_records"] for r in df.metrics())
    for step in range(changes):
        if step % 2:
            f_in.remove(((step * 7919) % KEYS, step))
        else:
            f_in.insert((step % KEYS, n + step))
        f_in.advance_to(step + 2)
        d_in.advance_to(step + 2)
        if engine is not None and kill_at == "state":
            spark.sparkContext.setJobGroup(f"ddflow-step-{step}", "a one-fact step")
            if killer.killed is None:
                killer.arm(f"ddflow-step-{step}")
            df.run()
            killer.disarm()
        else:
            df.run()
    out = {"updates": cap.updates, "state_records": state, "at_last": cap.at(changes)}
    if engine is not None:
        engine.stop()
    return out


def scenario_no_executor(master: str, **_kw) -> dict:
    from ddflow.engine.spark import make_session
    from ddflow.errors import EngineUnavailableError
    t0 = time.monotonic()
    try:
        make_session(master, app="ddflow-no-executor", executor_timeout=8,
                     conf={"spark.executor.cores": "4"})
    except EngineUnavailableError as exc:
        return {"raised": type(exc).__name__, "message": str(exc),
                "seconds": time.monotonic() - t0}
    return {"raised": None}


def scenario_checkpoint_dir(spark, base: str, **_kw) -> dict:
    import ddflow
    from ddflow.engine.spark import SparkEngine
    from ddflow.errors import EngineUnavailableError
    out: dict = {}
    df = ddflow.Dataflow(engine=SparkEngine(spark, shards=2))
    s, c = df.new_collection()
    c.capture()
    try:
        df.run()
        out["without"] = None
    except EngineUnavailableError as exc:
        out["without"] = str(exc)
    engine = SparkEngine(spark, shards=2, checkpoint_dir=base, checkpoint_every=1)
    df = ddflow.Dataflow(engine=engine)
    s, c = df.new_collection()
    cap = c.map(lambda x: x % 3).count().capture()
    for x in range(30):
        s.insert(x)
    s.advance_to(1)
    df.run()
    out["path"] = engine.checkpoint_path
    out["files_while_running"] = sum(len(f) for _d, _s, f in os.walk(engine.checkpoint_path))
    out["answer"] = sorted(cap.at(0).items())
    engine.stop()
    out["exists_after_stop"] = os.path.exists(out["path"])
    out["base_after_stop"] = os.path.isdir(base)
    return out


def scenario_agree(spark, base: str, workers: set[int], **_kw) -> dict:
    from hypothesis import HealthCheck, Phase, given, settings
    from ddflow.engine.spark import SparkEngine
    from ddflow.testing import evaluate
    from tests.ddflow.engine.cases import CASES
    checked = {}
    for name in ("join", "count", "reachability"):
        build, inputs = CASES[name]
        seen = []

        @settings(max_examples=3, derandomize=True, database=None, deadline=None,
                  phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(inputs)
        def check(inp):
            inp = [list(x) for x in inp]
            local = evaluate(build, inp)
            on_cluster = evaluate(build, inp, engine=lambda: SparkEngine(
                spark, shards=2, checkpoint_dir=base))
            assert on_cluster == local, (name, inp)
            seen.append(sum(len(x) for x in inp))
        check()
        checked[name] = seen
    sc = spark.sparkContext
    pids = set(sc.parallelize(range(16), 16).map(lambda _: os.getpid()).collect())
    ours = our_executors(workers, sc.applicationId)
    ran = sorted({e for p in pids for e in ours if descends_from(p, {e})})
    return {"checked": checked, "executors": ours, "executors_that_ran": ran}


def scenario_kill(spark, base: str, workers: set[int], where: str, **_kw) -> dict:
    from ddflow.engine.spark import SparkEngine
    n = 100_000 if where == "state" else 150_000
    changes = 6 if where == "state" else 2
    killer = ExecutorKiller(spark.sparkContext, workers)
    t0 = time.monotonic()
    on_spark = _run_join_count(lambda: SparkEngine(spark, shards=2, checkpoint_dir=base),
                               spark, n, changes, killer, where)
    seconds = time.monotonic() - t0
    local = _run_join_count(lambda: None, spark, n, changes)
    killed = killer.killed or {}
    return {"killed": killed,
            "killed_gone": bool(killed) and not os.path.exists(f"/proc/{killed['pid']}"),
            "executors_after": our_executors(workers, spark.sparkContext.applicationId),
            "agree": on_spark["updates"] == local["updates"],
            "answer_size": len(local["at_last"]), "state_records": on_spark["state_records"],
            "local_state_records": local["state_records"], "seconds": seconds}


def main(argv: list[str]) -> None:
    names = ["no_executor", "checkpoint_dir", "agree", "kill_state", "kill_load"]
    if "--scenarios" in argv:
        at = argv.index("--scenarios")
        names = argv[at + 1].split(",")
        argv = argv[:at] + argv[at + 2:]
    master, base = argv[0], argv[1]
    workers = {int(p) for p in argv[2:]}
    spark = None
    for name in names:
        t0 = time.monotonic()
        try:
            if name == "no_executor":
                result = scenario_no_executor(master)
            else:
                if spark is None:
                    from ddflow.engine.spark import make_session
                    spark = make_session(master, app="ddflow-cluster-test",
                                         executor_timeout=180)
                    from ddflow.engine.spark_session import wait_for_executors
                    wait_for_executors(spark.sparkContext, 180, count=len(workers))
                kw = {"base": base, "workers": workers}
                if name.startswith("kill_"):
                    result = scenario_kill(spark, where=name[len("kill_"):], **kw)
                else:
                    result = globals()[f"scenario_{name}"](spark, **kw)
        except Exception as exc:  # noqa: BLE001 - reported to the test, which fails
            result = {"error": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc()[-4000:]}
        result["scenario"] = name
        result["wall"] = round(time.monotonic() - t0, 1)
        print(json.dumps(result, default=repr), flush=True)
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
