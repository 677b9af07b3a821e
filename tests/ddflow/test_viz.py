"""Pictures from the library: `to_dot` parses and says what it should, drawings draw.

`to_dot` is checked with a small validating parser of the dot language written here
(the subset graphviz documents as its abstract grammar: graph, subgraph, node, edge
and attribute statements), so the test needs neither the graphviz binary nor a
python binding.  The drawings are checked on the Agg backend: each returns a figure
holding artists.
"""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import ddflow  # noqa: E402
from ddflow import viz  # noqa: E402
from ddflow.errors import GraphError  # noqa: E402
from ddflow.algorithms.graphs import reachability  # noqa: E402
from lattice import Antichain, Product  # noqa: E402

# -- a validating parser of dot's grammar ------------------------------------------------

_TOKEN = re.compile(r'\s*(?:(->|--|[{}\[\];=,])|("(?:[^"\\]|\\.)*")|([A-Za-z_][\w.]*|-?\d+(?:\.\d+)?))')


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise SyntaxError(f"bad dot token at {text[pos:pos + 30]!r}")
        out.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    return out


def _unquote(tok: str) -> str:
    return tok[1:-1].replace('\\"', '"').replace("\\n", "\n") if tok.startswith('"') else tok


class _Dot:
    """Parse `digraph ID? { stmt_list }` into nodes, edges and clusters, or raise."""

    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.nodes: dict[str, dict] = {}
        self.edges: list[tuple[str, str, dict]] = []
        self.clusters: list[tuple[str, list[str]]] = []
        self._expect("digraph")
        if self._peek() not in ("{",):
            self._id()
        self._block(None)
        if self.i != len(self.toks):
            raise SyntaxError(f"trailing tokens {self.toks[self.i:]}")

    def _peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def _next(self) -> str:
        if self.i >= len(self.toks):
            raise SyntaxError("unexpected end of input")
        self.i += 1
        return self.toks[self.i - 1]

    def _expect(self, tok: str) -> None:
        got = self._next()
        if got != tok:
            raise SyntaxError(f"expected {tok!r}, got {got!r}")

    def _id(self) -> str:
        tok = self._next()
        if tok in "{}[];=,":
            raise SyntaxError(f"expected an ID, got {tok!r}")
        return _unquote(tok)

    def _attrs(self) -> dict:
        attrs: dict = {}
        while self._peek() == "[":
            self._next()
            while self._peek() != "]":
                key = self._id()
                self._expect("=")
                attrs[key] = self._id()
                if self._peek() in (",", ";"):
                    self._next()
            self._expect("]")
        return attrs

    def _block(self, cluster: list[str] | None) -> None:
        self._expect("{")
        while self._peek() != "}":
            tok = self._peek()
            if tok == "subgraph":
                self._next()
                name = self._id()
                members: list[str] = []
                self.clusters.append((name, members))
                self._block(members)
                if cluster is not None:
                    cluster.extend(members)
            elif tok in ("graph", "node", "edge"):
                self._next()
                self._attrs()
            else:
                a = self._id()
                if self._peek() == "=":
                    self._next()
                    self._id()
                elif self._peek() == "->":
                    chain = [a]
                    while self._peek() == "->":
                        self._next()
                        chain.append(self._id())
                    attrs = self._attrs()
                    for x, y in zip(chain, chain[1:]):
                        self.edges.append((x, y, attrs))
                else:
                    self.nodes[a] = self._attrs()
                    if cluster is not None:
                        cluster.append(a)
            if self._peek() == ";":
                self._next()
        self._expect("}")


def test_the_parser_rejects_broken_dot() -> None:
    _Dot('digraph g { a [label="x"]; a -> b; }')
    for bad in ('digraph g { a [label="x"; }', "digraph g { a -> ; }", "digraph g { a",
                'digraph g { a [label="x] }'):
        with pytest.raises(SyntaxError):
            _Dot(bad)


# -- to_dot --------------------------------------------------------------------------------


def _reach_dataflow(run: bool = True) -> ddflow.Dataflow:
    df = ddflow.Dataflow()
    e_in, e = df.new_collection("edges")
    r_in, r = df.new_collection("roots")
    reachability(e, r, name="reach").capture("reached")
    if run:
        for x in [(1, 2), (2, 3), (3, 1), (3, 4)]:
            e_in.insert(x)
        r_in.insert(1)
        e_in.advance_to(1); r_in.advance_to(1); df.run()
        e_in.remove((2, 3))
        e_in.advance_to(2); r_in.advance_to(2); df.run()
    return df


@pytest.mark.parametrize("run", [False, True], ids=["built", "after-run"])
def test_to_dot_parses_names_every_operator_and_shows_the_feedback_edge(run: bool) -> None:
    df = _reach_dataflow(run)
    dot = viz.to_dot(df)
    assert dot.count("{") == dot.count("}")
    parsed = _Dot(dot)
    # every operator, with its id and kind
    assert set(parsed.nodes) == {f"n{n.id}" for n in df.nodes}
    for node in df.nodes:
        label = parsed.nodes[f"n{node.id}"]["label"]
        assert label.startswith(f"#{node.id} {node.name}\n[{node.kind}]"), label
        assert "frontier" in label
    # every edge of the graph, and exactly one feedback edge, into the loop variable
    expected = {(f"n{p.id}", f"n{n.id}") for n in df.nodes for p in n.inputs}
    assert {(a, b) for a, b, _ in parsed.edges} == expected
    feedback = [(a, b, at) for a, b, at in parsed.edges if "feedback" in at.get("label", "")]
    assert len(feedback) == 1
    (_a, b, attrs), = feedback
    variable = next(n for n in df.nodes if n.kind == "feedback")
    assert b == f"n{variable.id}" and attrs["style"] == "dashed"
    # the loop is a cluster holding exactly the nodes of its scope
    (name, members), = parsed.clusters
    assert name == "cluster_reach"
    assert set(members) == {f"n{n.id}" for n in df.nodes if n.scope.parent is not None}


def test_to_dot_annotates_frontiers_and_trace_sizes_after_a_run() -> None:
    df = _reach_dataflow(run=True)
    labels = {k: v["label"] for k, v in _Dot(viz.to_dot(df)).nodes.items()}
    arranges = [n for n in df.nodes if n.kind == "arrange"]
    assert arranges
    for n in arranges:
        assert f"trace {viz.node_trace_records(n):,} records" in labels[f"n{n.id}"]
    assert any(viz.node_trace_records(n) > 0 for n in arranges)
    inputs = [n for n in df.nodes if n.kind == "input"]
    assert all("frontier {2}" in labels[f"n{n.id}"] for n in inputs)
    assert "frontier {(2,0)}" in labels[f"n{next(n for n in df.nodes if n.kind == 'reduce').id}"]


def test_to_dot_nests_clusters_of_nested_loops_and_quotes_names() -> None:
    df = ddflow.Dataflow()
    _, e = df.new_collection('edges "quoted"')
    e.iterate(lambda outer: outer.iterate(lambda inner: inner.distinct(), name="inner"),
              name="outer").capture()
    parsed = _Dot(viz.to_dot(df))
    names = [c for c, _ in parsed.clusters]
    assert names == ["cluster_outer", "cluster_inner"]
    outer, inner = (set(m) for _, m in parsed.clusters)
    assert inner < outer
    assert any('edges "quoted"' in at["label"] for at in parsed.nodes.values())
    assert sum("feedback" in at.get("label", "") for _, _, at in parsed.edges) == 2


# -- drawings --------------------------------------------------------------------------------


def _has_artists(fig) -> bool:
    ax = fig.axes[0]
    return bool(ax.patches or ax.lines or ax.collections or ax.images or ax.texts)


def test_draw_dataflow_draws_every_operator() -> None:
    df = _reach_dataflow(run=True)
    fig = viz.draw_dataflow(df)
    texts = [t.get_text() for t in fig.axes[0].texts]
    for node in df.nodes:
        assert any(t.startswith(f"#{node.id} {node.name}") for t in texts)
    assert any("+1 round" in t for t in texts)
    plt.close(fig)


def test_draw_updates_and_frontier() -> None:
    ups = [("a", Product(0, 1), 1), ("b", Product(1, 0), 1), ("a", Product(1, 1), -1)]
    fig = viz.draw_updates(ups, frontier=Antichain([Product(1, 2), Product(3, 0)]),
                           title="three updates")
    assert _has_artists(fig)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "'a': -1" in texts and "'b': +1" in texts
    plt.close(fig)
    fig, ax = plt.subplots()
    assert viz.draw_frontier(Antichain([Product(0, 2), Product(2, 0)]), ax) is ax
    assert ax.lines
    plt.close(fig)
    with pytest.raises(TypeError):
        viz.draw_updates([("x", "not a time", 1)])


def test_draw_hasse_highlights_join_and_meet() -> None:
    fig = viz.draw_hasse(3, 3, highlight=(Product(1, 2), Product(2, 1)))
    assert _has_artists(fig)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("join (2,2)" in l for l in labels) and any("meet (1,1)" in l for l in labels)
    assert len(fig.axes[0].texts) == 16
    plt.close(fig)


def test_draw_advance_by_and_rounds() -> None:
    fig = viz.draw_advance_by(Product(3, 7), Antichain([Product(4, 8), Product(5, 3)]))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("advance_by(t, F) = (4,7)" in l for l in labels)
    plt.close(fig)
    df = _reach_dataflow(run=True)
    fig = viz.draw_rounds(df)
    assert fig.axes[0].images
    plt.close(fig)
    (loop, variable), = {(r["loop"], r["variable"]) for r in df.loop_rows()}
    for name in (loop, variable):       # a loop by its scope's name or its variable's
        fig = viz.draw_rounds(df, loop=name)
        assert fig.axes[0].images[0].get_array().count() > 0     # cells that did work
        plt.close(fig)
    # An unknown name drew an empty chart once (a notebook asked for a loop by a name
    # it does not have): it is refused, with the names there are.
    with pytest.raises(GraphError, match=f"no loop .* named 'nope'.*{variable}"):
        viz.draw_rounds(df, loop="nope")


def test_to_dot_keeps_two_loops_of_the_same_name_apart() -> None:
    df = ddflow.Dataflow()
    _, e = df.new_collection("edges")
    _, r = df.new_collection("roots")
    reachability(e, r).capture()
    reachability(e, r).capture()
    parsed = _Dot(viz.to_dot(df))
    names = [c for c, _ in parsed.clusters]
    assert names == ["cluster_reachability", "cluster_reachability_2"]
    first, second = (set(m) for _, m in parsed.clusters)
    assert first and second and not first & second


# -- draw_dataflow is legible ----------------------------------------------------------------

_PROGRAMS = {
    # notebook 14's program: two loops side by side, then a negation in the root scope
    "two loops": ("reach(x) :- root(x). reach(y) :- reach(x), e(x, y). "
                  "bad(x) :- blocked(x). bad(y) :- bad(x), e(x, y). ok(x) :- reach(x), !bad(x).",
                  ("e", "root", "blocked")),
    # mutual recursion: one loop with two variables on the same row
    "two variables": ("even(x) :- zero(x). even(y) :- odd(x), e(x, y). "
                      "odd(y) :- even(x), e(x, y).", ("e", "zero")),
}


def _legibility_cases() -> dict:
    def datalog(key: str) -> ddflow.Dataflow:
        df = ddflow.Dataflow()
        program, names = _PROGRAMS[key]
        inputs = {n: df.new_collection(n)[1] for n in names}
        for name, coll in ddflow.datalog(program, **inputs).items():
            coll.capture(name)
        return df

    def nested() -> ddflow.Dataflow:
        df = ddflow.Dataflow()
        _, e = df.new_collection("edges")
        e.iterate(lambda o: o.iterate(lambda i: i.distinct(), name="inner").map(lambda x: x),
                  name="outer").capture()
        return df

    return {"reach": _reach_dataflow, "nested": nested,
            "two loops": lambda: datalog("two loops"),
            "two variables": lambda: datalog("two variables")}


def _crosses(points, box, eps=0.01) -> bool:
    """Whether the polyline enters the box's interior (shrunk by `eps`), sampled
    every 0.01 inch."""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        n = max(2, int(max(abs(x1 - x0), abs(y1 - y0)) / 0.01))
        for k in range(n + 1):
            x, y = x0 + (x1 - x0) * k / n, y0 + (y1 - y0) * k / n
            if box.x0 + eps < x < box.x1 - eps and box.y0 + eps < y < box.y1 - eps:
                return True
    return False


@pytest.mark.parametrize("annotate", [True, False], ids=["annotated", "plain"])
@pytest.mark.parametrize("case", sorted(_legibility_cases()))
def test_draw_dataflow_is_legible(case: str, annotate: bool) -> None:
    """Notebook 14's drawing was hard to read: a loop's shading covered another loop's
    operators, labels overflowed their boxes, "+1 round" sat on a box and feedback
    edges crossed boxes.  Each of those is checked here, on the rendered figure."""
    from ddflow.layout import layout

    df = _legibility_cases()[case]()
    fig = viz.draw_dataflow(df, annotate=annotate)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    by_gid = {a.get_gid(): a for a in [*ax.patches, *ax.texts] if a.get_gid()}
    extent = lambda gid: by_gid[gid].get_window_extent(renderer)  # noqa: E731

    assert min(t.get_fontsize() for t in ax.texts) >= 9
    boxes = {n.id: extent(f"node:{n.id}") for n in df.nodes}
    for n in df.nodes:                              # every label inside its box
        label, box = extent(f"label:{n.id}"), boxes[n.id]
        assert (box.x0 <= label.x0 and label.x1 <= box.x1 and box.y0 <= label.y0
                and label.y1 <= box.y1), (n, label, box)
    ids = sorted(boxes)
    for i, a in enumerate(ids):                     # no two boxes overlap
        for b in ids[i + 1:]:
            assert not boxes[a].overlaps(boxes[b]), (a, b)
    loops = {id(s): s for n in df.nodes for s in viz._scope_chain(n.scope)}
    assert loops
    for key, scope in loops.items():
        rect = extent(f"scope:{key}")
        inside = {n.id for n in df.nodes if scope in viz._scope_chain(n.scope)}
        for nid, box in boxes.items():
            if nid in inside:                       # its nodes in its rectangle ...
                assert rect.x0 <= box.x0 and box.x1 <= rect.x1 and rect.y0 <= box.y0 \
                    and box.y1 <= rect.y1, (scope, nid)
            else:                                   # ... and no other node
                assert not rect.overlaps(box), (scope, nid)
    texts = [extent(g) for g in by_gid if g.startswith("header:")]
    texts += [t.get_window_extent(renderer) for t in ax.texts if t.get_gid() == "note"]
    assert sum(t.get_gid() == "note" for t in ax.texts) == sum(
        n.kind == "feedback" for n in df.nodes)
    for i, t in enumerate(texts):                   # headers and "+1 round" on nothing
        assert not any(t.overlaps(box) for box in boxes.values())
        assert not any(t.overlaps(u) for u in texts[i + 1:])
    plt.close(fig)

    # No edge runs through a box (its own producer's and consumer's included): the
    # layout's polylines, in inches, against its boxes.
    placed = layout(df, lambda n: (1.6, 0.5 if annotate else 0.35))
    for e in placed.edges:
        for n in df.nodes:
            assert not _crosses(e.points, placed.boxes[id(n)]), (e.producer, e.consumer, n)
        assert e.points[0][1] == pytest.approx(placed.boxes[id(e.producer)].y1)
        end = placed.boxes[id(e.consumer)]
        assert e.points[-1] in ((end.cx, end.y0), (end.x1, end.cy))
