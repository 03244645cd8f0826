"""A DuckDB oracle for SQL pipelines: every view, after every step, equals DuckDB running its query.

    oracle = SqlOracle(ddl)                  # the same CREATE TABLE / CREATE VIEW text the pipeline got
    p.sql(ddl)
    p.insert("t", rows); oracle.insert("t", rows)
    p.delete("t", rows); oracle.delete("t", rows)
    p.step(); oracle.check(p)                # every view of the DDL, or AssertionError naming the rows

The oracle mirrors the pipeline's tables in an in-memory DuckDB database created from the DDL (DuckDB
dialect). Views are DuckDB views, i.e. their queries are run from scratch on the current tables when
checked. Table semantics follow the SQL front end's: a table without a primary key is a bag (a delete
removes one copy per deleted row and must match rows that are there), a table with a primary key
takes an insert of an existing key as a replacement and a delete by key. Changes are applied at once,
in call order (deletes of a step before its inserts, when a key is updated).

Comparison (`compare_frames`): as multisets (a dbspark weight w is w copies of the row; a non-positive
weight in a view is an error), NULL equal to NULL, numbers with a relative tolerance (1e-9; DECIMAL
and DOUBLE representations compare), integers, strings, dates, booleans and DECIMAL against DECIMAL
exactly. Column names are compared where DuckDB's name is an identifier (an alias or a column), not
where it is DuckDB's rendering of an unaliased expression.

ORDER BY ... LIMIT views are compared as multisets too. When the order keys tie at the limit boundary
the top k rows are not unique; then (if every ORDER BY key is an output column) the view is accepted
when its rows are rows of the unlimited query and its order keys are, as a multiset, those of DuckDB's
top k, i.e. when it is *a* correct top-k. Other ties would need the front end's tie rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
import numpy as np
import polars as pl

from dbspark.errors import DataError, UnknownNameError

WEIGHT = "__w"
RTOL = 1e-9
ATOL = 1e-9
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SHOW = 5


# ---- comparing frames --------------------------------------------------------------------------------
def _kind(dt: pl.DataType) -> str:
    if dt.is_integer() or (isinstance(dt, pl.Decimal) and dt.scale == 0):
        return "int"
    if dt.is_numeric():  # float, decimal
        return "num"
    return "other"


def _normalize(actual: pl.DataFrame, expected: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """Both frames with common column types (columns renamed c0, c1, ...); returns the approximate ones."""
    names = [f"c{i}" for i in range(expected.width)]
    a = actual.rename(dict(zip(actual.columns, names, strict=True)))
    e = expected.rename(dict(zip(expected.columns, names, strict=True)))
    approx = []
    for c in names:
        ka, ke = _kind(a.schema[c]), _kind(e.schema[c])
        ta, te = a.schema[c], e.schema[c]
        if isinstance(ta, pl.Decimal) and isinstance(te, pl.Decimal):
            try:  # exact: both sides are DECIMAL (through DOUBLE, distinct wide decimals would compare equal)
                scale = max(ta.scale or 0, te.scale or 0)
                a = a.with_columns(pl.col(c).cast(pl.Decimal(38, scale)))
                e = e.with_columns(pl.col(c).cast(pl.Decimal(38, scale)))
                continue
            except pl.exceptions.PolarsError:
                pass
        if ka == ke == "int":
            try:
                a = a.with_columns(pl.col(c).cast(pl.Int64))
                e = e.with_columns(pl.col(c).cast(pl.Int64))
                continue
            except pl.exceptions.PolarsError:
                pass
        if "num" in (ka, ke) or (ka == ke == "int"):
            if "other" in (ka, ke):
                a, e = a.with_columns(pl.col(c).cast(pl.String)), e.with_columns(pl.col(c).cast(pl.String))
                continue
            a = a.with_columns(pl.col(c).cast(pl.Float64))
            e = e.with_columns(pl.col(c).cast(pl.Float64))
            approx.append(c)
        elif a.schema[c] != e.schema[c]:
            try:
                a = a.with_columns(pl.col(c).cast(e.schema[c]))
            except pl.exceptions.PolarsError:
                a, e = a.with_columns(pl.col(c).cast(pl.String)), e.with_columns(pl.col(c).cast(pl.String))
    return a, e, approx


def _close(x: pl.Series, y: pl.Series, rtol: float, atol: float) -> np.ndarray:
    """Element-wise: both NULL, both NaN, or |x - y| <= atol + rtol * max(|x|, |y|)."""
    xn, yn = x.is_null().to_numpy(), y.is_null().to_numpy()
    xv, yv = x.fill_null(0.0).to_numpy(), y.fill_null(0.0).to_numpy()
    with np.errstate(invalid="ignore"):
        ok = np.abs(xv - yv) <= atol + rtol * np.maximum(np.abs(xv), np.abs(yv))
        ok |= np.isnan(xv) & np.isnan(yv)
        ok |= xv == yv  # equal infinities
    return np.where(xn | yn, xn & yn, ok)


def _sorted(df: pl.DataFrame, approx: list[str]) -> pl.DataFrame:
    exact = [c for c in df.columns if c not in approx]
    by = exact + approx
    return df.sort(by, nulls_last=True) if by else df


def _rows_equal(a: pl.DataFrame, e: pl.DataFrame, approx: list[str], rtol: float, atol: float) -> np.ndarray:
    """Per row of two equally long frames: every column equal (exact columns) or close (approximate)."""
    ok = np.ones(a.height, dtype=bool)
    for c in a.columns:
        if c in approx:
            ok &= _close(a[c], e[c], rtol, atol)
        else:
            x, y = a[c], e[c]
            eq = (x == y).fill_null(False).to_numpy() | (x.is_null() & y.is_null()).to_numpy()
            ok &= eq
    return ok


def _fmt(df: pl.DataFrame, columns: list[str], idx: Iterable[int]) -> str:
    rows = [df.row(int(i)) for i in idx]
    return "\n".join(f"      {dict(zip(columns, r, strict=True))}" for r in rows) or "      (none)"


def expand(frame: pl.DataFrame, what: str = "view") -> pl.DataFrame:
    """A frame with a weight column `__w` as a bag: each row repeated weight times (weights must be > 0)."""
    if WEIGHT not in frame.columns:
        return frame
    w = frame[WEIGHT].to_numpy()
    bad = np.flatnonzero(w <= 0)
    if bad.size:
        data = frame.drop(WEIGHT)
        raise AssertionError(
            f"{what}: {bad.size} row(s) with a non-positive weight, e.g.\n"
            + _fmt(frame, data.columns + [WEIGHT], bad[:_SHOW])
        )
    return frame.drop(WEIGHT)[np.repeat(np.arange(frame.height), w)]


def compare_frames(
    actual: pl.DataFrame,
    expected: pl.DataFrame,
    what: str = "view",
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
    check_names: bool = True,
    label: str = "dbspark",
) -> str | None:
    """None if `actual` (a bag; a `__w` column is expanded) equals `expected` as a multiset of rows,
    else a message showing the first rows that differ (`label` names the actual side)."""
    actual = expand(actual, what)
    if actual.width != expected.width:
        return (
            f"{what}: {actual.width} columns {actual.columns}, DuckDB has {expected.width} "
            f"columns {expected.columns}"
        )
    if check_names:
        for i, (x, y) in enumerate(zip(actual.columns, expected.columns, strict=True)):
            if _IDENT.match(y) and x.lower() != y.lower():
                return f"{what}: column {i} is named {x!r}, DuckDB names it {y!r} ({actual.columns} vs {expected.columns})"
    a, e, approx = _normalize(actual, expected)
    a, e = _sorted(a, approx), _sorted(e, approx)
    if a.height == e.height:
        ok = _rows_equal(a, e, approx, rtol, atol)
        if ok.all():
            return None
        first = int(np.flatnonzero(~ok)[0])
    else:
        first = -1
    cols = list(expected.columns)
    only_a, only_e = _unmatched(a, e, approx, rtol, atol)
    msg = [f"{what}: {label} has {a.height} rows, DuckDB {e.height}"]
    if first >= 0:
        msg.append(
            f"  first difference at sorted row {first}:\n    {label}:\n{_fmt(a, cols, [first])}\n"
            f"    duckdb:\n{_fmt(e, cols, [first])}"
        )
    msg.append(f"  rows only in {label} ({len(only_a)}), first {_SHOW}:\n{_fmt(a, cols, only_a[:_SHOW])}")
    msg.append(f"  rows only in DuckDB ({len(only_e)}), first {_SHOW}:\n{_fmt(e, cols, only_e[:_SHOW])}")
    return "\n".join(msg)


def _unmatched(
    a: pl.DataFrame, e: pl.DataFrame, approx: list[str], rtol: float, atol: float
) -> tuple[list[int], list[int]]:
    """Indices of rows of `a` and of `e` left over by a multiset matching (exact columns joined, approximate
    ones within tolerance; used to explain a difference, so only on failure)."""
    exact = [c for c in a.columns if c not in approx]
    ai = (
        a.with_row_index("__i").with_columns(pl.int_range(pl.len()).over(exact).alias("__k"))
        if exact
        else a.with_row_index("__i").with_columns(pl.int_range(pl.len()).alias("__k"))
    )
    ei = (
        e.with_row_index("__j").with_columns(pl.int_range(pl.len()).over(exact).alias("__k"))
        if exact
        else e.with_row_index("__j").with_columns(pl.int_range(pl.len()).alias("__k"))
    )
    j = ai.join(ei, on=[*exact, "__k"], how="full", nulls_equal=True, suffix="_e", coalesce=True)
    ok = np.ones(j.height, dtype=bool)
    for c in approx:
        ok &= _close(j[c], j[f"{c}_e"], rtol, atol)
    both = j["__i"].is_not_null().to_numpy() & j["__j"].is_not_null().to_numpy() & ok
    only_a = sorted(int(i) for i in j.filter(~pl.Series(both))["__i"].drop_nulls())
    only_e = sorted(int(i) for i in j.filter(~pl.Series(both))["__j"].drop_nulls())
    return only_a, only_e


def view_frame(value: Any) -> pl.DataFrame:
    """A view's contents (a dbspark ZSet, a spark engine value, or a Polars frame) as data columns + `__w`."""
    if isinstance(value, pl.DataFrame):
        return (
            value.rename({"weight": WEIGHT})
            if "weight" in value.columns and WEIGHT not in value.columns
            else value
        )
    if hasattr(value, "to_zset"):
        value = value.to_zset()
    return value.consolidate().df


def assert_view_equals_duckdb(
    view: Any,
    con: Any,
    query: str,
    what: str = "view",
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
    check_names: bool = True,
) -> None:
    """Assert that a view's contents (ZSet, SparkZSet or frame with `__w`) equal DuckDB's result of `query`
    (SQL text, or the name of a view) on connection `con` (or a `SqlOracle`)."""
    if isinstance(con, SqlOracle):
        con.assert_view(view, query, what, rtol=rtol, atol=atol, check_names=check_names)
        return
    sql = query if re.search(r"\s", query.strip()) else f'SELECT * FROM "{query}"'
    msg = compare_frames(
        view_frame(view), con.execute(sql).pl(), what, rtol=rtol, atol=atol, check_names=check_names
    )
    if msg is not None:
        raise AssertionError(msg)


def without_distinct_from(sql: str) -> str:
    """`sql` with `a IS [NOT] DISTINCT FROM b` spelled as a CASE of the same meaning. DuckDB 1.5.5
    answers `c = 5 OR 5 IS DISTINCT FROM c` with no row when the column's storage statistics say it is
    all NULL (the disjunction is pushed into the scan and the plan becomes EMPTY_RESULT), though the
    disjunction is true on NULL; the CASE form is answered right."""
    if not re.search(r"distinct\s+from", sql, re.I):
        return sql
    import sqlglot
    from sqlglot import exp

    def distinct(a: exp.Expression, b: exp.Expression) -> exp.Expression:
        a, b = exp.paren(a.copy()), exp.paren(b.copy())
        return exp.paren(
            exp.Case()
            .when(
                exp.Is(this=a.copy(), expression=exp.Null()),
                exp.Not(this=exp.Is(this=b.copy(), expression=exp.Null())),
            )
            .when(exp.Is(this=b.copy(), expression=exp.Null()), exp.true())
            .else_(exp.NEQ(this=a, expression=b))
        )

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.NullSafeNEQ):
            return distinct(node.this, node.expression)
        if isinstance(node, exp.NullSafeEQ):
            return exp.Not(this=distinct(node.this, node.expression))
        return node

    statements = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    return ";\n".join(t.transform(rewrite).sql(dialect="duckdb") for t in statements) + ";"


# ---- the oracle --------------------------------------------------------------------------------------
class OracleUnavailable(Exception):
    """DuckDB cannot answer (its own internal error): the case says nothing about dbspark."""


class SqlOracle:
    """The pipeline's tables in an in-memory DuckDB database; views checked against DuckDB's answers."""

    def __init__(self, ddl: str, *, rtol: float = RTOL, atol: float = ATOL) -> None:
        self.con = duckdb.connect()
        self.con.execute("SET enable_progress_bar = false")
        # DuckDB 1.5.5's expression rewriter turns `CAST(c AS VARCHAR) IS DISTINCT FROM ''` over a NATURAL
        # FULL JOIN's merged c (a TIMESTAMPTZ) into `c IS DISTINCT FROM NULL`, pushed into both sides:
        # rows of NULL c are lost (3 rows where the join has 4). The oracle answers unoptimized
        # expressions; its data is small.
        self.con.execute("SET disabled_optimizers = 'expression_rewriter'")
        self.con.execute("SET TimeZone = 'UTC'")  # dbspark's session time zone (TIMESTAMPTZ)
        self.rtol, self.atol = rtol, atol
        self.con.execute(without_distinct_from(ddl))
        self.keys: dict[str, list[str]] = {}
        for t, kind, cols in self.con.execute(
            "SELECT table_name, constraint_type, constraint_column_names FROM duckdb_constraints() "
            "WHERE constraint_type IN ('PRIMARY KEY', 'UNIQUE')"
        ).fetchall():
            if kind == "PRIMARY KEY":
                self.keys[t] = list(cols)
        self.tables: list[str] = [
            r[0]
            for r in self.con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE NOT internal AND NOT temporary ORDER BY table_oid"
            ).fetchall()
        ]
        for (
            t
        ) in self.keys:  # keys are kept by the oracle itself (no index: fast loads, update = delete + insert)
            self.con.execute(
                f'CREATE TABLE "__k_{t}" AS SELECT * FROM "{t}" LIMIT 0; DROP TABLE "{t}"; '
                f'ALTER TABLE "__k_{t}" RENAME TO "{t}"'
            )
        self.views: dict[str, str] = {
            v: sql
            for v, sql in self.con.execute(
                "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal AND NOT temporary ORDER BY view_oid"
            ).fetchall()
        }
        self.columns = {
            t: [r[0] for r in self.con.execute(f'DESCRIBE "{t}"').fetchall()] for t in self.tables
        }
        self._topk: dict[str, Any] = {}

    # ---- changes ---------------------------------------------------------------------------------
    def _frame(self, table: str, rows: Any) -> pl.DataFrame:
        if table not in self.columns:
            raise UnknownNameError(f"unknown table {table!r}; the oracle has {self.tables}")
        cols = self.columns[table]
        if isinstance(rows, pl.DataFrame):
            df = rows
        elif type(rows).__module__.startswith("pyspark.sql"):  # a Spark DataFrame (classic or Connect)
            df = pl.from_arrow(rows.toArrow())  # type: ignore[assignment]
        elif hasattr(rows, "to_zset"):
            df = rows.to_zset().data()
        elif hasattr(rows, "schema") and hasattr(rows, "column_names"):  # Arrow
            df = pl.from_arrow(rows)  # type: ignore[assignment]
        elif hasattr(rows, "to_numpy") and hasattr(rows, "columns"):  # pandas
            df = pl.from_pandas(rows)
        else:
            rows = list(rows)
            if rows and isinstance(rows[0], dict):
                df = pl.DataFrame(rows)
            else:
                df = pl.DataFrame(rows, schema=cols, orient="row", strict=False)
        if "weight" in df.columns or WEIGHT in df.columns:
            raise DataError(f"oracle {table}: pass rows without weights (insert / delete)")
        return df.select(cols) if set(cols) <= set(df.columns) else df

    @contextmanager
    def _batch(self, df: pl.DataFrame) -> Iterator[None]:
        """`df` registered as `__b` for one transaction: committed, or rolled back on any error."""
        self.con.register("__b", df)
        try:
            self.con.execute("BEGIN")
            yield
            self.con.execute("COMMIT")
        except Exception:
            self.con.execute("ROLLBACK")
            raise
        finally:
            self.con.unregister("__b")

    def _key_match(self, table: str) -> str:
        return " AND ".join(f'"{table}"."{k}" IS NOT DISTINCT FROM __b."{k}"' for k in self.keys[table])

    def insert(self, table: str, rows: Any) -> None:
        """Insert rows (tuples in column order, dicts, Polars / pandas / Arrow frames); a key replaces."""
        df = self._frame(table, rows)
        if table in self.keys:
            df = df.unique(subset=self.keys[table], keep="last", maintain_order=True)
        with self._batch(df):
            if table in self.keys:
                self.con.execute(f'DELETE FROM "{table}" USING __b WHERE {self._key_match(table)}')
            self.con.execute(f'INSERT INTO "{table}" SELECT * FROM __b')

    def delete(self, table: str, rows: Any) -> None:
        """Delete rows: by key for a keyed table, else one copy per row; a row that is not there is a
        DataError and nothing is deleted."""
        df = self._frame(table, rows)
        if df.height == 0:
            return
        with self._batch(df):
            if table in self.keys:
                keys = ", ".join(f'"{k}"' for k in self.keys[table])
                self.con.execute(f"CREATE OR REPLACE TEMP TABLE __d AS SELECT DISTINCT {keys} FROM __b")
                missing = self.con.execute(
                    f'SELECT * FROM __d AS __b WHERE NOT EXISTS (SELECT 1 FROM "{table}" WHERE {self._key_match(table)}) '
                    "LIMIT 3"
                ).fetchall()
                if missing:
                    raise DataError(f"oracle {table}: delete of absent key(s) {missing}")
                self.con.execute(f'DELETE FROM "{table}" USING __d AS __b WHERE {self._key_match(table)}')
            else:
                cols = self.columns[table]
                q = ", ".join(f'"{c}"' for c in cols)
                on = " AND ".join(f'x."{c}" IS NOT DISTINCT FROM d."{c}"' for c in cols)
                self.con.execute(
                    f"CREATE OR REPLACE TEMP TABLE __d AS SELECT x.rowid AS r FROM "
                    f'(SELECT rowid, {q}, row_number() OVER (PARTITION BY {q}) AS __n FROM "{table}") x '
                    f"JOIN (SELECT {q}, count(*) AS __c FROM __b GROUP BY ALL) d ON {on} AND x.__n <= d.__c"
                )
                n = self.con.execute("SELECT count(*) FROM __d").fetchone()[0]  # type: ignore[index]
                if n != df.height:
                    raise DataError(
                        f"oracle {table}: {df.height - n} deleted row(s) are not in the table "
                        f"(first rows of the delete: {df.head(3).rows()})"
                    )
                self.con.execute(f'DELETE FROM "{table}" WHERE rowid IN (SELECT r FROM __d)')

    # ---- answers ---------------------------------------------------------------------------------
    def query(self, sql: str) -> pl.DataFrame:
        try:
            return self.con.execute(sql).pl()
        except duckdb.InternalException as e:
            # an assertion failing inside DuckDB (1.5.5 fails to bind some 4-cycles of joins under an IS
            # DISTINCT FROM: `Failed to bind column reference`): no answer to check against
            raise OracleUnavailable(f"DuckDB's internal error on {sql!r}: {str(e).splitlines()[0]}") from e

    def expected(self, view: str) -> pl.DataFrame:
        """DuckDB's answer for a view on the current tables."""
        if view not in self.views:
            raise UnknownNameError(f"unknown view {view!r}; the oracle has {list(self.views)}")
        return self.query(f'SELECT * FROM "{view}"')

    def table(self, name: str) -> pl.DataFrame:
        return self.query(f'SELECT * FROM "{name}"')

    def assert_view(
        self,
        value: Any,
        view: str,
        what: str | None = None,
        *,
        rtol: float | None = None,
        atol: float | None = None,
        check_names: bool = True,
    ) -> None:
        """Assert that `value` (a view's contents) equals DuckDB's answer for `view`."""
        rt = self.rtol if rtol is None else rtol
        at = self.atol if atol is None else atol
        label = what or f"view {view}"
        actual = view_frame(value)
        msg = compare_frames(actual, self.expected(view), label, rtol=rt, atol=at, check_names=check_names)
        if msg is not None and self._valid_topk(view, actual, rt, at):
            return
        if msg is not None:
            raise AssertionError(msg)

    def check(self, pipeline: Any, views: Iterable[str] | None = None, what: str = "") -> None:
        """Every view of the DDL (or `views`) of `pipeline` equals DuckDB's answer; AssertionError naming
        each view that differs, with its first differing rows."""
        names = list(self.views) if views is None else list(views)
        errors = []
        for v in names:
            try:
                self.assert_view(pipeline.view(v), v, f"view {v}{' ' + what if what else ''}")
            except AssertionError as e:
                errors.append(str(e))
        if errors:
            raise AssertionError(
                f"{len(errors)} of {len(names)} view(s) differ from DuckDB:\n" + "\n".join(errors)
            )

    def run(self, pipeline: Any, steps: Iterable[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """Each step `(inserts, deletes)` ({table: rows}) on the pipeline and here (deletes first), then
        `pipeline.step()` and `check` after every step."""
        for i, (inserts, deletes) in enumerate(steps, start=1):
            for table, rows in deletes.items():
                pipeline.delete(table, rows)
                self.delete(table, rows)
            for table, rows in inserts.items():
                pipeline.insert(table, rows)
                self.insert(table, rows)
            pipeline.step()
            self.check(pipeline, what=f"after step {i}")

    # ---- ORDER BY ... LIMIT with ties at the boundary ----------------------------------------------
    def _topk_spec(self, view: str) -> tuple[str, list[int]] | None:
        """(the query without LIMIT / OFFSET, positions of the ORDER BY keys) if the view's query is a
        top-k whose keys are output columns; else None."""
        if view in self._topk:
            return self._topk[view]
        spec = None
        try:
            import sqlglot
            from sqlglot import exp

            tree = sqlglot.parse_one(self.views[view], read="duckdb")
            q = tree.expression if isinstance(tree, exp.Create) else tree
            order = q.args.get("order")
            if (
                isinstance(q, exp.Query)
                and order is not None
                and (q.args.get("limit") or q.args.get("offset"))
            ):
                outs = [c.lower() for c in self.query(f'SELECT * FROM "{view}" LIMIT 0').columns]
                pos = []
                for o in order.expressions:
                    e = o.this
                    if isinstance(e, exp.Column) and not e.table and e.name.lower() in outs:
                        pos.append(outs.index(e.name.lower()))
                    elif isinstance(e, exp.Literal) and e.is_int:
                        pos.append(int(e.this) - 1)
                    else:
                        pos = []
                        break
                if pos:
                    full = q.copy()
                    full.set("limit", None)
                    full.set("offset", None)
                    spec = (full.sql(dialect="duckdb"), pos)
        except Exception:  # noqa: BLE001 - no relaxed check for a query the parser does not handle
            spec = None
        self._topk[view] = spec
        return spec

    def _valid_topk(self, view: str, actual: pl.DataFrame, rtol: float, atol: float) -> bool:
        """`actual` is a correct top-k of the view: rows of the unlimited query whose order keys are, as a
        multiset, those of DuckDB's top k."""
        spec = self._topk_spec(view)
        if spec is None:
            return False
        sql, pos = spec
        expected = self.expected(view)
        bag = expand(actual)
        if bag.width != expected.width or bag.height != expected.height:
            return False
        keys = [expected.columns[i] for i in pos]
        kb = bag.select([bag.columns[i] for i in pos])
        if compare_frames(kb, expected.select(keys), check_names=False, rtol=rtol, atol=atol) is not None:
            return False
        full = self.query(sql)
        cand = full.join(expected.select(keys).unique(), on=keys, how="semi", nulls_equal=True)
        a, c, approx = _normalize(bag, cand)
        if a.height * c.height > 1_000_000:
            return False
        used = np.zeros(c.height, dtype=bool)
        for i in range(a.height):  # a small matching, only on the failure path
            hit = np.flatnonzero(_rows_equal(a[np.full(c.height, i)], c, approx, rtol, atol) & ~used)
            if not hit.size:
                return False
            used[hit[0]] = True
        return True


def fifo_steps(table: str, steps: Iterable[tuple[list[tuple], int]]) -> list[tuple[dict, dict]]:
    """`SqlOracle.run`'s steps from (rows inserted, n): each step also deletes the n rows inserted
    earliest of those still there (duplicates one copy at a time)."""
    present: list[tuple] = []
    out: list[tuple[dict, dict]] = []
    for ins, n in steps:
        dels, present = present[:n], present[n:] + list(ins)
        out.append(({table: ins} if ins else {}, {table: dels} if dels else {}))
    return out
