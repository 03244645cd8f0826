"""GROUP BY and aggregate functions (`dbsp-paper.txt` §7.2; the core's `stream_aggregate`).

Keys and aggregate arguments are computed into columns first; the aggregates run in one
`stream_aggregate`; DISTINCT aggregates run on the distinct (keys, argument) rows and are joined back
on the keys, NULL keys matching NULL keys. After aggregation, expressions find the keys and the
aggregates by their SQL text (`Scope.computed`); any other column is an error naming it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl
from sqlglot import exp

from dbspark.frontends.sql import bit_aggregates as bits
from dbspark.frontends.sql.exprs import AGGREGATES, ExprCompiler
from dbspark.frontends.sql.parse import name_of
from dbspark.frontends.sql.relops import null_safe_keys
from dbspark.frontends.sql.scope import Field, Rel, Scope, bound, canonical
from dbspark.ir import expr as ir
from dbspark.ir import functions as fn

if TYPE_CHECKING:
    from dbspark.frontends.sql.compiler import Compiler

FUNCS: dict[type, str] = {
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.Stddev: "stddev_samp",
    exp.StddevSamp: "stddev_samp",
    exp.StddevPop: "stddev_pop",
    exp.Variance: "var_samp",
    exp.VariancePop: "var_pop",
    exp.Median: "median",
    exp.Mode: "mode",
    exp.Count: "count",
}


def find_aggregates(exprs: list[exp.Expression]) -> list[exp.Expression]:
    """Aggregate calls in expressions, outside subqueries, in order of appearance, without repeats."""
    out: dict[str, exp.Expression] = {}
    stack = list(reversed(exprs))
    while stack:
        n = stack.pop()
        if isinstance(n, (exp.Subquery, exp.Select, exp.Exists)):
            continue
        if isinstance(n, exp.Window):  # a window call is not an aggregate; what it reads may be
            stack.extend(
                reversed(
                    [
                        *n.this.iter_expressions(),
                        *(e for k, e in n.args.items() if k != "this" and isinstance(e, exp.Expression)),
                        *(n.args.get("partition_by") or []),
                    ]
                )
            )
            continue
        if isinstance(n, AGGREGATES):
            out.setdefault(canonical(n), n)
            continue
        stack.extend(reversed(list(n.iter_expressions())))
    return list(out.values())


def aggregate(
    c: Compiler, node: exp.Select, rel: Rel, scope: Scope, items: list[tuple[str, exp.Expression]]
) -> tuple[Rel, Scope, list[tuple[str, exp.Expression]]]:
    src = c.src
    comp = ExprCompiler(scope)
    keys = group_keys(c, node, items, scope)
    exprs = [e for _, e in items]
    if node.args.get("having") is not None:
        exprs.append(node.args["having"].this)
    if node.args.get("order") is not None and node.args.get("limit") is not None:
        exprs += [o.this for o in node.args["order"].expressions]
    aggs = find_aggregates(exprs)
    pre: list[tuple[str, ir.Expr]] = []
    key_cols: list[str] = []
    computed: dict[str, str] = {}
    fields: list[Field] = []
    for k in keys:
        ident = bound(k, scope)
        if ident in computed:  # a repeated key (GROUP BY a, t.a): one column
            computed[canonical(k)] = computed[ident]
            continue
        col = c.names.fresh("g")
        pre.append((col, comp(k, rel.stream.schema)))
        key_cols.append(col)
        computed[canonical(k)] = computed[ident] = col
        if isinstance(k, exp.Column):
            f = _field_of(scope, k)
            if f is not None:
                fields.append(Field(f.name, col, f.qualifier, f.hidden))
    calls: dict[str, Any] = {}
    distinct_calls: list[tuple[str, str, str]] = []  # (out col, func, arg col)
    # Spark's dialect: SUM(DECIMAL(p, s)) typed DECIMAL(p + 10, s), AVG's DECIMAL(p + 4, s + 4)
    spark_post: dict[str, ir.Expr] = {}  # (and the BOOL_ / BIT_ aggregates' values, from their `helpers`)
    helpers: set[str] = set()
    for a in aggs:
        for inner in a.iter_expressions():
            if find_aggregates([inner]):
                src.schema_error(f"aggregate inside aggregate: {a.sql(dialect='duckdb')}", a)
        ident = bound(a, scope)
        if ident in computed:  # the same aggregate written differently (SUM(t.a), SUM(a))
            computed[canonical(a)] = computed[ident]
            continue
        out = c.names.fresh("a")
        computed[canonical(a)] = computed[ident] = out
        if type(a) in bits.KINDS:
            arg_ir = comp(_plain_argument(c, a), rel.stream.schema)
            helpers |= _bit_call(
                c, a, arg_ir, arg_ir.dtype(rel.stream.schema), out, pre, calls, spark_post, items
            )
            continue
        func = FUNCS[type(a)]
        arg = a.this
        if isinstance(a, exp.Count) and (arg is None or isinstance(arg, exp.Star)):
            calls[out] = "count_star"
            continue
        distinct = isinstance(arg, exp.Distinct)
        if distinct:
            if len(arg.expressions) != 1:
                src.unsupported(f"{func.upper()}(DISTINCT with several arguments)", a)
            arg = arg.expressions[0]
        if a.args.get("expressions") and not isinstance(a, exp.Count):
            src.unsupported(f"{func.upper()} with several arguments", a)
        acol = c.names.fresh("x")
        arg_ir = comp(arg, rel.stream.schema)
        if func == "median":  # the core's MEDIAN has DuckDB's types (`ir.aggregate.median_dtype`)
            t = arg_ir.dtype(rel.stream.schema)
            if t.is_temporal() and t != pl.Date() and not isinstance(t, pl.Datetime):
                src.unsupported(f"MEDIAN of a {t}", a)
        t = arg_ir.dtype(rel.stream.schema)
        if src.dialect == "spark" and func in ("sum", "avg") and isinstance(t, pl.Decimal):
            if func == "avg":  # Spark's: SUM / COUNT as DECIMALs, then cast to DECIMAL(p + 4, s + 4)
                if distinct:
                    src.unsupported("AVG(DISTINCT) of a DECIMAL in Spark's dialect", a)
                pre.append((acol, arg_ir))
                hs, hn = c.names.fresh("a"), c.names.fresh("a")
                calls[hs] = ("sum", acol, call_label(c.view, a, items))
                calls[hn] = ("count", acol, call_label(c.view, a, items))
                spark_post[out] = spark_avg(hs, hn, t)
                continue
            spark_post[out] = ir.Cast(ir.Col(out), _bounded((t.precision or 38) + 10, t.scale or 0))
        pre.append((acol, arg_ir))
        if distinct:
            distinct_calls.append((out, func, acol))
        else:
            calls[out] = (func, acol, call_label(c.view, a, items))
    base = rel.stream.map(*pre) if pre else rel.stream.map((c.names.fresh(), ir.Lit(True)))
    if not calls:
        calls[c.names.fresh("a")] = "count_star"
    s = base.stream_aggregate(key_cols or None, **calls)
    keep = key_cols + list(calls)
    for out, func, acol in distinct_calls:
        keep.append(out)
        d = (
            base.map(*key_cols, acol)
            .stream_distinct()
            .stream_aggregate(key_cols or None, **{out: (func, acol)})
        )
        if key_cols:
            left, lk = null_safe_keys(s, key_cols, c.names)
            right, rk = null_safe_keys(d, key_cols, c.names)
            right = right.map(*rk, out)
            s = left.stream_join(right, left_on=lk, right_on=rk).map(*keep)
        else:
            s = s.stream_product(d)
    if spark_post:  # (a sum past Spark's precision is an error, as in Spark's ANSI mode)
        s = s.map(*[n for n in s.schema if n not in spark_post and n not in helpers], *spark_post.items())
    post = Scope(fields, src, computed=computed, outer=scope.outer, grouped=True, pre=scope)
    return Rel(s, fields), post, items


def _plain_argument(c: Compiler, a: exp.Expression) -> exp.Expression:
    """The argument of a BOOL_/BIT_ aggregate; DISTINCT changes nothing but BIT_XOR's (refused there)."""
    arg = a.this
    if isinstance(arg, exp.Distinct):
        if len(arg.expressions) != 1 or isinstance(a, exp.BitwiseXorAgg):
            c.src.unsupported(f"{bits.KINDS[type(a)].upper()}(DISTINCT ...)", a)
        arg = arg.expressions[0]
    return arg


def _bit_call(
    c: Compiler,
    a: exp.Expression,
    arg: ir.Expr,
    t: pl.DataType,
    out: str,
    pre: list[tuple[str, ir.Expr]],
    calls: dict[str, Any],
    post: dict[str, ir.Expr],
    items: list[tuple[str, exp.Expression]],
) -> set[str]:
    """A BOOL_/BIT_ aggregate as counts (`bit_aggregates.py`): its columns before the aggregate, its
    linear calls, and its value after; returns the calls' columns (dropped after the value is made)."""
    kind = bits.KINDS[type(a)]
    acol = c.names.fresh("x")
    pre.append((acol, arg))
    label = call_label(c.view, a, items)
    why = bits.argument_error(kind, t)
    if why is not None:
        c.src.schema_error(f"{label}: {why}", a)
    extra, counts, value = bits.lowered(kind, arg, acol, t, lambda: c.names.fresh("a"))
    pre += extra
    for name, (func, column) in counts.items():
        calls[name] = (func, column, label)
    post[out] = value
    return set(counts)


def _field_of(scope: Scope, col: exp.Column) -> Field | None:
    found = scope.find(col)
    if found is None:
        return None
    return next((f for f in scope.fields if f.col == found), None)


def call_label(view: str, a: exp.Expression, items: list[tuple[str, exp.Expression]]) -> str:
    """How errors name an aggregate call: its view, its SQL text and the output column it is."""
    alias = next((name for name, e in items if e is a or e == a), None)
    text = a.sql(dialect="duckdb") + (f" AS {alias}" if alias else "")
    return f"view {view!r}, {text}" if view else text


def group_keys(
    c: Compiler, node: exp.Select, items: list[tuple[str, exp.Expression]], scope: Scope
) -> list[exp.Expression]:
    """GROUP BY expressions bound as DuckDB binds them: a position (GROUP BY 1) is that SELECT item; a
    bare name is a column of the FROM clause if there is one, else a SELECT alias (whose expression is
    then the key); GROUP BY ALL is every SELECT item without an aggregate. Aliases are not expanded inside
    expressions (DuckDB refuses that)."""
    group = node.args.get("group")
    if group is None:
        return []
    if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
        c.src.unsupported("ROLLUP / CUBE / GROUPING SETS", group)
    if group.args.get("all"):
        return [e for _, e in items if not find_aggregates([e])]
    out = []
    aliases = {name_of(e.args["alias"]): e.this for e in node.expressions if isinstance(e, exp.Alias)}
    for g in group.expressions:
        if isinstance(g, exp.Literal) and not g.is_string and g.this.isdigit():  # 1.25 is a constant key
            i = int(g.this)
            if not 1 <= i <= len(items):
                c.src.schema_error(f"GROUP BY position {i} is not in the select list", g)
            target = items[i - 1][1]
        elif (
            isinstance(g, exp.Column)
            and not g.args.get("table")
            and scope.find(g) is None
            and name_of(g.this) in aliases
        ):
            target = aliases[name_of(g.this)]
        else:
            out.append(g)
            continue
        if find_aggregates([target]):
            c.src.schema_error(
                f"GROUP BY {g.sql(dialect='duckdb')} refers to an aggregate ({target.sql(dialect='duckdb')})",
                g,
            )
        out.append(target)
    return out


def _bounded(p: int, s: int) -> pl.Decimal:
    """Spark's `DecimalType.bounded`: precision and scale at most 38."""
    return pl.Decimal(min(p, 38), min(s, 38))


def spark_avg(total: str, count: str, t: pl.Decimal) -> ir.Expr:
    """Spark's AVG of a DECIMAL(p, s) from its sum and count columns: the sum as DECIMAL(p + 10, s) divided
    by the count as DECIMAL(20, 0) (Spark's DECIMAL division, `functions.spark_decimal_quotient`), cast
    to DECIMAL(p + 4, s + 4), rounding half-up each time as Spark does (`Average.evaluateExpression`)."""
    p, s = t.precision or 38, t.scale or 0
    st = _bounded(p + 10, s)
    q = fn.spark_decimal_quotient((st.precision or 38, st.scale or 0), (20, 0))
    div = ir.Func(
        "spark_decimal_div",
        (ir.Cast(ir.Col(total), st), ir.Cast(ir.Col(count), pl.Decimal(20, 0)), ir.Lit(q[0]), ir.Lit(q[1])),
    )
    return ir.Cast(div, _bounded(p + 4, s + 4))
