"""tpch: the 22 TPC-H queries as views maintained through RF1 + RF2 refreshes, against recomputation.

    python -m bench.tpch [--sf 1] [--engine local|spark|both] [--refreshes 3] [--mode combined|per-query|both]
                         [--queries q01,q03] [--quick]

Data: `dbspark.testing.tpch` (DuckDB's dbgen at scale factor SF; refresh pairs per the TPC-H
specification: RF1 inserts SF*1500 orders with 1-7 lineitems each, RF2 deletes SF*1500 loaded orders
with their lineitems). One refresh pair is one dbspark step; a warm-up refresh is not timed.

* **local**: dbspark's local engine vs DuckDB recomputing each query after each refresh (DuckDB's time
  to apply the refresh to its tables is reported separately).
* **spark**: dbspark's spark engine vs Spark SQL (same session, `local[2]`) recomputing each query over
  the current tables (written as Parquet after each refresh, untimed; each query read, run and collected
  with one `toArrow`). The queries are DuckDB's text transpiled to Spark SQL by sqlglot.

Modes: `combined` maintains all views in one pipeline (the time of a refresh is for all of them);
`per-query` maintains each view in a pipeline of its own (loaded with the tables it reads), which gives a
per-query ratio recompute / refresh and their geometric mean (the figure of issue 5: goal >= 30x on
Spark at SF1). Every view is checked after every refresh against DuckDB's answer (and Spark SQL's
answers against DuckDB's): a difference fails the run (RESULT MISMATCH). A query the front end rejects
is reported and left out.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

import dbspark
from bench import harness as h
from dbspark.testing import tpch
from dbspark.testing.sql_oracle import SqlOracle, compare_frames, view_frame

SEED = 1994
SF1_MIN_GIB = 64  # below this much memory, `python -m bench tpch` runs FALLBACK_SF instead of SF 1
FALLBACK_SF = 0.1
WARMUP = 1


def tables_of(query: str) -> set[str]:
    import sqlglot
    from sqlglot import exp

    names = {t.name.lower() for t in sqlglot.parse_one(query, read="duckdb").find_all(exp.Table)}
    return names & set(tpch.TABLES)


def spark_sql(query: str) -> str:
    import sqlglot

    return sqlglot.transpile(query, read="duckdb", write="spark")[0]


def apply(target: Any, r: tpch.Refresh, tables: set[str] | None = None) -> None:
    for t, df in r.deletes().items():
        if tables is None or t in tables:
            target.delete(t, df)
    for t, df in r.inserts().items():
        if tables is None or t in tables:
            target.insert(t, df)


def check(what: str, actual: Any, expected: pl.DataFrame, label: str = "dbspark", atol: float = 1e-9) -> None:
    msg = compare_frames(view_frame(actual), expected, what, label=label, atol=atol)
    if msg is not None:
        raise h.Mismatch(msg)


# ---- recomputation ----------------------------------------------------------------------------------
def duckdb_recompute(data: dict, refreshes: list, views: list[str]) -> dict[str, Any]:
    """Per refresh: the time to apply it to DuckDB's tables, each query's time and answer."""
    o = SqlOracle(tpch.pipeline_sql(views))
    with h.phase("duckdb load"):
        for t, df in data.items():
            o.insert(t, df)
    out: dict[str, Any] = {"apply": [], "times": {v: [] for v in views}, "answers": []}
    for r in refreshes:
        t, _ = h.timed(lambda r=r: apply(o, r))
        out["apply"].append(t)
        answers = {}
        for v in views:
            t, df = h.timed(lambda v=v: o.expected(v))
            out["times"][v].append(t)
            answers[v] = df
        out["answers"].append(answers)
    o.con.close()
    return out


def _next_state(state: dict[str, pl.DataFrame], r: tpch.Refresh) -> dict[str, pl.DataFrame]:
    s = dict(state)
    s["orders"] = pl.concat(
        [s["orders"].join(r.orders_delete.select("o_orderkey"), on="o_orderkey", how="anti"), r.orders_insert]
    )
    s["lineitem"] = pl.concat(
        [
            s["lineitem"].join(
                r.lineitem_delete.select("l_orderkey", "l_linenumber"),
                on=["l_orderkey", "l_linenumber"],
                how="anti",
            ),
            r.lineitem_insert,
        ]
    )
    return s


def spark_recompute(
    spark: Any, data: dict, refreshes: list, views: list[str], tmp: Path, duck: dict[str, Any]
) -> dict[str, Any]:
    """Per refresh: each query's time on Spark SQL over the current tables (Parquet), checked against DuckDB."""
    sqls = {v: spark_sql(tpch.QUERIES[v]) for v in views}
    out: dict[str, Any] = {"times": {v: [] for v in views}, "sql": sqls}
    state = data
    for i, r in enumerate(refreshes):
        state = _next_state(state, r)
        d = tmp / f"state-{i}"
        for t, df in state.items():
            if i == 0 or t in ("orders", "lineitem"):
                path = d / f"{t}.parquet"
                path.parent.mkdir(parents=True, exist_ok=True)
                df.write_parquet(path)
            else:
                path = tmp / "state-0" / f"{t}.parquet"
            spark.read.parquet(str(path)).createOrReplaceTempView(t)
        for v in views:
            t, res = h.timed(lambda v=v: spark.sql(sqls[v]).toArrow())
            out["times"][v].append(t)
            # Spark's AVG(DECIMAL(15,2)) is a DECIMAL(19,6): rounded to 6 places (DuckDB's is a DOUBLE)
            check(f"{v} after refresh {i}", pl.from_arrow(res), duck["answers"][i][v], "Spark SQL", atol=1e-6)
    return out


# ---- maintenance ------------------------------------------------------------------------------------
def _pipeline(engine: str, spark: Any, views: list[str]) -> tuple[Any, list[str], dict[str, str]]:
    p = dbspark.Pipeline(engine=engine, **({"spark": spark} if engine == "spark" else {}))
    p.sql(tpch.DDL)
    ok, rejected = [], {}
    for v in views:
        try:
            p.sql(tpch.VIEWS[v])
            ok.append(v)
        except Exception as e:  # noqa: BLE001 - reported, the query left out
            rejected[v] = f"{type(e).__name__}: {e}"
    return p, ok, rejected


def maintain(
    engine: str, spark: Any, data: dict, refreshes: list, views: list[str], duck: dict, label: str
) -> dict[str, Any]:
    """One pipeline maintaining `views`: load (one step, timed for information), then each refresh one
    timed step (push of the deletes and inserts + step), every view checked against DuckDB."""
    p, ok, rejected = _pipeline(engine, spark, views)
    used = set().union(*(tables_of(tpch.QUERIES[v]) for v in ok)) if ok else set()
    out: dict[str, Any] = {"views": ok, "rejected": rejected, "steps": []}
    try:
        if not ok:
            return out
        try:
            with h.phase(f"{label} load"):
                t, _ = h.timed(lambda: ([p.insert(t, df) for t, df in data.items() if t in used], p.step()))
            out["load_s"] = t
            for i, r in enumerate(refreshes):
                t, _ = h.timed(lambda r=r: (apply(p, r, used), p.step()))
                out["steps"].append(t)
                for v in ok:
                    check(f"{engine} view {v} after refresh {i}", p.view(v), duck["answers"][i][v])
        except h.Mismatch:
            raise
        except Exception as e:  # noqa: BLE001 - an engine error: reported for these views, the run goes on
            out["error"] = f"{type(e).__name__}: {e}"[:500]
            out["steps"] = []
            print(f"  .. {label}: ERROR {out['error'][:200]}", file=sys.stderr)
            return out
        print(f"  .. {label}: refresh {h.fmt_s(statistics.median(out['steps'][WARMUP:]))}", file=sys.stderr)
    finally:
        p.close()
    return out


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def med(xs: list[float]) -> float:
    return statistics.median(xs[WARMUP:])


def report(
    engine: str,
    views: list[str],
    recompute: dict[str, list[float]],
    combined: dict | None,
    per_query: dict[str, dict] | None,
    anchor: str,
) -> tuple[str, dict]:
    rows, ratios, summary = [], [], {}
    for v in views:
        rc = med(recompute[v])
        pq = per_query.get(v) if per_query else None
        inc = med(pq["steps"]) if pq and pq.get("steps") else None
        ratio = h.ratio(rc, inc) if inc else None
        if ratio:
            ratios.append(ratio)
        note = (pq or {}).get("rejected", {}).get(v, "") or (pq or {}).get("error", "")
        rows.append([v, h.fmt_s(rc), h.fmt_s(inc), h.fmt_x(ratio), note[:60]])
        summary[v] = {"recompute_s": rc, "refresh_s": inc, "ratio": ratio}
    total_rc = sum(med(recompute[v]) for v in views)
    comb = med(combined["steps"]) if combined and combined.get("steps") else None
    gm = geomean(ratios)
    rows.append(
        [
            f"all {len(views)}",
            h.fmt_s(total_rc),
            h.fmt_s(comb),
            h.fmt_x(h.ratio(total_rc, comb) if comb else None),
            "one pipeline, one refresh step"
            + (f"; {combined['error'][:60]}" if combined and combined.get("error") else ""),
        ]
    )
    rows.append(["geomean", "", "", h.fmt_x(gm), f"per-query ratios ({len(ratios)} of {len(views)} queries)"])
    table = h.table(
        f"TPC-H on {engine}: {anchor} recompute vs dbspark refresh (median)",
        ["query", f"{anchor} recompute", "dbspark refresh", "ratio", "note"],
        rows,
    )
    return table, {
        "per_query": summary,
        "geomean_ratio": gm,
        "total_recompute_s": total_rc,
        "combined_refresh_s": comb,
        "geomean_over": len(ratios),
        "combined_ratio": h.ratio(total_rc, comb) if comb else None,
    }


def run_engine(
    engine: str,
    sf: float,
    n_refresh: int,
    mode: str,
    views: list[str],
    data: dict,
    refreshes: list,
    spark: Any = None,
) -> dict[str, Any]:
    with h.phase("duckdb recompute"):
        duck = duckdb_recompute(data, refreshes, views)
    recompute, anchor, res = duck["times"], "DuckDB", {"duckdb_apply_s": duck["apply"]}
    if engine == "spark":
        tmp = Path(tempfile.mkdtemp(prefix="dbspark-tpch-"))
        try:
            with h.phase("spark sql recompute"):
                sp = spark_recompute(spark, data, refreshes, views, tmp, duck)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        recompute, anchor = sp["times"], "Spark SQL"
        res["duckdb_recompute_s"] = duck["times"]
    res["recompute_s"] = recompute
    combined = per_query = None
    if mode in ("combined", "both"):
        combined = maintain(engine, spark, data, refreshes, views, duck, f"{engine} all views")
        res["combined"] = combined
    if mode in ("per-query", "both"):
        per_query = {}
        for v in views:
            h.collect()
            per_query[v] = maintain(engine, spark, data, refreshes, [v], duck, f"{engine} {v}")
        res["per_query_runs"] = per_query
    table, summary = report(engine, views, recompute, combined, per_query, anchor)
    res.update(summary)
    res["table"] = table
    return res


def run(
    quick: bool,
    sf: float | None = None,
    engines: tuple[str, ...] = ("local", "spark"),
    n_refresh: int = 3,
    mode: str = "both",
    views: list[str] | None = None,
) -> dict[str, Any]:
    """The workload (`python -m bench` calls `run(quick)`): returns the result document."""
    notes: list[str] = []
    spark_mode = mode
    if sf is None and not quick and (h.machine()["mem_gib"] or 0) < SF1_MIN_GIB:
        # SF 1 with the 22 views needs about 50 GB on the local engine and hours of loading on local Spark
        sf, spark_mode = FALLBACK_SF, "combined"
        notes.append(
            f"SF 1 not run: the 22 views at SF 1 need about 50 GB on the local engine and this machine has "
            f"{h.machine()['mem_gib']} GiB; run at SF {FALLBACK_SF} instead (spark: the 22 views in one "
            "pipeline); `python -m bench.tpch --sf 1 --queries q01,q06` measures single views at SF 1"
        )
    sf = sf if sf is not None else h.sized(1.0, 0.05, quick, smoke=0.002)
    if h.skipped("spark"):
        engines = tuple(e for e in engines if e != "spark")
    views = views or list(tpch.VIEWS)
    with h.phase(f"dbgen sf={sf}"):
        data = tpch.generate(sf)
    refreshes = tpch.refreshes(data, n_refresh + WARMUP, seed=SEED)
    from bench.spark_scale import dbspark_src_hash

    out: dict[str, Any] = {
        "sf": sf,
        "refreshes": n_refresh,
        "warmup": WARMUP,
        "mode": mode,
        "seed": SEED,
        "dbspark_src": dbspark_src_hash(),
        "refresh_orders": tpch.refresh_size(data),
        "views": views,
        "engines": {},
    }
    tables, spark = [], None
    for engine in engines:
        if engine == "spark":
            from bench.spark_scale import start_spark

            spark, conf = start_spark()
            out["spark_conf"] = conf
        res = run_engine(
            engine, sf, n_refresh, spark_mode if engine == "spark" else mode, views, data, refreshes, spark
        )
        tables.append(res.pop("table"))
        out["engines"][engine] = res
    out["table"] = "\n".join(tables)
    out["notes"] = notes
    series = {}
    for engine, res in out["engines"].items():
        if res.get("combined", {}).get("steps"):
            ys = res["combined"]["steps"]
            series[f"dbspark {engine} (22 views)"] = (list(range(len(ys))), ys)
        rc = [sum(res["recompute_s"][v][i] for v in views) for i in range(len(refreshes))]
        series[f"{'Spark SQL' if engine == 'spark' else 'DuckDB'} recompute (22 queries)"] = (
            list(range(len(rc))),
            rc,
        )
    out["plot"] = [{"title": f"TPC-H SF{sf}: one RF1+RF2 refresh", "series": series, "xlabel": "refresh"}]
    out["plot_title"] = "tpch: maintained views vs recomputation"
    return out


def watch_memory(limit_gib: float) -> None:
    """Stop the process (exit code 3) when its resident memory passes `limit_gib`: the machine is shared."""
    import os
    import threading
    import time

    def rss() -> float:
        with open("/proc/self/status") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmRSS:")) / 2**20

    def watch() -> None:
        while rss() < limit_gib:
            time.sleep(0.2)
        print(
            f"\nSTOPPED: resident memory passed {limit_gib} GiB (--max-rss-gib)", file=sys.stderr, flush=True
        )
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.tpch", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sf", type=float, default=None, help="scale factor (default 1; --quick 0.05)")
    ap.add_argument("--engine", choices=("local", "spark", "both"), default="both")
    ap.add_argument("--refreshes", type=int, default=3, help="timed refreshes (plus one warm-up)")
    ap.add_argument("--mode", choices=("combined", "per-query", "both"), default="both")
    ap.add_argument("--queries", default=None, help="comma-separated subset, e.g. q01,q06")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--max-rss-gib",
        type=float,
        default=12.0,
        help="stop the run when this process's resident memory passes this (default 12)",
    )
    a = ap.parse_args(argv)
    watch_memory(a.max_rss_gib)
    engines = ("local", "spark") if a.engine == "both" else (a.engine,)
    views = a.queries.split(",") if a.queries else None
    try:
        res = run(a.quick, a.sf, engines, a.refreshes, a.mode, views)
    except h.Mismatch as e:
        print("\n" + "!" * 100 + f"\nRESULT MISMATCH: {e}\n" + "!" * 100, file=sys.stderr)
        return 1
    name = f"tpch-{'-'.join(engines)}-sf{res['sf']:g}"
    png = h.plot(name, a.quick, res.pop("plot"), res.pop("plot_title"))
    res["png"] = png.name
    print(res["table"])
    js = h.write_json(name, a.quick, res)
    print(f"  (results {js}, plot {png.name})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
