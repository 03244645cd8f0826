"""join_groupby: throughput of the incremental `R.join(S, on="k").aggregate(by="g", n="count")`.

R(k, g) and S(k, v) hold N rows each (full: N = 1M; --quick: 200k), keys uniform in [0, N) so the join has
about N rows, g in [0, 1000). After the load (not timed), batches of 10k changed rows are applied, each
2500 inserts and 2500 deletes of existing rows into R and the same into S; the time from handing the batch
to the system until the view's change is available is measured per batch. Throughput = 10k rows / time
(goal for dbspark: >= 1M rows/s). Systems, all in this process except pydbsp:

* dbspark (local engine): the circuit above, changes pushed as Polars frames with a `weight` column.
* hand-written delta: the strongest hand-coded incremental view in ~50 lines of dict code:
  Δ(R⋈S) = ΔR⋈S + R'⋈ΔS, keeping only what COUNT(*) needs (number of S rows per k, R's g-multiset per k).
* DuckDB: applies the batch to its tables and recomputes the view from scratch (SELECT ... GROUP BY g).
* Pathway (if installed): the same join + groupby/count over a streaming Python connector, one commit
  per batch, waiting for the output to catch up before the next batch.
* pandas: applies the batch to its frames and recomputes the view (merge + groupby size).
* Spark SQL (if local Spark starts): recomputes the view over the final R and S (Parquet), median of 3.
* pydbsp (pure-Python DBSP, needs Python >= 3.12, run in a subprocess from a venv): at a smaller N, next
  to dbspark and the hand-written delta on the same smaller data.
* Spark Structured Streaming (`bench.spark_anchors`): it cannot delete, so it runs the append-only form
  of the workload (the batches' R inserts only, S static) next to dbspark's local and spark engines on
  the same stream.

Every system's final view (count per g) must be equal. `python -m bench.join_groupby --profile [--quick]`
profiles the dbspark side with pyinstrument and prints its hot spots.
"""

from __future__ import annotations

import glob
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

import dbspark
from bench import harness as h
from bench import spark_anchors

SEED = 4242
GROUPS = 1000
BATCH = 10_000
LOAD_PUSHES = 2
PYDBSP_VENV = Path(os.environ.get("BENCH_PYDBSP_VENV", "/tmp/pydbsp-venv"))
RUNNER = Path(__file__).with_name("pydbsp_runner.py")


# ---- data ------------------------------------------------------------------------------------------
@dataclass
class Data:
    n: int
    r: pl.DataFrame  # rid, k, g
    s: pl.DataFrame  # v, k
    batches: list[tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]]  # R ins, R del, S ins, S del

    def final(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """R(rid, k, g) and S(v, k) after every batch."""
        r, s = self.r, self.s
        for ri, rd, si, sd in self.batches:
            r = pl.concat([r.join(rd.select("rid"), on="rid", how="anti"), ri])
            s = pl.concat([s.join(sd.select("v"), on="v", how="anti"), si])
        return r, s

    def change(self, i: int) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Batch i as dbspark / the hand-written delta see it: R(k, g, weight) and S(k, v, weight)."""
        ri, rd, si, sd = self.batches[i]
        w = lambda df, x: df.with_columns(pl.lit(x, pl.Int64).alias("weight"))  # noqa: E731
        return (
            pl.concat([w(ri.select("k", "g"), 1), w(rd.select("k", "g"), -1)]),
            pl.concat([w(si.select("k", "v"), 1), w(sd.select("k", "v"), -1)]),
        )


def make_data(n: int, nbatches: int, seed: int = SEED) -> Data:
    rng = np.random.default_rng(seed + n)
    r = pl.DataFrame({"rid": np.arange(n), "k": rng.integers(0, n, n), "g": rng.integers(0, GROUPS, n)})
    s = pl.DataFrame({"v": np.arange(n), "k": rng.integers(0, n, n)})
    q = BATCH // 4
    r_order, s_order = rng.permutation(n), rng.permutation(n)
    batches = []
    for b in range(nbatches):
        ids = np.arange(n + b * q, n + (b + 1) * q)
        ri = pl.DataFrame({"rid": ids, "k": rng.integers(0, n, q), "g": rng.integers(0, GROUPS, q)})
        si = pl.DataFrame({"v": ids, "k": rng.integers(0, n, q)})
        batches.append((ri, r[r_order[b * q : (b + 1) * q]], si, s[s_order[b * q : (b + 1) * q]]))
    return Data(n, r, s, batches)


# ---- systems -----------------------------------------------------------------------------------------
def view_circuit() -> dbspark.Circuit:
    c = dbspark.Circuit()
    R = c.input("R", {"k": "int64", "g": "int64"})
    S = c.input("S", {"k": "int64", "v": "int64"})
    c.output("v", R.join(S, on="k").aggregate(by="g", n="count"))
    return c


def run_dbspark(d: Data) -> tuple[list[float], pl.DataFrame, float]:
    rt = view_circuit().run()
    t0 = time.perf_counter()
    for p in range(LOAD_PUSHES):
        lo, hi = p * d.n // LOAD_PUSHES, (p + 1) * d.n // LOAD_PUSHES
        rt.push("R", d.r[lo:hi].select("k", "g"), 1)
        rt.push("S", d.s[lo:hi].select("k", "v"), 1)
        rt.step()
    load = time.perf_counter() - t0
    changes = [d.change(i) for i in range(len(d.batches))]

    def step(i: int) -> None:
        dr, ds = changes[i]
        rt.push("R", dr)
        rt.push("S", ds)
        rt.step()

    times = h.repeat(step, len(changes))
    return times, rt.view("v").to_polars().select("g", "n"), load


class HandDelta:
    """COUNT(*) of R ⋈ S GROUP BY g from changes: Δ(R⋈S) = ΔR ⋈ S + R' ⋈ ΔS (R' = R + ΔR).

    COUNT needs neither R's nor S's other columns: S is kept as the number of rows per key, R as the
    multiset of g per key."""

    def __init__(self) -> None:
        self.s_count: dict[int, int] = {}  # k -> rows of S with key k
        self.r_groups: dict[int, dict[int, int]] = {}  # k -> {g: rows of R with key k and group g}
        self.count: Counter[int] = Counter()  # g -> the view

    def apply(self, dr: pl.DataFrame, ds: pl.DataFrame) -> None:
        s_count, r_groups, count = self.s_count, self.r_groups, self.count
        dr = dr.group_by("k", "g").agg(pl.col("weight").sum())  # consolidate the change (vectorized)
        for k, g, w in zip(dr["k"].to_list(), dr["g"].to_list(), dr["weight"].to_list(), strict=True):
            c = s_count.get(k)
            if c:
                count[g] += w * c  # ΔR ⋈ S
            m = r_groups.get(k)
            if m is None:
                if w:
                    r_groups[k] = {g: w}
                continue
            nw = m.get(g, 0) + w
            if nw:
                m[g] = nw
            else:
                del m[g]
                if not m:
                    del r_groups[k]
        ds = ds.group_by("k").agg(pl.col("weight").sum())
        for k, w in zip(ds["k"].to_list(), ds["weight"].to_list(), strict=True):
            m = r_groups.get(k)
            if m:
                for g, c in m.items():
                    count[g] += w * c  # R' ⋈ ΔS
            nc = s_count.get(k, 0) + w
            if nc:
                s_count[k] = nc
            else:
                s_count.pop(k, None)

    def view(self) -> pl.DataFrame:
        return h.counts_frame(self.count)


def run_hand(d: Data) -> tuple[list[float], pl.DataFrame, float]:
    hd = HandDelta()
    t0 = time.perf_counter()
    hd.apply(
        d.r.select("k", "g").with_columns(pl.lit(1, pl.Int64).alias("weight")),
        d.s.select("k", "v").with_columns(pl.lit(1, pl.Int64).alias("weight")),
    )
    load = time.perf_counter() - t0
    changes = [d.change(i) for i in range(len(d.batches))]
    times = h.repeat(lambda i: hd.apply(*changes[i]), len(changes))
    return times, hd.view(), load


VIEW_SQL = "SELECT g, count(*)::BIGINT AS n FROM R JOIN S USING (k) GROUP BY g"


def run_duckdb(d: Data) -> tuple[list[float], pl.DataFrame, float]:
    con = duckdb.connect()
    t0 = time.perf_counter()
    for name, df in (("R", d.r), ("S", d.s)):
        con.register("src", df.to_arrow())
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM src")
        con.unregister("src")
    last = con.execute(VIEW_SQL).pl()
    load = time.perf_counter() - t0
    arrows = [tuple(x.to_arrow() for x in b) for b in d.batches]
    out = [last]

    def step(i: int) -> None:
        ri, rd, si, sd = arrows[i]
        for name, idc, ins, dele in (("R", "rid", ri, rd), ("S", "v", si, sd)):
            con.register("ins", ins)
            con.register("del", dele)
            con.execute(f"INSERT INTO {name} SELECT * FROM ins")
            con.execute(f"DELETE FROM {name} WHERE {idc} IN (SELECT {idc} FROM del)")
        out[0] = con.execute(VIEW_SQL).pl()

    times = h.repeat(step, len(arrows))
    con.close()
    return times, out[0], load


def run_pandas(d: Data) -> tuple[list[float], pl.DataFrame, float]:
    """pandas recomputing the view after applying each batch to its two frames."""
    t0 = time.perf_counter()
    cur = {"R": d.r.to_pandas(), "S": d.s.to_pandas()}
    view = lambda: cur["R"].merge(cur["S"], on="k")[["g"]].groupby("g").size()  # noqa: E731
    last = [view()]
    load = time.perf_counter() - t0
    frames = [tuple(x.to_pandas() for x in b) for b in d.batches]

    def step(i: int) -> None:
        import pandas as pd

        ri, rd, si, sd = frames[i]
        for name, idc, ins, dele in (("R", "rid", ri, rd), ("S", "v", si, sd)):
            t = cur[name]
            cur[name] = pd.concat([t[~t[idc].isin(dele[idc])], ins], ignore_index=True)
        last[0] = view()

    times = h.repeat(step, len(frames))
    out = last[0]
    return times, pl.DataFrame({"g": out.index.to_numpy(), "n": out.to_numpy()}).cast(pl.Int64), load


def append_only(d: Data) -> Data:
    """The workload's append-only form (for Structured Streaming): each batch's R inserts, S static."""
    empty_s = d.s.clear()
    return Data(d.n, d.r, d.s, [(ri, ri.clear(), empty_s, empty_s) for ri, _, _, _ in d.batches])


def run_dbspark_spark(d: Data, spark: Any) -> tuple[list[float], pl.DataFrame, float]:
    """dbspark's spark engine on the same stream (the load in one step)."""
    from bench.spark_scale import build_view, view_frame
    from dbspark.engines.spark.kernel import SparkKernel

    with tempfile.TemporaryDirectory(prefix="dbspark-bench-jg-") as tmp:
        rt = build_view().run(SparkKernel(spark=spark, directory=Path(tmp)))
        t0 = time.perf_counter()
        rt.push("R", d.r.select("k", "g"), 1)
        rt.push("S", d.s.select("k", "v"), 1)
        rt.step()
        load = time.perf_counter() - t0
        changes = [d.change(i) for i in range(len(d.batches))]

        def step(i: int) -> None:
            dr, ds = changes[i]
            rt.push("R", dr)
            if ds.height:
                rt.push("S", ds)
            rt.step()

        times = h.repeat(step, len(changes))
        view = rt.view("v").to_dict()
    return times, view_frame(view, "dbspark (spark engine)"), load


def run_dbspark_spark_pipeline(d: Data, spark: Any) -> tuple[list[float], pl.DataFrame, float]:
    """dbspark's spark engine through the public API on the same stream: `dbspark.Pipeline(directory,
    engine="spark")`, the tables and the view in SQL (`spark_scale.PIPELINE_SQL`), each batch's rows
    pushed as a Spark DataFrame built from Arrow (in the batch time, as Structured Streaming's source
    reads its batch), every step committed."""
    import dbspark
    from bench.spark_scale import PIPELINE_SQL, view_frame

    with tempfile.TemporaryDirectory(prefix="dbspark-bench-jg-p-") as tmp:
        p = dbspark.Pipeline(Path(tmp) / "p", engine="spark", spark=spark)
        p.sql(PIPELINE_SQL)
        t0 = time.perf_counter()
        p.insert("r", spark.createDataFrame(d.r.select("k", "g").to_arrow()))
        p.insert("s", spark.createDataFrame(d.s.select("k", "v").to_arrow()))
        p.step()
        load = time.perf_counter() - t0

        def step(i: int) -> None:
            ri = d.batches[i][0]
            p.insert("r", spark.createDataFrame(ri.select("k", "g").to_arrow()))
            p.step()

        times = h.repeat(step, len(d.batches))
        view = p.view("v").to_dict()
        p.close()
    return times, view_frame(view, "dbspark (spark pipeline)"), load


def run_pathway(d: Data) -> tuple[list[float], pl.DataFrame, float, list[float]]:
    """The view on Pathway, fed through its streaming Python connector, one commit per batch.

    Pathway has no push-a-frame API for streams: rows go in one `next()`/`delete()` call each from the
    connector's thread (that cost is part of the measured time; the commit-to-output time alone is
    returned too). A single input table (kind 0 = R, 1 = S) keeps one connector and so one commit per
    batch; rows are identified by (kind, id), so a delete retracts exactly the inserted row."""
    import logging

    import pathway as pw
    from pathway.internals.parse_graph import G

    logging.getLogger("pathway").setLevel(logging.WARNING)
    G.clear()

    class Rows(pw.Schema):
        kind: int = pw.column_definition(primary_key=True)
        id: int = pw.column_definition(primary_key=True)
        k: int
        x: int

    caught_up = threading.Event()
    marks: dict[str, object] = {"times": [], "engine": [], "load": None, "error": None}
    timeout = 900.0

    def wait() -> None:
        if not caught_up.wait(timeout):
            raise TimeoutError(f"pathway output did not catch up within {timeout:.0f}s")

    r_rows = list(zip(d.r["rid"].to_list(), d.r["k"].to_list(), d.r["g"].to_list(), strict=True))
    s_rows = list(zip(d.s["v"].to_list(), d.s["k"].to_list(), strict=True))
    lists = [
        tuple(list(zip(*[b[c].to_list() for c in b.columns], strict=True)) for b in batch)
        for batch in d.batches
    ]

    class Feed(pw.io.python.ConnectorSubject):
        @property
        def _deletions_enabled(self) -> bool:  # pathway's static detection misses the aliased delete
            return True

        def run(self) -> None:
            try:
                nxt, dele = self.next, self.delete
                t0 = time.perf_counter()
                for i, k, g in r_rows:
                    nxt(kind=0, id=i, k=k, x=g)
                for v, k in s_rows:
                    nxt(kind=1, id=v, k=k, x=0)
                caught_up.clear()
                self.commit()
                wait()
                marks["load"] = time.perf_counter() - t0
                for ri, rd, si, sd in lists:
                    t0 = time.perf_counter()
                    for i, k, g in ri:
                        nxt(kind=0, id=i, k=k, x=g)
                    for i, k, g in rd:
                        dele(kind=0, id=i, k=k, x=g)
                    for v, k in si:
                        nxt(kind=1, id=v, k=k, x=0)
                    for v, k in sd:
                        dele(kind=1, id=v, k=k, x=0)
                    t1 = time.perf_counter()
                    caught_up.clear()
                    self.commit()
                    wait()
                    t2 = time.perf_counter()
                    marks["times"].append(t2 - t0)  # type: ignore[union-attr]
                    marks["engine"].append(t2 - t1)  # type: ignore[union-attr]
            except BaseException as e:  # noqa: BLE001 - surfaced after pw.run returns
                marks["error"] = e

    rows = pw.io.python.read(Feed(), schema=Rows, autocommit_duration_ms=None)
    R = rows.filter(pw.this.kind == 0).select(k=pw.this.k, g=pw.this.x)
    S = rows.filter(pw.this.kind == 1).select(k=pw.this.k)
    j = R.join(S, R.k == S.k).select(g=R.g)
    res = j.groupby(pw.this.g).reduce(pw.this.g, n=pw.reducers.count())
    view: dict[int, int] = {}

    def on_change(key, row, time, is_addition) -> None:  # noqa: ANN001 - pathway's callback
        if is_addition:
            view[row["g"]] = row["n"]
        elif view.get(row["g"]) == row["n"]:
            del view[row["g"]]

    pw.io.subscribe(res, on_change=on_change, on_time_end=lambda t: caught_up.set())
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    G.clear()
    if marks["error"] is not None:
        raise RuntimeError(f"pathway feed failed: {marks['error']!r}") from marks["error"]  # type: ignore[arg-type]
    return marks["times"], h.counts_frame(view), marks["load"], marks["engine"]  # type: ignore[return-value]


def pydbsp_python() -> tuple[str | None, str]:
    """The venv interpreter with pydbsp (created if a Python 3.12+ is found), or (None, reason)."""
    py = PYDBSP_VENV / "bin" / "python"
    if py.exists():
        ok = subprocess.run([str(py), "-c", "import pydbsp"], capture_output=True)
        if ok.returncode == 0:
            return str(py), ""
    cands = [shutil.which(f"python3.{m}") for m in (13, 12)]
    cands += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python")), reverse=True)
    base = next((c for c in cands if c and _runs(c)), None)
    if base is None:
        return None, "no Python >= 3.12 interpreter found (pyenv versions / python3.12)"
    try:
        subprocess.run([base, "-m", "venv", str(PYDBSP_VENV)], check=True, capture_output=True)
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "pydbsp"], check=True, capture_output=True, timeout=600
        )
    except Exception as e:  # noqa: BLE001
        return None, f"could not create the venv or pip install pydbsp: {e}"
    return str(py), ""


def _runs(py: str) -> bool:
    try:
        return (
            subprocess.run(
                [py, "-c", "import sys; assert sys.version_info >= (3, 12)"], capture_output=True, timeout=60
            ).returncode
            == 0
        )
    except Exception:  # noqa: BLE001
        return False


def run_pydbsp(d: Data, py: str) -> tuple[list[float], pl.DataFrame, float]:
    def rows(df: pl.DataFrame, cols: list[str]) -> list[tuple]:
        return list(zip(*[df[c].to_list() for c in cols], strict=True))

    payload = {
        "load": (rows(d.r, ["k", "g", "rid"]), rows(d.s, ["k", "v"])),
        "batches": [
            (
                [(t, 1) for t in rows(ri, ["k", "g", "rid"])]
                + [(t, -1) for t in rows(rd, ["k", "g", "rid"])],
                [(t, 1) for t in rows(si, ["k", "v"])] + [(t, -1) for t in rows(sd, ["k", "v"])],
            )
            for ri, rd, si, sd in d.batches
        ],
    }
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.pickle", Path(tmp) / "out.json"
        src.write_bytes(pickle.dumps(payload))
        subprocess.run([py, str(RUNNER), str(src), str(dst)], check=True, timeout=1800)
        out = json.loads(dst.read_text())
    view = h.counts_frame({int(g): n for g, n in out["view"].items()})
    return out["batch_s"], view, out["load_s"]


# ---- the workload -------------------------------------------------------------------------------------
def _entry(times: list[float], load: float, n: int, rows: int = BATCH, **extra: object) -> dict:
    st = h.stats(times)
    return {
        "n": n,
        "load_s": load,
        "batch_s": times,
        "stats": st,
        "batch_rows": rows,
        "rows_per_s_median": rows / st["median"],
        "rows_per_s_total": rows * len(times) / sum(times),
        **extra,
    }


def run(quick: bool) -> dict:
    n, nb = h.sized((1_000_000, 20), (200_000, 10), quick, smoke=(5_000, 3))
    n_small, nb_small = h.sized((100_000, 5), (50_000, 3), quick, smoke=(2_000, 3))
    notes: list[str] = []
    skipped: dict[str, str] = {}
    systems: dict[str, dict] = {}
    views: dict[str, pl.DataFrame] = {}

    with h.phase(f"data n={n:,}"):
        d = make_data(n, nb)
    for name, fn in (
        ("dbspark", run_dbspark),
        ("hand-written delta", run_hand),
        ("duckdb recompute", run_duckdb),
        ("pandas recompute", run_pandas),
    ):
        h.collect()
        with h.phase(f"{name} n={n:,}"):
            times, view, load = fn(d)
        systems[name] = _entry(times, load, n)
        views[name] = view

    h.collect()
    if h.skipped("pathway"):
        skipped["pathway"] = "skipped by BENCH_SKIP"
    else:
        try:
            import pathway  # noqa: F401
        except Exception as e:  # noqa: BLE001
            skipped["pathway"] = f"not importable ({type(e).__name__}: {e}); pip install pathway"
        else:
            try:
                with h.phase(f"pathway n={n:,}"):
                    times, view, load, engine = run_pathway(d)
                systems["pathway"] = _entry(
                    times,
                    load,
                    n,
                    engine_s=engine,
                    engine_stats=h.stats(engine),
                    threads=os.environ.get("PATHWAY_THREADS", "1 (default)"),
                )
                views["pathway"] = view
            except Exception as e:  # noqa: BLE001
                skipped["pathway"] = f"failed to run: {type(e).__name__}: {e}"

    # Spark: Spark SQL recomputing over the final tables; Structured Streaming on the append-only form
    spark, why_not = spark_anchors.start()
    appends: dict[str, dict] = {}
    if spark is None:
        skipped["spark sql recompute"] = skipped["spark structured streaming"] = why_not
    else:
        r_fin, s_fin = d.final()
        with h.phase(f"spark sql recompute n={n:,}"), tempfile.TemporaryDirectory() as tmp:
            times, view = spark_anchors.spark_sql_recompute(
                spark, {"R": r_fin, "S": s_fin}, VIEW_SQL, Path(tmp)
            )
        systems["spark sql recompute"] = _entry(times, 0.0, n, what="one recompute over the final R, S")
        views["spark sql recompute"] = view
        da = append_only(d)
        aviews: dict[str, pl.DataFrame] = {}
        for name, fn in (
            ("dbspark", run_dbspark),
            ("dbspark (spark engine)", lambda x: run_dbspark_spark(x, spark)),
            ("dbspark (spark pipeline)", lambda x: run_dbspark_spark_pipeline(x, spark)),
        ):
            h.collect()
            with h.phase(f"{name} append-only n={n:,}"):
                times, view, load = fn(da)
            appends[name] = _entry(times, load, n, rows=BATCH // 4)
            aviews[name] = view
        h.collect()
        with h.phase(f"spark structured streaming append-only n={n:,}"):
            times, view, load = spark_anchors.structured_streaming(
                spark,
                d.s.select("k", "v"),
                d.r.select("k", "g"),
                [b[0].select("k", "g") for b in d.batches],
                key="k",
                group="g",
            )
        appends["spark structured streaming"] = _entry(times, load, n, rows=BATCH // 4)
        aviews["spark structured streaming"] = view
        h.verify(f"join_groupby append-only n={n}", aviews)
        spark.stop()
    h.verify(f"join_groupby n={n}", views)

    # pydbsp (pure Python) at a smaller size, next to dbspark and the hand-written delta on the same data
    small: dict[str, dict] = {}
    py, why = (None, "skipped by BENCH_SKIP") if h.skipped("pydbsp") else pydbsp_python()
    if py is None:
        skipped["pydbsp"] = why
    else:
        ds = make_data(n_small, nb_small, seed=SEED + 1)
        sviews = {}
        for name, fn in (("dbspark", run_dbspark), ("hand-written delta", run_hand)):
            times, view, load = fn(ds)
            small[name] = _entry(times, load, n_small)
            sviews[name] = view
        try:
            with h.phase(f"pydbsp n={n_small:,} (subprocess)"):
                times, view, load = run_pydbsp(ds, py)
            small["pydbsp"] = _entry(times, load, n_small, python=py)
            sviews["pydbsp"] = view
        except Exception as e:  # noqa: BLE001
            skipped["pydbsp"] = f"failed to run: {type(e).__name__}: {e}"
        if len(sviews) >= 2:
            h.verify(f"join_groupby n={n_small} (pydbsp comparison)", sviews)

    for sysname, why in skipped.items():
        notes.append(f"{sysname}: skipped ({why})")
        print(f"{sysname}: skipped ({why})", flush=True)
    if "pathway" in systems:
        p = systems["pathway"]
        notes.append(
            f"pathway: of its {h.fmt_s(p['stats']['median'])} median batch, "
            f"{h.fmt_s(p['engine_stats']['median'])} is commit-to-output (the rest is the per-row "
            "Python connector calls)"
        )

    ours = systems["dbspark"]
    rows = []
    for n_, entries, tag in ((n, systems, ""), (n_small, small, ""), (n, appends, " append-only")):
        base = entries.get("dbspark")
        for name, e in entries.items():
            st = e["stats"]
            rows.append(
                [
                    (f"{name} @{n_ / 1e6:g}M" if n_ >= 1e6 else f"{name} @{n_ / 1e3:g}k") + tag,
                    f"{h.fmt_s(st['median'])} [{h.fmt_s(st['min'])}..{h.fmt_s(st['max'])}]",
                    h.fmt_rate(e["rows_per_s_median"]),
                    h.fmt_rate(e["rows_per_s_total"]),
                    h.fmt_x(h.ratio(st["median"], base["stats"]["median"])) if base else "-",
                    h.fmt_s(e["load_s"]),
                ]
            )
    text = h.table(
        f"join_groupby: {BATCH:,}-row batches (half deletes) of R.join(S, on='k').aggregate(by='g', n='count'); "
        f"{nb} batches @{n:,}, {nb_small} @{n_small:,}; append-only: {BATCH // 4:,} R inserts per batch, S static; "
        "spark sql recompute: one recompute over the final tables",
        [
            "system",
            "batch time median [min..max]",
            "rows/s (median)",
            "rows/s (total)",
            "time / dbspark's",
            "load",
        ],
        rows,
    )
    goal = ours["rows_per_s_total"] >= 1e6
    notes.insert(
        0,
        f"dbspark throughput {h.fmt_rate(ours['rows_per_s_total'])} over all batches "
        f"({h.fmt_rate(ours['rows_per_s_median'])} at the median batch); goal >= 1M rows/s: "
        f"{'met' if goal else 'NOT met'}",
    )
    xs = lambda e: list(range(1, len(e["batch_s"]) + 1))  # noqa: E731
    panels = [
        {
            "title": f"R, S of {n:,} rows",
            "xlabel": "batch",
            "ylabel": "time per 10k-row batch (s)",
            "series": {k: (xs(e), e["batch_s"], {"color": h.COLORS[k]}) for k, e in systems.items()},
        }
    ]
    if small:
        panels.append(
            {
                "title": f"R, S of {n_small:,} rows (pydbsp comparison)",
                "xlabel": "batch",
                "ylabel": "time per 10k-row batch (s)",
                "series": {k: (xs(e), e["batch_s"], {"color": h.COLORS[k]}) for k, e in small.items()},
            }
        )
    if appends:
        panels.append(
            {
                "title": f"append-only: {BATCH // 4:,} R inserts per batch, S static ({n:,} rows)",
                "xlabel": "batch",
                "ylabel": "time per batch (s)",
                "series": {k: (xs(e), e["batch_s"], {"color": h.COLORS[k]}) for k, e in appends.items()},
            }
        )
    return {
        "params": {
            "n": n,
            "batches": nb,
            "batch_rows": BATCH,
            "groups": GROUPS,
            "seed": SEED,
            "n_small": n_small,
            "batches_small": nb_small,
            "load_pushes": LOAD_PUSHES,
        },
        "systems": systems,
        "small": small,
        "append_only": appends,
        "skipped": skipped,
        "dbspark_goal_1M_rows_per_s": goal,
        "verified": True,
        "notes": notes,
        "table": text,
        "plot": panels,
        "plot_title": "join_groupby: time per 10k-row batch (inserts + deletes)",
    }


# ---- profiling ------------------------------------------------------------------------------------------
def profile(quick: bool, top: int = 20) -> None:
    """Profile dbspark's batches (not the load) with pyinstrument; print the hot spots.

    Two views: time attributed to the innermost dbspark function on the stack (what dbspark code, with
    the library calls it makes, costs), and the raw leaf functions (where the CPU is)."""
    from pyinstrument import Profiler

    n, nb = (200_000, 10) if quick else (1_000_000, 20)
    d = make_data(n, nb)
    c = dbspark.Circuit()
    R = c.input("R", {"k": "int64", "g": "int64"})
    S = c.input("S", {"k": "int64", "v": "int64"})
    c.output("v", R.join(S, on="k").aggregate(by="g", n="count"))
    rt = c.run()
    for p in range(LOAD_PUSHES):
        lo, hi = p * n // LOAD_PUSHES, (p + 1) * n // LOAD_PUSHES
        rt.push("R", d.r[lo:hi].select("k", "g"), 1)
        rt.push("S", d.s[lo:hi].select("k", "v"), 1)
        rt.step()
    changes = [d.change(i) for i in range(nb)]
    prof = Profiler(interval=0.0005)
    prof.start()
    for dr, ds in changes:
        rt.push("R", dr)
        rt.push("S", ds)
        rt.step()
    prof.stop()
    root = prof.last_session.root_frame()
    total = root.time
    by_ours: Counter[str] = Counter()
    by_leaf: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()

    def walk(f, owner: str | None, parent: str, on_path: frozenset = frozenset()) -> None:  # noqa: ANN001
        path = f.file_path or ""
        if f.is_synthetic:  # pyinstrument's "[self]" / "[await]" leaves: time spent in the parent itself
            name = parent
        else:
            where = (
                os.path.relpath(path, Path(__file__).parents[1]) if "/dbspark/" in path else f.file_path_short
            )
            name = f"{f.function} ({where}:{f.line_no})"
        if "/dbspark/" in path and not f.is_synthetic:
            owner = name
            if name not in on_path:  # count a recursive function once per path
                inclusive[name] += f.time
                on_path = on_path | {name}
        self_t = f.time - sum(ch.time for ch in f.children)
        if self_t > 0:
            by_ours[owner or "(outside dbspark)"] += self_t
            by_leaf[name] += self_t
        for ch in f.children:
            walk(ch, owner, name, on_path)

    walk(root, None, "(root)")
    print(
        f"dbspark join_groupby profile: {nb} batches of {BATCH:,} rows over {n:,}-row relations, "
        f"{total:.2f}s sampled ({BATCH * nb / total / 1e3:.0f}k rows/s under the profiler)"
    )
    print(
        h.table(
            "time attributed to the innermost dbspark function on the stack",
            ["function", "% time", "s"],
            [[k, f"{100 * v / total:.1f}%", f"{v:.3f}"] for k, v in by_ours.most_common(top)],
        )
    )
    print(
        h.table(
            "inclusive time of dbspark functions (operators: *.eval; state: Spine.*, Batch.*)",
            ["function", "% time", "s"],
            [[k, f"{100 * v / total:.1f}%", f"{v:.3f}"] for k, v in inclusive.most_common(top)],
        )
    )
    print(
        h.table(
            "leaf functions (self time, native code counted in its Python caller)",
            ["function", "% time", "s"],
            [[k, f"{100 * v / total:.1f}%", f"{v:.3f}"] for k, v in by_leaf.most_common(top)],
        )
    )
    out = h.result_path("join_groupby-profile", quick, "txt")
    out.write_text(prof.output_text(unicode=False, color=False, show_all=False))
    print(f"\nfull pyinstrument tree: {out}")


if __name__ == "__main__":
    if "--profile" in sys.argv:
        profile("--quick" in sys.argv)
    else:
        print("usage: python -m bench.join_groupby --profile [--quick]   (or python -m bench join_groupby)")
