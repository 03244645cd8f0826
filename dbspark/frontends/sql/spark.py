"""Spark SQL's dialect (`p.sql(text, dialect="spark")`, `dbspark run --dialect spark`): the text is read
with sqlglot's Spark reader as Spark 4 reads it — ANSI mode, Spark's default: a CAST that fails and a
division by zero are errors, not NULLs — and written in DuckDB's dialect, which the front end compiles.

What the translation does (sqlglot's Spark to DuckDB, plus ANSI mode here):

- joins: `LEFT SEMI JOIN` / `LEFT ANTI JOIN` as `EXISTS` / `NOT EXISTS` (`_semi_anti_joins`);
- functions: only the ones whose meaning is Spark's, kept or rewritten; any other is refused by name
  (`spark_functions.py`);
- spelling: backticks, `STRING`, `nvl` / `ifnull`, `IF`, `concat` (NULL if an argument is NULL),
  `concat_ws`, `instr`, `date_add(d, n)`, `DIV`, `<=>`, `RLIKE`, `CREATE MATERIALIZED VIEW`,
  `CREATE TABLE ... USING fmt`;
- NULL ordering: Spark puts NULLs first in ascending order and last in descending order (DuckDB the
  other way round); every ORDER BY key (windows' too) gets its NULL order spelled out;
- ANSI errors: `/`, `DIV` and `%` by zero reject the step ("DIVIDE_BY_ZERO"), as Spark fails the query;
  a CAST of a string that is not a number rejects it (`TRY_CAST` gives NULL).

DECIMAL arithmetic as Spark's: a DECIMAL divided by a DECIMAL or an integer is a DECIMAL of Spark's
type, rounded half-up (`exprs.spark_division`, `functions.spark_decimal_quotient`; DuckDB's is a DOUBLE);
`SUM(DECIMAL(p, s))` is a DECIMAL(p + 10, s) and `AVG(DECIMAL(p, s))` a DECIMAL(p + 4, s + 4), as Spark
computes it (`aggregates.py`). Known differences left: integers are 64-bit
(Spark's INT overflows at 2^31, an error in ANSI mode), and a DOUBLE cast to a string is written as
DuckDB writes it. Errors name the statement's first line in the user's text; the SQL they quote is in
DuckDB's spelling.
"""

from __future__ import annotations

import logging

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType

from dbspark.errors import ParseError
from dbspark.frontends.sql import grouping_sets
from dbspark.frontends.sql.parse import Source, syntax_error
from dbspark.frontends.sql.spark_functions import translate_functions

ZERO = "[DIVIDE_BY_ZERO] Division by zero (Spark's ANSI mode; try_divide or NULLIF(divisor, 0) gives NULL)"


class SparkAnsi(Spark):
    """Spark 4 with ANSI mode on: CAST is strict, a division is not NULL on zero."""

    SAFE_DIVISION = False

    class Parser(Spark.Parser):  # type: ignore[misc, valid-type]
        STRICT_CAST = True
        # date_format keeps its Java pattern (`spark_functions` reads it; sqlglot's own conversion
        # copies letters it does not know into the strftime format)
        FUNCTIONS = {
            **Spark.Parser.FUNCTIONS,
            "DATE_FORMAT": lambda args: exp.Anonymous(this="date_format", expressions=args),
        }


def _checked_divisor(node: exp.Expression) -> exp.Expression:
    """`a / b`, `a DIV b`, `a % b` with `b` as `CASE WHEN b = 0 AND a IS NOT NULL THEN error(...) ELSE b
    END`."""
    if isinstance(node, (exp.Div, exp.IntDiv, exp.Mod)):
        b = node.expression
        lit = b.this if isinstance(b, exp.Neg) else b
        if isinstance(lit, exp.Literal) and lit.is_number and float(lit.this) != 0:
            return node
        # (a NULL dividend gives NULL before the divisor is looked at, as Spark)
        zero = exp.and_(
            exp.EQ(this=b.copy(), expression=exp.Literal.number(0)),
            exp.Not(this=exp.Is(this=node.this.copy(), expression=exp.Null())),
        )
        fail = exp.Anonymous(this="error", expressions=[exp.Literal.string(ZERO)])
        node.set("expression", exp.Case(ifs=[exp.If(this=zero, true=fail)], default=b))
    return node


def _refused(node: exp.Expression, src: Source) -> exp.Expression:
    """Spark constructs the dialect does not translate, refused by name before their functions are."""
    if isinstance(node, exp.Lateral) and node.args.get("view"):
        src.unsupported("LATERAL VIEW (explode and the other generators) in Spark's dialect", node)
    return node


def _standard_groups(node: exp.Expression, src: Source) -> exp.Expression:
    """`GROUP BY a, b WITH ROLLUP | WITH CUBE | GROUPING SETS (...)` in the standard's form, which DuckDB
    reads alike (written as it is, `GROUP BY a, b, GROUPING SETS (...)` would be their product); Spark's
    grouping_id() names every grouping column, in order (its arguments may be left out)."""
    if not isinstance(node, exp.Select) or node.args.get("group") is None:
        return node
    group = node.args["group"]
    keys = list(group.expressions) if any(group.args.get(k) for k in grouping_sets.HIVE) else []
    if not keys:
        for e in group.expressions:
            for k in e.expressions if isinstance(e, (exp.Rollup, exp.Cube, exp.GroupingSets)) else [e]:
                for x in (
                    k.expressions if isinstance(k, exp.Tuple) else [k.this if isinstance(k, exp.Paren) else k]
                ):
                    if all(x != y for y in keys):
                        keys.append(x)
    texts = [k.sql(dialect="spark") for k in keys]
    for g in node.find_all(exp.GroupingId):
        if not g.expressions:
            g.set("expressions", [k.copy() for k in keys])
        elif [a.sql(dialect="spark") for a in g.expressions] != texts:
            src.schema_error(
                f"{g.sql(dialect='spark')}: Spark's grouping_id() names every grouping column in order "
                f"({', '.join(texts)}), or none",
                g,
            )
    return grouping_sets.standard(node)


def _semi_anti_joins(node: exp.Expression, src: Source) -> exp.Expression:
    """`FROM t LEFT SEMI JOIN u ON c` as `FROM t WHERE EXISTS (SELECT 1 FROM u WHERE c)` (ANTI: NOT
    EXISTS), which keep the same rows of t: the join only filters them. Joins after it keep its filter
    where they are inner, cross or left joins; a right or full join after it, or USING, is refused."""
    if not isinstance(node, exp.Select):
        return node
    joins = node.args.get("joins") or []
    kept, tests = [], []
    for i, j in enumerate(joins):
        kind = str(j.args.get("kind") or "").upper()
        if kind not in ("SEMI", "ANTI"):
            kept.append(j)
            continue
        what = f"LEFT {kind} JOIN"
        if j.args.get("on") is None:
            src.unsupported(f"{what} without ON (USING or no condition)", j)
        if any(str(k.args.get("side") or "").upper() in ("RIGHT", "FULL") for k in joins[i + 1 :]):
            src.unsupported(f"{what} followed by a RIGHT or FULL JOIN", j)
        probe = exp.Exists(this=exp.select("1").from_(j.this).where(j.args["on"]))
        tests.append(probe if kind == "SEMI" else exp.Not(this=probe))
    if tests:
        node.set("joins", kept)
        where = node.args.get("where")
        node.set("where", exp.Where(this=exp.and_(*([where.this] if where else []), *tests)))
    return node


def to_duckdb(text: str) -> str:
    """`text`'s statements in DuckDB's dialect, each on the line its original starts on."""
    try:
        statements = sqlglot.parse(text, dialect=SparkAnsi)
        tokens = sqlglot.tokenize(text, read=SparkAnsi)
    except sqlglot.errors.ParseError as e:
        raise syntax_error(e) from None
    except sqlglot.errors.TokenError as e:
        raise ParseError(f"SQL syntax error: {e}") from None
    starts, new = [], True  # the line each statement starts on
    for t in tokens:
        if new and t.token_type != TokenType.SEMICOLON:
            starts.append(t.line)
            new = False
        if t.token_type == TokenType.SEMICOLON:
            new = True
    out: list[str] = []
    line = 1
    log = logging.getLogger("sqlglot")
    level = log.level
    log.setLevel(logging.ERROR)  # (no "Unsupported property" warnings: USING, MATERIALIZED are dropped)
    try:
        src = Source(text, "spark")
        sqls = [
            translate_functions(
                st.transform(_refused, src).transform(_semi_anti_joins, src).transform(_standard_groups, src),
                src,
            )
            .transform(_checked_divisor)
            .sql(dialect="duckdb")
            for st in statements
            if st is not None
        ]
    finally:
        log.setLevel(level)
    if len(starts) != len(sqls):  # (not expected: then the statements follow each other, unplaced)
        starts = [0] * len(sqls)
    for sql, start in zip(sqls, starts, strict=True):
        if start > line:
            out.append("\n" * (start - line))
            line = start
        out.append(sql + ";\n")
        line += 1
    return "".join(out)
