"""Date and time functions: epoch_ms / epoch_us, strftime, strptime / try_strptime (DuckDB 1.5's types).

A format is a constant, read by `dbspark.columnar.strformat` when the view is declared, so that a
specifier dbspark does not evaluate is an UnsupportedError then, not a different string later.
"""

from __future__ import annotations

import polars as pl

from dbspark.columnar import strformat
from dbspark.errors import UnsupportedError
from dbspark.ir.functions import _err, _need, _reg, _str, is_temporal, literal_value


def format_of(name: str, e: object) -> str:
    """The constant format argument of a strftime / strptime call."""
    v = literal_value(name, e, "the format")  # type: ignore[arg-type]
    if not isinstance(v, str):
        raise UnsupportedError(f"function {name}: the format must be a string constant")
    return v


for _n in ("epoch_ms", "epoch_us"):

    @_reg(
        _n, 1, 1, "milli/microseconds since 1970-01-01 of a DATE or TIMESTAMP (truncated toward zero): BIGINT"
    )
    def _epoch(ts, args, _n=_n):
        if ts[0].is_integer():
            raise UnsupportedError(f"function {_n}(integer) (a TIMESTAMP from an epoch count)")
        _need(_n, ts, is_temporal, "DATE or TIMESTAMP")
        return pl.Int64()


@_reg("strftime", 2, 2, "a DATE or TIMESTAMP as text in a DuckDB format: VARCHAR")
def _strftime(ts, args):
    _need("strftime", ts[:1], is_temporal, "DATE or TIMESTAMP")
    if not (_str(ts[1]) or ts[1] == pl.Null()):
        raise _err("strftime", ts, "the format must be a VARCHAR")
    strformat.tokens(format_of("strftime", args[1]), "strftime")
    return pl.String()


for _n in ("strptime", "try_strptime"):

    @_reg(
        _n,
        2,
        2,
        "text in a DuckDB format as a TIMESTAMP (strptime raises, try_strptime is NULL if it does not parse)",
    )
    def _strptime(ts, args, _n=_n):
        _need(_n, ts, _str, "VARCHAR")
        strformat.parse_plan(format_of(_n, args[1]), _n)
        return pl.Datetime("us")
