"""Algorithms written with the fluent API: free functions over collections.

This package isolates computations *built from* operators, apart from the operators
themselves (`operators/`) and from the graph of a dataflow (`ddflow.dataflow`), as
networkx keeps `algorithms/` apart from `classes/` and differential dataflow keeps
`src/algorithms/graphs/` apart from `src/operators/`.  Nothing here
holds state: each function only wires operators and returns a collection.
"""

from ddflow.algorithms.graphs import (bfs, connected_components, k_core, propagate, reachability,
                                      strongly_connected, strongly_connected_components,
                                      transitive_closure)

__all__ = ["reachability", "bfs", "connected_components", "transitive_closure",
           "propagate", "strongly_connected", "strongly_connected_components", "k_core"]
