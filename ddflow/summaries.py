"""Path summaries: how the times of one place of a dataflow graph are moved on their
way to every place they reach.

How an operator moves times is a `Summary`: `Enter` appends round 0, `Leave` drops
the round, `Feedback` adds one round, every other operator is the identity.
Summaries compose, and compare, so the least ways of getting from one place to
another are an antichain of summaries, computed once, when a plan is compiled
(`path_summaries`).  Around a loop every lap adds a round, so a lap never yields a
new least summary and the computation stops.  `ddflow.progress` counts pointstamps
along these summaries (timely dataflow's `progress/reachability.rs` is the model).

>>> from lattice import Product as P
>>> loop = NEXT_ROUND.then(NEXT_ROUND)
>>> loop, loop.apply(P(3, 1)), ENTER.then(loop).then(LEAVE).apply(7)
(Summary(pop=0, add=2, push=()), Product(3, 3), 7)
>>> NEXT_ROUND.less_equal(loop), loop.less_equal(NEXT_ROUND)
(True, False)
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs

from lattice import Product

@attrs.frozen(slots=True)
class Summary:
    """How a path moves a time, in a normal form: drop `pop` rounds, add `add` to the
    innermost round left, then append the rounds `push` (one per scope entered).

    Every word over enter / leave / next-round has this form: a round added and then
    dropped leaves no trace, and entering then leaving is the identity.
    """

    pop: int = 0
    add: int = 0
    push: tuple = ()

    def apply(self, t: Any) -> Any:
        for _ in range(self.pop):
            t = t.outer
        if self.add:
            t = Product(t.outer, t.inner + self.add)
        for r in self.push:
            t = Product(t, r)
        return t

    def then(self, other: Summary) -> Summary:
        """This summary followed by `other`."""
        if other.pop <= len(self.push):
            kept = list(self.push[:len(self.push) - other.pop])
            if kept:
                kept[-1] += other.add
                return Summary(self.pop, self.add, tuple(kept) + other.push)
            return Summary(self.pop, self.add + other.add, other.push)
        # `other` leaves scopes this path did not enter: what it added there is gone.
        return Summary(self.pop + other.pop - len(self.push), other.add, other.push)

    def less_equal(self, other: Summary) -> bool:
        """`self(t) <= other(t)` for every `t`, judged only for summaries of the same
        shape (the others are kept side by side, which is merely conservative)."""
        return (self.pop == other.pop and len(self.push) == len(other.push)
                and self.add <= other.add
                and all(a <= b for a, b in zip(self.push, other.push)))


IDENTITY = Summary()
ENTER = Summary(push=(0,))
LEAVE = Summary(pop=1)
NEXT_ROUND = Summary(add=1)


def _insert_summary(antichain: list, s: Summary) -> bool:
    """Add `s` to a list of incomparable summaries; whether it was new and least."""
    if any(k.less_equal(s) for k in antichain):
        return False
    antichain[:] = [k for k in antichain if not s.less_equal(k)]
    antichain.append(s)
    return True


def path_summaries(inputs: Sequence[Sequence[int]], steps: Sequence[Summary],
                   stop: Sequence[bool] | None = None
                   ) -> list[list[tuple[int, tuple[Summary, ...]]]]:
    """For every location, the ports it reaches and the least summaries of the paths.

    Node `i` reads from the nodes `inputs[i]` (port `p` from `inputs[i][p]`) and moves
    times by `steps[i]` from any input port to its output.  Locations are numbered:
    node `i`'s output is location `i`; its input ports follow, `ports[i][p]` (see
    `port_numbers`).  A port reaches itself by the identity.

    Computed once per node rather than by a search from every location (the
    search, `path_summaries_by_search`, is kept as the reference): what node `j`'s
    output reaches is, over the ports `q` reading it, `q` itself and what `q`'s
    node's output reaches, moved first by that node's step.  Nodes are taken a
    strongly connected component at a time, downstream first (timely's
    `reachability.rs` closes each loop's summaries the same way, inside out); in a
    loop the equations are iterated until nothing changes, which a lap does not
    (it only adds a round, never a least summary).  Composing summaries is monotone
    (`s <= s'` gives `x.then(s) <= x.then(s')`), so the least summaries of the
    composed paths are those of the least ones: the same antichains as the search.

    With `stop` (location -> bool), a path ends at the first `stop` port it comes to:
    every location lists only the `stop` ports it reaches without passing another,
    and a port does not list itself (the hops of `ddflow.progress_edges`).
    """
    ports = port_numbers(inputs)
    n = len(inputs)
    consumers = consumers_of(inputs)            # (port, its node)
    # Antichains are interned (one tuple per set of summaries), so that telling two
    # apart, and remembering a union or a move, is by identity.
    interned: dict[frozenset, tuple] = {}
    moved: dict[tuple, tuple] = {}          # (step, id(antichain)) -> step then it
    unions: dict[tuple, tuple] = {}         # (id(a), id(b)) -> least of both

    summaries: dict[Summary, Summary] = {IDENTITY: IDENTITY}   # one object per summary

    def canon(acc: list) -> tuple:
        key = frozenset(acc)
        got = interned.get(key)
        if got is None:
            got = interned[key] = tuple(summaries.setdefault(x, x) for x in acc)
        return got
    own = canon([IDENTITY])

    def move(step: Summary, reach: dict) -> dict:
        if step == IDENTITY:
            return reach
        out = {}
        for port, ss in reach.items():
            key = (step, id(ss))
            m = moved.get(key)
            if m is None:
                acc: list = []
                for x in ss:
                    _insert_summary(acc, step.then(x))
                m = moved[key] = canon(acc)
            out[port] = m
        return out

    def merge(into: dict, reach: dict) -> None:
        for port, ss in reach.items():
            cur = into.get(port)
            if cur is None:
                into[port] = ss
            elif cur is not ss:
                key = (id(cur), id(ss))
                m = unions.get(key)
                if m is None:
                    acc = list(cur)
                    for x in ss:
                        _insert_summary(acc, x)
                    m = unions[key] = canon(acc)
                into[port] = m

    out: list[dict] = [{} for _ in range(n)]     # node -> {port: least summaries}
    # The reach of port `q` of node `j`: itself, then whatever `j`'s output reaches.
    def of_port(port: int, node: int) -> dict:
        reach = dict(move(steps[node], out[node]))
        if stop is None:
            merge(reach, {port: own})
        return reach

    def gather(j: int) -> dict:
        reach: dict = {}
        for port, c in consumers[j]:
            if stop is None or stop[port]:
                merge(reach, {port: own})
            if stop is None or not stop[port]:
                merge(reach, move(steps[c], out[c]))
        return reach

    for component in components(n, consumers):
        if len(component) == 1 and not any(c == component[0] for _p, c in
                                            consumers[component[0]]):
            out[component[0]] = gather(component[0])
            continue
        # Downstream first (graph order, feedback edges cut, reversed): one pass is
        # nearly right; a node is done again only when a consumer's reach moved.
        inside = set(component)
        todo = sorted(component, reverse=True)
        queued = set(todo)
        while todo:
            j = todo.pop(0)
            queued.discard(j)
            new = gather(j)
            if not _same_reach(new, out[j]):
                out[j] = new
                for p in inputs[j]:
                    if p in inside and p not in queued:
                        queued.add(p)
                        todo.append(p)
    # Each location gets antichains of its own (not the interned ones): a shard's
    # pickled worker holds them, and its size is what the shard log weighs its
    # entries against (`ShardLog.due`), so it stays what it was.
    result: list[list[tuple[int, tuple[Summary, ...]]]] = [
        [(port, tuple(list(ss))) for port, ss in sorted(out[i].items())] for i in range(n)]
    for i, ps in enumerate(ports):
        for port in ps:
            result.append([(q, tuple(list(ss))) for q, ss in sorted(of_port(port, i).items())])
    return result


def _same_reach(a: dict, b: dict) -> bool:
    """Whether two reaches are equal (their antichains are interned: by identity)."""
    return a.keys() == b.keys() and all(a[k] is b[k] for k in a)


def components(n: int, consumers: Sequence[Sequence[tuple[int, int]]]) -> list[list[int]]:
    """The strongly connected components of the graph of nodes (edges producer ->
    consumer), downstream first (Tarjan's algorithm, without recursion)."""
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    found: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            v, k = work[-1]
            succ = consumers[v]
            if k < len(succ):
                work[-1] = (v, k + 1)
                w = succ[k][1]
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    component.append(w)
                    if w == v:
                        break
                found.append(component)
    return found


def path_summaries_by_search(inputs: Sequence[Sequence[int]], steps: Sequence[Summary]
                             ) -> list[list[tuple[int, tuple[Summary, ...]]]]:
    """`path_summaries` by a search of the paths from every location (quadratic in
    the nodes): the reference the per-node computation is tested against."""
    ports = port_numbers(inputs)
    n = len(inputs)
    consumers: list[list[int]] = [[] for _ in range(n)]        # output -> ports read it
    for i, ins in enumerate(inputs):
        for p, producer in enumerate(ins):
            consumers[producer].append(ports[i][p])
    node_of_port = {port: i for i, ps in enumerate(ports) for port in ps}
    result: list[list[tuple[int, tuple[Summary, ...]]]] = []
    for location in range(n + sum(len(ps) for ps in ports)):
        reached: dict[int, list] = {}
        # Work list of (port, summary from `location` to that port).
        if location < n:
            work = [(port, IDENTITY) for port in consumers[location]]
        else:
            work = [(location, IDENTITY)]
        while work:
            port, s = work.pop()
            if not _insert_summary(reached.setdefault(port, []), s):
                continue
            i = node_of_port[port]
            onward = s.then(steps[i])
            work.extend((q, onward) for q in consumers[i])
        result.append([(port, tuple(ss)) for port, ss in sorted(reached.items())])
    return result


def port_numbers(inputs: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """The location number of each node's input ports (a source has one, external)."""
    ports, nxt = [], len(inputs)
    for ins in inputs:
        k = max(1, len(ins))
        ports.append(tuple(range(nxt, nxt + k)))
        nxt += k
    return ports


def consumers_of(inputs: Sequence[Sequence[int]]) -> list[list[tuple[int, int]]]:
    """node -> the (port location, node) pairs reading its output."""
    ports = port_numbers(inputs)
    consumers: list[list[tuple[int, int]]] = [[] for _ in inputs]
    for i, ins in enumerate(inputs):
        for p, producer in enumerate(ins):
            consumers[producer].append((ports[i][p], i))
    return consumers


def reach_size(inputs: Sequence[Sequence[int]], limit: int | None = None,
               found: Sequence[Sequence[int]] | None = None) -> int:
    """How many (location, port) pairs `path_summaries` lists: what building its table
    (and a `Tracker` on it) costs, counted without building it; once past `limit`,
    some number past it.

    Each node's set of reached ports is a bit set (a Python int), the union of its
    consumers' ports and their outputs' sets, taken a strongly connected component
    at a time, downstream first (every node of a component reaches what any of them
    does): a few word operations per pair, not a summary each.  `found`: the
    graph's `components`, if already known.

    >>> reach_size([[], [0], [1]]), reach_size([[], [0, 2], [1]])    # a chain, a loop
    (9, 18)
    """
    ports = port_numbers(inputs)
    n = len(inputs)
    consumers = consumers_of(inputs)
    bits = [0] * n
    total = 0
    for component in components(n, consumers) if found is None else found:
        inside = set(component)
        union = 0
        for j in component:
            for port, c in consumers[j]:
                union |= 1 << port
                if c not in inside:
                    union |= bits[c]
        count = union.bit_count()
        for j in component:
            bits[j] = union
            # The output reaches the set; each port the set and itself (in a loop,
            # itself may be in it already).
            total += count * (1 + len(ports[j])) + sum(not union >> q & 1 for q in ports[j])
        if limit is not None and total > limit:
            break
    return total
