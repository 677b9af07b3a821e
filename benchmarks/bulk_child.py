"""One measurement of `bench_bulk`, run in a child process inside the tree measured.

`bench_bulk` runs this file with `PYTHONPATH` and the working directory set to the
tree measured (this checkout or a `git worktree` of the parent commit).  Tasks:

* `reach_load`: the initial load of `ddflow.algorithms.reachability` (edges and roots
  told one by one through the public API both trees have, one `run()`): its
  process CPU, the reached set's size and digest, and three RSS figures;
* `reach_networkx`: the same answer from scratch with networkx (`descendants` of
  every root), its CPU and the same RSS figures.

Memory: the child generates the workload itself (`bench_reachability.workload`,
this checkout's copy, from the seed), so nothing was read before `rss_base_mb`
(the RSS now), taken after the imports and before the edges exist.
`rss_workload_mb` (the RSS now, not the peak) is taken once the edge tuples exist
(what subtracting "the workload's own" used to mean); the high-water mark is then
reset (`rss.reset_peak`), so that `rss_peak_mb`, read at the end, is the peak
while the system holds the edges and works, not the generator's own (its sets of
drawn edges: `rss_child_peak_mb`, the peak of the whole child, keeps it).  The
system is then the only holder of the edge tuples (the workload's list is dropped
once they are told): `peak - base` counts them as its state, `peak - workload`
does not.

With `"traced": true` in the parameters, tracemalloc runs from the reset on and
`traced_peak_mb` is its peak of Python-allocated memory (numpy's arrays
included): a run of its own, since tracing slows the system several times.

    python -P benchmarks/bulk_child.py reach_load|reach_networkx PARAMS.json

prints one JSON object on stdout.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any


def _sibling(name: str) -> Any:
    """`benchmarks/<name>.py` of this checkout, loaded by path: the child runs with
    the tree measured on `PYTHONPATH`, whose `benchmarks` may be older."""
    spec = importlib.util.spec_from_file_location(f"_bench_{name}",
                                                  Path(__file__).resolve().parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_RSS = _sibling("rss")
_rss_mb, _rss_now_mb = _RSS.peak_mb, _RSS.now_mb


def _workload(p: dict) -> tuple[list, list, dict]:
    """The edges and roots of `p` (generated here), and the memory figures so far:
    the RSS before they existed and once they did; the peak is reset after (and
    tracemalloc started, when `p["traced"]`)."""
    module = _sibling("bench_reachability")
    rss_base = _rss_now_mb()
    edges, roots, _steps = module.workload(p["nodes"], p["edges"], p["roots"], 0, p["seed"])
    mem = {"rss_base_mb": rss_base, "rss_workload_mb": _rss_now_mb(),
           "rss_generator_peak_mb": _rss_mb(), "peak_reset": _RSS.reset_peak()}
    if p.get("traced"):
        tracemalloc.start()
    return edges, roots, mem


def _memory(mem: dict) -> dict:
    """`mem` (from `_workload`) with the peaks at the end."""
    out = dict(mem, rss_peak_mb=_rss_mb(),
               rss_child_peak_mb=max(_rss_mb(), mem["rss_generator_peak_mb"]))
    if tracemalloc.is_tracing():
        out["traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return out


def _digest(nodes: set) -> str:
    return hashlib.sha256(repr(sorted(nodes)).encode()).hexdigest()[:16]


def reach_load(p: dict) -> dict:
    import ddflow
    from ddflow.algorithms import reachability

    # Code loads on first use (the operators, numpy): run a two-edge dataflow first,
    # so the baseline holds it, as the networkx child's holds networkx.
    warm = ddflow.Dataflow()
    w_in, wc = warm.new_collection()
    v_in, vc = warm.new_collection()
    reachability(wc, vc).capture()
    w_in.insert((0, 1)); w_in.insert((1, 2)); v_in.insert(0)
    w_in.advance_to(1); v_in.advance_to(1)
    warm.run()
    del warm, w_in, wc, v_in, vc
    edges, roots, mem = _workload(p)
    df = ddflow.Dataflow()
    e_in, ec = df.new_collection("edges")
    r_in, rc = df.new_collection("roots")
    cap = reachability(ec, rc).capture()
    c0 = time.process_time()
    for e in edges:
        e_in.insert(e)
    del edges               # the dataflow holds the tuples it keeps
    for r in roots:
        r_in.insert(r)
    e_in.advance_to(1)
    r_in.advance_to(1)
    df.run()
    cpu = (time.process_time() - c0) * 1e3
    # Memory read before the answer is read out of the capture and digested (a
    # dict, a set and a sorted list of 188k nodes: the benchmark's checking, not
    # the system's state; 26 MB at main 3fe2bd1).  networkx's answer is the set
    # it computes, read the same way.
    memory = _memory(mem)
    reached = {d for d, _m in cap.at(0).items()}
    return {"ddflow": os.path.dirname(os.path.abspath(ddflow.__file__)), "cpu_ms": cpu,
            "answer": _digest(reached), "answer_size": len(reached), **memory}


def reach_networkx(p: dict) -> dict:
    import ddflow
    import networkx as nx

    edges, roots, mem = _workload(p)
    c0 = time.process_time()
    g = nx.DiGraph()
    g.add_edges_from(edges)
    del edges
    g.add_nodes_from(roots)
    reached = set(roots)
    for r in roots:
        reached |= nx.descendants(g, r)
    cpu = (time.process_time() - c0) * 1e3
    memory = _memory(mem)      # before the digest, as for the dataflow
    return {"ddflow": os.path.dirname(os.path.abspath(ddflow.__file__)), "cpu_ms": cpu,
            "answer": _digest(reached), "answer_size": len(reached), **memory}


def main() -> None:
    task, pfile = sys.argv[1], sys.argv[2]
    with open(pfile) as f:
        p = json.load(f)
    out: dict[str, Any] = {"reach_load": reach_load, "reach_networkx": reach_networkx}[task](p)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
