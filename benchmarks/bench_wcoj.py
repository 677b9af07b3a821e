"""Benchmark: worst-case optimal triangle queries (delta, generic) against binary joins.

The workloads of issue 5, for `tri(x, y, z) :- g(x, y), g(y, z), g(x, z)`:

(a) Asymptotics on a skewed family: a star of `n` edges through one hub (half of
    them into it, half out of it, so the binary plan's first join `g(x, y), g(y, z)`
    meets `(n/2)^2` paths through the hub) plus a clique on `ceil(sqrt(n))` nodes
    (about `n^1.5 / 6` triangles).  For `n` doubling, the work of the initial load
    (`df.total_work()`: records into operators plus trace entries read) and the
    records held in arrangements (`trace_records` of `df.metrics()`), with the
    exponent fitted by least squares of `log work` against `log n`.  Delta queries
    should stay near the output bound (`<= ~1.5`), the binary plan near 2.  The
    binary plan stops at `binary_max` (its quadratic state does not fit further).
(b) Maintenance: a random graph (2,000 nodes, 10,000 edges) and a star of 1,000
    edges plus a 40-clique; an initial load, then 20 single-edge inserts and 20
    single-edge deletes, one per epoch: median ms per epoch per strategy.

Run from the repository root:

    python -m benchmarks.bench_wcoj            # the issue's sizes (a few minutes)
    python -m benchmarks.bench_wcoj --quick    # small, for tests

It prints tables and writes JSON to `benchmarks/results/wcoj.json` (`--out` to
change).  Timings depend on the machine; work and record counts do not.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from pathlib import Path
from typing import Any, Sequence

from benchmarks.common import standard_args

RESULTS = Path(__file__).resolve().parent / "results" / "wcoj.json"
TRI = "tri(x, y, z) :- g(x, y), g(y, z), g(x, z)"
STRATEGIES = ("delta", "generic", "binary")

FULL = dict(star_ns=[500, 1000, 2000, 4000, 8000, 16000], binary_max=2000,
            random_nodes=2000, random_edges=10000, star_n=1000, clique=40, changes=20)
QUICK = dict(star_ns=[250, 500, 1000, 2000], binary_max=1000,
             random_nodes=500, random_edges=2500, star_n=250, clique=20, changes=5)


# -- graphs -----------------------------------------------------------------------------

def star_clique(n: int, k: int) -> list[tuple[int, int]]:
    """`n` edges through hub `-1` (odd leaves point into it, even ones out of it), and a
    clique on `k` further nodes with edges from lower to higher."""
    hub = -1
    edges = [(i, hub) if i % 2 else (hub, i) for i in range(n)]
    nodes = range(n, n + k)
    return edges + [(a, b) for a in nodes for b in nodes if a < b]


def random_graph(nodes: int, edges: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    out: set = set()
    while len(out) < edges:
        a, b = rng.randrange(nodes), rng.randrange(nodes)
        if a != b:
            out.add((a, b))
    return sorted(out)


def changes(edges: list, nodes: Sequence[int], count: int, seed: int) -> list[tuple]:
    """`count` inserts of absent edges, then `count` deletes of present ones."""
    rng = random.Random(seed)
    live = set(edges)
    steps = []
    while len(steps) < count:
        e = (rng.choice(nodes), rng.choice(nodes))
        if e[0] != e[1] and e not in live:
            live.add(e)
            steps.append((e, 1))
    for e in rng.sample(sorted(live), count):
        steps.append((e, -1))
    return steps


# -- measuring ----------------------------------------------------------------------------

def _build(strategy: str):
    import ddflow
    from ddflow.query import query
    df = ddflow.Dataflow()
    g_in, g = df.new_collection("g")
    cap = query(TRI, g=g, strategy=strategy).capture()
    return df, g_in, cap


def _held(df: Any) -> int:
    return sum(r["trace_records"] for r in df.metrics())


def load(strategy: str, edges: list) -> dict[str, Any]:
    """Initial load: time, work, records held, triangles found."""
    from ddflow.query import wcoj_counters
    df, g_in, cap = _build(strategy)
    start = time.perf_counter()
    for e in edges:
        g_in.insert(e)
    g_in.advance_to(1)
    df.run()
    ms = (time.perf_counter() - start) * 1e3
    out = {"load_ms": round(ms, 1), "work": df.total_work(), "held": _held(df),
           "triangles": sum(cap.at(0).values())}
    if strategy != "binary":
        c = wcoj_counters(df)
        out.update({k: c[k] for k in ("proposed", "validated", "counted")})
    return out


def maintain(strategy: str, edges: list, steps: list) -> dict[str, Any]:
    """Initial load, then one epoch per change: ms and work per epoch."""
    df, g_in, cap = _build(strategy)
    start = time.perf_counter()
    for e in edges:
        g_in.insert(e)
    g_in.advance_to(1)
    df.run()
    load_ms = (time.perf_counter() - start) * 1e3
    ms, work = [], []
    for t, (e, diff) in enumerate(steps, start=1):
        w0 = df.total_work()
        start = time.perf_counter()
        g_in.update(e, diff)
        g_in.advance_to(t + 1)
        df.run()
        ms.append((time.perf_counter() - start) * 1e3)
        work.append(df.total_work() - w0)
    return {"load_ms": round(load_ms, 1),
            "median_ms_per_epoch": round(statistics.median(ms), 3),
            "median_ms_insert": round(statistics.median(ms[:len(ms) // 2]), 3),
            "median_ms_delete": round(statistics.median(ms[len(ms) // 2:]), 3),
            "median_work_per_epoch": statistics.median(work),
            "held": _held(df), "nodes": len(df.nodes),
            "final": sum(cap.at(len(steps)).values()), "_answer": cap.at(len(steps))}


def fit_exponent(ns: Sequence[int], ys: Sequence[float]) -> float | None:
    """Least-squares slope of `log y` against `log n`."""
    pts = [(math.log(n), math.log(y)) for n, y in zip(ns, ys) if y > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return round(sum((x - mx) * (y - my) for x, y in pts) / sxx, 3)


# -- the two parts ------------------------------------------------------------------------

def asymptotics(config: dict) -> dict[str, Any]:
    rows = []
    for n in config["star_ns"]:
        k = math.isqrt(n - 1) + 1
        edges = star_clique(n, k)
        row: dict[str, Any] = {"n": n, "clique": k, "edges": len(edges)}
        for strategy in STRATEGIES:
            if strategy == "binary" and n > config["binary_max"]:
                continue
            row[strategy] = load(strategy, edges)
        found = {row[s]["triangles"] for s in STRATEGIES if s in row}
        row["triangles"] = k * (k - 1) * (k - 2) // 6
        row["agree"] = found == {row["triangles"]}
        rows.append(row)
    fits = {}
    for strategy in STRATEGIES:
        pts = [(r["n"], r[strategy]["work"], r[strategy]["held"]) for r in rows if strategy in r]
        fits[strategy] = {"work_exponent": fit_exponent([p[0] for p in pts], [p[1] for p in pts]),
                          "held_exponent": fit_exponent([p[0] for p in pts], [p[2] for p in pts]),
                          "points": len(pts)}
    return {"rows": rows, "fits": fits}


def maintenance(config: dict, seed: int) -> dict[str, Any]:
    graphs = {
        f"random {config['random_nodes']} nodes / {config['random_edges']} edges":
            (random_graph(config["random_nodes"], config["random_edges"], seed),
             list(range(config["random_nodes"]))),
        f"star {config['star_n']} + {config['clique']}-clique":
            (star_clique(config["star_n"], config["clique"]),
             list(range(-1, config["star_n"] + config["clique"]))),
    }
    out = {}
    for label, (edges, nodes) in graphs.items():
        steps = changes(edges, nodes, config["changes"], seed + 1)
        res = {s: maintain(s, edges, steps) for s in STRATEGIES}
        answers = [res[s].pop("_answer") for s in STRATEGIES]
        out[label] = {"edges": len(edges), "epochs": len(steps), "strategies": res,
                      "agree": all(a == answers[0] for a in answers)}
    return out


# -- report ---------------------------------------------------------------------------------

def tables(result: dict[str, Any]) -> str:
    a = result["asymptotics"]
    lines = ["(a) triangle query, initial load, star of n edges through a hub + clique of "
             "ceil(sqrt(n)) nodes",
             f"{'n':>7}{'edges':>8}{'tri':>8} | "
             + " | ".join(f"{s + ' work':>13}{'held':>9}{'ms':>8}" for s in STRATEGIES)]
    for r in a["rows"]:
        cells = []
        for s in STRATEGIES:
            if s in r:
                cells.append(f"{r[s]['work']:>13}{r[s]['held']:>9}{r[s]['load_ms']:>8.0f}")
            else:
                cells.append(f"{'-':>13}{'-':>9}{'-':>8}")
        lines.append(f"{r['n']:>7}{r['edges']:>8}{r['triangles']:>8} | " + " | ".join(cells)
                     + ("" if r["agree"] else "   DISAGREE"))
    lines.append("fitted exponents (log work ~ log n; log held ~ log n): " + ", ".join(
        f"{s} {f['work_exponent']} / {f['held_exponent']} ({f['points']} pts)"
        for s, f in a["fits"].items()))
    lines.append("")
    lines.append("(b) triangle maintenance: initial load, then single-edge epochs "
                 "(inserts, then deletes)")
    lines.append(f"{'graph':<34}{'strategy':<9}{'load ms':>9}{'median ms/epoch':>17}"
                 f"{'ins':>8}{'del':>8}{'work/epoch':>12}{'held':>9}{'nodes':>7}")
    for label, g in result["maintenance"].items():
        for s, m in g["strategies"].items():
            lines.append(f"{label:<34}{s:<9}{m['load_ms']:>9.0f}{m['median_ms_per_epoch']:>17.3f}"
                         f"{m['median_ms_insert']:>8.3f}{m['median_ms_delete']:>8.3f}"
                         f"{m['median_work_per_epoch']:>12}{m['held']:>9}{m['nodes']:>7}")
        lines.append(f"{'':<34}strategies agree on the final triangles: {g['agree']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = standard_args("bench_wcoj", __doc__, RESULTS, argv)
    config = dict(QUICK if args.quick else FULL, seed=args.seed, quick=args.quick)
    result = {"benchmark": "wcoj", "config": config,
              "asymptotics": asymptotics(config),
              "maintenance": maintenance(config, args.seed)}
    print(tables(result))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
