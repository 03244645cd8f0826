"""User aggregates without an inverse, maintained by scan trees (`columnar/scan_fold.py`;
`lftj-incremental-maintenance.txt` §2.3.3, §3.1, §3.1.1).

The trees' pages are made small here (`scan_fold.PAGE`), so that a few dozen rows give groups of
every depth and the random streams cross the depth bands both ways (each crossing builds a group's
tree again). After every step the view must equal a Python fold of the current multiset; the trees'
own state is checked against the multiset too (every node's count and values are its rows' fold).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl
import pytest
from hypothesis import strategies as st

import dbspark
from dbspark import codec
from dbspark.columnar import scan_fold
from dbspark.ir.aggregate import AggCall, AggSpec
from dbspark.operators.aggregate import SemigroupState
from dbspark.testing.engines import engine_given, is_spark

P = 1_000_003
PRODMOD = dbspark.UserAggregate("prodmod", f=lambda x: x % P, g=lambda a, b: a * b % P, dtype="int64")
BITOR = dbspark.UserAggregate("bitor", f=lambda x: x & 0xFFFF, g=lambda a, b: a | b, dtype="int64")
TOP2 = dbspark.UserAggregate(  # the two largest distinct values: a semigroup with no inverse
    "top2",
    f=lambda x: [x],
    g=lambda a, b: sorted(set(a) | set(b))[-2:],
    r=lambda a: a[0] * 1000 + a[-1],
    dtype="int64",
)
SUMSQ = dbspark.UserAggregate(
    "sumsq", f=lambda x: x * x, g=lambda a, b: a + b, d=lambda a, b: a - b, dtype="int64"
)
AGGS: dict[str, Any] = {
    "pm": (PRODMOD, "x"),
    "bo": (BITOR, "x"),
    "t2": (TOP2, "x"),
    "ss": (SUMSQ, "x"),
    "n": "count",
    "s": ("sum", "x"),
}


def expected(cur: Counter, grouped: bool) -> dict[tuple, int]:
    """The view from the current multiset `cur` of (g, x) rows, folded in Python."""
    groups: dict[Any, list[tuple[Any, int]]] = {}
    for (g, x), w in cur.items():
        if w > 0:
            groups.setdefault(g if grouped else 0, []).append((x, w))
    if not grouped and not groups:
        return {(None, None, None, None, 0, None): 1}
    out = {}
    for g, rows in groups.items():
        xs = [x for x, w in rows for _ in range(w) if x is not None]
        pm = bo = t2 = ss = s = None
        if xs:
            pm, bo = 1, 0
            for x in xs:
                pm, bo = pm * (x % P) % P, bo | (x & 0xFFFF)
            top = sorted(set(xs))[-2:]
            t2, ss, s = top[0] * 1000 + top[-1], sum(x * x for x in xs), sum(xs)
        n = sum(w for _, w in rows)
        out[((g,) if grouped else ()) + (pm, bo, t2, ss, n, s)] = 1
    return out


@st.composite
def streams(draw: Any, max_steps: int = 8) -> list[list[tuple[tuple[Any, Any], int]]]:
    """Steps of changes to a bag of (g, x): inserts in runs (a group grows past several depths at
    once), duplicates, large weights, NULLs, and deletes of rows present (some of them whole groups)."""
    cur: Counter = Counter()
    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        step: list[tuple[tuple[Any, Any], int]] = []
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["run", "one", "delete", "drop_group"]))
            g = draw(st.sampled_from([None, 0, 1, 2]))
            if kind == "run":
                n = draw(st.integers(1, 80))
                base = draw(st.integers(-50, 50))
                step += [((g, base + 3 * i), 1) for i in range(n)]
            elif kind == "one":
                x = draw(st.one_of(st.none(), st.integers(-(10**6), 10**6)))
                step.append(((g, x), draw(st.sampled_from([1, 2, 10**6]))))
            else:
                live = Counter(cur)  # rows deleted earlier in the step are gone
                for r, w in step:
                    live[r] += w
                present = sorted(
                    (r for r, w in live.items() if w > 0 and (kind == "delete" or r[0] == g)), key=repr
                )
                if kind == "delete" and present:
                    present = draw(st.lists(st.sampled_from(present), max_size=20, unique=True))
                step += [(r, -live[r]) for r in present]
        for r, w in step:
            cur[r] += w
        cur = Counter({r: w for r, w in cur.items() if w})
        steps.append(step)
    return steps


def _contents(steps: list[list[tuple[tuple[Any, Any], int]]]) -> list[Counter]:
    cur: Counter = Counter()
    out = []
    for step in steps:
        for r, w in step:
            cur[r] += w
        out.append(Counter({r: w for r, w in cur.items() if w}))
    return out


def _circuit() -> dbspark.Circuit:
    c = dbspark.Circuit()
    t = c.input("t", {"g": "int64", "x": "int64"}, kind="bag")
    t.aggregate(by="g", **AGGS).output("by_g")
    t.aggregate(**AGGS).output("all")
    return c


def _state(r: Any) -> list[SemigroupState]:
    return [s for s in r.states.values() if isinstance(s, SemigroupState)]


_SPEC = AggSpec(("g",), (AggCall("pm", PRODMOD, "x"),), pl.Schema({"g": pl.Int64(), "x": pl.Int64()}))


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_fold, "PAGE", 2)


@engine_given(streams(), local=25, spark=4, spark_strategies=(streams(max_steps=3),))
def test_semigroup_aggregates_match_a_python_fold(engine, small_pages, steps):
    r = _circuit().run(engine)
    assert len(_state(r)) == 2, "the aggregates must be maintained by scan trees"
    for t, (step, cur) in enumerate(zip(steps, _contents(steps), strict=True)):
        if step:
            r.push("t", [row for row, _ in step], [w for _, w in step])
        r.step()
        assert r.view("by_g").to_dict() == expected(cur, True), f"step {t}"
        assert r.view("all").to_dict() == expected(cur, False), f"step {t}"
        if not is_spark(engine):
            for state in _state(r):
                _check_trees(r.kernel, state, cur)


def _rows(kernel: Any, trace: Any, once: bool = True) -> list[dict[str, Any]]:
    z = kernel.to_local(kernel.consolidate(trace.snapshot()))
    assert not once or all(w == 1 for w in z.df["__w"].to_list()), "a root or node is held once"
    return z.df.to_dicts()


def _check_trees(kernel: Any, state: SemigroupState, cur: Counter) -> None:
    """The trees' state against the multiset: the records are its rows, each at its page (its hash's
    prefix at its group's depth); each group's depth is stable for its count (`Geometry.depth`); the
    nodes are exactly the non-empty prefixes at levels 1..depth, each with its rows' count and
    PRODMOD value."""
    roots = _rows(kernel, state.roots)
    grouped = "g" in (roots[0] if roots else {"g": 0})
    key = "g" if grouped else scan_fold.G
    depth = {r[key]: r[scan_fold.DEP] for r in roots}
    groups: dict[Any, Counter] = {}
    for (g, x), w in cur.items():
        groups.setdefault(g if grouped else 0, Counter())[(g, x)] += w
    assert set(depth) == set(groups)
    records = _rows(kernel, state.records, once=False)
    nodes = {(r[key], r[scan_fold.LVL], r[scan_fold.PFX]): r for r in _rows(kernel, state.nodes)}
    want_nodes = set()
    for grp, rows in groups.items():
        dd, n = depth[grp], sum(rows.values())
        assert state.geo.depth(dd, n) == dd, (grp, dd, n)
        frame = pl.DataFrame(
            {"g": [g for g, _ in rows], "x": [x for _, x in rows]}, schema={"g": pl.Int64, "x": pl.Int64}
        )
        h = scan_fold._hashes(frame, _SPEC)
        ws = list(rows.values())
        xs = [x for _, x in rows]
        for level in range(1, dd + 1):
            pfx = scan_fold.prefix(h, level)
            for p in set(pfx.tolist()):
                at = [i for i in range(len(ws)) if pfx[i] == p]
                node = nodes.get((grp, level, p))
                assert node is not None, (grp, level, p)
                assert node[scan_fold.RC] == sum(ws[i] for i in at)
                want = None
                for i in at:
                    if xs[i] is not None:
                        want = (1 if want is None else want) * pow(xs[i] % P, ws[i], P) % P
                assert (codec.loads(node["__u0"]) if node["__u0"] is not None else None) == want
                assert node[scan_fold.PAR] == p >> scan_fold.BITS
                want_nodes.add((grp, level, p))
        pages = scan_fold.prefix(h, dd)
        got = Counter()
        for r in records:
            if r[key] == grp:
                got[(r["g"], r["x"], r[scan_fold.PG])] += r["__w"]
        assert got == Counter({(g, x, int(pages[i])): w for i, ((g, x), w) in enumerate(rows.items())})
    assert set(nodes) == want_nodes


def test_a_step_folds_the_changed_pages_only(small_pages):
    """One group of 5,000 rows, pages of 2: deleting one row calls f on its page's rows and g on the
    nodes along its path, not on the group (the ordered fold called f 5,000 times)."""
    calls: list[int] = []

    def f(x: int) -> int:
        calls.append(x)
        return x % P

    agg = dbspark.UserAggregate("pm", f=f, g=lambda a, b: a * b % P, dtype="int64")
    c = dbspark.Circuit()
    t = c.input("t", {"g": "int64", "x": "int64"}, kind="bag")
    c.output("v", t.aggregate(by="g", pm=(agg, "x")))
    r = c.run("local")
    r.push("t", [(1, x) for x in range(1, 5001)])
    r.step()
    calls.clear()
    r.push("t", [(1, 77)], [-1])
    r.step()
    want = 1
    for x in range(1, 5001):
        if x != 77:
            want = want * x % P
    assert r.view("v").to_dict() == {(1, want): 1}
    assert 0 < len(calls) <= 8, calls


def test_a_checkpointed_tree_resumes(tmp_path, small_pages):
    """The scan trees come back from a checkpoint and go on folding."""
    r = _circuit().run("local")
    steps = [[((1, x), 1) for x in range(100)], [((1, x), -1) for x in range(0, 100, 3)] + [((2, 5), 2)]]
    for i, step in enumerate(steps):
        r.push("t", [row for row, _ in step], [w for _, w in step])
        r.step()
        if i == 0:
            r.checkpoint(tmp_path / "ck")
    again = _circuit().run("local")
    again.restore(tmp_path / "ck")
    again.push("t", [row for row, _ in steps[1]], [w for _, w in steps[1]])
    again.step()
    assert again.view("by_g").to_dict() == r.view("by_g").to_dict()
    assert again.view("by_g").to_dict() == expected(_contents(steps)[-1], True)


class Boxed:
    """A user's own class: not a value dbspark's state can hold."""

    def __init__(self, n: int) -> None:
        self.n = n


def test_storing_an_accumulated_value_that_codec_refuses_names_the_aggregate(small_pages):
    """At a node of the tree as at the root: the error names the user aggregate."""
    bad = dbspark.UserAggregate(
        "boxed", f=Boxed, g=lambda a, b: Boxed(a.n + b.n), r=lambda a: a.n, dtype="int64"
    )
    c = dbspark.Circuit()
    t = c.input("t", {"g": "int64", "x": "int64"}, kind="bag")
    c.output("v", t.aggregate(by="g", s=(bad, "x")))
    r = c.run("local")
    r.push("t", [(1, x) for x in range(50)])
    with pytest.raises(dbspark.errors.UnsupportedError, match="user aggregate 'boxed'"):
        r.step()


def test_a_group_deepens_and_flattens_its_tree(monkeypatch):
    """Pages of 4: a group of 3,000 rows has depth 3; deleted down to one row it is back at depth 0;
    the trees and the view are right at every step (each depth change builds the tree again)."""
    monkeypatch.setattr(scan_fold, "PAGE", 4)
    r = _circuit().run("local")
    (grouped, _) = _state(r)
    cur: Counter = Counter()
    seen = []
    sizes = [3000, 3100, 900, 60, 5, 1]
    for n in sizes:
        have = sorted(x for (_, x) in cur)
        step = [((7, x), 1) for x in range(len(have), n)] + [((7, x), -1) for x in have[n:]]
        for row, w in step:
            cur[row] += w
        cur = Counter({k: w for k, w in cur.items() if w})
        r.push("t", [row for row, _ in step], [w for _, w in step])
        r.step()
        assert r.view("by_g").to_dict() == expected(cur, True)
        _check_trees(r.kernel, grouped, cur)
        seen.append(_rows(r.kernel, grouped.roots)[0][scan_fold.DEP])
    assert seen == [3, 3, 3, 2, 1, 0]  # 900 rows stay at depth 3: above half the band (512)


@pytest.mark.parametrize("agg", [PRODMOD, SUMSQ], ids=["without-inverse", "with-inverse"])
def test_nan_and_signed_zero_group_keys(engine, agg):
    """Float group keys: NaN is one group, -0.0 and 0.0 are one group (as GROUP BY has them), for user
    aggregates folded by trees and by their inverse alike."""
    nan = float("nan")
    c = dbspark.Circuit()
    t = c.input("t", {"g": "float64", "x": "int64"}, kind="bag")
    c.output("v", t.aggregate(by="g", u=(agg, "x"), n="count"))
    r = c.run(engine)
    steps = [
        [((nan, 3), 1), ((nan, 5), 1), ((1.0, 2), 1), ((-0.0, 4), 1), ((0.0, 6), 1)],
        [((nan, 3), -1), ((0.0, 4), -1)],
        [((nan, 5), -1), ((-0.0, 7), 2)],
    ]
    cur: Counter = Counter()
    for step in steps:
        r.push("t", [row for row, _ in step], [w for _, w in step])
        r.step()
        for (g, x), w in step:
            cur[("nan" if g != g else abs(g), x)] += w
        want: dict[Any, list[int]] = {}
        for (g, x), w in cur.items():
            want.setdefault(g, []).extend([x] * w)
        got = {
            ("nan" if g != g else abs(g)): (u, n) for (g, u, n), w in r.view("v").to_dict().items() if w == 1
        }
        expect = {}
        for g, xs in want.items():
            if xs:
                v = 1
                for x in xs:
                    v = v * (x % P) % P if agg is PRODMOD else v
                expect[g] = (v if agg is PRODMOD else sum(x * x for x in xs), len(xs))
        assert got == expect
