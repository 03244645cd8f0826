"""A bound column of a recursive CTE, pushed into its base: SQL's goal-directed evaluation of
`WHERE src = 1` over a recursion (the Magic Sets of `frontends/datalog/magic.py`, in the case SQL's
linear recursions make simple).

    WITH RECURSIVE tc(src, dst) AS (
        SELECT src, dst FROM edge
        UNION
        SELECT tc.src, edge.dst FROM tc JOIN edge ON tc.dst = edge.src)
    SELECT * FROM tc WHERE src = 1

Every row of `tc` has the `src` of the base row it descends from, since the recursive term copies it
from the one row of `tc` it reads. So the rows with `src = 1` are the fixpoint of the recursive term
from the base rows with `src = 1`: the filter moves into the base, and the recursion derives the rows
reachable from node 1 only, not the whole closure (`tests/test_sql_pushdown.py`).

The rewrite applies when: the query is `SELECT ... FROM cte [AS a] WHERE ...` over a self-recursive
CTE of its own WITH RECURSIVE that nothing else reads; the recursive term is one SELECT that reads the
CTE once, without DISTINCT ON, ORDER BY or LIMIT, and projects the CTE's column unchanged at that
column's position (and, if it groups, groups by it: a recursion through MIN, `docs/recursive-
aggregation.md`, keeps each group's rows within one value of the column, so cheapest paths asked
`WHERE src = 1` are computed from node 1 only); the WHERE has a conjunct `column = constant` on it.
Otherwise the query is compiled as written.
"""

from __future__ import annotations

from sqlglot import exp

from dbspark.frontends.sql.aggregates import find_aggregates
from dbspark.frontends.sql.parse import name_of


def push_bound_columns(node: exp.Select) -> exp.Select:
    """`node` (a SELECT with its WITH) with the constants its WHERE binds on a recursive CTE's preserved
    columns pushed into that CTE's base; `node` itself if nothing applies (it is not modified)."""
    with_ = node.args.get("with_")
    src = node.args.get("from_") or node.args.get("from")
    if with_ is None or not with_.args.get("recursive") or src is None or node.args.get("joins"):
        return node
    table = src.this
    where = node.args.get("where")
    if not isinstance(table, exp.Table) or where is None:
        return node
    name = name_of(table.this)
    ctes = {name_of(c.args["alias"].this): c for c in with_.expressions}
    cte = ctes.get(name)
    if cte is None or _reads(node, name, skip=with_) != 1:
        return node
    if any(name in _tables(c.this) for n, c in ctes.items() if n != name):
        return node  # another CTE reads it: its view of the CTE would change
    body = cte.this
    if not isinstance(body, exp.Union) or not isinstance(body.expression, exp.Select):
        return node
    base, step = body.this, body.expression
    cols = [name_of(c) for c in cte.args["alias"].args.get("columns") or []]
    if not cols and isinstance(base, exp.Select):
        cols = [e.alias_or_name for e in base.expressions]
    kept = _preserved(step, name, cols)
    alias = table.alias_or_name
    binds = [
        (col, value)
        for cond in _conjuncts(where.this)
        if (b := _binding(cond, alias, name)) is not None
        for col, value in [b]
        if col in kept
    ]
    if not binds or len(cols) != len(set(cols)):
        return node
    out = node.copy()
    new_cte = next(c for c in out.args["with_"].expressions if name_of(c.args["alias"].this) == name)
    # the base wrapped, not re-parsed: its nodes keep their positions for errors
    cond = exp.and_(*[exp.column(c, table="__base", quoted=True).eq(v.copy()) for c, v in binds])
    alias_ = exp.TableAlias(
        this=exp.to_identifier("__base", quoted=True), columns=[exp.to_identifier(c) for c in cols]
    )
    filtered = exp.select("*").from_(exp.Subquery(this=new_cte.this.this, alias=alias_)).where(cond)
    new_cte.this.set("this", filtered)
    return out


def _tables(e: exp.Expression) -> set[str]:
    return {name_of(t.this) for t in e.find_all(exp.Table)}


def _reads(node: exp.Expression, name: str, skip: exp.Expression) -> int:
    """How many times `node` reads the relation `name`, outside `skip`."""
    inside = {id(t) for t in skip.find_all(exp.Table)}
    return sum(1 for t in node.find_all(exp.Table) if id(t) not in inside and name_of(t.this) == name)


def _preserved(step: exp.Select, name: str, cols: list[str]) -> set[str]:
    """The CTE's columns the recursive term copies unchanged from the one CTE row it reads (with GROUP
    BY: those among the group keys, each group's rows sharing the value)."""
    for key in ("limit", "offset", "order"):
        if step.args.get(key) is not None:
            return set()
    group = step.args.get("group")
    d = step.args.get("distinct")
    if isinstance(d, exp.Distinct) and d.args.get("on"):
        return set()
    if group is None and (step.args.get("having") is not None or find_aggregates(list(step.expressions))):
        return set()  # an aggregate of all the rows
    keys = (
        None if group is None else {(c.table, c.name) for c in group.expressions if isinstance(c, exp.Column)}
    )
    reads = [t for t in step.find_all(exp.Table) if name_of(t.this) == name]
    if len(reads) != 1 or any(isinstance(s, exp.Select) and s is not step for s in step.find_all(exp.Select)):
        return set()  # read twice (a non-linear recursion), or inside a subquery
    alias = reads[0].alias_or_name
    out = set()
    for i, e in enumerate(step.expressions):
        e = e.this if isinstance(e, exp.Alias) else e
        if i < len(cols) and isinstance(e, exp.Column) and e.table == alias and e.name == cols[i]:
            if keys is None or (e.table, e.name) in keys:
                out.add(cols[i])
    return out


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    if isinstance(e, exp.Paren):
        return _conjuncts(e.this)
    return [e]


def _binding(cond: exp.Expression, alias: str, name: str) -> tuple[str, exp.Expression] | None:
    """(column, constant) for `column = constant` on the CTE (either side), else None."""
    if not isinstance(cond, exp.EQ):
        return None
    for a, b in ((cond.this, cond.expression), (cond.expression, cond.this)):
        if isinstance(a, exp.Column) and a.table in ("", alias, name) and isinstance(b, exp.Literal):
            return a.name, b
    return None
