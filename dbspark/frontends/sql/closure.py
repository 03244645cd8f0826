"""WITH RECURSIVE that is exactly a transitive closure, recognized so that it becomes the transitive
closure operator (`operators/closure.py`) instead of a recursive scope:

    WITH RECURSIVE p(x, y) AS (
        SELECT a, b FROM t
        UNION
        SELECT p.x, t.b FROM p JOIN t ON p.y = t.a          -- or FROM p, t WHERE p.y = t.a
    )

or its left-linear form `SELECT t.a, p.y FROM t JOIN p ON t.b = p.x`. The base reads one relation t (no
WHERE, GROUP BY, DISTINCT or joins), the step joins the CTE once with the same t on that equality and
nothing else, and UNION (not UNION ALL) makes the result a set. Anything else keeps the scope, which
computes the same relation. The match is on the syntax tree; column references in the step must be
qualified by the table or its alias.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from dbspark.frontends.sql.parse import name_of


def _plain(q: Any, where: bool = False) -> bool:
    """A SELECT with no grouping, DISTINCT, ordering or limit (and no WHERE unless `where`)."""
    keys = ("group", "having", "distinct", "order", "limit", "offset", "qualify") + (
        () if where else ("where",)
    )
    return isinstance(q, exp.Select) and not any(q.args.get(k) for k in keys)


def _col(e: Any) -> exp.Column | None:
    """The column a projection is (possibly renamed by AS), or None."""
    if isinstance(e, exp.Alias):
        e = e.this
    return e if isinstance(e, exp.Column) and not isinstance(e.this, exp.Star) else None


def _tables(q: exp.Select) -> list[tuple[str, str]] | None:
    """(table name, the name it is referred to by) for FROM and its joins, or None if not plain tables."""
    frm = q.args.get("from_")
    items = [frm.this] if frm is not None else []
    for j in q.args.get("joins") or []:
        inner = str(j.args.get("kind") or "").upper() in ("", "INNER", "CROSS")
        if not inner or j.args.get("side") or j.args.get("method") or j.args.get("using"):
            return None  # outer, semi/anti, NATURAL or USING joins: not the closure's shape
        items.append(j.this)
    out = []
    for t in items:
        if not isinstance(t, exp.Table) or t.args.get("db"):
            return None
        out.append((name_of(t.this), t.alias_or_name))
    return out


def closure_form(name: str, cols: list[str], body: Any) -> tuple[int, int] | None:
    """For `name(cols) AS body`: the positions (src, dst) of the base's two columns when body is a
    transitive closure of its base (see the module docstring), else None."""
    if not isinstance(body, exp.Union) or not body.args.get("distinct"):
        return None
    base, step = body.this, body.expression
    if not (_plain(base) and _plain(step, where=True)) or base.args.get("joins"):
        return None
    bt = _tables(base)
    base_cols = [_col(e) for e in base.expressions]
    if bt is None or len(bt) != 1 or len(base_cols) != 2 or None in base_cols:
        return None
    table = bt[0][0]
    a, b = (c.name for c in base_cols)  # type: ignore[union-attr]
    x, y = (cols or [c.alias_or_name for c in base.expressions])[:2]
    st = _tables(step)
    if st is None or len(st) != 2 or {t for t, _ in st} != {name, table} or name == table:
        return None
    p_ref = next(r for t, r in st if t == name)
    t_ref = next(r for t, r in st if t == table)
    conds = [j.args["on"] for j in step.args.get("joins") or [] if j.args.get("on") is not None]
    if step.args.get("where") is not None:
        conds.append(step.args["where"].this)
    if len(conds) != 1 or not isinstance(conds[0], exp.EQ):
        return None
    proj = [_col(e) for e in step.expressions]
    if len(proj) != 2 or None in proj or any(not c.table for c in proj):  # type: ignore[union-attr]
        return None
    ends = [_col(conds[0].this), _col(conds[0].expression)]
    if None in ends or any(not c.table for c in ends):  # type: ignore[union-attr]
        return None
    ref = lambda c: (c.table, c.name)  # noqa: E731
    pr = [ref(c) for c in proj]
    eq = {ref(c) for c in ends}
    right_linear = pr == [(p_ref, x), (t_ref, b)] and eq == {(p_ref, y), (t_ref, a)}
    left_linear = pr == [(t_ref, a), (p_ref, y)] and eq == {(t_ref, b), (p_ref, x)}
    return (0, 1) if right_linear or left_linear else None
