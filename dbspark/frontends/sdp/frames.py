"""The `spark` a Spark Declarative Pipelines Python file sees under dbspark, and the DataFrames it returns.

An SDP Python definition (`@dp.materialized_view`, `@dp.table`, `@dp.temporary_view`,
`@dp.append_flow`) is a function returning a DataFrame. dbspark runs it with this module's `Session`
as `spark`: `spark.sql(text)`, `spark.table(name)` / `spark.read.table(name)` /
`spark.readStream.table(name)` and the path readers (`spark.read.format("delta").load(path)`,
`spark.read.parquet(path)`, `spark.readStream...`) return a `Frame`, which records what is done to it
(`select`, `filter`, `withColumn`, `groupBy(...).agg(...)`, `join`, `union`, `distinct`, ...) and is
written out as one Spark SQL query (`render`), compiled like a SQL file's query. Columns are PySpark's
own (`pyspark.sql.functions`, in Spark Connect's mode: `columns.py`) or SQL strings. Anything else a
definition does with `spark` or a DataFrame is an `UnsupportedError` naming it, raised when the
definition runs, and the definition's name is added by the caller.

A frame's columns are known where they can be (a table's, a source's, a `select` of names or aliased
expressions, ...), which `withColumn`, `drop` and `withColumnRenamed` need; `render` is given the
columns of the pipeline's relations.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbspark.errors import UnsupportedError
from dbspark.frontends.sdp.columns import ident, sql_of

_aliases = itertools.count()
Columns = Callable[[str], "list[str] | None"]  # a relation's columns by name (None: not known)


@dataclass(frozen=True)
class SourceRef:
    """A path a definition reads (`spark.read.format(fmt).load(path)`, `fmt.\\`path\\`` in SQL)."""

    format: str
    path: str
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, eq=False)
class Frame:
    """A DataFrame as the operation that makes it: `op` with `args` over `inputs`."""

    op: str
    args: tuple[Any, ...] = ()
    inputs: tuple[Frame, ...] = ()
    tag: str = field(default_factory=lambda: f"_f{next(_aliases)}")  # its alias in the SQL written

    # ---- what a definition calls --------------------------------------------------------------
    def __getitem__(self, name: str) -> Any:
        from pyspark.sql import functions as F

        if isinstance(name, str):
            return F.col(f"{self.tag}.{name}")
        raise UnsupportedError(f"DataFrame[{name!r}]: index a DataFrame by a column name")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise UnsupportedError(
            f"DataFrame.{name} (dbspark maintains select, selectExpr, filter / where, withColumn(s), "
            "withColumnRenamed, drop, distinct, dropDuplicates(), groupBy(...).agg / count / sum / avg / "
            "min / max, agg, join, crossJoin, union / unionAll / unionByName, intersect, subtract, "
            "orderBy / sort + limit, alias)"
        )

    def _then(self, op: str, *args: Any) -> Frame:
        return Frame(op, args, (self,))

    def select(self, *cols: Any) -> Frame:
        return self._then("select", tuple(_flat(cols)))

    def selectExpr(self, *exprs: str) -> Frame:  # noqa: N802 (PySpark's name)
        return self._then("select", tuple(SqlText(e) for e in _flat(exprs)))

    def filter(self, cond: Any) -> Frame:
        return self._then("filter", cond)

    where = filter

    def withColumn(self, name: str, col: Any) -> Frame:  # noqa: N802
        return self._then("with", ((name, col),))

    def withColumns(self, mapping: dict[str, Any]) -> Frame:  # noqa: N802
        return self._then("with", tuple(mapping.items()))

    def withColumnRenamed(self, old: str, new: str) -> Frame:  # noqa: N802
        return self._then("rename", ((old, new),))

    def withColumnsRenamed(self, mapping: dict[str, str]) -> Frame:  # noqa: N802
        return self._then("rename", tuple(mapping.items()))

    def drop(self, *names: Any) -> Frame:
        bad = [n for n in names if not isinstance(n, str)]
        if bad:
            raise UnsupportedError(f"DataFrame.drop of {bad[0]!r}: give column names")
        return self._then("drop", tuple(names))

    def distinct(self) -> Frame:
        return self._then("distinct")

    def dropDuplicates(self, subset: Sequence[str] | None = None) -> Frame:  # noqa: N802
        if subset:
            raise UnsupportedError(
                "dropDuplicates(subset) (which row of each group it keeps is Spark's choice): use "
                "groupBy(subset).agg(...) or distinct()"
            )
        return self.distinct()

    drop_duplicates = dropDuplicates

    def groupBy(self, *cols: Any) -> Grouped:  # noqa: N802
        return Grouped(self, tuple(_flat(cols)))

    groupby = groupBy

    def agg(self, *exprs: Any) -> Frame:
        return Grouped(self, ()).agg(*exprs)

    def join(self, other: Frame, on: Any = None, how: str | None = None) -> Frame:
        if not isinstance(other, Frame):
            raise UnsupportedError(f"DataFrame.join with {type(other).__name__}: join another DataFrame")
        return Frame("join", (on, (how or "inner").lower()), (self, other))

    def crossJoin(self, other: Frame) -> Frame:  # noqa: N802
        return Frame("join", (None, "cross"), (self, other))

    def union(self, other: Frame) -> Frame:
        return Frame("setop", ("UNION ALL",), (self, other))

    unionAll = union

    def unionByName(self, other: Frame, allowMissingColumns: bool = False) -> Frame:  # noqa: N802, N803
        return Frame("union_by_name", (allowMissingColumns,), (self, other))

    def intersect(self, other: Frame) -> Frame:
        return Frame("setop", ("INTERSECT",), (self, other))

    def subtract(self, other: Frame) -> Frame:
        return Frame("setop", ("EXCEPT",), (self, other))

    def orderBy(self, *cols: Any, ascending: Any = True) -> Frame:  # noqa: N802
        return self._then("order", tuple(_flat(cols)), ascending)

    sort = orderBy

    def limit(self, n: int) -> Frame:
        return self._then("limit", int(n))

    def alias(self, name: str) -> Frame:
        return Frame(self.op, self.args, self.inputs, tag=name)

    # ---- what it refers to ----------------------------------------------------------------------
    def tables(self) -> list[str]:
        """The names of the relations this frame reads (tables and datasets, not sources)."""
        own = [self.args[0]] if self.op == "table" else []
        return own + [t for f in self.inputs for t in f.tables()]

    def texts(self) -> list[str]:
        """The SQL query texts inside (`spark.sql`), whose references the caller resolves."""
        own = [self.args[0]] if self.op == "sql" else []
        return own + [t for f in self.inputs for t in f.texts()]

    def sources(self) -> list[SourceRef]:
        own = [self.args[0]] if self.op == "source" else []
        return own + [s for f in self.inputs for s in f.sources()]


@dataclass(frozen=True)
class SqlText:
    """A column given as SQL (`selectExpr`)."""

    text: str


class Grouped:
    """`df.groupBy(...)`: the keys, waiting for their aggregates."""

    def __init__(self, frame: Frame, keys: tuple[Any, ...]) -> None:
        self.frame, self.keys = frame, keys

    def agg(self, *exprs: Any) -> Frame:
        if len(exprs) == 1 and isinstance(exprs[0], dict):
            exprs = tuple(
                SqlText(f"{fn}({ident(c) if c != '*' else '*'}) AS `{fn}({c})`") for c, fn in exprs[0].items()
            )
        return self.frame._then("group", self.keys, tuple(_flat(exprs)))

    def count(self) -> Frame:
        return self.agg(SqlText("count(*) AS `count`"))

    def _each(self, fn: str, cols: Sequence[str]) -> Frame:
        if not cols:
            raise UnsupportedError(f"groupBy(...).{fn}() without columns: name the columns")
        return self.agg(*(SqlText(f"{fn}({ident(c)}) AS `{fn}({c})`") for c in cols))

    def sum(self, *cols: str) -> Frame:
        return self._each("sum", cols)

    def avg(self, *cols: str) -> Frame:
        return self._each("avg", cols)

    mean = avg

    def min(self, *cols: str) -> Frame:
        return self._each("min", cols)

    def max(self, *cols: str) -> Frame:
        return self._each("max", cols)

    def __getattr__(self, name: str) -> Any:
        raise UnsupportedError(f"GroupedData.{name} (dbspark maintains agg, count, sum, avg, min, max)")


def _flat(items: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for c in items:
        out.extend(c) if isinstance(c, (list, tuple)) else out.append(c)
    return out


# ---- the session ---------------------------------------------------------------------------------
class Reader:
    """`spark.read` / `spark.readStream`: a table by name, or files at a path in a format."""

    def __init__(self, fmt: str | None = None, options: tuple[tuple[str, str], ...] = ()) -> None:
        self._fmt, self._options = fmt, options

    def format(self, fmt: str) -> Reader:
        return Reader(fmt.lower(), self._options)

    def option(self, key: str, value: Any) -> Reader:
        return Reader(self._fmt, (*self._options, (key.lower(), str(value))))

    def options(self, **opts: Any) -> Reader:
        r = self
        for k, v in opts.items():
            r = r.option(k, v)
        return r

    def schema(self, schema: Any) -> Reader:
        return self.option("schema", schema if isinstance(schema, str) else schema.simpleString())

    def load(self, path: str | None = None) -> Frame:
        if path is None or self._fmt is None:
            raise UnsupportedError(
                "spark.read.load without a format and a path: give format(...) and load(path)"
            )
        return Frame("source", (SourceRef(self._fmt, str(path), self._options),))

    def table(self, name: str) -> Frame:
        return Frame("table", (name,))

    def parquet(self, path: str) -> Frame:
        return self.format("parquet").load(path)

    def json(self, path: str) -> Frame:
        return self.format("json").load(path)

    def csv(self, path: str) -> Frame:
        return self.format("csv").load(path)

    def __getattr__(self, name: str) -> Any:
        raise UnsupportedError(
            f"spark.read.{name} (dbspark reads table, format(...).load, parquet, json, csv)"
        )


class Session:
    """The `spark` of a definition file: reads of tables, paths and SQL become frames."""

    def __init__(self, conf: dict[str, str]) -> None:
        self.read = Reader()
        self.readStream = Reader()  # noqa: N815 (PySpark's name)
        self.conf = Conf(conf)

    def sql(self, text: str, args: Any = None, **kwargs: Any) -> Frame:
        if args or kwargs:
            raise UnsupportedError("spark.sql with parameters: write the values into the query")
        return Frame("sql", (text,))

    def table(self, name: str) -> Frame:
        return Frame("table", (name,))

    def __getattr__(self, name: str) -> Any:
        raise UnsupportedError(
            f"spark.{name} in a definition (dbspark reads spark.sql, spark.table, spark.read and "
            "spark.readStream)"
        )


class Conf:
    """`spark.conf`: the spec's `configuration`, read-only."""

    def __init__(self, values: dict[str, str]) -> None:
        self._values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self._values.get(key, default)


# ---- writing a frame as SQL -----------------------------------------------------------------------
def render(
    f: Frame, columns: Columns, source_table: Callable[[SourceRef], str]
) -> tuple[str, list[str] | None]:
    """The Spark SQL query of frame `f` and its columns (None where not known)."""
    if f.op == "table":
        return f"SELECT * FROM {ident(f.args[0])}", columns(f.args[0])
    if f.op == "source":
        name = source_table(f.args[0])
        return f"SELECT * FROM {ident(name)}", columns(name)
    if f.op == "sql":
        return f.args[0], None
    if f.op == "join":
        return _join(f, columns, source_table)
    if f.op in ("setop", "union_by_name"):
        return _setop(f, columns, source_table)
    inner, cols = render(f.inputs[0], columns, source_table)
    src = f"({inner}) AS {ident(f.inputs[0].tag)}"
    if f.op == "select":
        items = [_item(c) for c in f.args[0]]
        return f"SELECT {', '.join(items)} FROM {src}", _names(f.args[0], cols)
    if f.op == "filter":
        return f"SELECT * FROM {src} WHERE {_cond(f.args[0])}", cols
    if f.op == "with":
        have = _known(cols, "withColumn")
        exprs = dict((n, _cond(c)) for n, c in f.args[0])
        items = [f"{exprs.pop(c)} AS {ident(c)}" if c in exprs else ident(c) for c in have]
        items += [f"{e} AS {ident(n)}" for n, e in exprs.items()]
        return f"SELECT {', '.join(items)} FROM {src}", [
            *have,
            *(n for n in dict(f.args[0]) if n not in have),
        ]
    if f.op == "rename":
        have = _known(cols, "withColumnRenamed")
        new = dict(f.args[0])
        items = [f"{ident(c)} AS {ident(new[c])}" if c in new else ident(c) for c in have]
        return f"SELECT {', '.join(items)} FROM {src}", [new.get(c, c) for c in have]
    if f.op == "drop":
        have = _known(cols, "drop")
        keep = [c for c in have if c not in f.args[0]]
        return f"SELECT {', '.join(map(ident, keep))} FROM {src}", keep
    if f.op == "distinct":
        return f"SELECT DISTINCT * FROM {src}", cols
    if f.op == "group":
        keys, aggs = f.args
        k = [_item(c) for c in keys]
        by = f" GROUP BY {', '.join(_cond(c) for c in keys)}" if keys else ""
        return f"SELECT {', '.join([*k, *(_item(a) for a in aggs)])} FROM {src}{by}", _names(
            (*keys, *aggs), None
        )
    if f.op == "order":
        return _order(f, src, cols, None)
    if f.op == "limit":
        child = f.inputs[0]
        if child.op != "order":
            raise UnsupportedError("DataFrame.limit without orderBy (which rows it keeps is Spark's choice)")
        inner, cols = render(child.inputs[0], columns, source_table)
        return _order(child, f"({inner}) AS {ident(child.inputs[0].tag)}", cols, f.args[0])
    raise UnsupportedError(f"a DataFrame operation {f.op!r}")


def _order(f: Frame, src: str, cols: list[str] | None, limit: int | None) -> tuple[str, list[str] | None]:
    keys, ascending = f.args
    flags = list(ascending) if isinstance(ascending, (list, tuple)) else [ascending] * len(keys)
    order = [
        _cond(c) if not isinstance(c, str) else f"{ident(c)}{'' if a else ' DESC'}"
        for c, a in zip(keys, flags, strict=False)
    ]
    tail = f" LIMIT {limit}" if limit is not None else ""
    return f"SELECT * FROM {src} ORDER BY {', '.join(order)}{tail}", cols


def _join(
    f: Frame, columns: Columns, source_table: Callable[[SourceRef], str]
) -> tuple[str, list[str] | None]:
    (on, how), (a, b) = f.args, f.inputs
    qa, ca = render(a, columns, source_table)
    qb, cb = render(b, columns, source_table)
    kinds = {
        "inner": "JOIN",
        "left": "LEFT JOIN",
        "left_outer": "LEFT JOIN",
        "leftouter": "LEFT JOIN",
        "right": "RIGHT JOIN",
        "right_outer": "RIGHT JOIN",
        "full": "FULL JOIN",
        "outer": "FULL JOIN",
        "full_outer": "FULL JOIN",
        "fullouter": "FULL JOIN",
        "cross": "CROSS JOIN",
        "semi": "LEFT SEMI JOIN",
        "left_semi": "LEFT SEMI JOIN",
        "leftsemi": "LEFT SEMI JOIN",
        "anti": "LEFT ANTI JOIN",
        "left_anti": "LEFT ANTI JOIN",
        "leftanti": "LEFT ANTI JOIN",
    }
    if how not in kinds:
        raise UnsupportedError(f"a join of kind {how!r}")
    left, right = f"({qa}) AS {ident(a.tag)}", f"({qb}) AS {ident(b.tag)}"
    if on is None:
        return (
            f"SELECT * FROM {left} {'CROSS JOIN' if how in ('inner', 'cross') else kinds[how]} {right}",
            _plus(ca, cb),
        )
    names = (
        [on]
        if isinstance(on, str)
        else list(on)
        if isinstance(on, (list, tuple)) and all(isinstance(x, str) for x in on)
        else None
    )
    semi = "SEMI" in kinds[how] or "ANTI" in kinds[how]
    if names is not None:
        using = ", ".join(map(ident, names))
        cols = (
            ca
            if semi
            else (
                None
                if ca is None or cb is None
                else [*names, *(c for c in ca if c not in names), *(c for c in cb if c not in names)]
            )
        )
        return f"SELECT * FROM {left} {kinds[how]} {right} USING ({using})", cols
    conds = on if isinstance(on, (list, tuple)) else [on]
    cond = " AND ".join(_cond(c) for c in conds)
    return f"SELECT * FROM {left} {kinds[how]} {right} ON {cond}", ca if semi else _plus(ca, cb)


def _setop(
    f: Frame, columns: Columns, source_table: Callable[[SourceRef], str]
) -> tuple[str, list[str] | None]:
    a, b = f.inputs
    qa, ca = render(a, columns, source_table)
    qb, cb = render(b, columns, source_table)
    if f.op == "setop":
        return f"({qa}) {f.args[0]} ({qb})", ca
    allow = f.args[0]
    ca, cb = _known(ca, "unionByName"), _known(cb, "unionByName")
    missing = [c for c in ca if c not in cb] + [c for c in cb if c not in ca]
    if missing and not allow:
        raise UnsupportedError(
            f"unionByName of DataFrames whose columns differ ({missing}): allowMissingColumns=True"
        )
    both = [*ca, *(c for c in cb if c not in ca)]

    def side(q: str, cols: list[str], alias: str) -> str:
        items = [ident(c) if c in cols else f"NULL AS {ident(c)}" for c in both]
        return f"SELECT {', '.join(items)} FROM ({q}) AS {ident(alias)}"

    return f"({side(qa, ca, a.tag)}) UNION ALL ({side(qb, cb, b.tag)})", both


def _plus(a: list[str] | None, b: list[str] | None) -> list[str] | None:
    return None if a is None or b is None else [*a, *b]


def _known(cols: list[str] | None, what: str) -> list[str]:
    if cols is None:
        raise UnsupportedError(
            f"DataFrame.{what} on a DataFrame whose columns dbspark does not know here (the result of "
            "spark.sql, or of an unaliased expression): write it in the query, or alias the expressions"
        )
    return cols


def _item(c: Any) -> str:
    return c.text if isinstance(c, SqlText) else sql_of(c)


def _cond(c: Any) -> str:
    return c.text if isinstance(c, SqlText) else sql_of(c, names=not isinstance(c, str))


def _names(items: Sequence[Any], cols: list[str] | None) -> list[str] | None:
    """The output names of SELECT items where each is a name, `*` (the input's) or aliased."""
    from pyspark.sql.connect import expressions as x
    from pyspark.sql.connect.column import Column

    out: list[str] = []
    for c in items:
        if isinstance(c, str):
            if c == "*":
                if cols is None:
                    return None
                out.extend(cols)
            else:
                out.append(c.split(".")[-1])
        elif isinstance(c, Column) and isinstance(c._expr, x.ColumnAlias):
            out.append(".".join(c._expr._alias))
        elif isinstance(c, Column) and isinstance(c._expr, x.ColumnReference):
            out.append(c._expr._unparsed_identifier.split(".")[-1])
        else:
            return None
    return out
