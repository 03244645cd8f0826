"""WITH RECURSIVE as a recursive scope (`dbsp-paper.txt` §5; the core's `Circuit.recursive`).

`WITH RECURSIVE r(cols) AS (base UNION [ALL] step)`: the scope imports `base` and every relation the
step reads; its body is `distinct(base + step(r))` for UNION (set semantics, the Datalog fixpoint) or
`base + step(r)` for UNION ALL. Incrementalization turns the naive fixpoint into semi-naive evaluation
and maintains it across changes, deletions included (§6). The pipeline's `recursion_limit` bounds the
iterations of one step (an error naming the view, the step rejected whole).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dbspark.frontends.sql.parse import name_of
from dbspark.frontends.sql.relops import cast_to
from dbspark.frontends.sql.scope import Field, Rel
from dbspark.ir import expr as ir

if TYPE_CHECKING:
    from dbspark.frontends.sql.compiler import Compiler

DEFAULT_LIMIT = 10_000


def recursive_cte(c: Compiler, name: str, cols: list[str], body: exp.Expression, node: Any) -> Rel:
    if not isinstance(body, exp.Union):
        c.src.unsupported(f"recursive CTE {name} that is not base UNION [ALL] step", body)
    base_q, step_q = body.this, body.expression
    if _reads(base_q, name):
        c.src.unsupported(f"recursive CTE {name} whose first UNION term reads {name}", base_q)
    for key in ("order", "limit", "offset"):
        if body.args.get(key) is not None:
            c.src.unsupported(f"{key.upper()} in recursive CTE {name}", body.args[key])
    base = c.query(base_q)
    vis = base.visible()
    names = cols or [f.name for f in vis]
    if len(names) != len(vis):
        c.src.schema_error(f"recursive CTE {name}: {len(names)} column names for {len(vis)} columns", node)
    rcols = [c.names.fresh("r") for _ in vis]
    base_s = base.stream.map(*[(rc, ir.Col(f.col)) for rc, f in zip(rcols, vis, strict=True)])
    types = dict(base_s.schema)
    # relations the step reads (besides the CTE itself), imported into the scope
    reads = sorted({name_of(t.this) for t in step_q.find_all(exp.Table)} - {name})
    imported = [c.table_rel(r, step_q) for r in reads]
    distinct = bool(body.args.get("distinct"))
    limit = getattr(c.p, "recursion_limit", DEFAULT_LIMIT)

    def scope_body(*streams: Any) -> Any:
        base_in, *ins, prev = streams
        frame = {r: Rel(s, rel.fields) for r, s, rel in zip(reads, ins, imported, strict=True)}
        frame[name] = Rel(prev, [Field(n, rc, name) for n, rc in zip(names, rcols, strict=True)])
        c.ctes.append(frame)
        try:
            step = c.query(step_q)
        finally:
            c.ctes.pop()
        svis = step.visible()
        if len(svis) != len(rcols):
            c.src.schema_error(f"recursive CTE {name}: the step returns {len(svis)} columns, the base {len(rcols)}",
                               step_q)
        s = step.stream.map(*[(rc, ir.Col(f.col)) for rc, f in zip(rcols, svis, strict=True)])
        total = base_in + cast_to(s, types)
        return total.stream_distinct() if distinct else total

    out = c.p.circuit.recursive(scope_body, [base_s, *[r.stream for r in imported]], [base_s.schema],
                                name=f"view {c.view}: WITH RECURSIVE {name}", max_iterations=limit)
    stream = out[0] if isinstance(out, (list, tuple)) else out
    return Rel(stream, [Field(n, rc, name) for n, rc in zip(names, rcols, strict=True)])


def _reads(q: exp.Expression, name: str) -> bool:
    return any(name_of(t.this) == name for t in q.find_all(exp.Table))
