"""tc: transitive closure of a random directed graph, from scratch and under edge inserts + deletes.

    path(x, y) :- edge(x, y).
    path(x, y) :- path(x, z), edge(z, y).

A random directed graph (full: 5,000 nodes and 20,000 edges, no self-loops, fixed seed; --quick: 500 /
2,000) is closed from scratch, then 20 batches (--quick: 5) of 100 edge inserts (new edges) + 100 edge
deletes (of present edges) are applied. Every system runs in its own subprocess (`python -m bench.tc
--worker SYSTEM ...`), so that its peak RSS (`getrusage` maxrss) is its own; times are wall
(`perf_counter`) and CPU (`process_time`, all threads of the process). Systems:

* dbspark incremental: `c.recursive(body, [edge])` incrementalized, one Runtime kept across batches,
  each batch pushed as one frame with a `weight` column. Also read: the iterations of the scope per
  step (`ScopeState.iterations`) and the size of the closure's change.
* dbspark recompute: the non-incremental circuit (mode="seminaive") run with `snapshots=True` on a fresh
  Runtime per batch, pushing the whole edge set (a Runtime kept across snapshot steps would integrate
  the snapshots into its view trace, which is meaningless and grows).
* DuckDB: the recursive CTE (UNION, i.e. set semantics) `SELECT count(*)` on its edge table, after the
  batch's INSERT / DELETE.
* plain Python semi-naive: Δpath' = (Δpath ∘ edge) − path with a set of successors per source node,
  recomputed from scratch per batch.
* Pathway (if importable): `pw.iterate` on a streaming input with deletions, one commit per batch, on a
  smaller graph (default 300 nodes / 1,200 edges, 10 + 10 changes per batch) next to dbspark
  incremental and the Python recompute on the same data.

The recompute systems are timed on a subset of the batches when they are slow (always including the
last one). The incremental system may stop early when its batch phase exceeds a time budget
(`TC_BUDGET_S`, default 1500 s full / 600 s quick) or its RSS limit (`TC_RSS_LIMIT_GIB`,
default 20); the others then stop at the same batch.

Checking: each system's closure after the from-scratch step and after the last batch is reduced to
(size, sha256 of the sorted keys src * n + dst); all systems must agree (a `Mismatch` fails the run).

`python -m bench.tc --profile [--quick] [--n N --m M]` profiles one incremental batch with pyinstrument.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from bench import harness as h

SEED = 2026
CHANGE = 100  # edge inserts per batch, and as many deletes
FULL = [(5000, 20000)]
MID = (2000, 8000)  # the trend point, next to the full size
QUICK = [(500, 2000)]
PW_GRAPH = (300, 1200, 10, 5)  # pathway comparison: nodes, edges, change per batch, batches
SYSTEMS = (
    "dbspark closure operator",
    "dbspark incremental",
    "dbspark recompute",
    "duckdb recompute",
    "python semi-naive",
)
WORKER_IDS = {
    "dbspark closure operator": "closure",
    "dbspark incremental": "inc",
    "dbspark recompute": "recompute",
    "duckdb recompute": "duckdb",
    "python semi-naive": "python",
    "pathway": "pathway",
}
ROOT = Path(__file__).resolve().parents[1]
# a worker stops itself above this RSS (the machine is shared: an OOM kill may hit another process)
RSS_LIMIT_GIB = float(os.environ.get("TC_RSS_LIMIT_GIB", 20))
# the general recursive scope runs up to this many nodes (at 5,000 it needs about 20 GiB and 30 minutes)
SCOPE_MAX_NODES = int(os.environ.get("TC_SCOPE_MAX_NODES", 10**9))


# ---- data ------------------------------------------------------------------------------------------------
def make_graph(n: int, m: int, nbatches: int, change: int, seed: int = SEED) -> tuple[list, list]:
    """(edges, batches): m distinct edges without self-loops over n nodes, then `nbatches` batches of
    (inserts, deletes): `change` new edges and `change` present edges, all deterministic in the seed."""
    rng = np.random.default_rng(seed + n)
    edges: set[tuple[int, int]] = set()
    while len(edges) < m:
        k = m - len(edges)
        a, b = rng.integers(0, n, 2 * k).tolist(), rng.integers(0, n, 2 * k).tolist()
        for x, y in zip(a, b, strict=True):
            if x != y:
                edges.add((x, y))
                if len(edges) == m:
                    break
    init = sorted(edges)
    cur = set(init)
    batches = []
    for _ in range(nbatches):
        pool = sorted(cur)
        dels = [pool[i] for i in sorted(rng.choice(len(pool), change, replace=False).tolist())]
        ins: set[tuple[int, int]] = set()
        while len(ins) < change:
            x, y = rng.integers(0, n, 2).tolist()
            if x != y and (x, y) not in cur:
                ins.add((x, y))
        cur.difference_update(dels)
        cur.update(ins)
        batches.append((sorted(ins), dels))
    return init, batches


def edges_at(init: list, batches: list, b: int) -> list[tuple[int, int]]:
    """The edge set after batch b (b = 0: the initial graph), sorted."""
    cur = set(init)
    for ins, dels in batches[:b]:
        cur.difference_update(dels)
        cur.update(ins)
    return sorted(cur)


def digest(src: Any, dst: Any, n: int) -> dict[str, Any]:
    """Size and sha256 of the sorted keys src * n + dst of a closure (duplicates are counted: a set has none)."""
    keys = np.sort(np.asarray(src, dtype=np.int64) * n + np.asarray(dst, dtype=np.int64))
    dups = int((keys[1:] == keys[:-1]).sum()) if keys.size else 0  # (sorted: not np.unique, which hashes)
    return {
        "size": int(keys.size),
        "duplicates": dups,
        "sha256": hashlib.sha256(keys.tobytes()).hexdigest()[:16],
    }


def rss_now_gib(field: str = "VmRSS") -> float:
    """The process's resident memory now (`field` of /proc/self/status: `RssAnon` is its heap only,
    without the files it maps)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


class Clock:
    """`with Clock() as c:` then c.wall, c.cpu (process CPU time: every thread of this process)."""

    def __enter__(self) -> Clock:
        self._w, self._c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall = time.perf_counter() - self._w
        self.cpu = time.process_time() - self._c


# ---- dbspark -------------------------------------------------------------------------------------------
def tc_circuit(mode: str = "naive") -> Any:
    import dbspark

    c = dbspark.Circuit()
    edge = c.input("edge", {"src": "int64", "dst": "int64"}, kind="set")

    def body(edge: Any, path: Any) -> Any:
        step = path.stream_join(edge, left_on="dst", right_on="src").map("src", dst="dst_right")
        return (edge + step).stream_distinct()

    c.output("path", c.recursive(body, [edge], name="closure", mode=mode))
    return c


def closure_circuit() -> Any:
    """The same query with the transitive closure operator (`Stream.transitive_closure`)."""
    import dbspark

    c = dbspark.Circuit()
    edge = c.input("edge", {"src": "int64", "dst": "int64"}, kind="set")
    c.output("path", edge.stream_transitive_closure("src", "dst"))
    return c


def _frame(pairs: list, weight: int | None = None) -> Any:
    import polars as pl

    df = pl.DataFrame(pairs, schema={"src": pl.Int64, "dst": pl.Int64}, orient="row")
    return df if weight is None else df.with_columns(pl.lit(weight, pl.Int64).alias("weight"))


def _change_frame(ins: list, dels: list) -> Any:
    import polars as pl

    return pl.concat([_frame(ins, 1), _frame(dels, -1)])


def _zset_digest(z: Any, n: int) -> dict[str, Any]:
    df = z.to_polars()
    d = digest(df["src"].to_numpy(), df["dst"].to_numpy(), n)
    d["non_unit_weights"] = int((df["weight"] != 1).sum())
    return d


def _fixpoint_state(rt: Any) -> Any:
    for st in rt.states.values():
        if hasattr(st, "iterations"):
            return st
    return None


def worker_inc(a: argparse.Namespace, init: list, batches: list) -> dict:
    """The incremental circuit: the recursive scope (worker `inc`) or the closure operator (`closure`)."""
    c = (closure_circuit() if a.worker == "closure" else tc_circuit()).incrementalize()
    rt = c.run()
    st = _fixpoint_state(rt)
    df0 = _frame(init)
    changes = [_change_frame(i, d) for i, d in batches]
    out: dict[str, Any] = {"rss_before_gib": rss_now_gib()}
    gc.collect()
    with Clock() as ck:
        rt.push("edge", df0, 1)
        res = rt.step()
    out["scratch"] = {"wall": ck.wall, "cpu": ck.cpu, "iterations": st.iterations[-1] if st else None}
    out["scratch_digest"] = _zset_digest(rt.view("path"), a.n)
    out["scratch"]["out_rows"] = len(res["path"])
    out["scratch"]["rss_gib"] = rss_now_gib()
    out["peak_after_scratch_gib"] = peak_gib()
    _emit_progress(
        a, f"scratch {ck.wall:.1f}s wall, {ck.cpu:.1f}s cpu, closure {out['scratch_digest']['size']:,}"
    )
    out["batches"], out["last_batch"], out["peak_rss_gib"] = [], 0, peak_gib()
    _save_partial(a, out)
    rows = []
    for b, ch in enumerate(changes, start=1):
        with Clock() as ck:
            rt.push("edge", ch)
            res = rt.step()
        rows.append(
            {
                "b": b,
                "wall": ck.wall,
                "cpu": ck.cpu,
                "iterations": st.iterations[-1] if st else None,
                "out_rows": len(res["path"]),
                "rss_gib": rss_now_gib(),
            }
        )
        _emit_progress(
            a,
            f"batch {b}: {ck.wall:.2f}s wall, {ck.cpu:.2f}s cpu, {rows[-1]['iterations']} iterations, "
            f"|Δpath| {rows[-1]['out_rows']:,}, rss {rows[-1]['rss_gib']:.2f} GiB",
        )
        out["batches"] = rows
        if (a.digest_every and b % a.digest_every == 0) or b == a.last:  # untimed: the closure so far
            out["last_batch"], out["final_digest"] = b, _zset_digest(rt.view("path"), a.n)
            out.setdefault("digests", {})[str(b)] = out["final_digest"]
        out["peak_rss_gib"] = peak_gib()
        _save_partial(a, out)
        if sum(r["wall"] for r in rows) > a.budget and b >= h.MIN_REPEATS:  # the budget is timed batches only
            break
    out["batches"] = rows
    last = rows[-1]["b"] if rows else 0
    if out.get("last_batch") != last:
        out["last_batch"], out["final_digest"] = last, _zset_digest(rt.view("path"), a.n)
    return out


def _save_partial(a: argparse.Namespace, out: dict) -> None:
    """What a worker has so far, for the driver if the worker dies (OOM kill, RSS watchdog)."""
    tmp = Path(a.out + ".partial.tmp")
    tmp.write_text(json.dumps({**out, "dbspark_src": a.src}, default=h._json_default))
    tmp.replace(a.out + ".partial")


def _rss_watchdog(a: argparse.Namespace, limit_gib: float) -> None:
    """Exit the worker (code 3) before the kernel's OOM killer picks a process of someone else's on this
    shared machine: poll RSS every 50 ms; the partial result saved after the last batch survives."""
    seen = 0.0
    while True:
        r = rss_now_gib()
        seen = max(seen, r)
        if r > limit_gib:
            msg = f"RSS {r:.1f} GiB > limit {limit_gib:.1f} GiB (TC_RSS_LIMIT_GIB): worker stopped"
            Path(a.out + ".aborted").write_text(msg)
            print(f"    [{a.worker} n={a.n:,}] {msg}", file=sys.stderr, flush=True)
            os._exit(3)
        time.sleep(0.05)


def _recompute_loop(a: argparse.Namespace, init: list, batches: list, run_one: Any) -> dict:
    """Time `run_one(edges) -> (digest | None)` from scratch and on the measured batches (in order; past the
    budget only the last one), verifying digests at scratch and at the last batch."""
    out: dict[str, Any] = {"rss_before_gib": rss_now_gib()}
    measure = sorted(set(a.measure))
    last = max(measure) if measure else 0
    gc.collect()
    scratch = run_one(init, True)
    out["scratch"] = {"wall": scratch["wall"], "cpu": scratch["cpu"], **scratch.get("extra", {})}
    out["scratch_digest"] = scratch["digest"]
    out["peak_after_scratch_gib"] = peak_gib()
    _emit_progress(a, f"scratch {scratch['wall']:.1f}s wall, {scratch['cpu']:.1f}s cpu")
    if a.scratch_only_over and scratch["wall"] > a.scratch_only_over:
        out["batches"], out["last_batch"] = [], 0
        out["stopped"] = (
            f"from scratch took {scratch['wall']:.0f}s > {a.scratch_only_over:.0f}s: batches not run"
        )
        return out
    rows = []
    t_start = time.perf_counter()
    for b in measure:
        if b != last and time.perf_counter() - t_start > a.budget:
            continue
        r = run_one(b, b == last)
        rows.append({"b": b, "wall": r["wall"], "cpu": r["cpu"], **r.get("extra", {})})
        if b == last:
            out["final_digest"] = r["digest"]
        _emit_progress(a, f"batch {b}: {r['wall']:.2f}s wall, {r['cpu']:.2f}s cpu")
    out["batches"] = rows
    out["last_batch"] = last
    return out


def worker_recompute(a: argparse.Namespace, init: list, batches: list) -> dict:
    """dbspark's fastest recomputation: the closure operator's per-snapshot form on the whole edge set, in a
    fresh runtime per batch (a runtime kept across snapshot steps would integrate every snapshot)."""
    c = closure_circuit()

    def run_one(which: Any, check: bool) -> dict:
        edges = init if isinstance(which, list) else edges_at(init, batches, which)
        df = _frame(edges)
        gc.collect()
        with Clock() as ck:
            rt = c.run(snapshots=True)
            rt.push("edge", df, 1)
            res = rt.step()
        z = res["path"]
        return {
            "wall": ck.wall,
            "cpu": ck.cpu,
            "digest": _zset_digest(z, a.n) if check else None,
            "extra": {"rss_gib": rss_now_gib()},
        }

    return _recompute_loop(a, init, batches, run_one)


CTE = (
    "WITH RECURSIVE path(src, dst) AS (SELECT src, dst FROM e UNION "
    "SELECT p.src, e.dst FROM path p JOIN e ON p.dst = e.src) "
)


def worker_duckdb(a: argparse.Namespace, init: list, batches: list) -> dict:
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE e (src BIGINT, dst BIGINT)")
    e0 = _frame(init)  # noqa: F841 - read by DuckDB's replacement scan
    con.execute("INSERT INTO e SELECT src, dst FROM e0")
    applied = [0]

    def apply(b: int) -> None:
        ins, dels = batches[b - 1]
        fi, fd = _frame(ins), _frame(dels)  # noqa: F841
        con.execute("INSERT INTO e SELECT src, dst FROM fi")
        con.execute("DELETE FROM e USING fd WHERE e.src = fd.src AND e.dst = fd.dst")

    def run_one(which: Any, check: bool) -> dict:
        b = 0 if isinstance(which, list) else which
        while applied[0] < b - 1:  # batches that are not measured: applied untimed
            applied[0] += 1
            apply(applied[0])
        with Clock() as ck:
            if b:
                apply(b)
                applied[0] = b
            n_rows = con.execute(CTE + "SELECT count(*) FROM path").fetchone()[0]
        d = None
        if check:
            res = con.execute(CTE + "SELECT src, dst FROM path").fetchnumpy()
            d = digest(res["src"], res["dst"], a.n)
            if d["size"] != n_rows:
                raise h.Mismatch(f"duckdb: count(*) {n_rows} != {d['size']} materialized rows")
            edges = con.execute("SELECT count(*) FROM e").fetchone()[0]
            if edges != len(edges_at(init, batches, b)):
                raise h.Mismatch(
                    f"duckdb: {edges} edges after batch {b}, expected {len(edges_at(init, batches, b))}"
                )
        return {"wall": ck.wall, "cpu": ck.cpu, "digest": d, "extra": {"rows": n_rows}}

    out = _recompute_loop(a, init, batches, run_one)
    out["threads"] = con.execute("SELECT current_setting('threads')").fetchone()[0]
    return out


def py_closure(edges: list) -> tuple[dict[int, set[int]], int]:
    """Semi-naive closure: reach[x] ⊇ succ[x]; Δ' = ⋃_{y ∈ Δ[x]} succ[y] − reach[x], per source x."""
    succ: dict[int, set[int]] = {}
    for x, y in edges:
        succ.setdefault(x, set()).add(y)
    reach = {x: set(s) for x, s in succ.items()}
    delta = {x: set(s) for x, s in succ.items()}
    iterations = 1
    while delta:
        nxt = {}
        for x, dx in delta.items():
            new: set[int] = set()
            for y in dx:
                sy = succ.get(y)
                if sy:
                    new |= sy
            new -= reach[x]
            if new:
                reach[x] |= new
                nxt[x] = new
        delta = nxt
        iterations += 1
    return reach, iterations


def _reach_digest(reach: dict[int, set[int]], n: int) -> dict[str, Any]:
    src = np.fromiter((x for x, ys in reach.items() for _ in ys), dtype=np.int64)
    dst = np.fromiter((y for ys in reach.values() for y in ys), dtype=np.int64)
    return digest(src, dst, n)


def worker_python(a: argparse.Namespace, init: list, batches: list) -> dict:
    def run_one(which: Any, check: bool) -> dict:
        edges = init if isinstance(which, list) else edges_at(init, batches, which)
        gc.collect()
        gc.disable()  # no full collections of the tuple-free sets: the closure is ints in sets
        try:
            with Clock() as ck:
                reach, its = py_closure(edges)
        finally:
            gc.enable()
        d = _reach_digest(reach, a.n) if check else None
        del reach
        return {"wall": ck.wall, "cpu": ck.cpu, "digest": d, "extra": {"iterations": its}}

    return _recompute_loop(a, init, batches, run_one)


def worker_pathway(a: argparse.Namespace, init: list, batches: list) -> dict:
    """`pw.iterate` over a streaming edge input (Python connector, deletions on), one commit per batch; the
    closure is mirrored from the subscription so it can be checked."""
    import logging

    import pathway as pw
    from pathway.internals.parse_graph import G

    logging.getLogger("pathway").setLevel(logging.WARNING)
    G.clear()

    class Edge(pw.Schema):
        src: int = pw.column_definition(primary_key=True)
        dst: int = pw.column_definition(primary_key=True)

    caught_up = threading.Event()
    last_time = [-1]  # the latest time whose outputs are complete
    sentinel_time: dict[int, int] = {}  # commit number -> the time at which its sentinel reached the output
    marks: dict[str, Any] = {"times": [], "cpu": [], "error": None, "scratch": None, "digests": {}}
    closure: Counter = Counter()
    timeout = 1800.0

    def on_time_end(t: int) -> None:
        last_time[0] = t
        caught_up.set()

    def commit_and_wait(feed: Any, k: int) -> None:
        """Commit k carries a sentinel self-loop (-1-k, -1-k) next to the data (and retracts commit k-1's): the
        commit is done when the sentinel's pair has reached the output and its time has ended. (Pathway
        reports the end of an empty first time too, and its times are not the commit's wall clock, so a
        bare wait for the next time end can return one commit early.)"""
        if k:
            feed.delete(src=-k, dst=-k)
        feed.next(src=-1 - k, dst=-1 - k)
        caught_up.clear()
        feed.commit()
        deadline = time.perf_counter() + timeout
        while k not in sentinel_time or last_time[0] < sentinel_time[k]:
            if not caught_up.wait(max(0.0, deadline - time.perf_counter())):
                raise TimeoutError(f"pathway did not catch up within {timeout:.0f}s")
            caught_up.clear()

    def snap() -> dict:
        pairs = [k for k, v in closure.items() if v and k[0] >= 0]
        if any(v not in (0, 1) for v in closure.values()):
            raise h.Mismatch("pathway: a closure pair with multiplicity other than 0/1")
        return digest([p[0] for p in pairs], [p[1] for p in pairs], a.n)

    class Feed(pw.io.python.ConnectorSubject):
        @property
        def _deletions_enabled(self) -> bool:
            return True

        def run(self) -> None:
            try:
                nxt, dele = self.next, self.delete
                t0, c0 = time.perf_counter(), time.process_time()
                for x, y in init:
                    nxt(src=x, dst=y)
                commit_and_wait(self, 0)
                marks["scratch"] = (time.perf_counter() - t0, time.process_time() - c0)
                marks["digests"][0] = snap()
                for b, (ins, dels) in enumerate(batches, start=1):
                    t0, c0 = time.perf_counter(), time.process_time()
                    for x, y in ins:
                        nxt(src=x, dst=y)
                    for x, y in dels:
                        dele(src=x, dst=y)
                    commit_and_wait(self, b)
                    marks["times"].append(time.perf_counter() - t0)
                    marks["cpu"].append(time.process_time() - c0)
                    if b == len(batches):
                        marks["digests"][b] = snap()
            except BaseException as e:  # noqa: BLE001 - surfaced after pw.run returns
                marks["error"] = e

    edges = pw.io.python.read(Feed(), schema=Edge, autocommit_duration_ms=None)
    e = edges.select(src=pw.this.src, dst=pw.this.dst)

    def step(path: pw.Table, e: pw.Table) -> dict:
        j = path.join(e, path.dst == e.src).select(src=path.src, dst=e.dst)
        new = path.concat_reindex(j).groupby(pw.this.src, pw.this.dst).reduce(pw.this.src, pw.this.dst)
        return {"path": new, "e": e}

    p0 = e.groupby(pw.this.src, pw.this.dst).reduce(pw.this.src, pw.this.dst)
    res = pw.iterate(step, path=pw.iterate_universe(p0), e=e)["path"]

    def on_change(key: Any, row: dict, time: int, is_addition: bool) -> None:  # noqa: A002
        x, y = row["src"], row["dst"]
        closure[(x, y)] += 1 if is_addition else -1
        if x < 0 and is_addition:
            sentinel_time[-1 - x] = time

    pw.io.subscribe(res, on_change=on_change, on_time_end=on_time_end)
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    G.clear()
    if marks["error"] is not None:
        raise RuntimeError(f"pathway feed failed: {marks['error']!r}") from marks["error"]
    w, c = marks["scratch"]
    return {
        "scratch": {"wall": w, "cpu": c},
        "scratch_digest": marks["digests"][0],
        "batches": [
            {"b": i + 1, "wall": t, "cpu": u}
            for i, (t, u) in enumerate(zip(marks["times"], marks["cpu"], strict=False))
        ],
        "last_batch": len(batches),
        "final_digest": marks["digests"][len(batches)],
    }


def worker_churn(a: argparse.Namespace, init: list, batches: list) -> dict:
    """Not a system: how many closure pairs change their hop distance per batch (scipy BFS from every node).

    In the doubly-incremental TC a pair whose shortest-path length changes from d to d' changes the
    iterated relation at iterations d and d' (path at iteration i is the pairs at distance <= i + 1): this
    is the size of the nested change the incremental circuit must derive, whatever the implementation."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    def closure_dist(edges: list) -> np.ndarray:
        """Hop distance of every pair in the closure (inf: not in it); (x, x) is the shortest cycle."""
        src = np.array([x for x, _ in edges], dtype=np.int64)
        dst = np.array([y for _, y in edges], dtype=np.int64)
        g = csr_matrix((np.ones(len(edges)), (src, dst)), shape=(a.n, a.n))
        d = shortest_path(g, method="D", unweighted=True, directed=True)
        np.fill_diagonal(d, np.inf)
        diag = np.full(a.n, np.inf)
        np.minimum.at(diag, src, 1 + d[dst, src])  # edge x -> y, then back from y to x
        np.fill_diagonal(d, diag)
        return d

    rows = []
    prev = closure_dist(init)
    out: dict[str, Any] = {"closure0": int(np.isfinite(prev).sum())}
    cur = set(init)
    for b, (ins, dels) in enumerate(batches[: a.last or len(batches)], start=1):
        cur.difference_update(dels)
        cur.update(ins)
        d = closure_dist(sorted(cur))
        changed = prev != d
        appear = changed & np.isinf(prev)
        vanish = changed & np.isinf(d)
        rows.append(
            {
                "b": b,
                "pairs_dist_changed": int(changed.sum()),
                "appeared": int(appear.sum()),
                "vanished": int(vanish.sum()),
                "closure": int(np.isfinite(d).sum()),
                "max_dist": int(d[np.isfinite(d)].max()),
            }
        )
        _emit_progress(a, f"batch {b}: {rows[-1]}")
        prev = d
    out["batches"] = rows
    return out


WORKERS = {
    "inc": worker_inc,
    "closure": worker_inc,
    "recompute": worker_recompute,
    "duckdb": worker_duckdb,
    "python": worker_python,
    "pathway": worker_pathway,
    "churn": worker_churn,
}


def _emit_progress(a: argparse.Namespace, msg: str) -> None:
    print(f"    [{a.worker} n={a.n:,}] {msg}", file=sys.stderr, flush=True)


def dbspark_src_hash() -> str:
    """A hash of dbspark's sources as this process sees them (the code changes while the suite runs)."""
    hs = hashlib.sha256()
    for f in sorted((ROOT / "dbspark").rglob("*.py")):
        hs.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    return hs.hexdigest()[:12]


def worker_main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True, choices=sorted(WORKERS))
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--m", type=int, required=True)
    ap.add_argument("--batches", type=int, required=True)
    ap.add_argument("--change", type=int, default=CHANGE)
    ap.add_argument("--measure", type=lambda s: [int(x) for x in s.split(",") if x], default=[])
    ap.add_argument("--last", type=int, default=0)
    ap.add_argument("--budget", type=float, default=1e9)
    ap.add_argument("--scratch-only-over", type=float, default=0)
    ap.add_argument("--digest-every", type=int, default=0)
    ap.add_argument("--rss-limit-gib", type=float, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    if a.rss_limit_gib:
        threading.Thread(target=_rss_watchdog, args=(a, a.rss_limit_gib), daemon=True).start()
    src = a.src = dbspark_src_hash()  # before dbspark is imported (by the worker)
    init, batches = make_graph(a.n, a.m, a.batches, a.change)
    res = WORKERS[a.worker](a, init, batches)
    res["peak_rss_gib"] = peak_gib()
    res["pid_cpu_s"] = time.process_time()
    res["dbspark_src"] = src
    Path(a.out).write_text(json.dumps(res, default=h._json_default))


# ---- driver --------------------------------------------------------------------------------------------------
def spawn(worker: str, n: int, m: int, nb: int, timeout: float, change: int = CHANGE, **kw: Any) -> dict:
    """Run one worker in a subprocess; returns its JSON, or {'error': ...} (timeout, crash)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    cmd = [
        sys.executable,
        "-m",
        "bench.tc",
        "--worker",
        worker,
        "--n",
        str(n),
        "--m",
        str(m),
        "--batches",
        str(nb),
        "--change",
        str(change),
        "--out",
        path,
    ]
    for k, v in kw.items():
        if v is None:
            continue
        cmd += [f"--{k.replace('_', '-')}", ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)]
    cmd += ["--rss-limit-gib", str(RSS_LIMIT_GIB)]
    t0 = time.perf_counter()
    partial, aborted = Path(path + ".partial"), Path(path + ".aborted")
    try:
        p = subprocess.run(cmd, cwd=ROOT, timeout=timeout, stdout=subprocess.PIPE, text=True)
        if p.returncode != 0:
            why = (
                aborted.read_text()
                if aborted.exists()
                else f"exit code {p.returncode}"
                + (
                    " (killed: SIGKILL, e.g. the kernel's OOM killer)"
                    if p.returncode == -9
                    else " (see stderr above)"
                )
            )
            if partial.exists():
                res = json.loads(partial.read_text())
                if res.get("scratch_digest"):
                    res["incomplete"] = why
                    res["wall_total"] = time.perf_counter() - t0
                    return res
            return {"error": why, "wall_total": time.perf_counter() - t0}
        res = json.loads(Path(path).read_text())
        res["wall_total"] = time.perf_counter() - t0
        return res
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s", "wall_total": time.perf_counter() - t0}
    finally:
        for f in (Path(path), partial, aborted):
            f.unlink(missing_ok=True)


def _med(rows: list[dict], key: str) -> float | None:
    xs = [r[key] for r in rows]
    return statistics.median(xs) if xs else None


def check(label: str, results: dict[str, dict], which: str, batch: int | None = None) -> dict[str, Any]:
    """All systems' digests at one point must agree (and be sets); raises Mismatch."""
    ds = {k: r[which] for k, r in results.items() if r.get(which) is not None}
    if len(ds) < 2:
        raise h.Mismatch(f"{label}: fewer than two systems have a {which} to compare ({sorted(ds)})")
    for k, d in ds.items():
        if d.get("duplicates") or d.get("non_unit_weights"):
            raise h.Mismatch(f"{label}: {k}'s closure is not a set: {d}")
    ref_k, ref = next(iter(ds.items()))
    for k, d in ds.items():
        if (d["size"], d["sha256"]) != (ref["size"], ref["sha256"]):
            raise h.Mismatch(
                f"{label} ({which}, batch {batch}): {k} has {d['size']:,} pairs sha {d['sha256']}, "
                f"{ref_k} has {ref['size']:,} pairs sha {ref['sha256']}"
            )
    return {"systems": sorted(ds), **ref}


def run_size(n: int, m: int, nb: int, quick: bool, notes: list[str], skipped: dict[str, str]) -> dict:
    tag = f"{n:,}/{m:,}"
    budget = float(os.environ.get("TC_BUDGET_S", 600 if quick else 1500))
    big = not quick and n >= FULL[0][0]
    to = 4 * 3600
    res: dict[str, dict] = {}
    last = nb
    if n <= SCOPE_MAX_NODES:
        with h.phase(f"dbspark incremental (recursive scope) {tag}"):
            inc = spawn("inc", n, m, nb, to, budget=budget, digest_every=1 if big else 0)
        if "error" in inc:  # the other systems still run at this size
            skipped[f"dbspark incremental {tag}"] = f"died in its from-scratch step: {inc['error']}"
        else:
            res["dbspark incremental"] = inc
            last = inc["last_batch"]
            if inc.get("incomplete"):
                done = len(inc["batches"])
                notes.append(
                    f"{tag}: dbspark incremental died in batch {done + 1} ({inc['incomplete']}); its {done} "
                    f"completed batches are reported, peak RSS before that {inc['peak_rss_gib']:.1f} GiB; "
                    f"every system is checked after batch {last}"
                )
            elif last < nb:
                notes.append(
                    f"{tag}: dbspark incremental stopped after batch {last} of {nb} (batch phase over the "
                    f"{budget:.0f}s budget, TC_BUDGET_S); every system is checked after batch {last}"
                )
    else:
        skipped[f"dbspark incremental {tag}"] = f"not run above TC_SCOPE_MAX_NODES={SCOPE_MAX_NODES}"
    # the closure operator runs every batch; its closure is digested (untimed) where the others are checked
    with h.phase(f"dbspark closure operator {tag}"):
        op = spawn("closure", n, m, nb, to, budget=budget, last=last)
    if "error" in op:
        skipped[f"dbspark closure operator {tag}"] = op["error"]
    else:
        res = {"dbspark closure operator": op, **res}
        if str(last) in op.get("digests", {}):
            op["final_digest"] = op["digests"][str(last)]
        else:
            raise h.Mismatch(
                f"tc {tag}: the closure operator stopped before batch {last}, where the others are checked"
            )
    all_b = list(range(1, last + 1))
    # the recompute systems are slow at the full size: DuckDB is timed on the batches that fit in 600 s and
    # then the last one, the Python recompute on the last 3
    plans = [
        ("dbspark recompute", "recompute", {"measure": all_b, "budget": budget / 2}),
        ("duckdb recompute", "duckdb", {"measure": all_b, "budget": 600 if big else budget / 2}),
        (
            "python semi-naive",
            "python",
            {
                "measure": all_b if quick else all_b[-3:],
                "budget": 300,
                "scratch_only_over": 0 if quick else 300,
            },
        ),
    ]
    for name, w, kw in plans:
        h.collect()
        with h.phase(f"{name} {tag}"):
            r = spawn(w, n, m, nb, to if w != "python" else 1800, **kw)
        if "error" in r:
            skipped[f"{name} {tag}"] = r["error"]
            continue
        if r.get("stopped"):
            skipped[f"{name} {tag} (batches)"] = r["stopped"]
        res[name] = r
    v0 = check(f"tc {tag} from scratch", res, "scratch_digest", 0)
    v1 = check(f"tc {tag} after batch {last}", res, "final_digest", last) if last else None
    churn = None
    if not quick and last:
        with h.phase(f"distance churn {tag}"):
            churn = spawn("churn", n, m, nb, 3600, last=last)
        if "error" in churn:
            notes.append(f"{tag}: distance-churn analysis failed: {churn['error']}")
            churn = None
    return {
        "n": n,
        "m": m,
        "batches": nb,
        "last_batch": last,
        "systems": res,
        "verified": {"scratch": v0, "final": v1},
        "churn": churn,
    }


def run_pathway_cmp(quick: bool, notes: list[str], skipped: dict[str, str]) -> dict | None:
    n, m, ch, nb = PW_GRAPH
    if h.skipped("pathway"):
        skipped["pathway"] = "skipped by BENCH_SKIP"
        return None
    try:
        import pathway  # noqa: F401
    except Exception as e:  # noqa: BLE001
        skipped["pathway"] = f"not importable ({type(e).__name__}: {e})"
        return None
    res: dict[str, dict] = {}
    with h.phase(f"pathway {n}/{m}"):
        r = spawn("pathway", n, m, nb, 600, change=ch)
    if "error" in r:
        skipped["pathway"] = f"pathway iterate on {n} nodes / {m} edges: {r['error']}"
        return None
    res["pathway"] = r
    res["dbspark closure operator"] = spawn("closure", n, m, nb, 600, change=ch)
    res["dbspark incremental"] = spawn("inc", n, m, nb, 600, change=ch)
    res["python semi-naive"] = spawn("python", n, m, nb, 600, change=ch, measure=list(range(1, nb + 1)))
    for k in ("dbspark closure operator", "dbspark incremental", "python semi-naive"):
        if "error" in res[k]:
            raise RuntimeError(f"{k} failed on the pathway graph: {res[k]['error']}")
    v0 = check(f"tc pathway graph {n}/{m} from scratch", res, "scratch_digest", 0)
    v1 = check(f"tc pathway graph {n}/{m} after batch {nb}", res, "final_digest", nb)
    return {
        "n": n,
        "m": m,
        "change": ch,
        "batches": nb,
        "systems": res,
        "verified": {"scratch": v0, "final": v1},
    }


def _fmt_pair(wall: float | None, cpu: float | None) -> str:
    return f"{h.fmt_s(wall)} ({h.fmt_s(cpu)} cpu)" if wall is not None else "-"


def run(quick: bool) -> dict:
    sizes = h.sized(FULL if os.environ.get("TC_FULL", "1") != "0" else [], QUICK, quick, smoke=[(60, 200)])
    nb = h.sized(20, 5, quick, smoke=3)
    if not quick and os.environ.get("TC_MID", "1") != "0":
        sizes = [MID, *sizes]  # the trend point first: its results are in the partial JSON early
    notes: list[str] = []
    skipped: dict[str, str] = {}
    out_sizes = []
    partial = h.result_path("tc", quick, "partial.json")
    for n, m in sizes:
        try:
            out_sizes.append(run_size(n, m, nb, quick, notes, skipped))
        except h.Mismatch:
            raise
        except Exception as e:  # noqa: BLE001 - report the other size
            skipped[f"size {n:,}/{m:,}"] = f"{type(e).__name__}: {e}"
            print(f"size {n:,}/{m:,} failed: {e}", file=sys.stderr, flush=True)
        partial.write_text(
            json.dumps(
                {"sizes": out_sizes, "skipped": skipped, "notes": notes}, default=h._json_default, indent=1
            )
        )
    if not out_sizes:
        raise RuntimeError(f"tc: no size ran: {skipped}")
    pw_cmp = run_pathway_cmp(quick, notes, skipped)
    partial.unlink(missing_ok=True)  # the full result replaces it

    rows, ratio_rows, mem_rows = [], [], []
    panels = []
    for s in out_sizes:
        tag = f"{s['n']:,}/{s['m']:,}"
        inc = s["systems"].get("dbspark incremental", {"batches": []})
        inc_med_w, inc_med_c = _med(inc["batches"], "wall"), _med(inc["batches"], "cpu")
        op = s["systems"].get("dbspark closure operator", {"batches": []})
        op_med_w, op_med_c = _med(op["batches"], "wall"), _med(op["batches"], "cpu")
        closure = (s["verified"]["final"] or s["verified"]["scratch"])["size"]
        for name, r in s["systems"].items():
            bw, bc = _med(r["batches"], "wall"), _med(r["batches"], "cpu")
            its = [b.get("iterations") for b in r["batches"] if b.get("iterations") is not None]
            rows.append(
                [
                    f"{name} @{tag}",
                    _fmt_pair(r["scratch"]["wall"], r["scratch"]["cpu"]),
                    _fmt_pair(bw, bc),
                    f"{h.fmt_s(min(b['wall'] for b in r['batches']))}..{h.fmt_s(max(b['wall'] for b in r['batches']))}"
                    if r["batches"]
                    else "-",
                    str(len(r["batches"])),
                    (
                        f"{r['scratch'].get('iterations')} / {statistics.median(its):g}"
                        if its
                        else str(r["scratch"].get("iterations") or "-")
                    ),
                ]
            )
            if name not in ("dbspark incremental", "dbspark closure operator") and bw is not None:
                ratio_rows.append(
                    [
                        f"{name} @{tag}",
                        h.fmt_x(h.ratio(bw, op_med_w)) if op_med_w else "-",
                        h.fmt_x(h.ratio(bc, op_med_c)) if op_med_c else "-",
                        ("yes" if bc / op_med_c >= 100 else "no") if op_med_c else "-",
                        h.fmt_x(h.ratio(bw, inc_med_w)) if inc_med_w else "-",
                        h.fmt_x(h.ratio(bc, inc_med_c)) if inc_med_c else "-",
                    ]
                )
            peak = r["peak_rss_gib"]
            mem_rows.append(
                [
                    f"{name} @{tag}",
                    f"{peak:.2f} GiB",
                    f"{r['rss_before_gib']:.2f} GiB",
                    f"{closure:,}",
                    f"{(peak - r['rss_before_gib']) * 2**30 / closure:.0f} B",
                ]
            )
        series = {
            k: ([b["b"] for b in r["batches"]], [b["cpu"] for b in r["batches"]], {"color": f"C{i}"})
            for i, (k, r) in enumerate(s["systems"].items())
            if r["batches"]
        }
        panels.append(
            {
                "title": f"{tag} (closure {closure:,} pairs)",
                "xlabel": "batch",
                "ylabel": "CPU time per batch (s)",
                "series": series,
            }
        )
        if s.get("churn") and (inc["batches"] or op["batches"]):
            ch = s["churn"]["batches"]
            med_changed = statistics.median(c["pairs_dist_changed"] for c in ch)
            notes.append(
                f"{tag}: per batch a median {med_changed:,.0f} closure pairs ({100 * med_changed / closure:.1f}% "
                f"of {closure:,}) change their hop distance, so the nested (pair, iteration) change that "
                f"incremental TC must derive has about 2x that many rows; dbspark's median |Δclosure| is "
                f"{statistics.median(b['out_rows'] for b in (inc['batches'] or op['batches'])):,.0f}"
            )
    text = h.table(
        f"tc: transitive closure, random graph, from scratch then batches of {CHANGE} inserts + {CHANGE} deletes "
        "(wall, with process CPU time in parentheses; the machine is shared)",
        [
            "system @nodes/edges",
            "from scratch",
            "per batch, median",
            "per batch wall min..max",
            "batches timed",
            "iterations scratch / batch",
        ],
        rows,
    )
    text += h.table(
        "recompute / incremental per batch (median; goal >= 100x, judged on CPU time): against the closure "
        "operator, and against the general recursive scope",
        ["system", "/ operator, wall", "/ operator, CPU", ">= 100x", "/ scope, wall", "/ scope, CPU"],
        ratio_rows,
    )
    text += h.table(
        "memory: peak RSS of each system's own subprocess",
        [
            "system",
            "peak RSS",
            "RSS before the run (imports + data)",
            "closure rows",
            "(peak - before) per closure row",
        ],
        mem_rows,
    )
    if pw_cmp:
        prow = []
        for name, r in pw_cmp["systems"].items():
            prow.append(
                [
                    name,
                    _fmt_pair(r["scratch"]["wall"], r["scratch"]["cpu"]),
                    _fmt_pair(_med(r["batches"], "wall"), _med(r["batches"], "cpu")),
                    f"{r['peak_rss_gib']:.2f} GiB",
                ]
            )
        text += h.table(
            f"pathway comparison: {pw_cmp['n']} nodes / {pw_cmp['m']} edges (closure "
            f"{pw_cmp['verified']['final']['size']:,}), {pw_cmp['batches']} batches of {pw_cmp['change']} + "
            f"{pw_cmp['change']}",
            ["system", "from scratch", "per batch, median", "peak RSS"],
            prow,
        )
    for k, why in skipped.items():
        notes.append(f"{k}: skipped ({why})")
        print(f"{k}: skipped ({why})", file=sys.stderr, flush=True)
    return {
        "params": {
            "seed": SEED,
            "change": CHANGE,
            "batches": nb,
            "sizes": [(s["n"], s["m"]) for s in out_sizes],
            "pathway_graph": PW_GRAPH,
        },
        "sizes": out_sizes,
        "pathway": pw_cmp,
        "skipped": skipped,
        "verified": True,
        "notes": notes,
        "table": text,
        "plot": panels,
        "plot_title": "tc: CPU time per batch of 100 + 100 edge changes",
    }


# ---- profiling ------------------------------------------------------------------------------------------------
def profile(n: int, m: int, nprof: int = 1, top: int = 25) -> None:
    """pyinstrument profile of `nprof` incremental batches (after an unprofiled from-scratch step)."""
    from pyinstrument import Profiler

    init, batches = make_graph(n, m, nprof, CHANGE)
    rt = tc_circuit().incrementalize().run()
    rt.push("edge", _frame(init), 1)
    t0 = time.perf_counter()
    rt.step()
    print(f"from scratch (not profiled): {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    changes = [_change_frame(i, d) for i, d in batches]
    prof = Profiler(interval=0.001)
    prof.start()
    for ch in changes:
        rt.push("edge", ch)
        rt.step()
    prof.stop()
    root = prof.last_session.root_frame()
    total = root.time
    by_ours: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()

    def walk(f: Any, owner: str | None, on_path: frozenset = frozenset()) -> None:
        path = f.file_path or ""
        if "/dbspark/" in path and not f.is_synthetic:
            name = f"{f.function} ({os.path.relpath(path, ROOT)}:{f.line_no})"
            owner = name
            if name not in on_path:
                inclusive[name] += f.time
                on_path = on_path | {name}
        self_t = f.time - sum(c.time for c in f.children)
        if self_t > 0:
            by_ours[owner or "(outside dbspark)"] += self_t
        for c in f.children:
            walk(c, owner, on_path)

    walk(root, None)
    st = _fixpoint_state(rt)
    print(
        f"dbspark tc profile: {nprof} batch(es) of {CHANGE}+{CHANGE} edges on {n:,} nodes / {m:,} edges, "
        f"{total:.2f}s sampled, iterations {st.iterations if st else '?'}"
    )
    print(
        h.table(
            "time attributed to the innermost dbspark function on the stack",
            ["function", "%", "s"],
            [[k, f"{100 * v / total:.1f}%", f"{v:.2f}"] for k, v in by_ours.most_common(top)],
        )
    )
    print(
        h.table(
            "inclusive time of dbspark functions",
            ["function", "%", "s"],
            [[k, f"{100 * v / total:.1f}%", f"{v:.2f}"] for k, v in inclusive.most_common(top)],
        )
    )
    outp = h.result_path(f"tc-profile-{n}", False, "txt")
    outp.write_text(prof.output_text(unicode=False, color=False, show_all=False))
    print(f"\nfull pyinstrument tree: {outp}")


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker_main(sys.argv[1:])
    elif "--profile" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--profile", action="store_true")
        ap.add_argument("--quick", action="store_true")
        ap.add_argument("--n", type=int)
        ap.add_argument("--m", type=int)
        ap.add_argument("--batches", type=int, default=1)
        a = ap.parse_args()
        dn, dm = QUICK[0] if a.quick else FULL[0]
        profile(a.n or dn, a.m or dm, a.batches)
    else:
        print(
            "usage: python -m bench tc [--quick]   |   python -m bench.tc --profile [--quick] [--n N --m M]"
        )
