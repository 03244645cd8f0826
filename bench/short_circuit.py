"""short_circuit: projected triangle views kept by short-circuit evaluation, under batches of edge changes.

A view that keeps only some of a cyclic join's variables, here the nodes that are the lowest of a
triangle (`∃b, c. R(a, b), S(b, c), T(a, c)`) and the edges that start one (`∃c`), on a skewed
power-law graph (`bench.triangles.power_law`: each undirected edge once, low to high). Systems, all on
the local engine:

- `short-circuit`: the join maintained by sensitivity indices with `project=` (the LFTJ seed's §2.2.1,
  `columnar/short_circuit.py`): each head binding stops at its first completion, no counts.
- `sensitivity + distinct`: the same maintenance over every triangle, then the projection and DBSP's
  distinct (the counting of §2.2).
- `delta join + distinct`: DBSP's delta join of the three inputs (`multijoin`), projection, distinct.
- DuckDB: the change applied and `SELECT DISTINCT ...` recomputed.

The first step (the whole graph) and each batch of 100 edge changes (50 deletes of present edges, 50
inserts) are timed, wall and this process's CPU; the views must equal each other and DuckDB's after
every batch.
"""

from __future__ import annotations

import time
from typing import Any

import duckdb
import numpy as np
import polars as pl

import dbspark
from bench import harness as h
from bench.triangles import power_law

SEED = 7
WARMUP = 1
HALF = 50
VIEWS = {"lowest": ["a"], "edges": ["a", "b"]}
SYSTEMS = ("short-circuit", "sensitivity + distinct", "delta join + distinct")
JOIN = "FROM e r JOIN e s ON r.y = s.x JOIN e t ON t.x = r.x AND t.y = s.y"
SQL = {"lowest": f"SELECT DISTINCT r.x AS a {JOIN}", "edges": f"SELECT DISTINCT r.x AS a, r.y AS b {JOIN}"}


def _circuit(system: str, keep: list[str]) -> Any:
    c = dbspark.Circuit()
    e = c.input("e", {"x": pl.Int64, "y": pl.Int64}, kind="set")
    r, s, t = e.map(a="x", b="y"), e.map(b="x", c="y"), e.map(a="x", c="y")
    if system == "short-circuit":
        v = r.multijoin(s, t, maintenance="sensitivity", project=keep)
    elif system == "sensitivity + distinct":
        v = r.multijoin(s, t, maintenance="sensitivity").map(*keep).distinct()
    else:
        v = r.multijoin(s, t).map(*keep).distinct()
    c.output("v", v)
    return c.run("local")


def _batches(e: pl.DataFrame, n: int) -> list[tuple[pl.DataFrame, pl.DataFrame]]:
    rng = np.random.default_rng(SEED + 1)
    cur = e.select("x", "y")
    top = int(cur["y"].max())  # type: ignore[arg-type]
    out = []
    for _ in range(n):
        dele = cur.sample(HALF, seed=int(rng.integers(1 << 30)))
        u, v = rng.integers(0, top, 2 * HALF), rng.integers(0, top, 2 * HALF)
        ins = (
            pl.DataFrame({"x": np.minimum(u, v), "y": np.maximum(u, v)})
            .filter(pl.col("x") != pl.col("y"))
            .unique(maintain_order=True)
            .join(cur, on=["x", "y"], how="anti")
            .head(HALF)
        )
        out.append((ins, dele))
        cur = pl.concat([cur.join(dele, on=["x", "y"], how="anti"), ins])
    return out


def run_size(edges: int, batches: int) -> dict[str, Any]:
    e = power_law(edges, SEED)
    changes = _batches(e, batches)
    out: dict[str, Any] = {"graph_edges": e.height}
    con = duckdb.connect()
    con.register("src", e.select("x", "y").to_arrow())
    con.execute("CREATE TABLE e AS SELECT * FROM src")
    con.unregister("src")
    runs = {(v, s): _circuit(s, keep) for v, keep in VIEWS.items() for s in SYSTEMS}
    times: dict[tuple[str, str], dict[str, Any]] = {}
    for (view, system), rt in runs.items():
        h.collect()
        with h.phase(f"{view} / {system}, {e.height:,} edges: first step"), h.Timer() as load:
            rt.push("e", e.select("x", "y"), 1)
            rt.step()
        times[(view, system)] = {"load_s": load.s, "wall": [], "cpu": []}
    duck: dict[str, list[float]] = {v: [] for v in VIEWS}
    for i, (ins, dele) in enumerate(changes):
        rows = pl.concat([dele, ins]).with_columns(
            pl.Series("weight", [-1] * dele.height + [1] * ins.height, dtype=pl.Int64)
        )
        for key, rt in runs.items():
            c0, t0 = time.process_time(), time.perf_counter()
            rt.push("e", rows)
            rt.step()
            t1, c1 = time.perf_counter(), time.process_time()
            if i >= WARMUP:
                times[key]["wall"].append(t1 - t0)
                times[key]["cpu"].append(c1 - c0)
        con.register("ins", ins.to_arrow())
        con.register("del", dele.to_arrow())
        t_apply, _ = h.timed(
            lambda: (
                con.execute("DELETE FROM e WHERE (x, y) IN (SELECT x, y FROM del)"),
                con.execute("INSERT INTO e SELECT x, y FROM ins"),
            )
        )
        con.unregister("ins")
        con.unregister("del")
        for view in VIEWS:
            t_q, want = h.timed(lambda view=view: con.execute(SQL[view]).pl())
            if i >= WARMUP:
                duck[view].append(t_apply + t_q)
            got = {s: runs[(view, s)].view("v").to_polars().drop("weight") for s in SYSTEMS}
            h.verify(f"short_circuit {view} edges={edges} batch {i}", {**got, "duckdb": want})
    con.close()
    for (view, system), t in times.items():
        out.setdefault(view, {})[system] = {
            "load_s": t["load_s"],
            "step_s": t["wall"],
            "cpu_s": t["cpu"],
            "wall": h.stats(t["wall"]),
            "cpu": h.stats(t["cpu"]),
        }
    for view in VIEWS:
        out[view]["duckdb"] = {"step_s": duck[view], "wall": h.stats(duck[view])}
    return out


def run(quick: bool) -> dict:
    sizes = h.sized([100_000, 300_000], [100_000], quick, smoke=[3_000])
    batches = WARMUP + h.sized(10, 5, quick, smoke=3)
    per = {str(n): run_size(n, batches) for n in sizes}
    rows = []
    for n in sizes:
        r = per[str(n)]
        for view in VIEWS:
            sc = r[view]["short-circuit"]
            row = [f"{r['graph_edges']:,}", view, h.fmt_s(sc["load_s"]), h.median_range(sc["wall"])]
            for s in SYSTEMS[1:]:
                o = r[view][s]
                row += [
                    h.fmt_s(o["load_s"]),
                    h.fmt_s(o["wall"]["median"]),
                    h.fmt_x(h.ratio(o["wall"]["median"], sc["wall"]["median"])),
                    h.fmt_x(h.ratio(o["cpu"]["median"], sc["cpu"]["median"])),
                ]
            d = r[view]["duckdb"]["wall"]["median"]
            rows += [[*row, h.fmt_s(d), h.fmt_x(h.ratio(d, sc["wall"]["median"]))]]
    text = h.table(
        f"short_circuit (local engine): projected triangle views on a power-law graph, batches of {2 * HALF} "
        f"edge changes (half deletes), first step and median batch [min..max] of {batches - WARMUP}; "
        "ratios: other / short-circuit (wall, CPU)",
        [
            "edges",
            "view",
            "short-circuit first",
            "batch",
            "sens.+distinct first",
            "batch",
            "/ (wall)",
            "(CPU)",
            "delta+distinct first",
            "batch",
            "/ (wall)",
            "(CPU)",
            "duckdb recompute",
            "duckdb / short-circuit",
        ],
        rows,
    )
    xs = [per[str(n)]["graph_edges"] for n in sizes]
    plots = [
        {
            "title": f"view {view}: median batch time vs edges",
            "series": {
                s: (xs, [per[str(n)][view][s]["wall"]["median"] for n in sizes], {})
                for s in [*SYSTEMS, "duckdb"]
            },
            "xlabel": "edges",
            "logx": True,
        }
        for view in VIEWS
    ]
    return {
        "params": {"sizes": sizes, "batches": batches - WARMUP, "warmup": WARMUP, "change_rows": 2 * HALF},
        "sizes": per,
        "table": text,
        "plot": plots,
        "plot_title": "short_circuit: projected triangle views, batches of 100 edge changes",
    }
