"""FROM clauses: table references, derived tables, and join planning.

Inner joins (commas, JOIN ... ON, USING, NATURAL) and the WHERE conditions that only read their
relations form a pool: single-relation conditions filter each relation first, then relations are
joined greedily along equality conditions, so a comma join never becomes a Cartesian product when the
WHERE clause connects it. Outer joins are lowered as the inner join plus the unmatched rows padded with
NULLs (unmatched: an anti-join on the keys, or, when the ON condition has more than equalities, on the
whole row of the preserved side).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from sqlglot import exp

from dbspark.frontends.sql import timewindows
from dbspark.frontends.sql.exprs import SUBQUERIES, ExprCompiler
from dbspark.frontends.sql.multiway import multiway
from dbspark.frontends.sql.parse import name_of
from dbspark.frontends.sql.relops import add_columns, cast_to, drop_to, pad_nulls, semi_rows
from dbspark.frontends.sql.scope import Field, Rel, Scope, field_ref
from dbspark.frontends.sql.types import common_type
from dbspark.ir import expr as ir

if TYPE_CHECKING:
    from dbspark.frontends.sql.compiler import Compiler


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    """The AND-ed parts of a condition."""
    if node is None:
        return []
    node = unparen(node)
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def unparen(node: exp.Expression) -> exp.Expression:
    """The expression inside any parentheses around it."""
    return cast(exp.Expression, node.unnest()) if isinstance(node, exp.Paren) else node


def disjuncts(node: exp.Expression) -> list[exp.Expression]:
    node = unparen(node)
    if isinstance(node, exp.Or):
        return disjuncts(node.this) + disjuncts(node.expression)
    return [node]


def factor_common(conds: list[exp.Expression]) -> list[exp.Expression]:
    """Conditions with the conjuncts common to every branch of an OR pulled out of it:
    (a AND b) OR (a AND c) is a AND (b OR c), so that `a` can be a join condition (TPC-H Q19)."""
    from dbspark.frontends.sql.scope import canonical

    out: list[exp.Expression] = []
    for cond in conds:
        branches = disjuncts(cond)
        if len(branches) < 2:
            out.append(cond)
            continue
        parts = [conjuncts(b) for b in branches]
        common = [c for c in parts[0] if all(canonical(c) in {canonical(x) for x in p} for p in parts[1:])]
        if not common:
            out.append(cond)
            continue
        keys = {canonical(c) for c in common}
        rest = [[x for x in p if canonical(x) not in keys] for p in parts]
        out += [c.copy() for c in common]
        if all(rest):  # otherwise one branch is just the common part: the OR is TRUE
            ors = [exp.and_(*[x.copy() for x in r]) if len(r) > 1 else r[0].copy() for r in rest]
            node = ors[0]
            for o in ors[1:]:
                node = exp.Or(this=node, expression=o)
            out.append(exp.Paren(this=node))
    return out


def has_subquery(node: exp.Expression) -> bool:
    return any(
        isinstance(n, SUBQUERIES) or (isinstance(n, exp.In) and n.args.get("query")) for n in node.walk()
    )


@dataclass
class Pool:
    """Relations to be inner-joined and the conditions available to join them."""

    rels: list[Rel] = field(default_factory=list)
    conds: list[exp.Expression] = field(default_factory=list)


def using_in_place(fields: list[Field], left: list[Field], names: list[str]) -> list[Field]:
    """SELECT * order after an outer join USING (names), as DuckDB has it: the visible column of each
    USING name (the right one, or COALESCE of both) where the left side's column of that name is."""
    out = list(fields)
    left_cols = {f.col for f in left}
    for n in names:
        vis = [i for i, f in enumerate(out) if f.name == n and not f.hidden]
        anchor = [i for i, f in enumerate(out) if f.name == n and f.col in left_cols]
        if len(vis) != 1 or not anchor or out[vis[0]].col in left_cols:
            continue
        f = out.pop(vis[0])
        at = next(i for i, g in enumerate(out) if g.name == n and g.col in left_cols)
        out.insert(at, f)
    return out


def _is_comma(j: exp.Join) -> bool:
    """A comma in a FROM list (sqlglot: a join without side, kind, condition or method)."""
    return not any(j.args.get(k) for k in ("side", "kind", "on", "using", "method"))


def columns_of(node: exp.Expression) -> list[exp.Column]:
    """Column references of a condition outside its subqueries."""
    out: list[exp.Column] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, exp.Column):
            out.append(n)
            continue
        if isinstance(n, (exp.Subquery, exp.Select)):
            continue
        stack.extend(n.iter_expressions())
    return out


class FromPlanner:
    """Lowers one FROM clause (with the WHERE conditions it can use) into a Rel."""

    def __init__(self, compiler: Compiler, outer: Scope | None) -> None:
        self.c = compiler
        self.src = compiler.src
        self.outer = outer

    # ---- table references -----------------------------------------------------------------------
    def item(self, node: exp.Expression) -> Rel:
        alias_node = node.args.get("alias")
        alias = name_of(alias_node.this) if alias_node is not None and alias_node.this is not None else None
        cols = [name_of(c) for c in alias_node.args.get("columns") or []] if alias_node is not None else []
        if timewindows.is_time_window(node):  # tumble / hop / session(table, ts, ...)
            assert isinstance(node, exp.Table)
            rel = timewindows.lower(self, node, alias)
        elif isinstance(node, exp.Table):
            if node.args.get("db") or node.args.get("catalog"):
                self.src.unsupported(f"qualified table name {node.sql(dialect='duckdb')}", node)
            name = name_of(node.this)
            rel = self.c.table_rel(name, node)
            rel = rel.requalify(alias or name)
        elif (
            isinstance(node, exp.Subquery)
            and isinstance(node.this, (exp.Table, exp.Subquery))  # a SELECT has joins too: a query
            and node.this.args.get("joins")
        ):
            rel = self.parenthesized_join(node.this)  # `(a JOIN b ON ...)`: a and b stay visible
            rel = rel.requalify(alias) if alias is not None else rel
        elif isinstance(node, exp.Subquery):
            rel = self.c.query(node.this, self.outer).requalify(alias)
        else:
            self.src.unsupported(f"FROM item {node.sql(dialect='duckdb')[:60]}", node)
        if cols:
            vis = rel.visible()
            if len(cols) > len(vis):
                self.src.schema_error(f"{alias} has {len(vis)} columns but {len(cols)} column aliases", node)
            rel = Rel(
                rel.stream,
                [Field(cols[i] if i < len(cols) else f.name, f.col, f.qualifier) for i, f in enumerate(vis)],
            )
        return rel

    def parenthesized_join(self, node: exp.Expression) -> Rel:
        """A join in parentheses, `FROM (t0 AS a CROSS JOIN t1 AS b)`: planned as a FROM clause of its own
        (its ON conditions only), its tables keeping their names unless the parentheses are aliased."""
        first = node.copy()
        joins = first.args.get("joins") or []
        first.set("joins", None)
        pool, _ = self.join_item(self.item(first), joins, [], [])
        rel, _ = self.collapse(pool, [], consume=True)
        return rel

    # ---- the FROM clause ------------------------------------------------------------------------
    def plan(self, select: exp.Select, where: list[exp.Expression]) -> tuple[Rel, list[exp.Expression]]:
        """The FROM clause's relation, and the WHERE conditions it did not consume.

        `FROM a, b JOIN c ON ...` is `a, (b JOIN c ON ...)`: explicit joins bind tighter than commas, so
        an outer join's left side is the comma item it belongs to. Inner joins of all items are pooled."""
        frm = select.args.get("from_")
        if frm is None:  # SELECT without FROM: one empty row
            return self.c.one_row(), where
        items: list[tuple[Any, list[Any]]] = [(frm.this, [])]
        for j in select.args.get("joins") or []:
            if _is_comma(j):
                items.append((j.this, []))
            else:
                items[-1][1].append(j)
        pool = Pool()
        remaining = list(where)
        for first, joins in items:
            taken = [c for r in pool.rels for c in r.stream.schema]
            sub, remaining = self.join_item(self.c.disjoint(taken, self.item(first)), joins, remaining, taken)
            pool.rels += sub.rels
            pool.conds += sub.conds
        rel, used = self.collapse(pool, remaining, consume=True)
        return rel, [c for c in remaining if c not in used]

    def join_item(
        self, first: Rel, joins: list[Any], remaining: list[exp.Expression], taken: list[str]
    ) -> tuple[Pool, list[exp.Expression]]:
        """One comma item of a FROM clause: a table and its explicit joins, left to right."""
        pool = Pool([first])
        sides = [(j.args.get("side") or "").upper() for j in joins]
        for i, j in enumerate(joins):
            side = sides[i]
            kind = (j.args.get("kind") or "").upper()
            method = str(j.args.get("method") or "").upper()
            if kind in ("SEMI", "ANTI") or method not in ("", "NATURAL", "ASOF"):
                self.src.unsupported(f"{kind or j.args.get('method')} JOIN", j)
            cols = taken + [c for r in pool.rels for c in r.stream.schema]
            right = self.c.disjoint(cols, self.item(j.this))  # before USING refers to its fields
            on = j.args.get("on")
            using = [name_of(u) for u in j.args.get("using") or []]
            if method == "ASOF":  # (`asof.py`): the left side is everything joined so far
                from dbspark.frontends.sql.asof import asof_join

                left = self.collapse(pool, [], consume=False)
                pool = Pool([asof_join(self, left[0], right, side, on, j)])
                continue
            if method == "NATURAL":
                left_names = {f.name for r in pool.rels for f in r.visible()}
                using = [f.name for f in right.visible() if f.name in left_names]
            if side in ("LEFT", "RIGHT", "FULL"):
                # WHERE conditions may go below a LEFT join's preserved side, unless a later RIGHT or FULL
                # join makes that side null-supplying (the WHERE then also filters the padded rows)
                push = side == "LEFT" and not {"RIGHT", "FULL"} & set(sides[i + 1 :])
                left = self.collapse(pool, remaining if push else [], consume=push)
                remaining = [c for c in remaining if c not in left[1]]
                pool = Pool([self.outer_join(left[0], right, side, on, using, j)])
                continue
            pool.rels.append(right)
            if using:
                pool.conds += self.using_conditions(pool.rels[:-1], right, using, j)
                pool.rels[-1] = Rel(
                    right.stream,
                    [Field(f.name, f.col, f.qualifier, hidden=f.name in using) for f in right.fields],
                )
            if on is not None:
                pool.conds += conjuncts(on)
        return pool, remaining

    def using_conditions(
        self, lefts: list[Rel], right: Rel, using: list[str], node: Any
    ) -> list[exp.Expression]:
        conds: list[exp.Expression] = []
        for name in using:
            lf = [f for r in lefts for f in r.visible() if f.name == name]
            rf = [f for f in right.visible() if f.name == name]
            if len(lf) != 1 or len(rf) != 1:
                self.src.schema_error(f"USING column {name} must occur once on each side of the join", node)
            conds.append(exp.EQ(this=field_ref(lf[0]), expression=field_ref(rf[0])))
        return conds

    # ---- inner joins ----------------------------------------------------------------------------
    def collapse(
        self, pool: Pool, where: list[exp.Expression], consume: bool
    ) -> tuple[Rel, list[exp.Expression]]:
        """Join the pool's relations; returns the relation and the WHERE conditions it used."""
        fields = [f for r in pool.rels for f in r.fields]
        usable = [c for c in where if consume and not has_subquery(c) and self.local_to(c, fields)]
        conds = [c for c in pool.conds] + usable
        for c in pool.conds:
            if has_subquery(c):
                self.src.unsupported("a subquery in a JOIN condition", c)
        rels = list(pool.rels)
        # single-relation conditions first
        pending: list[exp.Expression] = []
        for c in conds:
            idx = self.owners(c, rels)
            if len(idx) == 1:
                i = next(iter(idx))
                rels[i] = self.filter(rels[i], [c])
            elif not idx and not columns_of(c):
                rels[0] = self.filter(rels[0], [c])
            else:
                pending.append(c)
        cur = rels[0]
        rest = rels[1:]
        got = multiway(self.c, self.src, rels, pending)
        if got is not None:  # a cyclic pool: one multiway join (`multiway.py`), its fields in FROM order
            (cur, pending), rest = got, []
        while rest:
            pick, keys = None, []
            for i, r in enumerate(rest):
                keys = self.equi_keys(cur, r, pending)
                if keys:
                    pick = i
                    break
            if pick is None:
                pick = 0
            r = self.c.disjoint(cur.stream.schema, rest.pop(pick))
            keys = self.equi_keys(cur, r, pending)
            used = [k[0] for k in keys]
            cur, r, pairs = self.keyed_join(cur, r, keys)
            cur = self.join(cur, r, pairs)
            pending = [c for c in pending if c not in used]
            ready = [c for c in pending if self.local_to(c, cur.fields)]
            if ready:
                cur = self.filter(cur, ready)
                pending = [c for c in pending if c not in ready]
        if pending:
            cur = self.filter(cur, pending)
        # SELECT * lists the columns in FROM order, whatever order the joins ran in
        if got is not None:
            return Rel(cur.stream, cur.fields), usable
        return Rel(cur.stream, [f for r in pool.rels for f in r.fields]), usable

    def local_to(self, cond: exp.Expression, fields: list[Field]) -> bool:
        scope = Scope(fields, self.src)
        try:
            return all(scope.find(col) is not None for col in columns_of(cond))
        except Exception:
            return False

    def owners(self, cond: exp.Expression, rels: list[Rel]) -> set[int]:
        out: set[int] = set()
        for col in columns_of(cond):
            for i, r in enumerate(rels):
                if Scope(r.fields, self.src).find(col) is not None:
                    out.add(i)
        return out

    def equi_keys(
        self, a: Rel, b: Rel, conds: list[exp.Expression]
    ) -> list[tuple[exp.Expression, exp.Expression, exp.Expression]]:
        """Conditions `x = y` with x an expression over a's columns only and y over b's (or the other way
        round): (condition, x, y)."""
        keys: list[tuple[exp.Expression, exp.Expression, exp.Expression]] = []
        for c in conds:
            if not isinstance(c, exp.EQ) or has_subquery(c):
                continue
            x, y = c.this, c.expression
            sx, sy = self.sides(x, a, b), self.sides(y, a, b)
            if sx == "a" and sy == "b":
                keys.append((c, x, y))
            elif sx == "b" and sy == "a":
                keys.append((c, y, x))
        return keys

    def sides(self, node: exp.Expression, a: Rel, b: Rel) -> str | None:
        """'a' or 'b' if every column of `node` (at least one) is a column of only that relation."""
        cols = columns_of(node)
        if not cols:
            return None
        sa, sb = Scope(a.fields, self.src), Scope(b.fields, self.src)
        ina = [sa.find(col) is not None for col in cols]
        inb = [sb.find(col) is not None for col in cols]
        if all(ina) and not any(inb):
            return "a"
        if all(inb) and not any(ina):
            return "b"
        return None

    def key_columns(self, rel: Rel, nodes: list[exp.Expression]) -> tuple[Rel, list[str]]:
        """Internal columns holding the key expressions (computed where a key is not a plain column)."""
        comp = ExprCompiler(Scope(rel.fields, self.src))
        items, cols = [], []
        for n in nodes:
            e = comp(n, rel.stream.schema)
            if isinstance(e, ir.Col):
                cols.append(e.name)
            else:
                col = self.c.names.fresh("k")
                items.append((col, e))
                cols.append(col)
        return add_columns(rel, items), cols

    def keyed_join(
        self, a: Rel, b: Rel, keys: list[tuple[exp.Expression, exp.Expression, exp.Expression]]
    ) -> tuple[Rel, Rel, list[tuple[str, str]]]:
        """a and b with their key columns, and the (a column, b column) pairs to join on."""
        a, ka = self.key_columns(a, [k[1] for k in keys])
        b, kb = self.key_columns(b, [k[2] for k in keys])
        # keys of different types (DATE = TIMESTAMP, INTEGER = DECIMAL) are compared in their common type:
        # cast into new columns, so that the join and an outer join's anti-join see equal types and the
        # user's columns keep theirs
        casts_a: list[tuple[str, ir.Expr]] = []
        casts_b: list[tuple[str, ir.Expr]] = []
        for i, (x, y) in enumerate(zip(ka, kb, strict=True)):
            ta, tb = a.stream.schema[x], b.stream.schema[y]
            if ta == tb:
                continue
            t = common_type(ta, tb)
            if t is None:
                self.src.schema_error(f"cannot compare {ta} with {tb} in a join condition", keys[i][0])
            if ta != t:
                ka[i] = self.c.names.fresh("k")
                casts_a.append((ka[i], ir.Cast(ir.Col(x), t)))
            if tb != t:
                kb[i] = self.c.names.fresh("k")
                casts_b.append((kb[i], ir.Cast(ir.Col(y), t)))
        return add_columns(a, casts_a), add_columns(b, casts_b), list(zip(ka, kb, strict=True))

    def join(self, a: Rel, b: Rel, keys: list[tuple[str, str]]) -> Rel:
        if not keys:
            return Rel(a.stream.stream_product(b.stream), a.fields + b.fields)
        sa, sb = a.stream, b.stream
        for ka, kb in keys:  # SQL compares across numeric types: join on the common type
            ta, tb = sa.schema[ka], sb.schema[kb]
            if ta != tb:
                t = common_type(ta, tb)
                if t is None:
                    self.src.schema_error(f"cannot compare {ta} with {tb} in a join condition", None)
                sa, sb = cast_to(sa, {ka: t}), cast_to(sb, {kb: t})
        s = sa.stream_join(sb, left_on=[k for k, _ in keys], right_on=[k for _, k in keys])
        return Rel(s, a.fields + b.fields)

    def filter(self, rel: Rel, conds: list[exp.Expression]) -> Rel:
        scope = Scope(rel.fields, self.src, outer=self.outer)
        comp = ExprCompiler(scope)
        pred: ir.Expr | None = None
        for c in conds:
            e = comp(c, rel.stream.schema)
            pred = e if pred is None else ir.Binary("and", pred, e)
        return rel if pred is None else Rel(rel.stream.filter(pred), rel.fields)

    # ---- outer joins ----------------------------------------------------------------------------
    def outer_join(
        self, left: Rel, right: Rel, side: str, on: exp.Expression | None, using: list[str], node: Any
    ) -> Rel:
        if side == "RIGHT":
            out = self.outer_join(right, left, "LEFT", on, using, node)
            left_cols = set(left.stream.schema)
            fields = [f for f in out.fields if f.col in left_cols] + [
                f for f in out.fields if f.col not in left_cols
            ]
            return Rel(out.stream, using_in_place(fields, left.fields, using))
        right = self.c.disjoint(left.stream.schema, right)
        conds = conjuncts(on) if on is not None else []
        if using:
            conds += self.using_conditions([left], right, using, node)
        for c in conds:
            if has_subquery(c):
                self.src.unsupported("a subquery in an outer JOIN condition", c)
        keys = self.equi_keys(left, right, conds)
        residual = [c for c in conds if c not in [k[0] for k in keys]]
        # ON conditions on the right side alone filter the right side before the join (for a FULL join
        # the unfiltered right side is still preserved: its unmatched rows are found whole)
        right_only = [c for c in residual if self.local_to(c, right.fields)]
        residual = [c for c in residual if c not in right_only]
        left, right, pairs = self.keyed_join(left, right, keys)
        right_matchable = self.filter(right, right_only)
        inner = self.join(left, right_matchable, pairs)
        inner = self.filter(inner, residual)
        cols = list(inner.stream.schema)
        lcols, rcols = list(left.stream.schema), list(right.stream.schema)
        parts = [inner.stream]
        parts.append(self.unmatched(left, inner, lcols, pairs, residual, pad=right_matchable))
        if side == "FULL":
            parts.append(
                self.unmatched(
                    right, inner, rcols, [(b, a) for a, b in pairs], residual + right_only, pad=left
                )
            )
        total = parts[0]
        for p in parts[1:]:
            total = total + drop_to(p, cols)
        fields = left.fields + right.fields
        if using and side == "FULL":  # the unqualified USING column is COALESCE(left, right)
            extra = []
            for name in using:
                lf = next(f for f in left.visible() if f.name == name)
                rf = next(f for f in right.fields if f.name == name)
                col = self.c.names.fresh()
                extra.append((col, ir.Func("coalesce", (ir.Col(lf.col), ir.Col(rf.col)))))
                fields = [
                    Field(f.name, f.col, f.qualifier, hidden=True) if f.name == name else f for f in fields
                ]
                fields.append(Field(name, col, None))
            total = total.map(*[(c, ir.Col(c)) for c in total.schema], *extra)
        elif using:
            fields = [
                Field(f.name, f.col, f.qualifier, hidden=f in right.fields and f.name in using)
                for f in fields
            ]
        return Rel(total, using_in_place(fields, left.fields, using))

    def unmatched(
        self,
        keep: Rel,
        inner: Rel,
        keep_cols: list[str],
        pairs: list[tuple[str, str]],
        residual: list[Any],
        pad: Rel,
    ) -> Any:
        """Rows of `keep` without a partner in the inner join, padded with NULLs for `pad`'s columns."""
        if not residual and pairs:
            rest = keep.stream.stream_antijoin(
                pad.stream, left_on=[a for a, _ in pairs], right_on=[b for _, b in pairs]
            )
        else:
            matched = drop_to(inner.stream, keep_cols)
            rest = semi_rows(keep, matched, keep_cols, self.c.names, anti=True).stream
        return pad_nulls(rest, pad.stream.schema)
