"""Benchmark: Datalog programs maintained by `ddflow.datalog` against from-scratch
semi-naive evaluation.

Four classic programs, each on generated input, loaded at epoch 0 and then changed
one fact per epoch (inserts, then deletes):

* transitive closure on a random graph of clusters (`tc`; clusters keep the
  closure's size linear in the graph's);
* same generation on a tree of fixed width per level (`sg`; Bancilhon, Ramakrishnan,
  "An amateur's introduction to recursive query processing strategies");
* Andersen-style points-to analysis on a generated program of address-of, copy,
  load and store statements (`pt`; Andersen, "Program analysis and specialization
  for the C programming language");
* a stratified query, nodes reachable from the roots and not downstream of a
  blocked node (`ok`; negation of a recursive relation, one stratum up).

For each: the initial load's process CPU time and work (`df.total_work()`), then per
one-fact change the median CPU time and work, against the median CPU time of a plain
semi-naive evaluator (Abiteboul, Hull, Vianu, "Foundations of Databases", section
13.1), written here with hash indexes, recomputing the whole model after the same
change; the ratio is measured in the same run.  The answers must agree after every
change.

Run from the repository root:

    python -m benchmarks.bench_datalog            # full sizes (a few minutes)
    python -m benchmarks.bench_datalog --quick    # small, for tests

It prints a table and writes JSON to `benchmarks/results/datalog.json` (`--out`).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks.common import standard_args

RESULTS = Path(__file__).resolve().parent / "results" / "datalog.json"

TC = """
tc(x, y) :- e(x, y).
tc(x, z) :- tc(x, y), e(y, z).
"""
SG = """
sg(x, y) :- par(x, p), par(y, p), x != y.
sg(x, y) :- par(x, a), sg(a, b), par(y, b).
"""
PT = """
pt(p, a) :- addr(p, a).
pt(p, a) :- assign(p, q), pt(q, a).
pt(p, a) :- load(p, q), pt(q, r), pt(r, a).
pt(r, a) :- store(p, q), pt(p, r), pt(q, a).
"""
OK = """
reach(x) :- root(x).
reach(y) :- reach(x), e(x, y).
bad(x) :- blocked(x).
bad(y) :- bad(x), e(x, y).
ok(x) :- reach(x), !bad(x).
"""

FULL = dict(tc_nodes=20000, tc_edges=60000, sg_levels=100, sg_width=30, pt_vars=3000,
            ok_nodes=20000, ok_edges=24000, changes=10)
QUICK = dict(tc_nodes=1000, tc_edges=3000, sg_levels=15, sg_width=8, pt_vars=300,
             ok_nodes=1000, ok_edges=1200, changes=4)


# -- inputs -------------------------------------------------------------------------------

def clustered_graph(nodes: int, edges: int, rng: random.Random, size: int = 10) -> set:
    out: set = set()
    while len(out) < edges:
        c = rng.randrange(nodes // size) * size
        a, b = c + rng.randrange(size), c + rng.randrange(size)
        if a != b:
            out.add((a, b))
    return out


def random_graph(nodes: int, edges: int, rng: random.Random) -> set:
    out: set = set()
    while len(out) < edges:
        a, b = rng.randrange(nodes), rng.randrange(nodes)
        if a != b:
            out.add((a, b))
    return out


def level_tree(levels: int, width: int, rng: random.Random) -> set:
    """par(child, parent): `width` nodes per level, each with a random parent one
    level up (node ids `level * width + k`)."""
    return {(lv * width + k, (lv - 1) * width + rng.randrange(width))
            for lv in range(1, levels) for k in range(width)}


def points_to_program(n: int, rng: random.Random) -> dict[str, set]:
    """Statements over `n` pointer variables and `n // 2` objects."""
    v = lambda: rng.randrange(n)      # noqa: E731 - a tiny local helper
    # 0.8 copies per variable: dense enough that points-to sets spread, sparse enough
    # (below the copy graph's giant component) that they do not cover everything.
    return {"addr": {(v(), n + rng.randrange(n // 2)) for _ in range(n // 2)},
            "assign": {(v(), v()) for _ in range(n * 4 // 5)},
            "load": {(v(), v()) for _ in range(n // 16)},
            "store": {(v(), v()) for _ in range(n // 16)}}


# -- from-scratch semi-naive evaluators ------------------------------------------------------

def _index(pairs: set, by: int = 0) -> dict:
    out: dict = defaultdict(set)
    for t in pairs:
        out[t[by]].add(t[1 - by])
    return out


def seminaive_tc(rel: dict) -> dict:
    succ = _index(rel["e"])
    tc = set(rel["e"])
    delta = tc
    while delta:
        new = {(x, z) for x, y in delta for z in succ.get(y, ())} - tc
        tc |= new
        delta = new
    return {"tc": tc}


def seminaive_sg(rel: dict) -> dict:
    par = rel["par"]
    children = _index(par, by=1)             # parent -> children
    sg = {(x, y) for p, kids in children.items() for x in kids for y in kids if x != y}
    delta = sg
    while delta:
        new = {(x, y) for a, b in delta for x in children.get(a, ())
               for y in children.get(b, ())} - sg
        sg |= new
        delta = new
    return {"sg": sg}


def seminaive_pt(rel: dict) -> dict:
    assign_by_src = _index(rel["assign"], by=1)    # q -> {p : p = q}
    load_by_src = _index(rel["load"], by=1)        # q -> {p : p = *q}
    store_by_p = _index(rel["store"])              # p -> {q : *p = q}
    store_by_q = _index(rel["store"], by=1)        # q -> {p : *p = q}
    pt: dict = defaultdict(set)
    pointed_by: dict = defaultdict(set)            # r -> {q : pt(q, r)}
    delta = set(rel["addr"])
    while delta:
        for p, a in delta:
            pt[p].add(a)
            pointed_by[a].add(p)
        new = set()
        for q, a in delta:
            for p in assign_by_src.get(q, ()):
                new.add((p, a))
            # pt(p, a) :- load(p, q), pt(q, r), pt(r, a): delta on either pt atom
            for p in load_by_src.get(q, ()):
                new.update((p, b) for b in pt.get(a, ()))
            for q2 in pointed_by.get(q, ()):
                for p in load_by_src.get(q2, ()):
                    new.add((p, a))
            # pt(r, a) :- store(p, q), pt(p, r), pt(q, a)
            for qq in store_by_p.get(q, ()):
                new.update((a, b) for b in pt.get(qq, ()))
            for p in store_by_q.get(q, ()):
                new.update((r, a) for r in pt.get(p, ()))
        delta = {t for t in new if t[1] not in pt.get(t[0], ())}
    return {"pt": {(p, a) for p, s in pt.items() for a in s}}


def seminaive_ok(rel: dict) -> dict:
    succ = _index(rel["e"])

    def closure(start: set) -> set:
        seen, delta = set(start), set(start)
        while delta:
            delta = {y for x in delta for y in succ.get(x, ())} - seen
            seen |= delta
        return seen
    reach = closure({x for (x,) in rel["root"]})
    bad = closure({x for (x,) in rel["blocked"]})
    return {"reach": {(x,) for x in reach}, "bad": {(x,) for x in bad},
            "ok": {(x,) for x in reach - bad}}


# -- the workloads ------------------------------------------------------------------------------

def workloads(config: dict, rng: random.Random) -> dict[str, tuple]:
    """name -> (program, input relations, fact pools to insert from, evaluator)."""
    n, m = config["tc_nodes"], config["tc_edges"]
    tc_in = {"e": clustered_graph(n, m, rng)}
    sg_in = {"par": level_tree(config["sg_levels"], config["sg_width"], rng)}
    pt_in = points_to_program(config["pt_vars"], rng)
    ok_nodes = config["ok_nodes"]
    ok_in = {"e": random_graph(ok_nodes, config["ok_edges"], rng),
             "root": {(k,) for k in range(0, ok_nodes, max(1, ok_nodes // 20))},
             "blocked": {(rng.randrange(ok_nodes),) for _ in range(max(1, ok_nodes // 100))}}
    w = config["sg_width"]
    pv = config["pt_vars"]
    return {
        f"transitive closure, {n:,} nodes / {m:,} edges in clusters of 10":
            (TC, tc_in, lambda: ("e", _fresh_pair(rng, tc_in["e"], n, 10)), seminaive_tc),
        f"same generation, tree of {config['sg_levels']} levels x {w}":
            (SG, sg_in, lambda: ("par", _tree_edge(rng, sg_in["par"], config["sg_levels"], w)),
             seminaive_sg),
        f"Andersen points-to, {pv:,} variables":
            (PT, pt_in, lambda: ("assign", _fresh_pair(rng, pt_in["assign"], pv, pv)),
             seminaive_pt),
        f"reachable and not blocked, {ok_nodes:,} nodes / {config['ok_edges']:,} edges":
            (OK, ok_in, lambda: ("e", _fresh_pair(rng, ok_in["e"], ok_nodes, ok_nodes)),
             seminaive_ok),
    }


def _fresh_pair(rng: random.Random, present: set, n: int, cluster: int) -> tuple:
    while True:
        c = rng.randrange(n // cluster) * cluster
        t = (c + rng.randrange(cluster), c + rng.randrange(cluster))
        if t[0] != t[1] and t not in present:
            return t


def _tree_edge(rng: random.Random, present: set, levels: int, width: int) -> tuple:
    while True:
        lv = rng.randrange(1, levels)
        t = (lv * width + rng.randrange(width), (lv - 1) * width + rng.randrange(width))
        if t not in present:
            return t


def changes(rel: dict, pool: Callable, count: int, rng: random.Random) -> list:
    """`count` inserts of absent facts, then `count` deletes of present ones."""
    live = {name: set(ts) for name, ts in rel.items()}
    steps = []
    for _ in range(count):
        name, fact = pool()
        live[name].add(fact)
        steps.append((name, fact, 1))
    for _ in range(count):
        name = steps[rng.randrange(len(steps))][0]
        fact = rng.choice(sorted(live[name]))
        live[name].discard(fact)
        steps.append((name, fact, -1))
    return steps


def measure(program: str, rel: dict, steps: list, evaluator: Callable) -> dict[str, Any]:
    import ddflow
    df = ddflow.Dataflow()
    sessions, colls = {}, {}
    for name in sorted(rel):
        sessions[name], colls[name] = df.new_collection(name)
    derived = ddflow.datalog(program, **colls)
    counts: dict = {name: defaultdict(int) for name in derived}

    def track(name: str) -> Callable:
        def f(update: tuple) -> None:
            data, _t, diff = update
            counts[name][data] += diff
        return f
    for name, coll in derived.items():
        # Counts kept as updates pass: reading the current set costs no replay.
        coll.inspect(track(name)).capture(name)

    def same(model: dict) -> bool:
        return all({d for d, c in counts[n].items() if c} == model[n] for n in model)
    start = time.process_time()
    for name, ts in rel.items():
        for t in ts:
            sessions[name].insert(t)
    for s in sessions.values():
        s.advance_to(1)
    df.run()
    load_s = time.process_time() - start
    load_work = df.total_work()
    start = time.process_time()
    model = evaluator(rel)
    scratch0_s = time.process_time() - start
    agree = same(model)
    live = {name: set(ts) for name, ts in rel.items()}
    ms, work, scratch_ms = [], [], []
    for epoch, (name, fact, diff) in enumerate(steps, start=1):
        w0 = df.total_work()
        start = time.process_time()
        sessions[name].update(fact, diff)
        for s in sessions.values():
            s.advance_to(epoch + 1)
        df.run()
        ms.append((time.process_time() - start) * 1e3)
        work.append(df.total_work() - w0)
        (live[name].add if diff > 0 else live[name].discard)(fact)
        start = time.process_time()
        model = evaluator(live)
        scratch_ms.append((time.process_time() - start) * 1e3)
        agree = agree and same(model)
    size = sum(len(model[n]) for n in model)
    change_ms = statistics.median(ms)
    return {"input_facts": sum(map(len, rel.values())), "derived_facts": size,
            "load_s": round(load_s, 3), "load_work": load_work,
            "scratch_load_s": round(scratch0_s, 3),
            "median_change_ms": round(change_ms, 3),
            "median_change_work": statistics.median(work),
            "max_change_work": max(work),
            "work_ratio": round(statistics.median(work) / max(1, load_work), 6),
            "median_scratch_ms": round(statistics.median(scratch_ms), 3),
            "speedup": round(statistics.median(scratch_ms) / max(change_ms, 1e-6), 1),
            "changes": len(steps), "agree": agree}


def table(rows: dict[str, dict]) -> str:
    head = (f"{'program':<66}{'derived':>9}{'load s':>8}{'load work':>11}{'ms/change':>10}"
            f"{'work/change':>12}{'scratch ms':>11}{'speedup':>9}  agree")
    lines = ["Datalog maintenance: one fact per epoch against from-scratch semi-naive "
             "(process CPU, medians)", head, "-" * len(head)]
    for label, r in rows.items():
        lines.append(f"{label:<66}{r['derived_facts']:>9,}{r['load_s']:>8.2f}"
                     f"{r['load_work']:>11,}{r['median_change_ms']:>10.2f}"
                     f"{r['median_change_work']:>12,}{r['median_scratch_ms']:>11.1f}"
                     f"{r['speedup']:>8.1f}x  {r['agree']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = standard_args("bench_datalog", __doc__, RESULTS, argv)
    config = dict(QUICK if args.quick else FULL, seed=args.seed, quick=args.quick)
    rng = random.Random(args.seed)
    rows = {}
    for label, (program, rel, pool, evaluator) in workloads(config, rng).items():
        steps = changes(rel, pool, config["changes"], rng)
        rows[label] = measure(program, rel, steps, evaluator)
        print(f"  measured {label}", flush=True)
    print(table(rows))
    result = {"benchmark": "datalog", "config": config, "programs": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
