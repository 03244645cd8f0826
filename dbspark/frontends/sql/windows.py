"""Window functions in a SELECT list: `f(...) OVER (PARTITION BY ... ORDER BY ... [ROWS BETWEEN ...])`.

They are evaluated after WHERE, GROUP BY and HAVING, as in DuckDB: the windows of one PARTITION BY /
ORDER BY share one window operator (`operators/window.py`), whose output columns stand for the window
expressions wherever the SELECT list uses them. Functions: ROW_NUMBER, RANK, DENSE_RANK, PERCENT_RANK,
CUME_DIST, NTILE(n), LAG / LEAD(x[, n[, default]]), FIRST_VALUE, LAST_VALUE, and SUM, COUNT, AVG, MIN,
MAX over the default frame, a ROWS frame or a RANGE frame (bounds UNBOUNDED, CURRENT ROW, or an offset
from the one ORDER BY expression: a number, or an INTERVAL for a DATE / TIMESTAMP order). Refused,
naming them: GROUPS frames, EXCLUDE, RANGE offsets other than a number or an INTERVAL literal, named
windows, IGNORE NULLS, FILTER, DISTINCT inside a window call, and window functions outside the SELECT
list.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import polars as pl
from sqlglot import exp

from dbspark.frontends.sql.exprs import ExprCompiler, interval
from dbspark.frontends.sql.scope import Rel, Scope, canonical
from dbspark.ir.aggregate import AggCall, result_dtype
from dbspark.ir.expr import Col, Expr
from dbspark.ir.order import SortKey
from dbspark.ir.window import PEERS, WindowCall, WindowSpec

if TYPE_CHECKING:
    from dbspark.frontends.sql.compiler import Compiler

NAMES: dict[type, str] = {
    exp.RowNumber: "row_number",
    exp.Rank: "rank",
    exp.DenseRank: "dense_rank",
    exp.PercentRank: "percent_rank",
    exp.CumeDist: "cume_dist",
    exp.Ntile: "ntile",
    exp.Lag: "lag",
    exp.Lead: "lead",
    exp.FirstValue: "first_value",
    exp.LastValue: "last_value",
    exp.Sum: "sum",
    exp.Count: "count",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}


def windows_in(exprs: list[exp.Expression]) -> list[exp.Window]:
    """The window calls of expressions (outside subqueries), without repeats."""
    out: dict[str, exp.Window] = {}
    stack = list(exprs)
    while stack:
        n = stack.pop()
        if isinstance(n, (exp.Subquery, exp.Select, exp.Exists)):
            continue
        if isinstance(n, exp.Window):
            out.setdefault(canonical(n), n)
            continue
        stack.extend(n.iter_expressions())
    return list(out.values())


def lower(c: Compiler, rel: Rel, scope: Scope, items: list[tuple[str, exp.Expression]]) -> tuple[Rel, Scope]:
    """`rel` with a column per window call of the SELECT list, and `scope` naming them."""
    wins = windows_in([e for _, e in items])
    if not wins:
        return rel, scope
    groups: dict[tuple[str, str], list[exp.Window]] = {}
    for w in wins:
        _check(c, w)
        key = (
            "|".join(canonical(p) for p in w.args.get("partition_by") or []),
            canonical(w.args["order"]) if w.args.get("order") else "",
        )
        groups.setdefault(key, []).append(w)
    computed = dict(scope.computed)
    for ws in groups.values():
        comp = ExprCompiler(scope)
        s = rel.stream
        pre: list[tuple[str, object]] = []
        part: list[str] = []
        for p in ws[0].args.get("partition_by") or []:
            part.append(_named(c, comp(p, s.schema), "wp", s.schema, pre))
        order: list[SortKey] = []
        for o in ws[0].args["order"].expressions if ws[0].args.get("order") else []:
            col = _named(c, comp(o.this, s.schema), "wo", s.schema, pre)
            order.append(SortKey(col, bool(o.args.get("desc")), bool(o.args.get("nulls_first"))))
        calls = []
        for w in ws:
            call, more = _call(c, w, comp, s.schema)
            pre += more
            calls.append(call)
            computed[canonical(w)] = call.out
        s = s.map(*s.columns, *pre) if pre else s
        s = s.stream_window(WindowSpec(tuple(part), tuple(order), tuple(calls), tuple(s.columns)))
        rel = Rel(s, rel.fields)
    return rel, replace(scope, computed=computed)


def _named(c: Compiler, e: Expr, prefix: str, schema: pl.Schema, pre: list[tuple[str, object]]) -> str:
    """The column holding `e`: its own for a column of the input, else a new one computed first (`pre`)."""
    if isinstance(e, Col) and e.name in schema:
        return e.name
    name = c.names.fresh(prefix)
    pre.append((name, e))
    return name


def _check(c: Compiler, w: exp.Window) -> None:
    f = w.this
    if isinstance(f, (exp.IgnoreNulls, exp.RespectNulls)):
        c.src.unsupported("IGNORE / RESPECT NULLS in a window", w)
    if w.args.get("alias"):
        c.src.unsupported(f"the named window {w.args['alias'].sql(dialect='duckdb')}", w)
    if isinstance(f, exp.Filter) or w.find(exp.Filter):
        c.src.unsupported("FILTER in a window call", w)
    if type(f) not in NAMES:
        c.src.unsupported(f"the window function {f.sql(dialect='duckdb')[:60]}", w)
    if isinstance(f.this, exp.Distinct):
        c.src.unsupported("DISTINCT in a window call", w)


def _call(
    c: Compiler, w: exp.Window, comp: ExprCompiler, schema: pl.Schema
) -> tuple[WindowCall, list[tuple[str, object]]]:
    f = w.this
    func = NAMES[type(f)]
    out = c.names.fresh("w")
    pre: list[tuple[str, object]] = []
    arg: str | None = None
    arg_expr = (
        f.this if func not in ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist") else None
    )
    if func == "count" and (arg_expr is None or isinstance(arg_expr, exp.Star)):
        func, arg_expr = "count_star", None
    t: pl.DataType = pl.Int64()
    n = 1
    if func == "ntile":
        n = c.constant_int(f.this, "NTILE's number of buckets")
        if n <= 0:
            c.src.schema_error("NTILE's number of buckets must be positive", f)
        arg_expr = None
    if arg_expr is not None:
        e = comp(arg_expr, schema)
        arg = _named(c, e, "wx", schema, pre)
        t = e.dtype(schema)
    default = None
    if func in ("lag", "lead"):
        if f.args.get("offset") is not None:
            n = c.constant_int(f.args["offset"], f"{func.upper()}'s offset")
        if f.args.get("default") is not None:
            default = c.names.fresh("wd")
            pre.append((default, comp(f.args["default"], schema)))
    dtype = {
        "percent_rank": pl.Float64(),
        "cume_dist": pl.Float64(),
        "avg": pl.Float64(),
        "lag": t,
        "lead": t,
        "first_value": t,
        "last_value": t,
        "min": t,
        "max": t,
        "sum": result_dtype(AggCall(out, "sum", "x"), pl.Schema({"x": t})),
    }.get(func, pl.Int64())
    rows, start, end = _frame(c, w)
    bounds = _range(c, w, comp, schema, pre) if _ranged(w) else None
    return WindowCall(out, func, dtype, arg, n, default, rows, start, end, bounds), pre


def _kind(w: exp.Window) -> str:
    spec = w.args.get("spec")
    return str(spec.args.get("kind") or "").upper() if spec is not None else ""


def _frame(c: Compiler, w: exp.Window) -> tuple[bool, int | None, int | None]:
    """(ROWS frame?, start, end) as offsets from the current row (None: unbounded); a RANGE frame other
    than the default and the whole partition is described by `_range` (`WindowCall.bounds`)."""
    spec = w.args.get("spec")
    if spec is None:
        return False, None, None
    kind = _kind(w)
    if spec.args.get("exclude") or kind not in ("ROWS", "RANGE"):
        c.src.unsupported(
            f"the window frame {spec.sql(dialect='duckdb')} (ROWS and RANGE frames without EXCLUDE are)", w
        )
    for key, wrong in (("start", "FOLLOWING"), ("end", "PRECEDING")):
        if _word(spec, key) == "UNBOUNDED" and str(spec.args.get(f"{key}_side") or "").upper() == wrong:
            c.src.schema_error(f"a window frame cannot {key} at UNBOUNDED {wrong}", w)
    if kind == "RANGE":  # the whole partition, else the default frame or `_range`'s
        return _word(spec, "start") == _word(spec, "end") == "UNBOUNDED", None, None
    start = _bound(c, spec, "start", "start_side", w)
    end = _bound(c, spec, "end", "end_side", w) if spec.args.get("end") is not None else 0
    return True, start, end


def _ranged(w: exp.Window) -> bool:
    """Whether `w` has a RANGE frame other than the default and the whole partition."""
    if _kind(w) != "RANGE":
        return False
    spec = w.args["spec"]
    return not (_word(spec, "start") == "UNBOUNDED" and _word(spec, "end") in ("CURRENT ROW", "UNBOUNDED"))


def _word(spec: exp.WindowSpec, key: str) -> str:
    """UNBOUNDED or CURRENT ROW for such a bound (a frame without an end ends at CURRENT ROW), else ""."""
    v = spec.args.get(key)
    if v is None and key == "end":
        return "CURRENT ROW"
    return v.upper() if isinstance(v, str) else ""


def _plain(spec: exp.WindowSpec) -> bool:
    """Whether a RANGE frame's bounds are UNBOUNDED or CURRENT ROW only."""
    return all(_word(spec, k) in ("UNBOUNDED", "CURRENT ROW") for k in ("start", "end"))


def _bound(c: Compiler, spec: exp.WindowSpec, key: str, side: str, w: exp.Window) -> int | None:
    v = spec.args.get(key)
    s = str(spec.args.get(side) or "").upper()
    text = v if isinstance(v, str) else None
    if text is not None and text.upper() == "UNBOUNDED":
        return None
    if text is not None and text.upper() == "CURRENT ROW":
        return 0
    if not isinstance(v, exp.Expression):
        c.src.unsupported(f"the window frame {spec.sql(dialect='duckdb')}", w)
    k = c.constant_int(v, "a window frame's offset")
    return -k if s == "PRECEDING" else k


def _range(
    c: Compiler, w: exp.Window, comp: ExprCompiler, schema: pl.Schema, pre: list[tuple[str, object]]
) -> tuple[str | None, str | None]:
    """A RANGE frame's bounds (`WindowCall.bounds`): UNBOUNDED, CURRENT ROW (the peers' end: any ORDER BY)
    or `x PRECEDING` / `x FOLLOWING`, whose value (the one ORDER BY expression moved by x: a number for a
    numeric order, an INTERVAL for a DATE or TIMESTAMP one, DuckDB's rule) is a column computed first."""
    spec = w.args["spec"]
    order = w.args["order"].expressions if w.args.get("order") else []
    sides = [str(spec.args.get(k) or "").upper() for k in ("start_side", "end_side")]
    if not _plain(spec) and sides[0] == "FOLLOWING" and sides[1] == "PRECEDING":
        c.src.schema_error("a window frame that starts FOLLOWING cannot end PRECEDING", w)
    out: list[str | None] = []
    o = order[0] if len(order) == 1 else None
    t = comp(o.this, schema).dtype(schema) if o is not None else None
    for key, side in zip(("start", "end"), sides, strict=True):
        word = _word(spec, key)
        if word == "UNBOUNDED":
            out.append(None)
            continue
        if word == "CURRENT ROW":
            out.append(PEERS)
            continue
        if o is None or t is None:
            c.src.schema_error("a RANGE frame with an offset needs exactly one ORDER BY expression", w)
        offset = spec.args[key]
        if isinstance(offset, exp.Interval):
            if any(v < 0 for v in interval(offset, c.src)):
                c.src.schema_error(f"a RANGE frame's offset {offset.sql(dialect='duckdb')} is negative", w)
            if not t.is_temporal():
                c.src.schema_error(f"a RANGE frame's INTERVAL offset over the {t} ORDER BY {o.this.sql()}", w)
        elif isinstance(offset, exp.Literal) and not offset.is_string:
            if not t.is_numeric():
                c.src.schema_error(f"a RANGE frame's numeric offset over the {t} ORDER BY {o.this.sql()}", w)
        else:
            c.src.unsupported(
                f"the RANGE frame offset {offset.sql(dialect='duckdb')} (a number or an INTERVAL literal is)",
                w,
            )
        later = (side == "FOLLOWING") != bool(o.args.get("desc"))  # the bound's value is above the row's
        moved = (exp.Add if later else exp.Sub)(this=o.this.copy(), expression=offset.copy())
        name = c.names.fresh("wb")
        pre.append((name, comp(moved, schema)))
        out.append(name)
    return out[0], out[1]
