"""Recursive views under each maintenance strategy (`docs/recursion-strategies.md`): from scratch and
per batch of 100 inserts + 100 deletes, against recomputation.

    python -m bench recursion                      # all workloads (about 10 minutes)
    python -m bench.recursion --workloads reach,sg --batches 5
    python -m bench.recursion --workloads pointsto,sg_forest --size 1000000   # at 1M input facts

Workloads (Datalog programs through `Pipeline(engine="local", recursion=...)`; TC with the closure
operator switched off, so that every one runs through a recursive scope):

- `tc`: `path(x, y) :- edge(x, y). path(x, y) :- path(x, z), edge(z, y).` on `bench.tc.make_graph`'s
  random graph (one giant strongly connected component; 1,000 nodes / 4,000 edges);
- `reach`: reachability from 10 roots on a random graph of 100,000 edges (50,000 nodes);
- `sg`: same generation, `sg(x, y) :- par(p, x), par(p, y), x != y. sg(x, y) :- par(a, x), sg(a, b),
  par(b, y).`, on a random tree (node i's parent drawn from the 200 nodes before it; 20,000 nodes);
- `sg_forest`: same generation on a forest of random trees of 16 nodes (node i's parent drawn from
  the nodes before it in its tree; 1,000,000 parent facts make about 3.2M sg pairs, where `sg`'s tree
  would make 100M); batches delete random parent facts and add new leaves;
- `pointsto`: Andersen's points-to analysis of a generated program (assignments `p = &a`, `p = q`,
  `p = *q`, `*p = q`; 100,000 statements over 50,000 variables).

`--size N` runs the chosen workloads at N input facts (Soufflé programs at the scale of issue 19:
`--workloads pointsto,sg_forest --size 1000000`).

Systems, each in a subprocess (its peak RSS its own): dbspark with `recursion="nested"`, `"dred"` and
`"auto"` (one pipeline: the from-scratch step, then one step per batch); dbspark's recompute (a fresh
pipeline on the whole input after batch 1 and after the last batch: semi-naive from scratch, the
`dred` strategy's first step); DuckDB's `WITH RECURSIVE ... UNION` (tc, reach, sg, sg_forest: its
recursive reference is the last iteration's new rows), and for points-to, whose rules are non-linear,
`WITH RECURSIVE ... USING KEY` (DuckDB >= 1.3), where `recurring.pt` is every row so far: each
non-linear rule is written twice (new rows joined with all rows, all rows with new rows) and rows
already there are filtered out, which is semi-naive evaluation; DuckDB runs from scratch at the start
and after the last batch; a plain-Python semi-naive evaluation over sets and dicts. Every system's final
relation is checked equal (size and digest) to the recompute's.

Memory: the worker's RSS growth over the run (its peak minus its RSS once dbspark is imported, before
the input is built; the input's Python lists count too) against the fixpoint's size as int64 columns
(rows x columns x 8 bytes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

import numpy as np

from bench import harness as h
from bench.datalog import REACH, TC
from bench.tc import Clock, make_graph, peak_gib, rss_now_gib

CHANGE = 100
SG = """
.decl par(p: number, c: number)
.input par
.decl sg(x: number, y: number)
.output sg
sg(x, y) :- par(p, x), par(p, y), x != y.
sg(x, y) :- par(a, x), sg(a, b), par(b, y).
"""
POINTSTO = """
.decl addr(p: number, a: number)
.decl assign(p: number, q: number)
.decl load(p: number, q: number)
.decl store(p: number, q: number)
.input addr, assign, load, store
.decl pt(p: number, a: number)
.output pt
pt(p, a) :- addr(p, a).
pt(p, a) :- assign(p, q), pt(q, a).
pt(p, a) :- load(p, q), pt(q, r), pt(r, a).
pt(r, a) :- store(p, q), pt(p, r), pt(q, a).
"""
DUCK = {
    "tc": "WITH RECURSIVE v(x, y) AS (SELECT x, y FROM edge UNION SELECT v.x, edge.y FROM v "
    "JOIN edge ON v.y = edge.x) SELECT x, y FROM v",
    "reach": "WITH RECURSIVE v(x) AS (SELECT x FROM root UNION SELECT edge.y FROM v JOIN edge "
    "ON v.x = edge.x) SELECT x FROM v",
    "sg": "WITH RECURSIVE v(x, y) AS (SELECT a.c, b.c FROM par a JOIN par b ON a.p = b.p WHERE a.c <> b.c "
    "UNION SELECT a.c, b.c FROM par a JOIN v ON a.p = v.x JOIN par b ON v.y = b.p) SELECT x, y FROM v",
    "pointsto": """WITH RECURSIVE pt(p, a) USING KEY (p, a) AS (
  SELECT p, a FROM addr
  UNION
  SELECT DISTINCT n.p, n.a FROM (
    SELECT s.p, d.a FROM assign s JOIN pt d ON d.p = s.q
    UNION ALL SELECT l.p, r.a FROM load l JOIN pt d ON d.p = l.q JOIN recurring.pt r ON r.p = d.a
    UNION ALL SELECT l.p, r.a FROM load l JOIN recurring.pt d ON d.p = l.q JOIN pt r ON r.p = d.a
    UNION ALL SELECT d.a, r.a FROM store s JOIN pt d ON d.p = s.p JOIN recurring.pt r ON r.p = s.q
    UNION ALL SELECT d.a, r.a FROM store s JOIN recurring.pt d ON d.p = s.p JOIN pt r ON r.p = s.q
  ) n WHERE NOT EXISTS (SELECT 1 FROM recurring.pt o WHERE o.p = n.p AND o.a = n.a))
SELECT p, a FROM pt""",
}
DUCK["sg_forest"] = DUCK["sg"]
FULL = {"tc": 1000, "reach": 100_000, "sg": 20_000, "pointsto": 100_000, "sg_forest": 100_000}
QUICK = {"tc": 300, "reach": 20_000, "sg": 5_000, "pointsto": 20_000, "sg_forest": 20_000}
SMOKE = {"tc": 60, "reach": 2_000, "sg": 500, "pointsto": 2_000, "sg_forest": 2_000}
VIEW = {"tc": "path", "reach": "reach", "sg": "sg", "pointsto": "pt", "sg_forest": "sg"}
TREE = 16  # sg_forest's trees' nodes
# "dred-usual": dred with its first step run the usual way, not as a fresh run (`operators/fresh.py`)
# "-unranked": without ranks, DRed's own over-delete (`incremental/ranked.py`)
STRATEGIES = ("nested", "dred", "auto", "dred-usual", "dred-unranked", "auto-unranked")


# ---- inputs: each workload's relations at the start and its batches (all deterministic) ------------
def _tree(n: int, nb: int) -> tuple[dict, list]:
    rng = np.random.default_rng(11)
    par = [(int(rng.integers(max(0, i - 200), i)), i) for i in range(1, n)]
    cur, nxt, batches = set(par), n, []
    for _ in range(nb):
        pool = sorted(cur)
        dels = [pool[i] for i in sorted(rng.choice(len(pool), CHANGE, replace=False).tolist())]
        ins = [(int(rng.integers(0, nxt)), nxt + j) for j in range(CHANGE)]  # new leaves
        nxt += CHANGE
        cur.difference_update(dels)
        cur.update(ins)
        batches.append(({"par": ins}, {"par": dels}))
    return {"par": par}, batches


def _forest(n: int, nb: int) -> tuple[dict, list]:
    """n parent facts: trees of TREE nodes, each node's parent drawn from the nodes before it in its
    tree; a batch deletes CHANGE random parent facts and adds CHANGE new leaves under random nodes."""
    rng = np.random.default_rng(17)
    trees = -(-n // (TREE - 1))
    k = np.arange(1, TREE)
    parent = (np.arange(trees) * TREE)[:, None] + (rng.random((trees, TREE - 1)) * k).astype(np.int64)
    child = np.arange(trees * TREE).reshape(trees, TREE)[:, 1:]
    par = sorted(zip(parent.ravel().tolist()[:n], child.ravel().tolist()[:n], strict=True))
    cur, nxt, batches = set(par), trees * TREE, []
    for _ in range(nb):
        pool = sorted(cur)
        dels = [pool[i] for i in sorted(rng.choice(len(pool), CHANGE, replace=False).tolist())]
        ins = [(int(rng.integers(0, nxt)), nxt + j) for j in range(CHANGE)]
        nxt += CHANGE
        cur.difference_update(dels)
        cur.update(ins)
        batches.append(({"par": ins}, {"par": dels}))
    return {"par": par}, batches


KINDS = {"addr": 0.3, "assign": 0.4, "load": 0.15, "store": 0.15}  # shares of the statements
LOCALS, CROSS = 25, 0.01  # variables per function; share of statements reading another function's


def _program(n: int, nb: int) -> tuple[dict, list]:
    """n statements of n / 50 functions with 25 pointer variables each: a statement reads and writes
    variables of its function, but with probability 1% its source is another function's (a call's
    argument or result); `p = &a` allocates a new object a (ids above the variables'), through which
    loads and stores go. Batches replace CHANGE statements (in the kinds' shares)."""
    rng = np.random.default_rng(13)
    nf = max(1, n // 50)
    nv = nf * LOCALS
    objects = iter(range(nv, 10**12))

    def statement(kind: str) -> tuple[int, int]:
        f = int(rng.integers(0, nf))
        p = f * LOCALS + int(rng.integers(0, LOCALS))
        if kind == "addr":
            return p, next(objects)
        g = int(rng.integers(0, nf)) if rng.random() < CROSS else f
        return p, g * LOCALS + int(rng.integers(0, LOCALS))

    def fresh(have: set, kind: str, count: int) -> set:
        new: set = set()
        while len(new) < count:
            st = statement(kind)
            if st not in have:
                new.add(st)
        return new

    cur = {k: fresh(set(), k, int(n * s)) for k, s in KINDS.items()}
    start = {k: sorted(v) for k, v in cur.items()}
    batches = []
    for _ in range(nb):
        ins: dict[str, list] = {}
        dels: dict[str, list] = {}
        for k, s in KINDS.items():
            c = max(1, round(CHANGE * s))
            pool = sorted(cur[k])
            dels[k] = [pool[i] for i in sorted(rng.choice(len(pool), c, replace=False).tolist())]
            ins[k] = sorted(fresh(cur[k], k, c))
            cur[k].difference_update(dels[k])
            cur[k].update(ins[k])
        batches.append((ins, dels))
    return start, batches


def inputs(w: str, size: int, nb: int) -> tuple[str, dict, list]:
    """(program, the input relations at the start, batches of ({rel: inserts}, {rel: deletes}))."""
    if w == "tc":
        init, bs = make_graph(size, 4 * size, nb, CHANGE)
        return TC, {"edge": init}, [({"edge": i}, {"edge": d}) for i, d in bs]
    if w == "reach":
        init, bs = make_graph(size // 2, size, nb, CHANGE, seed=7)
        roots = [(i,) for i in range(0, size // 2, max(1, size // 20))][:10]
        return REACH, {"edge": init, "root": roots}, [({"edge": i}, {"edge": d}) for i, d in bs]
    if w == "sg":
        return (SG, *_tree(size, nb))
    if w == "sg_forest":
        return (SG, *_forest(size, nb))
    return (POINTSTO, *_program(size, nb))


def at_batch(start: dict, batches: list, b: int) -> dict[str, list]:
    cur = {k: set(v) for k, v in start.items()}
    for ins, dels in batches[:b]:
        for k, v in dels.items():
            cur[k].difference_update(v)
        for k, v in ins.items():
            cur[k].update(v)
    return {k: sorted(v) for k, v in cur.items()}


def _frame(rows: list) -> Any:
    import polars as pl

    width = len(rows[0]) if rows else 2
    arr = np.asarray(rows, dtype=np.int64).reshape(-1, width)
    return pl.DataFrame({f"c{i}": arr[:, i] for i in range(width)})


def digest_rows(df: Any) -> dict:
    import hashlib

    keys = np.sort(
        sum(
            (df[c].to_numpy().astype(np.int64) * (1_000_003**i) for i, c in enumerate(df.columns)),
            start=np.zeros(df.height, dtype=np.int64),
        )
    )
    return {"size": int(df.height), "sha256": hashlib.sha256(keys.tobytes()).hexdigest()[:16]}


# ---- workers ----------------------------------------------------------------------------------------
def _pipeline(w: str, text: str, rels: dict, strategy: str | None) -> tuple[Any, Clock]:
    import dbspark

    if strategy == "dred-usual":
        import dbspark.operators.dred as dred

        dred.FRESH_RUNS, strategy = False, "dred"
    if strategy is not None and strategy.endswith("-unranked"):
        import dbspark.incremental.fixpoint as fixpoint

        fixpoint.RANKS, strategy = False, strategy.removesuffix("-unranked")
    p = dbspark.Pipeline(engine="local", recursion=strategy)
    p.datalog(text, closure_operator=False)
    for k, rows in rels.items():
        push(p, k, rows, 1)
    with Clock() as c:
        p.step()
    return p, c


def push(p: Any, table: str, rows: list, sign: int) -> None:
    """Rows of a table as a frame with its column names, inserted (sign 1) or deleted (-1)."""
    f = _frame(rows)
    f = f.rename(dict(zip(f.columns, p.relation(table).columns, strict=True)))
    (p.insert if sign > 0 else p.delete)(table, f)


def _view_frame(p: Any, view: str) -> Any:
    from dbspark.algebra.consolidate import WEIGHT

    return p.view(view).df.drop(WEIGHT, strict=False)


def worker_inc(w: str, size: int, nb: int, strategy: str) -> dict:
    import dbspark  # noqa: F401 - imported before the baseline: its modules are not the run's memory

    base = rss_now_gib()
    text, start, batches = inputs(w, size, nb)
    p, c = _pipeline(w, text, start, strategy)
    view = VIEW[w]
    fix = _view_frame(p, view)
    out: dict[str, Any] = {
        "scratch": {"wall": c.wall, "cpu": c.cpu},
        "fixpoint_rows": fix.height,
        "fixpoint_bytes": fix.height * fix.width * 8,
        "batches": [],
    }
    for i, (ins, dels) in enumerate(batches, start=1):
        for k, v in ins.items():
            push(p, k, v, 1)
        for k, v in dels.items():
            push(p, k, v, -1)
        with Clock() as t:
            ch = p.step()
        out["batches"].append({"b": i, "wall": t.wall, "cpu": t.cpu, "out_rows": len(ch[view].to_dict())})
    scope = [s for s in p.runtime.states.values() if hasattr(s, "iterations")]
    out["iterations"] = scope[0].iterations if scope else []
    out["switched_at"] = getattr(scope[0], "switched_at", None) if scope else None
    out["recomputed"] = getattr(scope[0], "recomputed", None) if scope else None  # (step 0: from scratch)
    out["final"] = digest_rows(_view_frame(p, view))
    out["rss_growth_gib"] = peak_gib() - base
    return out


def _batches(steps: list[int]) -> str:
    """The batches (numbered from 1, as the steps after the one from scratch) among `steps`."""
    return ", ".join(str(b) for b in steps if b > 0)


def worker_recompute(w: str, size: int, nb: int) -> dict:
    text, start, batches = inputs(w, size, nb)
    out: dict[str, Any] = {"batches": []}
    for b in sorted({1, nb}):
        p, c = _pipeline(w, text, at_batch(start, batches, b), "dred")
        out["batches"].append({"b": b, "wall": c.wall, "cpu": c.cpu})
        if b == nb:
            out["final"] = digest_rows(_view_frame(p, VIEW[w]))
        p.close()
    return out


def worker_duckdb(w: str, size: int, nb: int) -> dict:
    import duckdb

    text, start, batches = inputs(w, size, nb)
    con = duckdb.connect()
    out: dict[str, Any] = {"batches": []}
    cols = {"edge": ("x", "y"), "root": ("x",), "par": ("p", "c"), "addr": ("p", "a")}
    cols |= {k: ("p", "q") for k in ("assign", "load", "store")}
    for b in [0, nb] if w == "pointsto" else [0, *sorted({1, nb})]:  # (points-to: minutes a run)
        for k, rows in at_batch(start, batches, b).items():
            df = _frame(rows).rename(dict(zip([f"c{i}" for i in range(len(cols[k]))], cols[k], strict=True)))  # noqa: F841
            con.execute(f"CREATE OR REPLACE TABLE {k} AS SELECT * FROM df")
        with Clock() as c:
            res = con.execute(DUCK[w]).pl()
        if b == 0:
            out["scratch"] = {"wall": c.wall, "cpu": c.cpu}
        else:
            out["batches"].append({"b": b, "wall": c.wall, "cpu": c.cpu})
        if b == nb:
            out["final"] = digest_rows(res.rename({a: f"c{i}" for i, a in enumerate(res.columns)}))
    return out


def py_pointsto(rels: dict[str, list]) -> set[tuple[int, int]]:
    """Andersen's analysis by semi-naive evaluation over dicts of sets."""
    from collections import defaultdict

    pt: dict[int, set] = defaultdict(set)
    assign_by_q, load_by_q, store_by_p, store_by_q = (defaultdict(list) for _ in range(4))
    for p, q in rels["assign"]:
        assign_by_q[q].append(p)
    for p, q in rels["load"]:
        load_by_q[q].append(p)
    for p, q in rels["store"]:
        store_by_p[p].append(q)
        store_by_q[q].append(p)
    loads_of_r: dict[int, set] = defaultdict(set)  # r -> p with p = *q and r in pt(q)
    delta = defaultdict(set)
    for p, a in rels["addr"]:
        delta[p].add(a)
    while delta:
        for v, s in delta.items():
            pt[v] |= s
        new: dict[int, set] = defaultdict(set)

        def add(v: int, xs: set, new: dict[int, set] = new) -> None:
            fresh = xs - pt[v]
            if fresh:
                new[v] |= fresh

        for q, d in delta.items():
            for p in assign_by_q[q]:
                add(p, d)
            for p in load_by_q[q]:  # p = *q: pt(p) ⊇ pt(r) for the new r in pt(q)
                for r in d:
                    loads_of_r[r].add(p)
                    add(p, pt[r])
            for p in loads_of_r[q]:  # q gained targets: every p = *x with q in pt(x)
                add(p, d)
            for p in store_by_q[q]:  # *p = q: pt(r) ⊇ pt(q) for r in pt(p)
                for r in pt[p]:
                    add(r, d)
            for q2 in store_by_p[q]:  # *q = q2: the new r in pt(q) get pt(q2)
                for r in d:
                    add(r, pt[q2])
        delta = new
    return {(p, a) for p, s in pt.items() for a in s}


def py_closure(rels: dict[str, list]) -> set[tuple[int, int]]:
    """Transitive closure of `edge` by semi-naive evaluation over sets (new paths: the last round's
    joined with the edges, less those known)."""
    from collections import defaultdict

    out: dict[int, list] = defaultdict(list)
    for x, y in rels["edge"]:
        out[x].append(y)
    path = set(rels["edge"])
    delta = set(path)
    while delta:
        delta = {(x, z) for x, y in delta for z in out.get(y, ())} - path
        path |= delta
    return path


def py_reach(rels: dict[str, list]) -> set[tuple[int]]:
    """The nodes reachable from the roots, by semi-naive evaluation over sets."""
    from collections import defaultdict

    out: dict[int, list] = defaultdict(list)
    for x, y in rels["edge"]:
        out[x].append(y)
    reach = {r for (r,) in rels["root"]}
    delta = set(reach)
    while delta:
        delta = {y for x in delta for y in out.get(x, ())} - reach
        reach |= delta
    return {(x,) for x in reach}


def py_same_generation(rels: dict[str, list]) -> set[tuple[int, int]]:
    """Same generation (`SG`) by semi-naive evaluation over sets: siblings, then the children of pairs
    found in the last round."""
    from collections import defaultdict

    kids: dict[int, list] = defaultdict(list)
    for p, c in rels["par"]:
        kids[p].append(c)
    sg = {(x, y) for cs in kids.values() for x in cs for y in cs if x != y}
    delta = set(sg)
    while delta:
        delta = {(x, y) for a, b in delta for x in kids.get(a, ()) for y in kids.get(b, ())} - sg
        sg |= delta
    return sg


PY = {"tc": py_closure, "reach": py_reach, "sg": py_same_generation, "pointsto": py_pointsto}
PY["sg_forest"] = py_same_generation


def worker_python(w: str, size: int, nb: int) -> dict:
    import polars as pl

    text, start, batches = inputs(w, size, nb)
    out: dict[str, Any] = {"batches": []}
    for b in [0, nb]:
        rels = at_batch(start, batches, b)
        with Clock() as c:
            res = PY[w](rels)
        if b == 0:
            out["scratch"] = {"wall": c.wall, "cpu": c.cpu}
        else:
            out["batches"].append({"b": b, "wall": c.wall, "cpu": c.cpu})
            width = len(next(iter(res))) if res else 2
            arr = np.asarray(sorted(res), dtype=np.int64).reshape(-1, width)
            out["final"] = digest_rows(pl.DataFrame({f"c{i}": arr[:, i] for i in range(width)}))
    return out


def worker_main(argv: list[str]) -> None:
    name, w, size, nb = argv[:4]
    args: list[Any] = [w, int(size), int(nb)]
    if name == "inc":
        res = worker_inc(*args, argv[4])
    else:
        res = {"recompute": worker_recompute, "duckdb": worker_duckdb, "python": worker_python}[name](*args)
    res["peak_rss_gib"] = peak_gib()
    print(json.dumps(res, default=h._json_default), flush=True)


def spawn(*argv: Any, timeout: float) -> dict:
    return h.spawn_worker("bench.recursion", argv, timeout, " ".join(map(str, argv)))


# ---- the run ----------------------------------------------------------------------------------------
def _med(r: dict, k: str = "wall") -> float | None:
    bs = r.get("batches") or []
    return statistics.median(b[k] for b in bs) if bs else None


def run(
    quick: bool,
    workloads: list[str] | None = None,
    nb: int | None = None,
    timeout: float = 1800,
    size: int | None = None,
    only: list[str] | None = None,
) -> dict:
    nb = nb or h.sized(5, 3, quick, smoke=2)
    sizes = dict(h.sized(FULL, QUICK, quick, smoke=SMOKE))
    if size is not None:
        sizes = {w: size for w in sizes}
    res: dict[str, Any] = {"params": {"batches": nb, "change": CHANGE, "sizes": sizes}, "workloads": {}}
    for w in workloads or list(FULL):
        size = sizes[w]
        # (the smoke run leaves out the variants kept for comparison: it checks the harness)
        variants = h.sized(STRATEGIES, STRATEGIES, quick, smoke=("nested", "dred", "auto"))
        chosen = [
            *variants,
            "recompute",
            "duckdb" if w in DUCK else "",
            "python",
        ]
        systems: dict[str, dict] = {}
        for s in chosen:
            if s and (only is None or s in only):
                args = ("inc", w, size, nb, s) if s in STRATEGIES else (s, w, size, nb)
                systems[s] = spawn(*args, timeout=timeout)
        want = next((r["final"] for r in systems.values() if "final" in r), None)
        for s, r in systems.items():
            if "final" in r and want is not None and r["final"] != want:
                raise h.Mismatch(f"{w}: {s} ends with {r['final']}, the recompute with {want}")
        res["workloads"][w] = {"size": size, "systems": systems}
    res["table"] = render(res)
    res["plot"] = [
        {
            "title": f"{w} ({z['size']:,})",
            "xlabel": "batch",
            "ylabel": "wall time per batch (s)",
            "series": {
                s: ([b["b"] for b in r["batches"]], [b["wall"] for b in r["batches"]])
                for s, r in z["systems"].items()
                if r.get("batches")
            },
        }
        for w, z in res["workloads"].items()
    ]
    res["plot_title"] = f"recursion: per batch of {CHANGE} inserts + {CHANGE} deletes, by strategy"
    return res


def render(res: dict) -> str:
    rows = []
    for w, z in res["workloads"].items():
        sy = z["systems"]
        rec = _med(sy["recompute"]) if "recompute" in sy else None
        anchor = sy.get("duckdb") or {}
        python = sy.get("python") or {}
        for s, r in sy.items():
            if "error" in r:
                rows.append([w, s, r["error"], "", "", "", "", "", ""])
                continue
            med = _med(r)
            sc = r.get("scratch", {}).get("wall")
            its = r.get("iterations") or []
            mem = (
                f"{r['rss_growth_gib']:.2f} GiB / {r['fixpoint_bytes'] / 2**30:.3f} GiB"
                if "rss_growth_gib" in r
                else ""
            )
            rows.append(
                [
                    w,
                    s,
                    h.fmt_s(sc) if sc is not None else "",
                    h.fmt_x(anchor["scratch"]["wall"] / sc)
                    if sc and anchor.get("scratch") and s in STRATEGIES
                    else "",
                    h.fmt_x(python["scratch"]["wall"] / sc)
                    if sc and python.get("scratch") and s in STRATEGIES
                    else "",
                    f"{h.fmt_s(med)} ({h.fmt_s(_med(r, 'cpu'))})" if med is not None else "",
                    h.fmt_x(rec / med) if rec and med and s in STRATEGIES else "",
                    f"{statistics.median(its[1:]) if len(its) > 1 else ''}"
                    + (f", nested from batch {r['switched_at']}" if r.get("switched_at") else "")
                    + (f", batches {_batches(r['recomputed'])} recomputed" if r.get("recomputed") else ""),
                    mem,
                ]
            )
    return h.table(
        f"recursion: per batch of {CHANGE} inserts + {CHANGE} deletes (median of {res['params']['batches']})",
        [
            "workload",
            "system",
            "from scratch",
            "DuckDB / it, from scratch",
            "Python / it, from scratch",
            "per batch wall (CPU)",
            "recompute / batch",
            "iterations per batch",
            "RSS growth / fixpoint",
        ],
        rows,
    )


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker_main(sys.argv[sys.argv.index("--worker") + 1 :])
    else:
        ap = argparse.ArgumentParser(prog="python -m bench.recursion")
        ap.add_argument("--quick", action="store_true")
        ap.add_argument("--workloads", help=f"comma-separated, of {','.join(FULL)}")
        ap.add_argument("--batches", type=int)
        ap.add_argument("--size", type=int, help="the chosen workloads' input facts (nodes for tc)")
        ap.add_argument(
            "--systems", help=f"comma-separated, of {','.join(STRATEGIES)},recompute,duckdb,python"
        )
        a = ap.parse_args()
        out = run(
            a.quick,
            a.workloads.split(",") if a.workloads else None,
            a.batches,
            size=a.size,
            only=a.systems.split(",") if a.systems else None,
        )
        del out["plot"], out["plot_title"]  # `python -m bench recursion` draws them
        print(out["table"])
        print("written:", h.write_json("recursion", a.quick, out))
