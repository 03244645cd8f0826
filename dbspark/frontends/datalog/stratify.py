"""The predicate dependency graph, its strongly connected components and the strata.

An edge q -> p means a rule for p reads q: positively, under negation (`!q(...)`), or through an
aggregate (q occurs in an aggregate's body or a groupby literal). A component is recursive if it has
more than one predicate or a self-edge; negation may only read lower components (stratified negation),
otherwise the program is rejected, naming a cycle through the offending edge. A component recursive
through aggregation is accepted when it is monotonic (`monotonic.py`: its cost predicates are inferred,
or the program is rejected naming the rule and the cycle). Components are returned in a topological order (dependencies first).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from dbspark.frontends.datalog.ast import Aggregate, Atom, GroupBy, Literal, Negation, Pos, Rule
from dbspark.frontends.datalog.check import StratificationError, at
from dbspark.frontends.datalog.monotonic import Cost, cost_predicates


@dataclass
class Edge:
    src: str
    dst: str
    kind: str  # "positive" | "negation" | "aggregation"
    pos: Pos


@dataclass
class Component:
    preds: list[str]
    recursive: bool
    rules: list[Rule] = field(default_factory=list)
    stratum: int = 0
    costs: dict[str, Cost] | None = None  # recursive through aggregation: its cost predicates


def _body_edges(head: str, body: tuple[Literal, ...], under: str | None, pos: Pos, out: list[Edge]) -> None:
    for lit in body:
        if isinstance(lit, Atom):
            out.append(Edge(lit.pred, head, under or "positive", lit.pos))
        elif isinstance(lit, Negation):
            out.append(Edge(lit.atom.pred, head, under or "negation", lit.pos))
        elif isinstance(lit, GroupBy):
            out.append(Edge(lit.atom.pred, head, "aggregation", lit.pos))
        elif isinstance(lit, Aggregate):
            _body_edges(head, lit.body, "aggregation", lit.pos, out)


def edges(rules: list[Rule]) -> list[Edge]:
    out: list[Edge] = []
    for r in rules:
        _body_edges(r.head.pred, r.body, None, r.pos, out)
    return out


def recursive_relations(rules: list[Rule]) -> set[str]:
    """The relations that reach themselves through the rules (through any literal of a body)."""
    succ: dict[str, list[str]] = {}
    for e in edges(rules):
        succ.setdefault(e.src, []).append(e.dst)
    nodes = sorted(set(succ) | {r.head.pred for r in rules})
    out = {p for p, ds in succ.items() if p in ds}
    return out | {p for comp in sccs(nodes, succ) if len(comp) > 1 for p in comp}


def sccs(nodes: list[str], succ: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative); components come out in reverse topological order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ.get(root, [])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succ.get(w, []))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def _path(src: str, dst: str, succ: dict[str, list[str]], allowed: set[str]) -> list[str]:
    """A shortest path src -> ... -> dst inside `allowed` (BFS)."""
    prev: dict[str, str | None] = {src: None}
    q = deque([src])
    while q:
        v = q.popleft()
        if v == dst:
            break
        for w in succ.get(v, []):
            if w in allowed and w not in prev:
                prev[w] = v
                q.append(w)
    path = [dst]
    while prev[path[-1]] is not None:
        path.append(prev[path[-1]])  # type: ignore[arg-type]
    return path[::-1]


def stratify(preds: list[str], rules: list[Rule]) -> list[Component]:
    """The program's components in evaluation order, each with its rules and stratum."""
    es = edges(rules)
    succ: dict[str, list[str]] = {p: [] for p in preds}
    for e in es:
        succ.setdefault(e.src, []).append(e.dst)
    nodes = sorted(succ)
    comps = sccs(nodes, succ)[::-1]
    where = {p: i for i, c in enumerate(comps) for p in c}
    through_aggregates: dict[int, str] = {}  # a component recursive through aggregation -> a cycle
    for e in es:
        if e.kind != "positive" and where[e.src] == where[e.dst]:
            cycle = _path(
                e.dst, e.src, succ, set(comps[where[e.src]])
            )  # dst ... src, then src -> dst closes it
            mark = "!" if e.kind == "negation" else "aggregate of "
            shown = " -> ".join([*cycle[:-1], f"{mark}{e.src}", e.dst])
            if e.kind == "aggregation":
                through_aggregates.setdefault(
                    where[e.src], f"{e.dst} depends on itself through aggregation ({shown})"
                )
                continue
            raise at(
                StratificationError,
                f"the program cannot be stratified: {e.dst} depends on itself through "
                f"{e.kind} ({shown}); a cycle of rules may not go through negation",
                e.pos,
            )
    self_loop = {e.src for e in es if e.src == e.dst}
    out = [Component(c, len(c) > 1 or c[0] in self_loop) for c in comps]
    for r in rules:
        out[where[r.head.pred]].rules.append(r)
    for i, shown_cycle in through_aggregates.items():
        out[i].costs = cost_predicates(out[i].preds, out[i].rules, shown_cycle)
    for i, comp in enumerate(out):
        deps = [where[e.src] for e in es if where[e.dst] == i and where[e.src] != i]
        bumps = [
            out[d].stratum
            + (0 if any(e.kind == "positive" for e in es if where[e.src] == d and where[e.dst] == i) else 1)
            for d in deps
        ]
        comp.stratum = max(bumps, default=0)
    return out
