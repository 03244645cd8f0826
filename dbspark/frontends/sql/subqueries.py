"""Subqueries in conditions and as scalar values, decorrelated into joins.

- `EXISTS (q)` / `NOT EXISTS (q)`: the correlation equalities of q's WHERE clause become join keys of a
  semi-join / anti-join (`dbsp-paper.txt` §7.5); other correlated conditions are checked on the join
  of the outer rows with q's rows, and the outer rows that pass are matched back as whole rows.
- `x IN (q)`: a semi-join on x; `x NOT IN (q)` an anti-join that also follows SQL's NULL rules (no row
  when q holds a NULL, or x is NULL and q is not empty).
- A scalar subquery `(q)`: uncorrelated, q's one row is joined to every outer row (NULL when q is
  empty); q is maintained like any relation, and unless it is a global aggregate (one row by
  construction) a step in which it holds several rows is rejected, naming the view, as DuckDB raises
  (`Compiler.guard`). Correlated by equalities with an aggregate, q is grouped by its correlation
  columns and left-joined on them (an outer row without a group gets q's value over no rows, e.g.
  COUNT = 0); without an aggregate, q's rows are joined to the outer rows they belong to, and an outer
  row with several rejects the step.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import polars as pl
from sqlglot import exp

from dbspark.frontends.sql.aggregates import find_aggregates
from dbspark.frontends.sql.exprs import ExprCompiler
from dbspark.frontends.sql.joins import FromPlanner, columns_of, conjuncts, has_subquery
from dbspark.frontends.sql.relops import add_columns, cast_to, drop_to, semi_rows
from dbspark.frontends.sql.scope import CorrelatedReference, Field, Rel, Scope, canonical
from dbspark.frontends.sql.types import common_type
from dbspark.ir import expr as ir

if TYPE_CHECKING:
    from dbspark.circuit.stream import Stream
    from dbspark.frontends.sql.compiler import Compiler

COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
STRICT = (
    exp.Column,
    exp.Literal,
    exp.Paren,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Neg,
    exp.Cast,
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.Median,
    exp.Mode,
    exp.Stddev,
    exp.StddevSamp,
    exp.StddevPop,
    exp.Variance,
    exp.VariancePop,
)


class SubqueryLowering:
    def __init__(self, compiler: Compiler, outer: Scope | None) -> None:
        self.c = compiler
        self.src = compiler.src
        self.outer = outer

    def scope(self, rel: Rel, like: Scope | None = None) -> Scope:
        if like is None:
            return Scope(rel.fields, self.src, outer=self.outer)
        return replace(like, fields=rel.fields, computed=dict(like.computed), correlated=None)

    # ---- conditions -----------------------------------------------------------------------------
    def condition(self, rel: Rel, cond: exp.Expression, scope: Scope | None = None) -> Rel:
        """Rows of `rel` for which the condition (a conjunct with a subquery) is TRUE."""
        scope = scope or self.scope(rel)
        negate = False
        node = cond.unnest() if isinstance(cond, exp.Paren) else cond
        if isinstance(node, exp.Not):
            negate, node = True, node.this.unnest() if isinstance(node.this, exp.Paren) else node.this
        if isinstance(node, exp.Exists):
            return self.exists(rel, node.this, scope, negate)
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            return self.in_query(rel, node, scope, negate)
        rel, scope = self.scalars(rel, cond, scope, direct=_direct_operands(cond))
        return Rel(rel.stream.filter(ExprCompiler(scope)(cond, rel.stream.schema)), rel.fields)

    def exists(
        self, rel: Rel, sub: exp.Expression, scope: Scope, negate: bool, extra: exp.Expression | None = None
    ) -> Rel:
        sel = sub.this if isinstance(sub, exp.Subquery) else sub
        if not isinstance(sel, exp.Select):
            self.src.unsupported("EXISTS over a set operation", sub)
        inner, eqs, residual = self.decorrelate(sel, scope, extra)
        if not eqs and not residual:  # uncorrelated: every outer row, or none
            n = self.c.names.fresh()
            cnt = inner.stream.stream_aggregate(**{n: "count"})
            flag = cnt.filter(ir.Col(n).eq(0) if negate else ir.Col(n) > 0).map(
                (self.c.names.fresh(), ir.Lit(1))
            )
            s = rel.stream.stream_product(flag)
            return Rel(drop_to(s, list(rel.stream.schema)), rel.fields)
        rel2, okeys = self.outer_keys(rel, scope, [o for o, _ in eqs])
        renamed = self.c.disjoint(rel2.stream.schema, inner)
        ikeys = [dict(zip(inner.stream.schema, renamed.stream.schema, strict=True))[i] for _, i in eqs]
        inner = renamed
        outer_s, inner_s = self.align(rel2.stream, okeys, inner.stream, ikeys)
        base = list(rel.stream.schema)
        if not residual:
            s = (
                outer_s.stream_antijoin(inner_s, left_on=okeys, right_on=ikeys)
                if negate
                else outer_s.stream_semijoin(inner_s, left_on=okeys, right_on=ikeys)
            )
            return Rel(drop_to(s, base), rel.fields)
        j = (
            outer_s.stream_join(inner_s, left_on=okeys, right_on=ikeys)
            if okeys
            else outer_s.stream_product(inner_s)
        )
        combined = Scope(
            inner.fields, self.src, outer=Scope(rel.fields, self.src, computed=scope.computed), correlated=[]
        )
        comp = ExprCompiler(combined)
        pred: ir.Expr | None = None
        for r in residual:
            e = comp(r, j.schema)
            pred = e if pred is None else ir.Binary("and", pred, e)
        matched = drop_to(j.filter(pred), base)  # type: ignore[arg-type]
        return semi_rows(rel, matched, base, self.c.names, anti=negate)

    def in_query(self, rel: Rel, node: exp.In, scope: Scope, negate: bool) -> Rel:
        parts = self.in_parts(rel, node, scope, correlated_ok=True)
        if parts is None and negate:  # correlated NOT IN: NOT of the three-valued IN
            marked, col = self.mark(rel, node, scope)
            kept = marked.stream.filter(ir.Unary("not", ir.Col(col)))
            return Rel(drop_to(kept, list(rel.stream.schema)), rel.fields)
        if parts is None:  # correlated: EXISTS with the equality of x and the item
            sel = _select_of(node)
            item = sel.expressions[0]
            item = item.this if isinstance(item, exp.Alias) else item
            return self.exists(
                rel, sel, scope, False, extra=exp.EQ(this=node.this.copy(), expression=item.copy())
            )
        outer_s, inner_s, xcol, rcol = parts
        base = list(rel.stream.schema)
        if not negate:
            return Rel(
                drop_to(outer_s.stream_semijoin(inner_s, left_on=xcol, right_on=rcol), base), rel.fields
            )
        anti = outer_s.stream_antijoin(inner_s, left_on=xcol, right_on=rcol)
        stats, n, nn = self.null_stats(inner_s, rcol)
        ok = ir.Binary(
            "or", ir.Col(n).eq(0), ir.Binary("and", ir.Col(nn).eq(ir.Col(n)), ir.Col(xcol).is_not_null())
        )
        return Rel(drop_to(anti.stream_product(stats).filter(ok), base), rel.fields)

    def in_parts(self, rel: Rel, node: exp.In, scope: Scope, correlated_ok: bool) -> Any:
        """(outer stream with x's column, the subquery's one column, x's column, the subquery's column),
        with the key types aligned; None for a correlated subquery (when `correlated_ok`)."""
        sub = node.args["query"]
        sel = _select_of(node)
        try:
            r = self.c.query(sel, scope)
        except CorrelatedReference:
            if not correlated_ok:
                self.src.unsupported("a correlated IN subquery here", sub)
            if not isinstance(sel, exp.Select) or len(sel.expressions) != 1:
                self.src.schema_error("an IN subquery must return one column", sub)
            return None
        if len(r.visible()) != 1:
            self.src.schema_error(
                f"an IN subquery must return one column, this one returns {len(r.visible())}", sub
            )
        rcol = r.visible()[0].col
        rel2, (xcol,) = self.outer_keys(rel, scope, [node.this], [r.stream.schema[rcol]])
        outer_s, inner_s = self.align(rel2.stream, [xcol], drop_to(r.stream, [rcol]), [rcol])
        return outer_s, inner_s, xcol, rcol

    def null_stats(self, inner: Stream, col: str) -> tuple[Stream, str, str]:
        """One row: the number of rows of `inner` and of its non-NULL values in `col`."""
        n, nn = self.c.names.fresh(), self.c.names.fresh()
        return inner.stream_aggregate(**{n: "count", nn: ("count", col)}), n, nn

    # ---- subqueries as boolean values (mark joins) ----------------------------------------------
    def mark(self, rel: Rel, node: exp.Expression, scope: Scope) -> tuple[Rel, str]:
        """`rel` with a boolean column holding EXISTS (q) or x IN (q) for each row (three-valued)."""
        base = list(rel.stream.schema)
        col = self.c.names.fresh("m")
        if isinstance(node, exp.Exists):
            matched = self.exists(rel, node.this, scope, False).stream
            yes = matched.map(*base, (col, ir.Lit(True)))
            no = (rel.stream - matched).map(*base, (col, ir.Lit(False)))
            return Rel(yes + no, rel.fields), col
        assert isinstance(node, exp.In)
        parts = self.in_parts(rel, node, scope, correlated_ok=True)
        if parts is None:
            return self.mark_correlated_in(rel, node, scope, col)
        outer_s, inner_s, xcol, rcol = parts
        cols = list(outer_s.schema)
        matched = outer_s.stream_semijoin(inner_s, left_on=xcol, right_on=rcol)
        yes = matched.map(*base, (col, ir.Lit(True)))
        stats, n, nn = self.null_stats(inner_s, rcol)
        # no equal value: FALSE if q is empty, else NULL if x is NULL or q holds a NULL, else FALSE
        unknown = ir.Binary(
            "and", ir.Col(n) > 0, ir.Binary("or", ir.Col(xcol).is_null(), ir.Col(nn) < ir.Col(n))
        )
        value = ir.Case(
            ((unknown, ir.Cast(ir.Lit(None), ir.Lit(True).dtype(outer_s.schema))),), ir.Lit(False)
        )
        no = drop_to(outer_s - matched, cols).stream_product(stats).map(*base, (col, value))
        return Rel(yes + no, rel.fields), col

    def mark_correlated_in(self, rel: Rel, node: exp.In, scope: Scope, col: str) -> tuple[Rel, str]:
        """x IN (q) for a q correlated by equalities: per outer row, TRUE if its group of q's rows holds x;
        else NULL if the group is not empty and x is NULL or the group holds a NULL; else FALSE."""
        sel = _select_of(node)
        item = sel.expressions[0]
        item = item.this if isinstance(item, exp.Alias) else item
        inner, eqs, residual = self.decorrelate(sel, scope)
        if residual or not eqs:  # per distinct outer row, as the aggregate that IN is over its group
            x, y = node.this, item
            hits = exp.Sum(
                this=exp.Case(
                    ifs=[exp.If(this=exp.EQ(this=y.copy(), expression=x.copy()), true=exp.Literal.number(1))],
                    default=exp.Literal.number(0),
                )
            )
            n_all, n_y = exp.Count(this=exp.Star()), exp.Count(this=y.copy())
            value = exp.Case(
                ifs=[
                    exp.If(this=exp.GT(this=hits, expression=exp.Literal.number(0)), true=exp.true()),
                    exp.If(this=exp.EQ(this=n_all, expression=exp.Literal.number(0)), true=exp.false()),
                    exp.If(
                        this=exp.or_(
                            exp.Is(this=x.copy(), expression=exp.Null()),
                            exp.LT(this=n_y, expression=n_all.copy()),
                        ),
                        true=exp.Cast(this=exp.Null(), to=exp.DataType.build("BOOLEAN")),
                    ),
                ],
                default=exp.false(),
            )
            return self.correlated_scalar_general(rel, value, scope, inner, eqs, residual)
        ycol = self.c.names.fresh("y")
        inner = add_columns(
            inner, [(ycol, ExprCompiler(Scope(inner.fields, self.src))(item, inner.stream.schema))]
        )
        base = list(rel.stream.schema)
        rel2, okeys = self.outer_keys(
            rel,
            scope,
            [o for o, _ in eqs] + [node.this],
            [inner.stream.schema[i] for _, i in eqs] + [inner.stream.schema[ycol]],
        )
        renamed = self.c.disjoint(rel2.stream.schema, inner)
        rename = dict(zip(inner.stream.schema, renamed.stream.schema, strict=True))
        ikeys = [rename[i] for _, i in eqs] + [rename[ycol]]
        outer_s, inner_s = self.align(rel2.stream, okeys, renamed.stream, ikeys)
        cols = list(outer_s.schema)
        matched = outer_s.stream_semijoin(inner_s, left_on=okeys, right_on=ikeys)
        yes = matched.map(*base, (col, ir.Lit(True)))
        n, nn = self.c.names.fresh(), self.c.names.fresh()
        stats = inner_s.stream_aggregate(ikeys[:-1], **{n: "count", nn: ("count", ikeys[-1])})
        rest = drop_to(outer_s - matched, cols)
        grouped = rest.stream_join(stats, left_on=okeys[:-1], right_on=ikeys[:-1])
        unknown = ir.Binary("or", ir.Col(okeys[-1]).is_null(), ir.Col(nn) < ir.Col(n))
        mark = ir.Case(((unknown, ir.Cast(ir.Lit(None), pl.Boolean())),), ir.Lit(False))
        some = grouped.map(*base, (col, mark))
        none = rest.stream_antijoin(stats, left_on=okeys[:-1], right_on=ikeys[:-1]).map(
            *base, (col, ir.Lit(False))
        )
        return Rel(yes + some + none, rel.fields), col

    # ---- decorrelation --------------------------------------------------------------------------
    def decorrelate(
        self, sel: exp.Select, scope: Scope, extra: exp.Expression | None = None
    ) -> tuple[Rel, list[tuple[exp.Expression, str]], list[exp.Expression]]:
        """q's FROM with its local conditions; the correlation equalities as (outer expression, inner
        column); the other correlated conditions."""
        for key in ("group", "having", "limit", "offset", "with_"):
            if sel.args.get(key) is not None:
                self.src.unsupported(f"{key.upper().rstrip('_')} in a correlated subquery", sel.args[key])
        where = conjuncts(sel.args["where"].this) if sel.args.get("where") else []
        if extra is not None:
            where.append(extra)
        planner = FromPlanner(self.c, None)
        probe, _ = planner.plan(sel, [])
        fields = probe.fields
        local: list[exp.Expression] = []
        eq_nodes: list[tuple[exp.Expression, exp.Expression]] = []
        residual: list[exp.Expression] = []
        inner_scope = Scope(fields, self.src)
        for cnd in where:
            sides = {self.side(col, inner_scope, scope) for col in columns_of(cnd)}
            if "outer" not in sides:
                local.append(cnd)
                continue
            if isinstance(cnd, exp.EQ):
                ls = {self.side(col, inner_scope, scope) for col in columns_of(cnd.this)}
                rs = {self.side(col, inner_scope, scope) for col in columns_of(cnd.expression)}
                if ls == {"outer"} and rs == {"inner"}:
                    eq_nodes.append((cnd.this, cnd.expression))
                    continue
                if ls == {"inner"} and rs == {"outer"}:
                    eq_nodes.append((cnd.expression, cnd.this))
                    continue
            if has_subquery(cnd):
                self.src.unsupported("a subquery in a correlated condition", cnd)
            residual.append(cnd)
        inner, rest = planner.plan(sel, [c for c in local if not has_subquery(c)])
        inner = planner.filter(inner, [c for c in rest if not has_subquery(c)])
        nested = SubqueryLowering(self.c, None)
        for cnd in local:
            if has_subquery(cnd):
                inner = nested.condition(inner, cnd)
        comp = ExprCompiler(Scope(inner.fields, self.src))
        items = []
        eqs: list[tuple[exp.Expression, str]] = []
        for o, i in eq_nodes:
            col = self.c.names.fresh("k")
            items.append((col, comp(i, inner.stream.schema)))
            eqs.append((o, col))
        return add_columns(inner, items), eqs, residual

    def side(self, col: exp.Column, inner: Scope, outer: Scope) -> str:
        if inner.find(col) is not None:
            return "inner"
        if outer.resolves(col):
            return "outer"
        self.src.unknown(f"unknown column {col.sql(dialect='duckdb')}", col)

    def outer_keys(
        self, rel: Rel, scope: Scope, nodes: list[exp.Expression], like: list[pl.DataType] | None = None
    ) -> tuple[Rel, list[str]]:
        """`rel` with a column per outer key expression; a key of DuckDB's NULL type (a NULL literal)
        takes the type of the inner key it is compared with (`like`), as NULL compares with any type."""
        comp = ExprCompiler(scope)
        items, cols = [], []
        for i, n in enumerate(nodes):
            e = comp(n, rel.stream.schema)
            if like is not None and e.dtype(rel.stream.schema) == pl.Null():
                e = ir.Cast(e, like[i])
            if isinstance(e, ir.Col) and e.name not in cols:
                cols.append(e.name)
            else:  # an expression, or a column already used as a key (a join takes each key once)
                col = self.c.names.fresh("k")
                items.append((col, e))
                cols.append(col)
        return add_columns(rel, items), cols

    def align(self, a: Stream, ak: list[str], b: Stream, bk: list[str]) -> tuple[Stream, Stream]:
        """Cast join keys of both sides to their common types."""
        ta, tb = {}, {}
        for x, y in zip(ak, bk, strict=True):
            if a.schema[x] != b.schema[y]:
                t = common_type(a.schema[x], b.schema[y])
                if t is None:
                    self.src.schema_error(f"cannot compare {a.schema[x]} with {b.schema[y]} (subquery)", None)
                ta[x], tb[y] = t, t
        return cast_to(a, ta), cast_to(b, tb)

    # ---- scalar subqueries ----------------------------------------------------------------------
    def scalars(
        self, rel: Rel, e: exp.Expression, scope: Scope, direct: set[int] | None = None
    ) -> tuple[Rel, Scope]:
        """`rel` with a column per scalar subquery of `e`, found by `scope.computed`."""
        for sub in _scalar_subqueries(e):
            if canonical(sub) in scope.computed:
                continue
            if isinstance(sub, (exp.Exists, exp.In)):
                rel, col = self.mark(rel, sub, scope)
            else:
                rel, col = self.scalar(rel, sub, scope, inner_ok=direct is not None and id(sub) in direct)
            scope = self.scope(rel, scope)
            scope.computed[canonical(sub)] = col
        return rel, scope

    def scalar(self, rel: Rel, sub: exp.Subquery, scope: Scope, inner_ok: bool) -> tuple[Rel, str]:
        sel = sub.this
        try:
            r = self.c.query(sel, scope)
        except CorrelatedReference:
            return self.correlated_scalar(rel, sel, scope, inner_ok)
        if len(r.visible()) != 1:
            self.src.schema_error(
                f"a scalar subquery must return one column, this one returns {len(r.visible())}", sub
            )
        v = r.visible()[0].col
        col = self.c.names.fresh("s")
        one = r.stream.map((col, ir.Col(v)))
        s = rel.stream.stream_product(one)
        single = _one_row(sel)
        if not single or sel.args.get("having") is not None:  # zero or one row: NULL when there is none
            n = self.c.names.fresh()
            cnt = one.stream_aggregate(**{n: "count"})
            if not single:  # more than one row rejects the step, whatever the outer rows (DuckDB)
                self.several_rows(cnt.filter(ir.Col(n) > 1), n, sub, "")
            none = cnt.filter(ir.Col(n).eq(0)).map((col, ir.Cast(ir.Lit(None), one.schema[col])))
            s = s + rel.stream.stream_product(none)
        return Rel(s, rel.fields), col

    def several_rows(self, bad: Stream, n: str, sub: exp.Expression, per: str) -> None:
        """Reject a step in which `bad` holds a row: a scalar subquery returned `n` (a column) rows."""
        text = sub.sql(dialect="duckdb")
        text = text if len(text) <= 200 else text[:197] + "..."
        text = text if isinstance(sub, exp.Subquery) else f"({text})"
        where = f"view {self.c.view!r}: " if self.c.view else ""
        msg = ir.Func(
            "concat",
            (
                ir.Lit(
                    f"{where}More than one row returned by a subquery used as an expression - scalar "
                    f"subqueries can only return a single row ({text} returned "
                ),
                ir.Col(n),
                ir.Lit(f" rows{per})"),
            ),
        )
        self.c.guard(bad, msg, sub)

    def correlated_scalar(
        self, rel: Rel, sel: exp.Expression, scope: Scope, inner_ok: bool
    ) -> tuple[Rel, str]:
        if not isinstance(sel, exp.Select) or len(sel.expressions) != 1:
            self.src.schema_error("a scalar subquery must return one column", sel)
        item = sel.expressions[0]
        item = item.this if isinstance(item, exp.Alias) else item
        if not find_aggregates([item]):
            return self.correlated_rows(rel, sel, item, scope, inner_ok)
        inner, eqs, residual = self.decorrelate(sel, scope)
        if residual or not eqs:
            return self.correlated_scalar_general(rel, item, scope, inner, eqs, residual)
        from dbspark.frontends.sql.aggregates import aggregate as group

        keys = [i for _, i in eqs]
        # GROUP BY the correlation columns: a SELECT node with those keys
        inner_scope = Scope(inner.fields + [Field(k, k, "__corr") for k in keys], self.src)
        inner = Rel(inner.stream, inner_scope.fields)
        fake = exp.Select(expressions=[item.copy()])
        fake.set("group", exp.Group(expressions=[exp.column(k, "__corr", quoted=True) for k in keys]))
        agg_rel, post, _ = group(self.c, fake, inner, inner_scope, [("v", item)])
        value = self.c.names.fresh("s")
        gcols = [post.computed[canonical(exp.column(k, "__corr", quoted=True))] for k in keys]
        grouped = agg_rel.stream.map(*gcols, (value, ExprCompiler(post)(item, agg_rel.stream.schema)))
        rel2, okeys = self.outer_keys(rel, scope, [o for o, _ in eqs])
        outer_s, grouped = self.align(rel2.stream, okeys, grouped, gcols)
        base = list(rel2.stream.schema)
        matched = outer_s.stream_join(grouped.map(*gcols, value), left_on=okeys, right_on=gcols)
        matched = drop_to(matched, base + [value])
        if inner_ok and _strict(item):
            return Rel(matched, rel.fields), value
        # rows without a group: the subquery's value over no rows
        empty = Rel(inner.stream.filter(ir.Lit(False)), inner.fields)
        fake_all = exp.Select(expressions=[item.copy()])
        e_rel, e_post, _ = group(self.c, fake_all, empty, Scope(empty.fields, self.src), [("v", item)])
        none = e_rel.stream.map((value, ExprCompiler(e_post)(item, e_rel.stream.schema)))
        none = cast_to(none, {value: matched.schema[value]})
        rest = outer_s.stream_antijoin(grouped, left_on=okeys, right_on=gcols)
        unmatched = drop_to(rest, base).stream_product(none)
        return Rel(matched + drop_to(unmatched, base + [value]), rel.fields), value

    def correlated_rows(
        self, rel: Rel, sel: exp.Select, item: exp.Expression, scope: Scope, inner_ok: bool
    ) -> tuple[Rel, str]:
        """A correlated scalar subquery without an aggregate: per outer row, the item of its one row of
        q (NULL without one). q's rows are paired with the outer rows they belong to (joined on the
        correlation equalities; else, as `correlated_scalar_general`, per distinct outer row under any
        condition), and a step in which an outer row has several rejects the view (DuckDB)."""
        from dbspark.frontends.sql.relops import null_safe_keys
        from dbspark.frontends.sql.scope import field_ref

        inner, eqs, residual = self.decorrelate(sel, scope)
        base = list(rel.stream.schema)
        y = self.c.names.fresh("y")
        inner_scope = Scope(inner.fields, self.src)
        reads_outer = any(self.side(c, inner_scope, scope) == "outer" for c in columns_of(item))
        if eqs and not residual and not reads_outer:  # q's rows keyed by the correlation columns
            inner = add_columns(inner, [(y, ExprCompiler(inner_scope)(item, inner.stream.schema))])
            rel2, lk = self.outer_keys(
                rel, scope, [o for o, _ in eqs], [inner.stream.schema[i] for _, i in eqs]
            )
            renamed = self.c.disjoint(rel2.stream.schema, inner)
            rename = dict(zip(inner.stream.schema, renamed.stream.schema, strict=True))
            rk, y = [rename[i] for _, i in eqs], rename[y]
            left, right = self.align(rel2.stream, lk, renamed.stream.map(*rk, y), rk)
        else:  # per distinct outer row: its columns are the keys (NULL matching NULL)
            renamed = self.c.disjoint(base, inner)
            rename = dict(zip(inner.stream.schema, renamed.stream.schema, strict=True))
            key_fields = [Field(rename[i], rename[i], hidden=True) for _, i in eqs]
            conds = list(residual) + [
                exp.EQ(this=o.copy(), expression=field_ref(f))
                for (o, _), f in zip(eqs, key_fields, strict=True)
            ]
            combined = Scope(
                renamed.fields + key_fields,
                self.src,
                outer=Scope(
                    rel.fields + [Field(c, c, hidden=True) for c in base], self.src, computed=scope.computed
                ),
                correlated=[],
            )
            comp = ExprCompiler(combined)
            j = rel.stream.stream_distinct().stream_product(renamed.stream)
            for cnd in conds:
                j = j.filter(comp(cnd, j.schema))
            pairs = j.map(*base, (y, comp(item, j.schema)))
            left, lk = null_safe_keys(rel.stream, base, self.c.names)
            right, rk = null_safe_keys(pairs, base, self.c.names)
        right = right.map(*rk, y)
        if sel.args.get("distinct") is not None:
            right = right.stream_distinct()
        n, most, hits = self.c.names.fresh(), self.c.names.fresh(), self.c.names.fresh()
        several = right.stream_aggregate(rk, **{n: "count"}).filter(ir.Col(n) > 1)
        bad = left.map(*lk).stream_join(several, left_on=lk, right_on=rk)
        bad = bad.stream_aggregate(**{hits: "count", most: ("max", n)}).filter(ir.Col(hits) > 0)
        self.several_rows(bad, most, sel, " for an outer row")
        value = self.c.names.fresh("s")
        matched = left.stream_join(right, left_on=lk, right_on=rk).map(*base, (value, ir.Col(y)))
        if inner_ok:  # a direct operand of a comparison in WHERE: NULL fails the row anyway
            return Rel(matched, rel.fields), value
        rest = drop_to(left.stream_antijoin(right, left_on=lk, right_on=rk), base)
        none = rest.map(*base, (value, ir.Cast(ir.Lit(None), right.schema[y])))
        return Rel(matched + none, rel.fields), value

    def correlated_scalar_general(
        self,
        rel: Rel,
        item: exp.Expression,
        scope: Scope,
        inner: Rel,
        eqs: list[tuple[exp.Expression, str]],
        residual: list[exp.Expression],
    ) -> tuple[Rel, str]:
        """A scalar subquery correlated by any condition: evaluated once per distinct outer row (the
        outer rows' distinct values joined with the subquery's rows under the correlated conditions,
        grouped by the outer values), joined back NULL-safely; outer rows without a group get the
        subquery's value over no rows."""
        from dbspark.frontends.sql.aggregates import aggregate as group
        from dbspark.frontends.sql.relops import null_safe_keys
        from dbspark.frontends.sql.scope import field_ref

        base = list(rel.stream.schema)
        dist = rel.stream.stream_distinct()
        renamed = self.c.disjoint(base, inner)
        rename = dict(zip(inner.stream.schema, renamed.stream.schema, strict=True))
        key_fields = [Field(rename[i], rename[i], hidden=True) for _, i in eqs]
        conds = list(residual) + [
            exp.EQ(this=o.copy(), expression=field_ref(f)) for (o, _), f in zip(eqs, key_fields, strict=True)
        ]
        outer_fields = rel.fields + [Field(c, c, hidden=True) for c in base]
        combined = Scope(
            renamed.fields + key_fields,
            self.src,
            outer=Scope(outer_fields, self.src, computed=scope.computed),
            correlated=[],
        )
        comp = ExprCompiler(combined)
        j = dist.stream_product(renamed.stream)
        pred: ir.Expr | None = None
        for cnd in conds:
            e = comp(cnd, j.schema)
            pred = e if pred is None else ir.Binary("and", pred, e)
        j = j.filter(pred)  # type: ignore[arg-type]
        # the subquery's names first, the outer row's (its columns are in j) behind them
        fields = renamed.fields + key_fields + [Field(c, c, hidden=True) for c in base]
        in_scope = Scope(
            fields, self.src, outer=Scope(rel.fields, self.src, computed=scope.computed), correlated=[]
        )
        fake = exp.Select(expressions=[item.copy()])
        fake.set("group", exp.Group(expressions=[field_ref(Field(c, c)) for c in base]))
        agg_rel, post, _ = group(self.c, fake, Rel(j, fields), in_scope, [("v", item)])
        value = self.c.names.fresh("s")
        gcols = [post.computed[canonical(field_ref(Field(c, c)))] for c in base]
        by_col = dict(zip(base, gcols, strict=True))
        item_scope = Scope(
            post.fields,
            self.src,
            computed=post.computed,
            grouped=True,
            outer=Scope([Field(f.name, by_col[f.col], f.qualifier) for f in rel.fields], self.src),
            correlated=[],
        )
        per_row = agg_rel.stream.map(*gcols, (value, ExprCompiler(item_scope)(item, agg_rel.stream.schema)))
        left, lk = null_safe_keys(rel.stream, base, self.c.names)
        right, rk = null_safe_keys(per_row, gcols, self.c.names)
        matched = drop_to(left.stream_join(right.map(*rk, value), left_on=lk, right_on=rk), base + [value])
        # outer rows without a group: the item with each aggregate at its value over no rows (COUNT 0,
        # others NULL), evaluated on the outer row (the item may read it)
        rest = drop_to(left.stream_antijoin(right, left_on=lk, right_on=rk), base)
        consts, computed = [], dict(scope.computed)
        for a in find_aggregates([item]):
            acol = post.computed[canonical(a)]
            t = agg_rel.stream.schema[acol]
            c = self.c.names.fresh("e")
            consts.append((c, ir.Lit(0) if isinstance(a, exp.Count) else ir.Cast(ir.Lit(None), t)))
            computed[canonical(a)] = c
        rest = rest.map(*base, *consts)
        escope = Scope(rel.fields + [Field(c, c, hidden=True) for c in base], self.src, computed=computed)
        none = rest.map(
            *base, (value, ir.Cast(ExprCompiler(escope)(item, rest.schema), matched.schema[value]))
        )
        return Rel(matched + none, rel.fields), value


def _select_of(node: exp.In) -> Any:
    sub = node.args["query"]
    return sub.this if isinstance(sub, exp.Subquery) else sub


def _scalar_subqueries(e: exp.Expression) -> list[Any]:
    """Subqueries used as values in `e` (scalar subqueries, EXISTS, IN), outside nested subqueries."""
    out = []
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, (exp.Subquery, exp.Exists)) or (isinstance(n, exp.In) and n.args.get("query")):
            out.append(n)
            continue
        if isinstance(n, exp.Select):
            continue
        stack.extend(n.iter_expressions())
    return out


def _strict(e: exp.Expression) -> bool:
    """NULL over no rows and NULL-propagating: arithmetic over aggregates other than COUNT."""
    if isinstance(e, (exp.Column, exp.Literal)):
        return True
    if not isinstance(e, STRICT):
        return False
    if isinstance(e, exp.Cast):
        return _strict(e.this)
    return all(_strict(x) for x in e.iter_expressions())


def _direct_operands(cond: exp.Expression) -> set[int]:
    """Scalar subqueries that are a direct operand of a top-level comparison (a NULL fails the row)."""
    node = cond.unnest() if isinstance(cond, exp.Paren) else cond
    if isinstance(node, COMPARISONS):
        return {id(x) for x in (node.this, node.expression) if isinstance(x, exp.Subquery)}
    return set()


def _one_row(sel: Any) -> bool:
    """Whether a query returns at most one row (a global aggregate, or SELECT without FROM)."""
    if not isinstance(sel, exp.Select) or sel.args.get("group") is not None:
        return False
    items = [i.this if isinstance(i, exp.Alias) else i for i in sel.expressions]
    return bool(find_aggregates(items)) or sel.args.get("from_") is None
