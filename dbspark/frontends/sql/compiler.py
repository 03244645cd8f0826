"""Lowering SQL queries into circuits (`dbsp-paper.txt` §4.2, Table 1: SQL as Z-set operators).

A query becomes non-incremental stream operators (the pipeline incrementalizes the whole circuit,
Algorithm 4.8): FROM and WHERE become joins, filters and (for subqueries) semi/anti-joins; GROUP BY
becomes `stream_aggregate` over pre-computed key and argument columns; SELECT a map; DISTINCT and
UNION `stream_distinct`; ORDER BY ... LIMIT a top-k; WITH RECURSIVE a recursive scope (§5).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import polars as pl
from sqlglot import exp

from dbspark.frontends.sql import grouping_levels, grouping_sets, windows
from dbspark.frontends.sql.aggregates import aggregate
from dbspark.frontends.sql.exprs import ExprCompiler
from dbspark.frontends.sql.joins import FromPlanner, conjuncts, factor_common, has_subquery
from dbspark.frontends.sql.parse import Source, name_of
from dbspark.frontends.sql.pushdown import push_bound_columns
from dbspark.frontends.sql.scope import Field, Names, Rel, Scope, canonical
from dbspark.frontends.sql.subqueries import SubqueryLowering
from dbspark.frontends.sql.types import common_type
from dbspark.ir import expr as ir
from dbspark.ir.order import SortKey
from dbspark.operators.topk import StreamTopK

if TYPE_CHECKING:
    from dbspark.circuit.circuit import Circuit
    from dbspark.circuit.stream import Stream
    from dbspark.pipeline import Pipeline


class Compiler:
    """Compiles the queries of one SQL text against a pipeline's catalog."""

    def __init__(self, pipeline: Pipeline, src: Source, joins: str = "auto") -> None:
        self.p = pipeline
        self.src = src
        self.joins = joins  # how a FROM clause's cyclic inner joins are joined (`multiway.JOIN_PLANS`)
        self.names = Names()
        self.ctes: list[dict[str, Rel]] = []
        self.view = ""  # the view being compiled (named by errors raised while it runs)
        self.circuit: Circuit = (
            pipeline.circuit
        )  # where new sources go: a recursive scope's body sets its own
        self._one_col: str | None = None
        self.guards: list[Stream] = []  # the view's run-time checks (`guard`), carried by its stream
        self.levels: list[grouping_levels.Levels] = []  # grouping-sets queries (`grouping_levels.register`)

    def guard(self, bad: Stream, message: ir.Expr, node: Any) -> None:
        """Reject a step in which `bad` (a relation, maintained like any other) holds a row: each of its
        rows raises DataError(`message`, evaluated on the row) where the row is evaluated. The view's
        stream carries these rows (an always empty union), so the check runs inside the step that
        writes the view (no extra Spark action), and a rejected step applies nothing. `bad` must change
        only by rows that appear (its previous value is empty: a committed step passed the check), as a
        filter over a global aggregate's output does."""
        if bad.circuit is not self.p.circuit:
            self.src.unsupported(
                "a run-time check (a scalar subquery that may return several rows) here", node
            )
        self.guards.append(bad.filter(ir.Cast(ir.Func("error", (message,)), pl.Boolean())))

    def guarded(self, s: Stream) -> Stream:
        """A view's stream `s` with the guards of its query (each adds no row, or raises)."""
        for g in self.guards:
            s = s + g.map(*[(c, ir.Cast(ir.Lit(None), t)) for c, t in s.schema.items()])
        self.guards = []
        return s

    # ---- names ----------------------------------------------------------------------------------
    def table_rel(self, name: str, node: Any) -> Rel:
        for frame in reversed(self.ctes):
            if name in frame:
                return frame[name]
        if name not in self.p.relations:
            self.src.unknown(
                f"unknown table or view {name}; the pipeline has {sorted(self.p.relations)}", node
            )
        s = self.p.relations[name]
        # the table's own stream and column names: the same table read by several views (or twice by
        # one) is one node, so incrementalization builds its integrals once (the circuit cache);
        # joins rename a side's clashing columns (`disjoint`)
        return Rel(s, [Field(c, c, name) for c in s.schema])

    def disjoint(self, taken: Any, rel: Rel) -> Rel:
        """`rel` with the internal columns that clash with `taken` renamed to fresh ones."""
        taken = set(taken)
        clash = [c for c in rel.stream.schema if c in taken]
        if not clash:
            return rel
        new = {c: self.names.fresh() for c in clash}
        s = rel.stream.map(*[(new.get(c, c), ir.Col(c)) for c in rel.stream.schema])
        return Rel(s, [Field(f.name, new.get(f.col, f.col), f.qualifier, f.hidden) for f in rel.fields])

    def one_row(self) -> Rel:
        """The relation of one row and no visible columns (SELECT without FROM): a constant stream of the
        circuit being built (the pipeline's, or a recursive scope's body: constants are not imported)."""
        if self._one_col is None:
            self._one_col = self.names.fresh()
        return Rel(self.circuit.constant({self._one_col: pl.Boolean}, [(True,)]), [])

    # ---- queries ------------------------------------------------------------------------------
    def query(self, node: exp.Expression, outer: Scope | None = None) -> Rel:
        """A query expression (SELECT, set operation, parenthesized query) as a relation."""
        if isinstance(node, exp.Select) and grouping_sets.present(node):  # a UNION ALL of plain GROUP BYs
            node = grouping_sets.standard(node)
            windowed = grouping_sets.over_windows(node, self.src)  # windows over every set's rows
            if windowed is not None:
                return self.query(windowed, outer)
            union, branches, sets = grouping_sets.expand(node, self.src)
            grouping_levels.register(self, branches, sets)
            return self.query(union, outer)
        if isinstance(node, exp.Select):
            node = push_bound_columns(node)  # (`WHERE src = 1` over a recursion: into its base)
        with_ = node.args.get("with_")
        pushed = False
        if with_ is not None:
            self.ctes.append({})
            pushed = True
            self.with_clause(with_, outer)
        try:
            if isinstance(node, exp.Subquery):
                rel = self.query(node.this, outer)
            elif isinstance(node, exp.Select):
                rel = self.select(node, outer)
            elif isinstance(node, (exp.Union, exp.Intersect, exp.Except)):
                rel = self.setop(node, outer)
                vis = rel.visible()
                keys = self.order_keys(node, [(f.name, exp.column(f.name)) for f in vis], vis, False)
                for k in keys:
                    if isinstance(k, exp.Expression):
                        self.src.schema_error(
                            f"ORDER BY {k.sql(dialect='duckdb')} is not a column of the result", k
                        )
                rel = self.order_limit(node, rel, [k for k in keys if isinstance(k, str)], False)
            else:
                self.src.unsupported(f"query {node.sql(dialect='duckdb')[:60]}", node)
        finally:
            if pushed:
                self.ctes.pop()
        return rel

    def with_clause(self, with_: exp.With, outer: Scope | None) -> None:
        from dbspark.frontends.sql.recursion import Member, components, is_recursive, recursive_component

        members = [
            Member(
                name_of(cte.args["alias"].this),
                [name_of(c) for c in cte.args["alias"].args.get("columns") or []],
                cte.this,
                cte,
            )
            for cte in with_.expressions
        ]
        groups = components(members) if with_.args.get("recursive") else [[m] for m in members]
        for comp in groups:
            if with_.args.get("recursive") and is_recursive(comp):
                for name, rel in recursive_component(self, comp).items():
                    self.ctes[-1][name] = rel
                continue
            m = comp[0]
            rel = self.query(m.body, outer)
            if m.cols:
                rel = self.rename(rel, m.cols, m.node)
            self.ctes[-1][m.name] = rel.requalify(m.name)

    def rename(self, rel: Rel, cols: list[str], node: Any) -> Rel:
        vis = rel.visible()
        if len(cols) != len(vis):
            self.src.schema_error(f"{len(cols)} column names for {len(vis)} columns", node)
        return Rel(rel.stream, [Field(n, f.col, f.qualifier) for n, f in zip(cols, vis, strict=True)])

    # ---- SELECT -------------------------------------------------------------------------------
    def select(self, node: exp.Select, outer: Scope | None) -> Rel:
        for key in ("windows", "laterals", "pivots", "connect", "sample", "distribute", "cluster"):
            if node.args.get(key):
                self.src.unsupported(
                    key.upper(), node.args[key] if isinstance(node.args[key], exp.Expression) else node
                )
        if isinstance(node.args.get("distinct"), exp.Distinct) and node.args["distinct"].args.get("on"):
            self.src.unsupported("DISTINCT ON", node.args["distinct"])
        level = grouping_levels.of(self, node)  # a grouping set's branch: its FROM clause read once
        if level is None:
            rel = self.source(node, outer)
        else:
            if level[0].source is None:
                level[0].source = self.source(node, outer)
            rel = level[0].source
        if any(e.name == grouping_sets.ALIAS_KEY for e in node.find_all(exp.Anonymous)):
            # a grouping set's item aliased as a key the set leaves out, decided on the FROM clause (in
            # place: the union's branch, whose bare NULL items a set operation reads, `null_items`)
            found = Scope(rel.fields, self.src)
            node.set(
                "expressions", grouping_sets.alias_keys(node.expressions, lambda c: found.find(c) is not None)
            )
        sub = SubqueryLowering(self, outer)
        scope = Scope(rel.fields, self.src, outer=outer)
        items = self.select_items(node, rel)
        if level is not None or _is_aggregate_query(node, items):
            if level is not None:
                rel, scope, items = grouping_levels.aggregated(self, *level, rel, scope, items)
            else:
                rel, scope, items = aggregate(self, node, rel, scope, items)
            # HAVING and ORDER BY bind a name to a grouped column first, then to a SELECT alias (DuckDB)
            scope.aliases = _aliases(node)
            having = node.args.get("having")
            if having is not None:
                for c in conjuncts(having.this):
                    if has_subquery(c):
                        rel = sub.condition(rel, c, scope)
                        scope = replace(scope, fields=rel.fields, correlated=None)
                    else:
                        rel = Rel(rel.stream.filter(ExprCompiler(scope)(c, rel.stream.schema)), rel.fields)
        elif node.args.get("having") is not None:
            self.src.schema_error("HAVING without GROUP BY or aggregates", node.args["having"])
        qualify = node.args.get("qualify")
        extra = [("", qualify.this)] if qualify is not None else []
        # window functions: after WHERE, GROUP BY and HAVING (as DuckDB)
        rel, scope = windows.lower(self, rel, scope, items + extra)
        if qualify is not None:  # QUALIFY: a filter on the windows' values; a name not a column an alias
            named = replace(scope, aliases=_aliases(node))
            rel = Rel(rel.stream.filter(ExprCompiler(named)(qualify.this, rel.stream.schema)), rel.fields)
        # scalar subqueries in the SELECT list
        for _, e in items:
            rel, scope = sub.scalars(rel, e, scope)
        return self.project(node, rel, scope, items)

    def source(self, node: exp.Select, outer: Scope | None) -> Rel:
        """A SELECT's FROM clause filtered by its WHERE."""
        where = factor_common(conjuncts(node.args["where"].this)) if node.args.get("where") else []
        planner = FromPlanner(self, outer)
        rel, rest = planner.plan(node, where)
        sub = SubqueryLowering(self, outer)
        plain = [c for c in rest if not has_subquery(c)]
        rel = planner.filter(rel, plain)
        for c in rest:
            if has_subquery(c):
                rel = sub.condition(rel, c)
        return rel

    def select_items(self, node: exp.Select, rel: Rel) -> list[tuple[str, exp.Expression]]:
        """(output name, expression) per SELECT item, with * and t.* expanded."""
        out: list[tuple[str, exp.Expression]] = []
        for item in node.expressions:
            if isinstance(item, exp.Star) or (
                isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
            ):
                star = item if isinstance(item, exp.Star) else item.this
                if star.args.get("rename"):
                    self.src.unsupported("* RENAME", item)
                table = (
                    name_of(item.args["table"])
                    if isinstance(item, exp.Column) and item.args.get("table")
                    else None
                )
                fields = [f for f in rel.visible() if table is None or f.qualifier == table]
                if table is not None and not fields:
                    self.src.unknown(f"unknown table {table} in {item.sql(dialect='duckdb')}", item)
                excluded, replaced = self._star_options(star, fields)
                for f in fields:
                    if f.name in excluded:
                        continue
                    col = exp.Column(this=exp.to_identifier(f.name, quoted=True))
                    if f.qualifier is not None:
                        col.set("table", exp.to_identifier(f.qualifier, quoted=True))
                    out.append((f.name, replaced.get(f.name, col)))
                continue
            if isinstance(item, exp.Alias):
                out.append((name_of(item.args["alias"]), item.this))
            elif isinstance(item, exp.Column):
                out.append((name_of(item.this), item))
            else:
                out.append((item.sql(dialect="duckdb").lower(), item))
        return out

    def _star_options(
        self, star: exp.Star, fields: list[Field]
    ) -> tuple[set[str], dict[str, exp.Expression]]:
        """`* EXCLUDE (a, ...)` (Spark: `* EXCEPT (a, ...)`) and `* REPLACE (e AS a, ...)`: the columns
        left out, and the expressions that take a column's place (its name kept); each must name a
        column of the star, as DuckDB requires."""
        names = {f.name for f in fields}
        excluded: set[str] = set()
        for c in star.args.get("except_") or star.args.get("except") or []:
            n = name_of(c.this if isinstance(c, exp.Column) else c)
            if n not in names:
                self.src.unknown(f"unknown column {n} in the EXCLUDE list (not a column of the star)", c)
            excluded.add(n)
        replaced: dict[str, exp.Expression] = {}
        for a in star.args.get("replace") or []:
            n = name_of(a.args["alias"]) if isinstance(a, exp.Alias) else ""
            if n not in names:
                self.src.unknown(
                    f"unknown column {n or a.sql(dialect='duckdb')} in the REPLACE list (not a column of the star)",
                    a,
                )
            replaced[n] = a.this
        return excluded, replaced

    def project(
        self, node: exp.Select, rel: Rel, scope: Scope, items: list[tuple[str, exp.Expression]]
    ) -> Rel:
        comp = ExprCompiler(replace(scope, aliases={}))  # the SELECT list does not read its own aliases
        proj: list[tuple[str, ir.Expr]] = []
        fields: list[Field] = []
        for name, e in items:
            col = self.names.fresh()
            proj.append((col, comp(e, rel.stream.schema)))
            fields.append(Field(name, col))
        distinct = node.args.get("distinct") is not None
        # ORDER BY expressions: a name a column of the FROM clause or grouped, then a SELECT alias
        # (after GROUP BY, DuckDB's ORDER BY reads a FROM column even when it is not grouped: an error)
        aliases = {
            n: e
            for n, e in _aliases(node).items()
            if scope.pre is None or not any(f.name == n and not f.hidden for f in scope.pre.fields)
        }
        order_scope = replace(scope, aliases=aliases)
        keys = self.order_keys(node, items, fields, distinct)
        hidden = False
        for i, k in enumerate(keys):
            if isinstance(k, exp.Expression):
                col = self.names.fresh()
                proj.append((col, ExprCompiler(order_scope)(k, rel.stream.schema)))
                keys[i], hidden = col, True
        s = rel.stream.map(*proj)
        if distinct:
            s = s.stream_distinct()
        out = Rel(s, fields)
        return self.order_limit(node, out, [k for k in keys if isinstance(k, str)], hidden)

    def order_keys(
        self,
        node: exp.Expression,
        items: list[tuple[str, exp.Expression]],
        fields: list[Field],
        distinct: bool,
    ) -> list[str | exp.Expression]:
        """Per ORDER BY key (when there is a LIMIT or OFFSET): the output column it names (a position,
        an output name, the text of a SELECT item), or the expression to compute as a hidden column."""
        if (
            node.args.get("limit") is None
            and node.args.get("offset") is None
            or node.args.get("order") is None
        ):
            return []
        by_name = {f.name: f.col for f in fields}
        by_text: dict[str, str] = {}
        for (_, e), f in zip(items, fields, strict=True):
            by_text.setdefault(canonical(e), f.col)
        out: list[str | exp.Expression] = []
        for o in node.args["order"].expressions:
            e = o.this
            if isinstance(e, exp.Literal) and not e.is_string:
                i = int(e.this)
                if not 1 <= i <= len(fields):
                    self.src.schema_error(f"ORDER BY position {i} is not in the select list", e)
                out.append(fields[i - 1].col)
            elif isinstance(e, exp.Column) and not e.args.get("table") and name_of(e.this) in by_name:
                out.append(by_name[name_of(e.this)])
            elif canonical(e) in by_text:
                out.append(by_text[canonical(e)])
            elif distinct:
                self.src.schema_error("ORDER BY expressions must appear in the SELECT list with DISTINCT", e)
            else:
                out.append(e)
        return out

    def order_limit(self, node: exp.Expression, rel: Rel, cols: list[str], hidden: bool) -> Rel:
        """ORDER BY ... LIMIT/OFFSET as a top-k on the key columns `cols` (one per ORDER BY key); ORDER BY
        alone does not change a view (a set of rows). `hidden`: rel's stream has columns beyond its fields."""
        limit, offset = node.args.get("limit"), node.args.get("offset")
        if limit is None and offset is None:
            return rel
        n = self.constant_int(limit.expression, "LIMIT") if limit is not None else None
        off = self.constant_int(offset.expression, "OFFSET") if offset is not None else 0
        order = node.args.get("order")
        orders = order.expressions if order is not None else []
        keys = [
            SortKey(col, bool(o.args.get("desc")), bool(o.args.get("nulls_first")))
            for col, o in zip(cols, orders, strict=True)
        ]
        s = rel.stream.circuit.add(StreamTopK(tuple(keys), n, off), rel.stream)
        if hidden:
            s = s.map(*[f.col for f in rel.fields])
        return Rel(s, rel.fields)

    def constant_int(self, node: exp.Expression, what: str) -> int:
        if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
            return int(node.this)
        self.src.unsupported(f"{what} that is not a constant non-negative integer", node)

    # ---- set operations -------------------------------------------------------------------------
    def setop(self, node: exp.Expression, outer: Scope | None) -> Rel:
        a = self.query(node.this, outer)
        b = self.query(node.expression, outer)
        fa, fb = a.visible(), b.visible()
        if len(fa) != len(fb):
            self.src.schema_error(f"{type(node).__name__.upper()} of {len(fa)} and {len(fb)} columns", node)
        cols = [f.col for f in fa]
        # a bare NULL item has DuckDB's NULL type (stored as BIGINT): it takes the other branch's type
        na, nb = null_items(node.this), null_items(node.expression)
        items_a: list[tuple[str, ir.Expr]] = []
        items_b: list[tuple[str, ir.Expr]] = []
        for i, (x, y) in enumerate(zip(fa, fb, strict=True)):
            ta = pl.Null() if i in na else a.dtype(x)
            tb = pl.Null() if i in nb else b.dtype(y)
            t = common_type(ta, tb)
            if t is None:
                self.src.schema_error(
                    f"{type(node).__name__.upper()} column {x.name}: {ta} and {tb} have no common type",
                    node,
                )
            if t == pl.Null():  # NULL in both branches: stays NULL (stored as BIGINT)
                t = a.dtype(x)
            items_a.append((x.col, _to(ir.Col(x.col), ta, t)))
            items_b.append((x.col, _to(ir.Col(y.col), tb, t)))
        sa, sb = a.stream.map(*items_a), b.stream.map(*items_b)
        distinct = bool(node.args.get("distinct"))
        fields = [Field(f.name, f.col) for f in fa]
        if isinstance(node, exp.Union):
            s = sa + sb
            return Rel(s.stream_distinct() if distinct else s, fields)
        from dbspark.frontends.sql.relops import null_safe_keys, semi_rows

        if not distinct:  # bags: min(m_a, m_b) copies of a row in both, max(m_a - m_b, 0) in a only
            n, m, k = self.names.fresh(), self.names.fresh(), self.names.fresh()
            ca, ka = null_safe_keys(sa.stream_aggregate(cols, **{n: "count"}), cols, self.names)
            cb, kb = null_safe_keys(sb.stream_aggregate(cols, **{m: "count"}), cols, self.names)
            both = ca.stream_join(cb.map(*kb, m), left_on=ka, right_on=kb)
            least = ir.Case(((ir.Binary("lt", ir.Col(n), ir.Col(m)), ir.Col(n)),), ir.Col(m))
            common = both.map(*cols, (k, least)).weigh(k)
            return Rel(common if isinstance(node, exp.Intersect) else sa - common, fields)
        da = Rel(sa.stream_distinct(), fields)
        return semi_rows(da, sb, cols, self.names, anti=isinstance(node, exp.Except))


def _to(e: ir.Expr, t: pl.DataType, to: pl.DataType) -> ir.Expr:
    """`e` of type `t` (NULL: a bare NULL) as type `to`."""
    if t == pl.Null():
        return ir.Cast(ir.Lit(None), to)
    return e if t == to else ir.Cast(e, to)


def null_items(node: exp.Expression) -> set[int]:
    """Positions of a query's output columns that are bare NULL literals (DuckDB's NULL type): SELECT
    items `NULL [AS name]`, and columns NULL in both branches of a set operation."""
    while isinstance(node, (exp.Subquery, exp.Paren)):
        node = node.this
    if isinstance(node, (exp.Union, exp.Intersect, exp.Except)):
        return null_items(node.this) & null_items(node.expression)
    if not isinstance(node, exp.Select) or any(
        isinstance(e, exp.Star) or isinstance(e.this, exp.Star) for e in node.expressions
    ):
        return set()
    out = set()
    for i, item in enumerate(node.expressions):
        e = item.this if isinstance(item, exp.Alias) else item
        while isinstance(e, exp.Paren):
            e = e.this
        if isinstance(e, exp.Null):
            out.add(i)
    return out


def _aliases(node: exp.Select) -> dict[str, exp.Expression]:
    """The SELECT list's explicit aliases (of a repeated alias, the last item, as in DuckDB)."""
    return {name_of(e.args["alias"]): e.this for e in node.expressions if isinstance(e, exp.Alias)}


def _is_aggregate_query(node: exp.Select, items: list[tuple[str, exp.Expression]]) -> bool:
    from dbspark.frontends.sql.aggregates import find_aggregates

    if node.args.get("group") is not None:
        return True
    exprs = [e for _, e in items]
    if node.args.get("having") is not None:
        exprs.append(node.args["having"].this)
    return bool(find_aggregates(exprs))


def view_stream(compiler: Compiler, rel: Rel, names: list[str] | None, node: Any) -> Stream:
    """The view's stream: the relation's visible columns under their SQL names (made unique)."""
    vis = rel.visible()
    out_names = names or [f.name for f in vis]
    if len(out_names) != len(vis):
        compiler.src.schema_error(f"{len(out_names)} column names for {len(vis)} columns", node)
    seen: dict[str, int] = {}
    final = []
    for n in out_names:
        k = seen.get(n, 0)
        seen[n] = k + 1
        final.append(n if k == 0 else f"{n}_{k}")
    return rel.stream.map(*[(n, ir.Col(f.col)) for n, f in zip(final, vis, strict=True)])
