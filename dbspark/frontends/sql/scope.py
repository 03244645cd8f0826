"""Relations being built and the names visible in them.

A `Rel` is a stream of the circuit plus the SQL names of its columns: each `Field` maps a (qualifier,
name) pair to the stream's internal column. Internal column names are fresh (`_c12`), so joins never
clash and a SQL name can be resolved without ambiguity about where it came from. A `Scope` resolves
column references in a relation, falling back to enclosing scopes for correlated subqueries, and maps
already-computed expressions (GROUP BY keys, aggregates) by their SQL text.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import polars as pl
from sqlglot import exp

from dbspark.errors import UnsupportedError
from dbspark.frontends.sql.parse import Source, name_of

if TYPE_CHECKING:
    from dbspark.circuit.stream import Stream


INTERNAL = "__field__"


def field_ref(f: Field) -> exp.Column:
    """A column node that resolves to exactly the field `f` (by its internal column)."""
    return _internal(f.col)


class CorrelatedReference(UnsupportedError):
    """A subquery reads a column of its enclosing query where that cannot be decorrelated (raised while
    compiling a subquery as if uncorrelated; the caller then decorrelates it)."""


@dataclass(frozen=True)
class Field:
    """A column of a relation: its SQL name, the table alias that qualifies it, its internal column.

    `hidden` fields (the right copy of a USING column) are reachable only by qualified name and are not
    part of `*`."""

    name: str
    col: str
    qualifier: str | None = None
    hidden: bool = False


@dataclass
class Rel:
    """A relation under construction: a stream and the SQL view of its columns."""

    stream: Stream
    fields: list[Field]

    @property
    def schema(self) -> pl.Schema:
        return self.stream.schema

    def dtype(self, f: Field) -> pl.DataType:
        return self.stream.schema[f.col]

    def requalify(self, alias: str | None) -> Rel:
        """The same relation seen under a table alias (FROM t AS x)."""
        return Rel(self.stream, [replace(f, qualifier=alias) for f in self.fields])

    def visible(self) -> list[Field]:
        return [f for f in self.fields if not f.hidden]


class Names:
    """Fresh internal column names, unique within one compilation."""

    def __init__(self) -> None:
        self._n = itertools.count()

    def fresh(self, hint: str = "c") -> str:
        return f"_{hint}{next(self._n)}"


@dataclass
class Scope:
    """Names visible to an expression: the fields of a relation, computed expressions by SQL text, and
    the enclosing query's scope (for correlated references)."""

    fields: list[Field]
    src: Source
    computed: dict[str, str] = field(default_factory=dict)
    outer: Scope | None = None
    # set when references to `outer` are allowed and recorded (decorrelation)
    correlated: list[exp.Column] | None = None
    # in a GROUP BY query: names the error for a column neither grouped nor aggregated
    grouped: bool = False
    # SELECT aliases a name falls back to when it is no column here (HAVING, ORDER BY expressions), as
    # DuckDB binds: the relation's (grouped) columns first, then the aliases (the last of a repeated one)
    aliases: dict[str, exp.Expression] = field(default_factory=dict)
    # after GROUP BY: the scope before grouping, which binds expressions to match keys (`bound`)
    pre: Scope | None = None

    def lookup(self, node: exp.Column) -> str:
        """The internal column of a column reference; errors name unknown or ambiguous names."""
        found = self.find(node)
        if found is not None:
            return found
        if self.outer is not None and self.outer.resolves(node):
            if self.correlated is None:
                raise CorrelatedReference(
                    f"unsupported SQL: correlated reference to {node.sql(dialect='duckdb')} "
                    f"here (supported: in the WHERE conditions of EXISTS, IN and scalar "
                    f"subqueries){self.src.where(node)}"
                )
            self.correlated.append(node)
            return self.outer.lookup(node)
        name = node.sql(dialect="duckdb")
        if self.grouped:
            self.src.schema_error(
                f"column {name} must appear in the GROUP BY clause or be used in an aggregate function", node
            )
        known = sorted(
            {(f.qualifier + "." if f.qualifier else "") + f.name for f in self.fields if not f.hidden}
        )
        self.src.unknown(f"unknown column {name}; the columns here are {known}", node)

    def alias(self, node: exp.Column) -> exp.Expression | None:
        """The SELECT item an unqualified name that is no column here refers to, if any."""
        if node.args.get("table") or not self.aliases:
            return None
        target = self.aliases.get(name_of(node.this))
        return target if target is not None and self.find(node) is None else None

    def computed_col(self, node: exp.Expression) -> str | None:
        """The column of an already-computed expression (a GROUP BY key, an aggregate, a subquery),
        matched by its text or, after GROUP BY, by its text with its columns bound (`t.a + 1` is `a + 1`)."""
        col = self.computed.get(canonical(node))
        if col is None and self.pre is not None:
            col = self.computed.get(bound(node, self.pre))
        return col

    def resolves(self, node: exp.Column) -> bool:
        """Whether the reference names a column here or in an enclosing scope."""
        return self.find(node) is not None or (self.outer is not None and self.outer.resolves(node))

    def find(self, node: exp.Column) -> str | None:
        name = name_of(node.this)
        table = name_of(node.args["table"]) if node.args.get("table") else None
        if table == INTERNAL:  # a reference made by the compiler to one internal column exactly
            col = node.this.this
            return col if any(f.col == col for f in self.fields) else None
        if table is not None:
            hits = [f for f in self.fields if f.name == name and f.qualifier == table]
            if not hits and not any(f.qualifier == table for f in self.fields):
                key = f"{table}.{name}"
                return self.computed.get(key)
        else:
            hits = [f for f in self.fields if f.name == name and not f.hidden]
        if len(hits) > 1:
            self.src.schema_error(
                f"column reference {node.sql(dialect='duckdb')} is ambiguous "
                f"(in {sorted({str(f.qualifier) for f in hits})})",
                node,
            )
        if hits:
            return hits[0].col
        return self.computed.get(canonical(node)) if table is None else None

    def child(self, fields: list[Field], correlated: bool = False) -> Scope:
        """A scope for a subquery whose outer scope is this one."""
        return Scope(fields, self.src, outer=self, correlated=[] if correlated else None)


def canonical(node: Any) -> str:
    """The text by which an expression is matched against GROUP BY keys and aggregates."""
    return (
        node.sql(dialect="duckdb", normalize=True, identify=False).lower()
        if isinstance(node, exp.Expression)
        else str(node)
    )


def bound(node: exp.Expression, scope: Scope) -> str:
    """The text of `node` with each column that resolves in `scope` (outside subqueries) replaced by its
    internal column: two expressions with the same bound text compute the same value (`GROUP BY a, t.a`)."""
    if isinstance(node, exp.Column):
        col = scope.find(node) if not isinstance(node.this, exp.Star) else None
        return canonical(node) if col is None else canonical(_internal(col))
    copy = node.copy()
    subqueries = (exp.Subquery, exp.Select, exp.Exists)
    cols = [n for n in copy.walk(prune=lambda n: isinstance(n, subqueries)) if isinstance(n, exp.Column)]
    if isinstance(copy, subqueries):
        cols = []
    for n in cols:
        col = scope.find(n) if not isinstance(n.this, exp.Star) else None
        if col is not None:
            n.replace(_internal(col))
    return canonical(copy)


def _internal(col: str) -> exp.Column:
    return exp.Column(
        this=exp.to_identifier(col, quoted=True), table=exp.to_identifier(INTERNAL, quoted=True)
    )
