"""Graph algorithms as iterative dataflows: reachability, BFS, components, closure, SCC.

This module isolates graph computations written with the fluent API (`Collection`):
each function wires `iterate` loops of joins and reductions and returns a collection;
it keeps no state and knows no engine.  Left out: weighted paths and
bidirectional Dijkstra.  Label propagation (components, SCC) is round-scheduled as
differential dataflow's `propagate_at` is (`ROUND_SCHEDULING`): which changes how
much work is done, not the answers.

Conventions shared by every function:

* a graph is a collection of edges `(src, dst)`, directed, read as a set (duplicate
  edges do not change any answer);
* nodes are hashable and, where labels are minimums, mutually orderable (ints, or
  strings, not both);
* the answers are *exact* at every time of the outer lattice, ints or `Product`
  times, and the functions may be called inside a loop scope (the edges and roots
  then live in that scope, and the algorithm's loops nest one level deeper).  Each
  loop is an ordinary `iterate`, so `Dataflow.loop_rows()` shows its rounds and a
  loop that does not converge raises `ConvergenceError` naming it.

Why it is incremental: every loop keeps its traces at `Product(outer, round)` times
(McSherry, Murray, Isaacs, Isard: "Differential dataflow", CIDR 2013), so when an edge changes at a later outer time, each round
only redoes the work that change causes in that round.  This is what differential
dataflow's `algorithms/graphs` modules (bfs.rs, propagate.rs, scc.rs) rely on, and the
names here follow them.  A node's answer at round `r` is the answer of the
`r`-bounded problem (paths of at most `r` edges) on the *current* graph, which is why
deleting an edge that cut a cycle off its root cannot leave the cycle propping itself
up (no "count to infinity"): each round is recomputed from the one before it at the
same outer time.

Sources: differential dataflow, `src/algorithms/graphs/{bfs,propagate,scc}.rs`
(https://github.com/TimelyDataflow/differential-dataflow), whose names are kept;
the differential dataflow book, section 5.1 "Graph Computation" (label
propagation); McSherry, Murray, Isaacs, Isard, "Differential dataflow", CIDR 2013
(incrementally updated strongly connected components, the doubly nested loop).

>>> import ddflow
>>> df = ddflow.Dataflow()
>>> edges_in, edges = df.new_collection()
>>> roots_in, roots = df.new_collection()
>>> reach = reachability(edges, roots).capture()
>>> for e in [(1, 2), (2, 3), (3, 2)]:
...     edges_in.insert(e)
>>> roots_in.insert(1)
>>> edges_in.advance_to(1); roots_in.advance_to(1); df.run()
>>> edges_in.remove((1, 2))           # cuts the cycle 2 <-> 3 off the root
>>> edges_in.advance_to(2); roots_in.advance_to(2); df.run()
>>> reach.updates
[(1, 0, 1), (2, 0, 1), (2, 1, -1), (3, 0, 1), (3, 1, -1)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ddflow.collection import Collection

#: The loops' guard, as `Collection.iterate`'s: these loops all converge (each is a
#: monotone fixpoint in its rounds), but a guard turns an engine bug into an error.
MAX_ROUNDS = 10_000

#: Whether components and SCC propagate labels round-scheduled (`propagate_at`, a
#: label entering at a round that grows with it) or all at round 0 (`propagate`).
#: Same answers; tests run both.  Measured on the interactive IR workload
#: (`benchmarks/bench_graph_workloads.py`): see `propagate_at`.
ROUND_SCHEDULING = True
#: Rounds between the entries of labels of consecutive bit lengths: differential
#: dataflow's `propagate_at` uses 256 (a label's flood usually ends before the next
#: bit length enters; if not, the answers are the same, only more work is done).
ROUND_STEP = 256
#: Bit lengths past this enter together (keeps entry rounds below the loop guard).
_MAX_BITS = 64


def entry_round(label: Any) -> int:
    """The round at which `propagate_at` lets a node with `label` enter: `ROUND_STEP`
    times the label's bit length for a non-negative int, round 0 for any other label
    (which then propagates as in `propagate`).

    >>> entry_round(0), entry_round(1), entry_round(5), entry_round("a")
    (0, 256, 768, 0)
    """
    if type(label) is int and label >= 0:
        return ROUND_STEP * min(label.bit_length(), _MAX_BITS)
    return 0


def _never(_record: Any) -> bool:
    return False


def _dst(kv: tuple) -> Any:
    return kv[1]


def _dst_columns(c: Any) -> Any:
    from ddflow.column_batch import field
    return field(c, 1)


# Record columns of edges (a load's semijoin output) map to their targets' column
# without a tuple per edge (`operators.linear.Linear.takes_columns`).
_dst.on_columns = _dst_columns  # type: ignore[attr-defined]


def _swap(e: tuple) -> tuple:
    return (e[1], e[0])


def _self_labels(e: tuple) -> tuple:
    """Both endpoints of an edge, each labelled by itself."""
    return ((e[0], e[0]), (e[1], e[1]))


def reachability(edges: Collection, roots: Collection, *, max_rounds: int | None = MAX_ROUNDS,
                 name: str = "reachability") -> Collection:
    """The nodes reachable from `roots` along `edges` (each root reaches itself).

    The fixpoint, starting from the roots:

        reached = distinct(roots + { dst : (src, dst) in edges, src in reached })

    At round `r` the loop holds the nodes within `r` edges of a root, so it takes
    as many rounds as the longest shortest path.  `distinct` makes the result a set
    (each reached node once), which `semijoin` needs of its keys.  It is
    differential dataflow's `bfs.rs` without the distances: a `semijoin` of the
    edges with the reached set instead of a `join_map` and a `min`.

    >>> import ddflow
    >>> df = ddflow.Dataflow()
    >>> edges_in, edges = df.new_collection()
    >>> roots_in, roots = df.new_collection()
    >>> out = reachability(edges, roots).capture()
    >>> for e in [(1, 2), (2, 3), (3, 1), (4, 5)]:
    ...     edges_in.insert(e)
    >>> roots_in.insert(1)
    >>> edges_in.advance_to(1); roots_in.advance_to(1); df.run()
    >>> roots_in.insert(4)
    >>> edges_in.advance_to(2); roots_in.advance_to(2); df.run()
    >>> out.updates
    [(1, 0, 1), (2, 0, 1), (3, 0, 1), (4, 1, 1), (5, 1, 1)]
    """
    def step(reached: Collection) -> Collection:
        scope = reached.scope
        return (edges.enter(scope).semijoin(reached).map(_dst, name=f"{name}.dst")
                .concat(roots.enter(scope)).distinct(name=f"{name}.distinct"))

    return roots.iterate(step, max_rounds=max_rounds, name=name)


def bfs(edges: Collection, roots: Collection, *, max_rounds: int | None = MAX_ROUNDS,
        name: str = "bfs") -> Collection:
    """`(node, distance)`: the number of edges on a shortest path from any root.

    The fixpoint, starting from every root at distance 0:

        dist = min_by_node((root, 0) for roots  +  (dst, d + 1) for (src, d) in dist,
                                                                   (src, dst) in edges)

    At round `r`, `dist` holds the distances of the nodes within `r` edges of a
    root: the Bellman-Ford rounds of breadth-first search.  Differential dataflow's
    `algorithms/graphs/bfs.rs` (`join_map` then `reduce` keeping the least
    distance), here with `min`.  Unreachable nodes are absent.

    >>> import ddflow
    >>> df = ddflow.Dataflow()
    >>> edges_in, edges = df.new_collection()
    >>> roots_in, roots = df.new_collection()
    >>> out = bfs(edges, roots).capture()
    >>> for e in [(1, 2), (2, 3), (3, 4), (1, 4)]:
    ...     edges_in.insert(e)
    >>> roots_in.insert(1)
    >>> edges_in.advance_to(1); roots_in.advance_to(1); df.run()
    >>> edges_in.remove((1, 4))           # 4 is now three edges away
    >>> edges_in.advance_to(2); roots_in.advance_to(2); df.run()
    >>> out.updates
    [((1, 0), 0, 1), ((2, 1), 0, 1), ((3, 2), 0, 1), ((4, 1), 0, 1), ((4, 1), 1, -1), ((4, 3), 1, 1)]
    """
    nodes = roots.map(lambda n: (n, 0), name=f"{name}.roots")

    def step(dist: Collection) -> Collection:
        scope = dist.scope
        return (dist.join_map(edges.enter(scope), lambda _src, d, dst: (dst, d + 1),
                              name=f"{name}.hop")
                .concat(nodes.enter(scope)).min(name=f"{name}.min"))

    return nodes.iterate(step, max_rounds=max_rounds, name=name)


def propagate(edges: Collection, nodes: Collection, *, max_rounds: int | None = MAX_ROUNDS,
              name: str = "propagate") -> Collection:
    """`(node, label)`: the least label of any `(source, label)` in `nodes` from
    whose source there is a path (of zero or more `edges`) to `node`.

    The fixpoint, starting from `nodes`:

        labels = min_by_node(nodes + (dst, l) for (src, l) in labels, (src, dst) in edges)

    Differential dataflow's `algorithms/graphs/propagate.rs` ("propagates labels
    forward, retaining the minimum label"), in its plain form: all labels enter at
    round 0 (its `propagate_at` staggers them to do less work; same answer).

    >>> import ddflow
    >>> df = ddflow.Dataflow()
    >>> edges_in, edges = df.new_collection()
    >>> nodes_in, nodes = df.new_collection()
    >>> out = propagate(edges, nodes).capture()
    >>> for e in [(1, 2), (2, 3)]:
    ...     edges_in.insert(e)
    >>> for n in [(2, "b"), (1, "z")]:
    ...     nodes_in.insert(n)
    >>> edges_in.close(); nodes_in.close(); df.run()
    >>> out.updates
    [((1, 'z'), 0, 1), ((2, 'b'), 0, 1), ((3, 'b'), 0, 1)]
    """
    def step(labels: Collection) -> Collection:
        scope = labels.scope
        return (labels.join_map(edges.enter(scope), lambda _src, label, dst: (dst, label),
                                name=f"{name}.hop")
                .concat(nodes.enter(scope)).min(name=f"{name}.min"))

    return nodes.iterate(step, max_rounds=max_rounds, name=name)


def _label_round(node_label: tuple) -> int:
    return entry_round(node_label[1])


def propagate_at(edges: Collection, nodes: Collection, *,
                 max_rounds: int | None = MAX_ROUNDS,
                 name: str = "propagate_at") -> Collection:
    """`propagate`, with each `(source, label)` of `nodes` entering the loop at round
    `entry_round(label)` instead of round 0: small labels flood first, and a larger
    label entering later is beaten at once where a smaller one has already arrived,
    so it travels only where it will stay.  Differential dataflow's `propagate_at`
    (`algorithms/graphs/propagate.rs`), as the interactive IR's `cc.ddp` / `scc.ddp`
    use it with `enter_at`.  The loop starts empty; the guard `max_rounds` counts
    from the last entry round.

    Why it is less work: with every label at round 0, the answer at round `r` is the
    least label within `r` hops, and an edge change moves it for every node and
    round it reaches; scheduled, the rounds before a label's entry hold only the
    smaller labels' floods, so a change moves the few labels whose path it is on.
    Answers are those of `propagate` (at the fixpoint every label has entered).

    >>> import ddflow
    >>> df = ddflow.Dataflow()
    >>> edges_in, edges = df.new_collection()
    >>> nodes_in, nodes = df.new_collection()
    >>> out = propagate_at(edges, nodes).capture()
    >>> for e in [(1, 2), (2, 3), (3, 1)]:
    ...     edges_in.insert(e)
    >>> for n in [(1, 5), (2, 2), (3, 9)]:
    ...     nodes_in.insert(n)
    >>> edges_in.close(); nodes_in.close(); df.run()
    >>> out.updates
    [((1, 2), 0, 1), ((2, 2), 0, 1), ((3, 2), 0, 1)]
    """
    def step(labels: Collection) -> Collection:
        scope = labels.scope
        return (labels.join_map(edges.enter(scope), lambda _src, label, dst: (dst, label),
                                name=f"{name}.hop")
                .concat(nodes.enter_at(scope, _label_round, name=f"{name}.enter_at"))
                .min(name=f"{name}.min"))

    guard = None if max_rounds is None else max_rounds + ROUND_STEP * _MAX_BITS
    return nodes.filter(_never, name=f"{name}.empty").iterate(step, max_rounds=guard,
                                                              name=name)


def _propagate(edges: Collection, nodes: Collection, max_rounds: int | None,
               name: str) -> Collection:
    """Label propagation as `ROUND_SCHEDULING` says (read when the dataflow is built)."""
    if ROUND_SCHEDULING:
        return propagate_at(edges, nodes, max_rounds=max_rounds, name=name)
    return propagate(edges, nodes, max_rounds=max_rounds, name=name)


def connected_components(edges: Collection, *, max_rounds: int | None = MAX_ROUNDS,
                         name: str = "connected_components") -> Collection:
    """`(node, label)` for every endpoint of `edges`: the label is the least node of
    its connected component, edges read as undirected.

    Label propagation: every node starts labelled by its own id, and each round
    takes the least label over itself and its neighbours (both directions):
    `propagate` over the symmetric closure of `edges`.  At round `r` a node holds
    the least id within `r` hops, so the loop runs for about the largest component
    diameter.  This is the graph connectivity example of the differential dataflow
    book (section 5.1, "Graph Computation"); networkx's `connected_components` is
    the oracle in the tests.

    >>> import ddflow
    >>> df = ddflow.Dataflow()
    >>> edges_in, edges = df.new_collection()
    >>> out = connected_components(edges).capture()
    >>> for e in [(1, 2), (3, 2), (4, 3), (6, 5)]:
    ...     edges_in.insert(e)
    >>> edges_in.advance_to(1); df.run()
    >>> edges_in.remove((3, 2))           # splits {1, 2, 3, 4} into {1, 2} and {3, 4}
    >>> edges_in.advance_to(2); df.run()
    >>> out.updates
    [((1, 1), 0, 1), ((2, 1), 0, 1), ((3, 1), 0, 1), ((3, 1), 1, -1), ((3, 3), 1, 1), ((4, 1), 0, 1), ((4, 1), 1, -1), ((4, 3), 1, 1), ((5, 5), 0, 1), ((6, 5), 0, 1)]
    """
    undirected = edges.concat(edges.map(_swap, name=f"{name}.reverse"))
    # Each node once: an endpoint of d edges would otherwise enter the loop d times,
    # and the `min` reads every copy (measured: 18% of the initial epoch at 10k nodes).
    nodes = edges.flat_map(_self_labels, name=f"{name}.nodes").distinct(name=f"{name}.node_set")
    return _propagate(undirected, nodes, max_rounds, name)


def transitive_closure(edges: Collection, *, max_rounds: int | None = MAX_ROUNDS,
                       name: str = "transitive_closure") -> Collection:
    """`(src, dst)` for every path of one or more edges from `src` to `dst`.

    `(v, v)` is in the closure exactly when `v` lies on a cycle (a self loop
    included): paths are never empty.  This is networkx's
    `transitive_closure(G, reflexive=False)`.  The fixpoint, linear in `edges`:

        paths = distinct(edges + (src, dst) for (src, mid) in paths, (mid, dst) in edges)

    At round `r` it holds the pairs joined by a path of at most `r + 1` edges
    (the semi-naive Datalog evaluation of `path(x, z) :- edge(x, z).
    path(x, z) :- path(x, y), edge(y, z).`; Abiteboul, Hull, Vianu, "Foundations of
    Databases", chapter 13).

    >>> import ddflow
    >>> df = ddflow.Dataflow()
    >>> edges_in, edges = df.new_collection()
    >>> out = transitive_closure(edges).capture()
    >>> for e in [(1, 2), (2, 3), (3, 2)]:
    ...     edges_in.insert(e)
    >>> edges_in.advance_to(1); df.run()
    >>> edges_in.remove((3, 2))
    >>> edges_in.advance_to(2); df.run()
    >>> out.updates
    [((1, 2), 0, 1), ((1, 3), 0, 1), ((2, 2), 0, 1), ((2, 2), 1, -1), ((2, 3), 0, 1), ((3, 2), 0, 1), ((3, 2), 1, -1), ((3, 3), 0, 1), ((3, 3), 1, -1)]
    """
    def step(paths: Collection) -> Collection:
        scope = paths.scope
        inner_edges = edges.enter(scope)
        # Key each path by its end, so that it joins the edges leaving that end.
        longer = paths.map(_swap, name=f"{name}.by_end").join_map(
            inner_edges, lambda _mid, src, dst: (src, dst), name=f"{name}.extend")
        return longer.concat(inner_edges).distinct(name=f"{name}.distinct")

    return edges.iterate(step, max_rounds=max_rounds, name=name)


def _trim_edges(cycle: Collection, edges: Collection, max_rounds: int | None,
                name: str) -> Collection:
    """The `edges` whose endpoints get the same least label when labels flow along
    `cycle`, each label being a node that has an edge into it; reversed.

    Differential dataflow's `trim_edges` (scc.rs): an edge `(a, b)` on a cycle of
    `cycle` has `a` and `b` reached from the same least node, so it survives; an
    edge between two strongly connected components eventually does not.
    """
    nodes = edges.map(lambda e: (e[1], e[1]), name=f"{name}.nodes")
    labels = _propagate(cycle, nodes, max_rounds, name)
    return (edges.join_map(labels, lambda src, dst, l1: (dst, (src, l1)), name=f"{name}.src")
            .join_map(labels, lambda dst, sl, l2: ((sl[0], dst), (sl[1], l2)),
                      name=f"{name}.dst")
            .filter(lambda e: e[1][0] == e[1][1], name=f"{name}.same")
            .map(lambda e: (e[0][1], e[0][0]), name=f"{name}.reverse"))


def strongly_connected(edges: Collection, *, max_rounds: int | None = MAX_ROUNDS,
                       name: str = "scc") -> Collection:
    """The edges `(src, dst)` whose endpoints lie in the same strongly connected
    component (a self loop `(v, v)` included).

    Differential dataflow's `strongly_connected` (scc.rs), the doubly nested loop
    behind the differential dataflow paper's incrementally updated strongly
    connected components (CIDR 2013): the outer loop
    repeatedly trims the edge set with `_trim_edges`, once with labels flowing
    forward along the current edges and once backward along their reverse, each a
    `propagate` loop inside it.  An edge joining two different components is
    eventually left with different least labels in one direction and dropped; an
    edge inside a component never is.  The loop times have one coordinate more than
    the outer time: `Product(Product(epoch, outer_round), inner_round)`.

    >>> import ddflow
    >>> df = ddflow.Dataflow()
    >>> edges_in, edges = df.new_collection()
    >>> out = strongly_connected(edges).capture()
    >>> for e in [(1, 2), (2, 1), (2, 3), (3, 3)]:
    ...     edges_in.insert(e)
    >>> edges_in.close(); df.run()
    >>> out.updates
    [((1, 2), 0, 1), ((2, 1), 0, 1), ((3, 3), 0, 1)]
    """
    def step(inner: Collection) -> Collection:
        scope = inner.scope
        forward = edges.enter(scope)
        backward = forward.map(_swap, name=f"{name}.transpose")
        kept = _trim_edges(inner, forward, max_rounds, f"{name}.forward")
        return _trim_edges(kept, backward, max_rounds, f"{name}.backward")

    return edges.iterate(step, max_rounds=max_rounds, name=name)


def strongly_connected_components(edges: Collection, *,
                                  max_rounds: int | None = MAX_ROUNDS,
                                  name: str = "scc") -> Collection:
    """`(node, label)` for every endpoint of `edges`: the label is the least node of
    its strongly connected component (a node alone in its component is labelled by
    its own id).

    First `strongly_connected` keeps the edges inside components (the doubly nested
    loop, times `Product(Product(epoch, outer_round), inner_round)`), then
    `propagate` labels every node with the least node that reaches it along those
    edges: inside a component every node reaches every other, and no kept edge
    leaves a component, so that is the component's least node.  networkx's
    `strongly_connected_components` is the oracle in the tests.

    >>> import ddflow
    >>> df = ddflow.Dataflow()
    >>> edges_in, edges = df.new_collection()
    >>> out = strongly_connected_components(edges).capture()
    >>> for e in [(1, 2), (2, 3), (3, 1), (3, 4)]:
    ...     edges_in.insert(e)
    >>> edges_in.advance_to(1); df.run()
    >>> edges_in.remove((3, 1))           # breaks the cycle: four singletons
    >>> edges_in.advance_to(2); df.run()
    >>> out.updates
    [((1, 1), 0, 1), ((2, 1), 0, 1), ((2, 1), 1, -1), ((2, 2), 1, 1), ((3, 1), 0, 1), ((3, 1), 1, -1), ((3, 3), 1, 1), ((4, 4), 0, 1)]
    """
    within = strongly_connected(edges, max_rounds=max_rounds, name=name)
    nodes = edges.flat_map(_self_labels, name=f"{name}.nodes").distinct(name=f"{name}.node_set")
    return _propagate(within, nodes, max_rounds, f"{name}.labels")


def _undirected_pair(e: tuple) -> tuple:
    return (e, (e[1], e[0]))


def _not_loop(e: tuple) -> bool:
    return e[0] != e[1]


def _src(e: tuple) -> Any:
    return e[0]


def k_core(edges: Collection, k: int = 2, *, max_rounds: int | None = MAX_ROUNDS,
           name: str = "k_core") -> Collection:
    """The edges of the `k`-core, both directions: `edges` read as an undirected
    simple graph (self loops dropped), the largest subgraph in which every node
    has at least `k` neighbours.

    Peeling, as a fixpoint from the whole graph:

        live = { (u, v) in undirected : degree(u, live) >= k, degree(v, live) >= k }

    Each round drops the edges at nodes left with fewer than `k` live neighbours,
    recomputed from the entered edges at the same outer time (so a retraction that
    revives nothing cannot prop a node up).  networkx's `k_core` is the oracle in
    the tests; its nodes are the sources of these edges.

    >>> import ddflow
    >>> df = ddflow.Dataflow()
    >>> edges_in, edges = df.new_collection()
    >>> out = k_core(edges).capture()
    >>> for e in [(1, 2), (2, 3), (3, 1), (3, 4)]:
    ...     edges_in.insert(e)
    >>> edges_in.advance_to(1); df.run()
    >>> edges_in.remove((3, 1))           # the triangle opens: nothing is left
    >>> edges_in.advance_to(2); df.run()
    >>> sorted(u for u in out.updates if u[1] == 1)
    [((1, 2), 1, -1), ((1, 3), 1, -1), ((2, 1), 1, -1), ((2, 3), 1, -1), ((3, 1), 1, -1), ((3, 2), 1, -1)]
    """
    undirected = (edges.filter(_not_loop, name=f"{name}.no_loops")
                  .flat_map(_undirected_pair, name=f"{name}.both")
                  .distinct(name=f"{name}.simple"))

    def step(live: Collection) -> Collection:
        scope = live.scope
        degree = live.map(_src, name=f"{name}.ends").count(name=f"{name}.degree")
        kept = degree.filter(lambda nd: nd[1] >= k, name=f"{name}.enough").map(
            _src, name=f"{name}.node")
        return (undirected.enter(scope).semijoin(kept).map(_swap, name=f"{name}.flip")
                .semijoin(kept).map(_swap, name=f"{name}.back"))

    return undirected.iterate(step, max_rounds=max_rounds, name=name)
