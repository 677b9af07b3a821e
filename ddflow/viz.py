"""Pictures of dataflows and of partially ordered time: graphviz text and matplotlib.

This module isolates drawing.  It reads a `Dataflow`'s graph (nodes, scopes, the
frontier each operator last saw, the records its traces hold) and sets of update
triples, and turns them into pictures; it never runs or changes a dataflow.  Where
an operator goes is `ddflow.layout`'s job; it needs no graphviz binary: `to_dot`
only writes text, `draw_dataflow` draws with matplotlib.

matplotlib is imported inside the drawing functions, so `import ddflow.viz` (and
`to_dot`) costs nothing and works where matplotlib is not installed.

What is drawn, and why:

* `to_dot(df)`: every operator with its id, name and kind, one cluster per loop
  scope (nested loops nest), the loop's feedback edge dashed and red, and each node
  annotated with its input frontier and the records its traces hold.
* `draw_dataflow(df)`: the same, as a matplotlib figure.
* `draw_updates(updates)`: update triples placed on the grid of `Product(a, b)`
  times, labelled with their data and diffs; `draw_frontier(antichain, ax)` draws a
  frontier as the staircase bounding the times in advance of it.
* `draw_hasse(max_a, max_b)`: the Hasse diagram of `Product(0..a, 0..b)` with two
  times, their join and their meet highlighted.
* `draw_advance_by(t, frontier)`: `advance_by(t, F)`, and the times where `t` and
  its advanced form compare the same (every time in advance of `F`).
* `draw_rounds(df)`: a loop's changes per `(outer time, round)` as a heatmap.

>>> import ddflow
>>> df = ddflow.Dataflow()
>>> _, words = df.new_collection("words")
>>> _ = words.count().capture()
>>> print(to_dot(df).splitlines()[0])
digraph ddflow {
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

from lattice import Antichain, Product, advance_by, join, less_equal, meet, sort_key
from ddflow.errors import GraphError
from ddflow.layout import edges, layout

if TYPE_CHECKING:
    from ddflow.graph import Graph, Node, Scope

#: Colours per operator kind (matplotlib and graphviz both read these names).
KIND_COLORS = {
    "input": "#cfe8ff", "linear": "#ffffff", "concat": "#f2f2f2", "consolidate": "#f2f2f2",
    "arrange": "#ffe7b3", "join": "#ffd0c2", "reduce": "#d8f5d0", "enter": "#e8e0ff",
    "leave": "#e8e0ff", "feedback": "#ffb3b3", "capture": "#cfe8ff",
}
FEEDBACK_COLOR = "#d62728"
#: Points: every label of a drawing is at least this large.
FONT_SIZE = 9


# --------------------------------------------------------------------------------------
# reading the graph


def _scope_chain(scope: Scope) -> list[Scope]:
    """The loop scopes from the outermost down to `scope` (the root left out)."""
    chain = []
    s: Scope | None = scope
    while s is not None and s.parent is not None:
        chain.append(s)
        s = s.parent
    return chain[::-1]


def _fmt_frontier(f: Antichain) -> str:
    if f.is_empty():
        return "{} (done)"
    return "{" + ", ".join(_fmt_time(t) for t in sorted(f.elements, key=sort_key)) + "}"


def _fmt_time(t: Any) -> str:
    if isinstance(t, Product):
        return f"({_fmt_time(t.outer)},{_fmt_time(t.inner)})"
    return repr(t)


def node_frontier(node: Node) -> Antichain | None:
    """The frontier of `node`'s inputs at the end of the last run (None before any run).

    For an input it is its session's frontier; for an operator, the meet of its
    ports' frontiers: times not in advance of it are complete there.
    """
    df = node.dataflow
    if node.kind == "input":
        for s in df.sessions:
            if s.node is node:
                return s.frontier() if df.compiled else None
    last = df.engine.frontier(node) if df.compiled else None
    if last is None:
        return None
    out = Antichain()
    for f in last:
        out = out.meet(f) if not out.is_empty() else f
    return out


def node_trace_records(node: Node) -> int:
    """Records held in the traces of `node`, summed over workers (0 before any run)."""
    # Engines that keep operators elsewhere (Spark) hand out views of them.
    if not node.dataflow.compiled:
        return 0
    return sum(op.trace_records() for op in node.dataflow.engine.operators(node))


def _label_lines(node: Node) -> list[str]:
    f = node_frontier(node)
    lines = [f"#{node.id} {node.name}", f"[{node.kind}]",
             "frontier " + ("(not run)" if f is None else _fmt_frontier(f))]
    if node.kind in ("arrange", "reduce", "join") or node_trace_records(node):
        lines.append(f"trace {node_trace_records(node):,} records")
    return lines


# --------------------------------------------------------------------------------------
# graphviz text


def _dot_quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(df: Graph) -> str:
    """The dataflow graph as graphviz `dot` text (render it with `dot -Tsvg`).

    Nodes are `n<id>`, labelled with id, name, kind, input frontier and trace size;
    each loop scope is a `cluster_` subgraph (nested loops nest); the feedback edge
    into a loop's variable is dashed, red and labelled `+1 round`.

    >>> import ddflow
    >>> df = ddflow.Dataflow()
    >>> e_in, edges = df.new_collection("edges")
    >>> r_in, roots = df.new_collection("roots")
    >>> reach = roots.iterate(lambda x: edges.enter(x.scope).semijoin(x)
    ...                       .map(lambda kv: kv[1]).concat(roots.enter(x.scope)).distinct(),
    ...                       name="reach")
    >>> _ = reach.capture()
    >>> dot = to_dot(df)
    >>> 'subgraph "cluster_reach"' in dot, "+1 round" in dot
    (True, True)
    """
    lines = ["digraph ddflow {",
             "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']
    # Group nodes by their scope chain, then emit nested clusters.
    tree: dict = {"nodes": [], "children": {}}
    cluster_ids: dict[int, str] = {}     # id(scope) -> a cluster name unique in the graph
    for node in df.nodes:
        at = tree
        for scope in _scope_chain(node.scope):
            if id(scope) not in cluster_ids:
                # Two loops may share a name (an algorithm called twice): keep both.
                base = f"cluster_{scope.name}"
                taken = set(cluster_ids.values())
                name, n = base, 1
                while name in taken:
                    n += 1
                    name = f"{base}_{n}"
                cluster_ids[id(scope)] = name
            at = at["children"].setdefault(id(scope), {"scope": scope, "nodes": [],
                                                       "children": {}})
        at["nodes"].append(node)

    def emit(sub: dict, indent: str) -> None:
        for node in sub["nodes"]:
            color = KIND_COLORS.get(node.kind, "#ffffff")
            extra = ', penwidth=2, color="%s"' % FEEDBACK_COLOR if node.kind == "feedback" else ""
            lines.append(f"{indent}n{node.id} [label={_dot_quote(chr(10).join(_label_lines(node)))}"
                         f', fillcolor="{color}"{extra}];')
        for child in sub["children"].values():
            scope = child["scope"]
            label = _scope_header(scope)
            lines.append(f"{indent}subgraph {_dot_quote(cluster_ids[id(scope)])} {{")
            lines.append(f"{indent}  label={_dot_quote(label)};")
            lines.append(f'{indent}  style="rounded,dashed"; color="#7f7f7f";')
            emit(child, indent + "  ")
            lines.append(f"{indent}}}")

    emit(tree, "  ")
    for producer, consumer, feedback in edges(df):
        if feedback:
            lines.append(f"  n{producer.id} -> n{consumer.id} [style=dashed, "
                         f'color="{FEEDBACK_COLOR}", fontcolor="{FEEDBACK_COLOR}", '
                         'label="feedback +1 round", constraint=false];')
        else:
            lines.append(f"  n{producer.id} -> n{consumer.id};")
    lines.append("}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------
# matplotlib helpers


def _axes(ax: Any, figsize: tuple[float, float]) -> tuple[Any, Any]:
    """`(figure, axes)`: the given axes' figure, or a new figure (Agg-safe)."""
    if ax is not None:
        return ax.figure, ax
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=figsize)
    return fig, ax


def draw_dataflow(df: Graph, ax: Any = None, *, annotate: bool = True) -> Any:
    """Draw the dataflow graph with matplotlib; returns the figure.

    Rows are layers, top to bottom, by the longest path from an input; each loop is a
    band of contiguous columns in a dashed rectangle, its nested loops inside it
    (`ddflow.layout` places everything, and routes edges through the gaps so none
    crosses a box).  Each box is sized to its label, 9 pt: id, name and kind and,
    with `annotate`, the input frontier and trace size.  The feedback edge into a
    loop's variable is dashed red, labelled "+1 round".

    Sizes are in inches: a new figure is made to fit (at any dpi); on a given `ax`
    the drawing is scaled to the axes, so text may no longer fit its box.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
    from matplotlib.path import Path

    fig = ax.figure if ax is not None else plt.figure()
    renderer = fig.canvas.get_renderer()

    def text_size(text: str) -> tuple[float, float]:
        probe = fig.text(0, 0, text, fontsize=FONT_SIZE, linespacing=1.25)
        box = probe.get_window_extent(renderer)
        probe.remove()
        return box.width / fig.dpi, box.height / fig.dpi

    labels = {id(n): "\n".join(_label_lines(n) if annotate else _label_lines(n)[:2])
              for n in df.nodes}

    def box_size(node: Node) -> tuple[float, float]:
        w, h = text_size(labels[id(node)])
        return w + 0.16, h + 0.12

    headers = {id(s): _scope_header(s) for n in df.nodes for s in _scope_chain(n.scope)}
    placed = layout(df, box_size, lambda scope: text_size(headers[id(scope)])[0])
    if ax is None:
        fig.set_size_inches(placed.width, placed.height)
        ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, placed.width)
    ax.set_ylim(placed.height, 0)           # the first row at the top
    ax.set_axis_off()

    # Loop rectangles first, so they sit behind the nodes (outer loops drawn first).
    for scope, r in placed.scopes:
        ax.add_patch(Rectangle((r.x0, r.y0), r.x1 - r.x0, r.y1 - r.y0, linestyle="--",
                               facecolor="#7f7f7f", alpha=0.08, edgecolor="#555555",
                               gid=f"scope:{id(scope)}", zorder=0))
        # Over the edges that enter the loop across its header, and legible there.
        ax.text(r.x0 + 0.08, r.y0 + 0.05, headers[id(scope)], fontsize=FONT_SIZE,
                va="top", ha="left", color="#444444", zorder=4, gid=f"header:{id(scope)}",
                bbox=dict(boxstyle="square,pad=0.1", facecolor="#f4f4f4", edgecolor="none"))
    for e in placed.edges:
        codes = [Path.MOVETO] + [Path.LINETO] * (len(e.points) - 1)
        color = FEEDBACK_COLOR if e.feedback else "#444444"
        ax.add_patch(FancyArrowPatch(path=Path(e.points, codes), arrowstyle="-|>",
                                     mutation_scale=10, color=color, shrinkA=0, shrinkB=0,
                                     linestyle="--" if e.feedback else "-",
                                     linewidth=1.4 if e.feedback else 0.8, zorder=1,
                                     gid=f"edge:{e.producer.id}->{e.consumer.id}"))
    for x, y, text in placed.notes:
        ax.text(x, y, text, rotation=90, color=FEEDBACK_COLOR, fontsize=FONT_SIZE,
                ha="left", va="center", zorder=4, gid="note")
    for node in df.nodes:
        b = placed.boxes[id(node)]
        edge = FEEDBACK_COLOR if node.kind == "feedback" else "#333333"
        ax.add_patch(FancyBboxPatch((b.x0, b.y0), b.x1 - b.x0, b.y1 - b.y0,
                                    boxstyle="round,pad=0,rounding_size=0.05",
                                    facecolor=KIND_COLORS.get(node.kind, "#ffffff"),
                                    edgecolor=edge, linewidth=1.2, zorder=2,
                                    gid=f"node:{node.id}"))
        ax.text(b.cx, b.cy, labels[id(node)], ha="center", va="center", fontsize=FONT_SIZE,
                linespacing=1.25, zorder=3, gid=f"label:{node.id}")
    ax.text(0.15, 0.12, f"dataflow: {len(df.nodes)} operators", fontsize=10, va="top",
            ha="left")
    return fig


def _scope_header(scope: Scope) -> str:
    limit = "" if scope.max_rounds is None else f", max_rounds={scope.max_rounds}"
    return f"loop {scope.name}: times (outer, round){limit}"


def _grid_xy(t: Any) -> tuple[int, int]:
    if type(t) is int:
        return t, 0
    if isinstance(t, Product) and type(t.outer) is int and type(t.inner) is int:
        return t.outer, t.inner
    raise TypeError(f"draw_updates places ints and Product(int, int) times on a grid, "
                    f"not {t!r}")


def _style_grid(ax: Any, max_a: int, max_b: int, xlabel: str, ylabel: str) -> None:
    ax.set_xlim(-0.6, max_a + 0.8)
    ax.set_ylim(-0.6, max_b + 0.8)
    ax.set_xticks(range(max_a + 1))
    ax.set_yticks(range(max_b + 1))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_aspect("equal")
    ax.grid(True, color="#e6e6e6", linewidth=0.6)


def draw_frontier(frontier: Antichain, ax: Any, *, max_a: int | None = None,
                  max_b: int | None = None, color: str = "#1f77b4",
                  label: str | None = "frontier") -> Any:
    """Draw `frontier` on a `Product(a, b)` grid as a staircase; shade what is beyond it.

    The shaded region is the set of times in advance of the frontier (some element
    `<=` them): a union of quadrants whose boundary is a staircase.  Returns `ax`.
    """
    pts = sorted((_grid_xy(t) for t in frontier.elements), key=lambda p: (p[0], -p[1]))
    if not pts:
        return ax
    x_hi = (max_a if max_a is not None else max(ax.get_xlim()[1], max(p[0] for p in pts))) + 0.6
    y_hi = (max_b if max_b is not None else max(ax.get_ylim()[1], max(p[1] for p in pts))) + 0.6
    # Staircase: down from the top at the first element, then right and down.
    xs, ys = [pts[0][0], pts[0][0]], [y_hi, pts[0][1]]
    for a, b in pts[1:]:
        xs += [a, a]
        ys += [ys[-1], b]
    xs.append(x_hi)
    ys.append(ys[-1])
    ax.plot(xs, ys, color=color, linewidth=2, label=label, drawstyle="default")
    ax.fill_between(xs, ys, [y_hi] * len(ys), color=color, alpha=0.10, step=None)
    ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=70, marker="s",
               facecolor="none", edgecolor=color, linewidth=1.5, zorder=4)
    return ax


def draw_updates(updates: Iterable[tuple], ax: Any = None, *,
                 frontier: Antichain | None = None, title: str | None = None,
                 max_a: int | None = None, max_b: int | None = None,
                 xlabel: str = "epoch (a)", ylabel: str = "round (b)",
                 max_labels: int = 4) -> Any:
    """Draw update triples `(data, time, diff)` on the grid of `Product(a, b)` times.

    Each time that holds updates gets a dot sized by how many, labelled with up to
    `max_labels` lines `data: +diff` (green for insertions, red for deletions when
    all agree).  Int times sit on the row `b = 0`.  `frontier` draws its staircase
    (`draw_frontier`).  Returns the figure.
    """
    by_time: dict[tuple[int, int], list] = {}
    for d, t, r in updates:
        by_time.setdefault(_grid_xy(t), []).append((d, r))
    pts = list(by_time)
    if frontier is not None:
        pts += [_grid_xy(t) for t in frontier.elements]
    max_a = max_a if max_a is not None else max((p[0] for p in pts), default=3)
    max_b = max_b if max_b is not None else max((p[1] for p in pts), default=3)
    fig, ax = _axes(ax, (1.3 * max_a + 3.0, 1.1 * max_b + 2.5))
    _style_grid(ax, max_a, max_b, xlabel, ylabel)
    ax.scatter([a for a in range(max_a + 1) for _ in range(max_b + 1)],
               [b for _ in range(max_a + 1) for b in range(max_b + 1)],
               s=8, color="#bbbbbb", zorder=1)
    if frontier is not None:
        draw_frontier(frontier, ax, max_a=max_a, max_b=max_b)
    for (a, b), entries in sorted(by_time.items()):
        signs = {r > 0 for _, r in entries if isinstance(r, (int, float))}
        color = "#2ca02c" if signs == {True} else "#d62728" if signs == {False} else "#9467bd"
        ax.scatter([a], [b], s=40 + 25 * len(entries), color=color, zorder=3)
        text = [f"{d!r}: {r:+}" if isinstance(r, int) else f"{d!r}: {r!r}"
                for d, r in entries[:max_labels]]
        if len(entries) > max_labels:
            text.append(f"... {len(entries) - max_labels} more")
        ax.annotate("\n".join(text), (a, b), xytext=(6, 4), textcoords="offset points",
                    fontsize=9, va="bottom", ha="left", zorder=5,
                    bbox=dict(boxstyle="round,pad=0.2", facecolor="white", alpha=0.8,
                              edgecolor="none"))
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def _hasse_xy(a: int, b: int) -> tuple[float, float]:
    # Rank (a + b) goes up; the two components lean left and right.
    return (b - a) * 1.0, (a + b) * 1.0


def draw_hasse(max_a: int, max_b: int, highlight: Sequence[Product] = (Product(1, 2),
                                                                      Product(2, 1)),
               ax: Any = None) -> Any:
    """Draw the Hasse diagram of `Product(0..max_a, 0..max_b)`; returns the figure.

    An edge joins each time to the times that cover it (`(a, b)` to `(a+1, b)` and
    `(a, b+1)`), rank `a + b` upwards.  The `highlight`ed times are orange, their
    join (least upper bound) green with its up-set shaded, their meet (greatest
    lower bound) blue with its down-set shaded.
    """
    fig, ax = _axes(ax, (1.0 * (max_a + max_b) + 3.0, 0.8 * (max_a + max_b) + 2.5))
    hi = list(highlight)
    j = m = None
    if hi:
        j, m = hi[0], hi[0]
        for t in hi[1:]:
            j, m = join(j, t), meet(m, t)
    for a in range(max_a + 1):
        for b in range(max_b + 1):
            x, y = _hasse_xy(a, b)
            for a2, b2 in ((a + 1, b), (a, b + 1)):
                if a2 <= max_a and b2 <= max_b:
                    x2, y2 = _hasse_xy(a2, b2)
                    on_path = (j is not None and m is not None
                               and less_equal(m, Product(a, b)) and less_equal(Product(a2, b2), j)
                               and any(less_equal(Product(a, b), t) or less_equal(t, Product(a, b))
                                       for t in hi))
                    ax.plot([x, x2], [y, y2], color="#555555" if on_path else "#cccccc",
                            linewidth=1.8 if on_path else 0.9, zorder=1)
    for a in range(max_a + 1):
        for b in range(max_b + 1):
            t = Product(a, b)
            x, y = _hasse_xy(a, b)
            face, size = "white", 380
            if j is not None and less_equal(j, t):
                face = "#dff5dc"
            if m is not None and less_equal(t, m):
                face = "#dce9f7"
            edge = "#333333"
            if t in hi:
                face, edge = "#ff7f0e", "#b35900"
            if t == j:
                face, edge = "#2ca02c", "#1a661a"
            if t == m:
                face, edge = "#1f77b4", "#12466b"
            ax.scatter([x], [y], s=size, facecolor=face, edgecolor=edge, zorder=2)
            ax.text(x, y, f"{a},{b}", ha="center", va="center", fontsize=9, zorder=3)
    if hi:
        from matplotlib.lines import Line2D
        handles = [Line2D([], [], marker="o", linestyle="", markersize=9, color=c, label=l)
                   for c, l in (("#ff7f0e", "times " + ", ".join(_fmt_time(t) for t in hi)),
                                ("#2ca02c", f"join {_fmt_time(j)} (and its up-set)"),
                                ("#1f77b4", f"meet {_fmt_time(m)} (and its down-set)"))]
        ax.legend(handles=handles, loc="upper left", fontsize=9, frameon=False)
    ax.set_title(f"Hasse diagram of Product(0..{max_a}, 0..{max_b})", fontsize=10)
    ax.set_axis_off()
    ax.set_aspect("equal")
    return fig


def draw_advance_by(t: Product, frontier: Antichain, ax: Any = None, *,
                    max_a: int | None = None, max_b: int | None = None) -> Any:
    """Draw `advance_by(t, frontier)` on the grid; returns the figure.

    Every grid time `s` is a small dot: filled grey where `t <= s` and
    `advance_by(t, F) <= s` agree, red where they disagree.  The disagreements all
    lie outside the shaded region in advance of `F`: that is advance_by's promise.
    """
    adv = advance_by(t, frontier)
    pts = [_grid_xy(t), _grid_xy(adv)] + [_grid_xy(f) for f in frontier.elements]
    max_a = max_a if max_a is not None else max(p[0] for p in pts) + 2
    max_b = max_b if max_b is not None else max(p[1] for p in pts) + 2
    fig, ax = _axes(ax, (0.55 * max_a + 6.0, 0.55 * max_b + 1.5))
    _style_grid(ax, max_a, max_b, "a", "b")
    draw_frontier(frontier, ax, max_a=max_a, max_b=max_b, label=f"F = {_fmt_frontier(frontier)}")
    same, differ = [], []
    for a in range(max_a + 1):
        for b in range(max_b + 1):
            s = Product(a, b)
            (same if less_equal(t, s) == less_equal(adv, s) else differ).append((a, b))
    ax.scatter(*zip(*same), s=10, color="#999999", zorder=2, label="t and advanced compare the same")
    if differ:
        ax.scatter(*zip(*differ), s=14, color="#d62728", zorder=2,
                   label="they differ (only outside F's region)")
    ta, tb = _grid_xy(t)
    aa, ab = _grid_xy(adv)
    ax.scatter([ta], [tb], s=120, color="#ff7f0e", zorder=4, label=f"t = {_fmt_time(t)}")
    ax.scatter([aa], [ab], s=120, color="#2ca02c", zorder=4,
               label=f"advance_by(t, F) = {_fmt_time(adv)}")
    if (ta, tb) != (aa, ab):
        ax.annotate("", (aa, ab), (ta, tb),
                    arrowprops=dict(arrowstyle="-|>", color="#2ca02c", linewidth=1.5), zorder=4)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=9, frameon=False)
    ax.set_title("advance_by: the greatest time indistinguishable beyond F", fontsize=10)
    fig.tight_layout()
    return fig


def draw_rounds(df: Graph, ax: Any = None, *, loop: str | None = None,
                log_scale: bool = True) -> Any:
    """Heatmap of a loop's changes per `(outer time, round)`; returns the figure.

    Reads `df.loop_rows()`; `loop` picks one loop by the name of its scope or of
    its variable (default: the first that logged anything).  Outer times are placed
    in `sort_key` order.  Empty cells did no work: the picture of differential
    dataflow's incrementality.
    """
    import numpy as np
    from matplotlib.colors import LogNorm

    rows = df.loop_rows()
    if loop is None:
        loop = rows[0]["loop"] if rows else None
    elif not any(loop in (r["loop"], r["variable"]) for r in rows):
        names = sorted({n for r in rows for n in (r["loop"], r["variable"])})
        raise GraphError(f"draw_rounds: no loop or loop variable named {loop!r} has "
                         f"logged rounds; those that have: {names}")
    rows = [r for r in rows if loop in (r["loop"], r["variable"])]
    scopes = sorted({r["loop"] for r in rows})
    if len(scopes) > 1:
        raise GraphError(f"draw_rounds: {loop!r} names a variable of several loops "
                         f"{scopes}: pass the loop's scope name")
    outers = sorted({r["outer"] for r in rows}, key=sort_key)
    if outers and all(type(o) is int for o in outers):
        # Int epochs: show the quiet ones too, an empty column is the point.
        outers = list(range(outers[0], outers[-1] + 1))
    first = min((r["round"] for r in rows), default=0)
    rounds = max((r["round"] for r in rows), default=0)
    grid = np.zeros((rounds - first + 1, max(1, len(outers))))
    index = {o: i for i, o in enumerate(outers)}
    for r in rows:
        grid[r["round"] - first, index[r["outer"]]] += r["changes"]
    fig, ax = _axes(ax, (max(5.0, 0.45 * len(outers) + 3.0), max(3.5, 0.25 * rounds + 2.5)))
    masked = np.ma.masked_where(grid == 0, grid)
    # A log scale only helps when the counts span decades (a load, then small epochs).
    norm = (LogNorm(vmin=1, vmax=float(grid.max()))
            if log_scale and grid.max() >= 10 else None)
    im = ax.imshow(masked, aspect="auto", origin="lower", cmap="viridis", norm=norm,
                   interpolation="nearest", extent=(-0.5, len(outers) - 0.5,
                                                    first - 0.5, rounds + 0.5))
    fig.colorbar(im, ax=ax, label="changes fed back")
    ax.set_xticks(range(len(outers)))
    ax.set_xticklabels([_fmt_time(o) for o in outers], rotation=90 if len(outers) > 12 else 0,
                       fontsize=9)
    ax.set_xlabel("outer time (epoch)")
    ax.set_ylabel("round")
    from matplotlib.ticker import MaxNLocator
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"loop {loop}: changes per (epoch, round)", fontsize=10)
    fig.tight_layout()
    return fig


__all__ = ["to_dot", "draw_dataflow", "draw_updates", "draw_frontier", "draw_hasse",
           "draw_advance_by", "draw_rounds", "node_frontier", "node_trace_records"]
