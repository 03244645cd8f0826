"""Turn what a user pushes (tuples, dicts, pandas / Arrow / Polars frames) into a checked Z-set frame."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import polars as pl

from dbspark.algebra.weights import check_weights
from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.errors import NegativeStateError, SchemaError, WeightError


def rows_to_frame(rows: Any, schema: pl.Schema, where: str) -> pl.DataFrame:
    """A frame with exactly `schema`'s columns and types, or a SchemaError naming the fault."""
    cols = list(schema)
    if isinstance(rows, pl.DataFrame):
        df = rows
    elif _is_pandas(rows):
        df = pl.from_pandas(rows)
    elif _is_arrow(rows):
        df = pl.from_arrow(rows)  # type: ignore[assignment]
    else:
        rows = list(rows)
        if rows and isinstance(rows[0], dict):
            for i, r in enumerate(rows):
                if not isinstance(r, dict):
                    raise SchemaError(f"{where}: row {i} is {r!r}, expected a dict like the first row")
                extra = set(r) - set(cols)
                missing = set(cols) - set(r)
                if extra or missing:
                    raise SchemaError(
                        f"{where}: row {i} {r!r} does not match columns {cols}"
                        + (f"; unknown {sorted(extra)}" if extra else "")
                        + (f"; missing {sorted(missing)}" if missing else "")
                    )
            data = {c: [r[c] for r in rows] for c in cols}
        else:
            for i, r in enumerate(rows):
                if not isinstance(r, (tuple, list)):
                    r = (r,) if len(cols) == 1 else r
                    if not isinstance(r, tuple):
                        raise SchemaError(f"{where}: row {i} is {r!r}, expected a tuple of {len(cols)} values {cols}")
                if len(r) != len(cols):
                    raise SchemaError(
                        f"{where}: row {i} {tuple(r)!r} has {len(r)} values, the schema has {len(cols)} columns {cols}"
                    )
            data = {c: [(r if isinstance(r, (tuple, list)) else (r,))[j] for r in rows] for j, c in enumerate(cols)}
        return _coerce(data, schema, where)
    if set(df.columns) != set(cols):
        raise SchemaError(f"{where}: frame columns {df.columns} do not match the schema columns {cols}")
    return _coerce({c: df[c] for c in cols}, schema, where)


def _coerce(data: dict[str, Any], schema: pl.Schema, where: str) -> pl.DataFrame:
    out = {}
    for c, t in schema.items():
        values = data[c]
        try:
            s = pl.Series(c, values, dtype=t, strict=True) if not isinstance(values, pl.Series) else values
            if s.dtype != t:
                s = _lossless(c, s, s.cast(t, strict=True), where)
        except SchemaError:
            raise
        except Exception:
            s = _find_bad(c, values, t, where)
        out[c] = s
    return pl.DataFrame(out)


def _find_bad(c: str, values: Any, t: pl.DataType, where: str) -> pl.Series:
    vals = values.to_list() if isinstance(values, pl.Series) else list(values)
    try:  # lenient path: ints for floats, float -> decimal, datetime -> date
        s = pl.Series(c, vals, strict=False)
        cast = s.cast(t, strict=True)
        if cast.null_count() == s.null_count():
            return _lossless(c, s, cast, where)
    except SchemaError:
        raise
    except Exception:
        pass
    for v in vals:
        if v is None:
            continue
        try:
            pl.Series(c, [v], strict=False).cast(t, strict=True)
        except Exception:
            raise SchemaError(f"{where}: column {c!r} ({t}) cannot take the value {v!r}") from None
    raise SchemaError(f"{where}: column {c!r} cannot be converted to {t}")


def _lossless(c: str, before: pl.Series, after: pl.Series, where: str) -> pl.Series:
    """`after` (a strict cast of `before`), unless it truncated a float with a fraction to an integer."""
    if before.dtype.is_float() and after.dtype.is_integer():
        bad = before.filter(before.is_not_null() & (before != before.floor()))
        if bad.len():
            raise SchemaError(f"{where}: column {c!r} ({after.dtype}) cannot take the value {bad[0]!r}")
    return after


def with_weights(df: pl.DataFrame, weights: Sequence[int] | np.ndarray | int | None, where: str) -> pl.DataFrame:
    if weights is None:
        w = np.ones(df.height, dtype=np.int64)
    elif isinstance(weights, (int, np.integer)) and not isinstance(weights, bool):
        w = np.full(df.height, int(weights), dtype=np.int64)
    elif isinstance(weights, (str, bytes)) or not hasattr(weights, "__iter__"):  # a scalar, not an int
        raise WeightError(f"{where}: weight {weights!r} is not an integer")
    else:
        try:
            w = check_weights(weights if isinstance(weights, np.ndarray) else list(cast(Sequence[int], weights)))
        except WeightError as e:
            raise WeightError(f"{where}: {e}") from None
        if len(w) != df.height:
            raise WeightError(f"{where}: {len(w)} weights for {df.height} rows")
    return df.with_columns(pl.Series(WEIGHT, w, dtype=pl.Int64))


def split_weight_column(rows: Any, name: str = "weight") -> tuple[Any, Any]:
    """For frames carrying their own weight column: (data, weights)."""
    if isinstance(rows, pl.DataFrame) and name in rows.columns:
        return rows.drop(name), rows[name].to_numpy()
    if _is_pandas(rows) and name in rows.columns:
        return rows.drop(columns=[name]), rows[name].to_numpy()
    return rows, None


def _is_pandas(x: Any) -> bool:
    return type(x).__module__.startswith("pandas") and hasattr(x, "columns")


def _is_arrow(x: Any) -> bool:
    return type(x).__module__.startswith("pyarrow")


def check_kind(z: ZSet, cur: pl.DataFrame | None, kind: str, where: str) -> None:
    """Reject a change `z` to a bag (no negative count) or a set (no count above 1), given `cur`, the
    relation's current rows among those of `z` (None: empty; then `z` is the relation itself)."""
    cur = (z.df.clear() if cur is None else cur).rename({WEIGHT: "__old"})
    j = z.df.join(cur, on=z.columns, how="left", nulls_equal=True).with_columns(
        (pl.col("__old").fill_null(0) + pl.col(WEIGHT)).alias("__new"))
    too_many = pl.col("__new") > 1 if kind == "set" else pl.lit(False)
    bad = j.filter((pl.col("__new") < 0) | too_many)
    if bad.height:
        r = bad.row(0, named=True)
        row = tuple(r[c] for c in z.columns)
        if r["__new"] < 0:
            raise NegativeStateError(
                f"{where}: delete of row {row} that is not there (present {r['__old'] or 0} time(s), "
                f"change {r[WEIGHT]})")
        raise NegativeStateError(f"{where} is a set: row {row} would occur {r['__new']} times")
