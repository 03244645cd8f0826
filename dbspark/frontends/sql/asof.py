"""ASOF joins, as DuckDB has them: `l ASOF [LEFT] JOIN r ON l.k = r.k AND l.ts >= r.ts` pairs each row of l
with the one row of r of its keys whose r.ts is the greatest at or before l.ts (`>`: before; `<=` / `<`:
the least at or after / after); an inner ASOF join drops the rows of l without one, a LEFT one pads them.

Both sides go into one stream, partitioned by the keys and ordered by the inequality's values (the right
side's rows first where they tie with a left row under `>=` and `<=`), and a window call (`asof`,
`columnar/window_fold.py`) gives each left row the right columns of the last right row before it. The
window is maintained per partition (`operators/window.py`): a change of either side refolds only the
keys it touches, deletes included. Rows of r tied at one key and value are told apart by their other
columns (DuckDB picks one of them). A NULL key or value matches nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl
from sqlglot import exp

from dbspark.frontends.sql.exprs import ExprCompiler
from dbspark.frontends.sql.scope import Rel, Scope
from dbspark.frontends.sql.types import common_type
from dbspark.ir import expr as ir
from dbspark.ir.order import SortKey
from dbspark.ir.window import WindowCall, WindowSpec

if TYPE_CHECKING:
    from dbspark.frontends.sql.joins import FromPlanner

MIRROR: dict[type, type] = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.LT: exp.GT}


def asof_join(p: FromPlanner, left: Rel, right: Rel, side: str, on: Any, node: Any) -> Rel:
    """`left ASOF [LEFT] JOIN right ON ...` (`side` "" or "LEFT")."""
    from dbspark.frontends.sql.joins import conjuncts

    src = p.src
    if side not in ("", "LEFT"):
        src.unsupported(f"ASOF {side} JOIN (ASOF JOIN and ASOF LEFT JOIN are)", node)
    if on is None:
        src.unsupported("ASOF JOIN without ON (write ON l.k = r.k AND l.ts >= r.ts)", node)
    conds = conjuncts(on)
    keys = p.equi_keys(left, right, conds)
    rest = [c for c in conds if all(c is not k[0] for k in keys)]
    if len(rest) != 1 or type(rest[0]) not in MIRROR:
        src.unsupported(
            "an ASOF JOIN condition that is not key equalities and one >=, >, <= or < comparison", node
        )
    (c,) = rest
    x, y, op = c.this, c.expression, type(c)
    if p.sides(x, left, right) == "b" and p.sides(y, left, right) == "a":
        x, y, op = y, x, MIRROR[op]
    elif not (p.sides(x, left, right) == "a" and p.sides(y, left, right) == "b"):
        src.unsupported("an ASOF JOIN comparison that does not compare the left side with the right", c)
    ls, rs = left.stream.schema, right.stream.schema
    cl, cr = ExprCompiler(Scope(left.fields, src)), ExprCompiler(Scope(right.fields, src))
    names = p.c.names
    pairs = [(cl(k[1], ls), cr(k[2], rs)) for k in keys] + [(cl(x, ls), cr(y, rs))]
    cols = [names.fresh("ak") for _ in keys] + [names.fresh("at")]
    typed: list[tuple[ir.Expr, ir.Expr]] = []
    for (a, b), node_ in zip(pairs, [*(k[0] for k in keys), c], strict=True):
        ta, tb = a.dtype(ls), b.dtype(rs)
        t = common_type(ta, tb)
        if t is None:
            src.schema_error(f"ASOF JOIN compares {ta} with {tb}", node_)
        typed.append((a if ta == t else ir.Cast(a, t), b if tb == t else ir.Cast(b, t)))
    kcols, tcol = cols[:-1], cols[-1]
    lcols, rcols = list(ls), list(rs)
    side_col, found = names.fresh("as"), names.fresh("ah")

    def null(t: pl.DataType) -> ir.Expr:
        return ir.Cast(ir.Lit(None), t)

    lefts = left.stream.map(
        *[(q, ir.Col(q)) for q in lcols],
        *[(q, null(rs[q])) for q in rcols],
        *[(q, a) for q, (a, _) in zip(cols, typed, strict=True)],
        (side_col, ir.Lit(1)),
        (found, null(pl.Int64())),
    )
    present: ir.Expr | None = None
    for _, b in typed:
        test = ir.Unary("not", b.is_null())
        present = test if present is None else ir.Binary("and", present, test)
    assert present is not None
    rights = right.stream.filter(present).map(
        *[(q, null(ls[q])) for q in lcols],
        *[(q, ir.Col(q)) for q in rcols],
        *[(q, b) for q, (_, b) in zip(cols, typed, strict=True)],
        (side_col, ir.Lit(0)),
        (found, ir.Lit(1)),
    )
    both = lefts + rights
    desc = op in (exp.LTE, exp.LT)
    right_first = op in (exp.GTE, exp.LTE)
    order = (SortKey(tcol, desc, False), SortKey(side_col, not right_first, False))
    outs = {q: names.fresh("aq") for q in [*rcols, found]}
    calls = tuple(
        WindowCall(outs[q], "asof", pl.Int64() if q == found else rs[q], q, default=side_col) for q in outs
    )
    win = both.stream_window(WindowSpec(tuple(kcols), order, calls, tuple(both.columns)))
    matched: ir.Expr = ir.Unary("not", ir.Col(outs[found]).is_null())
    matched = ir.Binary("and", matched, ir.Unary("not", ir.Col(tcol).is_null()))
    for k in kcols:
        matched = ir.Binary("and", matched, ir.Unary("not", ir.Col(k).is_null()))
    mine = win.filter(ir.Col(side_col).eq(ir.Lit(1)))
    values: list[tuple[str, ir.Expr]]
    if side != "LEFT":
        mine = mine.filter(matched)
        values = [(q, ir.Col(outs[q])) for q in rcols]
    else:
        values = [(q, ir.Case(((matched, ir.Col(outs[q])),), null(rs[q]))) for q in rcols]
    return Rel(mine.map(*[(q, ir.Col(q)) for q in lcols], *values), left.fields + right.fields)
