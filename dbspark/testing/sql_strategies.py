"""Hypothesis strategies for the SQL oracle suite (`tests/test_sql_oracle.py`): random schemas, queries
as SQL text (DuckDB dialect, read alike by dbspark and DuckDB) and change streams with deletes.

* `schemas()`: 2-3 tables `t0, t1, t2`, each with a BIGINT join key `k` and a few columns drawn from a
  shared pool (a name has one type in every table, so USING / NATURAL joins and set operations find
  common columns): BIGINT, DOUBLE (dyadic values: sums are exact), DECIMAL(p,s), VARCHAR (a few values,
  '%' and '_' among them), DATE, BOOLEAN, TIMESTAMP (microseconds, before 1970 too); every column may
  hold NULL.
* `QueryGen`: typed scalar expressions and predicates (CASE, CAST, COALESCE, arithmetic, comparison,
  LIKE, string functions, DATE / INTERVAL / EXTRACT, TIMESTAMP +/- INTERVAL, date_trunc, epoch_ms,
  strftime / strptime, string literals against other types) and one query builder per family of the coverage
  list (`FAMILIES`); each query is a `View` with the text dbspark gets and the text DuckDB runs (they
  differ only for ORDER BY ... LIMIT, where DuckDB's order is made total as the front end's is: ties
  broken by all output columns ascending, NULLS LAST).
* `change_streams(schema)`: steps of inserts and deletes per table; deletes are of rows present
  (duplicates among them), inserts repeat present rows often, and some steps are empty.
* `cases(family)`: a `Case` (schema, 1-3 views of the family, change stream). The `ordered` family has a
  schema of its own (`WIDE`): DECIMAL(18,4), DECIMAL(38,10), DATE and TIMESTAMP columns with values up to
  the types' bounds, under MEDIAN / MIN / MAX / MODE.

Values come from small domains so that joins match, groups collide and duplicates are frequent.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

from hypothesis import strategies as st

from dbspark.ir.functions import TRUNC_PARTS as TRUNC_PARTS_SUPPORTED

KINDS = ("int", "float", "dec", "str", "date", "bool", "ts", "tz")
NUMERIC = ("int", "float", "dec")
INT_VALUES = (-2, -1, 0, 1, 2, 3, 5)
KEY_VALUES = (0, 1, 2, 3)
BIG_VALUES = (1, 3, 2**62, -(2**62), 2**63 - 1)  # the overflow family's column `a`
FLOAT_VALUES = (-1.5, -0.25, 0.0, 0.5, 1.0, 2.75, 3.0)
DEC_UNITS = (-150, -1, 0, 1, 25, 100, 999)  # times 10**-scale
STR_VALUES = ("", "a", "b", "ab", "A", "a%", "_b", "%", "abc", "b_a")
# the `ordered` family's columns: values near the bounds of wide DECIMALs (through DOUBLE, MEDIAN lost
# their digits) and of DATE (issue 21)
WIDE_UNITS = {
    "d18": (10**18 - 1, -(10**18 - 1), 123456789012345678, 123456789012345690, 123456789012345691, -1, 5),
    "d38": (10**38 - 1, -(10**38 - 1), 12345678901234567890123456789012345678, 10**37 + 1, -3, 1),
}
WIDE_SCALES = {"d18": 4, "d38": 10}
WIDE_DATES = (
    dt.date(1, 1, 1),
    dt.date(1970, 1, 1),
    dt.date(2020, 2, 29),
    dt.date(2020, 3, 1),
    dt.date(9999, 12, 31),
)
# TIMESTAMP: microseconds, midnights, before 1970 (negative epochs), a leap day, the end of a month
TS_VALUES = (
    dt.datetime(2020, 1, 31, 23, 59, 59, 999999),
    dt.datetime(2020, 2, 29, 0, 0),
    dt.datetime(2020, 2, 29, 12, 30, 15, 250000),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999500),
    dt.datetime(2022, 6, 15, 10, 0),
    dt.datetime(2023, 3, 1, 7, 5, 3, 1),
)
# TIMESTAMP WITH TIME ZONE (instants, in UTC: the session's zone); offsets come in through literals
TZ_VALUES = tuple(v.replace(tzinfo=dt.UTC) for v in TS_VALUES[:3]) + (
    dt.datetime(2020, 2, 28, 22, 0, tzinfo=dt.UTC),
    dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC),
)
TZ_LITS = (
    "2020-02-29 00:00:00+02",
    "2020-01-31 23:59:59.999999+00",
    "2020-02-29 12:30:15.25-05:30",
    "1969-12-31 20:00:00-04",
)
# the `ordered` family's TIMESTAMP column: the bounds of the microsecond range DuckDB and Polars share
WIDE_TIMESTAMPS = (
    dt.datetime(1, 1, 1),
    dt.datetime(1, 1, 1, 0, 0, 0, 1),
    dt.datetime(1970, 1, 1),
    dt.datetime(2020, 2, 29, 13, 14, 15, 161718),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999998),
)
DATE_VALUES = (
    dt.date(2020, 1, 31),
    dt.date(2020, 2, 29),
    dt.date(2021, 12, 31),
    dt.date(2022, 6, 15),
    dt.date(2023, 3, 1),
)
LIKE_PATTERNS = ("'a%'", "'%b'", "'_'", "'%a%'", "'a_'", "'%!%%' ESCAPE '!'", "'!_%' ESCAPE '!'", "'%'", "''")
STR_LITS = ("''", "'a'", "'b'", "'ab'", "'%'", "'_b'")


@dataclass(frozen=True)
class Column:
    name: str
    kind: str
    sql: str  # its SQL type


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]

    def ddl(self) -> str:
        return f"CREATE TABLE {self.name} ({', '.join(f'{c.name} {c.sql}' for c in self.columns)});"


@dataclass(frozen=True)
class Schema:
    tables: tuple[Table, ...]
    dec: tuple[int, int] = (9, 2)

    def ddl(self) -> str:
        return "\n".join(t.ddl() for t in self.tables)

    def table(self, name: str) -> Table:
        return next(t for t in self.tables if t.name == name)


@dataclass(frozen=True)
class View:
    name: str
    sql: str  # what dbspark gets
    oracle: str = ""  # what DuckDB runs (default: the same text)
    mode: str = ""  # MODE views: DuckDB query of the allowed (key..., value) pairs; see the tests

    @property
    def duck(self) -> str:
        return self.oracle or self.sql


@dataclass(frozen=True)
class Step:
    deletes: dict[str, list[tuple]]
    inserts: dict[str, list[tuple]]


@dataclass(frozen=True)
class Case:
    schema: Schema
    views: tuple[View, ...]
    steps: tuple[Step, ...]

    def ddl(self, oracle: bool = False) -> str:
        views = [
            f"CREATE VIEW {v.name} AS {v.duck if oracle else v.sql};"
            for v in self.views
            if not (oracle and v.mode)
        ]
        return "\n".join([self.schema.ddl(), *views])


# ---- schemas and rows ------------------------------------------------------------------------------------
def _sql_type(kind: str, dec: tuple[int, int]) -> str:
    return {
        "int": "BIGINT",
        "float": "DOUBLE",
        "dec": f"DECIMAL({dec[0]},{dec[1]})",
        "str": "VARCHAR",
        "date": "DATE",
        "bool": "BOOLEAN",
        "ts": "TIMESTAMP",
        "tz": "TIMESTAMPTZ",
    }[kind]


@st.composite
def schemas(draw: st.DrawFn, min_tables: int = 2, max_tables: int = 3) -> Schema:
    dec = draw(st.sampled_from([(5, 2), (9, 3), (12, 0), (15, 2), (18, 4)]))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=3, max_size=5))
    pool = [Column("k", "int", "BIGINT")] + [
        Column(f"c{i}", kd, _sql_type(kd, dec)) for i, kd in enumerate(kinds)
    ]
    n = draw(st.integers(min_tables, max_tables))
    tables = []
    for i in range(n):
        chosen = draw(st.sets(st.integers(1, len(pool) - 1), min_size=1, max_size=min(4, len(pool) - 1)))
        tables.append(Table(f"t{i}", tuple([pool[0]] + [pool[j] for j in sorted(chosen)])))
    return Schema(tuple(tables), dec)


def values(col: Column, dec: tuple[int, int]) -> tuple[Any, ...]:
    if col.name == "k":
        return KEY_VALUES
    if col.name == "a" and col.kind == "int":
        return BIG_VALUES
    if col.name in ("src", "dst"):
        return (0, 1, 2, 3, 4)
    if col.name in WIDE_UNITS:  # names of the WIDE schema only
        exact = Context(prec=40)  # the default context keeps 28 digits
        return tuple(Decimal(u).scaleb(-WIDE_SCALES[col.name], exact) for u in WIDE_UNITS[col.name])
    if col.name == "dd":
        return WIDE_DATES
    if col.name == "tt":
        return WIDE_TIMESTAMPS
    if col.kind == "dec":
        p, s = dec
        return tuple(Decimal(u).scaleb(-s) for u in DEC_UNITS if abs(u) < 10**p)
    return {
        "int": INT_VALUES,
        "float": FLOAT_VALUES,
        "str": STR_VALUES,
        "date": DATE_VALUES,
        "bool": (True, False),
        "ts": TS_VALUES,
        "tz": TZ_VALUES,
    }[col.kind]


def rows(
    table: Table, dec: tuple[int, int], min_size: int = 0, max_size: int = 5
) -> st.SearchStrategy[list[tuple]]:
    cells = [
        st.one_of(st.none(), st.sampled_from(values(c, dec)))
        if c.name not in ("src", "dst")
        else st.sampled_from(values(c, dec))
        for c in table.columns
    ]
    return st.lists(st.tuples(*cells), min_size=min_size, max_size=max_size)


@st.composite
def change_streams(draw: st.DrawFn, schema: Schema, max_steps: int = 4) -> tuple[Step, ...]:
    """Steps of deletes (of present rows, duplicates included) and inserts (often repeating present rows)."""
    present: dict[str, Counter] = {t.name: Counter() for t in schema.tables}
    steps = []
    for i in range(draw(st.integers(1, max_steps))):
        ins: dict[str, list[tuple]] = {}
        dels: dict[str, list[tuple]] = {}
        if i == 0 or draw(st.integers(0, 5)) > 0:  # else an empty step
            for t in schema.tables:
                bag = sorted(present[t.name].elements(), key=repr)
                if bag and draw(st.booleans()) is True:
                    idx = draw(st.lists(st.integers(0, len(bag) - 1), unique=True, max_size=3))
                    dels[t.name] = [bag[i] for i in idx]
                new = draw(rows(t, schema.dec, min_size=2 if i == 0 else 0))
                if bag and draw(st.booleans()) is True:
                    new += [bag[i] for i in draw(st.lists(st.integers(0, len(bag) - 1), max_size=2))]
                if new:
                    ins[t.name] = new
            for name, rs in dels.items():
                present[name].subtract(rs)
            for name, rs in ins.items():
                present[name].update(rs)
        steps.append(Step(dels, ins))
    return tuple(steps)


# ---- scalar expressions ------------------------------------------------------------------------------
Ref = tuple[str, str]  # (SQL text of a column reference, kind)


def lit(draw: st.DrawFn, kind: str) -> str:
    if kind == "int":
        return str(draw(st.sampled_from((0, 1, 2, 3, -1))))
    if kind == "float":
        return f"CAST({draw(st.sampled_from((0.5, -1.5, 2.0, 0.25)))} AS DOUBLE)"
    if kind == "dec":
        return draw(st.sampled_from(("1.25", "0.5", "-3", "2.00", "0.125")))
    if kind == "str":
        return draw(st.sampled_from(STR_LITS))
    if kind == "date":
        return f"DATE '{draw(st.sampled_from(DATE_VALUES)).isoformat()}'"
    if kind == "ts":
        return f"TIMESTAMP '{draw(st.sampled_from(TS_VALUES)).isoformat(sep=' ')}'"
    if kind == "tz":
        return f"TIMESTAMPTZ '{draw(st.sampled_from(TZ_LITS))}'"
    return draw(st.sampled_from(("TRUE", "FALSE")))


# string literals in the text forms of each kind: compared with a column of that kind, DuckDB casts
# them to its type (issue 21: `d_date BETWEEN '2002-02-01' AND '2002-03-01'`, `a = '5'`)
TEXT_LITS = {
    "int": ("'0'", "'2'", "' 3 '", "'-1'", "'+1'", "'1.6'", "'2.5'"),
    "dec": ("'1.25'", "'0.5'", "'-3'", "'2'", "' 0.125'", "'.5'"),
    "float": ("'0.5'", "'-1.5'", "'2'", "'2.5e-1'"),
    "date": tuple(f"'{v.isoformat()}'" for v in DATE_VALUES) + ("'2020-2-29'", "'2022-06-15 10:00:00'"),
    "bool": ("'true'", "'f'", "'yes'", "'N'", "'1'"),
    "ts": tuple(f"'{v.isoformat(sep=' ')}'" for v in TS_VALUES[:3])
    + ("'2020-2-29'", "'2022-06-15 10:00'", "'2020-02-29T12:30:15.25'", "'1969-12-31 23:59:59.9995'"),
    "tz": tuple(f"'{v}'" for v in TZ_LITS)
    + ("'2020-2-29'", "'2020-02-28T22:00:00Z'", "'2020-02-29 01:00:00 UTC'"),
}
TS_UNITS = ("MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "YEAR")
TRUNC_PARTS = tuple(sorted(TRUNC_PARTS_SUPPORTED))  # every part date_trunc takes
EXTRACT_PARTS = (
    "year",
    "month",
    "day",
    "hour",
    "minute",
    "second",
    "millisecond",
    "microsecond",
    "dow",
    "isodow",
    "doy",
    "week",
    "quarter",
)
STRFTIME_FORMATS = (
    "'%Y-%m-%d %H:%M:%S.%f'",
    "'%d/%m/%y %I:%M %p'",
    "'%c|%j|%g|%a %b %-d'",
    "'%A, %B %-d %Y %-H:%-M:%-S'",
)


class QueryGen:
    """Typed SQL expressions over column references, and queries of each family."""

    def __init__(self, draw: st.DrawFn, schema: Schema) -> None:
        self.draw = draw
        self.schema = schema

    # ---- expressions ----
    def expr(self, kind: str, refs: list[Ref], depth: int = 2) -> str:
        d = self.draw
        cols = [r for r, k in refs if k == kind]
        if depth <= 0 or d(st.integers(0, 2)) == 0:
            return d(st.sampled_from(cols)) if cols and d(st.integers(0, 3)) != 0 else lit(d, kind)
        sub = lambda k=kind: self.expr(k, refs, depth - 1)  # noqa: E731
        forms = {
            "int": [
                lambda: f"({sub()} + {sub()})",
                lambda: f"({sub()} - {sub()})",
                lambda: f"({sub()} * {lit(d, 'int')})",
                lambda: f"abs({sub()})",
                lambda: f"({sub()} % 3)",
                lambda: f"(- {sub()})",
                lambda: f"length({sub('str')})",
                lambda: f"CAST({sub('dec')} AS BIGINT)",
                lambda: f"CAST({sub('float')} AS BIGINT)",
                lambda: f"({sub()} // 2)",
                lambda: f"extract({d(st.sampled_from(('year', 'month', 'day')))} FROM {sub('date')})",
                lambda: f"extract({d(st.sampled_from(EXTRACT_PARTS))} FROM {sub('ts')})",
                lambda: f"{d(st.sampled_from(('epoch_ms', 'epoch_us')))}({sub('ts')})",
                lambda: f"extract({d(st.sampled_from(EXTRACT_PARTS))} FROM {sub('tz')})",
                lambda: f"epoch_us({sub('tz')})",
            ],
            "float": [
                lambda: f"({sub()} + {sub()})",
                lambda: f"({sub()} * {lit(d, 'float')})",
                lambda: f"CAST({sub('int')} AS DOUBLE)",
                lambda: f"({sub('int')} / 4)",
                lambda: f"abs({sub()})",
            ],
            "dec": [
                lambda: f"({sub()} + {sub()})",
                lambda: f"({sub()} - {lit(d, 'dec')})",
                lambda: f"({sub()} * 2)",
                lambda: f"CAST({sub('int')} AS DECIMAL(10,2))",
                lambda: f"(- {sub()})",
                lambda: f"round({sub()}, 1)",
            ],
            "str": [
                lambda: f"upper({sub()})",
                lambda: f"lower({sub()})",
                lambda: f"substring({sub()}, 1, 2)",
                lambda: f"({sub()} || {lit(d, 'str')})",
                lambda: f"concat({sub()}, {sub()})",
                lambda: f"replace({sub()}, 'a', 'x')",
                lambda: f"left({sub()}, 1)",
                lambda: f"reverse({sub()})",
                lambda: f"CAST({sub('int')} AS VARCHAR)",
                lambda: f"CAST({sub('ts')} AS VARCHAR)",
                lambda: f"strftime({sub('ts')}, {d(st.sampled_from(STRFTIME_FORMATS))})",
                lambda: f"CAST({sub('tz')} AS VARCHAR)",
                lambda: f"strftime({sub('tz')}, '%Y-%m-%d %H:%M:%S.%f %z %Z')",
            ],
            "ts": [
                lambda: (
                    f"({sub()} {d(st.sampled_from('+-'))} INTERVAL {d(st.integers(0, 40))} {d(st.sampled_from(TS_UNITS))})"
                ),
                lambda: f"date_trunc('{d(st.sampled_from(TRUNC_PARTS))}', {sub()})",
                lambda: f"CAST({sub('date')} AS TIMESTAMP)",
                lambda: f"strptime(strftime({sub()}, '%Y-%m-%d %H:%M:%S.%f'), '%Y-%m-%d %H:%M:%S.%f')",
                lambda: f"CAST({sub('tz')} AS TIMESTAMP)",
            ],
            "tz": [
                lambda: (
                    f"({sub()} {d(st.sampled_from('+-'))} INTERVAL {d(st.integers(0, 40))} {d(st.sampled_from(TS_UNITS))})"
                ),
                lambda: f"date_trunc('{d(st.sampled_from(TRUNC_PARTS))}', {sub()})",
                lambda: f"CAST({sub('ts')} AS TIMESTAMPTZ)",
                lambda: f"CAST({sub('date')} AS TIMESTAMPTZ)",
                lambda: f"greatest({sub()}, {sub('ts')})",
            ],
            "date": [
                lambda: f"CAST({sub()} + INTERVAL {d(st.integers(1, 40))} DAY AS DATE)",
                lambda: f"CAST({sub()} - INTERVAL {d(st.integers(1, 14))} MONTH AS DATE)",
                lambda: f"CAST({sub()} + INTERVAL 1 YEAR AS DATE)",
                lambda: f"({sub()} + {d(st.integers(-3, 30))})",
                lambda: f"CAST({sub('tz')} AS DATE)",
            ],
            "bool": [lambda: self.pred(refs, depth - 1)],
        }[kind] + [
            lambda: f"CASE WHEN {self.pred(refs, depth - 1)} THEN {sub()} ELSE {sub()} END",
            lambda: f"COALESCE({sub()}, {lit(d, kind)})",
        ]
        return d(st.sampled_from(forms))()

    def pred(self, refs: list[Ref], depth: int = 2) -> str:
        d = self.draw
        kinds = sorted({k for _, k in refs}) or ["int"]
        kind = d(st.sampled_from(kinds))
        sub = lambda k=kind: self.expr(k, refs, max(depth - 1, 0))  # noqa: E731
        other = d(st.sampled_from(NUMERIC)) if kind in NUMERIC else kind
        columns = [r for r, _ in refs]
        nullable = lambda: d(st.sampled_from(columns)) if columns else sub()  # noqa: E731
        of_kind = [r for r, k in refs if k == kind]
        between = lambda: d(st.sampled_from(of_kind)) if of_kind else sub()  # noqa: E731
        forms = [
            lambda: f"({sub()} {d(st.sampled_from(('=', '<>', '<', '<=', '>', '>=')))} {sub(other)})",
            lambda: f"({sub()} {d(st.sampled_from(('=', '<', '>=')))} {lit(d, other)})",
            # of a column, not of any expression: DuckDB folds `e IS NULL` to a constant when its
            # storage statistics show no NULL, without evaluating e, so an error e raises (an overflow)
            # would depend on those statistics (`(1.25 + d) IS NULL` over d = 99999999999999.9999
            # raises or not by whether the column holds a NULL)
            lambda: f"({nullable()} IS {d(st.sampled_from(('', 'NOT ')))}NULL)",
            # of a column too: DuckDB folds `e BETWEEN a AND b` to false when a > b without evaluating
            # e, so an error e raises would depend on the bounds' order (`(d - 1.25) BETWEEN 1.25 AND
            # 0.5` over d = -9999999999999999999999999999.9999999999 at DECIMAL(38,10))
            lambda: f"({between()} BETWEEN {lit(d, kind)} AND {lit(d, kind)})",
            lambda: f"({sub()} {d(st.sampled_from(('', 'NOT ')))}IN ({lit(d, kind)}, {lit(d, kind)}))",
            lambda: f"({sub()} IS DISTINCT FROM {sub()})",
        ]
        cols = [r for r, k in refs if k == kind]
        if kind in TEXT_LITS and cols:  # a string literal against a column of another type
            c = lambda: d(st.sampled_from(cols))  # noqa: E731
            t = lambda: d(st.sampled_from(TEXT_LITS[kind]))  # noqa: E731
            forms += [
                lambda: f"({c()} {d(st.sampled_from(('=', '<>', '<', '>=')))} {t()})",
                lambda: f"({t()} < {c()})",
                lambda: f"({c()} BETWEEN {t()} AND {t()})",
                lambda: f"({c()} {d(st.sampled_from(('', 'NOT ')))}IN ({t()}, {t()}))",
                lambda: f"(CASE {c()} WHEN {t()} THEN TRUE ELSE {c()} IS NULL END)",
            ]
        if "str" in kinds:
            s = lambda: self.expr("str", refs, 0)  # noqa: E731
            forms += [
                lambda: (
                    f"({s()} {d(st.sampled_from(('LIKE', 'NOT LIKE', 'ILIKE')))} {d(st.sampled_from(LIKE_PATTERNS))})"
                ),
                lambda: f"starts_with({s()}, 'a')",
            ]
        if "bool" in kinds:
            forms.append(lambda: d(st.sampled_from([r for r, k in refs if k == "bool"])))
        if depth > 0:
            forms += [
                lambda: (
                    f"({self.pred(refs, depth - 1)} {d(st.sampled_from(('AND', 'OR')))} {self.pred(refs, depth - 1)})"
                ),
                lambda: f"NOT ({self.pred(refs, depth - 1)})",
            ]
        return d(st.sampled_from(forms))()

    # ---- helpers ----
    def table(self) -> Table:
        return self.draw(st.sampled_from(self.schema.tables))

    def two_tables(self) -> tuple[Table, Table]:
        a, b = self.draw(st.permutations(self.schema.tables))[:2]
        return a, b

    @staticmethod
    def refs(t: Table, alias: str | None = None, qualify: bool = False) -> list[Ref]:
        q = f"{alias or t.name}." if qualify or alias else ""
        return [(f"{q}{c.name}", c.kind) for c in t.columns]

    def items(
        self, refs: list[Ref], n_max: int = 3, kinds: tuple[str, ...] = KINDS, depth: tuple[int, int] = (0, 2)
    ) -> list[tuple[str, str]]:
        """SELECT items (text, kind), aliased o1, o2, ..."""
        out = []
        for i in range(self.draw(st.integers(1, n_max))):
            kind = self.draw(st.sampled_from(sorted({k for _, k in refs if k in kinds}) or ["int"]))
            out.append((f"{self.expr(kind, refs, self.draw(st.integers(*depth)))} AS o{i + 1}", kind))
        return out

    def where(self, refs: list[Ref]) -> str:
        return f" WHERE {self.pred(refs)}" if self.draw(st.booleans()) else ""

    # ---- families ----
    def select(self, deep: bool = False) -> str:
        t = self.table()
        refs = self.refs(t)
        if deep:  # the expressions family: deeper expressions in SELECT and WHERE
            items = ", ".join(i for i, _ in self.items(refs, 4, depth=(2, 3)))
            dates = [r for r, k in refs if k == "date"]
            if dates and self.draw(st.booleans()) is True:  # DATE +/- INTERVAL is a TIMESTAMP (DuckDB)
                n, unit = (
                    self.draw(st.integers(1, 13)),
                    self.draw(st.sampled_from(["DAY", "MONTH", "YEAR", "WEEK"])),
                )
                items += f", {self.draw(st.sampled_from(dates))} {self.draw(st.sampled_from('+-'))} INTERVAL {n} {unit} AS ts"
            where = f" WHERE {self.pred(refs, 3)}" if self.draw(st.booleans()) else ""
            return f"SELECT {items} FROM {t.name}{where}"
        distinct = "DISTINCT " if self.draw(st.integers(0, 2)) == 0 else ""
        if not distinct and self.draw(st.integers(0, 4)) == 0:
            return f"SELECT * FROM {t.name}{self.where(refs)}"
        items = ", ".join(i for i, _ in self.items(refs, depth=(0, 1)))
        return f"SELECT {distinct}{items} FROM {t.name}{self.where(refs)}"

    def aggregate_call(self, refs: list[Ref], exact: bool = False) -> str:
        d = self.draw
        funcs = ["count", "sum", "min", "max"] + (
            [] if exact else ["avg", "stddev", "variance", "median", "median", "stddev_pop", "var_pop"]
        )
        f = d(st.sampled_from(funcs + ["count_star", "count_distinct", "bits", "bools"]))
        if f == "count_star":
            return "count(*)"
        if f == "bits":  # semigroup aggregates, kept as counts per bit (frontends/sql/bit_aggregates.py)
            g = d(st.sampled_from(["bit_or", "bit_and", "bit_xor"]))
            return f"{g}({self.expr('int', refs, d(st.integers(0, 1)))})"
        if f == "bools":
            return f"{d(st.sampled_from(['bool_and', 'bool_or']))}({self.pred(refs, 1)})"
        ordered = ("int", "dec", "str", "date", "float", "ts", "tz")
        kinds: tuple[str, ...] = (
            NUMERIC
            if f in ("sum", "avg", "stddev", "variance", "stddev_pop", "var_pop")
            else ordered
            if f in ("min", "max", "median")
            else KINDS
        )
        if exact and f == "sum":
            kinds = ("int", "dec")
        kind = d(st.sampled_from(sorted({k for _, k in refs if k in kinds}) or ["int"]))
        arg = self.expr(kind, refs, d(st.integers(0, 1)))
        if f == "count_distinct":
            return f"count(DISTINCT {arg})"
        if f in ("sum", "min", "max") and d(st.integers(0, 4)) == 0:
            return f"{f}(DISTINCT {arg})"
        return f"{f}({arg})"

    def group_by(self, exact: bool = False, refs: list[Ref] | None = None, source: str = "") -> str:
        d = self.draw
        if refs is None:
            t = self.table()
            refs, source = self.refs(t), t.name
            if d(st.integers(0, 3)) == 0:
                return self.group_by_shadowed(refs, source, exact)
        kref = next(r for r in refs if r[0].split(".")[-1] == "k")
        shape = d(
            st.sampled_from(["k", "k", "none", "any"])
        )  # groups of several rows are what aggregates test
        keys = (
            [kref]
            if shape == "k"
            else []
            if shape == "none"
            else d(st.lists(st.sampled_from(refs), unique=True, max_size=2))
        )
        if keys and d(st.integers(0, 3)) == 0:  # a computed key (not a bare integer: that is a position)
            kind = keys[0][1]
            key = self.expr(kind, refs, 1)
            keys[0] = (key, kind) if not key.strip("()- ").isdigit() else keys[0]  # DuckDB: (- 0) too
        sel = [f"{k} AS g{i + 1}" for i, (k, _) in enumerate(keys)]
        sel += [f"{self.aggregate_call(refs, exact)} AS a{i + 1}" for i in range(d(st.integers(1, 3)))]
        group = f" GROUP BY {', '.join(k for k, _ in keys)}" if keys else ""
        having = ""
        if d(st.integers(0, 2)) == 0:
            kcol = kref[0]
            having = " HAVING " + d(
                st.sampled_from(
                    [
                        "count(*) > 1",
                        "count(*) <= 2",
                        f"min({kcol}) >= 1",
                        f"max({kcol}) < 3",
                        f"sum({kcol}) > 2",
                    ]
                )
            )
        return f"SELECT {', '.join(sel)} FROM {source}{self.where(refs)}{group}{having}"

    def group_by_shadowed(self, refs: list[Ref], source: str, exact: bool) -> str:
        """GROUP BY / HAVING names that are both a FROM column and a SELECT alias, or only an alias, or a
        repeated key (DuckDB binds a GROUP BY name to the column first, a HAVING name to a grouped column
        first, then to the alias)."""
        d = self.draw
        col, kind = d(st.sampled_from(refs))
        aggs = [f"{self.aggregate_call(refs, exact)} AS a{i + 1}" for i in range(d(st.integers(1, 2)))]
        form = d(st.sampled_from(["column", "alias", "aggregate"]))
        if form == "column":  # a key computed from col, aliased col: GROUP BY col groups by the column
            sel = [f"{self.expr(kind, [(col, kind)], 1)} AS {col}", *aggs]
            group = f"{col}, {col}" if d(st.booleans()) else col
            having = f" HAVING {col} <> {lit(d, kind)}" if d(st.booleans()) else ""
        elif form == "alias":  # GROUP BY the alias of a computed key, which HAVING may name too
            sel = [f"{self.expr(kind, refs, 1)} AS g1", *aggs]
            # (not `1, g1` nor `g1, 1`: DuckDB 1.5.5 then drops a HAVING on g1, a DuckDB bug; with a constant
            # key, `SELECT 1 AS g1, count(*) FROM t GROUP BY g1, 1 HAVING g1 <> 1` returns its row even
            # with the optimizer off)
            group = d(st.sampled_from(["g1", "g1, g1"]))
            having = f" HAVING g1 <> {lit(d, kind)}" if d(st.booleans()) else ""
        else:  # an aggregate aliased as a column: HAVING's name is the key if that column is grouped
            ints = [r for r, k in refs if k == "int"]
            name = d(st.sampled_from(ints))
            sel = ["k AS g1", f"count(*) AS {name}", *aggs]
            group = "k"
            having = f" HAVING {name} > 1"
        return f"SELECT {', '.join(sel)} FROM {source}{self.where(refs)} GROUP BY {group}{having}"

    def grouping(self) -> str:
        """GROUP BY ROLLUP / CUBE / GROUPING SETS (and a plain key beside them) over a table or an inner
        join, with GROUPING() / GROUPING_ID(), HAVING, and sometimes a window over the sets' rows."""
        d = self.draw
        if d(st.integers(0, 2)) == 0:
            a, b = self.two_tables()
            refs = self.refs(a, "x") + self.refs(b, "y")
            source = f"{a.name} AS x JOIN {b.name} AS y ON x.k = y.k"
        else:
            t = self.table()
            refs, source = self.refs(t), t.name
        keys = d(st.lists(st.sampled_from(refs), unique=True, min_size=1, max_size=3))
        if d(st.integers(0, 3)) == 0:  # a computed key
            key = self.expr(keys[0][1], refs, 1)
            keys[0] = (key, keys[0][1]) if not key.strip("()- ").isdigit() else keys[0]
        names = [k for k, _ in keys]
        form = d(st.sampled_from(["rollup", "cube", "sets", "mixed"]))
        if form == "rollup" or (form == "mixed" and len(names) < 2):
            group = f"ROLLUP ({', '.join(names)})"
        elif form == "cube":
            group = f"CUBE ({', '.join(names)})"
        elif form == "sets":
            sets = d(st.lists(st.lists(st.sampled_from(names), unique=True), min_size=1, max_size=4))
            group = "GROUPING SETS (" + ", ".join(f"({', '.join(x)})" for x in sets) + ")"
            names = [n for n in names if any(n in x for x in sets)] or names[:1]  # (the SELECT's keys)
            if not any(sets):
                group = f"GROUPING SETS (({names[0]}), ())"
        else:
            group = f"{names[0]}, ROLLUP ({', '.join(names[1:])})"
        sel = [f"{k} AS g{i + 1}" for i, k in enumerate(names)]
        sel += [f"{self.aggregate_call(refs)} AS a{i + 1}" for i in range(d(st.integers(1, 3)))]
        if d(st.booleans()):
            marks = d(st.lists(st.sampled_from(names), unique=True, min_size=1))
            sel.append(f"{d(st.sampled_from(['GROUPING', 'GROUPING_ID']))}({', '.join(marks)}) AS m")
        if d(st.integers(0, 2)) == 0:  # a window over every set's rows (ties give equal ranks)
            win = d(st.sampled_from(["RANK()", "DENSE_RANK()", "count(*)", "sum(count(*))", "max(min(k))"]))
            part = f"PARTITION BY GROUPING({names[0]}) " if d(st.booleans()) else ""
            order = "ORDER BY count(*) DESC" if d(st.booleans()) or "RANK" in win else ""
            sel.append(f"{win} OVER ({part}{order}) AS w".replace("min(k)", f"min({refs[0][0]})"))
        having = ""
        if d(st.integers(0, 2)) == 0:
            kcol = next(r for r, _ in refs if r.split(".")[-1] == "k")
            having = " HAVING " + d(st.sampled_from(["count(*) > 1", f"max({kcol}) < 3", f"sum({kcol}) > 2"]))
        return f"SELECT {', '.join(sel)} FROM {source}{self.where(refs)} GROUP BY {group}{having}"

    def windows(self) -> str:
        """Window functions whose values do not depend on how ties are ordered: ranks, and aggregates over
        whole partitions or RANGE frames (peers together), over a table or a grouped query."""
        d = self.draw
        t = self.table()
        refs = self.refs(t)
        ints = [r for r, k in refs if k in ("int", "dec")] or ["k"]
        part = d(st.lists(st.sampled_from([r for r, _ in refs]), unique=True, max_size=2))
        total = d(st.booleans())  # ORDER BY every column: ties are equal rows, any order of them alike
        cols = [r for r, _ in refs]
        order = (
            d(st.permutations(cols))
            if total
            else d(st.lists(st.sampled_from(cols), unique=True, min_size=d(st.integers(0, 1)), max_size=2))
        )
        over = (f"PARTITION BY {', '.join(part)} " if part else "") + (
            "ORDER BY " + ", ".join(f"{o}{d(st.sampled_from(['', ' DESC', ' NULLS FIRST']))}" for o in order)
            if order
            else ""
        )
        arg = d(st.sampled_from(ints))
        funcs = ["count(*)", f"sum({arg})", f"min({arg})", f"max({arg})", f"count({arg})"]
        if order:
            funcs += ["RANK()", "DENSE_RANK()", "PERCENT_RANK()", "CUME_DIST()"]
        kinds = dict(refs)
        if not total and len(order) == 1 and kinds[order[0]] in ("int", "dec", "date", "ts"):
            o = order[0]  # a RANGE frame by offsets of the one ORDER BY value (peers alike)
            lo, hi = d(st.integers(0, 2)), d(st.integers(0, 2))
            if kinds[o] in ("date", "ts"):
                unit = d(st.sampled_from(["DAY", "MONTH", "HOUR"] if kinds[o] == "ts" else ["DAY", "MONTH"]))
                a, b = f"INTERVAL {lo} {unit} PRECEDING", f"INTERVAL {hi} {unit} FOLLOWING"
            else:
                a, b = f"{lo} PRECEDING", f"{hi} FOLLOWING"
            frame = d(st.sampled_from([f"RANGE BETWEEN {a} AND {b}", f"RANGE BETWEEN {a} AND CURRENT ROW"]))
            f = d(st.sampled_from([f"sum({arg})", f"min({arg})", f"max({arg})", "count(*)", f"avg({arg})"]))
            funcs += [f"{f} OVER ({over} {frame}) + 0"] * 8  # (drawn about half the time)
        if total:
            n = d(st.integers(1, 2))
            frame = d(
                st.sampled_from(
                    [
                        f"ROWS BETWEEN {n} PRECEDING AND CURRENT ROW",
                        f"ROWS BETWEEN CURRENT ROW AND {n} FOLLOWING",
                        f"ROWS BETWEEN {n} PRECEDING AND {n} FOLLOWING",
                        "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING",
                    ]
                )
            )
            x = d(st.sampled_from(cols))
            funcs = [
                "ROW_NUMBER()",
                f"LAG({x})",
                f"LEAD({x}, {n})",
                f"FIRST_VALUE({x})",
                f"NTILE({n + 1})",
                f"sum({arg}) OVER ({over} {frame}) + 0",
                f"min({arg}) OVER ({over} {frame}) + 0",
                f"count(*) OVER ({over} {frame}) + 0",
            ]
        sel = [f"{r} AS c{i + 1}" for i, (r, _) in enumerate(refs[:2])]
        calls = [d(st.sampled_from(funcs)) for _ in range(d(st.integers(1, 2)))]
        sel += [f"{c if ' OVER ' in c else f'{c} OVER ({over})'} AS w{i + 1}" for i, c in enumerate(calls)]
        valued = calls[0].startswith(("LAG", "LEAD", "FIRST_VALUE"))  # (of any type)
        test = "IS NOT NULL" if valued else f"> {d(st.integers(0, 2))}"
        qualify = f" QUALIFY w1 {test}" if d(st.integers(0, 3)) == 0 else ""
        return f"SELECT {', '.join(sel)} FROM {t.name}{self.where(refs)}{qualify}"

    def asof(self) -> str:
        """`l ASOF [LEFT] JOIN r ON l.k = r.k AND l.c >= r.c` (or >, <=, <) over an int, date or timestamp
        column both tables have; the right side's matched value (tied right rows share it), under a
        filter or a count per key."""
        d = self.draw
        a, b = self.two_tables()
        shared = [
            c
            for c in a.columns
            if c in b.columns and c.kind in ("int", "dec", "date", "ts") and c.name != "k"
        ]
        if not shared:
            return self.join()
        c = d(st.sampled_from(shared)).name
        op = d(st.sampled_from([">=", ">", "<=", "<"]))
        how = d(st.sampled_from(["", "LEFT "]))
        src = f"{a.name} AS l ASOF {how}JOIN {b.name} AS r ON l.k = r.k AND l.{c} {op} r.{c}"
        refs = self.refs(a, "l")
        where = f" WHERE {self.pred(refs, 1)}" if d(st.integers(0, 2)) == 0 else ""
        if d(st.integers(0, 3)) == 0:
            return f"SELECT l.k AS g, count(r.{c}) AS n, max(r.{c}) AS m FROM {src}{where} GROUP BY l.k"
        items = ", ".join(i for i, _ in self.items(refs, 2, depth=(0, 1)))
        return f"SELECT {items}, r.{c} AS matched FROM {src}{where}"

    def cyclic(self) -> str:
        """Inner joins whose equalities form a cycle (a triangle, a 4-cycle, a triangle with a chord on a
        nullable column), written with ON or in WHERE, under filters, projections, DISTINCT or GROUP BY:
        the leapfrog join's plans (`frontends/sql/multiway.py`) against DuckDB's."""
        d = self.draw
        names = [t.name for t in self.schema.tables]
        n = d(st.sampled_from([3, 3, 4]))
        tabs = [d(st.sampled_from(names)) for _ in range(n)]
        alias = [f"x{i}" for i in range(n)]
        eqs = [f"{alias[i]}.dst = {alias[(i + 1) % n]}.src" for i in range(n)]
        if d(st.integers(0, 2)) == 0:  # a chord on a nullable column (NULL equals nothing)
            eqs.append(f"{alias[0]}.n = {alias[2]}.n")
        refs: list[Ref] = [
            r for t, a in zip(tabs, alias, strict=True) for r in self.refs(self.schema.table(t), a)
        ]
        extra = [self.pred(refs, 1)] if d(st.integers(0, 2)) == 0 else []
        if d(st.booleans()):
            src = ", ".join(f"{t} AS {a}" for t, a in zip(tabs, alias, strict=True))
            where = " WHERE " + " AND ".join(eqs + extra)
        else:
            src = f"{tabs[0]} AS {alias[0]}"
            for i in range(1, n):
                on = [
                    e
                    for e in eqs
                    if f"{alias[i]}." in e and all(f"{alias[j]}." not in e for j in range(i + 1, n))
                ]
                src += f" JOIN {tabs[i]} AS {alias[i]} ON {' AND '.join(on)}"
            where = f" WHERE {' AND '.join(extra)}" if extra else ""
        shape = d(st.sampled_from(["items", "distinct", "count", "group"]))
        if shape == "count":
            return f"SELECT count(*) AS c, sum({alias[1]}.n) AS s FROM {src}{where}"
        if shape == "group":
            return f"SELECT {alias[0]}.src AS g, count(*) AS c, max({alias[n - 1]}.n) AS m FROM {src}{where} GROUP BY {alias[0]}.src"
        items = ", ".join(i for i, _ in self.items(refs, 3, depth=(0, 1)))
        return f"SELECT {'DISTINCT ' if shape == 'distinct' else ''}{items} FROM {src}{where}"

    def join(self) -> str:
        d = self.draw
        a, b = self.two_tables()
        shared = [c.name for c in a.columns if c in b.columns]
        kind = d(
            st.sampled_from(
                ["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "CROSS JOIN", "USING", "NATURAL", "COMMA"]
            )
        )
        ra, rb = self.refs(a, "x"), self.refs(b, "y")
        refs = ra + rb
        if kind == "NATURAL":
            how = d(st.sampled_from(["", "LEFT ", "FULL "]))
            src = f"{a.name} AS x NATURAL {how}JOIN {b.name} AS y"
            refs = [(c.name, c.kind) for c in a.columns if c.name in shared] + [
                r for r in refs if r[0].split(".")[1] not in shared
            ]
        elif kind == "USING":
            how = d(st.sampled_from(["", "LEFT ", "RIGHT ", "FULL "]))
            using = d(st.lists(st.sampled_from(shared), unique=True, min_size=1))
            src = f"{a.name} AS x {how}JOIN {b.name} AS y USING ({', '.join(using)})"
            refs = [(u, _kind_of(a, u)) for u in using] + refs
        elif kind in ("CROSS JOIN", "COMMA"):
            sep = ", " if kind == "COMMA" else " CROSS JOIN "
            src = f"{a.name} AS x{sep}{b.name} AS y"
        else:
            on = "x.k = y.k"
            if d(st.booleans()):
                on += f" AND {self.pred(refs, 0)}"
            src = f"{a.name} AS x {kind} {b.name} AS y ON {on}"
        if len(self.schema.tables) > 2 and d(st.integers(0, 2)) == 0:  # a third table
            c = next(t for t in self.schema.tables if t not in (a, b))
            how = d(st.sampled_from(["JOIN", "LEFT JOIN", "FULL JOIN"]))
            # y.k after a comma join (x is not visible in the ON of the join binding tighter); never a bare
            # USING column (DuckDB takes it, PostgreSQL and dbspark call it ambiguous with z.k)
            src += f" {how} {c.name} AS z ON z.k = {'y.k' if kind == 'COMMA' else 'x.k'}"
            # the USING / NATURAL columns unqualified are ambiguous with z.k now (PostgreSQL, dbspark)
            refs = [r for r in refs if "." in r[0]] + self.refs(c, "z")
        if d(st.integers(0, 3)) == 0:
            return self.group_by(refs=refs, source=src)
        if kind == "NATURAL" and "z" not in src.split() and d(st.integers(0, 2)) == 0:
            return f"SELECT * FROM {src}{self.where(refs)}"  # the shared columns once, then the others
        items = ", ".join(i for i, _ in self.items(refs, 4))
        return f"SELECT {items} FROM {src}{self.where(refs)}"

    def subquery(self, variant: str = "basic") -> str:
        """A subquery condition in WHERE (combined with AND; with variant "or", with OR) or a value in SELECT.

        "basic": uncorrelated, or correlated by key equality (NOT IN and IN as a value uncorrelated);
        "hard": correlated by non-equalities, or a correlated NOT IN / IN as a value; "or": anything."""
        d = self.draw
        a, b = self.two_tables()
        ra, rb = self.refs(a, "x"), self.refs(b, "y")
        equi = ["y.k = x.k", "y.k IS NOT DISTINCT FROM x.k"]
        non_equi = ["y.k <> x.k", "y.k < x.k", "y.k = x.k AND y.k + x.k > 1"]
        form = d(st.sampled_from(["in", "exists", "scalar_where", "scalar_select", "in_select", "mixed"]))
        negated = d(st.booleans())
        corr: str | None
        if variant == "hard":
            corr = (
                d(st.sampled_from(non_equi))
                if form not in ("in", "in_select") or d(st.booleans())
                else d(st.sampled_from(equi))
            )
            negated = negated or form == "in"  # a correlated NOT IN (IN as a value: either)
        elif variant == "basic":
            corr = d(st.sampled_from(equi)) if d(st.booleans()) else None
            if corr and (form == "in_select" or (form == "in" and negated)):
                corr = None
        else:
            form = d(st.sampled_from(["in", "exists", "scalar_where", "mixed"]))
            corr = d(st.sampled_from(equi + non_equi)) if d(st.booleans()) else None
        inner_where = [self.pred(rb, 0)] if d(st.booleans()) else []
        if corr:
            inner_where.append(corr)
        iw = f" WHERE {' AND '.join(inner_where)}" if inner_where else ""
        if form in ("in", "in_select"):
            kind = d(st.sampled_from(sorted({k for _, k in ra} & {k for _, k in rb})))
            lhs, rhs = self.expr(kind, ra, 0), self.expr(kind, rb, 0)
            cond = f"{lhs} {'NOT IN' if negated else 'IN'} (SELECT {rhs} FROM {b.name} AS y{iw})"
        elif form in ("exists", "mixed"):
            cond = f"{'NOT EXISTS' if negated else 'EXISTS'} (SELECT 1 FROM {b.name} AS y{iw})"
        else:
            agg = (
                self.aggregate_call(rb, exact=True)
                if form == "scalar_select"
                else d(
                    st.sampled_from(
                        ["count(*)", "sum(y.k)", "max(y.k)", "min(y.k) + 1", f"count({rb[-1][0]})"]
                    )
                )
            )
            cond = f"(SELECT {agg} FROM {b.name} AS y{iw})"
        items = [i for i, _ in self.items(ra, 2)]
        if form in ("scalar_select", "in_select"):
            items.append(f"{cond} AS sq")
            where = self.where(ra)
        else:
            if form == "scalar_where":
                cond = f"x.k {d(st.sampled_from(['=', '<', '>=']))} {cond}"
            where = f" WHERE {cond}"
            if variant == "or":
                where += f" OR {self.pred(ra, 1)}"
            elif form == "mixed" or d(st.integers(0, 2)) == 0:
                where += f" AND {self.pred(ra, 1)}"
        return f"SELECT {', '.join(items)} FROM {a.name} AS x{where}"

    def scalar_rows(self) -> str:
        """A scalar subquery that is not one row by construction (no aggregate): uncorrelated, or
        correlated by key equality or a non-equality, with DISTINCT or not, in WHERE or in SELECT. Keys
        come from a small domain, so a step often makes it return several rows (for an outer row), which
        DuckDB raises and dbspark must reject whole."""
        d = self.draw
        a, b = self.two_tables()
        ra, rb = self.refs(a, "x"), self.refs(b, "y")
        corr = d(st.sampled_from([None, None, "y.k = x.k", "y.k IS NOT DISTINCT FROM x.k", "y.k < x.k"]))
        inner_where = [corr] if corr else []
        if d(st.booleans()):
            inner_where.append(self.pred(rb, 0))
        iw = f" WHERE {' AND '.join(inner_where)}" if inner_where else ""
        distinct = "DISTINCT " if d(st.booleans()) else ""
        if d(st.booleans()):  # in WHERE, compared with an outer key
            sub = f"(SELECT {distinct}y.k FROM {b.name} AS y{iw})"
            op = d(st.sampled_from(["=", "<", ">=", "<>"]))
            shown = ", ".join(i for i, _ in self.items(ra, 2))
            return f"SELECT {shown} FROM {a.name} AS x WHERE x.k {op} {sub}"
        col, _ = d(st.sampled_from(rb))
        sub = f"(SELECT {distinct}{col} FROM {b.name} AS y{iw})"
        items = [i for i, _ in self.items(ra, 2)] + [f"{sub} AS sq"]
        return f"SELECT {', '.join(items)} FROM {a.name} AS x{self.where(ra)}"

    def setop(self) -> str:
        d = self.draw
        n = d(st.integers(1, 2))
        kinds = [d(st.sampled_from(KINDS)) for _ in range(n)]

        def side() -> str:
            t = self.table()
            refs = self.refs(t)
            items = ", ".join(  # a bare NULL takes the other branches' type (issue 21)
                f"{'NULL' if d(st.integers(0, 5)) == 0 else self.expr(k, refs, d(st.integers(0, 1)))} AS o{i + 1}"
                for i, k in enumerate(kinds)
            )
            return f"SELECT {items} FROM {t.name}{self.where(refs)}"

        out = side()
        for i in range(d(st.integers(1, 2))):
            op = d(
                st.sampled_from(["UNION", "UNION ALL", "INTERSECT", "EXCEPT", "INTERSECT ALL", "EXCEPT ALL"])
            )
            out = f"({out}) {op} ({side()})" if i else f"{out} {op} {side()}"
        return out

    def topk(self) -> tuple[str, str]:
        d = self.draw
        base = d(st.sampled_from(["select", "group", "join", "setop"]))
        if base == "group":
            q = self.group_by(exact=True)
        elif base == "join":
            a, b = self.two_tables()
            refs = self.refs(a, "x") + self.refs(b, "y")
            items = [
                f"{self.expr(k, refs, 0)} AS o{i + 1}"
                for i, k in enumerate(
                    d(st.lists(st.sampled_from(("int", "str", "dec", "date")), min_size=1, max_size=3))
                )
            ]
            how = d(st.sampled_from(["JOIN", "LEFT JOIN", "FULL JOIN"]))
            q = f"SELECT {', '.join(items)} FROM {a.name} AS x {how} {b.name} AS y ON x.k = y.k"
        elif base == "setop":
            q = f"({self.setop().replace(' ALL', '')})"
        else:
            t = self.table()
            refs = self.refs(t)
            cols = ", ".join(
                i for i, _ in self.items(refs, 3, kinds=("int", "dec", "str", "date", "bool", "float"))
            )
            q = f"SELECT {'DISTINCT ' if d(st.booleans()) else ''}{cols} FROM {t.name}{self.where(refs)}"
        outs = _outputs(q)
        keys = d(st.lists(st.sampled_from(outs), unique=True, min_size=1, max_size=2))
        order = ", ".join(
            f"{k} {d(st.sampled_from(['', 'ASC', 'DESC']))}"
            f"{d(st.sampled_from(['', '', ' NULLS FIRST', ' NULLS LAST']))}".strip()
            for k in keys
        )
        limit = f" LIMIT {d(st.integers(0, 4))}" if d(st.integers(0, 3)) else ""
        offset = f" OFFSET {d(st.integers(1, 3))}" if d(st.integers(0, 2)) == 0 or not limit else ""
        ties = ", ".join(f"{o} ASC NULLS LAST" for o in outs)
        if base == "setop":
            return (
                f"SELECT * FROM {q} AS s ORDER BY {order}{limit}{offset}",
                f"SELECT * FROM {q} AS s ORDER BY {order}, {ties}{limit}{offset}",
            )
        return f"{q} ORDER BY {order}{limit}{offset}", f"{q} ORDER BY {order}, {ties}{limit}{offset}"

    def cte(self) -> str:
        d = self.draw
        t, u = self.two_tables()
        refs = self.refs(t)
        form = d(st.sampled_from(["twice", "filter_join", "agg_join", "chain"]))
        if form == "twice":
            inner = self.group_by(exact=True, refs=refs, source=t.name)
            c0 = _outputs(inner)[0]
            return (
                f"WITH c AS ({inner}) SELECT c.{c0} AS o1, d.{c0} AS o2 FROM c JOIN c AS d ON c.{c0} = d.{c0}"
            )
        if form == "filter_join":
            inner = f"SELECT * FROM {t.name}{self.where(refs)}"
            items = ", ".join(i for i, _ in self.items(self.refs(t, "c") + self.refs(u, "u"), 3))
            how = d(st.sampled_from(["JOIN", "LEFT JOIN", "FULL JOIN"]))
            return f"WITH c AS ({inner}) SELECT {items} FROM c {how} {u.name} AS u ON u.k = c.k"
        if form == "agg_join":
            inner = f"SELECT k, count(*) AS n, {self.aggregate_call(refs, exact=True)} AS s FROM {t.name} GROUP BY k"
            items = ", ".join(i for i, _ in self.items(self.refs(u, "u"), 2))
            return f"WITH c AS ({inner}) SELECT c.k AS ck, c.n AS cn, c.s AS cs, {items} FROM c JOIN {u.name} AS u ON u.k = c.k"
        return (
            f"WITH c AS (SELECT * FROM {t.name}{self.where(refs)}), e AS (SELECT k, count(*) AS n FROM c GROUP BY k) "
            f"SELECT e.k AS o1, e.n AS o2 FROM e WHERE e.n {d(st.sampled_from(['>', '<=']))} {d(st.integers(0, 2))}"
        )

    def recursive(self) -> str:
        d = self.draw
        form = d(
            st.sampled_from(
                [
                    "closure",
                    "from_node",
                    "bounded_all",
                    "closure_agg",
                    "two_hop",
                    "const_start",
                    "const_depth",
                    "counter",
                    "const_steps",
                    "table_steps",
                ]
            )
        )
        union = d(st.sampled_from(["UNION", "UNION ALL"]))
        bound = d(st.integers(0, 6))
        # constant bases (a SELECT without FROM): from a node, paths of bounded length, a counter bounded
        # by a count of e, sums of constant steps or of e's values (a cross product in the step)
        if form == "const_start":
            return (
                f"WITH RECURSIVE r(x) AS (SELECT {d(st.integers(0, 2))} UNION SELECT e.dst FROM r JOIN e "
                "ON e.src = r.x) SELECT x FROM r"
            )
        if form == "const_depth":
            return (
                f"WITH RECURSIVE r(x, len) AS (SELECT {d(st.integers(0, 2))}, 0 UNION ALL SELECT e.dst, r.len + 1 "
                f"FROM r JOIN e ON e.src = r.x WHERE r.len < {min(bound, 3)}) SELECT x, len FROM r"
            )
        if form == "counter":
            return (
                f"WITH RECURSIVE r(n) AS (SELECT 0 {union} SELECT n + 1 FROM r WHERE n < (SELECT count(*) FROM e "
                f"WHERE w) + {bound}) SELECT n FROM r"
            )
        if form == "const_steps":
            return (
                f"WITH RECURSIVE r(n) AS (SELECT 0 UNION SELECT r.n + s.k FROM r CROSS JOIN (SELECT 1 AS k UNION "
                f"SELECT 2) AS s WHERE r.n + s.k <= {bound}) SELECT n FROM r"
            )
        if form == "table_steps":
            return (
                f"WITH RECURSIVE r(n) AS (SELECT 0 UNION SELECT r.n + e.dst FROM r, e WHERE e.dst > 0 AND "
                f"r.n + e.dst <= {bound}) SELECT n FROM r"
            )
        if form == "closure":
            return (
                "WITH RECURSIVE r(a, b) AS (SELECT src, dst FROM e UNION SELECT r.a, e.dst FROM r JOIN e "
                "ON r.b = e.src) SELECT a, b FROM r"
            )
        if form == "closure_agg":
            return (
                "WITH RECURSIVE r(a, b) AS (SELECT src, dst FROM e UNION SELECT r.a, e.dst FROM r JOIN e "
                "ON r.b = e.src) SELECT a, count(*) AS n, max(b) AS mx FROM r GROUP BY a"
            )
        if form == "from_node":
            start = d(st.integers(0, 2))
            return (
                f"WITH RECURSIVE r(x) AS (SELECT src FROM e WHERE src = {start} UNION SELECT e.dst FROM r JOIN e "
                f"ON e.src = r.x) SELECT x FROM r"
            )
        if form == "two_hop":
            return (
                "WITH RECURSIVE r(a, b) AS (SELECT src, dst FROM e WHERE w UNION SELECT r.a, e.dst FROM r, e "
                "WHERE r.b = e.src AND e.w) SELECT a, b FROM r WHERE a <> b"
            )
        depth = d(st.integers(1, 3))
        return (
            f"WITH RECURSIVE p(a, b, len) AS (SELECT src, dst, 1 FROM e UNION ALL SELECT p.a, e.dst, p.len + 1 "
            f"FROM p JOIN e ON p.b = e.src WHERE p.len < {depth}) SELECT a, b, len FROM p"
        )

    def mode(self) -> tuple[str, str, str]:
        """(the view, DuckDB's query of its other columns, DuckDB's allowed (key, MODE) pairs: the values of
        greatest count per group). DuckDB picks any of tied values; so may dbspark."""
        t = self.table()
        refs = self.refs(t)
        kind = self.draw(st.sampled_from(sorted({k for _, k in refs})))
        x = self.draw(st.sampled_from([r for r, k in refs if k == kind]))
        grouped = self.draw(st.integers(0, 3)) > 0
        base = f"SELECT {'k' if grouped else '0'} AS g, {x} AS x FROM {t.name}{self.where(refs)}"
        view = f"WITH b AS ({base}) SELECT {'g, ' if grouped else ''}mode(x) AS mo, count(*) AS n FROM b" + (
            " GROUP BY g" if grouped else ""
        )
        rest = f"WITH b AS ({base}) SELECT {'g, ' if grouped else ''}count(*) AS n FROM b" + (
            " GROUP BY g" if grouped else ""
        )
        allowed = (
            f"WITH b AS ({base}), c AS (SELECT g, x, count(*) AS n FROM b WHERE x IS NOT NULL GROUP BY g, x), "
            "m AS (SELECT g, max(n) AS mx FROM c GROUP BY g) "
            "SELECT c.g, c.x FROM c JOIN m ON c.g IS NOT DISTINCT FROM m.g AND c.n = m.mx"
        )
        return view, rest, allowed

    def ordered(self) -> str:
        """MEDIAN / MIN / MAX (DISTINCT at times) of a DECIMAL(18,4), DECIMAL(38,10) or DATE column of the
        `WIDE` schema (values up to the types' bounds), of the column, its negation or a CASE of it."""
        d = self.draw
        t = self.table()
        c = d(st.sampled_from([c.name for c in t.columns if c.name != "k"]))
        x = d(
            st.sampled_from(
                [c, f"CASE WHEN k >= 2 THEN {c} END"] + ([f"(- {c})"] if c not in ("dd", "tt") else [])
            )
        )
        funcs = d(st.lists(st.sampled_from(["median", "median", "min", "max"]), min_size=1, max_size=3))
        calls = [
            f"{f}({'DISTINCT ' if d(st.integers(0, 4)) == 0 else ''}{x}) AS a{i + 1}"
            for i, f in enumerate(funcs)
        ]
        grouped = d(st.integers(0, 3)) > 0
        where = d(st.sampled_from(["", "", " WHERE k >= 1", " WHERE k <> 2"]))
        return (
            f"SELECT {'k AS g1, ' if grouped else ''}{', '.join(calls)} FROM {t.name}{where}"
            f"{' GROUP BY k' if grouped else ''}"
        )

    def overflow(self) -> str:
        d = self.draw
        t = self.table()
        form = d(st.sampled_from(["add", "mul", "neg", "sum", "where", "agg_expr"]))
        if form == "add":
            return f"SELECT k, a + {d(st.sampled_from(['a', '1', 'k']))} AS x FROM {t.name}"
        if form == "mul":
            return f"SELECT a * {d(st.sampled_from(['2', 'k', '-1']))} AS x FROM {t.name}"
        if form == "neg":
            return f"SELECT k, - a AS x, a - 1 AS y FROM {t.name} WHERE k >= 1"
        if form == "sum":
            return f"SELECT k, sum(a) AS s FROM {t.name} GROUP BY k"
        if form == "agg_expr":
            return f"SELECT k, max(a) + 1 AS s, min(a) - 1 AS m FROM {t.name} GROUP BY k"
        # not `a * 2 > 0`: DuckDB rewrites a comparison of an expression with a constant (no overflow then)
        return f"SELECT k, a FROM {t.name} WHERE a * 2 > k"


def _kind_of(t: Table, name: str) -> str:
    c = next((c for c in t.columns if c.name == name), None)
    return c.kind if c is not None else "int"


def _outputs(query: str) -> list[str]:
    """The output column names of a generated query (its aliases o1.., g1.., a1.., sq)."""
    import re

    top = query
    if query.startswith("("):  # a set operation: its first operand names the columns
        top = query[1:]
    names: list[str] = []
    depth = 0
    i = top.find("SELECT") + len("SELECT")
    j = i
    while j < len(top):  # the first SELECT list, up to its FROM at depth 0
        ch = top[j]
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and top.startswith(" FROM ", j):
            break
        j += 1
    for m in re.finditer(r" AS ([a-z][a-z0-9]*)(?=,|$)", top[i:j]):
        names.append(m.group(1))
    return names


# ---- cases -----------------------------------------------------------------------------------------------
FAMILIES = (
    "select",
    "expressions",
    "aggregates",
    "joins",
    "subqueries",
    "setops",
    "topk",
    "ctes",
    "recursive",
    "mode",
    "overflow",
    "subqueries_or",
    "subqueries_hard",
    "ordered",
    "scalar_rows",
    "grouping",
    "windows",
    "cyclic",
    "asof",
)

EDGES = Schema(
    (
        Table(
            "e",
            (Column("src", "int", "BIGINT"), Column("dst", "int", "BIGINT"), Column("w", "bool", "BOOLEAN")),
        ),
    )
)


_WIDE_COLS = (
    Column("k", "int", "BIGINT"),
    Column("d18", "dec", "DECIMAL(18,4)"),
    Column("d38", "dec", "DECIMAL(38,10)"),
    Column("dd", "date", "DATE"),
    Column("tt", "ts", "TIMESTAMP"),
)
WIDE = Schema((Table("t0", _WIDE_COLS), Table("t1", _WIDE_COLS)), (18, 4))

_GRAPH_COLS = (Column("src", "int", "BIGINT"), Column("dst", "int", "BIGINT"), Column("n", "int", "BIGINT"))
GRAPH = Schema((Table("r", _GRAPH_COLS), Table("s", _GRAPH_COLS), Table("u", _GRAPH_COLS)))

BIG = Schema(
    (
        Table("t0", (Column("k", "int", "BIGINT"), Column("a", "int", "BIGINT"))),
        Table("t1", (Column("k", "int", "BIGINT"), Column("a", "int", "BIGINT"))),
    )
)


@st.composite
def cases(draw: st.DrawFn, family: str, max_views: int = 3, max_steps: int = 4) -> Case:
    if family == "recursive":
        schema = EDGES
    elif family == "overflow":
        schema = BIG
    elif family == "ordered":
        schema = WIDE
    elif family == "cyclic":
        schema = GRAPH
    else:
        schema = draw(schemas())
    g = QueryGen(draw, schema)
    views = []
    for i in range(draw(st.integers(1, max_views))):
        fam = draw(st.sampled_from(FAMILIES[:8] + ("mode",))) if family == "mix" else family
        name = f"v{i}"
        if fam == "topk":
            q, o = g.topk()
            views.append(View(name, q, o))
        elif fam == "mode" or (fam == "ordered" and draw(st.integers(0, 3)) == 0):
            q, rest, allowed = g.mode()
            views.append(View(name, q, rest, mode=allowed))
        else:
            build = {
                "select": g.select,
                "expressions": lambda: g.select(deep=True),
                "aggregates": g.group_by,
                "joins": g.join,
                "subqueries": g.subquery,
                "subqueries_or": lambda: g.subquery("or"),
                "subqueries_hard": lambda: g.subquery("hard"),
                "setops": g.setop,
                "ctes": g.cte,
                "recursive": g.recursive,
                "overflow": g.overflow,
                "ordered": g.ordered,
                "scalar_rows": g.scalar_rows,
                "grouping": g.grouping,
                "windows": g.windows,
                "cyclic": g.cyclic,
                "asof": g.asof,
            }[fam]
            views.append(View(name, build()))
    return Case(schema, tuple(views), draw(change_streams(schema, max_steps)))


__all__ = [
    "Case",
    "Column",
    "FAMILIES",
    "QueryGen",
    "Schema",
    "Step",
    "Table",
    "View",
    "cases",
    "change_streams",
    "schemas",
]
