"""Parsing SQL text with sqlglot (DuckDB dialect) into statements, and locating nodes for errors.

Every error the SQL front end raises names a line and column (1-based) of the text: sqlglot's own
syntax errors carry them; other nodes are located through the offsets sqlglot records on their
identifiers and literals.
"""

from __future__ import annotations

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
    try:
        statements = sqlglot.parse(text, dialect=DIALECT)
    except sqlglot.errors.ParseError as e:
        info = e.errors[0] if e.errors else {}
        raise ParseError(
            f"SQL syntax error: {info.get('description', str(e))} near {info.get('highlight', '')!r}",
            info.get("line"),
            info.get("col"),
        ) from None
    except sqlglot.errors.TokenError as e:
        raise ParseError(f"SQL syntax error: {e}") from None
    return src, [cast(exp.Expression, s) for s in statements if s is not None]


def name_of(ident: Any) -> str:
    """A SQL identifier's name: unquoted names are case-insensitive (lower-cased), quoted ones kept."""
    if isinstance(ident, exp.Identifier):
        return ident.this if ident.quoted else ident.this.lower()
    if isinstance(ident, str):
        return ident.lower()
    return ident.name.lower()
