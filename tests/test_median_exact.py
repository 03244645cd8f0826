"""MEDIAN, MIN, MAX and MODE are exact on DECIMAL, DATE and TIMESTAMP, with DuckDB's result types.

MEDIAN used to go through DOUBLE: DECIMAL(18,4) `12345678901234.5678` (x2) and `...5690` gave `...5680`, and
a group holding only `99999999999999.9999` failed its cast back to DECIMAL (issue 21). DuckDB keeps a
DECIMAL's type and interpolates an even count in the storage integer (`dbspark.columnar.median`):
DECIMAL(p <= 18) floors the midpoint, DECIMAL(p > 18) goes through DuckDB's double of a 128-bit integer;
DATE and TIMESTAMP give a TIMESTAMP. Every view is checked against DuckDB after every step, DECIMAL
against DECIMAL exactly (`SqlOracle`), and the core's non-incremental aggregate likewise.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

import duckdb
import polars as pl
import pytest

import dbspark
from dbspark.testing.sql_oracle import SqlOracle, compare_frames, view_frame

ORDERED = "median({x}) AS md, min({x}) AS lo, max({x}) AS hi, count({x}) AS n"


def _pipeline(engine: str, request: pytest.FixtureRequest) -> Any:
    if engine == "spark":
        return dbspark.Pipeline(engine="spark", spark=request.getfixturevalue("spark_session"))
    return dbspark.Pipeline(engine="local")


def _run(
    engine: str,
    request: pytest.FixtureRequest,
    xtype: str,
    steps: list[tuple[list, list]],
    mode: bool = False,
    x: str = "x",
) -> None:
    """`steps` of (inserts, deletes) of t(g, x); the aggregates' argument is `x`; `mode`: MODE per group too (DuckDB
    breaks ties its own way: groups without ties)."""
    aggs = ORDERED.format(x=x)
    ddl = (
        f"CREATE TABLE t (g BIGINT, x {xtype});\n"
        f"CREATE VIEW v AS SELECT g, {aggs}{f', mode({x}) AS mo' if mode else ''} FROM t GROUP BY g;\n"
        f"CREATE VIEW w AS SELECT {aggs} FROM t;\n"
    )
    p = _pipeline(engine, request)
    try:
        p.sql(ddl)
        SqlOracle(ddl).run(
            p, [({"t": ins} if ins else {}, {"t": dels} if dels else {}) for ins, dels in steps]
        )
    finally:
        p.close()


D = Decimal
ISSUE = [
    (1, D("12345678901234.5678")),
    (1, D("12345678901234.5678")),
    (1, D("12345678901234.5690")),
    (2, D("99999999999999.9999")),
]


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_issue_21_median_of_decimal_18_4(engine, request):
    neg = [
        (3, D("-99999999999999.9999")),
        (3, D("-99999999999999.9999")),
        (3, D("-99999999999999.9998")),
        (3, D("-99999999999999.9997")),
        (3, None),
    ]
    steps = [
        (ISSUE, []),
        ([(1, D("12345678901234.5691"))], []),  # even count: the floored midpoint ...5684 (not ...5684.5)
        ([], [(1, D("12345678901234.5690"))]),  # delete a middle value
        (neg, []),  # negative: the midpoint -...9998.5 floors to -...9999
        ([(2, None)], [(2, D("99999999999999.9999"))]),  # a group of NULLs only: NULL median
        ([], [*neg, (2, None)]),  # groups emptied
    ]
    _run(engine, request, "DECIMAL(18,4)", steps, mode=True)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_median_of_decimal_38_10(engine, request):
    big = D("1234567890123456789012345678.0123456789")
    steps = [
        ([(1, big), (1, big), (1, -big), (2, D("9999999999999999999999999999.9999999999"))], []),
        ([(1, D("-0.0000000001"))], []),  # even: DuckDB's double midpoint of the two 128-bit middle values
        (
            [
                (2, D("9999999999999999999999999999.9999999999")),
                (3, D("0.0000000003")),
                (3, D("-0.0000000002")),
            ],
            [],
        ),  # equal middle values still go through double; a small negative midpoint truncates to zero
        ([], [(1, big)]),
        ([(3, D("-0.0000000002"))], [(2, D("9999999999999999999999999999.9999999999"))]),
    ]
    _run(engine, request, "DECIMAL(38,10)", steps)


@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.parametrize(
    "xtype", ["DECIMAL(4,1)", "DECIMAL(9,2)", "DECIMAL(18,0)", "DECIMAL(20,2)", "DECIMAL(38,0)"]
)
def test_median_of_decimals_random_against_duckdb(engine, xtype, request):
    p, s = (int(v) for v in xtype[8:-1].split(","))
    rng = random.Random(p * 100 + s)
    top = 10**p - 1
    rows: list[tuple[int, Decimal]] = []
    steps = []
    for _ in range(3):
        ins = []
        for _ in range(12):
            k = rng.choice([top, 10 ** rng.randint(1, p) - 1, 7])
            ins.append((rng.randint(0, 4), D(rng.randint(-k, k)).scaleb(-s)))
        dels = rng.sample(rows, min(len(rows), 4))
        for r in dels:
            rows.remove(r)
        rows += ins
        steps.append((ins, dels))
    _run(engine, request, xtype, steps)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_median_of_date_and_timestamp(engine, request):
    d = dt.date
    _run(
        engine,
        request,
        "DATE",
        [
            (
                [
                    (1, d(2020, 1, 1)),
                    (1, d(2020, 1, 2)),
                    (2, d(1969, 12, 31)),
                    (2, d(1970, 1, 1)),
                    (3, d(9999, 12, 31)),
                ],
                [],
            ),
            ([(1, d(2020, 1, 4)), (3, d(1, 1, 1)), (2, None)], [(2, d(1969, 12, 31))]),
        ],
    )
    # TIMESTAMP values: date_trunc of a DATE is a TIMESTAMP (month starts: midpoints of half a day)
    _run(
        engine,
        request,
        "DATE",
        [
            (
                [
                    (1, d(2020, 1, 9)),
                    (1, d(2020, 2, 9)),
                    (2, d(1969, 12, 31)),
                    (2, d(1970, 1, 1)),
                    (2, d(2400, 3, 1)),
                    (3, None),
                ],
                [],
            ),
            ([(2, d(1, 1, 1))], [(1, d(2020, 2, 9))]),
        ],
        x="date_trunc('month', x)",
    )


T = dt.datetime
CORE_CASES = [  # (type, rows of (g, x)): the issue's rows, wide decimals, dates, timestamps
    (
        "decimal(18,4)",
        [*ISSUE, (1, D("12345678901234.5691")), (3, None), (4, D("-0.0003")), (4, D("-0.0002"))],
    ),
    (
        "decimal(38,10)",
        [
            (1, D("1234567890123456789012345678.0123456789")),
            (1, D("-0.0000000001")),
            (2, D("9999999999999999999999999999.9999999999")),
            (3, D("0.0000000003")),
            (3, D("-0.0000000002")),
            (3, None),
        ],
    ),
    # pairs whose midpoint differs from the correctly rounded one: DuckDB's double of a 128-bit integer
    # rounds twice (double(low word) + double(high word) * 2^64)
    (
        "decimal(38,0)",
        [(1, D("6260863844238914477750650357379328286")), (1, D("6920772445375679360297347465833749634"))],
    ),
    ("decimal(20,2)", [(1, D("-293207414898726887.88")), (1, D("849898178653002712.07"))]),
    ("date", [(1, dt.date(2020, 1, 1)), (1, dt.date(2020, 1, 2)), (0, None), (0, dt.date(2020, 1, 2))]),
    (
        "timestamp",
        [
            (1, T(2020, 1, 1)),
            (1, T(2020, 1, 1, 0, 0, 0, 3)),
            (2, T(1969, 12, 31, 23, 59, 59, 999999)),
            (2, T(1970, 1, 1)),
            (3, T(9999, 12, 31, 23, 59, 59, 999999)),
            (3, T(9999, 12, 31, 23, 59, 59, 999994)),
            (4, None),
        ],
    ),
]


@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.parametrize("xtype, rows", CORE_CASES, ids=[c[0] for c in CORE_CASES])
def test_core_median_incremental_and_from_scratch(engine, xtype, rows, request):
    """The core's incremental `aggregate` (rows inserted, then the first deleted) and its from-scratch
    `stream_aggregate` of the whole snapshot, against DuckDB."""
    eng = request.getfixturevalue("spark_engine") if engine == "spark" else "local"
    aggs = {"md": ("median", "x"), "lo": ("min", "x"), "hi": ("max", "x")}
    c = dbspark.Circuit()
    s = c.input("t", {"g": "int64", "x": xtype}, kind="bag")
    s.aggregate(by="g", **aggs).output("inc")
    s.integrate().stream_aggregate(by="g", **aggs).output("full")
    r = c.run(eng)
    con = duckdb.connect()
    for step, (ins, dels) in enumerate([(rows, []), ([], rows[:1])]):
        if ins:
            r.push("t", ins, [1] * len(ins))
        if dels:
            r.push("t", dels, [-1] * len(dels))
        out = r.step()
        now = rows[len(dels) if step else 0 :]
        con.register(
            "t", pl.DataFrame(now, schema={"g": pl.Int64, "x": s.schema["x"]}, orient="row").to_arrow()
        )
        want = con.execute("SELECT g, median(x) AS md, min(x) AS lo, max(x) AS hi FROM t GROUP BY g").pl()
        for what, got in (("incremental", r.view("inc")), ("from scratch", out["full"])):
            msg = compare_frames(view_frame(got), want, f"{xtype} {what} after step {step}")
            assert msg is None, msg
