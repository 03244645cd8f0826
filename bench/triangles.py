"""Triangles on a skewed graph: the leapfrog join against binary joins and DuckDB (issue 16's speed goals):

    python -m bench.triangles                       # 100k and 1M edges (minutes)
    python -m bench.triangles --edges 100000 --batches 5   # a quick run

The graph is a Chung-Lu power-law graph (expected degrees Pareto-distributed with exponent 2.1, a few
hubs of thousands of edges), undirected, each edge kept once as (low id, high id), so that each triangle
is one row of `R(a, b), S(b, c), T(a, c)` over the edge table. From scratch, on the local engine, the
listing (every triangle a row) and the count: the leapfrog join (`columnar/leapfrog.py`) against the
binary plan (R ⋈ S on b, then ⋈ T on (a, c), Polars, as the local engine's join runs it), both as the
columnar joins and as the first step of a maintained view (`stream_multijoin` against a chain of
`stream_join`s), and DuckDB's SQL. Incremental: batches of 100 edge changes (50 deletes of present
edges, 50 inserts), per batch: the multiway join's change (`multijoin`) against the binary delta-join
plan of the same view (DBSP's `join` chain), the multiway join maintained by sensitivity indices
(`maintenance="sensitivity"`, with the trace edit distance beside: the intervals the change oracle
matched and those the regions' evaluation recorded), the delta join over indexed tries, a variable
order per change (`maintenance="indexed"`), and against recomputing the listing (the leapfrog join and
DuckDB from scratch), with the batch's output change (rows of the view that changed: the edit distance
of the result) beside the time. Wall and process CPU, median over the batches; the views are checked
equal after the last batch. `--payload` adds a label to every edge (40 bits, distinct per edge) and the
view carries each atom's: the indexed join (the labels one level under the join key) against the
multiway delta join of that view.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from bench.tc import Clock
from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.leapfrog import leapfrog_join
from dbspark.operators.maintained_join import Held

ATOMS = [("a", "b"), ("b", "c"), ("a", "c")]
SQL = "SELECT r.x AS a, r.y AS b, s.y AS c FROM e r JOIN e s ON r.y = s.x JOIN e t ON t.x = r.x AND t.y = s.y"
BINARY_LIMIT = 400_000_000  # wedges (R ⋈ S rows) past which the binary plan is not run (memory)


def power_law(edges: int, seed: int) -> pl.DataFrame:
    """About `edges` distinct undirected edges (low, high) of a Chung-Lu graph with Pareto weights."""
    rng = np.random.default_rng(seed)
    n = max(edges // 5, 10)
    w = rng.pareto(1.1, n) + 1.0
    p = w / w.sum()
    m = int(edges * 1.15)
    u, v = rng.choice(n, m, p=p), rng.choice(n, m, p=p)
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    df = pl.DataFrame({"x": lo, "y": hi}).filter(pl.col("x") != pl.col("y")).unique()
    return df.head(edges).with_columns(pl.lit(1, pl.Int64).alias(WEIGHT))


def atoms(e: pl.DataFrame) -> list[pl.DataFrame]:
    return [e.rename({"x": u, "y": v}) for u, v in ATOMS]


def binary(e: pl.DataFrame) -> pl.DataFrame:
    r, s, t = atoms(e)
    j = (
        r.join(s, on="b", suffix="_s")
        .with_columns(pl.col(WEIGHT) * pl.col(f"{WEIGHT}_s"))
        .drop(f"{WEIGHT}_s")
    )
    j = j.join(t, on=["a", "c"], suffix="_t").with_columns(pl.col(WEIGHT) * pl.col(f"{WEIGHT}_t"))
    return j.drop(f"{WEIGHT}_t")


def labelled(rows: pl.DataFrame) -> pl.DataFrame:
    """Edges with their label (`--payload`): 40 bits, a function of the edge, distinct per edge."""
    return rows.select("x", "y", ((pl.col("x") * 1_000_003 + pl.col("y")) % (1 << 40)).alias("w"))


def circuit(multiway: bool, stream: bool, maintenance: str = "delta", payload: bool = False) -> Any:
    import dbspark

    c = dbspark.Circuit()
    cols = {"x": pl.Int64, "y": pl.Int64} | ({"w": pl.Int64} if payload else {})
    e = c.input("e", cols, kind="set")
    r, s, t = (e.map(**{u: "x", v: "y"} | ({f"w{u}{v}": "w"} if payload else {})) for u, v in ATOMS)
    if multiway:
        c.output(
            "v",
            r.stream_multijoin(s, t, maintenance=maintenance)
            if stream
            else r.multijoin(s, t, maintenance=maintenance),
        )
    elif stream:
        c.output("v", r.stream_join(s, on="b").stream_join(t, on=["a", "c"]).map("a", "b", "c"))
    else:
        c.output("v", r.join(s, on="b").join(t, on=["a", "c"]).map("a", "b", "c"))
    return c


def timed(fn: Any) -> tuple[dict[str, float], Any]:
    with Clock() as c:
        out = fn()
    return {"wall": c.wall, "cpu": c.cpu}, out


def scratch(e: pl.DataFrame, duck: Any) -> dict[str, Any]:
    wedges = int(
        e.group_by("y")
        .len()
        .join(e.group_by("x").len(), left_on="y", right_on="x")
        .select((pl.col("len") * pl.col("len_right")).sum())
        .item()
    )
    out: dict[str, Any] = {"wedges": wedges}
    out["leapfrog"], lf = timed(lambda: leapfrog_join(atoms(e)))
    out["triangles"] = lf.height
    out["leapfrog_count"], _ = timed(lambda: leapfrog_join(atoms(e)).height)
    if wedges <= BINARY_LIMIT:
        out["binary"], bj = timed(lambda: binary(e))
        assert bj.height == lf.height
    out["duckdb"], _ = timed(lambda: duck.execute(f"CREATE OR REPLACE TABLE tri AS {SQL}"))
    out["duckdb_count"], n = timed(lambda: duck.execute(f"SELECT count(*) FROM ({SQL})").fetchone())
    assert n is not None and n[0] == lf.height
    for name, multiway in (("view_leapfrog", True), ("view_binary", False)):
        if not multiway and wedges > BINARY_LIMIT:
            continue
        rt = circuit(multiway, stream=True).run()
        rt.push("e", e.select("x", "y"), e[WEIGHT])
        out[name], _ = timed(rt.step)
    return out


def incremental(
    e: pl.DataFrame, duck: Any, batches: int, seed: int, run_binary: bool, payload: bool = False
) -> dict[str, Any]:
    rng = np.random.default_rng(seed + 1)
    plans = {"multijoin": circuit(True, stream=False).run()}
    plans["sensitivity"] = circuit(True, stream=False, maintenance="sensitivity").run()
    plans["indexed"] = circuit(True, stream=False, maintenance="indexed").run()
    if run_binary:
        plans["delta_join"] = circuit(False, stream=False).run()
    if payload:
        plans["multijoin_payload"] = circuit(True, stream=False, payload=True).run()
        plans["indexed_payload"] = circuit(True, stream=False, maintenance="indexed", payload=True).run()
    loads = {}
    for name, rt in plans.items():
        rt.push("e", labelled(e) if name.endswith("payload") else e.select("x", "y"), e[WEIGHT])
        loads[name], _ = timed(rt.step)
    maintained = next(st.join for st in plans["sensitivity"].states.values() if isinstance(st, Held))
    index_rows = sum(len(ix) for ix in maintained.index.values())
    indexed = next(st.join for st in plans["indexed"].states.values() if isinstance(st, Held))
    sought: list[dict[str, int]] = []
    edits: list[dict[str, int]] = []
    cur = e.select("x", "y")
    n_nodes = int(max(cur["y"].max(), 1))  # type: ignore[arg-type]
    times: dict[str, list[dict[str, float]]] = {
        k: [] for k in [*plans, "recompute_leapfrog", "recompute_duckdb"]
    }
    changed: list[int] = []
    for _ in range(batches):
        dele = cur.sample(50, seed=int(rng.integers(1 << 30)))
        u, v = rng.integers(0, n_nodes, 80), rng.integers(0, n_nodes, 80)
        ins = (
            pl.DataFrame({"x": np.minimum(u, v), "y": np.maximum(u, v)})
            .filter(pl.col("x") != pl.col("y"))
            .unique()
            .join(cur, on=["x", "y"], how="anti")
            .head(50)
        )
        rows = pl.concat([dele, ins])
        w = pl.Series(WEIGHT, [-1] * dele.height + [1] * ins.height, dtype=pl.Int64)
        outs = {}
        for name, rt in plans.items():
            rt.push("e", labelled(rows) if name.endswith("payload") else rows, w)
            t, outs[name] = timed(rt.step)
            times[name].append(t)
        changed.append(len(outs["multijoin"]["v"]))
        ends = pl.concat([cur["x"], cur["y"]]).value_counts(name="deg").rename({"x": "v"})
        deg = rows.select(pl.concat_list("x", "y").alias("v")).explode("v").join(ends, on="v", how="left")
        sought.append(
            {"sought": int(indexed.last["sought"]), "neighbourhoods": int(deg["deg"].fill_null(0).sum())}
        )  # type: ignore[call-overload]
        edits.append(
            {k: int(maintained.last.get(k, -1)) for k in ("surgery", "matched", "recorded", "regions")}
        )  # type: ignore[call-overload]
        assert outs["sensitivity"]["v"].to_dict() == outs["multijoin"]["v"].to_dict()
        assert outs["indexed"]["v"].to_dict() == outs["multijoin"]["v"].to_dict()
        if "delta_join" in outs:
            assert outs["delta_join"]["v"].to_dict() == outs["multijoin"]["v"].to_dict()
        if payload:
            assert outs["indexed_payload"]["v"].to_dict() == outs["multijoin_payload"]["v"].to_dict()
            assert len(outs["indexed_payload"]["v"]) == len(outs["multijoin"]["v"])
        cur = pl.concat([cur.join(dele, on=["x", "y"], how="anti"), ins])
        full = cur.with_columns(pl.lit(1, pl.Int64).alias(WEIGHT))
        t, _ = timed(lambda full=full: leapfrog_join(atoms(full)))  # type: ignore[misc]
        times["recompute_leapfrog"].append(t)
        duck.execute("DELETE FROM e WHERE (x, y) IN (SELECT x, y FROM dele)")
        duck.execute("INSERT INTO e SELECT x, y FROM ins")
        t, _ = timed(lambda: duck.execute(f"CREATE OR REPLACE TABLE tri AS {SQL}"))
        times["recompute_duckdb"].append(t)
    n = duck.execute(f"SELECT count(*) FROM ({SQL})").fetchone()
    assert n is not None and n[0] == len(plans["multijoin"].view("v"))
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("wall", "cpu")} for k, v in times.items()}
    return {
        "median": med,
        "view_change_rows": changed,
        "trace_edits": edits,
        "indexed_work": sought,
        "first_step": loads,
        "sensitivity_index_rows": index_rows,
    }


def run(edges: int, batches: int, seed: int, payload: bool = False) -> dict[str, Any]:
    e = power_law(edges, seed)
    duck = duckdb.connect()
    duck.register("e_frame", e.select("x", "y").to_arrow())
    duck.execute("CREATE TABLE e AS SELECT x, y FROM e_frame")
    degree = pl.concat([e["x"], e["y"]]).value_counts()
    out: dict[str, Any] = {"edges": e.height, "max_degree": int(degree["count"].max())}  # type: ignore[arg-type]
    out["scratch"] = scratch(e, duck)
    out["incremental"] = incremental(
        e, duck, batches, seed, out["scratch"]["wedges"] <= BINARY_LIMIT, payload
    )
    return out


def report(results: list[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        s, inc = r["scratch"], r["incremental"]["median"]
        lines.append(
            f"{r['edges']:,} edges (max degree {r['max_degree']:,}), {s['triangles']:,} triangles, "
            f"{s['wedges']:,} wedges"
        )
        for k in (
            "leapfrog",
            "leapfrog_count",
            "binary",
            "duckdb",
            "duckdb_count",
            "view_leapfrog",
            "view_binary",
        ):
            if k in s:
                lines.append(f"  scratch {k:15s} {s[k]['wall']:8.3f} s wall {s[k]['cpu']:8.3f} s CPU")
        for k, v in inc.items():
            lines.append(f"  batch   {k:18s} {v['wall'] * 1000:9.2f} ms wall {v['cpu'] * 1000:9.2f} ms CPU")
        for k, v in r["incremental"]["first_step"].items():
            lines.append(f"  first step (load) {k:12s} {v['wall']:8.3f} s wall {v['cpu']:8.3f} s CPU")
        ed = r["incremental"]["trace_edits"]
        med_edit = statistics.median(x["matched"] + x["recorded"] for x in ed)
        lines.append(
            f"  sensitivity: {r['incremental']['sensitivity_index_rows']:,} intervals after the load; per batch "
            f"median {med_edit:,.0f} trace edits (intervals matched + recorded), "
            f"{statistics.median(x['regions'] for x in ed):,.0f} oracle regions, "
            f"{statistics.median(x['surgery'] for x in ed):,.0f} surgery operations"
        )
        base = inc.get("delta_join", inc["multijoin"])
        vs = "the binary delta join" if "delta_join" in inc else "the multiway delta join"
        lines.append(
            f"  indexed per batch: {base['wall'] / inc['indexed']['wall']:.2f}x {vs} "
            f"({base['cpu'] / inc['indexed']['cpu']:.2f}x CPU), "
            f"{inc['recompute_leapfrog']['wall'] / inc['indexed']['wall']:.0f}x the leapfrog recompute, "
            f"{inc['recompute_duckdb']['wall'] / inc['indexed']['wall']:.0f}x DuckDB's "
            f"({inc['recompute_duckdb']['cpu'] / inc['indexed']['cpu']:.0f}x CPU)"
        )
        if "indexed_payload" in inc:
            ip, mp = inc["indexed_payload"], inc["multijoin_payload"]
            lines.append(
                f"  with a label per edge: indexed {ip['wall'] * 1000:.2f} ms a batch ({ip['wall'] / inc['indexed']['wall']:.2f}x "
                f"its time without), {mp['wall'] / ip['wall']:.2f}x the multiway delta join of that view "
                f"({mp['cpu'] / ip['cpu']:.2f}x CPU)"
            )
        work = r["incremental"]["indexed_work"]
        lines.append(
            f"  indexed: per batch median {statistics.median(x['sought'] for x in work):,.0f} candidates sought by "
            f"the terms' intersections, against {statistics.median(x['neighbourhoods'] for x in work):,.0f} rows "
            "in the changed edges' endpoints' neighbourhoods"
        )
        ch = r["incremental"]["view_change_rows"]
        lines.append(
            f"  view rows changed per batch: median {statistics.median(ch):,.0f} (min {min(ch)}, max {max(ch)})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--edges", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=None)
    ap.add_argument("--payload", action="store_true", help="also a view carrying a label per edge")
    a = ap.parse_args(argv)
    results = [run(n, a.batches, a.seed, a.payload) for n in a.edges]
    print(report(results))
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
