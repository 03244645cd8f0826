"""The kernel's lookups on both engines (`engines/base.py`): `support`, `semijoin`, `combine`, `cogroup`, `split`,
`seek` of a trace (committed and pending parts) and scratch traces, against plain Python on
hypothesis-generated Z-sets with NULL keys, duplicates and negative weights. On Spark each value is
either rows held in the driver or a Spark plan, so both paths of every primitive are checked."""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl
from hypothesis import strategies as st

from dbspark.algebra.zset import ZSet
from dbspark.testing.engines import engine_given, is_spark

SCHEMA = pl.Schema({"k": pl.Int64(), "v": pl.Int64()})
rows = st.lists(
    st.tuples(st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 2)), st.integers(-2, 2)),
    max_size=12,
)
where = st.sampled_from(["driver", "cluster"])


def kernel_of(engine: Any) -> Any:
    from dbspark.engines import get_kernel

    return engine() if is_spark(engine) else get_kernel("local")


def value(k: Any, rs: list, at: str) -> Any:
    """The Z-set of `rs` ((row, weight) pairs, zero weights dropped) held in the driver or, on Spark,
    as a Spark plan."""
    rs = [(r, w) for r, w in rs if w]
    z = ZSet.from_rows([r for r, _ in rs], SCHEMA, [w for _, w in rs])
    v = k.from_local(z)
    if at == "cluster" and k.name == "spark":
        v = k._z(z.schema, v.frame)
    return v


def counted(rs: list) -> Counter:
    c: Counter = Counter()
    for r, w in rs:
        c[r] += w
    return Counter({r: w for r, w in c.items() if w})


def read(k: Any, v: Any) -> dict:
    return k.to_local(v).consolidate().to_dict()


@engine_given(rows, where, local=40, spark=6)
def test_support_is_the_distinct_keys_whatever_the_weights(engine: Any, a: list, at: str) -> None:
    k = kernel_of(engine)
    got = read(k, k.support(value(k, a, at), ["k"]))
    assert got == {(r[0],): 1 for r, w in a if w}


@engine_given(rows, rows, where, st.booleans(), local=40, spark=6)
def test_semijoin_keeps_the_rows_whose_key_is_in_the_other(
    engine: Any, a: list, b: list, at: str, exact: bool
):
    k = kernel_of(engine)
    keys = {r[0] for r, w in b if w and (exact or r[0] is not None)}
    got = read(k, k.semijoin(value(k, a, at), value(k, b, "driver"), [("k", "k")], exact))
    want = {r: w for r, w in counted(a).items() if r[0] in keys}
    assert got == want


@engine_given(rows, where, local=30, spark=4)
def test_split_parts_the_rows_by_a_column_value(engine: Any, a: list, at: str) -> None:
    """Not consolidated first: a value whose rows cancel may have a part (that is zero)."""
    k = kernel_of(engine)
    got = [(v, read(k, part)) for v, part in k.split(value(k, a, at), "k")]
    assert [v for v, _ in got] == sorted({v for v, _ in got})
    want: dict = {}
    for r, w in counted(a).items():
        if r[0] is not None:
            want.setdefault(r[0], {})[(r[1],)] = w
    assert {v: part for v, part in got if part} == want


@engine_given(rows, rows, where, local=30, spark=5)
def test_combine_groups_the_parts_and_weighs_the_groups(engine: Any, a: list, b: list, at: str) -> None:
    """distinct's H as `combine` computes it: per row, 1 if a + b > 0 minus 1 if b > 0."""
    from dbspark.operators.distinct import H_WEIGHT

    k = kernel_of(engine)
    got = read(k, k.combine([value(k, a, at), value(k, b, "driver")], ["k", "v"], H_WEIGHT))
    ca, cb = counted(a), counted(b)
    want = {r: (ca[r] + cb[r] > 0) - (cb[r] > 0) for r in set(ca) | set(cb)}
    assert got == {r: w for r, w in want.items() if w}


@engine_given(rows, rows, where, st.booleans(), local=30, spark=5)
def test_cogroup_hands_whole_groups_of_every_part_to_one_call(
    engine: Any, a: list, b: list, at: str, keyed: bool
) -> None:
    """Per group of `k`, one output row: its part-0 weights + 10 x its part-1 weights, and how many
    rows it had. A group split across two calls would give two rows of one key. Without keys there is
    one group, which exists with no rows at all (`fn` still called once)."""
    by = ["k"] if keyed else []
    out_schema = pl.Schema({"k": pl.Int64(), "s": pl.Int64(), "n": pl.Int64()})

    def fn(frames: list[pl.DataFrame]) -> pl.DataFrame:
        parts = [
            f.select(pl.col("k") if by else pl.lit(None, pl.Int64).alias("k"), f.columns[-1]) for f in frames
        ]
        both = pl.concat(
            [
                p.with_columns((pl.col(p.columns[-1]) * (10**i)).alias("__x")).select("k", "__x")
                for i, p in enumerate(parts)
            ]
        )
        g = both.group_by("k").agg(pl.col("__x").sum().alias("s"), pl.len().cast(pl.Int64).alias("n"))
        if not by and g.height == 0:
            g = pl.DataFrame({"k": [None], "s": [0], "n": [0]}, schema=out_schema)
        return g.select("k", "s", "n").with_columns(pl.lit(1, pl.Int64).alias("__w"))

    k = kernel_of(engine)
    got = read(k, k.cogroup([value(k, a, at), value(k, b, "driver")], by, fn, out_schema))
    want: dict = {}
    for i, rs in enumerate((a, b)):
        for r, w in rs:
            if w:
                key = r[0] if by else None
                s, n = want.get(key, (0, 0))
                want[key] = (s + w * 10**i, n + 1)
    if not by and not want:
        want[None] = (0, 0)
    assert got == {(key, s, n): 1 for key, (s, n) in want.items()}


@engine_given(rows, rows, rows, where, st.booleans(), local=30, spark=5)
def test_seek_finds_the_committed_and_pending_rows_of_the_probe_keys(
    engine: Any, first: list, second: list, probe: list, at: str, exact: bool
) -> None:
    """A trace with one committed step and one pending change, sought at a probe's keys: consolidated,
    the rows of the sum at those keys (NULL keys match under `exact` only)."""
    k = kernel_of(engine)
    pos = lambda rs: [(r, abs(w)) for r, w in rs]  # noqa: E731  (a trace of a set's integral)
    trace = k.new_trace(SCHEMA, ["k"])
    k.begin_step(1)
    undo: list = []
    k.trace_insert(trace, value(k, pos(first), at), undo)
    k.flush_step(undo)
    k.end_step(1)
    k.begin_step(2)
    snap = k.trace_insert(trace, value(k, pos(second), at), [])
    keys = {r[0] for r, w in probe if w and (exact or r[0] is not None)}
    got = read(k, k.seek(snap, value(k, probe, at), [("k", "k")], exact))
    want = {r: w for r, w in counted(pos(first) + pos(second)).items() if r[0] in keys}
    assert got == want
    k.abort_step()


@engine_given(rows, rows, local=20, spark=3)
def test_a_scratch_trace_is_sought_like_a_trace_and_never_written(engine: Any, first: list, probe: list):
    k = kernel_of(engine)
    with k.scratch():
        trace = k.new_trace(SCHEMA, ["k"])
    k.begin_step(1)
    undo: list = []
    snap = k.trace_insert(trace, value(k, first, "driver"), undo)
    keys = {r[0] for r, w in probe if w}
    got = read(k, k.seek(snap, value(k, probe, "driver"), [("k", "k")], True))
    assert got == {r: w for r, w in counted(first).items() if r[0] in keys}
    k.flush_step(undo)
    k.end_step(1)
    if k.name == "spark":
        assert trace not in k.traces  # not flushed with the step's traces


def _unique_rows(a: list) -> list:
    """One entry per row (the first), none of weight 0: rows whose order in a group is unambiguous."""
    seen: dict = {}
    for r, w in a:
        if w and r not in seen:
            seen[r] = w
    return list(seen.items())


@engine_given(rows, where, local=40, spark=6)
def test_shifted_gives_each_row_its_neighbours_in_its_group(engine: Any, a: list, at: str) -> None:
    """Per group of k (NULL a group of its own), in the order of v: the row's own weight, the weight of
    the row before it, v of the row two before it and of the row after it (NULL where there is none)."""
    k = kernel_of(engine)
    a = _unique_rows(a)
    outs = [("own", "__w", 0), ("prev", "__w", 1), ("back2", "v", 2), ("next", "v", -1)]
    got = k.to_local(k.shifted(value(k, a, at), ["k"], ["v"], outs)).df
    groups: dict = {}
    for r, w in a:
        groups.setdefault(r[0], []).append((r[1], w))
    want = set()
    for g, members in groups.items():
        members.sort()
        for i, (v, w) in enumerate(members):
            prev = members[i - 1][1] if i >= 1 else None
            back2 = members[i - 2][0] if i >= 2 else None
            nxt = members[i + 1][0] if i + 1 < len(members) else None
            want.add((g, v, w, prev, back2, nxt, w))
    assert set(got.select("k", "v", "own", "prev", "back2", "next", "__w").iter_rows()) == want
    assert got.height == len(want)


@engine_given(rows, where, local=20, spark=4)
def test_ordinal_numbers_rows_in_their_order_or_deletes_first(engine: Any, a: list, at: str) -> None:
    """Rows held in this process keep their order (0, 1, ...); a Spark plan has none: its deletes get 0,
    its inserts 1 (a pushed DataFrame's deletes come before its inserts)."""
    k = kernel_of(engine)
    a = _unique_rows(a)
    v = value(k, a, at)
    got = k.to_local(k.ordinal(v, "__pos")).df
    if at == "cluster" and k.name == "spark":
        assert Counter(got.rows()) == Counter((*r, 0 if w < 0 else 1, w) for r, w in a)
    else:  # in the order the value holds its rows (reading a Spark value back may reorder them)
        held = (v.local if k.name == "spark" else k.to_local(v)).df.rows()
        assert Counter(held) == Counter((*r, w) for r, w in a)
        assert Counter(got.rows()) == Counter((*r[:-1], i, r[-1]) for i, r in enumerate(held))


@engine_given(rows, where, local=40, spark=3)
def test_a_renaming_keeps_a_consolidated_value_consolidated_and_a_projection_does_not(
    engine: Any, a: list, at: str
) -> None:
    """`map` of plain columns: every column kept (renamed, reordered, one twice) leaves distinct rows
    distinct, so a consolidated value's result is marked consolidated; a projection that drops a column
    may make rows equal, so its result is not, and consolidating it sums them (checked against Python)."""
    from dbspark.ir.expr import col

    k = kernel_of(engine)
    z = k.consolidate(value(k, a, at))
    swapped = k.map(
        z,
        [("v2", col("v")), ("k2", col("k")), ("k3", col("k"))],
        pl.Schema({"v2": pl.Int64(), "k2": pl.Int64(), "k3": pl.Int64()}),
    )
    dropped = k.map(z, [("k2", col("k"))], pl.Schema({"k2": pl.Int64()}))
    want: Counter = Counter()
    for (key, _), w in a:
        want[(key,)] += w
    if not is_spark(engine):  # (an empty value is consolidated whatever is dropped)
        assert swapped.consolidated and (len(z) == 0 or not dropped.consolidated)
    got = k.to_local(k.consolidate(dropped)).to_dict()
    assert got == {r: w for r, w in want.items() if w}
    assert k.to_local(k.consolidate(swapped)).to_dict() == {
        (v, key, key): w for (key, v), w in k.to_local(z).to_dict().items()
    }
