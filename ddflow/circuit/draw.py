"""Pictures of circuits, in the style of the DBSP paper's box-and-arrow diagrams.

What this module isolates: turning a `Circuit`'s node graph into graphviz text
(`to_dot`) and a matplotlib figure (`draw`).  It reads the circuit's nodes only; it
never touches the engine, and matplotlib is imported only when `draw` is called.
It builds on `ddflow.circuit.core` and attaches `Circuit.to_dot()` and
`Circuit.draw()` to its class when imported (core imports nothing of it).

Conventions of both pictures: streams flow left to right; a box per node, labelled
with its operator and, in small type, its node type and global ID (`[2, 1]` is node 1
of the child that is node 2 of the root); z^-1 (delays and feedback nodes) as small
squares; a child circuit as a dashed frame around its nodes, with its own global ID;
the edge into a feedback node (the back edge of a cycle) dashed, running back.

>>> from ddflow.circuit import Circuit, distinct_trace, plus
>>> c = Circuit()
>>> xs = c.source("xs")
>>> sub = c.child("loop")
>>> fb = sub.feedback("x")
>>> _ = fb.connect(distinct_trace(plus(sub.import_stream(xs), fb)))
>>> dot = to_dot(c)
>>> "subgraph cluster_1" in dot and "z^-1" in dot and "style=dashed" in dot
True
"""

from __future__ import annotations

from typing import Any

from ddflow.circuit.core import Circuit, Node

#: Fill colour per node type (and for z^-1 boxes).
COLORS = {"source": "#d9f2d9", "operator": "#ffffff", "feedback": "#ffe6a8",
          "import": "#dce6ff", "sink": "#f6d5d5", "delay": "#ffe6a8", "child": "#f7f7f7"}

_DELAYS = ("delay", "delay_trace")

#: Colour of the edges that carry a child's exported stream out of it.
EXPORT_COLOR = "#1f5fbf"


def _is_delay(node: Node) -> bool:
    return node.kind == "feedback" or (node.kind == "operator" and node.name in _DELAYS)


def _gid(node: Node) -> str:
    return "[" + ", ".join(map(str, node.global_id)) + "]"


def _dot_id(node: Node) -> str:
    return "n_" + "_".join(map(str, node.global_id))


def edges(circuit: Circuit) -> list[tuple[Node, Node, bool, str]]:
    """`(producer, consumer, back, label)` for every stream edge of the circuit tree.

    A stream exported by a child comes from the node inside the child that produced
    it (label `export`); the edge into a feedback node is a back edge.
    """
    out = []
    for node in circuit.walk():
        if node.kind == "child":
            continue
        for x in node.inputs:
            src = x.node
            label = ""
            while src.kind == "child":                # an exported stream: from inside
                inner = src.exports[x.port]
                src, x, label = inner.node, inner, "export"
            out.append((src, node, node.kind == "feedback", label))
    return out


def to_dot(circuit: Circuit) -> str:
    """Graphviz (dot) text of `circuit`, its children as clusters."""
    lines = [f'digraph "{circuit.name}" {{', "  rankdir=LR;",
             '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']

    def emit(c: Circuit, indent: str) -> None:
        for node in c.nodes:
            if node.kind == "child":
                lines.append(f"{indent}subgraph cluster_{'_'.join(map(str, node.global_id))} {{")
                lines.append(f'{indent}  label="child {node.name} {_gid(node)}"; '
                             'style=dashed; color="#777777";')
                emit(node.child, indent + "  ")
                lines.append(f"{indent}}}")
                continue
            delay = _is_delay(node)
            label = "z^-1" if delay and node.name != "delay_trace" else node.label
            shape = {"source": "cds", "sink": "box", "import": "invtrapezium"}.get(
                node.kind, "square" if delay else "box")
            color = COLORS["delay" if delay else node.kind]
            extra = ", peripheries=2" if node.kind == "sink" else ""
            style = "filled" if delay or node.kind != "operator" else "rounded,filled"
            lines.append(f'{indent}{_dot_id(node)} [label="{label}\\n{node.kind} '
                         f'{_gid(node)}", shape={shape}, style="{style}", '
                         f'fillcolor="{color}"{extra}];')

    emit(circuit, "  ")
    for src, dst, back, label in edges(circuit):
        attrs = []
        if back:
            attrs += ["style=dashed", "constraint=false", 'color="#b06000"']
        if label:
            attrs.append(f'label="{label}"')
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"  {_dot_id(src)} -> {_dot_id(dst)}{suffix};")
    lines.append("}")
    return "\n".join(lines)


# -- matplotlib ------------------------------------------------------------------------

def layout(circuit: Circuit) -> tuple[dict, dict]:
    """Positions `{node: (x, y)}` of the non-child nodes and frames
    `{child node: (x0, y0, x1, y1)}`: x is the longest forward path from a source,
    y a row inside the band of the node's circuit (children's bands below).  Root
    nodes left or right of every child frame (sources feeding a child, sinks of its
    exports) then move level with the nodes they connect to, so that a circuit
    whose work happens in a child does not leave the root's band empty."""
    nodes = [n for n in circuit.walk() if n.kind != "child"]
    forward = [(s, d) for s, d, back, _l in edges(circuit) if not back]
    circuits = list(circuit.nested_circuits())
    # A child's nodes start right of whatever feeds the child from outside (a feedback
    # node, fed only by its back edge, would otherwise sit level with the sources).
    inside = {id(c): {n for n in c.walk() if n.kind != "child"} for c in circuits if c.depth}
    layer = {n: 0 for n in nodes}
    for _ in range(len(nodes) + 1):
        changed = False
        for s, d in forward:
            if layer[d] < layer[s] + 1:
                layer[d] = layer[s] + 1
                changed = True
        for members in inside.values():
            entry = [layer[s] + 1 for s, d in forward if d in members and s not in members]
            floor = max(entry, default=0)
            for n in members:
                if layer[n] < floor:
                    layer[n] = floor
                    changed = True
        if not changed:
            break
    preds: dict[Node, list[Node]] = {n: [] for n in nodes}
    for s, d in forward:
        preds[d].append(s)
    band_of: dict[int, int] = {}
    rows: dict[Node, int] = {}
    offset = 0
    for c in circuits:
        own = [n for n in c.nodes if n.kind != "child"]
        used = 0
        for lay in sorted({layer[n] for n in own}):
            # Order each layer by the mean row of its predecessors in the band
            # (one barycentric sweep: fewer crossings than creation order).
            here = [n for n in own if layer[n] == lay]

            def bary(n: Node, here: list = here) -> tuple:
                # Feedback nodes first: their back edge then arcs over the top.
                ps = [rows[p] for p in preds[n] if p in rows and p.circuit is c]
                return (n.kind != "feedback", sum(ps) / len(ps) if ps else here.index(n),
                        here.index(n))

            for r, n in enumerate(sorted(here, key=bary)):
                rows[n] = r
            used = max(used, len(here))
        band_of[id(c)] = offset
        offset += used + (1 if c.depth else 0)
    pos = {n: (layer[n] * 1.6, -(band_of[id(n.circuit)] + rows[n] + (1 if n.depth else 0)) * 1.1)
           for n in nodes}
    frames = {}
    for c in reversed(circuits):
        if c.depth == 0:
            continue
        inside = [n for n in c.walk() if n.kind != "child"]
        xs = [pos[n][0] for n in inside] or [0.0]
        ys = [pos[n][1] for n in inside] or [-(band_of[id(c)] + 1) * 1.1]
        own = [pos[n][1] for n in c.nodes if n.kind != "child"] or ys
        frames[c.node] = (min(xs) - 0.8, min(ys) - 0.6, max(xs) + 0.8, max(own) + 0.7)
    _align_outside_frames(nodes, forward, pos, frames)
    return pos, frames


#: Vertical distance between two rows of nodes, a node's half width (at most), and
#: the height of a back edge's arc above its ends.
_ROW, _HALF_W, _ARC = 1.1, 0.55, 0.6
#: Columns are this far apart; a node's caption (type and global ID) reaches this far
#: below its box.
_COLUMN, _CAPTION = 1.6, 0.3


def _route(src: Node, dst: Node, pos: dict, hw_of: Any, blocks: dict, lanes: dict) -> list:
    """The polyline of a forward edge, from `src`'s right side to `dst`'s left side,
    crossing no box and no caption (`blocks`, except its own ends'): straight along a
    row when nothing is in the way, else along the row of one end and up or down a
    gap between columns (the one before `dst`, or the one after `src`), else along
    the gap between rows too.  Edges sharing a gap take side-by-side lanes."""
    (x0, y0), (x1, y1) = pos[src], pos[dst]
    start, end = (x0 + hw_of(src), y0), (x1 - hw_of(dst), y1)
    others = [b for n, b in blocks.items() if n is not src and n is not dst]

    def lane(x: float) -> float:
        key = round(x, 6)
        k = lanes.get(key, 0)
        lanes[key] = k + 1
        return x + 0.12 * ((k + 1) // 2) * (1 if k % 2 else -1)

    def clear(points: list) -> bool:
        for (ax0, ay0), (ax1, ay1) in zip(points, points[1:]):
            lo_x, hi_x, lo_y, hi_y = min(ax0, ax1), max(ax0, ax1), min(ay0, ay1), max(ay0, ay1)
            if any(lo_x < bx1 and bx0 < hi_x and lo_y < by1 and by0 < hi_y or
                   (lo_x == hi_x and bx0 < lo_x < bx1 and lo_y < by1 and by0 < hi_y) or
                   (lo_y == hi_y and by0 < lo_y < by1 and lo_x < bx1 and bx0 < hi_x)
                   for bx0, by0, bx1, by1 in others):
                return False
        return True

    if y0 == y1 and clear([start, end]):
        return [start, end]
    before, after = x1 - _COLUMN / 2, x0 + _COLUMN / 2     # the gaps next to each end
    for gap in (before, after):
        path = [start, (gap, y0), (gap, y1), end]
        if clear(path):
            x = lane(gap)
            return [start, (x, y0), (x, y1), end]
    # Between the rows of the two ends, below the lower end's caption.
    low = min(y0, y1)
    y_gap = low + _ROW / 2 - 0.05 if y0 != y1 else y0 - _ROW / 2
    xa, xb = lane(after), lane(before)
    return [start, (xa, y0), (xa, y_gap), (xb, y_gap), (xb, y1), end]


def _align_outside_frames(nodes: list, forward: list, pos: dict, frames: dict) -> None:
    """Move root nodes clear of every frame (in x) to the mean height of their forward
    neighbours, then spread nodes sharing an x at least a row apart."""
    spans = [(x0, x1) for x0, _y0, x1, _y1 in frames.values()]
    if not spans:
        return

    def clear(n: Node) -> bool:
        x = pos[n][0]
        return n.depth == 0 and all(x + _HALF_W < x0 or x - _HALF_W > x1 for x0, x1 in spans)

    movable = [n for n in nodes if clear(n)]
    neighbours: dict = {n: [] for n in movable}
    for s, d in forward:
        if s in neighbours:
            neighbours[s].append(d)
        if d in neighbours:
            neighbours[d].append(s)
    for _ in range(len(movable)):        # chains of movable nodes settle in as many passes
        for n in movable:
            ys = [pos[m][1] for m in neighbours[n]]
            if ys:
                pos[n] = (pos[n][0], sum(ys) / len(ys))
    columns: dict = {}
    for n in nodes:
        columns.setdefault(round(pos[n][0], 6), []).append(n)
    for column in columns.values():
        if not any(n in neighbours for n in column):
            continue
        column.sort(key=lambda n: -pos[n][1])            # top to bottom
        for above, below in zip(column, column[1:]):
            if pos[above][1] - pos[below][1] < _ROW:
                pos[below] = (pos[below][0], pos[above][1] - _ROW)


def draw(circuit: Circuit, ax: Any = None, *, figsize: tuple | None = None,
         title: str | None = None) -> Any:
    """A matplotlib figure of `circuit` (drawn on `ax` if given); returns the figure."""
    import matplotlib.patches as mpatches
    from matplotlib.path import Path
    pos, frames = layout(circuit)
    xs = [x for x, _y in pos.values()] + [f[0] for f in frames.values()] + \
        [f[2] for f in frames.values()]
    ys = [y for _x, y in pos.values()] + [f[1] for f in frames.values()] + \
        [f[3] for f in frames.values()]
    # Back edges arc over their ends, at most _ARC above the higher one.
    arcs = [max(pos[s][1], pos[d][1]) + 0.3 + _ARC for s, d, back, _l in edges(circuit) if back]
    x_lim = (min(xs, default=0) - 0.9, max(xs, default=0) + 0.9)
    y_lim = (min(ys, default=0) - 0.6, max(ys + arcs, default=0) + 0.3)
    if ax is None:
        import matplotlib.pyplot as plt
        # About one inch per unit, so that labels fit their boxes; room for the legend.
        size = figsize or (x_lim[1] - x_lim[0] + 2.2, y_lim[1] - y_lim[0] + 0.4)
        fig, ax = plt.subplots(figsize=size)
        # The axes fill the figure but for the legend's strip and the title.
        fig.subplots_adjust(left=0.01, right=1 - 2.2 / size[0], bottom=0.01,
                            top=1 - 0.35 / size[1])
    fig = ax.figure
    half_w, half_h = 0.55, 0.32

    for child, (x0, y0, x1, y1) in frames.items():
        ax.add_patch(mpatches.FancyBboxPatch(
            (x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0.02,rounding_size=0.1",
            fill=True, facecolor=COLORS["child"], edgecolor="#777777", linestyle="--",
            linewidth=1.0, zorder=0))
        ax.text(x0 + 0.08, y1 - 0.08, f"child {child.name} {_gid(child)}", fontsize=9,
                va="top", ha="left", color="#555555", zorder=1)

    for node, (x, y) in pos.items():
        delay = _is_delay(node)
        color = COLORS["delay" if delay else node.kind]
        if delay:
            hw = hh = 0.3
            patch = mpatches.Rectangle((x - hw, y - hh), 2 * hw, 2 * hh, facecolor=color,
                                       edgecolor="black", zorder=2)
            text = "z$^{-1}$" if node.name != "delay_trace" else "z$^{-1}$\ntrace"
        elif node.kind == "source":
            hw, hh = half_w, half_h
            patch = mpatches.Polygon([(x - hw, y - hh), (x + hw - 0.15, y - hh), (x + hw, y),
                                      (x + hw - 0.15, y + hh), (x - hw, y + hh)],
                                     closed=True, facecolor=color, edgecolor="black", zorder=2)
            text = node.name
        elif node.kind == "import":
            hw, hh = half_w, half_h
            patch = mpatches.Polygon([(x - hw, y + hh), (x + hw, y + hh), (x + hw - 0.15, y - hh),
                                      (x - hw + 0.15, y - hh)], closed=True, facecolor=color,
                                     edgecolor="black", zorder=2)
            text = "import"
        else:
            hw, hh = half_w, half_h
            patch = mpatches.FancyBboxPatch((x - hw, y - hh), 2 * hw, 2 * hh,
                                            boxstyle="round,pad=0.02,rounding_size=0.08",
                                            facecolor=color, edgecolor="black",
                                            linewidth=2.0 if node.kind == "sink" else 1.0,
                                            zorder=2)
            text = node.label if node.kind == "operator" else node.name
        patch.set_gid(f"box {_gid(node)}")
        ax.add_patch(patch)
        size = 12 if len(text) <= 2 else 10 if len(text) <= 9 else 9
        ax.text(x, y + 0.04, text, ha="center", va="center", fontsize=size, zorder=3)
        ax.text(x, y - hh - 0.09, f"{node.kind} {_gid(node)}", ha="center", va="top",
                fontsize=9, color="#444444", zorder=3, gid=f"caption {_gid(node)}")

    def hw_of(node: Node) -> float:
        return 0.3 if _is_delay(node) else half_w

    # What an edge must not cross: every box with its caption below it.
    blocks = {n: (x - half_w, y - half_h - _CAPTION, x + half_w, y + half_h)
              for n, (x, y) in pos.items()}
    lanes: dict = {}                  # how many edges run along each gap already
    for src, dst, back, label in edges(circuit):
        (x0, y0), (x1, y1) = pos[src], pos[dst]
        if back:
            # A quadratic arc rises rad * length / 2: keep long ones as flat as short ones.
            rad = min(0.45, 2 * _ARC / max(abs(x1 - x0), 0.1))
            arrow = mpatches.FancyArrowPatch(
                (x0, y0 + 0.3), (x1, y1 + 0.3), connectionstyle=f"arc3,rad={rad:.3f}",
                arrowstyle="-|>", mutation_scale=10, color="#b06000", linestyle="--",
                linewidth=1.0, zorder=1)
        else:
            # An exported stream is drawn in its own colour (see the legend) rather than
            # labelled: the exports of one node fan out from one point, labels collide.
            points = _route(src, dst, pos, hw_of, blocks, lanes)
            codes = [Path.MOVETO] + [Path.LINETO] * (len(points) - 1)
            arrow = mpatches.FancyArrowPatch(
                path=Path(points, codes), arrowstyle="-|>", mutation_scale=10,
                color=EXPORT_COLOR if label == "export" else "black",
                linewidth=1.4 if label == "export" else 0.9, shrinkA=0, shrinkB=0, zorder=1,
                gid=f"edge {_gid(src)} -> {_gid(dst)}")
        ax.add_patch(arrow)

    from matplotlib.lines import Line2D
    handles = [mpatches.Patch(facecolor=COLORS[k], edgecolor="black", label=lab)
               for k, lab in (("source", "source"), ("operator", "operator"),
                              ("import", "import"), ("delay", "z^-1 / feedback"),
                              ("sink", "sink"), ("child", "child circuit"))]
    handles += [Line2D([], [], color=EXPORT_COLOR, linewidth=1.4, label="export (child out)"),
                Line2D([], [], color="#b06000", linestyle="--", label="back edge (feedback)")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=9,
              frameon=False)
    ax.set_xlim(*x_lim)
    ax.set_ylim(*y_lim)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title or f"circuit {circuit.name}", fontsize=10)
    return fig


def _circuit_to_dot(self: Circuit) -> str:
    """Graphviz text of the circuit (see `ddflow.circuit.draw.to_dot`)."""
    return to_dot(self)


def _circuit_draw(self: Circuit, ax: Any = None, **kw: Any) -> Any:
    """A matplotlib picture of the circuit (see `ddflow.circuit.draw.draw`)."""
    return draw(self, ax=ax, **kw)


# Methods of `Circuit`, attached here: this module builds on core, not the reverse.
Circuit.to_dot = _circuit_to_dot      # type: ignore[attr-defined]
Circuit.draw = _circuit_draw          # type: ignore[attr-defined]


__all__ = ["to_dot", "draw", "layout", "edges", "COLORS"]
