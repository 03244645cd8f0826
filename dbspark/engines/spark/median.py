"""MEDIAN's value from a group's two middle values, as DuckDB computes it, in Spark SQL.

The same arithmetic as `columnar/median.py` (the local engine's and the driver-side step's) (see there for DuckDB's rules):
an odd count gives the middle value, an even one DuckDB's interpolation in the type's storage. Spark
has no access to a DECIMAL's unscaled integer and its decimal arithmetic narrows scales past 38 digits,
and multiplies to 34 significant digits, so a wide DECIMAL's unscaled value is read from its plain text
(the digits without the point) and written back the same way; a double midpoint becomes an exact
integer in three truncated parts (2^64, 2^32 and the rest), because Spark's DOUBLE to DECIMAL cast goes
through the shortest decimal text.
"""

from __future__ import annotations

import polars as pl

from dbspark.engines.spark.convert import spark_type
from dbspark.ir.aggregate import median_dtype

TWO64 = "1.8446744073709552E19"  # 2^64 as a DOUBLE literal
TWO32 = "4294967296.0D"
D64 = "CAST('18446744073709551616' AS decimal(20,0))"


def _t(t: pl.DataType) -> str:
    return spark_type(t).simpleString()


def median_sql(lo: str, hi: str, n: str, t: pl.DataType) -> str:
    """SQL of the median of a group whose middle values are `lo` <= `hi` (SQL of type `t`) and whose count
    is `n` (SQL; > 0)."""
    rt = median_dtype(t)
    if isinstance(t, pl.Decimal):
        p, s = t.precision or 38, t.scale or 0
        if p <= 18:  # lo + trunc(double(hi - lo) * 0.5), in units of 10^-s
            delta = f"CAST(({hi} - {lo}) * CAST('{10**s}' AS decimal({s + 1},0)) AS bigint)"
            half = f"CAST(CAST(CAST({delta} AS double) * 0.5D AS bigint) AS decimal(19,0))"
            # |step| <= (hi - lo) / 2: DECIMAL(p + 1, s), so that lo + step keeps the scale (Spark narrows a
            # sum's scale past 38 digits)
            step = (
                half
                if s == 0
                else f"CAST({half} * CAST('{10**-s:.{s}f}' AS decimal({s},{s})) AS decimal({p + 1},{s}))"
            )
            mid = f"CAST({lo} + {step} AS {_t(rt)})"
        else:  # trunc(double(lo) * 0.5 + double(hi) * 0.5), in units, DuckDB's double of a 128-bit integer
            m = f"({_hugeint_double(lo, 'ul')} * 0.5D + {_hugeint_double(hi, 'uh')} * 0.5D)"
            # the type's bounds (see the local engine's); no unary minus: Spark negates a DECIMAL to 34 digits
            top, bottom = (f"CAST('{v}' AS decimal(38,0))" for v in (10**p - 1, 1 - 10**p))
            mid = _decimal_of_units(f"greatest(least({_trunc_exact(m)}, {top}), {bottom})", p, s)
    elif isinstance(rt, pl.Datetime):  # llround(lo * 0.5 + hi * 0.5) in microseconds
        ml, mh = (f"CAST(unix_micros(CAST({x} AS timestamp)) AS double)" for x in (lo, hi))
        r = "IF(abs(tm) < 4503599627370496.0D, CAST(tm + IF(tm < 0, -0.5D, 0.5D) AS bigint), CAST(tm AS bigint))"
        mid = f"CAST(timestamp_micros({_let(f'{ml} * 0.5D + {mh} * 0.5D', 'tm', r)}) AS {_t(rt)})"
    elif rt == pl.Float64() and t.is_numeric():
        mid = f"(CAST({lo} AS double) * 0.5D + CAST({hi} AS double) * 0.5D)"
    else:
        return lo
    return f"IF({n} % 2 = 1, CAST({lo} AS {_t(rt)}), {mid})"


def _let(value: str, var: str, body: str) -> str:
    """`body` with the lambda variable `var` bound to `value`, evaluated once (SQL has no LET)."""
    return f"element_at(transform(array({value}), {var} -> {body}), 1)"


def _unscaled(x: str) -> str:
    """A DECIMAL's unscaled integer as DECIMAL(38,0): its plain text without the point."""
    return f"CAST(replace(CAST({x} AS string), '.', '') AS decimal(38,0))"


def _hugeint_double(x: str, v: str) -> str:
    """DuckDB's double of the unscaled 128-bit integer u of the DECIMAL `x`: -(double(2^64 - 1 - low) + 1)
    when the high word is -1, else double(low) + double(high) * 2^64 (`v`: a fresh lambda variable name).
    high = floor(u / 2^64): Spark's quotient keeps 6 decimals, rounded, so one that rounds up to the next
    integer (low >= 2^63, fraction shown below .5) is taken back."""
    w = f"{v}w"
    parts = f"named_struct('low', pmod({v}, {D64}), 'q', {v} / {D64})"
    low, q = f"{w}.low", f"{w}.q"
    high = (
        f"(CAST(FLOOR({q}) AS bigint) - IF({low} >= CAST('9223372036854775808' AS decimal(20,0)) "
        f"AND {q} - FLOOR({q}) < 0.5, 1, 0))"
    )
    neg = f"(-CAST(CAST('18446744073709551615' AS decimal(20,0)) - {low} AS double) - 1.0D)"
    pos = f"(CAST({low} AS double) + CAST({high} AS double) * {TWO64})"
    return _let(_unscaled(x), v, _let(parts, w, f"IF({high} = -1, {neg}, {pos})"))


def _trunc_exact(m: str) -> str:
    """trunc(m) of a DOUBLE `m` (|m| < 10^38) as an exact DECIMAL(38,0): a * 2^64 + b * 2^32 + c, each part
    truncated toward zero (every subtraction is exact)."""
    a = f"CAST(tm / {TWO64} AS bigint)"
    r = f"(tm - CAST(ta AS double) * {TWO64})"
    b = f"CAST(tr / {TWO32} AS bigint)"
    c = f"CAST(tr - CAST(tb AS double) * {TWO32} AS bigint)"
    # Spark multiplies decimals to 34 significant digits: a * 2^64 (up to 38) is a * 1844674407 * 10^10 +
    # a * 3709551616 (each at most 29 digits); sums are exact
    ta = "CAST(ta AS decimal(38,0))"
    total = (
        f"{ta} * CAST(1844674407 AS decimal(10,0)) * CAST('10000000000' AS decimal(11,0))"
        f" + {ta} * CAST(3709551616 AS decimal(10,0))"
        f" + CAST(tb AS decimal(38,0)) * CAST(4294967296 AS decimal(10,0)) + CAST({c} AS decimal(38,0))"
    )
    return _let(m, "tm", _let(a, "ta", _let(r, "tr", _let(b, "tb", total))))


def _decimal_of_units(u: str, p: int, s: int) -> str:
    """DECIMAL(p, s) of `u` units of 10^-s (SQL DECIMAL(38,0)), through its plain text."""
    if s == 0:
        return f"CAST({u} AS decimal({p},0))"
    digits = "TRIM(LEADING '-' FROM CAST(du AS string))"  # not abs: Spark negates a DECIMAL to 34 digits
    padded = f"IF(length({digits}) > {s}, {digits}, lpad({digits}, {s + 1}, '0'))"
    text = f"concat(IF(du < 0, '-', ''), substr(dp, 1, length(dp) - {s}), '.', substr(dp, -{s}))"
    return _let(u, "du", _let(padded, "dp", f"CAST({text} AS decimal({p},{s}))"))
