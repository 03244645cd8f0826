"""Parsing SQL text with sqlglot (DuckDB dialect) into statements, and locating nodes for errors.

Every error the SQL front end raises names a line and column (1-based) of the text: sqlglot's own
syntax errors carry them; other nodes are located through the offsets sqlglot records on their
identifiers and literals.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, NoReturn, cast

import sqlglot
from sqlglot import exp

from dbspark.errors import ParseError, SchemaError, UnknownNameError, UnsupportedError

DIALECT = "duckdb"


@dataclass
class Source:
    """The SQL text being compiled: turns sqlglot offsets into line and column."""

    text: str
    dialect: str = "duckdb"  # the user's dialect; "spark": `text` is its translation (`spark.py`)

    def line_col(self, offset: int) -> tuple[int, int]:
        line = self.text.count("\n", 0, offset) + 1
        start = self.text.rfind("\n", 0, offset) + 1
        return line, offset - start + 1

    def where(self, node: Any) -> str:
        """' at line L, column C' for a node (its first located descendant), or '' if unknown."""
        pos = position(node)
        if pos is None:
            return ""
        line, col = self.line_col(pos)
        return f" at line {line}, column {col}"

    def fail(self, cls: type[Exception], message: str, node: Any = None) -> NoReturn:
        raise cls(message + (self.where(node) if node is not None else ""))

    def unsupported(self, what: str, node: Any) -> NoReturn:
        self.fail(UnsupportedError, f"unsupported SQL: {what}", node)

    def unknown(self, what: str, node: Any) -> NoReturn:
        self.fail(UnknownNameError, what, node)

    def schema_error(self, what: str, node: Any) -> NoReturn:
        self.fail(SchemaError, what, node)


def position(node: Any) -> int | None:
    """The smallest start offset recorded on `node` or its descendants."""
    best: int | None = None
    if not isinstance(node, exp.Expression):
        return None
    for n in node.walk():
        meta = getattr(n, "_meta", None) or {}
        start = meta.get("start")
        if start is not None and (best is None or start < best):
            best = start
    return best


def parse(text: str) -> tuple[Source, list[exp.Expression]]:
    """The statements of `text`; a syntax error raises ParseError with its line and column."""
    src = Source(text)
    sqlglot_log = logging.getLogger("sqlglot")
    level = sqlglot_log.level
    sqlglot_log.setLevel(logging.ERROR)  # no "falling back to parsing as a Command" warning: see below
    try:
        statements = sqlglot.parse(text, dialect=DIALECT)
    except sqlglot.errors.ParseError as e:
        raise syntax_error(e) from None
    except sqlglot.errors.TokenError as e:
        raise ParseError(f"SQL syntax error: {e}") from None
    finally:
        sqlglot_log.setLevel(level)
    out = [unfiltered(src, cast(exp.Expression, s)) for s in statements if s is not None]
    for st in out:
        if isinstance(st, exp.Command) and str(st.this).upper() == "CREATE":
            create_syntax_error(src, st)
    return src, out


# aggregates that skip NULL arguments: `agg(x) FILTER (WHERE c)` is `agg(CASE WHEN c THEN x END)`
SKIP_NULLS = (
    exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Stddev, exp.StddevSamp, exp.StddevPop, exp.Variance,
    exp.VariancePop, exp.Median, exp.Mode, exp.LogicalAnd, exp.LogicalOr, exp.BitwiseAndAgg,
    exp.BitwiseOrAgg, exp.BitwiseXorAgg,
)  # fmt: skip


def unfiltered(src: Source, st: exp.Expression) -> exp.Expression:
    """The statement with each aggregate's FILTER clause folded into its argument (`SKIP_NULLS`); a
    FILTER on another aggregate is an UnsupportedError naming it."""

    def fold(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Filter):
            return node
        agg, where = node.this, node.expression
        if not isinstance(agg, SKIP_NULLS) or not isinstance(where, exp.Where):
            src.unsupported(f"FILTER on {agg.sql(dialect=DIALECT)}", node)
        cond = where.this

        def gate(x: exp.Expression) -> exp.Expression:
            return exp.Case(ifs=[exp.If(this=cond.copy(), true=x)])

        arg = agg.this
        if isinstance(arg, exp.Star) or (isinstance(agg, exp.Count) and arg is None):
            agg.set("this", gate(exp.Literal.number(1)))
        elif isinstance(arg, exp.Distinct):
            arg.set("expressions", [gate(x) for x in arg.expressions])
        else:
            agg.set("this", gate(arg))
        return agg

    return st.transform(fold)


def syntax_error(e: sqlglot.errors.ParseError, line0: int = 1, col0: int = 1) -> ParseError:
    """sqlglot's error as a ParseError; (line0, col0) is where the parsed text starts in the user's text."""
    info = e.errors[0] if e.errors else {}
    line, col = info.get("line"), info.get("col")
    if line is not None and col is not None:
        col = max(col - len(info.get("highlight") or " ") + 1, 1)  # sqlglot's column ends the token
        line, col = line + line0 - 1, col + (col0 - 1 if line == 1 else 0)
    return ParseError(
        f"SQL syntax error: {info.get('description', str(e))} near {info.get('highlight', '')!r}", line, col
    )


def create_syntax_error(src: Source, st: exp.Command) -> NoReturn:
    """sqlglot reads a CREATE statement it cannot parse as an opaque Command: find the syntax error in
    its query (the text after AS) and report it where it is in the user's text."""
    rest = str(st.expression)
    start = src.text.find(rest.strip())
    line, col = src.line_col(max(start, 0))
    m = re.search(r"\bAS\b", rest, re.IGNORECASE)
    if start >= 0 and m is not None:
        query = rest[m.end() :]
        offset = start + rest.strip().find(query.strip())
        try:
            sqlglot.parse_one(query.lstrip(), dialect=DIALECT)
        except sqlglot.errors.ParseError as e:
            qline, qcol = src.line_col(offset)
            raise syntax_error(e, qline, qcol) from None
        except sqlglot.errors.TokenError as e:
            raise ParseError(f"SQL syntax error: {e}", line, col) from None
    raise ParseError(f"SQL syntax error: cannot parse the statement CREATE{rest[:60]}", line, col)


def name_of(ident: Any) -> str:
    """A SQL identifier's name: unquoted names are case-insensitive (lower-cased), quoted ones kept."""
    if isinstance(ident, exp.Identifier):
        return ident.this if ident.quoted else ident.this.lower()
    if isinstance(ident, str):
        return ident.lower()
    return ident.name.lower()
