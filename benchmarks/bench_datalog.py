"""Benchmark: Datalog programs maintained by `ddflow.datalog` against from-scratch
semi-naive evaluation.

Four classic programs, each on generated input, loaded at epoch 0 and then changed
one fact per epoch (inserts of absent facts, then deletes of present ones):

* transitive closure (`tc`) on a random graph of clusters of 10 nodes (clusters keep
  the closure's size linear in the graph's), and on uniform random DAGs of 2,000
  nodes / 6,000 edges (the size of the work goal: a one-fact change costs <= 1% of
  the load's work; column "max work" gives the worst of the changes) and of 8,000 /
  24,000, the largest random graph, where the speed goal is judged;
* same generation on a tree of fixed width per level (`sg`; Bancilhon, Ramakrishnan,
  "An amateur's introduction to recursive query processing strategies");
* Andersen-style points-to analysis on a generated program of address-of, copy,
  load and store statements (`pt`; Andersen, "Program analysis and specialization
  for the C programming language");
* a stratified query, nodes reachable from the roots and not downstream of a
  blocked node (`ok`; negation of a recursive relation, one stratum up).

For each: the initial load's process CPU time and work (`df.total_work()`), then per
one-fact change the CPU time and work (median and worst), against the median CPU
time of a plain semi-naive evaluator (Abiteboul, Hull, Vianu, "Foundations of
Databases", section 13.1), written here with hash indexes, recomputing the whole
model after the same change; the speedup is the ratio of the medians, measured in
the same run.  The answers must agree after every change.  Each timed region starts
from a frozen heap (`gc.freeze`), so that neither side's garbage collections walk
the other's objects.

Where from-scratch is dear: a change's cost follows what it changes, and the
from-scratch cost the whole model, so the sizes are chosen large enough for the
gap to show (the same generation tree is deep, 3,000 levels of 10 nodes: a change
retracts or adds about 2 x 9 pairs per descendant of the node it touches, and the
model has about 90 pairs per level).  The worst change is in the table too: a
change near the root of the tree, or a copy into the largest points-to set, changes
a good part of the model and can cost more than recomputing it.

Run from the repository root:

    python -m benchmarks.bench_datalog            # full sizes (~3 minutes of CPU)
    python -m benchmarks.bench_datalog --quick    # small, for tests

It prints a table and writes JSON to `benchmarks/results/datalog.json` (`--out`),
with every change's time and work.
"""

from __future__ import annotations

import gc
import json
import random
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

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

FULL = dict(tc_nodes=20000, tc_edges=60000, dag_sizes=[(2000, 6000), (8000, 24000)],
            sg_levels=3000, sg_width=10, pt_vars=4000, ok_nodes=40000, ok_edges=48000,
            changes=10)
QUICK = dict(tc_nodes=1000, tc_edges=3000, dag_sizes=[(300, 900)], sg_levels=40,
             sg_width=6, pt_vars=300, ok_nodes=1000, ok_edges=1200, changes=4)
SPEEDUP_GOAL = 20      # one-fact changes vs from-scratch, at each program's largest input
WORK_GOAL = 0.01       # a one-fact change's work vs the load's, on the 2,000-node DAG


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


def random_dag(nodes: int, edges: int, rng: random.Random) -> set:
    """`edges` distinct edges `(a, b)`, `a < b`, drawn uniformly from all such pairs:
    a uniform random DAG (its closure stays far below the square of the nodes that a
    uniform random digraph's giant strongly connected component gives)."""
    out: set = set()
    while len(out) < edges:
        a, b = sorted(rng.sample(range(nodes), 2))
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

class Workload(NamedTuple):
    program: str
    rel: dict                       # input relation name -> set of tuples
    pool: Callable[[], tuple]       # () -> (relation, an absent fact to insert)
    evaluator: Callable[[dict], dict]
    rng: random.Random              # draws this workload's changes


def workloads(config: dict, seed: int) -> dict[str, Workload]:
    """label -> workload.  Each draws from its own generator (seeded by `seed` and its
    name), so resizing one leaves the others' inputs and changes as they were."""
    def rng_for(name: str) -> random.Random:
        return random.Random(f"{seed}:{name}")

    out: dict[str, Workload] = {}
    n, m = config["tc_nodes"], config["tc_edges"]
    rng = rng_for("tc")
    tc_in = {"e": clustered_graph(n, m, rng)}
    out[f"transitive closure, {n:,} nodes / {m:,} edges in clusters of 10"] = Workload(
        TC, tc_in, lambda rng=rng: ("e", _fresh_pair(rng, tc_in["e"], n, 10)), seminaive_tc, rng)
    for dn, dm in config["dag_sizes"]:
        # The first size keeps the generator it always had, so its inputs do not move.
        rng = rng_for("dag" if dn == config["dag_sizes"][0][0] else f"dag{dn}")
        dag_in = {"e": random_dag(dn, dm, rng)}
        out[f"transitive closure, random DAG, {dn:,} nodes / {dm:,} edges"] = Workload(
            TC, dag_in, lambda rng=rng, dag_in=dag_in, dn=dn: (
                "e", fresh_forward_edge(rng, dag_in["e"], dn)), seminaive_tc, rng)
    levels, w = config["sg_levels"], config["sg_width"]
    rng = rng_for("sg")
    sg_in = {"par": level_tree(levels, w, rng)}
    out[f"same generation, tree of {levels:,} levels x {w}"] = Workload(
        SG, sg_in, lambda rng=rng: ("par", _tree_edge(rng, sg_in["par"], levels, w)),
        seminaive_sg, rng)
    pv = config["pt_vars"]
    rng = rng_for("pt")
    pt_in = points_to_program(pv, rng)
    out[f"Andersen points-to, {pv:,} variables"] = Workload(
        PT, pt_in, lambda rng=rng: ("assign", _fresh_pair(rng, pt_in["assign"], pv, pv)),
        seminaive_pt, rng)
    on, om = config["ok_nodes"], config["ok_edges"]
    rng = rng_for("ok")
    ok_in = {"e": random_graph(on, om, rng),
             "root": {(k,) for k in range(0, on, max(1, on // 20))},
             "blocked": {(rng.randrange(on),) for _ in range(max(1, on // 100))}}
    out[f"reachable and not blocked, {on:,} nodes / {om:,} edges"] = Workload(
        OK, ok_in, lambda rng=rng: ("e", _fresh_pair(rng, ok_in["e"], on, on)), seminaive_ok,
        rng)
    return out


def fresh_forward_edge(rng: random.Random, present: set, n: int) -> tuple:
    """An edge `(a, b)`, `a < b < n`, not in `present`: an insert that keeps a DAG."""
    while True:
        a, b = sorted(rng.sample(range(n), 2))
        if (a, b) not in present:
            return a, b


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


def _cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Process CPU seconds of `fn()`, and its value.  The heap is frozen first
    (`gc.freeze`), so a collection during `fn` scans what `fn` allocated, not the
    other side's heap: the dataflow's traces are millions of objects, and without
    this the scratch evaluator's collections walked them (a third of its time)."""
    gc.freeze()
    start = time.process_time()
    value = fn()
    return time.process_time() - start, value


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

    def load() -> None:
        for name, ts in rel.items():
            for t in ts:
                sessions[name].insert(t)
        for s in sessions.values():
            s.advance_to(1)
        df.run()

    def step(epoch: int, name: str, fact: tuple, diff: int) -> Callable[[], None]:
        def run() -> None:
            sessions[name].update(fact, diff)
            for s in sessions.values():
                s.advance_to(epoch + 1)
            df.run()
        return run
    try:
        load_s, _ = _cpu(load)
        load_work = df.total_work()
        scratch0_s, model = _cpu(lambda: evaluator(rel))
        agree = same(model)
        live = {name: set(ts) for name, ts in rel.items()}
        ms, work, scratch_ms = [], [], []
        for epoch, (name, fact, diff) in enumerate(steps, start=1):
            w0 = df.total_work()
            s, _ = _cpu(step(epoch, name, fact, diff))
            ms.append(s * 1e3)
            work.append(df.total_work() - w0)
            (live[name].add if diff > 0 else live[name].discard)(fact)
            s, model = _cpu(lambda: evaluator(live))
            scratch_ms.append(s * 1e3)
            agree = agree and same(model)
    finally:
        gc.unfreeze()
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
            "changes": len(steps), "agree": agree,
            "change_ms": [round(x, 3) for x in ms], "change_work": work,
            "scratch_ms": [round(x, 3) for x in scratch_ms]}


def table(rows: dict[str, dict]) -> str:
    head = (f"{'program':<62}{'derived':>9}{'load s':>8}{'load work':>11}{'ms/change':>10}"
            f"{'max ms':>9}{'work/change':>12}{'max work':>10}{'scratch ms':>11}"
            f"{'speedup':>9}  agree")
    lines = ["Datalog maintenance: one fact per epoch against from-scratch semi-naive "
             "(process CPU; medians, and the worst change; max work as % of the load's)",
             head, "-" * len(head)]
    for label, r in rows.items():
        share = 100 * r["max_change_work"] / max(1, r["load_work"])
        lines.append(f"{label:<62}{r['derived_facts']:>9,}{r['load_s']:>8.2f}"
                     f"{r['load_work']:>11,}{r['median_change_ms']:>10.2f}"
                     f"{max(r['change_ms']):>9.1f}{r['median_change_work']:>12,}"
                     f"{share:>9.3f}%{r['median_scratch_ms']:>11.1f}"
                     f"{r['speedup']:>8.1f}x  {r['agree']}")
    return "\n".join(lines)


def goals(rows: dict[str, dict], config: dict) -> list[dict[str, Any]]:
    """The issue's goals, judged on the rows: a one-fact change's work on the
    2,000-node random DAG (the first DAG size) <= 1% of the load's, worst change
    included; and per workload (a program on one kind of input: transitive closure
    on clustered graphs and on random DAGs are two) one-fact changes >= 20x faster
    than from-scratch at its largest input."""
    out = []
    dn, dm = config["dag_sizes"][0]
    row = rows[f"transitive closure, random DAG, {dn:,} nodes / {dm:,} edges"]
    share = row["max_change_work"] / max(1, row["load_work"])
    out.append({"goal": f"work per change <= {WORK_GOAL:.0%} of the load's, random DAG "
                        f"{dn:,} / {dm:,} (worst change)",
                "measured": f"{share:.3%}", "met": share <= WORK_GOAL})
    largest: dict[str, tuple[int, str]] = {}
    for label, r in rows.items():
        kind = re.sub(r"\d[\d,]*", "#", label)      # the label without its sizes
        if kind not in largest or r["input_facts"] > largest[kind][0]:
            largest[kind] = (r["input_facts"], label)
    for _, label in largest.values():
        r = rows[label]
        out.append({"goal": f"changes >= {SPEEDUP_GOAL}x from-scratch at the largest input: "
                            f"{label}",
                    "measured": f"{r['speedup']:.1f}x", "met": r["speedup"] >= SPEEDUP_GOAL})
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = standard_args("bench_datalog", __doc__, RESULTS, argv)
    config = dict(QUICK if args.quick else FULL, seed=args.seed, quick=args.quick)
    rows = {}
    for label, w in workloads(config, args.seed).items():
        steps = changes(w.rel, w.pool, config["changes"], w.rng)
        rows[label] = measure(w.program, w.rel, steps, w.evaluator)
        print(f"  measured {label}", flush=True)
    print(table(rows))
    judged = goals(rows, config)
    print("\nthe issue's goals" + ("" if not args.quick else " (quick sizes: not the goal's)"))
    for g in judged:
        print(f"  {'met' if g['met'] else 'NOT met':>7}  {g['measured']:>8}  {g['goal']}")
    result = {"benchmark": "datalog", "config": config, "programs": rows, "goals": judged}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
