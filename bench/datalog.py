"""datalog: Datalog programs through `Pipeline.datalog`, from scratch and under edge inserts + deletes.

    path(x, y) :- edge(x, y).                reach(x) :- root(x).
    path(x, y) :- path(x, z), edge(z, y).    reach(y) :- reach(x), edge(x, y).

1. Transitive closure from scratch on a random graph (the issue's size is 5,000 nodes / 20,000 edges,
   about 24M pairs; sizes are given with `--sizes`, smaller ones first): dbspark local (the Datalog
   program, one pipeline step) vs DuckDB's recursive CTE with UNION on the same edges, in the same run.
2. On that pipeline, batches of 100 edge inserts + 100 edge deletes: per-batch time of the incremental
   step vs recomputing from scratch on the same engine (a fresh pipeline fed the whole edge set).
3. Reachability on Spark (`Pipeline(engine="spark")`), a random graph with cycles of `--spark-edges`
   edges: per-batch update vs recompute; Spark SQL's own `WITH RECURSIVE` is tried on the same data.

Every system runs in its own subprocess (`python -m bench.datalog --worker ...`) whose RSS is watched
(`DL_RSS_LIMIT_GIB`, default 6: the worker stops itself above it; the machine is shared). Results
are checked: closure and reach sizes + sha256 digests must agree between the systems (`Mismatch`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import harness as h
from bench.tc import Clock, digest, edges_at, make_graph, peak_gib, rss_now_gib
from dbspark.testing.datalog import REACH_FROM_ROOTS

CHANGE = 100
RSS_LIMIT_GIB = float(os.environ.get("DL_RSS_LIMIT_GIB", 6))


def RECURSION() -> str | None:  # noqa: N802 - read like a constant, set by `--recursion` for the workers
    """The reachability pipelines' recursion strategy (`Pipeline(recursion=...)`; None: the default)."""
    return os.environ.get("DL_RECURSION") or None


QUICK_SIZES = [(300, 1200)]
FULL_SIZES = [(1000, 4000), (5000, 20000)]
SCOPE_MAX_NODES = 1000  # the recursive-scope variant (closure_operator=False) runs up to this size

TC = """
.decl edge(x: number, y: number)
.input edge
.decl path(x: number, y: number)
.output path
path(x, y) :- edge(x, y).
path(x, y) :- path(x, z), edge(z, y).
"""
REACH = REACH_FROM_ROOTS
DUCK_TC = (
    "WITH RECURSIVE path(x, y) AS (SELECT x, y FROM edge UNION SELECT path.x, edge.y FROM path "
    "JOIN edge ON path.y = edge.x) SELECT x, y FROM path"
)
SPARK_REACH = (
    "WITH RECURSIVE reach(x) AS (SELECT x FROM root UNION SELECT edge.y FROM reach JOIN edge "
    "ON reach.x = edge.x) SELECT count(*) FROM reach"
)


# ---- workers (one per system, in a subprocess) -----------------------------------------------------------
def _watchdog() -> None:
    def watch() -> None:
        while True:
            if rss_now_gib() > RSS_LIMIT_GIB:
                print(json.dumps({"error": f"stopped: RSS above {RSS_LIMIT_GIB} GiB"}), flush=True)
                os._exit(3)
            time.sleep(0.1)

    threading.Thread(target=watch, daemon=True).start()


def _frame(pairs: list, cols: tuple[str, ...] = ("x", "y")) -> Any:
    import polars as pl

    arr = np.asarray(pairs, dtype=np.int64).reshape(-1, len(cols))
    return pl.DataFrame({c: arr[:, i] for i, c in enumerate(cols)})


def _tc_pipeline(
    edges: list, engine: str = "local", spark: Any = None, closure_operator: bool = True
) -> tuple[Any, Clock]:
    import dbspark

    p = (
        dbspark.Pipeline(engine=engine, spark=spark)
        if engine == "spark"
        else dbspark.Pipeline(engine="local")
    )
    p.datalog(TC, closure_operator=closure_operator)
    p.insert("edge", _frame(edges))
    with Clock() as c:
        p.step()
    return p, c


def _digest_view(p: Any, view: str, n: int) -> dict:
    df = p.view(view).to_zset().df if hasattr(p.view(view), "to_zset") else p.view(view).df
    if view == "path":
        return digest(df["x"].to_numpy(), df["y"].to_numpy(), n)
    return digest(np.zeros(df.height, dtype=np.int64), df["x"].to_numpy(), n)


def _run_batches(p: Any, view: str, c: Any, batches: list, n: int, heap: bool = False) -> dict:
    """The from-scratch timing `c`, then each batch of edge inserts and deletes as one timed step
    (`heap`: with the process's RssAnon after it)."""
    out: dict[str, Any] = {
        "scratch": {"wall": c.wall, "cpu": c.cpu},
        "scratch_digest": _digest_view(p, view, n),
        "batches": [],
    }
    for i, (ins, dels) in enumerate(batches, start=1):
        p.insert("edge", _frame(ins))
        p.delete("edge", _frame(dels))
        with Clock() as t:
            ch = p.step()
        out["batches"].append(
            {"b": i, "wall": t.wall, "cpu": t.cpu, "out_rows": ch[view].to_zset().df.height}
        )
        if heap:
            out["batches"][-1]["rss_anon_gib"] = rss_anon_gib()
    out["final_digest"] = _digest_view(p, view, n)
    return out


def worker_tc_inc(n: int, m: int, nb: int, closure_operator: bool = True) -> dict:
    """The Datalog pipeline as a user gets it (TC lowered to the closure operator), or with
    `closure_operator=False` (the doubly-incremental recursive scope)."""
    init, batches = make_graph(n, m, nb, CHANGE)
    p, c = _tc_pipeline(init, closure_operator=closure_operator)
    return _run_batches(p, "path", c, batches, n)


def worker_tc_recompute(n: int, m: int, nb: int, measure: list[int]) -> dict:
    init, batches = make_graph(n, m, nb, CHANGE)
    out: dict[str, Any] = {"batches": []}
    for b in measure:
        p, c = _tc_pipeline(edges_at(init, batches, b))
        out["batches"].append({"b": b, "wall": c.wall, "cpu": c.cpu})
        if b == nb:
            out["final_digest"] = _digest_view(p, "path", n)
        p.close()
    return out


def worker_duckdb(n: int, m: int, nb: int, measure: list[int]) -> dict:
    import duckdb

    init, batches = make_graph(n, m, nb, CHANGE)
    con = duckdb.connect()
    con.execute(f"SET threads = {os.cpu_count() or 1}")
    out: dict[str, Any] = {"batches": []}
    for b in [0, *measure]:
        ed = _frame(edges_at(init, batches, b))  # noqa: F841 - read by DuckDB's replacement scan
        con.execute("CREATE OR REPLACE TABLE edge AS SELECT * FROM ed")
        with Clock() as c:
            res = con.execute(DUCK_TC).pl()
        d = digest(res["x"].to_numpy(), res["y"].to_numpy(), n)
        if b == 0:
            out["scratch"], out["scratch_digest"] = {"wall": c.wall, "cpu": c.cpu}, d
        else:
            out["batches"].append({"b": b, "wall": c.wall, "cpu": c.cpu})
            if b == nb:
                out["final_digest"] = d
    return out


def _spark() -> Any:
    from pyspark.sql import SparkSession

    b = SparkSession.builder.master("local[2]").appName("dbspark-bench-datalog")
    for k, v in {
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.driver.memory": "2g",
        "spark.sql.adaptive.enabled": "false",
        "spark.log.level": "ERROR",
    }.items():
        b = b.config(k, v)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    return s


def _reach_graph(n: int, m: int, nb: int) -> tuple[list, list, list]:
    init, batches = make_graph(n, m, nb, CHANGE, seed=7)
    roots = [(i,) for i in range(0, n, max(1, n // 10))][:10]
    return init, batches, roots


def _reach_pipeline(spark: Any, edges: list, roots: list) -> tuple[Any, Clock]:
    import dbspark

    p = (
        dbspark.Pipeline(engine="spark", spark=spark, recursion=RECURSION())
        if spark is not None
        else dbspark.Pipeline(engine="local", recursion=RECURSION())
    )
    p.datalog(REACH)
    p.insert("edge", _frame(edges))
    p.insert("root", _frame(roots, ("x",)))
    with Clock() as c:
        p.step()
    return p, c


def worker_spark_inc(n: int, m: int, nb: int, local: bool = False) -> dict:
    """The graph loaded by rows pushed from Python (placement `auto`: in the driver on `local[n]`), then
    the batches. The driver's heap (RssAnon) is recorded before the pipeline, after the load and after
    each batch: what a batch adds to it should not grow with the graph."""
    spark = None if local else _spark()
    init, batches, roots = _reach_graph(n, m, nb)
    before = rss_anon_gib()
    p, c = _reach_pipeline(spark, init, roots)
    del init
    after_load = rss_anon_gib()
    out = _run_batches(p, "reach", c, batches, n, heap=True)
    out["rss_anon_gib"] = {
        "before": before,
        "after_load": after_load,
        "batches_max": max(b["rss_anon_gib"] for b in out["batches"]),
    }
    return out


def rss_anon_gib() -> float:
    """The process's anonymous resident memory (its heap: not the memory-mapped files it reads)."""
    return rss_now_gib("RssAnon")


def _write_reach_inputs(n: int, m: int, nb: int, d: str) -> None:
    """The graph as a user's files: the edges as Parquet, the roots and batches as JSON (in a process of
    its own, so that the worker's memory never held the edges)."""
    init, batches, roots = _reach_graph(n, m, nb)
    _frame(init).write_parquet(f"{d}/edges.parquet")
    Path(f"{d}/rest.json").write_text(json.dumps({"batches": batches, "roots": roots}))


def worker_spark_inc_cluster(n: int, m: int, nb: int) -> dict:
    """Reachability as a Spark user loads it: the edges a DataFrame read from Parquet, the from-scratch
    step on the cluster (placement `cluster` for it: what `auto` does past `spark.dbspark.driver_rows`, on a
    cluster 100,000 rows),
    the batches pushed from Python (placement `auto`: in the driver). The driver's heap (RssAnon) is recorded before the pipeline, after the load and
    after each batch, each before any view is read into Python."""
    import multiprocessing
    import tempfile

    import dbspark

    with tempfile.TemporaryDirectory(prefix="dl-reach-") as d:
        proc = multiprocessing.get_context("spawn").Process(target=_write_reach_inputs, args=(n, m, nb, d))
        proc.start()
        proc.join()
        rest = json.loads(Path(f"{d}/rest.json").read_text())
        spark = _spark()
        mem = {"before": rss_anon_gib()}
        p = dbspark.Pipeline(engine="spark", spark=spark, recursion=RECURSION())
        p.datalog(REACH)
        p.insert("edge", spark.read.parquet(f"{d}/edges.parquet"))
        p.insert("root", _frame(rest["roots"], ("x",)))
        spark.conf.set("spark.dbspark.placement", "cluster")  # (on local[n] `auto` reads them in)
        with Clock() as c:
            p.step()
        spark.conf.unset("spark.dbspark.placement")
        mem["after_load"] = rss_anon_gib()
        out: dict[str, Any] = {"scratch": {"wall": c.wall, "cpu": c.cpu}, "batches": []}
        for i, (ins, dels) in enumerate(rest["batches"], start=1):
            p.insert("edge", _frame(ins))
            p.delete("edge", _frame(dels))
            with Clock() as t:
                p.step()
            out["batches"].append({"b": i, "wall": t.wall, "cpu": t.cpu, "rss_anon_gib": rss_anon_gib()})
        mem["batches_max"] = max(b["rss_anon_gib"] for b in out["batches"])
        out["rss_anon_gib"] = mem
        out["final_digest"] = _digest_view(p, "reach", n)
        p.close()
    return out


def worker_spark_recompute(n: int, m: int, nb: int, measure: list[int], local: bool = False) -> dict:
    spark = None if local else _spark()
    init, batches, roots = _reach_graph(n, m, nb)
    out: dict[str, Any] = {"batches": []}
    for b in measure:
        p, c = _reach_pipeline(spark, edges_at(init, batches, b), roots)
        out["batches"].append({"b": b, "wall": c.wall, "cpu": c.cpu})
        if b == nb:
            out["final_digest"] = _digest_view(p, "reach", n)
        p.close()
    return out


def worker_spark_cte(n: int, m: int, nb: int) -> dict:
    spark = _spark()
    init, _, roots = _reach_graph(n, m, nb)
    spark.createDataFrame(_frame(init).to_pandas()).createOrReplaceTempView("edge")
    spark.createDataFrame(_frame(roots, ("x",)).to_pandas()).createOrReplaceTempView("root")
    with Clock() as c:
        try:
            rows = spark.sql(SPARK_REACH).collect()
            return {"scratch": {"wall": c.wall, "cpu": c.cpu}, "count": rows[0][0]}
        except Exception as e:  # noqa: BLE001 - report what Spark says
            first = str(e).strip().splitlines()[0][:300]
            return {"error": f"{type(e).__name__}: {first}"}


WORKERS = {
    "tc-inc": worker_tc_inc,
    "tc-recompute": worker_tc_recompute,
    "duckdb": worker_duckdb,
    "tc-inc-scope": lambda n, m, nb: worker_tc_inc(n, m, nb, closure_operator=False),
    "reach-local-inc": lambda n, m, nb: worker_spark_inc(n, m, nb, local=True),
    "reach-local-recompute": lambda n, m, nb, ms: worker_spark_recompute(n, m, nb, ms, local=True),
    "spark-inc": worker_spark_inc,
    "spark-inc-cluster": worker_spark_inc_cluster,
    "spark-recompute": worker_spark_recompute,
    "spark-cte": worker_spark_cte,
}


def worker_main(argv: list[str]) -> None:
    _watchdog()
    name, n, m, nb, *rest = argv
    args: list[Any] = [int(n), int(m), int(nb)]
    if rest:
        args.append([int(x) for x in rest[0].split(",")])
    res = WORKERS[name](*args)
    res["peak_rss_gib"] = peak_gib()
    print(json.dumps(res, default=h._json_default), flush=True)


def spawn(name: str, n: int, m: int, nb: int, timeout: float, measure: list[int] | None = None) -> dict:
    argv: list[Any] = [name, n, m, nb, *([",".join(map(str, measure))] if measure else [])]
    return h.spawn_worker("bench.datalog", argv, timeout, f"{name} {n}/{m}")


# ---- the workload ------------------------------------------------------------------------------------------
def _med(bs: list[dict], k: str) -> float | None:
    return statistics.median(b[k] for b in bs) if bs else None


def _agree(what: str, a: dict, b: dict, key: str) -> bool:
    if key not in a or key not in b:
        return False
    if a[key] != b[key]:
        raise h.Mismatch(f"{what}: {a[key]} != {b[key]}")
    return True


def _pair(r: dict | None) -> str:
    return f"{h.fmt_s(r['wall'])} ({h.fmt_s(r['cpu'])} cpu)" if r else "-"


def _med_pair(bs: list[dict]) -> str:
    return f"{h.fmt_s(_med(bs, 'wall'))} ({h.fmt_s(_med(bs, 'cpu'))} cpu)" if bs else "-"


def _heap(r: dict) -> str:
    """The driver's heap before the pipeline / after the load / at most after a batch, if recorded."""
    mem = r.get("rss_anon_gib")
    if not mem:
        return ""
    return f" (heap {mem['before']:.2f} / {mem['after_load']:.2f} / {mem['batches_max']:.2f} GiB)"


def _cluster_row(r: dict, rw: float | None) -> list[list[str]]:
    """The row of the cluster-load run, if it ran: its times, and the driver heap before / after the
    load / at most over the batches."""
    if not r:
        return []
    if "error" in r:
        return [["dbspark spark, edges loaded as a DataFrame (cluster)", r["error"][:120], "-", "-"]]
    iw = _med(r["batches"], "wall")
    return [
        [
            f"dbspark spark, edges loaded as a DataFrame (cluster){_heap(r)}",
            h.fmt_s(r["scratch"]["wall"]),
            h.fmt_s(iw),
            h.fmt_x(h.ratio(rw, iw)) if iw and rw else "-",
        ]
    ]


def render(res: dict) -> str:
    """The result tables (wall time, with the process's CPU time: the machine is shared, so CPU time is the
    steadier measure for the in-process systems; Spark's work is in its JVM, so only wall counts there)."""
    tc_rows, ratio_rows = [], []
    for z in res["sizes"]:
        inc, rec, duck = z["incremental"], z["recompute"], z["duckdb"]
        tag = f"{z['n']:,}/{z['m']:,}"
        size = inc.get("scratch_digest", duck.get("scratch_digest", {})).get("size")
        both = "scratch" in inc and "scratch" in duck
        tc_rows.append(
            [
                tag,
                f"{size:,}" if size else "-",
                _pair(inc.get("scratch")),
                _pair(duck.get("scratch")),
                h.fmt_x(h.ratio(duck["scratch"]["wall"], inc["scratch"]["wall"])) if both else "-",
                h.fmt_x(h.ratio(duck["scratch"]["cpu"], inc["scratch"]["cpu"])) if both else "-",
                f"{inc.get('peak_rss_gib', float('nan')):.2f} GiB",
            ]
        )
        ib, rb, db = inc.get("batches", []), rec.get("batches", []), duck.get("batches", [])
        ratio = lambda a, b, k: h.fmt_x(h.ratio(_med(a, k), _med(b, k))) if a and b else "-"  # noqa: E731
        sb = z.get("scope", {}).get("batches", [])
        ratio_rows.append(
            [
                tag,
                _med_pair(ib),
                _med_pair(rb),
                _med_pair(db),
                ratio(rb, ib, "wall"),
                ratio(rb, ib, "cpu"),
                ratio(db, ib, "cpu"),
                f"{statistics.median(b['out_rows'] for b in ib):,.0f}" if ib else "-",
                f"{_pair(z['scope'].get('scratch'))} / {_med_pair(sb)}" if sb else "not run",
            ]
        )
    text = ""
    if res["sizes"]:
        text += h.table(
            "datalog tc from scratch: dbspark local (the Datalog pipeline: TC lowered to the closure operator) vs DuckDB recursive CTE (UNION)",
            [
                "nodes/edges",
                "closure",
                "dbspark",
                "duckdb",
                "duckdb/dbspark wall",
                "duckdb/dbspark cpu",
                "dbspark peak RSS",
            ],
            tc_rows,
        )
        text += h.table(
            f"datalog tc: per batch of {CHANGE} edge inserts + {CHANGE} deletes (median)",
            [
                "nodes/edges",
                "incremental step",
                "dbspark recompute",
                "duckdb recompute",
                "recompute/inc wall",
                "recompute/inc cpu (goal >= 100x)",
                "duckdb/inc cpu",
                "|Δpath| per batch",
                "recursive scope (closure_operator=False): scratch / batch",
            ],
            ratio_rows,
        )
    sp = res.get("spark")
    if sp:
        sinc, srec, scte = sp["incremental"], sp["recompute"], sp["spark_cte"]
        iw, rw = _med(sinc.get("batches", []), "wall"), _med(srec.get("batches", []), "wall")
        text += h.table(
            f"datalog reach on Spark (local[2]): {sp['n']:,} nodes / {sp['m']:,} edges with cycles, "
            f"10 roots, batches of {CHANGE} + {CHANGE} edge changes (wall)",
            ["system", "from scratch", "per batch (median)", "recompute / incremental"],
            [
                [
                    "dbspark spark incremental" + _heap(sinc),
                    h.fmt_s(sinc.get("scratch", {}).get("wall")),
                    h.fmt_s(iw),
                    h.fmt_x(h.ratio(rw, iw)) if iw and rw else "-",
                ],
                ["dbspark spark recompute", "-", h.fmt_s(rw), "-"],
                *_cluster_row(sp.get("cluster_load") or {}, rw),
                [
                    "Spark SQL WITH RECURSIVE (UNION)",
                    h.fmt_s(scte.get("scratch", {}).get("wall")),
                    scte.get("error", "-")[:120],
                    "-",
                ],
            ],
        )
    lr = res.get("local_reach")
    if lr:
        ib, rb = lr["incremental"].get("batches", []), lr["recompute"].get("batches", [])
        text += h.table(
            f"datalog reach on the local engine: {lr['n']:,} nodes / {lr['m']:,} edges, 10 roots, "
            f"batches of {CHANGE} + {CHANGE}",
            ["system", "from scratch", "per batch (median)", "recompute / inc wall", "recompute / inc cpu"],
            [
                [
                    "dbspark local incremental",
                    _pair(lr["incremental"].get("scratch")),
                    _med_pair(ib),
                    h.fmt_x(h.ratio(_med(rb, "wall"), _med(ib, "wall"))) if ib and rb else "-",
                    h.fmt_x(h.ratio(_med(rb, "cpu"), _med(ib, "cpu"))) if ib and rb else "-",
                ],
                ["dbspark local recompute", "-", _med_pair(rb), "-", "-"],
            ],
        )
    return text


def run(
    quick: bool,
    sizes: list[tuple[int, int]] | None = None,
    nb: int | None = None,
    spark_edges: int | None = None,
    timeout: float = 1800,
    reach_edges: int | None = None,
    cluster_load: bool = False,
) -> dict:
    sizes = sizes if sizes is not None else h.sized(FULL_SIZES, QUICK_SIZES, quick, smoke=[(60, 200)])
    nb = nb or h.sized(5, 3, quick)
    if spark_edges is None and not h.skipped("spark"):
        spark_edges = h.sized(100_000, None, quick)
    if reach_edges is None:
        reach_edges = h.sized(100_000, 20_000, quick, smoke=2_000)
    out_sizes, notes = [], []
    for n, m in sizes:
        measure = sorted({1, nb})
        inc = spawn("tc-inc", n, m, nb, timeout)
        rec = spawn("tc-recompute", n, m, nb, timeout, measure)
        duck = spawn("duckdb", n, m, nb, timeout, measure)
        scope = spawn("tc-inc-scope", n, m, nb, timeout) if n <= SCOPE_MAX_NODES else {}
        for k, r in (
            ("dbspark incremental", inc),
            ("dbspark recompute", rec),
            ("duckdb", duck),
            ("dbspark recursive scope", scope),
        ):
            if "error" in r:
                notes.append(f"{n}/{m} {k}: {r['error']}")
        v0 = _agree(f"tc {n}/{m} from scratch", inc, duck, "scratch_digest")
        v1 = _agree(f"tc {n}/{m} after batch {nb}", inc, duck, "final_digest") and _agree(
            f"tc {n}/{m} recompute", rec, duck, "final_digest"
        )
        if "final_digest" in scope:
            v1 = v1 and _agree(f"tc {n}/{m} recursive scope", scope, duck, "final_digest")
        out_sizes.append(
            {
                "n": n,
                "m": m,
                "batches": nb,
                "incremental": inc,
                "recompute": rec,
                "duckdb": duck,
                "scope": scope,
                "verified": {"scratch": v0, "final": v1},
            }
        )
    spark_res = None
    if spark_edges:
        sm = spark_edges
        sn = sm // 2
        snb = nb  # (the graph's batches depend on their count: runs with different --batches differ)
        sinc = spawn("spark-inc", sn, sm, snb, timeout)
        srec = spawn("spark-recompute", sn, sm, snb, timeout, [snb])
        scte = spawn("spark-cte", sn, sm, snb, 900)
        scl = spawn("spark-inc-cluster", sn, sm, snb, timeout) if cluster_load else {}
        sv = _agree("spark reach final", sinc, srec, "final_digest")
        if cluster_load:
            sv = sv and _agree("spark reach final, cluster load", scl, srec, "final_digest")
        if "count" in scte and "scratch_digest" in sinc and scte["count"] != sinc["scratch_digest"]["size"]:
            raise h.Mismatch(f"spark reach: CTE {scte['count']} != dbspark {sinc['scratch_digest']['size']}")
        spark_res = {
            "n": sn,
            "m": sm,
            "batches": snb,
            "incremental": sinc,
            "recompute": srec,
            "spark_cte": scte,
            "cluster_load": scl,
            "verified": sv,
        }
    local_reach = None
    if reach_edges:
        rn, rnb = reach_edges // 2, 5
        linc = spawn("reach-local-inc", rn, reach_edges, rnb, timeout)
        lrec = spawn("reach-local-recompute", rn, reach_edges, rnb, timeout, [1, rnb])
        local_reach = {
            "n": rn,
            "m": reach_edges,
            "batches": rnb,
            "incremental": linc,
            "recompute": lrec,
            "verified": _agree("local reach final", linc, lrec, "final_digest"),
        }
    res = {
        "params": {
            "change": CHANGE,
            "batches": nb,
            "sizes": sizes,
            "spark_edges": spark_edges,
            "reach_edges": reach_edges,
            "recursion": RECURSION() or "default",
        },
        "sizes": out_sizes,
        "spark": spark_res,
        "local_reach": local_reach,
        "notes": notes,
        "verified": True,
    }
    res["table"] = render(res)
    res["plot"] = [
        {
            "title": f"tc {z['n']:,}/{z['m']:,}",
            "xlabel": "batch",
            "ylabel": "CPU time per batch (s)",
            "series": {
                k: ([b["b"] for b in z[k].get("batches", [])], [b["cpu"] for b in z[k].get("batches", [])])
                for k in ("incremental", "recompute", "duckdb")
                if z[k].get("batches")
            },
        }
        for z in out_sizes
    ] or [{"title": "no TC size ran", "series": {}}]
    res["plot_title"] = f"datalog: CPU time per batch of {CHANGE} + {CHANGE} edge changes"
    return res


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker_main(sys.argv[sys.argv.index("--worker") + 1 :])
    elif "--render" in sys.argv:  # re-print the tables of a result JSON
        print(render(json.loads(Path(sys.argv[sys.argv.index("--render") + 1]).read_text())))
    else:
        ap = argparse.ArgumentParser(prog="python -m bench.datalog")
        ap.add_argument("--quick", action="store_true")
        ap.add_argument("--sizes", help="e.g. 500x2000,1000x4000 ('none': only the Spark part)")
        ap.add_argument("--batches", type=int)
        ap.add_argument("--spark-edges", type=int, default=0)
        ap.add_argument("--reach-edges", type=int, default=0, help="reachability on the local engine")
        ap.add_argument(
            "--cluster-load",
            action="store_true",
            help="also load the Spark reachability's edges as a DataFrame from Parquet (on the cluster)",
        )
        ap.add_argument("--recursion", choices=["nested", "dred", "auto"], help="the reachability's strategy")
        a = ap.parse_args()
        if a.recursion:
            os.environ["DL_RECURSION"] = a.recursion  # (the workers inherit it)
        sz = None
        if a.sizes == "none":
            sz = []
        elif a.sizes:
            sz = [tuple(int(v) for v in s.split("x")) for s in a.sizes.split(",")]
        res = run(
            a.quick, sz, a.batches, a.spark_edges, reach_edges=a.reach_edges, cluster_load=a.cluster_load
        )  # type: ignore[arg-type]
        del res["plot"], res["plot_title"]  # `python -m bench datalog` draws them
        print(res["table"])
        for note in res["notes"]:
            print("note:", note)
        tag = "datalog" if res["sizes"] else "datalog-spark" if res["spark"] else "datalog-reach"
        print("written:", h.write_json(tag, a.quick, res))
