"""`ddflow demo`: incremental graph analytics on a stream of edge changes.

What this module isolates: the demo's script.  A random directed graph is loaded,
then every epoch deletes or inserts one edge.  One dataflow on the local engine
keeps three answers up to date: reachability from a few roots, BFS distances from
them, and (when `ddflow.query` is present) the number of triangles
`tri(x, y, z) :- g(x, y), g(y, z), g(x, z)` as a worst-case optimal delta query.
Each epoch's answers are checked against networkx (or, without networkx, against a
plain Python BFS and triangle count) over that epoch's graph, and the work done per
epoch (records processed by all operators) is shown next to the initial load's:
differential dataflow's point is that the first number is tiny compared with the
second.  It leaves out the algorithms themselves (`ddflow.algorithms.graphs`,
`ddflow.query`) and argument parsing (`ddflow.cli`).
"""

from __future__ import annotations

import random
import statistics
import time
from collections import deque
from typing import Any, Callable

import ddflow
from ddflow.algorithms.graphs import bfs, reachability
from ddflow.io import counted

TRIANGLES = "tri(x,y,z) :- g(x,y), g(y,z), g(x,z)"


# --------------------------------------------------------------------------------------
# the oracles: what every epoch is checked against


def plain_bfs(edges: set, roots: list) -> dict:
    """Distances from the nearest root by a plain breadth-first search."""
    adj: dict = {}
    for s, d in edges:
        adj.setdefault(s, []).append(d)
    dist = {r: 0 for r in roots}
    q = deque(roots)
    while q:
        u = q.popleft()
        for v in adj.get(u, ()):
            if v not in dist:
                dist[v] = dist[u] + 1
                q.append(v)
    return dist


def plain_triangles(edges: set) -> int:
    """Matches of `g(x,y), g(y,z), g(x,z)` by nested loops over adjacency sets."""
    succ: dict = {}
    for s, d in edges:
        succ.setdefault(s, set()).add(d)
    return sum(1 for x, y in edges for z in succ.get(y, ()) if z in succ.get(x, ()))


class _Oracle:
    """networkx when importable (the issue asks for it), else the plain functions."""

    def __init__(self, edges: set, roots: list) -> None:
        self.roots = roots
        try:
            import networkx as nx
        except ImportError:
            self.nx = None
            self.name = "a plain Python BFS and triangle count"
            self.edges = edges
            return
        self.nx = nx
        self.name = f"networkx {nx.__version__}"
        self.graph = nx.DiGraph()
        self.graph.add_nodes_from(roots)
        self.graph.add_edges_from(edges)

    def change(self, edge: tuple, diff: int) -> None:
        if self.nx is None:
            return          # the plain functions read the demo's own edge set
        if diff > 0:
            self.graph.add_edge(*edge)
        else:
            self.graph.remove_edge(*edge)

    def distances(self) -> dict:
        if self.nx is None:
            return plain_bfs(self.edges, self.roots)
        return dict(self.nx.multi_source_dijkstra_path_length(self.graph, self.roots))

    def triangles(self) -> int:
        if self.nx is None:
            return plain_triangles(self.edges)
        g = self.graph
        # Directed matches of g(x,y), g(y,z), g(x,z), self loops included as the rule
        # reads them (x, y, z need not be distinct).
        return sum(1 for x, y in g.edges for z in g.successors(y) if g.has_edge(x, z))


def _query() -> Callable | None:
    try:
        from ddflow.query import query
    except ImportError:
        return None
    return query


# --------------------------------------------------------------------------------------
# the demo


def run_demo(nodes: int = 2000, edges: int = 6000, epochs: int = 40, workers: int = 1,
             seed: int = 1, console: Any = None, triangles: bool = True) -> int:
    """Run the demo, print its progress and summary; 0 if every epoch agrees, else 1."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:
            # Piped or captured: rich would assume 80 columns and wrap the table.
            console = Console(width=120)
    say = lambda text: console.print(text, soft_wrap=True)  # noqa: E731 - lines, not paragraphs
    if not 0 < edges <= nodes * nodes:
        # More could never be drawn (the loop below would not end); none leaves the
        # first epoch nothing to delete.
        raise ValueError(f"the demo needs 1 to {nodes * nodes:,} distinct edges on "
                         f"{counted(nodes, 'node')} (self loops included), not {edges:,}")
    rng = random.Random(seed)
    graph: set = set()
    while len(graph) < edges:
        graph.add((rng.randrange(nodes), rng.randrange(nodes)))
    roots = list(range(min(5, nodes)))
    query = _query() if triangles else None

    df = ddflow.Dataflow(workers=workers)
    e_in, e = df.new_collection("edges")
    r_in, r = df.new_collection("roots")
    reach = reachability(e, r).capture("reachable")
    dist = bfs(e, r).capture("distances")
    tri = None
    if query is not None:
        # Count with a reduce on a constant key, so the answer per epoch is one record.
        tri = (query(TRIANGLES, g=e).map(lambda _t: "triangles").count()
               .map(lambda kv: kv[1]).capture("triangles"))
    answers = "reachability, BFS" + (", triangles" if tri is not None else "")
    say(f"[bold]ddflow {ddflow.__version__} demo[/bold]: {answers} on "
        f"{counted(nodes, 'node')}, {counted(edges, 'edge')}, roots {roots}; "
        f"{counted(epochs, 'single-edge epoch')} ({counted(workers, 'worker')}, local engine)")
    if query is None and triangles:
        say("(ddflow.query is not available: triangles left out)")

    for x in graph:
        e_in.insert(x)
    for x in roots:
        r_in.insert(x)
    t0 = time.perf_counter()
    e_in.advance_to(1)
    r_in.advance_to(1)
    df.run()
    load_ms, load_work = 1000 * (time.perf_counter() - t0), df.total_work()
    oracle = _Oracle(set(graph), roots)

    def triangles_at(epoch: int) -> int | None:
        if tri is None:
            return None
        acc = tri.at(epoch)
        return next(iter(acc), 0)

    def check(epoch: int) -> tuple[int, int, int | None, bool]:
        expected = oracle.distances()
        got_reach = {n for n, m in reach.at(epoch).items() if m}
        got_dist = dict(d for d, m in dist.at(epoch).items() if m)
        ok = got_reach == set(expected) and got_dist == expected
        n_tri = triangles_at(epoch)
        if n_tri is not None:
            ok = ok and n_tri == oracle.triangles()
        return len(got_reach), max(got_dist.values(), default=0), n_tri, ok

    rows = [(0, "initial load", *check(0), load_work, load_ms)]
    edge_list = sorted(graph)
    failures = [0] if not rows[0][5] else []
    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  transient=False) as progress:
        task = progress.add_task("epochs", total=epochs)
        for epoch in range(1, epochs + 1):
            if epoch % 2:
                x = edge_list.pop(rng.randrange(len(edge_list)))
                e_in.remove(x)
                graph.discard(x)
                oracle.change(x, -1)
                change = f"-{x}"
            else:
                x = (rng.randrange(nodes), rng.randrange(nodes))
                while x in graph:
                    x = (rng.randrange(nodes), rng.randrange(nodes))
                e_in.insert(x)
                graph.add(x)
                edge_list.append(x)
                oracle.change(x, +1)
                change = f"+{x}"
            before = df.total_work()
            t = time.perf_counter()
            e_in.advance_to(epoch + 1)
            r_in.advance_to(epoch + 1)
            df.run()
            ms = 1000 * (time.perf_counter() - t)
            work = df.total_work() - before
            n_reach, depth, n_tri, ok = check(epoch)
            if not ok:
                failures.append(epoch)
            rows.append((epoch, change, n_reach, depth, n_tri, ok, work, ms))
            progress.update(task, advance=1,
                            description=f"epoch {epoch}: {work:,} records, {ms:.1f} ms")

    table = Table(title="answers and work per epoch", title_justify="left")
    for col, justify in (("epoch", "right"), ("change", "left"), ("reachable", "right"),
                         ("max dist", "right"), ("triangles", "right"), ("work", "right"),
                         ("ms", "right"), ("check", "center")):
        if col == "triangles" and tri is None:
            continue
        table.add_column(col, justify=justify, no_wrap=True)
    shown = rows if len(rows) <= 16 else rows[:8] + [None] + rows[-7:]
    for row in shown:
        if row is None:
            table.add_row(*(["..."] * len(table.columns)))
            continue
        epoch, change, n_reach, depth, n_tri, ok, work, ms = row
        cells = [str(epoch), change, f"{n_reach:,}", str(depth)]
        if tri is not None:
            cells.append(f"{n_tri:,}")
        cells += [f"{work:,}", f"{ms:.1f}", "[green]ok[/green]" if ok else "[red]WRONG[/red]"]
        table.add_row(*cells)
    console.print(table)
    if epochs:
        med_work = statistics.median(r[6] for r in rows[1:])
        med_ms = statistics.median(r[7] for r in rows[1:])
        say(f"median per epoch: {med_work:,.0f} records "
                      f"({100 * med_work / max(1, load_work):.3f}% of the initial load's "
                      f"{load_work:,}), {med_ms:.2f} ms (initial load {load_ms:,.0f} ms)")
    checked = answers.replace("reachability, BFS", "reachability, BFS distances")
    if failures:
        say(f"check against {oracle.name}: [red]FAILED[/red] at epochs {failures}")
        return 1
    agree = f"all {epochs + 1} epochs agree" if epochs else "the initial load agrees"
    say(f"check against {oracle.name}: {agree} "
        f"(initial load and {counted(epochs, 'change')}; {checked})")
    return 0
