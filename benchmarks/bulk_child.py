"""One measurement of `bench_bulk`, run in a child process inside the tree measured.

`bench_bulk` runs this file with `PYTHONPATH` and the working directory set to the
tree measured (this checkout or a `git worktree` of the parent commit).  Tasks:

* `reach_load`: the initial load of `ddflow.algorithms.reachability` (edges and roots
  told one by one through the public API both trees have, one `run()`): its
  process CPU, the reached set's size and digest, and peak RSS above the RSS after
  the workload was read (the state the dataflow holds, with its transients);
* `reach_networkx`: the same answer from scratch with networkx (`descendants` of
  every root), CPU and peak RSS above the workload's.

    python -P benchmarks/bulk_child.py reach_load|reach_networkx PARAMS.json

prints one JSON object on stdout.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
import time
from typing import Any


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _digest(nodes: set) -> str:
    return hashlib.sha256(repr(sorted(nodes)).encode()).hexdigest()[:16]


def reach_load(w: dict) -> dict:
    import ddflow
    from ddflow.algorithms import reachability

    edges = [tuple(e) for e in w["initial"]]
    roots = list(w["roots"])
    rss0 = _rss_mb()
    df = ddflow.Dataflow()
    e_in, ec = df.new_collection("edges")
    r_in, rc = df.new_collection("roots")
    cap = reachability(ec, rc).capture()
    c0 = time.process_time()
    for e in edges:
        e_in.insert(e)
    for r in roots:
        r_in.insert(r)
    e_in.advance_to(1)
    r_in.advance_to(1)
    df.run()
    cpu = (time.process_time() - c0) * 1e3
    reached = {d for d, _m in cap.at(0).items()}
    return {"ddflow": os.path.dirname(os.path.abspath(ddflow.__file__)), "cpu_ms": cpu,
            "answer": _digest(reached), "answer_size": len(reached),
            "rss_workload_mb": rss0, "rss_peak_mb": _rss_mb()}


def reach_networkx(w: dict) -> dict:
    import ddflow
    import networkx as nx

    edges = [tuple(e) for e in w["initial"]]
    roots = list(w["roots"])
    rss0 = _rss_mb()
    c0 = time.process_time()
    g = nx.DiGraph()
    g.add_edges_from(edges)
    g.add_nodes_from(roots)
    reached = set(roots)
    for r in roots:
        reached |= nx.descendants(g, r)
    cpu = (time.process_time() - c0) * 1e3
    return {"ddflow": os.path.dirname(os.path.abspath(ddflow.__file__)), "cpu_ms": cpu,
            "answer": _digest(reached), "answer_size": len(reached),
            "rss_workload_mb": rss0, "rss_peak_mb": _rss_mb()}


def main() -> None:
    task, pfile = sys.argv[1], sys.argv[2]
    with open(pfile) as f:
        p = json.load(f)
    with open(p["workload"]) as f:
        w = json.load(f)
    out: dict[str, Any] = {"reach_load": reach_load, "reach_networkx": reach_networkx}[task](w)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
