"""Turn what a user pushes (tuples, dicts, pandas / Arrow / Polars / Spark frames) into a checked Z-set frame."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import polars as pl

from dbspark.algebra.weights import check_weights
from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.coerce import coerce_column
from dbspark.errors import DataError, SchemaError, WeightError


def rows_to_frame(rows: Any, schema: pl.Schema, where: str) -> pl.DataFrame:
    """A frame with exactly `schema`'s columns and types (coerced as `coerce` describes), or a SchemaError
    (wrong width, unknown or missing columns) / CoercionError (a value that does not fit) naming the fault."""
    df, _ = _rows_frame(rows, schema, where, None)
    return df


def input_frame(
    rows: Any,
    schema: pl.Schema,
    weights: Any,
    where: str,
    not_null: Sequence[str] = (),
    key: Sequence[str] | None = None,
) -> pl.DataFrame:
    """The Z-set frame (data columns, then the weight) of one push, checked whole before anything is queued.

    `rows`: tuples in column order, dicts by column name (every column; None for NULL), pandas / Polars /
    Arrow frames or a Spark DataFrame (collected through Arrow), with their own `weight` column unless
    `weights` is given. Columns named in `not_null` may not be NULL (DataError naming the column and row).
    With a primary `key` (a keyed table) the weights must be 1 (insert or update) or -1 (delete), and a
    delete may give only the key columns (the others are then NULL in the frame)."""
    if weights is None:
        rows, weights = split_weight_column(rows, schema)
    df, key_only = _rows_frame(rows, schema, where, key)
    df = with_weights(df, weights, where)
    if key is not None:
        w = df[WEIGHT]
        bad = df.filter((w != 1) & (w != -1))
        if bad.height:
            raise DataError(
                f"{where} has a primary key {tuple(key)}: a push takes weight 1 (insert or update) "
                f"or -1 (delete), not {bad[WEIGHT][0]} (row {_row_text(bad, schema, 0)})"
            )
        if key_only and (w > 0).any():
            raise SchemaError(
                f"{where}: an insert needs every column {list(schema)}; only a delete may give "
                f"just the primary key {list(key)}"
            )
    check_not_null(df, list(key) if key_only and key is not None else not_null, where)
    return df


def check_not_null(df: pl.DataFrame, cols: Sequence[str], where: str) -> None:
    """A DataError naming the first NOT NULL column with a NULL, and its row."""
    for c in cols:
        if df[c].null_count():
            i = int(df[c].is_null().arg_true()[0])
            data = [c for c in df.columns if c != WEIGHT]
            raise DataError(
                f"{where}: column {c!r} is NOT NULL but row {i} {_row_text(df, data, i)} "
                f"has the value NULL (None) there"
            )


def _row_text(df: pl.DataFrame, schema: Any, i: int) -> str:
    r = df.row(i, named=True)
    return repr(tuple(r[c] for c in schema))


def _rows_frame(
    rows: Any, schema: pl.Schema, where: str, key: Sequence[str] | None
) -> tuple[pl.DataFrame, bool]:
    """(the frame of `schema`, whether the rows gave only the `key` columns)."""
    cols = list(schema)
    frame = _frame_columns(rows, where)
    if frame is not None:
        names = match_columns(list(frame), cols, key, where, "frame columns")
        key_only = len(names) < len(cols)
        data = {c: frame[names[c]] for c in names}
    else:
        rows = rows.tolist() if isinstance(rows, np.ndarray) else list(rows)
        if rows and isinstance(rows[0], dict):
            data, key_only = _dict_columns(rows, cols, key, where)
        else:
            data, key_only = _tuple_columns(rows, cols, key, where)
    out = {c: coerce_column(c, data[c], schema[c], where) for c in data}
    n = len(next(iter(out.values()))) if out else 0
    return pl.DataFrame(
        [out[c] if c in out else pl.Series(c, [None] * n, dtype=t) for c, t in schema.items()]
    ), key_only


def match_columns(
    given: list[str], cols: list[str], key: Sequence[str] | None, where: str, what: str
) -> dict[str, str]:
    """{schema column: given name}: exact names, else a unique case-insensitive match (SQL identifiers).

    Every column must be given; or, with a `key`, exactly the key columns."""
    if len(set(given)) != len(given):
        raise SchemaError(f"{where}: {what} {given} repeat a name")
    exact = set(given)
    lower: dict[str, list[str]] = {}
    for g in given:
        lower.setdefault(g.lower(), []).append(g)
    out: dict[str, str] = {}
    for c in cols:
        if c in exact:
            out[c] = c
        elif len(lower.get(c.lower(), [])) == 1:
            out[c] = lower[c.lower()][0]
    unknown = sorted(set(given) - set(out.values()))
    missing = [c for c in cols if c not in out]
    key_only = key is not None and not unknown and missing and set(out) == set(key)
    if unknown or (missing and not key_only):
        raise SchemaError(
            f"{where}: {what} {given} do not match the columns {cols}"
            + (f"; unknown {unknown}" if unknown else "")
            + (f"; missing {missing}" if missing else "")
            + (
                f" (a delete may give just the primary key {list(key)})"
                if key is not None and missing
                else ""
            )
        )
    return out


def _dict_columns(
    rows: list[Any], cols: list[str], key: Sequence[str] | None, where: str
) -> tuple[dict[str, list[Any]], bool]:
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise SchemaError(f"{where}: row {i} is {r!r}, expected a dict like the first row")
    shapes = {tuple(r) for r in rows}
    maps: dict[tuple, dict[str, str]] = {}
    for shape in shapes:
        try:
            maps[shape] = match_columns(list(shape), cols, key, where, "keys")
        except SchemaError:
            i = next(j for j, r in enumerate(rows) if tuple(r) == shape)
            extra = sorted(set(shape) - set(cols))
            missing = [c for c in cols if c not in shape]
            raise SchemaError(
                f"{where}: row {i} {rows[i]!r} does not match columns {cols}"
                + (f"; unknown {extra}" if extra else "")
                + (f"; missing {missing}" if missing else "")
                + (" (give None for NULL)" if missing and not extra else "")
            ) from None
    if not maps:
        return {c: [] for c in cols}, False
    given = {frozenset(m) for m in maps.values()}
    if len(given) > 1:
        raise SchemaError(f"{where}: rows give different columns {sorted(sorted(g) for g in given)}")
    names = next(iter(maps.values()))
    if len(maps) == 1:
        out = {c: [r[g] for r in rows] for c, g in names.items()}
    else:  # the same columns under different spellings or orders
        out = {c: [r[maps[tuple(r)][c]] for r in rows] for c in names}
    return out, len(names) < len(cols)


def _tuple_columns(
    rows: list[Any], cols: list[str], key: Sequence[str] | None, where: str
) -> tuple[dict[str, Any], bool]:
    n = len(cols)
    widths = {len(r) if isinstance(r, (tuple, list)) else -1 for r in rows}
    if -1 in widths:
        if any(isinstance(r, dict) for r in rows):
            i = next(j for j, r in enumerate(rows) if isinstance(r, dict))
            raise SchemaError(f"{where}: row {i} is {rows[i]!r}, expected a tuple like the first row")
        if n == 1 or (key is not None and len(key) == 1):
            rows = [r if isinstance(r, (tuple, list)) else (r,) for r in rows]
            widths = {len(r) for r in rows}
        else:
            i = next(j for j, r in enumerate(rows) if not isinstance(r, (tuple, list)))
            raise SchemaError(f"{where}: row {i} is {rows[i]!r}, expected a tuple of {n} values {cols}")
    key_only = key is not None and widths == {len(key)} and len(key) < n
    width = len(key) if key_only and key is not None else n
    for i, r in enumerate(rows):
        if len(r) != width:
            also = f" (or just the primary key {list(key)} to delete)" if key is not None else ""
            raise SchemaError(
                f"{where}: row {i} {tuple(r)!r} has {len(r)} values, the schema has {n} columns {cols}{also}"
            )
    names = list(key) if key_only and key is not None else cols
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    return {c: list(v) for c, v in zip(names, columns, strict=True)}, key_only


def _frame_columns(rows: Any, where: str) -> dict[str, Any] | None:
    """{name: Series or Python values} of a frame (Polars, pandas, Arrow, Spark), or None for rows."""
    if isinstance(rows, pl.LazyFrame):
        rows = rows.collect()
    if _is_spark(rows):
        rows = rows.toArrow()
    if _is_arrow(rows) and hasattr(rows, "column_names"):
        rows = pl.from_arrow(rows)
    if isinstance(rows, pl.DataFrame):
        return {c: rows[c] for c in rows.columns}
    if _is_pandas(rows):
        return {str(c): _pandas_column(rows[c]) for c in rows.columns}
    if _is_arrow(rows):
        raise SchemaError(f"{where}: cannot push a {type(rows).__name__}; push a table or record batch")
    return None


def _pandas_column(s: Any) -> Any:
    """A pandas column as a Series; an object column as its Python values (NaN/NaT/NA -> None)."""
    if s.dtype == object:
        return s.astype(object).where(s.notna(), None).tolist()
    try:
        return pl.from_pandas(s)
    except Exception:
        return s.astype(object).where(s.notna(), None).tolist()


def with_weights(
    df: pl.DataFrame, weights: Sequence[int] | np.ndarray | int | None, where: str
) -> pl.DataFrame:
    if weights is None:
        w = np.ones(df.height, dtype=np.int64)
    elif isinstance(weights, (int, np.integer)) and not isinstance(weights, bool):
        w = np.full(df.height, int(weights), dtype=np.int64)
    elif isinstance(weights, (str, bytes)) or not hasattr(weights, "__iter__"):  # a scalar, not an int
        raise WeightError(f"{where}: weight {weights!r} is not an integer")
    else:
        try:
            w = check_weights(
                weights if isinstance(weights, np.ndarray) else list(cast(Sequence[int], weights))
            )
        except WeightError as e:
            raise WeightError(f"{where}: {e}") from None
        if len(w) != df.height:
            raise WeightError(f"{where}: {len(w)} weights for {df.height} rows")
    return df.with_columns(pl.Series(WEIGHT, w, dtype=pl.Int64))


def split_weight_column(rows: Any, schema: Any = (), name: str = "weight") -> tuple[Any, Any]:
    """For frames carrying their own weight column (one not in `schema`): (data, weights)."""
    if name in schema:
        return rows, None
    if isinstance(rows, pl.DataFrame) and name in rows.columns:
        return rows[[c for c in rows.columns if c != name]], rows[name].to_numpy()  # (no query)
    if _is_pandas(rows) and name in rows.columns:
        return rows.drop(columns=[name]), rows[name].to_numpy()
    if _is_arrow(rows) and name in getattr(rows, "column_names", ()):
        return rows.drop_columns([name]), rows.column(name).to_numpy()
    return rows, None


def _is_pandas(x: Any) -> bool:
    return type(x).__module__.startswith("pandas") and hasattr(x, "columns")


def _is_arrow(x: Any) -> bool:
    return type(x).__module__.startswith("pyarrow")


def _is_spark(x: Any) -> bool:
    return type(x).__module__.startswith("pyspark.sql") and type(x).__name__ == "DataFrame"
