"""WITH RECURSIVE as a recursive scope (`dbsp-paper.txt` §5; the core's `Circuit.recursive`).

The CTEs of a WITH RECURSIVE clause that read each other (a strongly connected component of their
dependency graph: one self-recursive CTE, or mutually recursive ones) become one scope. Each is
`base UNION [ALL] step`, its base reading no CTE of the component (it gives the relation's columns and
types). The scope imports every relation the component reads from outside; one iteration evaluates
every member's whole query on the members' values of the previous iteration (UNION: a set, the
Datalog fixpoint; UNION ALL: a bag). A CTE whose recursive term aggregates over it has the monotonic
semantics of the same Datalog rules (`monotonic.py`): the best cost per key. Incrementalization turns the naive fixpoint into semi-naive
evaluation and maintains it across changes, deletions included (§6). The pipeline's
`recursion_limit` bounds the iterations of one step (an error naming the view; the step is rejected).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dbspark.frontends.sql.closure import closure_form
from dbspark.frontends.sql.monotonic import CostForm, cost_form
from dbspark.frontends.sql.parse import name_of
from dbspark.frontends.sql.relops import cast_to
from dbspark.frontends.sql.scope import Field, Rel
from dbspark.ir import expr as ir

if TYPE_CHECKING:
    from dbspark.frontends.sql.compiler import Compiler


@dataclass
class Member:
    """One CTE of a recursive component."""

    name: str
    cols: list[str]
    body: exp.Expression
    node: Any


def reads(q: exp.Expression) -> set[str]:
    return {name_of(t.this) for t in q.find_all(exp.Table)}


def components(members: list[Member]) -> list[list[Member]]:
    """The CTEs grouped into strongly connected components, each after the ones it reads (Tarjan)."""
    names = {m.name: m for m in members}
    graph = {m.name: [r for r in reads(m.body) if r in names] for m in members}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[Member]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(names[w])
                if w == v:
                    break
            out.append(sorted(comp, key=members.index))

    for m in members:
        if m.name not in index:
            visit(m.name)
    return out


def is_recursive(comp: list[Member]) -> bool:
    return len(comp) > 1 or comp[0].name in reads(comp[0].body)


def closure_component(c: Compiler, m: Member) -> dict[str, Rel] | None:
    """A CTE that is exactly the transitive closure of its base as the closure operator, or None."""
    if closure_form(m.name, m.cols, m.body) is None:
        return None
    base = c.query(m.body.this)
    vis = base.visible()
    if len(vis) != 2 or base.stream.schema[vis[0].col] != base.stream.schema[vis[1].col]:
        return None  # ends of different types: the scope (with its casts) computes it
    cols = m.cols or [f.name for f in vis]
    if len(cols) != 2:
        c.src.schema_error(f"recursive CTE {m.name}: {len(cols)} column names for 2 columns", m.node)
    src, dst = c.names.fresh("r"), c.names.fresh("r")
    edges = base.stream.map((src, ir.Col(vis[0].col)), (dst, ir.Col(vis[1].col)))
    return {
        m.name: Rel(
            edges.stream_transitive_closure(src, dst),
            [Field(cols[0], src, m.name), Field(cols[1], dst, m.name)],
        )
    }


def recursive_component(c: Compiler, comp: list[Member]) -> dict[str, Rel]:
    """The relations of a recursive component, computed by one recursive scope (or, for a transitive
    closure, by the closure operator)."""
    if len(comp) == 1 and (tc := closure_component(c, comp[0])) is not None:
        return tc
    names = {m.name for m in comp}
    bases: list[Any] = []
    fields: list[list[Field]] = []
    forms: list[CostForm | None] = []  # a CTE that aggregates over itself: its cost column
    for m in comp:
        body = m.body
        if not isinstance(body, exp.Union):
            c.src.unsupported(f"recursive CTE {m.name} that is not base UNION [ALL] step", body)
        if reads(body.this) & names:
            c.src.unsupported(
                f"recursive CTE {m.name} whose first UNION term reads {sorted(reads(body.this) & names)}",
                body.this,
            )
        for key in ("order", "limit", "offset"):
            if body.args.get(key) is not None:
                c.src.unsupported(f"{key.upper()} in recursive CTE {m.name}", body.args[key])
        base = c.query(body.this)
        vis = base.visible()
        cols = m.cols or [f.name for f in vis]
        if len(cols) != len(vis):
            c.src.schema_error(
                f"recursive CTE {m.name}: {len(cols)} column names for {len(vis)} columns", m.node
            )
        forms.append(cost_form(c, m, cols, names))
        rcols = [c.names.fresh("r") for _ in vis]
        bases.append(base.stream.map(*[(rc, ir.Col(f.col)) for rc, f in zip(rcols, vis, strict=True)]))
        fields.append([Field(n, rc, m.name) for n, rc in zip(cols, rcols, strict=True)])
    outside = sorted(set().union(*(reads(m.body) for m in comp)) - names)
    imported = [c.table_rel(r, comp[0].body) for r in outside]

    inputs = [r.stream for r in imported] or [bases[0]]  # a scope imports at least one stream

    def scope_body(*streams: Any) -> Any:
        ins, prevs = streams[: len(imported)], streams[len(inputs) :]
        frame = {r: Rel(s, rel.fields) for r, s, rel in zip(outside, ins, imported, strict=True)}
        for m, prev, fs in zip(comp, prevs, fields, strict=True):
            frame[m.name] = Rel(prev, fs)
        c.ctes.append(frame)
        outer_circuit, c.circuit = c.circuit, streams[0].circuit  # the body's constants are built inside
        try:
            results = []
            for m, base, fs, form in zip(comp, bases, fields, forms, strict=True):
                rel = c.query(m.body)
                vis = rel.visible()
                if len(vis) != len(fs):
                    c.src.schema_error(
                        f"recursive CTE {m.name}: the step returns {len(vis)} columns, the base {len(fs)}",
                        m.body.expression,
                    )
                s = rel.stream.map(*[(f.col, ir.Col(v.col)) for f, v in zip(fs, vis, strict=True)])
                s = cast_to(s, dict(base.schema))
                results.append(s if form is None else s.stream_best(fs[form.index].col, form.better))
        finally:
            c.ctes.pop()
            c.circuit = outer_circuit
        return results

    label = f"view {c.view}: WITH RECURSIVE {', '.join(m.name for m in comp)}"
    bounded = ""
    if any(forms) and all(f is None or f.bounded for f in forms):
        bounded = (
            f"a cost keeps getting better around a cycle (under MIN, a cycle of negative cost) in {label}"
        )
    out = c.circuit.recursive(
        scope_body,
        inputs,
        [b.schema for b in bases],
        name=label,
        max_iterations=c.p.recursion_limit,
        bounded=bounded,
    )
    streams = list(out) if isinstance(out, (list, tuple)) else [out]
    return {m.name: Rel(s, fs) for m, s, fs in zip(comp, streams, fields, strict=True)}
