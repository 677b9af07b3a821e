"""One measurement for `benchmarks.bench_introspection`, in a fresh interpreter whose
`PYTHONPATH` is the tree measured.  Prints one JSON object.  Times are process CPU
(`time.process_time`) around the timed region only."""

from __future__ import annotations

import json
import random
import sys
import time


def _graph(nodes: int, edges: int, seed: int) -> list:
    rng = random.Random(seed)
    out: set = set()
    while len(out) < edges:
        out.add((rng.randrange(nodes), rng.randrange(nodes)))
    return sorted(out)


def _reach(p: dict, mode: str = "plain"):
    import ddflow
    from ddflow.algorithms.graphs import reachability
    df = ddflow.Dataflow(timing=True) if mode == "timing" else ddflow.Dataflow()
    e_in, e = df.new_collection("edges")
    r_in, r = df.new_collection("roots")
    cap = reachability(e, r).capture()
    if mode == "logging":
        df.logging().activity.capture()
    edges = _graph(p["nodes"], p["edges"], p["seed"])
    for edge in edges:
        e_in.insert(edge)
    for x in range(5):
        r_in.insert(x)
    e_in.advance_to(1); r_in.advance_to(1)
    df.run()
    return df, cap, e_in, r_in, edges


def reach(p: dict) -> dict:
    df, _cap, e_in, r_in, edges = _reach(p, p["mode"])
    rng = random.Random(p["seed"] + 1)
    cuts = rng.sample(edges, p["changes"])
    times = []
    t = 1
    for edge in cuts + cuts:
        diff = -1 if t <= len(cuts) else 1
        e_in.update_at(edge, t, diff)
        t += 1
        e_in.advance_to(t); r_in.advance_to(t)
        start = time.process_time()
        df.run()
        times.append(time.process_time() - start)
    return {"epochs_ms": [x * 1e3 for x in times]}


def changes(p: dict) -> dict:
    from benchmarks.engine_core_child import captured_records
    _df, _s, cap = captured_records(p["records"], p["epochs"])
    cap.changes(0)          # builds the per-time index once
    scans, reads = [], []
    for e in range(0, p["epochs"], max(1, p["epochs"] // p["reads"])):
        start = time.process_time()
        a = [u for u in cap.updates if u[1] == e]
        scans.append(time.process_time() - start)
        start = time.process_time()
        b = cap.changes(e)
        reads.append(time.process_time() - start)
        assert a == b
    return {"scan_ms": [x * 1e3 for x in scans], "changes_ms": [x * 1e3 for x in reads]}


def explain(p: dict) -> dict:
    from ddflow.explain import input_contents, replay
    _df, cap, *_rest, edges = _reach(p)
    reached = cap.at(0)
    rng = random.Random(p["seed"] + 2)
    asked = rng.sample(sorted(reached), p["reads"])
    cpu, sizes = [], []
    for node in asked:
        start = time.process_time()
        ex = cap.explain(node)
        cpu.append(time.process_time() - start)
        sizes.append(len(ex.inputs["edges"]))
    start = time.process_time()
    replay(cap, input_contents(cap.node, 0))
    recompute = time.process_time() - start
    return {"explain_ms": [x * 1e3 for x in cpu], "sizes": sizes,
            "recompute_ms": recompute * 1e3, "edges": len(edges)}


def maintained(p: dict) -> dict:
    """One-edge epochs (as `reach`) with a maintained explanation of `questions`
    reached nodes (`df.explain`): CPU per epoch of the run that updates it, its work
    per epoch against the work of building it; and, on a twin dataflow without it,
    the plain epoch plus re-explaining the questions one-off after each run."""
    df, cap, e_in, r_in, edges = _reach(p)
    twin, tcap, te_in, tr_in, _edges = _reach(p)
    rng = random.Random(p["seed"] + 3)
    asked = rng.sample(sorted(cap.at(0)), p["questions"])
    start = time.process_time()
    mx = df.explain(cap)
    for q in asked:
        mx.questions.insert(q)
    for s in (e_in, r_in, mx.questions):
        s.advance_to(2)
    df.run()
    build_ms = (time.process_time() - start) * 1e3
    build_work = mx.work()
    te_in.advance_to(2); tr_in.advance_to(2); twin.run()
    cuts = random.Random(p["seed"] + 1).sample(edges, p["changes"])
    run_ms, work, oneoff_ms = [], [], []
    t = 2
    for i, edge in enumerate(cuts + cuts):
        diff = -1 if i < len(cuts) else 1
        before = mx.work()
        e_in.update_at(edge, t, diff); te_in.update_at(edge, t, diff)
        t += 1
        for s in (e_in, r_in, mx.questions, te_in, tr_in):
            s.advance_to(t)
        start = time.process_time()
        df.run()
        run_ms.append((time.process_time() - start) * 1e3)
        work.append(mx.work() - before)
        start = time.process_time()
        twin.run()
        now = tcap.at(t - 1)
        for q in asked:
            if q in now:
                tcap.explain(q, t - 1)
        oneoff_ms.append((time.process_time() - start) * 1e3)
    return {"build_ms": build_ms, "build_work": build_work, "run_ms": run_ms, "work": work,
            "oneoff_ms": oneoff_ms}


if __name__ == "__main__":
    task, pfile = sys.argv[1], sys.argv[2]
    with open(pfile) as f:
        params = json.load(f)
    import os
    import ddflow
    out = globals()[task](params)
    out["ddflow"] = os.path.dirname(os.path.realpath(ddflow.__file__))   # which tree ran
    print(json.dumps(out))
