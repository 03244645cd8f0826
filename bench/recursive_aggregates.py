"""Recursion through aggregates (`docs/recursive-aggregation.md`), on the local engine.

    python -m bench recursive_aggregates              # company control 1k-16k, SSSP on 1M edges
    python -m bench.recursive_aggregates --quick --workloads company

- `company`: company control (`incremental-aggregation-monotonic-programs.txt` Example 1.1) on the
  dataset of Figure 1 with n companies (shares in units of 1 / (10 n)): evaluation from scratch at
  each n, and the growth exponent of its CPU time (least squares of log time on log n; the paper shows
  that re-aggregating each group at every iteration is Θ(n²); goal ≤ 1.2).
- `sssp`: shortest paths from node 0 on a random graph (m edges over m / 10 nodes, weights 1-99):
  from scratch against DuckDB's recursive CTE (`USING KEY`) and scipy's Dijkstra, then batches of 100
  edge changes (a third inserts, a third deletes, a third cost changes) against recomputing (dbspark
  from scratch on the batch's data; goal ≥ 100x). Final distances checked equal (count and sum).

- `magic`: reachability from node 1 (`reach1(y) :- path(1, y).`, path the transitive closure) on a
  graph of 100,000 nodes in blocks of 100 (each node has edges to 3 random nodes of its block), from
  scratch with Magic Sets and without (the whole closure, by the closure operator): facts derived (of
  every derived relation: the program run with all of them as outputs, the rewritten one written out
  as `magic.py` produces it, which the run checks) and time (goal: ≥ 10x less of both).
- `magic_cost`: cheapest paths from node 0 (all-pairs cheapest paths, `APSP`, asked for one source:
  Magic Sets with cost-restricted sips, §6) on 2,000 nodes in blocks of 100, weights 1-9: facts
  derived (the rewritten program written out by `dbspark.testing.datalog.text_of`) and time, with
  Magic Sets and whole; the answers checked equal (count and sum of costs).

Every system runs in a subprocess (its peak RSS its own).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from typing import Any

import numpy as np

from bench import harness as h
from bench.tc import Clock, peak_gib
from dbspark.testing.datalog import REACH_FROM_1 as REACH
from dbspark.testing.recursive_aggregates import APSP

CHANGE = 100
SIZES = {
    "company": [1000, 2000, 4000, 8000, 16000],
    "sssp": 1_000_000,
    "magic": 100_000,
    "magic_cost": 2_000,
}
QUICK = {"company": [250, 500, 1000], "sssp": 100_000, "magic": 20_000, "magic_cost": 500}
SMOKE = {"company": [40, 80], "sssp": 5_000, "magic": 1_000, "magic_cost": 200}
# REACH as Magic Sets rewrites it (checked against `magic_sets` by the run), every relation an output
# so that the facts it derives can be counted
REACH_MAGIC = """
.decl edge(x: number, y: number)
.input edge
.decl path__bf(x: number, y: number)
.decl path__bf__magic(x: number)
.decl reach1(y: number)
.output reach1, path__bf, path__bf__magic
path__bf__magic(1).
reach1(y) :- path__bf(1, y).
path__bf(x, y) :- path__bf__magic(x), edge(x, y).
path__bf(x, y) :- path__bf__magic(x), path__bf(x, z), edge(z, y).
"""
BLOCK = 100
# cheapest paths (of one edge or more) from node 0: all-pairs cheapest paths asked for one source
CHEAPEST_FROM_0 = "\n".join(
    [ln for ln in APSP.splitlines() if not ln.startswith(".output")]
    + [".decl q(y: number, c: number)", ".output q", "q(y, c) :- mincost(0, y, c)."]
)
DUCK_SSSP = """WITH RECURSIVE sp(node, d) USING KEY (node) AS (
  SELECT 0, 0
  UNION
  SELECT e.y, min(sp.d + e.w) FROM sp JOIN edge e ON sp.node = e.x
  LEFT JOIN recurring.sp AS r ON r.node = e.y
  GROUP BY e.y HAVING min(sp.d + e.w) < coalesce(min(r.d), 9223372036854775807))
SELECT node, d FROM sp"""


# ---- inputs -------------------------------------------------------------------------------------------
def graph(m: int, nb: int) -> tuple[list[tuple[int, int, int]], list[tuple[list, list]]]:
    """m weighted edges over m / 10 nodes (one per pair), and nb batches of CHANGE changes."""
    rng = np.random.default_rng(7)
    n = max(10, m // 10)
    cur: dict[tuple[int, int], int] = {}
    while len(cur) < m:
        for x, y, w in zip(
            rng.integers(0, n, m), rng.integers(0, n, m), rng.integers(1, 100, m), strict=True
        ):
            if len(cur) < m:
                cur.setdefault((int(x), int(y)), int(w))
    start = [(x, y, w) for (x, y), w in cur.items()]
    batches = []
    for _ in range(nb):
        pairs = list(cur)
        picked = [pairs[i] for i in rng.choice(len(pairs), 2 * CHANGE // 3, replace=False).tolist()]
        dels = [(x, y, cur.pop((x, y))) for x, y in picked[: CHANGE // 3]]
        changed = picked[CHANGE // 3 :]
        ins = []
        for x, y in changed:  # a cost change: the old edge out, the same pair with another weight in
            w = cur.pop((x, y))
            dels.append((x, y, w))
            ins.append((x, y, 1 + (w + int(rng.integers(1, 98))) % 99))
        while len(ins) < CHANGE - len(dels) + len(changed):
            x, y = int(rng.integers(0, n)), int(rng.integers(0, n))
            if (x, y) not in cur and (x, y) not in {(a, b) for a, b, _ in ins}:
                ins.append((x, y, int(rng.integers(1, 100))))
        for x, y, w in ins:
            cur[(x, y)] = w
        batches.append((ins, dels))
    return start, batches


def at_batch(start: list, batches: list, b: int) -> list:
    cur = {(x, y): w for x, y, w in start}
    for ins, dels in batches[:b]:
        for x, y, _ in dels:
            del cur[(x, y)]
        cur.update({(x, y): w for x, y, w in ins})
    return [(x, y, w) for (x, y), w in cur.items()]


def _frame(rows: list, cols: tuple[str, ...] = ("x", "y", "w")) -> Any:
    import polars as pl

    return pl.DataFrame(rows, schema={c: pl.Int64 for c in cols}, orient="row")


def summary(dist: dict[int, float]) -> dict:
    return {"reached": len(dist), "sum": int(sum(dist.values()))}


# ---- workers ------------------------------------------------------------------------------------------
def worker_company(n: int) -> dict:
    import dbspark
    from dbspark.testing.recursive_aggregates import COMPANY, figure_1_units

    p = dbspark.Pipeline(engine="local", recursion_limit=4 * n + 100)  # (3 n + 1 iterations)
    p.datalog(COMPANY.format(t="number", half=5 * n))
    p.insert("owns", _frame(figure_1_units(n), ("x", "y", "n")))
    with Clock() as c:
        p.step()
    got = set(p.view("controls").to_dict())
    scope = [s for s in p.runtime.states.values() if hasattr(s, "iterations")]
    out = {"n": n, "wall": c.wall, "cpu": c.cpu, "iterations": scope[0].iterations[0] if scope else None}
    if got != {(0, i) for i in range(1, n + 1)}:  # 0 controls every other company
        out["mismatch"] = f"company control at n = {n}: {len(got)} facts of controls, not {n}"
    return out


def _sssp_pipeline(rows: list) -> tuple[Any, Clock]:
    import dbspark
    from dbspark.testing.recursive_aggregates import SSSP

    p = dbspark.Pipeline(engine="local")
    p.datalog(SSSP)
    p.insert("source", [(0,)])
    p.insert("edge", _frame(rows))
    with Clock() as c:
        p.step()
    return p, c


def _dist(p: Any) -> dict[int, float]:
    return {x: d for (x, d), w in p.view("dist").to_dict().items() if w > 0}


def worker_sssp_inc(m: int, nb: int) -> dict:
    start, batches = graph(m, nb)
    p, c = _sssp_pipeline(start)
    out: dict[str, Any] = {"scratch": {"wall": c.wall, "cpu": c.cpu}, "batches": []}
    for i, (ins, dels) in enumerate(batches, start=1):
        p.delete("edge", _frame(dels))
        p.insert("edge", _frame(ins))
        with Clock() as t:
            ch = p.step()
        out["batches"].append({"b": i, "wall": t.wall, "cpu": t.cpu, "out_rows": len(ch["dist"].to_dict())})
    out["final"] = summary(_dist(p))
    return out


def worker_sssp_recompute(m: int, nb: int) -> dict:
    start, batches = graph(m, nb)
    out: dict[str, Any] = {"batches": []}
    for b in sorted({1, nb}):
        p, c = _sssp_pipeline(at_batch(start, batches, b))
        out["batches"].append({"b": b, "wall": c.wall, "cpu": c.cpu})
        if b == nb:
            out["final"] = summary(_dist(p))
        p.close()
    return out


def worker_sssp_duckdb(m: int, nb: int) -> dict:
    import duckdb

    start, batches = graph(m, nb)
    out: dict[str, Any] = {}
    for key, rows in (("scratch", start), ("final_run", at_batch(start, batches, nb))):
        con = duckdb.connect()
        con.register("edge", _frame(rows).to_arrow())
        with Clock() as c:
            res = con.execute(DUCK_SSSP).fetchall()
        out[key] = {"wall": c.wall, "cpu": c.cpu}
        out["final"] = summary({int(x): float(d) for x, d in res})
    return out


def worker_sssp_scipy(m: int, nb: int) -> dict:
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    start, batches = graph(m, nb)
    out: dict[str, Any] = {}
    n = max(10, m // 10)
    for key, rows in (("scratch", start), ("final_run", at_batch(start, batches, nb))):
        a = np.array(rows, dtype=np.int64)
        with Clock() as c:
            g = csr_matrix((a[:, 2].astype(float), (a[:, 0], a[:, 1])), shape=(n, n))
            d = dijkstra(g, indices=0)
        out[key] = {"wall": c.wall, "cpu": c.cpu}
        fin = np.flatnonzero(np.isfinite(d))
        out["final"] = summary({int(i): float(d[i]) for i in fin})
    return out


def blocks(n: int) -> list[tuple[int, int]]:
    """n nodes in blocks of BLOCK, each node with edges to 3 random nodes of its block."""
    rng = np.random.default_rng(5)
    x = np.repeat(np.arange(n), 3)
    y = (x // BLOCK) * BLOCK + rng.integers(0, BLOCK, len(x))
    return sorted({(int(a), int(b)) for a, b in zip(x, y.clip(0, n - 1), strict=True)})


def worker_magic(n: int, magic: int) -> dict:
    import dbspark
    from dbspark.frontends.datalog.check import check
    from dbspark.frontends.datalog.magic import magic_sets
    from dbspark.frontends.datalog.parser import parse
    from dbspark.frontends.datalog.stratify import stratify

    edges = _frame(blocks(n), ("x", "y"))
    if magic:  # the rewrite written out is the one `magic_sets` makes
        c = check(parse(REACH))
        made = sorted(str(r) for r in magic_sets(c, stratify(sorted(c.relations), c.rules)).rules)
        mine = check(parse(REACH_MAGIC))
        if made != sorted(str(r) for r in mine.rules):
            return {"mismatch": f"REACH_MAGIC is not the rewrite of REACH: {made}"}
    timed = dbspark.Pipeline(engine="local")
    timed.datalog(REACH, magic_sets=bool(magic))
    timed.insert("edge", edges)
    with Clock() as c:
        timed.step()
    reach = len(timed.view("reach1").to_dict())
    counted = dbspark.Pipeline(engine="local")  # every derived relation an output, for its size
    counted.datalog(
        REACH_MAGIC if magic else REACH.replace(".output reach1", ".output reach1, path"), magic_sets=False
    )
    counted.insert("edge", edges)
    counted.step()
    facts = {v: len(counted.view(v).to_dict()) for v in counted.views}
    return {"wall": c.wall, "cpu": c.cpu, "reach1": reach, "facts": facts, "derived": sum(facts.values())}


def worker_magic_cost(n: int, magic: int) -> dict:
    """Cheapest paths from node 0 (`CHEAPEST_FROM_0`) on weighted blocks, with Magic Sets or whole:
    the time of the first step, and the facts of every derived relation of the program it runs (the
    rewritten one written out by `text_of`, every relation an output)."""
    import dbspark
    from dbspark.frontends.datalog.check import check
    from dbspark.frontends.datalog.magic import magic_sets
    from dbspark.frontends.datalog.parser import parse
    from dbspark.frontends.datalog.stratify import stratify
    from dbspark.testing.datalog import text_of

    rng = np.random.default_rng(7)
    pairs = blocks(n)
    edges = _frame([(x, y, int(w)) for (x, y), w in zip(pairs, rng.integers(1, 10, len(pairs)), strict=True)])
    timed = dbspark.Pipeline(engine="local")
    timed.datalog(CHEAPEST_FROM_0, magic_sets=bool(magic))
    timed.insert("edge", edges)
    with Clock() as c:
        timed.step()
    q = timed.view("q").to_dict()
    checked = check(parse(CHEAPEST_FROM_0))
    if magic:
        checked = magic_sets(checked, stratify(sorted(checked.relations), checked.rules))
        if not any(n.endswith("__magic") for n in checked.relations):
            return {"mismatch": "CHEAPEST_FROM_0 was not rewritten"}
    counted = dbspark.Pipeline(engine="local")
    counted.datalog(text_of(checked), magic_sets=False)
    counted.insert("edge", edges)
    counted.step()
    facts = {v: len(counted.view(v).to_dict()) for v in counted.views}
    return {
        "wall": c.wall,
        "cpu": c.cpu,
        "q": [len(q), sum(r[1] for r in q)],
        "facts": facts,
        "derived": sum(facts.values()),
    }


WORKERS = {
    "sssp_inc": worker_sssp_inc,
    "sssp_recompute": worker_sssp_recompute,
    "sssp_duckdb": worker_sssp_duckdb,
    "sssp_scipy": worker_sssp_scipy,
}


def worker_main(argv: list[str]) -> None:
    name = argv[0]
    if name == "company":
        res = worker_company(int(argv[1]))
    elif name == "magic":
        res = worker_magic(int(argv[1]), int(argv[2]))
    elif name == "magic_cost":
        res = worker_magic_cost(int(argv[1]), int(argv[2]))
    else:
        res = WORKERS[name](int(argv[1]), int(argv[2]))
    res["peak_rss_gib"] = peak_gib()
    print(json.dumps(res, default=h._json_default), flush=True)


def spawn(*argv: Any, timeout: float) -> dict:
    return h.spawn_worker("bench.recursive_aggregates", argv, timeout, " ".join(map(str, argv)))


# ---- the run ------------------------------------------------------------------------------------------
def exponent(points: list[tuple[int, float]]) -> float | None:
    """The slope of log(time) on log(n) (least squares), from at least two sizes."""
    if len(points) < 2:
        return None
    x = np.log([n for n, _ in points])
    y = np.log([t for _, t in points])
    return float(np.polyfit(x, y, 1)[0])


def run(
    quick: bool, workloads: list[str] | None = None, nb: int | None = None, timeout: float = 1800
) -> dict:
    nb = nb or h.sized(20, 5, quick, smoke=2)
    sizes = h.sized(SIZES, QUICK, quick, smoke=SMOKE)
    res: dict[str, Any] = {"params": {"batches": nb, "change": CHANGE, "sizes": sizes}}
    todo = workloads or ["company", "sssp", "magic", "magic_cost"]
    if "company" in todo:
        runs = [spawn("company", n, timeout=timeout) for n in sizes["company"]]
        for r in runs:
            if "mismatch" in r:
                raise h.Mismatch(r["mismatch"])
        ok = [r for r in runs if "error" not in r]
        res["company"] = {
            "runs": runs,
            "exponent_cpu": exponent([(r["n"], r["cpu"]) for r in ok]),
            "exponent_wall": exponent([(r["n"], r["wall"]) for r in ok]),
        }
    if "sssp" in todo:
        m = sizes["sssp"]
        sy = {s: spawn(f"sssp_{s}", m, nb, timeout=timeout) for s in ("inc", "recompute", "duckdb", "scipy")}
        finals = {s: r["final"] for s, r in sy.items() if "final" in r}
        if len({json.dumps(f, sort_keys=True) for f in finals.values()}) > 1:
            raise h.Mismatch(f"sssp: the final distances differ: {finals}")
        res["sssp"] = {"edges": m, "systems": sy}
    if "magic" in todo:
        n = sizes["magic"]
        sy = {
            "magic sets": spawn("magic", n, 1, timeout=timeout),
            "whole": spawn("magic", n, 0, timeout=timeout),
        }
        for r in sy.values():
            if "mismatch" in r:
                raise h.Mismatch(r["mismatch"])
        if len({r.get("reach1") for r in sy.values()}) > 1:
            raise h.Mismatch(f"magic: reach1 differs: {sy}")
        res["magic"] = {"nodes": n, "systems": sy}
    if "magic_cost" in todo:
        n = sizes["magic_cost"]
        sy = {
            "magic sets": spawn("magic_cost", n, 1, timeout=timeout),
            "whole": spawn("magic_cost", n, 0, timeout=timeout),
        }
        for r in sy.values():
            if "mismatch" in r:
                raise h.Mismatch(r["mismatch"])
        if len({json.dumps(r.get("q")) for r in sy.values()}) > 1:
            raise h.Mismatch(f"magic_cost: the cheapest paths from 0 differ: {sy}")
        res["magic_cost"] = {"nodes": n, "systems": sy}
    res["table"] = render(res)
    res["plot"] = [
        {
            "title": "company control, from scratch",
            "xlabel": "companies n",
            "ylabel": "CPU time (s)",
            "series": {"dbspark": ([r["n"] for r in ok], [r["cpu"] for r in ok])},
        }
        for ok in [[r for r in res.get("company", {}).get("runs", []) if "error" not in r]]
        if ok
    ]
    res["plot_title"] = "recursive aggregates"
    return res


def _med(r: dict, k: str = "wall") -> float | None:
    bs = r.get("batches") or []
    return statistics.median(b[k] for b in bs) if bs else None


def render(res: dict) -> str:
    out = []
    if "company" in res:
        c = res["company"]
        rows = [
            [
                r.get("n", ""),
                r.get("error", "") or h.fmt_s(r["wall"]),
                h.fmt_s(r.get("cpu")),
                r.get("iterations", ""),
            ]
            for r in c["runs"]
        ]
        ex = c["exponent_cpu"]
        out.append(
            h.table(
                "company control (Figure 1), from scratch; growth exponent of CPU time "
                + (f"{ex:.2f}" if ex is not None and math.isfinite(ex) else "n/a")
                + " (goal <= 1.2)",
                ["n", "wall", "CPU", "iterations"],
                rows,
            )
        )
    if "sssp" in res:
        sy = res["sssp"]["systems"]
        inc, rec = sy["inc"], sy["recompute"]
        sc = inc.get("scratch", {}).get("wall")
        rows = []
        for s, r in sy.items():
            if "error" in r:
                rows.append([s, r["error"], "", ""])
                continue
            scratch = (r.get("scratch") or {}).get("wall")
            med = _med(r) if s == "inc" else None
            rows.append(
                [
                    s,
                    h.fmt_s(scratch) if scratch is not None else "",
                    h.fmt_x(scratch / sc) if scratch and sc and s in ("duckdb", "scipy") else "",
                    f"{h.fmt_s(med)} ({h.fmt_s(_med(r, 'cpu'))}), recompute / batch {h.fmt_x(_med(rec) / med)}"
                    if med and _med(rec)
                    else "",
                ]
            )
        out.append(
            h.table(
                f"SSSP from node 0, {res['sssp']['edges']:,} edges; batches of {CHANGE} changes "
                f"(median of {res['params']['batches']})",
                ["system", "from scratch", "its time / dbspark's, from scratch", "per batch wall (CPU)"],
                rows,
            )
        )
    titles = {
        "magic": ("reachability from node 1", "reach1"),
        "magic_cost": ("cheapest paths from node 0 (APSP asked for one source)", "q"),
    }
    for key, (what, col) in titles.items():
        if key not in res:
            continue
        sy = res[key]["systems"]
        m, w = sy["magic sets"], sy["whole"]
        rows = [
            [
                s,
                r.get("error", "") or h.fmt_s(r["wall"]),
                h.fmt_s(r.get("cpu")),
                f"{r['derived']:,}" if "derived" in r else "",
                str(r.get(col, "")),
            ]
            for s, r in sy.items()
        ]
        if "derived" in m and "derived" in w:
            rows.append(
                [
                    "whole / magic",
                    h.fmt_x(w["wall"] / m["wall"]),
                    h.fmt_x(w["cpu"] / m["cpu"]),
                    h.fmt_x(w["derived"] / m["derived"]),
                    "",
                ]
            )
        out.append(
            h.table(
                f"Magic Sets: {what}, {res[key]['nodes']:,} nodes in blocks of {BLOCK} "
                "(goal: whole / magic >= 10x in facts and time)",
                ["evaluation", "wall", "CPU", "facts derived", col],
                rows,
            )
        )
    return "\n\n".join(out)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker_main(sys.argv[sys.argv.index("--worker") + 1 :])
    else:
        ap = argparse.ArgumentParser(prog="python -m bench.recursive_aggregates")
        ap.add_argument("--quick", action="store_true")
        ap.add_argument("--workloads", help="comma-separated, of company,sssp,magic,magic_cost")
        ap.add_argument("--batches", type=int)
        a = ap.parse_args()
        out = run(a.quick, a.workloads.split(",") if a.workloads else None, a.batches)
        del out["plot"], out["plot_title"]
        print(out["table"])
        print("written:", h.write_json("recursive_aggregates", a.quick, out))
