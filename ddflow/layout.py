"""Where to draw a dataflow's operators and edges: geometry only, in inches.

This module isolates the placement behind `ddflow.viz.draw_dataflow`.  It reads a
`Dataflow`'s graph (nodes, their scopes and inputs) and the size of each node's box,
and returns boxes, loop-scope rectangles and edge polylines; it draws nothing and
imports no plotting library.  It leaves out crossing minimisation beyond one
barycentre pass, and edge bundling.

The invariants it keeps, which `tests/ddflow/test_viz.py` checks on every drawing:

* Rows are layers (the longest path from an input, feedback edges cut), top to
  bottom; every box of a row has the row's height.
* Each scope is a band of columns: a loop's nodes, its nested loops' bands included,
  are contiguous columns, and its rectangle holds its nodes and no other.
* No edge crosses a box: an edge between adjacent rows runs straight through the gap
  between them; a longer one drops into the gap below its producer, runs along a
  channel (an empty strip beside the consumer's column) and enters the consumer from
  the gap above it.  A loop's feedback edge leaves its producer downwards, climbs a
  lane at the right of the loop's band and enters the `Variable` from the right (a
  variable is the rightmost box of its row in its band; a second variable of the
  same row enters from above instead).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import attrs

if TYPE_CHECKING:
    from ddflow.graph import Graph, Node, Scope

#: Spacing, in inches.
CHANNEL = 0.32          # the empty strip right of each column: long edges run here
LANE = 0.34             # per feedback edge, at the right of its loop's band
MARGIN = 0.14           # between a loop's rectangle and what it holds, per side
HEADER = 0.26           # a loop's name, above its first row
ROW_GAP = 0.42          # the least gap between two rows
STUB = 0.12             # how far an edge drops below its producer before turning


@attrs.frozen
class Box:
    """A rectangle; `y` grows downwards (the first row is at the top)."""

    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def cx(self) -> float:
        return (self.x0 + self.x1) / 2

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2

    def overlaps(self, other: Box) -> bool:
        return (self.x0 < other.x1 and other.x0 < self.x1
                and self.y0 < other.y1 and other.y0 < self.y1)

    def contains(self, other: Box) -> bool:
        return (self.x0 <= other.x0 and other.x1 <= self.x1
                and self.y0 <= other.y0 and other.y1 <= self.y1)


@attrs.frozen
class Edge:
    producer: Any
    consumer: Any
    feedback: bool
    points: tuple          # the polyline, producer end first


@attrs.frozen
class Layout:
    boxes: dict            # id(node) -> Box
    scopes: list           # (scope, Box), outer loops first
    edges: list            # [Edge]
    notes: list            # (x, y, text): the "+1 round" label of each feedback lane
    width: float
    height: float


def layers(df: Graph) -> dict[int, int]:
    """Layer of each node: the longest path from an input, feedback edges cut.

    Creation order is a topological order of the graph without its feedback edges
    (every other edge goes from an earlier node to a later one), so one pass in
    that order settles every layer.  A variable then moves to just above the first
    node that reads it.
    """
    layer: dict[int, int] = {}
    for node in df.nodes:
        ins = [layer[id(p)] for p in node.inputs
               if id(p) in layer and node.kind != "feedback"]
        layer[id(node)] = 1 + max(ins) if ins else 0
    for node in df.nodes:
        if node.kind == "feedback":
            readers = [layer[id(c)] for c, _p in node.consumers if id(c) in layer]
            if readers:
                layer[id(node)] = max(0, min(readers) - 1)
    return layer


def edges(df: Graph) -> list[tuple[Node, Node, bool]]:
    """`(producer, consumer, is_feedback)` for every edge of the graph.

    The feedback edge is the one into a loop's `Variable` node: it carries round `r`
    to round `r + 1`, and it is the only edge that goes backwards in creation order.
    """
    present = set(map(id, df.nodes))
    return [(p, node, node.kind == "feedback") for node in df.nodes
            for p in node.inputs if id(p) in present]


class _Band:
    """One scope's share of the picture: its own nodes' columns and its children."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.children: list[_Band] = []
        self.rows: dict[int, list] = {}         # layer -> own nodes, left to right
        self.widths: list[float] = []           # own columns
        self.columns: list[float] = []          # their left edges, once placed
        self.feedback: list = []                # own variables, in creation order
        self.x0 = self.x1 = 0.0
        self.lanes: dict[int, float] = {}       # id(variable) -> lane x

    def nodes(self) -> list:
        own = [n for row in self.rows.values() for n in row]
        return own + [n for c in self.children for n in c.nodes()]


def layout(df: Graph, size: Callable[[Node], tuple[float, float]],
           header: Callable[[Scope], float] = lambda scope: 0.0) -> Layout:
    """Place `df`'s nodes, given each node's box `size(node) -> (width, height)` and
    each loop's header `header(scope) -> width`, in inches; see the module docstring
    for what the placement promises."""
    layer = layers(df)
    bands: dict[int, _Band] = {}

    def band(scope: Scope) -> _Band:
        if id(scope) not in bands:
            bands[id(scope)] = b = _Band(scope)
            if scope.parent is not None:
                band(scope.parent).children.append(b)
        return bands[id(scope)]

    for node in df.nodes:
        b = band(node.scope)
        b.rows.setdefault(layer[id(node)], []).append(node)
        if node.kind == "feedback":
            b.feedback.append(node)
    root = band(df.root)
    sizes = {id(n): size(n) for n in df.nodes}

    # Order each row once, top down: by the mean column of the producers already placed
    # in the band (fewer crossings), variables last (their feedback enters from the right).
    for b in bands.values():
        col: dict[int, int] = {}
        for lay in sorted(b.rows):
            row = b.rows[lay]
            def key(item: tuple[int, Any]) -> tuple:
                rank, n = item
                ps = [col[id(p)] for p in n.inputs if id(p) in col]
                return (n.kind == "feedback", sum(ps) / len(ps) if ps else rank, rank)
            row[:] = [n for _r, n in sorted(enumerate(row), key=key)]
            for c, n in enumerate(row):
                col[id(n)] = c
                while len(b.widths) <= c:
                    b.widths.append(0.0)
                b.widths[c] = max(b.widths[c], sizes[id(n)][0])

    def place_x(b: _Band, x: float) -> float:
        b.x0 = x
        if b is not root:
            x += MARGIN
        for child in b.children:
            x = place_x(child, x) + CHANNEL
        for w in b.widths:
            b.columns.append(x)
            x += w + CHANNEL
        for v in b.feedback:
            b.lanes[id(v)] = x + 0.08
            x += LANE
        b.x1 = x + (MARGIN if b is not root else 0.0)
        if b is not root:               # wide enough for its header
            b.x1 = max(b.x1, b.x0 + header(b.scope) + 2 * MARGIN)
        return b.x1

    width = place_x(root, 0.15) + 0.15

    # Rows: each as tall as its tallest box; the gap above a row holds the headers of
    # the loops that start there (nested ones stacked) and their variables' entries.
    n_rows = max(layer.values(), default=-1) + 1
    heights = [0.0] * n_rows
    for n in df.nodes:
        heights[layer[id(n)]] = max(heights[layer[id(n)]], sizes[id(n)][1])

    def first_row(b: _Band) -> int:
        return min(layer[id(n)] for n in b.nodes())

    def last_row(b: _Band) -> int:
        return max(layer[id(n)] for n in b.nodes())

    def headroom(b: _Band) -> float:
        """Space a loop needs above its first row: header, its entries from above,
        and its children that start on the same row."""
        top = first_row(b)
        entries = sum(1 for v in b.feedback[:-1] if layer[id(v)] == top)
        need = HEADER + 0.1 + 0.1 * entries
        for c in b.children:
            if first_row(c) == top:
                need = max(need, headroom(c) + MARGIN + HEADER)
        return need

    def footroom(b: _Band) -> float:
        need = STUB + 0.1 * len(b.feedback) + 0.1
        for c in b.children:
            if last_row(c) == last_row(b):
                need = max(need, footroom(c) + MARGIN)
        return need

    above = [ROW_GAP / 2] * n_rows
    below = [ROW_GAP / 2] * n_rows
    for b in bands.values():
        if b is not root and b.nodes():
            above[first_row(b)] = max(above[first_row(b)], headroom(b) + 0.08)
            below[last_row(b)] = max(below[last_row(b)], footroom(b) + 0.08)
    tops, y = [], 0.45                          # room for the title
    for r in range(n_rows):
        y += above[r]
        tops.append(y)
        y += heights[r] + below[r]
    height = y + 0.1

    boxes: dict[int, Box] = {}
    for b in bands.values():
        for lay, row in b.rows.items():
            for c, n in enumerate(row):
                # A row's boxes share its height: an edge leaving one runs
                # through the gap below the row, never beside a taller neighbour.
                w = sizes[id(n)][0]
                cx = b.columns[c] + b.widths[c] / 2
                boxes[id(n)] = Box(cx - w / 2, tops[lay], cx + w / 2, tops[lay] + heights[lay])

    # Loop rectangles: around their band horizontally, from the header to below the
    # feedback stubs vertically (children first, so a parent encloses them).
    rects: dict[int, Box] = {}

    def rect(b: _Band) -> Box:
        for c in b.children:
            rect(c)
        y0 = tops[first_row(b)] - headroom(b)
        y1 = tops[last_row(b)] + heights[last_row(b)] + footroom(b)
        rects[id(b.scope)] = Box(b.x0, y0, b.x1, y1)
        return rects[id(b.scope)]

    for c in root.children:
        rect(c)
    scopes = sorted(((b.scope, rects[id(b.scope)]) for b in bands.values() if b is not root),
                    key=lambda sr: sr[0].depth)

    # Edges.
    column_of: dict[int, tuple[_Band, int]] = {}
    for b in bands.values():
        for row in b.rows.values():
            for c, n in enumerate(row):
                column_of[id(n)] = (b, c)
    used: dict = {}                             # how many edges share a channel or gap

    def slot(key: Any) -> float:
        used[key] = used.get(key, 0) + 1
        return 0.07 * ((used[key] - 1) % 3)

    routed, notes = [], []
    for p, c, feedback in edges(df):
        bp, bc = boxes[id(p)], boxes[id(c)]
        lp, lc = layer[id(p)], layer[id(c)]
        if feedback:
            b, _col = column_of[id(c)]
            lane = b.lanes[id(c)]
            y_out = bp.y1 + STUB + 0.1 * b.feedback.index(c)
            row = b.rows[lc]
            if row[-1] is c:            # the rightmost box of its row: enter from the right
                end = [(lane, bc.cy), (bc.x1, bc.cy)]
            else:                       # another variable is to its right: enter from above
                y_in = bc.y0 - 0.1 - 0.1 * row.index(c)
                end = [(lane, y_in), (bc.cx, y_in), (bc.cx, bc.y0)]
            points = [(bp.cx, bp.y1), (bp.cx, y_out), (lane, y_out), *end]
            notes.append((lane + 0.05, (y_out + end[0][1]) / 2, "+1 round"))
        elif lc == lp + 1:
            points = [(bp.cx, bp.y1), (bc.cx, bc.y0)]
        else:
            b, col = column_of[id(c)]
            x_ch = b.columns[col] + b.widths[col] + CHANNEL / 2 - 0.07 + slot(("ch", id(b), col))
            y_out = bp.y1 + STUB + slot(("below", lp))
            y_in = bc.y0 - STUB - slot(("above", lc))
            points = [(bp.cx, bp.y1), (bp.cx, y_out), (x_ch, y_out), (x_ch, y_in),
                      (bc.cx, y_in), (bc.cx, bc.y0)]
        routed.append(Edge(p, c, feedback, tuple(points)))
    return Layout(boxes, scopes, routed, notes, width, height)


__all__ = ["Box", "Edge", "Layout", "edges", "layers", "layout"]
