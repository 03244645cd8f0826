"""Time windows as table functions in FROM, each row of a table with the bounds of the windows it falls in
(`window_start`, `window_end`), to group by:

    SELECT window_start, COUNT(*) FROM tumble(events, ts, INTERVAL '5 minutes') GROUP BY window_start
    SELECT window_start, SUM(v) FROM hop(events, ts, INTERVAL '5 minutes', INTERVAL '15 minutes') GROUP BY 1
    SELECT k, window_start, window_end, COUNT(*) FROM session_window(events, ts, INTERVAL '10 minutes', k) GROUP BY ALL

- `tumble(t, ts, size)`: the window of `time_bucket(size, ts)` (DuckDB's buckets, `temporal.py`), one per row;
- `hop(t, ts, slide, size)`: the size / slide windows of `size` starting every `slide` that hold ts (a
  size that is a multiple of the slide; a row per window);
- `session_window(t, ts, gap[, key, ...])`: per key, times closer than `gap` chained into one session from its
  first time to its last plus the gap; maintained per key by the window operator (`operators/window.py`):
  a change refolds only the keys it touches, and an insert that bridges two sessions merges them, a
  delete splits one.

A row whose time is NULL is in no window. Widths are constant intervals of days and time (not months);
`ts` is a TIMESTAMP column of the table.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import polars as pl
from sqlglot import exp

from dbspark.frontends.sql.exprs import ExprCompiler, interval
from dbspark.frontends.sql.parse import name_of
from dbspark.frontends.sql.scope import Field, Rel, Scope
from dbspark.frontends.sql.temporal import DAY_US, EPOCH_2000_01_03_US, floor_div
from dbspark.ir import expr as ir
from dbspark.ir.order import SortKey
from dbspark.ir.window import WindowCall, WindowSpec

if TYPE_CHECKING:
    from dbspark.frontends.sql.joins import FromPlanner

FUNCTIONS = ("tumble", "hop", "session_window")  # (SESSION is a keyword of the SQL grammar)
EPOCH = dt.datetime(1970, 1, 1)


def is_time_window(node: exp.Expression) -> bool:
    return (
        isinstance(node, exp.Table)
        and isinstance(node.this, exp.Anonymous)
        and str(node.this.this).lower() in FUNCTIONS
    )


def lower(p: FromPlanner, node: exp.Table, alias: str | None) -> Rel:
    f = node.this
    name = str(f.this).lower()
    args = list(f.expressions)
    want = {"tumble": 3, "hop": 4}.get(name)
    if (want is not None and len(args) != want) or (name == "session_window" and len(args) < 3):
        p.src.schema_error(
            {
                "tumble": "tumble(table, time column, size)",
                "hop": "hop(table, time column, slide, size)",
                "session_window": "session_window(table, time column, gap[, key, ...])",
            }[name]
            + f" takes {'at least 3' if name == 'session_window' else want} arguments, got {len(args)}",
            node,
        )
    table = args[0]
    if not isinstance(table, exp.Column) or table.args.get("table"):
        p.src.schema_error(f"{name}: the first argument names a table", table)
    rel = p.c.table_rel(name_of(table.this), node).requalify(alias or name_of(table.this))
    schema = rel.stream.schema
    comp = ExprCompiler(Scope(rel.fields, p.src))
    ts = comp(args[1], schema)
    if ts.dtype(schema) != pl.Datetime("us"):
        p.src.schema_error(f"{name}: the time column must be a TIMESTAMP, not {ts.dtype(schema)}", args[1])
    micros = ir.Func("epoch_us", (ts,))
    s = rel.stream.filter(ir.Unary("not", ts.is_null()))
    start, end = p.c.names.fresh("ws"), p.c.names.fresh("we")
    keep = [(c, ir.Col(c)) for c in schema]
    if name in ("tumble", "hop"):
        size = _width(p, args[-1], name)
        slide = _width(p, args[2], name) if name == "hop" else size
        if size % slide:
            p.src.unsupported(f"{name}: a size that is not a multiple of the slide", node)
        bucket = floor_div(micros - ir.Lit(EPOCH_2000_01_03_US), slide) * ir.Lit(slide) + ir.Lit(
            EPOCH_2000_01_03_US
        )
        k = p.c.names.fresh("wk")
        if size == slide:
            s = s.map(*keep, (k, bucket))
        else:
            lo, hi, step, back = (p.c.names.fresh(x) for x in ("wl", "wh", "wt", "wb"))
            s = s.map(*keep, (k, bucket), (lo, ir.Lit(0)), (hi, ir.Lit(size // slide)), (step, ir.Lit(1)))
            s = s.ranges(lo, hi, step, back)
            s = s.map(*keep, (k, ir.Col(k) - ir.Col(back) * ir.Lit(slide)))
        s = s.map(*keep, (start, _timestamp(ir.Col(k))), (end, _timestamp(ir.Col(k) + ir.Lit(size))))
    else:
        gap = _width(p, args[2], name)
        keys = [comp(a, schema) for a in args[3:]]
        kc = [p.c.names.fresh("wp") for _ in keys]
        t = p.c.names.fresh("wt")
        s = s.map(*keep, *zip(kc, keys, strict=True), (t, micros))
        a, b = p.c.names.fresh("wa"), p.c.names.fresh("wb")
        calls = (
            WindowCall(a, "session_start", pl.Int64(), t, gap),
            WindowCall(b, "session_end", pl.Int64(), t, gap),
        )
        s = s.stream_window(WindowSpec(tuple(kc), (SortKey(t),), calls, tuple(s.columns)))
        s = s.map(*keep, (start, _timestamp(ir.Col(a))), (end, _timestamp(ir.Col(b))))
    q = alias or name_of(table.this)
    return Rel(s, [*rel.fields, Field("window_start", start, q), Field("window_end", end, q)])


def _width(p: FromPlanner, node: exp.Expression, name: str) -> int:
    if not isinstance(node, exp.Interval):
        p.src.unsupported(f"{name}: a width that is not a constant INTERVAL", node)
    months, days, micros = interval(node, p.src)
    if months:
        p.src.unsupported(f"{name}: a width of months (widths of days and time are supported)", node)
    w = days * DAY_US + micros
    if w <= 0:
        p.src.schema_error(f"{name}: a width must be positive", node)
    return w


def _timestamp(us: ir.Expr) -> ir.Expr:
    """A TIMESTAMP from microseconds since 1970."""
    return ir.Func("date_add", (ir.Lit(EPOCH), ir.Lit(0), ir.Lit(0), us))
