"""A float expression gives a row the same bits whatever batch it arrives in, on both engines, and DuckDB's.

DBSP's maps must be functions: a delete cancels its insert only if the deleted row maps to the bits the
inserted row did. Polars computes a float operation with a scalar operand by other means (x / 47 as
x * (1/47) on a batch of several rows, x + 0.0 as x); a view of `x / 47` kept a row after its delete,
with a negative weight (issue 21). Hypothesis draws float expressions (division by literals and by
columns, mixed with products, sums, powers, rounding) over rows with signed zeros and awkward values;
each row is evaluated alone and inside random batches, and every value is compared bit for bit with
the others and with DuckDB's.
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from typing import Any

import duckdb
import polars as pl
import pytest
from hypothesis import strategies as st

import dbspark
from dbspark.errors import DataError
from dbspark.ir.expr import Binary, Case, Cast, Expr, Unary, col, func, lit
from dbspark.testing.engines import engine_given, is_spark
from dbspark.testing.sql_oracle import WEIGHT, SqlOracle, view_frame
from dbspark.testing.sqlexpr import to_sql

SCHEMA = pl.Schema(
    {
        "id": pl.Int64,
        "i": pl.Int64,
        "j": pl.Int32,
        "m": pl.Decimal(9, 2),
        "f": pl.Float64,
        "g": pl.Float64,
        "b": pl.Boolean,
    }
)
FLOATS = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    68.0,
    96.0,
    0.1,
    0.3,
    1.1,
    2.5,
    -3.75,
    1e-300,
    5e-324,
    1e300,
    123.456,
    1 / 3,
    2.0**52 + 1,
    math.inf,
    -math.inf,
    7.020121494361405,
]
INTS = [0, 1, -1, 2, 3, 47, 68, 96, 100, 2**53 + 1, -(2**40)]
DECS = [Decimal(v) for v in ("0", "1.25", "-2.50", "0.10", "9999999.99", "0.03")]
DIVISORS = [47, 34, 27, 93, 40, 3, 10, 7, 2, 0]
FLOAT_LITS = [0.0, -0.0, 0.1, 47.0, 3.0, 0.5, 1e-3, 2.0, -1.5]


def bits(v: Any, signed_zero: bool = True) -> Any:
    """A value's identity: a float's IEEE bit pattern (every NaN one value; -0.0 as 0.0 unless
    `signed_zero`), anything else itself."""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else struct.pack("<d", v if signed_zero or v != 0 else 0.0).hex()
    return v


@st.composite
def rows(draw: st.DrawFn, min_size: int = 1, max_size: int = 8) -> list[tuple]:
    def opt(values: list) -> Any:
        return draw(st.one_of(st.none(), st.sampled_from(values)))

    return [
        (
            k,
            opt(INTS),
            opt([0, 1, -7, 47, 2**31 - 1]),
            opt(DECS),
            opt(FLOATS),
            opt(FLOATS),
            draw(st.one_of(st.none(), st.booleans())),
        )
        for k in range(draw(st.integers(min_size, max_size)))
    ]


def _leaf() -> st.SearchStrategy[Expr]:
    return st.one_of(
        st.sampled_from([col("f"), col("g")]),
        st.sampled_from([col("i"), col("j")]).map(lambda c: Cast(c, pl.Float64())),
        st.just(Cast(col("m"), pl.Float64())),
        st.sampled_from(FLOAT_LITS).map(lit),
    )


@st.composite
def fexpr(draw: st.DrawFn, depth: int = 3, power: bool = True) -> Expr:
    """A DOUBLE expression with at least one column (with `power`, possibly calls of C's pow)."""
    if depth <= 0 or draw(st.integers(0, 4)) == 0:
        e = draw(_leaf())
        return e if e.columns() else col("f")
    sub = fexpr(depth - 1, power)
    k = draw(st.integers(0, 11).filter(lambda k: power or k != 7))
    if k <= 2:  # division by a literal (an integer, as in `x / 47`, or a double) or by an expression
        d = draw(st.one_of(st.sampled_from(DIVISORS).map(lit), st.sampled_from(FLOAT_LITS).map(lit), sub))
        return Binary("sql_div", draw(st.one_of(sub, st.sampled_from([col("i"), col("j"), col("m")]))), d)
    if k <= 5:
        other = draw(st.one_of(sub, st.sampled_from(DIVISORS + FLOAT_LITS).map(lit)))
        op = draw(st.sampled_from(["add", "sub", "mul"]))
        return Binary(op, *((draw(sub), other) if draw(st.booleans()) else (other, draw(sub))))
    if k == 6:
        return Binary("int_div", draw(sub), draw(st.one_of(sub, st.sampled_from(DIVISORS).map(lit))))
    if k == 7:
        return func("power", draw(sub), draw(st.one_of(st.sampled_from([2, 3, 5, 0.5, -1, 1]).map(lit), sub)))
    if k == 8:
        return func("round", draw(sub), draw(st.integers(-2, 3)))
    if k == 9:
        return Unary(draw(st.sampled_from(["neg", "abs"])), draw(sub))
    if k == 10:
        return Case(
            ((col("b"), draw(sub)),), draw(st.one_of(st.none(), sub, st.sampled_from(FLOAT_LITS).map(lit)))
        )
    return func("sqrt", func("abs", draw(sub)))


def evaluate(exprs: list[Expr], batches: list[list[tuple]], engine: Any) -> dict[tuple[int, int], Any]:
    """{(row id, expression #): bits} of t.map(id, e0, e1, ...), one step per batch. The spark engine
    consolidates a change by grouping on its columns, where Spark normalizes -0.0 to 0.0: on spark, the
    sign of a zero is not compared."""
    signed_zero = engine == "local"
    c = dbspark.Circuit()
    t = c.input("t", SCHEMA, kind="bag")
    c.output("v", t.map("id", **{f"e{k}": e for k, e in enumerate(exprs)}))
    r = c.run(engine)
    out: dict[tuple[int, int], Any] = {}
    for batch in batches:
        r.insert("t", pl.DataFrame(batch, schema=SCHEMA, orient="row"))
        z = r.step()["v"]
        for row in z.to_dict() if hasattr(z, "to_dict") else z:
            out.update({(row[0], k): bits(v, signed_zero) for k, v in enumerate(row[1:])})
    return out


def duckdb_bits(exprs: list[Expr], data: list[tuple]) -> dict[tuple[int, int], Any] | None:
    """DuckDB's values, or None if DuckDB raises (the error cases are `test_sql_exprs`'s)."""
    con = duckdb.connect()
    con.execute("PRAGMA disable_optimizer")  # no constant folding: each operation as written
    df = pl.DataFrame(data, schema=SCHEMA, orient="row")  # noqa: F841  (DuckDB's replacement scan)
    con.execute("CREATE TABLE t AS SELECT * FROM df")
    sel = ", ".join(f"{to_sql(e, SCHEMA)} AS e{k}" for k, e in enumerate(exprs))
    try:
        res = con.execute(f"SELECT id, {sel} FROM t").fetchall()
    except duckdb.Error:
        return None
    return {(row[0], k): bits(v) for row in res for k, v in enumerate(row[1:])}


def split(draw: st.DrawFn, data: list[tuple]) -> list[list[tuple]]:
    """The rows shuffled into consecutive batches of random sizes."""
    order = draw(st.permutations(data))
    cuts = sorted(draw(st.sets(st.integers(1, max(len(order) - 1, 1)), max_size=3)))
    return [b for b in (order[i:j] for i, j in zip([0, *cuts], [*cuts, len(order)], strict=True)) if b]


def check(
    exprs: list[Expr],
    data: list[tuple],
    batches: list[list[tuple]],
    engine: Any,
    alone: dict[tuple[int, int], Any] | None = None,
) -> None:
    text = [to_sql(e, SCHEMA) for e in exprs]
    want = duckdb_bits(exprs, data)
    if want is None:
        return
    try:
        if alone is None:
            alone = {}
            for row in data:  # each row in a batch of its own
                alone.update(evaluate(exprs, [[row]], "local"))
        together = evaluate(exprs, batches, engine)
    except DataError:
        pytest.fail(f"{text}: dbspark raised where DuckDB did not")
    by_id = {r[0]: r for r in data}
    zero = {bits(0.0), bits(-0.0)} if engine != "local" else set()
    for (i, k), v in want.items():
        where = f"{text[k]} on row {by_id[i]}"
        assert alone[(i, k)] == v, f"{where}: dbspark alone {alone[(i, k)]}, DuckDB {v}"
        got = together[(i, k)]
        assert got == v or {got, v} <= zero, (
            f"{where} in batches {[len(b) for b in batches]}: {got}, DuckDB {v}"
        )


@engine_given(data=st.data(), local=200, spark=6)
def test_float_expressions_have_the_same_bits_in_every_batch_and_duckdbs(
    engine: Any, data: st.DataObject
) -> None:
    # Spark: more expressions per example (one Spark job per batch), fewer rows, no pow
    # (test_spark_pow_exp_ln_are_not_cs)
    spark = is_spark(engine)
    exprs = [data.draw(fexpr(power=not spark)) for _ in range(6 if spark else 3)]
    rows_ = data.draw(rows(2, 8) if spark else rows())
    check(exprs, rows_, split(data.draw, rows_), engine)


# the examples, and the kinds of operation whose scalar form Polars computes differently
FIXED: list[Expr] = [
    Binary("sql_div", col("i"), lit(47)),
    Binary("sql_div", col("f"), lit(40)),
    Binary("sql_div", col("m"), lit(27)),
    Binary("sql_div", col("f"), lit(93)) * Cast(col("i"), pl.Float64()),
    Binary("sql_div", col("f"), lit(0.1)),
    Binary("int_div", col("f"), lit(3)),
    col("f") + lit(0.0),
    col("f") - lit(-0.0),
    lit(0.0) - col("f"),
    col("f") + col("g"),
    func("round", col("f"), 2),
    func("round", col("f"), -1),
    Binary("sql_div", col("f"), Case(((col("b"), col("g")),), lit(47.0))),
    Binary("sql_div", col("i"), col("g")),  # IEEE: x / -0.0 is -inf for x > 0 (Spark's division is NULL)
]
# C's pow, as DuckDB: Polars computes pow(x, 3) with a scalar exponent as x * x * x (7.020121494361405^3)
POWERS: list[Expr] = [
    func("power", col("f"), lit(3)),
    func("power", col("f"), col("g")),
    func("power", col("f"), lit(0.5)),
]
FIXED_ROWS = [
    (k, x, 1, Decimal("1.25"), f, g, False)
    for k, (x, f, g) in enumerate(
        [
            (68, 68.0, -0.0),
            (96, 96.0, 0.0),
            (7, -0.0, 3.0),
            (3, 1.1, 0.0),
            (5, 0.3, -0.0),
            (11, 1 / 3, 1.1),
            (2, 7.020121494361405, 3.0),
            (4, -math.inf, 0.5),
        ]
    )
]


def test_fixed_float_expressions_in_every_batch(engine: Any) -> None:
    exprs = FIXED + POWERS if engine == "local" else FIXED
    alone: dict[tuple[int, int], Any] = {}
    for row in FIXED_ROWS:
        alone.update(evaluate(exprs, [[row]], "local"))
    for batches in ([FIXED_ROWS], [FIXED_ROWS[:2], FIXED_ROWS[2:]], [FIXED_ROWS[::-1]]):
        check(exprs, FIXED_ROWS, batches, engine, alone)


@pytest.mark.spark
@pytest.mark.xfail(
    reason="Spark's pow, exp, ln and log10 are Java's StrictMath (fdlibm), not C's (glibc) as in "
    "DuckDB and Polars: a few percent of values differ in the last bit",
    strict=True,
)
def test_spark_pow_exp_ln_are_not_cs(spark_engine: Any) -> None:
    rows_ = [
        (0, None, None, None, 2.9137883496110453, 1.7, None),
        (1, None, None, None, 64.95811809119458, 1.7, None),
        (2, None, None, None, 51.17405400292865, 3.0, None),
    ]
    exprs = [
        func("power", col("f"), col("g")),
        func("exp", col("f")),
        func("ln", col("f")),
        func("log10", col("f")),
    ]
    check(exprs, rows_, [rows_], spark_engine)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT x / 47 AS q FROM t",
        "SELECT DISTINCT x / 47 AS q FROM t",
        "SELECT COUNT(*) / 34 AS q FROM t",
        "SELECT SUM(x) / 27 AS q FROM t",
        "SELECT x / 93 * x AS q FROM t",
        "SELECT AVG(x) / 40 AS q FROM t",
    ],
)
def test_a_delete_cancels_its_insert_through_a_float_division(
    engine: Any, request: pytest.FixtureRequest, sql: str
) -> None:
    # issue 21: insert (68), (96), delete (68) through `SELECT x / 47`: the view kept 68/47 computed
    # as 68 * (1/47) with weight 1 next to 68/47 with weight -1
    if engine == "local":
        p = dbspark.Pipeline(engine="local")
    else:
        p = dbspark.Pipeline(engine="spark", spark=request.getfixturevalue("spark_session"))
    ddl = f"CREATE TABLE t (x BIGINT); CREATE VIEW v AS {sql};"
    oracle = SqlOracle(ddl, rtol=0.0, atol=0.0)  # a non-positive weight in the view is an error too
    p.sql(ddl)
    try:
        for ins, dels in (([(68,), (96,)], []), ([], [(68,)]), ([(68,), (5,), (96,)], [(96,)]), ([], [(5,)])):
            for rows_, apply in ((dels, (p.delete, oracle.delete)), (ins, (p.insert, oracle.insert))):
                if rows_:
                    apply[0]("t", rows_)
                    apply[1]("t", rows_)
            p.step()
            oracle.check(p, what=f"of {sql}")
            got = view_frame(p.view("v")).sort("q")
            want = oracle.expected("v").sort("q")
            expanded = [bits(q) for q, w in got.select("q", WEIGHT).iter_rows() for _ in range(w)]
            assert expanded == [bits(q) for q in want["q"]], sql
    finally:
        p.close()


def test_python_operators_on_floats_are_pythons_in_every_batch(engine: Any) -> None:
    # the circuit API's `/`, `//`, `%` (ops truediv, floordiv, mod; Datalog's float arithmetic): `/` and `%`
    # are Python's on every row of every batch and on both engines (the local engine's `%` was Polars'
    # a - b * floor(a / b), which rounds twice; Spark's was Python's); `//` is the floor of the quotient
    f, i = col("f"), col("i")
    exprs = [f / lit(47.0), i / lit(47), f % lit(0.1), f % lit(-0.3), f % col("g"), f // lit(0.1)]
    py = [
        lambda x, g, n: x / 47.0,
        lambda x, g, n: n / 47,
        lambda x, g, n: x % 0.1,
        lambda x, g, n: x % -0.3,
        lambda x, g, n: x % g,
        lambda x, g, n: math.floor(x / 0.1),
    ]
    values = [(68.0, 0.1, 68), (5.5, 0.3, 96), (7.3, -2.1, 5), (-5.5, 0.1, -7), (1.0, 3.0, 1), (0.3, 0.1, 3)]
    data = [(k, n, None, None, x, g, None) for k, (x, g, n) in enumerate(values)]
    alone: dict[tuple[int, int], Any] = {}
    for row in data:
        alone.update(evaluate(exprs, [[row]], "local"))
    for batches in ([data], [data[:1], data[1:]], [data[::-1]]):
        got = evaluate(exprs, batches, engine)
        for k_row, (x, g, n) in enumerate(values):
            for k, want in enumerate(py):
                expected = float(want(x, g, n))
                assert alone[(k_row, k)] == bits(expected), f"{exprs[k]!r} on {values[k_row]} alone"
                assert got[(k_row, k)] == bits(expected, engine == "local"), (
                    f"{exprs[k]!r} on {values[k_row]} in {[len(b) for b in batches]}"
                )
