"""A recursive CTE that aggregates over itself: the monotonic form (`docs/recursive-aggregation.md`).

    WITH RECURSIVE sp(node, cost) AS (
        SELECT src, 0 FROM start
        UNION
        SELECT e.dst, MIN(sp.cost + e.w) FROM sp JOIN edge e ON sp.node = e.src GROUP BY e.dst)

DuckDB and PostgreSQL apply a recursive term to the rows the previous iteration added, which for an
aggregate is not a fixpoint of anything. dbspark gives such a CTE the meaning the Datalog front end
gives the same rules (Ross and Sagiv's monotonic semantics,
`incremental-aggregation-monotonic-programs.txt` §4): the CTE is a cost predicate whose cost column is
the aggregate's, ordered by it (MIN: lower is better; MAX, SUM, COUNT: higher is better), and its
value is the least fixpoint of `cte = best(base UNION step(cte))`, the best cost per key
(`Stream.stream_best`).

`cost_form` recognises the form and checks that it is monotonic: a recursive term that is one SELECT
with GROUP BY whose select list holds one aggregate, MIN / MAX / SUM / COUNT, the others plain
expressions (the key); the CTE's cost column read only inside that aggregate's argument, through an
expression increasing in it (`+`, `-` of something without it, `*` or `/` by a positive constant),
or in WHERE conjuncts that a better cost keeps true (`sp.cost + e.w < 100` under MIN). Anything else
is refused naming the CTE and the construct: UNION ALL, HAVING, a second aggregate, the cost joined
on, grouped by or compared otherwise, mutual recursion through an aggregate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dbspark.frontends.sql.aggregates import find_aggregates
from dbspark.frontends.sql.parse import name_of

if TYPE_CHECKING:
    from dbspark.frontends.sql.compiler import Compiler
    from dbspark.frontends.sql.recursion import Member

ORDER_OF = {exp.Min: "min", exp.Max: "max", exp.Sum: "max", exp.Count: "max"}


@dataclass(frozen=True)
class CostForm:
    """The CTE's cost column (its position) and order ("min" or "max")."""

    index: int
    better: str
    bounded: bool  # MIN or MAX: a run past about as many iterations as facts does not converge


class _Refused(Exception):
    def __init__(self, why: str, node: Any) -> None:
        self.why, self.node = why, node


def cost_form(c: Compiler, m: Member, cols: list[str], names: set[str]) -> CostForm | None:
    """The monotonic aggregate form of member `m` (its columns `cols`; `names`: the component's CTEs),
    None if its recursive term aggregates nothing that reads the component; refuses other aggregates
    over the component."""
    body = m.body
    step = body.expression
    aggs_over = [s for s in body.find_all(exp.Select) if _aggregates(s) and _reads(s) & names]
    if not aggs_over:
        return None
    try:
        if len(names) > 1:
            raise _Refused("an aggregate in mutually recursive CTEs", aggs_over[0])
        if not body.args.get("distinct"):
            raise _Refused(
                "UNION ALL with an aggregate over the CTE (its rows are a set of best costs)", body
            )
        if not isinstance(step, exp.Select) or aggs_over != [step]:
            raise _Refused(
                "an aggregate over the CTE other than in the recursive term's own SELECT", aggs_over[0]
            )
        return _step_form(step, m.name, cols)
    except _Refused as e:
        c.src.unsupported(
            f"{e.why}, in the recursive term of {m.name} (a recursive CTE may aggregate over itself as "
            "SELECT key, ..., MIN|MAX|SUM|COUNT(expr) ... GROUP BY key, the cost read only in expr, "
            "increasing, and in WHERE conditions a better cost keeps true; docs/recursive-aggregation.md)",
            e.node,
        )


def _aggregates(s: exp.Select) -> bool:
    exprs = [*s.expressions, *([s.args["having"].this] if s.args.get("having") else [])]
    return s.args.get("group") is not None or bool(find_aggregates(exprs))


def _reads(s: exp.Expression) -> set[str]:
    return {name_of(t.this) for t in s.find_all(exp.Table)}


def _step_form(step: exp.Select, cte: str, cols: list[str]) -> CostForm:
    if step.args.get("group") is None:
        raise _Refused("an aggregate without GROUP BY over the CTE", step)
    if step.args.get("having") is not None:
        raise _Refused("HAVING", step.args["having"])
    aggs = find_aggregates(list(step.expressions))
    if len(aggs) != 1:
        raise _Refused(f"{len(aggs)} aggregates in the select list (one is the cost)", step)
    (agg,) = aggs
    if type(agg) not in ORDER_OF:
        raise _Refused(
            f"the aggregate {agg.sql(dialect='duckdb')} (MIN, MAX, SUM and COUNT are monotonic)", agg
        )
    index = next(i for i, e in enumerate(step.expressions) if agg in list(e.walk()))
    projected = step.expressions[index]
    if (projected.this if isinstance(projected, exp.Alias) else projected) is not agg:
        raise _Refused(
            f"{projected.sql(dialect='duckdb')}: the aggregate is the cost column itself", projected
        )
    better = ORDER_OF[type(agg)]
    aliases = {t.alias_or_name for t in step.find_all(exp.Table) if name_of(t.this) == cte}
    cost = _Cost(aliases, cols[index], better)
    if not isinstance(agg, exp.Count):
        arg = agg.this
        got = cost.order(arg)
        if got is not None and got != better:  # (only through a decreasing map: refused there)
            raise _Refused(f"{agg.sql(dialect='duckdb')} is not increasing in {cols[index]}", agg)
    used = set(map(id, agg.walk())) if not isinstance(agg, exp.Count) else set()
    where = step.args.get("where")
    conds = list(_conjuncts(where.this)) if where is not None else []
    for cond in conds:
        if cost.reads(cond):
            cost.condition(cond)
            used |= set(map(id, cond.walk()))
    for node in step.walk():
        if isinstance(node, exp.Column) and cost.is_cost(node) and id(node) not in used:
            raise _Refused(f"the cost column {node.sql(dialect='duckdb')} used outside the aggregate", node)
    if isinstance(agg, exp.Sum):
        _nonnegative(agg, cte)
    return CostForm(index, better, isinstance(agg, (exp.Min, exp.Max)))


def _nonnegative(agg: exp.Sum, cte: str) -> None:
    """SUM(x) made SUM(CASE WHEN x < 0 THEN error(...) ELSE x END): a sum is monotonic (it only grows
    as its group grows) only over non-negative values, so a negative one is a DataError naming the CTE
    and the value, and the step is rejected (`docs/recursive-aggregation.md`)."""
    arg = agg.this
    msg = exp.func(
        "concat",
        exp.Literal.string(f"recursive CTE {cte}: {agg.sql(dialect='duckdb')} sums "),
        exp.cast(arg.copy(), "VARCHAR"),
        exp.Literal.string(
            ", a negative value, in a recursion through aggregation (its values must be >= 0)"
        ),
    )
    lt = exp.LT(this=arg.copy(), expression=exp.Literal.number(0))
    agg.set("this", exp.Case(ifs=[exp.If(this=lt, true=exp.func("error", msg))], default=arg))


def _conjuncts(e: exp.Expression) -> Any:
    if isinstance(e, exp.And):
        yield from _conjuncts(e.this)
        yield from _conjuncts(e.expression)
    elif isinstance(e, exp.Paren):
        yield from _conjuncts(e.this)
    else:
        yield e


class _Cost:
    """The CTE's cost column in the recursive term: where it is read, and in which direction."""

    def __init__(self, aliases: set[str], name: str, better: str) -> None:
        self.aliases, self.name, self.better = aliases, name, better

    def is_cost(self, c: exp.Column) -> bool:
        return c.name == self.name and (c.table in self.aliases or not c.table)

    def reads(self, e: exp.Expression) -> bool:
        return any(isinstance(n, exp.Column) and self.is_cost(n) for n in e.walk())

    def order(self, e: exp.Expression) -> str | None:
        """The order of `e` in the cost (None: it does not read it); refuses an expression that is not
        strictly increasing in it."""
        if isinstance(e, exp.Column):
            return self.better if self.is_cost(e) else None
        if not self.reads(e):
            return None
        if isinstance(e, (exp.Paren, exp.Cast)):
            return self.order(e.this)
        if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
            a, b = self.order(e.this), self.order(e.expression)
            if isinstance(e, exp.Add) and (a is None or b is None or a == b):
                return a or b
            if isinstance(e, exp.Sub) and b is None:
                return a
            if isinstance(e, (exp.Mul, exp.Div)) and b is None and _positive(e.expression):
                return a
            if isinstance(e, exp.Mul) and a is None and _positive(e.this):
                return b
        raise _Refused(f"{e.sql(dialect='duckdb')} is not increasing in the cost column {self.name}", e)

    def condition(self, cond: exp.Expression) -> None:
        """A WHERE conjunct reading the cost: kept true by a better cost, or refused."""
        ops: dict[type, bool] = {exp.LT: False, exp.LTE: False, exp.GT: True, exp.GTE: True}
        if type(cond) not in ops:
            raise _Refused(f"the condition {cond.sql(dialect='duckdb')} on the cost column {self.name}", cond)
        a, b = self.order(cond.this), self.order(cond.expression)
        if a is not None and b is not None:
            raise _Refused(f"the condition {cond.sql(dialect='duckdb')} compares two costs", cond)
        larger_ok = ops[type(cond)] == (a is not None)  # holds as the cost side grows
        if larger_ok != (self.better == "max"):
            raise _Refused(
                f"the condition {cond.sql(dialect='duckdb')} can turn false as the cost gets better", cond
            )


def _positive(e: exp.Expression) -> bool:
    if isinstance(e, exp.Paren):
        return _positive(e.this)
    if isinstance(e, exp.Literal) and not e.is_string:
        try:
            return float(e.this) > 0
        except ValueError:
            return False
    return False
