"""SQL scalar types and the function registry: result types of operators and functions, DuckDB's rules.

DuckDB 1.5 is the reference (the SQL front end's test oracle). Type rules here; each engine compiles a
`Func` by name (`engines/local/sqlfuncs.py`, `engines/spark/sqlfuncs.py`), and `tests/test_sql_exprs.py`
checks that every registered function has both implementations.

Integer types keep their width (INTEGER + INTEGER is INTEGER; overflow is an error in that width).
DECIMAL(p, s) arithmetic follows DuckDB's binder (`BindDecimalAddSubtract`, `BindDecimalMultiply`):
    + -  scale max(s1, s2), precision max(p1 - s1, p2 - s2) + scale + 1, capped at 18 when both inputs
         have p <= 18 (DuckDB's int64 boundary; the result is then overflow-checked), and at 38;
    *    scale s1 + s2, precision p1 + p2, capped the same way (18 when both p <= 18 and scale < 18).
An integer operand is DECIMAL(3|5|10|19, 0) by width; a DECIMAL mixed with a float is DOUBLE; `/` is
always DOUBLE.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from dbspark.errors import SchemaError, UnsupportedError

if TYPE_CHECKING:
    from dbspark.ir.expr import Expr

NULL = pl.Null()
INT_ORDER: list[pl.DataType] = [pl.Int8(), pl.Int16(), pl.Int32(), pl.Int64()]
INT_DIGITS: dict[pl.DataType, int] = {pl.Int8(): 3, pl.Int16(): 5, pl.Int32(): 10, pl.Int64(): 19}
SQL_NAMES = {
    pl.Int8(): "TINYINT",
    pl.Int16(): "SMALLINT",
    pl.Int32(): "INTEGER",
    pl.Int64(): "BIGINT",
    pl.Float64(): "DOUBLE",
    pl.Float32(): "FLOAT",
    pl.String(): "VARCHAR",
    pl.Boolean(): "BOOLEAN",
    pl.Date(): "DATE",
}


# DuckDB's TIMESTAMP (no time zone) and TIMESTAMP WITH TIME ZONE (an instant; dbspark's session time zone,
# like the oracle's and the Spark engine's, is UTC, so it is stored and shown in UTC)
TIMESTAMP = pl.Datetime("us")
TIMESTAMPTZ = pl.Datetime("us", "UTC")


def is_tz(t: pl.DataType) -> bool:
    """A TIMESTAMP WITH TIME ZONE."""
    return isinstance(t, pl.Datetime) and t.time_zone is not None


def sql_name(t: pl.DataType) -> str:
    """The SQL (DuckDB) name of a type, for messages and the SQL printer."""
    if isinstance(t, pl.Decimal):
        return f"DECIMAL({t.precision},{t.scale})"
    if isinstance(t, pl.Datetime):
        return "TIMESTAMP WITH TIME ZONE" if t.time_zone else "TIMESTAMP"
    if t == NULL:
        return "NULL"
    return SQL_NAMES.get(t, str(t))


# the value range of each signed integer type
INT_RANGE: dict[pl.DataType, tuple[int, int]] = {
    pl.Int8(): (-(2**7), 2**7 - 1),
    pl.Int16(): (-(2**15), 2**15 - 1),
    pl.Int32(): (-(2**31), 2**31 - 1),
    pl.Int64(): (-(2**63), 2**63 - 1),
}


def norm_int(t: pl.DataType) -> pl.DataType:
    """Signed integer of a Polars integer type (unsigned types widen: UInt32 -> Int64)."""
    if t in INT_DIGITS:
        return t
    widen: dict[pl.DataType, pl.DataType] = {pl.UInt8(): pl.Int16(), pl.UInt16(): pl.Int32()}
    return widen.get(t, pl.Int64())


def is_int(t: pl.DataType) -> bool:
    return t.is_integer()


def is_dec(t: pl.DataType) -> bool:
    return isinstance(t, pl.Decimal)


def is_num(t: pl.DataType) -> bool:
    return t.is_numeric()


def is_temporal(t: pl.DataType) -> bool:
    return t == pl.Date() or isinstance(t, pl.Datetime)


def dec_of(t: pl.DataType) -> tuple[int, int]:
    """(precision, scale) of a decimal or integer type."""
    if isinstance(t, pl.Decimal):
        return (t.precision or 38, t.scale or 0)
    return (INT_DIGITS[norm_int(t)], 0)


def wider_int(a: pl.DataType, b: pl.DataType) -> pl.DataType:
    a, b = norm_int(a), norm_int(b)
    return a if INT_ORDER.index(a) >= INT_ORDER.index(b) else b


def dec_cap(p: int, s: int, max_in: int, cap18: bool = True) -> pl.Decimal:
    if cap18 and p > 18 and max_in <= 18 and s < 18:
        p = 18
    return pl.Decimal(min(p, 38), s)


def supertype2(a: pl.DataType, b: pl.DataType, what: str) -> pl.DataType:
    """The common type of two values (CASE branches, COALESCE, IN, comparisons), DuckDB's rules."""
    if a == NULL:
        return b
    if b == NULL or a == b:
        return a
    if is_num(a) and is_num(b):
        if a.is_float() or b.is_float():
            return pl.Float64()
        if is_dec(a) or is_dec(b):
            (pa, sa), (pb, sb) = dec_of(a), dec_of(b)
            whole, s = max(pa - sa, pb - sb), max(sa, sb)
            # past 38 digits DuckDB keeps the integer digits and cuts the scale (MaxLogicalType):
            # COALESCE(DECIMAL(9,2), DECIMAL(38,0)) is a DECIMAL(38,0)
            s = min(s, 38 - whole)
            return pl.Decimal(whole + s, s)
        return wider_int(a, b)
    if is_temporal(a) and is_temporal(b):  # DATE < TIMESTAMP < TIMESTAMP WITH TIME ZONE
        return TIMESTAMPTZ if is_tz(a) or is_tz(b) else TIMESTAMP
    raise SchemaError(f"{what}: no common type of {sql_name(a)} and {sql_name(b)}")


def supertype(types: Sequence[pl.DataType], what: str) -> pl.DataType:
    out: pl.DataType = NULL
    for t in types:
        out = supertype2(out, t, what)
    return out


def arith_type(op: str, a: pl.DataType, b: pl.DataType, sym: str) -> pl.DataType:
    """Result type of SQL arithmetic `a op b` (ops add, sub, mul, sql_div, int_div, sql_mod)."""
    if (
        op == "sub"
        and is_temporal(a)
        and is_temporal(b)
        and (isinstance(a, pl.Datetime) or isinstance(b, pl.Datetime))
    ):
        raise UnsupportedError(
            f"{sql_name(a)} - {sql_name(b)} (an INTERVAL; INTERVAL values are not supported: use "
            "epoch(a) - epoch(b) or epoch_us(a) - epoch_us(b))"
        )
    if op in ("add", "sub") and (a == pl.Date() or b == pl.Date()):
        if op == "sub" and a == pl.Date() and b == pl.Date():
            return pl.Int64()
        if (a == pl.Date() and (is_int(b) or b == NULL)) or (op == "add" and b == pl.Date() and is_int(a)):
            return pl.Date()
    for t in (a, b):
        if not (is_num(t) or t == NULL):
            raise SchemaError(
                f"arithmetic {sym!r} on non-numeric type {sql_name(t)} ({sql_name(a)} {sym} {sql_name(b)})"
            )
    if op == "sql_div":
        return pl.Float64()
    if a == NULL and b == NULL:
        return NULL
    if a == NULL or b == NULL:
        a = b if a == NULL else a
        b = a
    if a.is_float() or b.is_float():
        return pl.Float64()
    if is_dec(a) or is_dec(b):
        (pa, sa), (pb, sb) = dec_of(a), dec_of(b)
        if op in ("add", "sub"):
            s = max(sa, sb)
            return dec_cap(max(pa - sa, pb - sb) + s + 1, s, max(pa, pb))
        if op == "mul":
            if sa + sb > 38:
                raise SchemaError(
                    f"DECIMAL multiplication {sql_name(a)} * {sql_name(b)}: scale {sa + sb} > 38"
                )
            return dec_cap(pa + pb, sa + sb, max(pa, pb))
        if op == "int_div":
            return pl.Float64()
        if op == "sql_mod":
            s = max(sa, sb)
            return pl.Decimal(min(max(pa - sa, pb - sb) + s, 38), s)
        raise UnsupportedError(f"operator {sym!r} on DECIMAL")
    return wider_int(a, b)


def unary_type(op: str, t: pl.DataType) -> pl.DataType:
    if op in ("neg", "abs"):
        if not (is_num(t) or t == NULL):
            raise SchemaError(f"{'-' if op == 'neg' else 'abs'} of non-numeric type {sql_name(t)}")
        return norm_int(t) if is_int(t) else t
    return pl.Boolean()


def check_comparable(a: pl.DataType, b: pl.DataType, what: str) -> None:
    if a == NULL or b == NULL or a == b:
        return
    if (is_num(a) and is_num(b)) or (is_temporal(a) and is_temporal(b)):
        return
    raise SchemaError(f"{what}: cannot compare {sql_name(a)} with {sql_name(b)}")


CASTABLE_TO_STRING = ("int", "decimal", "string", "bool", "date", "datetime")


def kind(t: pl.DataType) -> str:
    if is_int(t):
        return "int"
    if is_dec(t):
        return "decimal"
    if t.is_float():
        return "float"
    if t == pl.String():
        return "string"
    if t == pl.Boolean():
        return "bool"
    if t == pl.Date():
        return "date"
    if isinstance(t, pl.Datetime):
        return "datetime"
    if t == NULL:
        return "null"
    return "other"


_CASTS = {
    "int": {"int", "decimal", "float", "string", "bool"},
    "decimal": {"int", "decimal", "float", "string", "bool"},
    "float": {"int", "decimal", "float", "bool"},
    "string": {"int", "decimal", "float", "string", "bool", "date", "datetime"},
    "bool": {"int", "float", "string", "bool"},
    "date": {"string", "date", "datetime"},
    "datetime": {"string", "date", "datetime"},
}


def check_cast(src: pl.DataType, to: pl.DataType) -> None:
    """Raise for a CAST dbspark does not evaluate (the same set on both engines)."""
    ks, kt = kind(src), kind(to)
    if ks == "null" or src == to:
        return
    if kt not in _CASTS.get(ks, set()):
        if ks == "float" and kt == "string":
            raise UnsupportedError("CAST of DOUBLE to VARCHAR (float formatting differs between engines)")
        raise UnsupportedError(f"CAST from {sql_name(src)} to {sql_name(to)}")


# ---- the function registry -------------------------------------------------------------------------------
Typer = Callable[[list[pl.DataType], "tuple[Expr, ...]"], pl.DataType]


@dataclass(frozen=True)
class FuncDef:
    """A SQL function: its name, arity range and result type rule (which raises SchemaError on bad args)."""

    name: str
    min_args: int
    max_args: int | None
    typer: Typer
    doc: str = ""


REGISTRY: dict[str, FuncDef] = {}


def _reg(name: str, lo: int, hi: int | None, doc: str = "") -> Callable[[Typer], Typer]:
    def deco(f: Typer) -> Typer:
        REGISTRY[name] = FuncDef(name, lo, hi, f, doc)
        return f

    return deco


def _err(name: str, ts: Sequence[pl.DataType], why: str = "") -> SchemaError:
    args = ", ".join(sql_name(t) for t in ts)
    return SchemaError(f"function {name}({args}): {why or 'wrong argument types'}")


def _need(name: str, ts: Sequence[pl.DataType], ok: Callable[[pl.DataType], bool], what: str) -> None:
    for t in ts:
        if not (ok(t) or t == NULL):
            raise _err(name, ts, f"expects {what} arguments")


def _str(t: pl.DataType) -> bool:
    return t == pl.String()


def literal_value(name: str, e: Expr, what: str) -> object:
    from dbspark.ir.expr import Cast, Lit, Unary

    while isinstance(e, Cast):
        e = e.arg
    if isinstance(e, Unary) and e.op == "neg" and isinstance(e.arg, Lit) and isinstance(e.arg.value, int):
        return -e.arg.value  # a negative integer as SQL writes it
    if not isinstance(e, Lit):
        raise UnsupportedError(f"function {name}: {what} must be a constant, got {e!r}")
    return e.value


def typed(name: str, types: list[pl.DataType], args: tuple[Expr, ...]) -> pl.DataType:
    d = REGISTRY.get(name)
    if d is None:
        raise UnsupportedError(f"unknown SQL function {name!r}")
    n = len(types)
    if n < d.min_args or (d.max_args is not None and n > d.max_args):
        hi = "any" if d.max_args is None else d.max_args
        raise _err(name, types, f"takes {d.min_args}..{hi} arguments, got {n}")
    return d.typer(types, args)


@_reg("coalesce", 1, None)
def _coalesce(ts, args):
    return supertype(ts, "coalesce")


@_reg("ifnull", 2, 2)
def _ifnull(ts, args):
    return supertype(ts, "ifnull")


@_reg("nullif", 2, 2)
def _nullif(ts, args):
    check_comparable(ts[0], ts[1], "nullif")
    return ts[0]


for _n in ("greatest", "least"):
    _reg(_n, 1, None)(lambda ts, args, _n=_n: supertype(ts, _n))  # type: ignore[misc]


def _string_fn(name: str, lo: int, hi: int, sig: str) -> None:
    """sig: one letter per argument: s string, i integer; result type is the registered one."""

    def typer(ts, args, name=name, sig=sig):
        for t, c in zip(ts, sig, strict=False):
            _need(name, [t], _str if c == "s" else is_int, "VARCHAR" if c == "s" else "integer")
        return {
            "length": pl.Int64(),
            "strpos": pl.Int64(),
            "starts_with": pl.Boolean(),
            "ends_with": pl.Boolean(),
            "contains": pl.Boolean(),
        }.get(name, pl.String())

    _reg(name, lo, hi)(typer)


for _n, _lo, _hi, _sig in [
    ("upper", 1, 1, "s"),
    ("lower", 1, 1, "s"),
    ("length", 1, 1, "s"),
    ("substring", 2, 3, "sii"),
    ("trim", 1, 2, "ss"),
    ("ltrim", 1, 2, "ss"),
    ("rtrim", 1, 2, "ss"),
    ("replace", 3, 3, "sss"),
    ("strpos", 2, 2, "ss"),
    ("starts_with", 2, 2, "ss"),
    ("ends_with", 2, 2, "ss"),
    ("contains", 2, 2, "ss"),
    ("left", 2, 2, "si"),
    ("right", 2, 2, "si"),
    ("reverse", 1, 1, "s"),
]:
    _string_fn(_n, _lo, _hi, _sig)


def _concat_typer(name: str):
    def typer(ts, args):
        for t in ts:
            if kind(t) not in (*CASTABLE_TO_STRING, "null"):
                raise _err(name, ts, f"cannot convert {sql_name(t)} to VARCHAR")
        return pl.String()

    return typer


@_reg("error", 1, 1, "raise a DataError with the message wherever it is evaluated (DuckDB's error())")
def _error(ts, args):
    _need("error", ts, _str, "VARCHAR")
    return NULL


@_reg(
    "__fail",
    2,
    2,
    "internal, not SQL: raise the dbspark error class named by the first argument (a constant) with the "
    "message wherever it is evaluated (checks written once above the kernel, `operators.checks`)",
)
def _fail(ts, args):
    from dbspark import errors

    name = literal_value("__fail", args[0], "the error class")
    cls = getattr(errors, str(name), None)
    if not (isinstance(cls, type) and issubclass(cls, errors.DbsparkError)):
        raise _err("__fail", ts, f"{name!r} is not an error class of dbspark.errors")
    _need("__fail", ts[1:], _str, "VARCHAR")
    return NULL


def error_class(e: Expr) -> type:
    """The error class a `__fail` call raises."""
    from dbspark import errors

    return getattr(errors, str(literal_value("__fail", e, "the error class")))


@_reg(
    "__repr",
    1,
    1,
    "internal, not SQL: a value as Python's repr shows it in a message naming a row: a string quoted, "
    "a boolean True / False, NULL None, any other value as the engine's own text of it",
)
def _repr(ts, args):
    return pl.String()


_reg("concat", 1, None)(_concat_typer("concat"))
_reg("concat_op", 2, 2)(_concat_typer("||"))
_reg("concat_ws", 2, None, "the arguments after the first, NULLs skipped, joined by the first (NULL: NULL)")(
    _concat_typer("concat_ws")
)


def _like_typer(name: str):
    def typer(ts, args):
        _need(name, ts, _str, "VARCHAR")
        literal_value(name, args[1], "the pattern")
        if len(args) == 3:
            esc = literal_value(name, args[2], "the escape")
            if not (isinstance(esc, str) and len(esc) <= 1):
                raise _err(name, ts, "the escape must be a single character")
        return pl.Boolean()

    return typer


_reg("like", 2, 3)(_like_typer("like"))
_reg("ilike", 2, 3)(_like_typer("ilike"))


@_reg("abs", 1, 1)
def _abs(ts, args):
    return unary_type("abs", ts[0])


@_reg("round", 1, 2)
def _round(ts, args):
    _need("round", ts[:1], is_num, "numeric")
    n = 0
    if len(args) == 2:
        v = literal_value("round", args[1], "the precision")
        if not isinstance(v, int) or isinstance(v, bool):
            raise _err("round", ts, "the precision must be an integer constant")
        n = v
    t = ts[0]
    if is_dec(t):
        p, s = dec_of(t)
        return pl.Decimal(p, max(0, min(n, s)))
    return norm_int(t) if is_int(t) else (pl.Float64() if t != NULL else NULL)


for _n in ("floor", "ceil"):

    @_reg(_n, 1, 1)
    def _fc(ts, args, _n=_n):
        _need(_n, ts, is_num, "numeric")
        return pl.Decimal(dec_of(ts[0])[0], 0) if is_dec(ts[0]) else pl.Float64()


for _n, _k in [("sqrt", 1), ("ln", 1), ("log10", 1), ("exp", 1), ("power", 2)]:

    @_reg(_n, _k, _k)
    def _fl(ts, args, _n=_n):
        _need(_n, ts, is_num, "numeric")
        return pl.Float64()


@_reg("sign", 1, 1)
def _sign(ts, args):
    _need("sign", ts, is_num, "numeric")
    return pl.Int8()


EXTRACT_PARTS = {
    "year",
    "quarter",
    "month",
    "day",
    "dayofweek",
    "dow",
    "dayofyear",
    "doy",
    "week",
    "hour",
    "minute",
    "second",
    "millisecond",
    "microsecond",
    "isodow",
    "epoch",
}
TRUNC_PARTS = {
    "year",
    "quarter",
    "month",
    "week",
    "day",
    "hour",
    "minute",
    "second",
    "millisecond",
    "microsecond",
}


def _part(name: str, ts, args, parts: set[str]) -> str:
    p = literal_value(name, args[0], "the date part")
    if not isinstance(p, str) or p.lower() not in parts:
        raise UnsupportedError(f"function {name}: date part {p!r} (supported: {sorted(parts)})")
    _need(name, ts[1:], is_temporal, "DATE or TIMESTAMP")
    return p.lower()


@_reg("extract", 2, 2)
def _extract(ts, args):
    return pl.Float64() if _part("extract", ts, args, EXTRACT_PARTS) == "epoch" else pl.Int64()


@_reg("date_trunc", 2, 2)
def _date_trunc(ts, args):
    _part("date_trunc", ts, args, TRUNC_PARTS)
    return TIMESTAMPTZ if is_tz(ts[1]) else TIMESTAMP


@_reg("date_add", 4, 4, "d + INTERVAL (months, days, micros): TIMESTAMP, as DuckDB's date + interval")
def _date_add(ts, args):
    _need("date_add", ts[:1], is_temporal, "DATE or TIMESTAMP")
    _need("date_add", ts[1:], is_int, "integer")
    return TIMESTAMPTZ if is_tz(ts[0]) else TIMESTAMP


DATALOG_DTYPES = {"number": pl.Int64(), "unsigned": pl.Int64(), "float": pl.Float64(), "symbol": pl.String()}


@_reg(
    "__functor",
    2,
    None,
    "internal, not SQL: a Datalog program's user-defined functor `@name` (`dbspark.functors`), called with "
    "the arguments after its name and its Datalog result type (both constants)",
)
def _functor(ts, args):
    return DATALOG_DTYPES[str(literal_value("__functor", args[1], "the result type"))]


# bitwise operations on integers (BIGINT): DuckDB's &, |, xor, ~, <<, >> and a logical (unsigned) right
# shift; a shift amount is taken modulo 64, as Java and x86 do
BITWISE = {
    "bitwise_and": 2,
    "bitwise_or": 2,
    "xor": 2,
    "bitwise_not": 1,
    "shift_left": 2,
    "shift_right": 2,
    "shift_right_unsigned": 2,
}
for _n, _k in BITWISE.items():

    @_reg(_n, _k, _k)
    def _bitwise(ts, args, _n=_n):
        _need(_n, ts, is_int, "integer")
        return pl.Int64()


@_reg("regexp_full_match", 2, 2, "the whole string matches the regular expression (DuckDB's function)")
def _regexp_full_match(ts, args):
    _need("regexp_full_match", ts, _str, "VARCHAR")
    return pl.Boolean()


@_reg("split_part", 3, 3, "split_part(s, delimiter, n): the n-th part (from 1; from the end if negative)")
def _split_part(ts, args):
    _need("split_part", ts[:2], _str, "VARCHAR")
    _need("split_part", ts[2:], is_int, "integer")
    literal_value("split_part", args[1], "its delimiter")
    literal_value("split_part", args[2], "its part number")
    return pl.String()


@_reg("regexp_extract", 2, 3, "regexp_extract(s, pattern[, group]): the group's match, '' if none")
def _regexp_extract(ts, args):
    _need("regexp_extract", ts[:2], _str, "VARCHAR")
    _need("regexp_extract", ts[2:], is_int, "integer")
    literal_value("regexp_extract", args[1], "its pattern")
    if len(args) > 2:
        literal_value("regexp_extract", args[2], "its group")
    return pl.String()


SPARK_INT_DIGITS: dict[pl.DataType, int] = {pl.Int8(): 3, pl.Int16(): 5, pl.Int32(): 10, pl.Int64(): 20}


def spark_dec_of(t: pl.DataType) -> tuple[int, int]:
    """(precision, scale) Spark gives an operand of DECIMAL arithmetic: an integer column as
    `DecimalType.forType` (a LONG is DECIMAL(20, 0))."""
    if isinstance(t, pl.Decimal):
        return (t.precision or 38, t.scale or 0)
    return (SPARK_INT_DIGITS[norm_int(t)], 0)


def spark_decimal_bounded(precision: int, scale: int) -> tuple[int, int]:
    """A DECIMAL result type past 38 digits as Spark adjusts it (`DecimalType.adjustPrecisionScale`,
    precision loss allowed): the integer digits kept, the scale down to min(scale, 6) at least."""
    if precision <= 38:
        return precision, scale
    whole = precision - scale
    return 38, max(38 - whole, min(scale, 6))


def spark_decimal_quotient(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """The (precision, scale) of Spark's DECIMAL(p1, s1) / DECIMAL(p2, s2) (`DecimalPrecision`, with
    spark.sql.decimalOperations.allowPrecisionLoss on, Spark's default): scale max(6, s1 + p2 + 1),
    precision p1 - s1 + s2 + scale; past 38 digits the scale gives way, down to min(scale, 6)."""
    (p1, s1), (p2, s2) = a, b
    scale = max(6, s1 + p2 + 1)
    prec = p1 - s1 + s2 + scale
    if prec > 38:
        whole = prec - scale
        scale, prec = max(38 - whole, min(scale, 6)), 38
    return prec, scale


@_reg(
    "spark_decimal_div",
    4,
    4,
    "spark_decimal_div(a, b, p, s): a / b of DECIMALs as Spark divides them (the Spark dialect): the exact "
    "quotient rounded half-up to DECIMAL(p, s); past p digits an error",
)
def _spark_decimal_div(ts, args):
    _need("spark_decimal_div", ts[:2], lambda t: is_dec(t) or is_int(t), "DECIMAL or integer")
    p, s = literal_value("spark_decimal_div", args[2], "p"), literal_value("spark_decimal_div", args[3], "s")
    assert isinstance(p, int) and isinstance(s, int)
    return pl.Decimal(p, s)


for _n in ("is_distinct_from", "is_not_distinct_from"):

    @_reg(_n, 2, 2)
    def _dist(ts, args, _n=_n):
        check_comparable(ts[0], ts[1], _n)
        return pl.Boolean()


# the date and time functions of DuckDB beyond extract / date_trunc / date_add (registered on import)
from dbspark.ir import timefuncs as _timefuncs  # noqa: E402, F401
