"""The SQL front end: `CREATE TABLE`, `CREATE [OR REPLACE] VIEW` and `DROP VIEW` statements, parsed with
sqlglot (DuckDB dialect), bound against the pipeline's catalog and lowered into its circuit.

    p = dbspark.Pipeline(engine="local")
    p.sql('''
      CREATE TABLE orders (o_orderkey BIGINT PRIMARY KEY, o_custkey BIGINT, o_totalprice DECIMAL(15,2));
      CREATE VIEW big AS SELECT o_custkey, SUM(o_totalprice) AS total FROM orders GROUP BY o_custkey
                         HAVING SUM(o_totalprice) > 1000;
    ''')

Layers: `parse` (text → sqlglot statements, positions), `types` (SQL types), `scope` (relations and
name resolution), `exprs` (scalar expressions → IR), `joins` (FROM), `subqueries`, `aggregates`,
`recursion` (WITH RECURSIVE), `compiler` (queries → streams), and this module (statements).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import polars as pl
from sqlglot import exp

from dbspark.errors import UnknownNameError, UnsupportedError
from dbspark.frontends.sql.compiler import Compiler, view_stream
from dbspark.frontends.sql.exprs import interval
from dbspark.frontends.sql.multiway import JOIN_PLANS
from dbspark.frontends.sql.parse import Source, name_of, parse
from dbspark.frontends.sql.scope import Names
from dbspark.frontends.sql.types import sql_type

if TYPE_CHECKING:
    from dbspark.pipeline import Pipeline

__all__ = ["load"]


def load(pipeline: Pipeline, text: str, dialect: str = "duckdb", joins: str = "auto") -> list[str]:
    """Declare the tables and views of `text` in `pipeline`; returns their names in order.

    The statements are compiled in order against the catalog (a view may read earlier tables and
    views); all of them are checked before any is declared, so a faulty text declares nothing.
    `dialect`: "duckdb", or "spark" (Spark SQL as Spark 4 reads it: `spark.py`); `joins`: how a FROM
    clause's inner joins whose equalities form a cycle are joined (`multiway.py`)."""
    if joins not in JOIN_PLANS:
        raise UnknownNameError(f"joins={joins!r}: the join plans are {', '.join(map(repr, JOIN_PLANS))}")
    if dialect not in ("duckdb", "spark"):
        raise UnsupportedError(f"the SQL dialect {dialect!r} (the dialects are 'duckdb' and 'spark')")
    if dialect == "spark":
        from dbspark.frontends.sql.spark import to_duckdb

        text = to_duckdb(text)
    src, statements = parse(text)
    src.dialect = dialect
    compiler = Compiler(pipeline, src, joins)
    names: list[str] = []
    relations_before = dict(pipeline.relations)
    inputs_before = dict(pipeline.circuit.inputs)
    outputs_before = dict(pipeline.circuit.outputs)
    try:
        for st in statements:
            names.extend(statement(pipeline, compiler, src, st))
    except BaseException:
        # leave the catalog as it was (nodes already added are unreachable from any view: dead)
        pipeline.relations.clear()
        pipeline.relations.update(relations_before)
        for d, before in (
            (pipeline.circuit.inputs, inputs_before),
            (pipeline.circuit.outputs, outputs_before),
        ):
            d.clear()
            d.update(before)
        raise
    return names


def statement(pipeline: Pipeline, compiler: Compiler, src: Source, st: exp.Expression) -> list[str]:
    """The names a statement declares."""
    kind = (st.args.get("kind") or "").upper()
    if isinstance(st, exp.Create):
        if kind == "TABLE":
            return [create_table(pipeline, src, st)]
        if kind == "VIEW":
            return [create_view(pipeline, compiler, src, st)]
    if isinstance(st, exp.Drop) and kind == "VIEW":
        drop_views(pipeline, src, st)
        return []
    what = st.sql(dialect="duckdb").split("(")[0].split(" AS ")[0][:60]
    src.unsupported(f"statement {what} (supported: CREATE TABLE, CREATE [OR REPLACE] VIEW, DROP VIEW)", st)


def create_table(pipeline: Pipeline, src: Source, st: exp.Create) -> str:
    schema_node = st.this
    if not isinstance(schema_node, exp.Schema) or st.expression is not None:
        src.unsupported("CREATE TABLE without a column list (CREATE TABLE ... AS is not supported)", st)
    name = name_of(schema_node.this.this)
    columns: dict[str, object] = {}
    primary: list[str] = []
    not_null: list[str] = []
    unique: list[tuple[str, ...]] = []
    for item in schema_node.expressions:
        if isinstance(item, exp.ColumnDef):
            col = name_of(item.this)
            if col in columns:
                src.schema_error(f"column {col} declared twice in table {name}", item)
            if item.args.get("kind") is None:
                src.schema_error(f"column {col} of table {name} needs a type", item)
            columns[col] = sql_type(item.args["kind"], src)
            for cons in item.args.get("constraints") or []:
                k = cons.args.get("kind")
                if isinstance(k, exp.PrimaryKeyColumnConstraint):
                    primary.append(col)
                elif isinstance(k, exp.UniqueColumnConstraint):
                    unique.append((col,))
                elif isinstance(k, exp.NotNullColumnConstraint):
                    if not k.args.get("allow_null"):
                        not_null.append(col)
                elif k is not None and not isinstance(k, (exp.DefaultColumnConstraint,)):
                    src.unsupported(f"column constraint {cons.sql(dialect='duckdb')}", cons)
                elif isinstance(k, exp.DefaultColumnConstraint):
                    src.unsupported("DEFAULT values", cons)
        elif isinstance(item, exp.PrimaryKey):
            if primary:
                src.schema_error(f"table {name} has two primary keys", item)
            primary = [name_of(e.this if isinstance(e, exp.Ordered) else e) for e in item.expressions]
        elif isinstance(item, exp.UniqueColumnConstraint) and isinstance(item.this, exp.Schema):
            unique.append(
                tuple(name_of(e.this if isinstance(e, exp.Ordered) else e) for e in item.this.expressions)
            )
        else:
            src.unsupported(f"table element {item.sql(dialect='duckdb')}", item)
    for k in primary:
        if k not in columns:
            src.unknown(f"primary key column {k} is not a column of table {name}", schema_node)
    for u in unique:
        for k in u:
            if k not in columns:
                src.unknown(f"UNIQUE column {k} is not a column of table {name}", schema_node)
    if name in pipeline.relations:
        src.schema_error(f"{name} is already declared", schema_node)
    options: dict[str, object] = {}
    if primary:
        options["primary_key"] = tuple(primary)
    if not_null:
        options["not_null"] = tuple(not_null)
    if unique:
        options["unique"] = tuple(dict.fromkeys(unique))
    options.update(table_options(src, st, name, columns))
    pipeline.table(name, columns, **options)  # type: ignore[arg-type]
    return name


def table_options(src: Source, st: exp.Create, name: str, columns: dict[str, object]) -> dict[str, object]:
    """A table's `WITH (...)` options: `lateness_column = c, lateness = INTERVAL '...'` (or a number,
    for a numeric column) and `late_rows = 'drop' | 'error'` (`operators.source.Lateness`)."""
    props = st.args.get("properties")
    got: dict[str, exp.Expression] = {}
    for prop in props.expressions if props is not None else []:
        key = prop.name.lower() if isinstance(prop, exp.Property) else ""
        if key not in ("lateness_column", "lateness", "late_rows"):
            src.unsupported(
                f"table option {prop.sql(dialect='duckdb')} (the options are lateness_column, lateness "
                "and late_rows)",
                prop,
            )
        got[key] = prop.args["value"]
    if not got:
        return {}
    if "lateness_column" not in got or "lateness" not in got:
        src.schema_error(f"table {name}: lateness_column and lateness go together", props)
    column = name_of(got["lateness_column"].name)
    if column not in columns:
        src.unknown(f"lateness column {column} is not a column of table {name}", got["lateness_column"])
    delay = got["lateness"]
    temporal = isinstance(columns[column], (pl.Datetime, pl.Date))
    if temporal != isinstance(delay, exp.Interval):
        want = "an INTERVAL" if temporal else "a number"
        src.schema_error(f"table {name}: the lateness of column {column} is {want}", delay)
    if isinstance(delay, exp.Interval):
        months, days, micros = interval(delay, src)
        if months:
            src.unsupported("a lateness of months (days and time units are supported)", delay)
        value: object = dt.timedelta(days=days, microseconds=micros)
    elif isinstance(delay, exp.Literal) and not delay.is_string:
        value = literal_number(delay.this)
    else:
        src.schema_error(f"table {name}: a lateness is an INTERVAL or a number", delay)
    late = got.get("late_rows")
    mode = late.name.lower() if late is not None else "drop"
    if late is not None and mode not in ("drop", "error"):
        src.schema_error(f"table {name}: late_rows is 'drop' or 'error', not {late.sql()}", late)
    return {"lateness": (column, value), "late": mode}


def literal_number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def create_view(pipeline: Pipeline, compiler: Compiler, src: Source, st: exp.Create) -> str:
    target = st.this
    cols = None
    if isinstance(target, exp.Schema):
        cols = [name_of(c) for c in target.expressions]
        target = target.this
    name = name_of(target.this)
    if st.args.get("replace") and name in pipeline.circuit.outputs and name not in pipeline.circuit.inputs:
        pipeline.drop_view(name)  # (the same definition again keeps its state: `circuit/identity.py`)
    if name in pipeline.relations:
        src.schema_error(f"{name} is already declared", target)
    compiler.view = name
    compiler.guards = []
    # internal column names are the view's own (`_c0`, ... afresh for each view): a view compiles to the
    # same nodes whatever was declared before it, so a changed definition file keeps its state
    # (`circuit/identity.py`)
    compiler.names = Names()
    compiler._one_col = None
    rel = compiler.query(st.expression)
    pipeline.create_view(name, compiler.guarded(view_stream(compiler, rel, cols, st)))
    return name


def drop_views(pipeline: Pipeline, src: Source, st: exp.Drop) -> None:
    """`DROP VIEW [IF EXISTS] v, ...`: each view's state is freed (`Pipeline.drop_view`); views declared
    on it keep their definitions (they were compiled when declared)."""
    if st.args.get("cascade"):
        src.unsupported("DROP VIEW ... CASCADE (drop the views that read it by name)", st)
    for t in st.args.get("tables") or []:
        name = name_of(t.this)
        if name in pipeline.circuit.outputs and name not in pipeline.circuit.inputs:
            pipeline.drop_view(name)
        elif name in pipeline.relations:
            src.schema_error(f"DROP VIEW {name}: {name} is a table", t)
        elif not st.args.get("exists"):
            src.unknown(f"DROP VIEW {name}: there is no view {name}", t)
