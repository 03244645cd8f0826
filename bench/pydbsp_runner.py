"""Run the join_groupby view on pydbsp (pure Python DBSP, needs Python >= 3.12) in a subprocess.

Usage: python pydbsp_runner.py IN.pickle OUT.json. IN holds {"load": (R rows, S rows), "batches": [(dR, dS), ...]}
where R rows are (k, g, id) and S rows (k, v) tuples, each change a list of (row, weight). OUT gets the load time,
the time of each batch and the final view {g: count}. Only the standard library and pydbsp are imported here.
"""

from __future__ import annotations

import json
import pickle
import sys
import time


def main(src: str, dst: str) -> None:
    from pydbsp.circuit import Circuit
    from pydbsp.compute import ComputeCtx
    from pydbsp.core import Antichain, dbsp_time
    from pydbsp.evaluate import Evaluator
    from pydbsp.indexed_relational_operators import IndexedDeltaLiftedDeltaLiftedJoin, LiftIndex
    from pydbsp.indexed_zset import IndexedZSetAddition
    from pydbsp.operator import Input, Integrate, LiftStreamIntroduction
    from pydbsp.storage import DictStorage
    from pydbsp.zset import ZSet, ZSetAddition

    with open(src, "rb") as f:
        data = pickle.load(f)
    g_rows = ZSetAddition()
    g_r = IndexedZSetAddition(g_rows, lambda r: r[0])
    g_s = IndexedZSetAddition(g_rows, lambda s: s[0])
    g_out = ZSetAddition()
    e = Evaluator(
        circuit=Circuit(), storage=DictStorage(), ctx=ComputeCtx(lattice=dbsp_time(2)), group=g_rows
    )
    c = e.circuit
    src_r = Input(frontier=Antichain(dbsp_time(1))).connect(c, ())
    src_s = Input(frontier=Antichain(dbsp_time(1))).connect(c, ())
    r2 = LiftStreamIntroduction(group=g_rows).connect(c, (src_r,))
    s2 = LiftStreamIntroduction(group=g_rows).connect(c, (src_s,))
    ir = LiftIndex(indexer=lambda r: r[0]).connect(c, (r2,))
    is_ = LiftIndex(indexer=lambda s: s[0]).connect(c, (s2,))
    # COUNT(*) GROUP BY g in pydbsp's recommended weight-encoded form: the join emits (g,) with the
    # product weight, so the integral's weight of (g,) is the count of g.
    joined = IndexedDeltaLiftedDeltaLiftedJoin(
        proj=lambda k, r, s: (r[1],), group_a=g_r, group_b=g_s, out_group=g_out
    ).connect(c, (ir, is_))
    view = Integrate(group=g_out).connect(c, (joined,))

    def zs(changes: list) -> ZSet:
        d: dict = {}
        for row, w in changes:
            d[row] = d.get(row, 0) + w
        return ZSet({k: v for k, v in d.items() if v})

    def step(tick: int, dr: list, ds: list) -> None:
        e.push(src_r, zs(dr))
        e.push(src_s, zs(ds))
        e.read(view, (tick, 0))
        e.compact()

    load_r, load_s = data["load"]
    t0 = time.perf_counter()
    step(0, [(r, 1) for r in load_r], [(s, 1) for s in load_s])
    load = time.perf_counter() - t0
    times = []
    for i, (dr, ds) in enumerate(data["batches"], start=1):
        t = time.perf_counter()
        step(i, dr, ds)
        times.append(time.perf_counter() - t)
    final = e.read(view, (len(data["batches"]), 0))
    out = {"load_s": load, "batch_s": times, "view": {str(g[0]): n for g, n in final.items() if n}}
    with open(dst, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
