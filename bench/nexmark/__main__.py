"""Nexmark on dbspark: events per second of each query on each engine, beside Spark Structured Streaming
running the same query on the same events where it can, and the state's size over the run.

    python -m bench.nexmark                              # 1M events, 10 batches, every query, both engines
    python -m bench.nexmark --events 10000000 --batch 500000 --queries q0,q7,q8 --engines local
    python -m bench.nexmark --events 100000 --no-anchor  # a quick run

The events (`bench/nexmark/generator.py`, seed 2026) are written once as Parquet, one file per batch and
stream; every system reads the same files: dbspark a batch per step (the local engine through Polars,
the Spark engine as Spark DataFrames), Structured Streaming one file per trigger (`maxFilesPerTrigger`,
`availableNow`, a `noop` sink, the date_time watermark at 4 s as the tables' lateness). A query runs in
a fresh pipeline of its own; q13's side table (10,000 rows) is loaded in the first step.

Reported per query and engine: events/s (all events over the sum of the steps' wall times; CPU beside
it), the state in rows after the first batch, at its largest and at the end (flat when the lateness
bounds it), and the anchor's events/s, or why it cannot run the query. Every query's changes, summed
over the run, are checked against DuckDB's query over all the events (`--no-check` skips it); a
mismatch exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from bench.nexmark.generator import events
from bench.nexmark.queries import BY_NAME, LATENESS, NOT_WRITTEN, QUERIES, TABLES, Query
from bench.tc import Clock

STREAMS = ("person", "auction", "bid")
SIDE = pl.DataFrame({"key": range(10_000), "value": [f"v{k}" for k in range(10_000)]})


def write_events(root: Path, total: int, batch: int, seed: int) -> int:
    """The events as Parquet files, root/<stream>/batch-NNNNN.parquet; returns the number of batches."""
    n = 0
    for first in range(0, total, batch):
        ev = events(first, min(batch, total - first), seed)
        for name, df in ev.tables().items():
            d = root / name
            d.mkdir(parents=True, exist_ok=True)
            df.write_parquet(d / f"batch-{n:05d}.parquet")
        n += 1
    return n


def ddl(q: Query) -> str:
    return TABLES.format(late=LATENESS) + f"CREATE VIEW {q.name} AS {q.sql};"


def run_dbspark(q: Query, engine: str, root: Path, batches: int, spark: Any) -> dict[str, Any]:
    import dbspark
    from dbspark.testing.sql_oracle import view_frame

    p = (
        dbspark.Pipeline(engine=engine, spark=spark)
        if engine == "spark"
        else dbspark.Pipeline(engine="local")
    )
    out: dict[str, Any] = {"steps": [], "state_rows": []}
    changes: list[pl.DataFrame] = []
    try:
        p.sql(ddl(q))
        for b in range(batches):
            with Clock() as c:
                if b == 0:
                    p.insert("side_input", SIDE)
                for name in STREAMS:
                    f = root / name / f"batch-{b:05d}.parquet"
                    p.insert(name, spark.read.parquet(str(f)) if engine == "spark" else pl.read_parquet(f))
                got = p.step()[q.name]
            out["steps"].append({"wall": c.wall, "cpu": c.cpu})
            out["state_rows"].append(p.state_rows())
            changes.append(view_frame(got))
    finally:
        p.close()
    summed = pl.concat(changes, how="vertical_relaxed")
    data = [c for c in summed.columns if c != "__w"]
    out["result"] = summed.group_by(data).agg(pl.col("__w").sum()).filter(pl.col("__w") != 0)
    return out


def oracle(q: Query, root: Path) -> pl.DataFrame:
    con = duckdb.connect()
    for name in STREAMS:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{root / name}/*.parquet')")
    con.register("side_input", SIDE.to_arrow())
    return con.sql(q.duckdb or q.sql).pl()


def run_anchor(q: Query, root: Path, spark: Any, events_total: int) -> dict[str, Any]:
    """Structured Streaming over the same files; {'eps': ...} or {'cannot': why}."""
    if q.spark == "":
        return {"cannot": "not written for Structured Streaming (see bench/nexmark/queries.py)"}
    from pyspark.errors import PySparkException

    text = q.spark if q.spark is not None else q.sql
    try:
        for name in STREAMS:
            schema = spark.read.parquet(str(root / name / "batch-00000.parquet")).schema
            df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(root / name))
            for c in ("date_time", "expires"):  # an event time is a TIMESTAMP (not NTZ) for Spark
                if c in df.columns:
                    df = df.withColumn(c, df[c].cast("timestamp"))
            df.withWatermark("date_time", "4 seconds").createOrReplaceTempView(name)
        spark.createDataFrame(SIDE.to_pandas()).createOrReplaceTempView("side_input")
        check = tempfile.mkdtemp(prefix="nexmark-ss-")
        start = time.perf_counter()
        query = (
            spark.sql(text)
            .writeStream.format("noop")
            .outputMode("append")
            .option("checkpointLocation", check)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        wall = time.perf_counter() - start
        shutil.rmtree(check, ignore_errors=True)
        return {"eps": events_total / wall, "wall": wall}
    except PySparkException as e:
        return {"cannot": str(e).strip().splitlines()[0][:200]}
    except Exception as e:  # a streaming query's failure surfaces as a Py4J error
        return {"cannot": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--queries", default=",".join(q.name for q in QUERIES))
    ap.add_argument("--engines", default="local,spark")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--no-anchor", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument(
        "--driver-memory",
        default="8g",
        help="the Spark driver's heap (Structured Streaming at 10M events needs more than Spark's 1g)",
    )
    a = ap.parse_args(argv)
    engines = a.engines.split(",")
    spark = None
    if "spark" in engines or not a.no_anchor:
        from dbspark.engines.spark.session import get_session

        os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--driver-memory {a.driver_memory} pyspark-shell")
        spark = get_session(None, None).spark
    root = Path(tempfile.mkdtemp(prefix="nexmark-"))
    results: dict[str, Any] = {"events": a.events, "batch": a.batch, "queries": {}}
    bad = []
    try:
        with Clock() as gen:
            batches = write_events(root, a.events, a.batch, a.seed)
        print(f"{a.events:,} events in {batches} batches written in {gen.wall:.1f} s", file=sys.stderr)
        for name in a.queries.split(","):
            if name in NOT_WRITTEN:
                results["queries"][name] = {"not written": NOT_WRITTEN[name]}
                continue
            q = BY_NAME[name]
            row: dict[str, Any] = {}
            want = None if a.no_check else oracle(q, root)
            for engine in engines:
                try:
                    r = run_dbspark(q, engine, root, batches, spark)
                except Exception as e:  # a query outside the SQL surface: reported, not fatal
                    row[engine] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
                    continue
                if want is not None:
                    from dbspark.testing.sql_oracle import compare_frames

                    differ = compare_frames(r.pop("result"), want, f"{name} on {engine}", check_names=False)
                    if differ is not None:
                        bad.append(differ)
                else:
                    r.pop("result")
                wall = sum(s["wall"] for s in r["steps"])
                cpu = sum(s["cpu"] for s in r["steps"])
                rows = r["state_rows"]
                r.update(eps=a.events / wall, eps_cpu=a.events / cpu, wall=wall,
                         state_first=rows[0], state_max=max(rows), state_last=rows[-1],
                         step_median=statistics.median(s["wall"] for s in r["steps"]))  # fmt: skip
                row[engine] = r
                print(f"{name} {engine}: {r['eps']:,.0f} events/s", file=sys.stderr)
            if not a.no_anchor:
                row["structured_streaming"] = run_anchor(q, root, spark, a.events)
            results["queries"][name] = row
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(results, engines, not a.no_anchor)
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1, default=str))
    if bad:
        print("RESULT MISMATCH\n" + "\n".join(bad), file=sys.stderr)
        sys.exit(1)


def report(results: dict[str, Any], engines: list[str], anchor: bool) -> None:
    print(f"Nexmark, {results['events']:,} events in batches of {results['batch']:,}")
    head = ["query"] + [f"{e} events/s (CPU)  state rows first/max/last" for e in engines]
    print(" | ".join(head) + (" | Structured Streaming events/s" if anchor else ""))
    for name, row in results["queries"].items():
        if "not written" in row:
            print(f"{name} | not written: {row['not written']}")
            continue
        cells = [name]
        for e in engines:
            r = row.get(e, {})
            if "error" in r:
                cells.append(f"error: {r['error']}")
            else:
                cells.append(
                    f"{r['eps']:,.0f} ({r['eps_cpu']:,.0f})  "
                    f"{r['state_first']:,}/{r['state_max']:,}/{r['state_last']:,}"
                )
        if anchor:
            ss = row.get("structured_streaming", {})
            cells.append(f"{ss['eps']:,.0f}" if "eps" in ss else f"cannot: {ss.get('cannot')}")
        print(" | ".join(cells))


if __name__ == "__main__":
    main()
