"""Reduce by history replay: the records a reduce reads follow the change, not the
history (its law is checked in test_oracle_reduce.py)."""

from __future__ import annotations

import ddflow
from ddflow.algorithms.graphs import connected_components


def _min_reads_after_one_edge(n: int) -> tuple[int, int, int]:
    """Connected components on a path of `n` nodes, then one edge adding a node at
    its end: for that change, the records the `min` reduce read (replayed and read
    at evaluations), the stored updates its traces read for it, and its output
    changes."""
    df = ddflow.Dataflow()
    edges_in, edges = df.new_collection()
    labels = connected_components(edges)
    out = labels.filter(lambda nl: nl[0] == n).capture()
    for i in range(n - 1):
        edges_in.insert((i, i + 1))
    edges_in.advance_to(1)
    df.run()
    node = next(nd for nd in df.nodes if nd.name == "connected_components.min")
    (red,) = df.engine.operators(node)
    traces = (red.source.trace, red.out_trace)
    reads_before = sum(t.history_reads for t in traces)
    before = {r["operator"]: r for r in df.metrics()}["connected_components.min"]
    edges_in.insert((n - 1, n))
    edges_in.advance_to(2)
    df.run()
    after = {r["operator"]: r for r in df.metrics()}["connected_components.min"]
    assert out.at(1) == {(n, 0): 1}      # the new node joins component 0
    return (after["work"] - before["work"], sum(t.history_reads for t in traces) - reads_before,
            after["records_out"] - before["records_out"])


def test_connected_components_path_reads_grow_linearly():
    """The new node's label falls by one per round, so the reduce's output changes
    grow linearly in the path length; the records it reads, and the stored updates
    read for it, grow by at most 2.5x per doubling (re-accumulating every key's
    history at every time read 4x)."""
    reads, stored, changes = zip(*[_min_reads_after_one_edge(n) for n in (50, 100, 200, 400)])
    for series in (reads, stored, changes):
        for small, big in zip(series, series[1:]):
            assert big <= 2.5 * small, series
