"""TPC-H for tests and benchmarks: data, DDL, the 22 queries as views, and the RF1/RF2 refresh functions.

* `generate(sf)` runs DuckDB's `dbgen` (the `duckdb-extension-tpch` package, loaded by file path, so no
  download) and returns the 8 tables as Polars frames typed like `DDL` (BIGINT, DECIMAL(15,2), DATE,
  VARCHAR).
* `DDL`: the 8 tables with their primary keys; `VIEWS`: the 22 queries of DuckDB's `tpch_queries()`,
  each as `CREATE VIEW qNN AS <query>` (query text unchanged, trailing semicolon stripped); `QUERIES`:
  {qNN: query text}.
* `refreshes(data, n, seed)`: n refresh pairs following the TPC-H specification (v3, §5.3.7 and §4.2.3):
  RF1 inserts SF*1500 new orders with 1-7 lineitems each, whose keys are taken from the part of the
  sparse order key space that the initial population leaves unused, and whose columns are drawn as dbgen
  draws them (§4.2.3: o_custkey not divisible by 3, order date in [STARTDATE, ENDDATE-151], ship / commit
  / receipt dates relative to it, return flag and line status from CURRENTDATE, l_suppkey one of the
  part's 4 suppliers, l_extendedprice from the part's retail price, o_totalprice and o_orderstatus from
  the lineitems; comments sampled from the loaded comments). RF2 deletes SF*1500 orders of the initial
  population with all their lineitems (full rows). Deterministic by seed, vectorized (numpy / Polars);
  across the n pairs new keys are unique and no order is deleted twice.
"""

from __future__ import annotations

import datetime as dt
import json
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

# ---- schema ------------------------------------------------------------------------------------------
D = "DECIMAL(15,2)"
COLUMNS: dict[str, list[tuple[str, str]]] = {
    "region": [("r_regionkey", "BIGINT"), ("r_name", "VARCHAR"), ("r_comment", "VARCHAR")],
    "nation": [
        ("n_nationkey", "BIGINT"),
        ("n_name", "VARCHAR"),
        ("n_regionkey", "BIGINT"),
        ("n_comment", "VARCHAR"),
    ],
    "part": [
        ("p_partkey", "BIGINT"),
        ("p_name", "VARCHAR"),
        ("p_mfgr", "VARCHAR"),
        ("p_brand", "VARCHAR"),
        ("p_type", "VARCHAR"),
        ("p_size", "BIGINT"),
        ("p_container", "VARCHAR"),
        ("p_retailprice", D),
        ("p_comment", "VARCHAR"),
    ],
    "supplier": [
        ("s_suppkey", "BIGINT"),
        ("s_name", "VARCHAR"),
        ("s_address", "VARCHAR"),
        ("s_nationkey", "BIGINT"),
        ("s_phone", "VARCHAR"),
        ("s_acctbal", D),
        ("s_comment", "VARCHAR"),
    ],
    "partsupp": [
        ("ps_partkey", "BIGINT"),
        ("ps_suppkey", "BIGINT"),
        ("ps_availqty", "BIGINT"),
        ("ps_supplycost", D),
        ("ps_comment", "VARCHAR"),
    ],
    "customer": [
        ("c_custkey", "BIGINT"),
        ("c_name", "VARCHAR"),
        ("c_address", "VARCHAR"),
        ("c_nationkey", "BIGINT"),
        ("c_phone", "VARCHAR"),
        ("c_acctbal", D),
        ("c_mktsegment", "VARCHAR"),
        ("c_comment", "VARCHAR"),
    ],
    "orders": [
        ("o_orderkey", "BIGINT"),
        ("o_custkey", "BIGINT"),
        ("o_orderstatus", "VARCHAR"),
        ("o_totalprice", D),
        ("o_orderdate", "DATE"),
        ("o_orderpriority", "VARCHAR"),
        ("o_clerk", "VARCHAR"),
        ("o_shippriority", "BIGINT"),
        ("o_comment", "VARCHAR"),
    ],
    "lineitem": [
        ("l_orderkey", "BIGINT"),
        ("l_partkey", "BIGINT"),
        ("l_suppkey", "BIGINT"),
        ("l_linenumber", "BIGINT"),
        ("l_quantity", D),
        ("l_extendedprice", D),
        ("l_discount", D),
        ("l_tax", D),
        ("l_returnflag", "VARCHAR"),
        ("l_linestatus", "VARCHAR"),
        ("l_shipdate", "DATE"),
        ("l_commitdate", "DATE"),
        ("l_receiptdate", "DATE"),
        ("l_shipinstruct", "VARCHAR"),
        ("l_shipmode", "VARCHAR"),
        ("l_comment", "VARCHAR"),
    ],
}
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "region": ("r_regionkey",),
    "nation": ("n_nationkey",),
    "part": ("p_partkey",),
    "supplier": ("s_suppkey",),
    "partsupp": ("ps_partkey", "ps_suppkey"),
    "customer": ("c_custkey",),
    "orders": ("o_orderkey",),
    "lineitem": ("l_orderkey", "l_linenumber"),
}
TABLES = tuple(COLUMNS)
_PL = {"BIGINT": pl.Int64(), "VARCHAR": pl.String(), "DATE": pl.Date(), D: pl.Decimal(15, 2)}


def schema(table: str) -> pl.Schema:
    """The Polars schema of a table (what `generate` returns and the refreshes carry)."""
    return pl.Schema([(c, _PL[t]) for c, t in COLUMNS[table]])


def _create_table(name: str) -> str:
    cols = ",\n".join(f"  {c} {t}" for c, t in COLUMNS[name])
    return f"CREATE TABLE {name} (\n{cols},\n  PRIMARY KEY ({', '.join(PRIMARY_KEYS[name])})\n);"


DDL = "\n".join(_create_table(t) for t in TABLES)

# ---- the extension and the queries --------------------------------------------------------------------


def extension_path() -> str:
    """The tpch .duckdb_extension file of the installed `duckdb-extension-tpch` package."""
    import duckdb
    import duckdb_extension_tpch

    root = Path(duckdb_extension_tpch.__file__).parent / "extensions"
    files = sorted(root.glob(f"v{duckdb.__version__}/*.duckdb_extension")) or sorted(
        root.glob("**/tpch.duckdb_extension")
    )
    if not files:
        raise FileNotFoundError(f"no tpch.duckdb_extension under {root}; pip install duckdb-extension-tpch")
    return str(files[0])


def connect(con: object | None = None) -> object:
    """A DuckDB connection (new, or `con`) with the tpch extension loaded from its file."""
    import duckdb

    c = duckdb.connect() if con is None else con
    c.execute(f"LOAD '{extension_path()}'; SET enable_progress_bar = false")  # type: ignore[attr-defined]
    return c


def _load_queries() -> dict[str, str]:
    con = connect()
    rows = con.execute("SELECT query_nr, query FROM tpch_queries() ORDER BY query_nr").fetchall()  # type: ignore[attr-defined]
    con.close()  # type: ignore[attr-defined]
    return {f"q{n:02d}": q.strip().rstrip(";").strip() for n, q in rows}


QUERIES: dict[str, str] = _load_queries()
VIEWS: dict[str, str] = {name: f"CREATE VIEW {name} AS\n{q};" for name, q in QUERIES.items()}


def pipeline_sql(views: list[str] | None = None) -> str:
    """DDL plus the CREATE VIEW statements of `views` (default: all 22)."""
    names = list(VIEWS) if views is None else views
    return DDL + "\n" + "\n".join(VIEWS[v] for v in names)


# ---- data ----------------------------------------------------------------------------------------------
def generate(sf: float) -> dict[str, pl.DataFrame]:
    """The 8 tables at scale factor `sf` from DuckDB's dbgen, typed like `DDL` (deterministic)."""
    con = connect()
    con.execute(f"CALL dbgen(sf={float(sf)!r})")  # type: ignore[attr-defined]
    out = {}
    for t in TABLES:
        df = con.execute(f"SELECT * FROM {t}").pl()  # type: ignore[attr-defined]
        out[t] = df.cast(schema(t))
    con.close()  # type: ignore[attr-defined]
    return out


@dataclass
class Refresh:
    """One refresh pair: RF1 (new orders, their lineitems) and RF2 (old orders, their lineitems), as rows."""

    orders_insert: pl.DataFrame
    lineitem_insert: pl.DataFrame
    orders_delete: pl.DataFrame
    lineitem_delete: pl.DataFrame
    # beyond the specification (skewed refreshes): rows of keyed tables whose key exists, i.e. updates
    updates: dict[str, pl.DataFrame] = field(default_factory=dict)

    def inserts(self) -> dict[str, pl.DataFrame]:
        return {"orders": self.orders_insert, "lineitem": self.lineitem_insert}

    def deletes(self) -> dict[str, pl.DataFrame]:
        return {"orders": self.orders_delete, "lineitem": self.lineitem_delete}


STARTDATE = dt.date(1992, 1, 1)
ENDDATE = dt.date(1998, 12, 31)
CURRENTDATE = dt.date(1995, 6, 17)
PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
INSTRUCTIONS = ("DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN")
MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")


def new_order_keys(first: int, count: int, max_index: int) -> np.ndarray:
    """Order keys count `first`, `first`+1, ... of the sparse key space left unused by the load.

    dbgen numbers orders i = 1..N and makes key mk_sparse(i, 0): the low 3 bits of i, then 2 zero bits,
    then i >> 3 (so 8 keys used out of every 32). Unused keys set the 2 middle bits to s = 1..3: key c of
    the refreshes is mk_sparse(i, s) with s = 1 + c // N, i = 1 + c % N (room for 3N new orders)."""
    c = np.arange(first, first + count, dtype=np.int64)
    s = 1 + c // max_index
    if count and s.max() > 3:
        raise ValueError(
            f"the unused order key space holds {3 * max_index} new orders; {first + count} asked"
        )
    i = 1 + c % max_index
    return ((i >> 3) << 5) | (s << 3) | (i & 7)


def _days(d: dt.date) -> int:
    return (d - dt.date(1970, 1, 1)).days


def _pick(rng: np.random.Generator, values: tuple[str, ...] | pl.Series, n: int) -> pl.Series:
    v = values if isinstance(values, pl.Series) else pl.Series(values, dtype=pl.String)
    return v.gather(rng.integers(0, len(v), n))


def _dec(cents: np.ndarray) -> pl.Series:
    return pl.Series(cents, dtype=pl.Int64).cast(pl.Decimal(38, 0)).cast(pl.Decimal(15, 2)) / 100


def hot_pairs(data: dict[str, pl.DataFrame]) -> list[np.ndarray]:
    """(partkey, suppkey) pairs of partsupp that the selective queries read, one array of pair indices
    per case: Q8 (ECONOMY ANODIZED STEEL parts, Brazilian suppliers), Q17 (Brand#23 MED BOX), Q19's three
    brand / container / size cases, Q20 ('forest' parts, Canadian suppliers), Q9 ('green' parts), Q21
    (Saudi suppliers). A skewed refresh draws half of its lineitems from them, a case chosen uniformly."""
    ps = (
        data["partsupp"]
        .with_row_index("__i")
        .join(data["part"], left_on="ps_partkey", right_on="p_partkey")
        .join(data["supplier"], left_on="ps_suppkey", right_on="s_suppkey")
        .join(data["nation"], left_on="s_nationkey", right_on="n_nationkey")
    )
    c, b, z, nat = pl.col("p_container"), pl.col("p_brand"), pl.col("p_size"), pl.col("n_name")
    cases = [
        (pl.col("p_type") == "ECONOMY ANODIZED STEEL") & (nat == "BRAZIL"),
        (b == "Brand#23") & (c == "MED BOX"),
        (b == "Brand#12") & c.is_in(["SM CASE", "SM BOX", "SM PACK", "SM PKG"]) & z.is_between(1, 5),
        (b == "Brand#23") & c.is_in(["MED BAG", "MED BOX", "MED PKG", "MED PACK"]) & z.is_between(1, 10),
        (b == "Brand#34") & c.is_in(["LG CASE", "LG BOX", "LG PACK", "LG PKG"]) & z.is_between(1, 15),
        pl.col("p_name").str.starts_with("forest") & (nat == "CANADA"),
        pl.col("p_name").str.contains("green"),
        nat == "SAUDI ARABIA",
    ]
    out = [ps.filter(e)["__i"].to_numpy() for e in cases]
    return [x for x in out if len(x)]


def _rf1(
    data: dict[str, pl.DataFrame], keys: np.ndarray, rng: np.random.Generator, skew: bool = False
) -> tuple[pl.DataFrame, pl.DataFrame]:
    n = len(keys)
    n_cust = data["customer"].height
    n_supp = data["supplier"].height
    part = data["part"]
    n_part = part.height
    cust = rng.integers(1, n_cust + 1, n)
    cust = np.where(cust % 3 == 0, np.where(cust > 1, cust - 1, cust + 1), cust)  # never a multiple of 3
    odate = rng.integers(_days(STARTDATE), _days(ENDDATE) - 151 + 1, n)
    n_lines = rng.integers(1, 8, n)
    big = rng.random(n) < 0.1 if skew else np.zeros(n, dtype=bool)  # skewed: orders for Q18 (> 300 units)
    n_lines = np.where(big, 7, n_lines)
    o_of_line = np.repeat(np.arange(n), n_lines)
    m = len(o_of_line)
    starts = np.repeat(np.cumsum(n_lines) - n_lines, n_lines)
    linenumber = np.arange(m) - starts + 1
    partkey = rng.integers(1, n_part + 1, m)
    corner = rng.integers(0, 4, m)
    suppkey = (partkey + corner * (n_supp // 4 + (partkey - 1) // n_supp)) % n_supp + 1  # §4.2.3 PS_SUPPKEY
    price_cents = (part["p_retailprice"].cast(pl.Float64).to_numpy() * 100).round().astype(np.int64)
    qty = rng.integers(1, 51, m)
    if skew:  # half the lineitems on the (part, supplier) pairs of the selective queries, a case uniformly
        cases = hot_pairs(data)
        case = rng.integers(0, len(cases), m)
        sizes = np.array([len(cs) for cs in cases])
        offset = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        pick = np.concatenate(cases)[offset[case] + (rng.random(m) * sizes[case]).astype(np.int64)]
        pairs = data["partsupp"].select("ps_partkey", "ps_suppkey")[pick]
        hot = rng.random(m) < 0.5
        partkey = np.where(hot, pairs["ps_partkey"].to_numpy(), partkey)
        suppkey = np.where(hot, pairs["ps_suppkey"].to_numpy(), suppkey)
        qty = np.where(
            big[o_of_line], rng.integers(44, 51, m), np.where(rng.random(m) < 0.2, rng.integers(1, 5, m), qty)
        )  # Q17: small quantities
    ext = qty * price_cents[partkey - 1]
    disc = rng.integers(0, 11, m)
    tax = rng.integers(0, 9, m)
    ship = odate[o_of_line] + rng.integers(1, 122, m)
    commit = odate[o_of_line] + rng.integers(30, 91, m)
    receipt = ship + rng.integers(1, 31, m)
    cur = _days(CURRENTDATE)
    rflag = np.where(receipt <= cur, np.where(rng.integers(0, 2, m) == 0, "R", "A"), "N")
    lstatus = np.where(ship > cur, "O", "F")
    line_total = (ext * (100 - disc) // 100) * (100 + tax) // 100
    total = np.bincount(o_of_line, weights=line_total, minlength=n).round().astype(np.int64)
    n_f = np.bincount(o_of_line, weights=(lstatus == "F"), minlength=n)
    ostatus = np.where(n_f == n_lines, "F", np.where(n_f == 0, "O", "P"))
    n_clerk = max(1, round(n_supp / 10))  # SF * 1000 clerks (SF * 10000 suppliers)
    clerk = pl.Series(rng.integers(1, n_clerk + 1, n)).cast(pl.String).str.zfill(9)
    orders = pl.DataFrame(
        {
            "o_orderkey": keys,
            "o_custkey": cust,
            "o_orderstatus": ostatus,
            "o_totalprice": _dec(total),
            "o_orderdate": pl.Series(odate, dtype=pl.Int32).cast(pl.Date),
            "o_orderpriority": _pick(rng, PRIORITIES, n),
            "o_clerk": "Clerk#" + clerk,
            "o_shippriority": np.zeros(n, dtype=np.int64),
            "o_comment": _pick(rng, data["orders"]["o_comment"], n),
        }
    )
    lineitem = pl.DataFrame(
        {
            "l_orderkey": keys[o_of_line],
            "l_partkey": partkey,
            "l_suppkey": suppkey,
            "l_linenumber": linenumber,
            "l_quantity": _dec(qty * 100),
            "l_extendedprice": _dec(ext),
            "l_discount": _dec(disc),
            "l_tax": _dec(tax),
            "l_returnflag": rflag,
            "l_linestatus": lstatus,
            "l_shipdate": pl.Series(ship, dtype=pl.Int32).cast(pl.Date),
            "l_commitdate": pl.Series(commit, dtype=pl.Int32).cast(pl.Date),
            "l_receiptdate": pl.Series(receipt, dtype=pl.Int32).cast(pl.Date),
            "l_shipinstruct": _pick(rng, INSTRUCTIONS[:1] if skew else INSTRUCTIONS, m),
            "l_shipmode": _pick(rng, MODES[:2] if skew else MODES, m),
            "l_comment": _pick(rng, data["lineitem"]["l_comment"], m),
        }
    )
    return (
        orders.cast(schema("orders")),
        lineitem.cast(schema("lineitem")),
    )


SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD")


def _updates(data: dict[str, pl.DataFrame], rng: np.random.Generator) -> dict[str, pl.DataFrame]:
    """Updates of dimension rows (an insert of an existing key) that move rows into and out of the
    selective queries: parts become Q17's Brand#23 MED BOX, Q8's ECONOMY ANODIZED STEEL or Q20's
    'forest' parts; suppliers (one of them of a Q2 part) move to CANADA / BRAZIL / SAUDI ARABIA / FRANCE /
    GERMANY (Q20, Q8, Q21, Q2, Q7); customers get a new balance and segment (Q3, Q10, Q22); partsupp rows
    (half of them of Q2's parts) a new quantity and cost (Q2, Q11, Q16, Q20)."""

    def sample(t: str, n: int) -> pl.DataFrame:
        df = data[t]
        return df[np.sort(rng.choice(df.height, min(n, df.height), replace=False))]

    part = sample("part", 6)
    part = part.with_columns(
        pl.Series("p_brand", ["Brand#23", "Brand#23"] + part["p_brand"].to_list()[2:]),
        pl.Series("p_container", ["MED BOX", "MED BOX"] + part["p_container"].to_list()[2:]),
        pl.Series(
            "p_type",
            part["p_type"].to_list()[:2] + ["ECONOMY ANODIZED STEEL"] * 2 + part["p_type"].to_list()[4:],
        ),
        pl.Series(
            "p_name", part["p_name"].to_list()[:4] + ["forest " + x for x in part["p_name"].to_list()[4:]]
        ),
    )
    q2 = data["part"].filter((pl.col("p_size") == 15) & pl.col("p_type").str.ends_with("BRASS"))["p_partkey"]
    ps2 = data["partsupp"].filter(pl.col("ps_partkey").is_in(q2.implode()))  # Q2's parts
    nations = data["nation"].filter(
        pl.col("n_name").is_in(["CANADA", "BRAZIL", "SAUDI ARABIA", "FRANCE", "GERMANY"])
    )
    q2_supp = data["supplier"].filter(
        pl.col("s_suppkey") == ps2["ps_suppkey"][int(rng.integers(0, ps2.height))]
    )
    supp = pl.concat([sample("supplier", 3), q2_supp]).unique("s_suppkey", maintain_order=True)
    supp = supp.with_columns(
        pl.Series(
            "s_nationkey", nations["n_nationkey"].to_numpy()[rng.integers(0, nations.height, supp.height)]
        )
    )
    cust = sample("customer", 6).with_columns(
        _dec(rng.integers(-99_999, 1_000_000, 6)).cast(pl.Decimal(15, 2)).alias("c_acctbal"),
        _pick(rng, SEGMENTS, 6).alias("c_mktsegment"),
    )
    ps = pl.concat(
        [sample("partsupp", 6), ps2[rng.choice(ps2.height, min(6, ps2.height), replace=False)]]
    ).unique(["ps_partkey", "ps_suppkey"], maintain_order=True)
    ps = ps.with_columns(
        pl.Series("ps_availqty", rng.integers(1, 10_000, ps.height)),
        _dec(rng.integers(100, 100_001, ps.height)).cast(pl.Decimal(15, 2)).alias("ps_supplycost"),
    )
    return {
        t: df.cast(schema(t))
        for t, df in {"part": part, "supplier": supp, "customer": cust, "partsupp": ps}.items()
    }


def refresh_size(data: dict[str, pl.DataFrame]) -> int:
    """SF * 1500 orders per refresh function (the order table has SF * 1,500,000 rows)."""
    return max(1, round(data["orders"].height / 1000))


def refreshes(
    data: dict[str, pl.DataFrame], n: int, seed: int = 0, size: int | None = None, skew: bool = False
) -> list[Refresh]:
    """`n` refresh pairs (RF1, RF2) over `data` (as returned by `generate`), deterministic by `seed`.

    Each RF1 inserts `size` (default SF*1500) new orders with 1-7 lineitems each; each RF2 deletes
    `size` orders of the loaded population, none twice, with all their lineitems.

    `skew=True` leaves the specification to reach the selective queries, which spec refreshes at a
    small SF hardly change: half the new lineitems on `hot_parts`, ship mode AIR / REG AIR and
    instruction DELIVER IN PERSON (Q19), a tenth of the new orders with 7 lines of 44-50 units (Q18),
    RF2 deleting every order of the customers it picks (their customers then have no orders: Q13,
    Q22), and updates of part, supplier, customer and partsupp rows (`_updates`: inserts of existing
    keys, which a keyed table takes as updates)."""
    k = refresh_size(data) if size is None else size
    orders, lineitem = data["orders"], data["lineitem"]
    if n * k > orders.height:
        raise ValueError(f"{n} refreshes of {k} deletes need {n * k} orders; the table has {orders.height}")
    rng = np.random.default_rng(seed)
    max_index = int(orders.height)  # dbgen's order numbers 1..N
    if skew:  # whole customers: all the orders of each customer, customers in a random order
        n_cust = int(orders["o_custkey"].to_numpy().max()) + 1
        rank = rng.permutation(n_cust)[orders["o_custkey"].to_numpy()]
        okeys = orders["o_orderkey"].to_numpy()
        victims = okeys[np.lexsort((okeys, rank))][: n * k]
    else:
        victims = rng.permutation(orders["o_orderkey"].to_numpy())[: n * k]
    out = []
    for r in range(n):
        keys = new_order_keys(r * k, k, max_index)
        o_ins, l_ins = _rf1(data, keys, rng, skew)
        gone = pl.Series("o_orderkey", victims[r * k : (r + 1) * k])
        o_del = orders.filter(pl.col("o_orderkey").is_in(gone.implode()))
        l_del = lineitem.filter(pl.col("l_orderkey").is_in(gone.implode()))
        out.append(Refresh(o_ins, l_ins, o_del, l_del, _updates(data, rng) if skew else {}))
    return out


# ---- the views against DuckDB through refreshes ---------------------------------------------------------
def _apply(target: Any, r: Refresh, tables: set[str] | None = None) -> None:
    """RF2 then RF1 (disjoint keys: the order does not matter), then any updates (inserts of existing
    keys), on a pipeline or a SqlOracle."""
    for t, df in r.deletes().items():
        if tables is None or t in tables:
            target.delete(t, df)
    for t, df in [*r.inserts().items(), *r.updates.items()]:
        if tables is None or t in tables:
            target.insert(t, df)


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}\n" + "".join(traceback.format_exception(e)[-4:])


def check_views(
    engine: str,
    views: list[str],
    data: dict[str, pl.DataFrame],
    refreshes_: list[Refresh],
    spark: Any = None,
    label: str = "",
    sql: dict[str, str] | None = None,
    isolate: bool = True,
) -> dict[str, str | None]:
    """Maintain `views` in one pipeline (`p.sql`): load the tables in one step, then one step per
    refresh; after each step compare every view with DuckDB (`SqlOracle`). Returns {view: None if it
    always agreed, else the first failure: rejected by the front end, a mismatch (rows shown), or an
    error}. If a step raises, every view fails; with `isolate`, each view is re-run alone, so that the
    message says whether it fails alone too.
    `sql` replaces some views' statements on the pipeline's side only (to check that the check fails)."""
    import dbspark
    from dbspark.testing.sql_oracle import SqlOracle

    result: dict[str, str | None] = {}
    p = dbspark.Pipeline(engine=engine, **({"spark": spark} if engine == "spark" else {}))
    try:
        p.sql(DDL)
        accepted = []
        for v in views:
            try:
                p.sql((sql or {}).get(v, VIEWS[v]))
                accepted.append(v)
            except Exception as e:  # noqa: BLE001 - a rejected query is that query's failure
                result[v] = f"the SQL front end rejected {v}: {_err(e)}"
        if not accepted:
            return result
        o = SqlOracle(DDL + "\n".join(VIEWS[v] for v in accepted))
        for t, df in data.items():
            o.insert(t, df)
        stages: list[tuple[str, Refresh | None]] = [("after the load", None)]
        stages += [(f"after refresh {i + 1}", r) for i, r in enumerate(refreshes_)]
        for stage, r in stages:
            try:
                if r is None:
                    for t, df in data.items():
                        p.insert(t, df)
                else:
                    _apply(p, r)
                p.step()
            except Exception as e:  # noqa: BLE001
                shared = f"the step {stage} of the pipeline of {len(accepted)} view(s) raised {_err(e)}"
                if len(accepted) > 1 and isolate:
                    p.close()
                    for v in accepted:
                        alone = check_views(engine, [v], data, refreshes_, spark, label, sql, isolate)
                        result[v] = alone[v] or f"{v} passes alone, but {shared}"
                    return result
                result.update({v: f"{v}: {shared}" for v in accepted if result.get(v) is None})
                return result
            if r is not None:
                _apply(o, r)
            for v in accepted:
                if result.get(v) is None:
                    try:
                        o.assert_view(p.view(v), v, f"view {v} {stage} ({label or engine})")
                    except Exception as e:  # noqa: BLE001 - a mismatch, or an error reading the view
                        result[v] = str(e) if isinstance(e, AssertionError) else f"{v} {stage}: {_err(e)}"
        for v in accepted:
            result.setdefault(v, None)
        return result
    finally:
        p.close()


def _watch_memory(limit_gib: float) -> None:
    """Exit the process (code 3, a line on stdout) when its resident memory passes `limit_gib`."""
    import os
    import resource
    import threading
    import time

    def watch() -> None:
        while True:
            if resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20 > limit_gib:  # peak RSS, GiB
                print(json.dumps({"memory_limit_gib": limit_gib}), flush=True)
                os._exit(3)
            time.sleep(0.1)

    threading.Thread(target=watch, daemon=True).start()


def check_views_isolated(
    views: list[str],
    sf: float,
    n_refresh: int,
    seed: int,
    size: int | None = None,
    max_rss_gib: float = 6.0,
    timeout_s: float = 1200,
    skew: bool = False,
) -> dict[str, str | None]:
    """`check_views` on the local engine in a subprocess that stops itself above `max_rss_gib` (a view
    whose plan blows up must not take the machine down). If the subprocess dies, each view is re-run in
    a subprocess of its own, and a view that dies alone gets the reason."""
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-m",
        "dbspark.testing.tpch",
        "--views",
        ",".join(views),
        "--sf",
        repr(sf),
        "--refreshes",
        str(n_refresh),
        "--seed",
        str(seed),
        "--max-rss-gib",
        repr(max_rss_gib),
    ]
    if size is not None:
        cmd += ["--size", str(size)]
    if skew:
        cmd += ["--skew"]
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        last = cp.stdout.strip().splitlines()[-1:] or ["{}"]
        out = json.loads(last[0])
        why = (
            f"more than {max_rss_gib} GiB of memory"
            if "memory_limit_gib" in out
            else f"exit code {cp.returncode}: {cp.stderr[-2000:]}"
        )
    except subprocess.TimeoutExpired:
        out, why = {}, f"more than {timeout_s:.0f} s"
    except json.JSONDecodeError:
        out, why = {}, f"exit code {cp.returncode}: {cp.stderr[-2000:]}"
    if "results" in out:
        return out["results"]
    if len(views) > 1:
        res: dict[str, str | None] = {}
        for v in views:
            alone = check_views_isolated([v], sf, n_refresh, seed, size, max_rss_gib, timeout_s, skew)
            res[v] = alone[v] or f"{v} passes alone, but the pipeline of {len(views)} views used {why}"
        return res
    return {views[0]: f"{views[0]} alone at SF {sf} (local engine) used {why}"}


def main(argv: list[str] | None = None) -> int:
    """`python -m dbspark.testing.tpch --views q01,q02 --sf 0.01 --refreshes 10 --seed 1`: prints
    {"results": {view: null or failure}} as the last line of stdout."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m dbspark.testing.tpch")
    ap.add_argument("--views", default=",".join(VIEWS))
    ap.add_argument("--sf", type=float, default=0.01)
    ap.add_argument("--refreshes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", type=int, default=None)
    ap.add_argument("--max-rss-gib", type=float, default=None)
    ap.add_argument("--skew", action="store_true", help="skewed refreshes (see `refreshes`)")
    a = ap.parse_args(argv)
    if a.max_rss_gib:
        _watch_memory(a.max_rss_gib)
    data = generate(a.sf)
    rs = refreshes(data, a.refreshes, a.seed, a.size, a.skew)
    res = check_views(
        "local",
        a.views.split(","),
        data,
        rs,
        label=f"SF {a.sf:g}, local{', skewed refreshes' if a.skew else ''}",
    )
    print(json.dumps({"results": res}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
