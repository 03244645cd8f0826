"""Exact floating sums (`columnar/exactsum.py`, `lftj-incremental-maintenance.txt` §2.3.4): SUM, AVG,
VAR and STDDEV of a DOUBLE are the correctly rounded values of the current multiset's exact sums, after
every step of a change stream, whatever the order of its inserts and deletes. The references are
independent of dbspark's limbs: `math.fsum` for SUM (Python's `fractions` where fsum's own
intermediate overflows), `fractions.Fraction` for AVG and VAR; values span 1e-300..1e300, subnormals,
the largest doubles, exact cancellations, infinities and NaN; weights are large; every row is deleted
at the end. On both engines, through a Python circuit, SQL and Datalog."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

import dbspark
from dbspark.testing.engines import engine_given, pipeline_on

CALLS = {
    "s": ("sum", "x"),
    "a": ("avg", "x"),
    "vp": ("var_pop", "x"),
    "vs": ("var_samp", "x"),
    "sp": ("stddev_pop", "x"),
    "ss": ("stddev_samp", "x"),
    "n": ("count", "x"),
}
FINITE = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),  # the whole range, subnormals included
    st.sampled_from([1e300, -1e300, 1e-300, 5e-324, -5e-324, 1.7976931348623157e308, 0.1, -0.1, 1e16, 0.0]),
    st.builds(lambda m, e: m * 10.0**e, st.floats(-1.0, 1.0), st.integers(-300, 300)),
)
VALUE = st.one_of(FINITE, FINITE, FINITE, st.sampled_from([math.inf, -math.inf, math.nan, None]))
ROW = st.tuples(st.integers(0, 2), VALUE)
# steps of (rows inserted with their weights, how many of the present rows to delete whole)
STEPS = st.lists(
    st.tuples(
        st.lists(st.tuples(ROW, st.sampled_from([1, 1, 2, 7, 1_000_003])), max_size=6), st.integers(0, 4)
    ),
    min_size=1,
    max_size=5,
)


def _float(q: Fraction) -> float:
    try:
        return float(q)
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def expected(values: Counter) -> tuple:
    """(SUM, AVG, VAR_POP, VAR_SAMP, STDDEV_POP, STDDEV_SAMP, COUNT) of a multiset of doubles."""
    xs = (
        [x for x, w in values.items() for _ in range(w) if x is not None]
        if sum(values.values()) < 50
        else None
    )
    n = sum(w for x, w in values.items() if x is not None)
    if n == 0:
        return (None, None, None, None, None, None, 0)
    finite = {x: w for x, w in values.items() if x is not None and math.isfinite(x)}
    special = [x for x, w in values.items() if x is not None and not math.isfinite(x) and w]
    exact = sum((Fraction(x) * w for x, w in finite.items()), Fraction(0))
    if special:
        nan = any(math.isnan(x) for x in special) or (math.inf in special and -math.inf in special)
        s = math.nan if nan else (math.inf if math.inf in special else -math.inf)
        var = [math.nan] * 4
        return (s, s, var[0], None if n == 1 else var[1], var[2], None if n == 1 else var[3], n)
    try:  # the reference of a sum: fsum, over the multiset written out when it is short
        s = math.fsum(xs) if xs is not None else _float(exact)
    except OverflowError:  # (fsum's intermediate overflow: the exact sum, rounded once)
        s = _float(exact)
    squares = sum((Fraction(x) ** 2 * w for x, w in finite.items()), Fraction(0))
    m2 = squares - exact * exact / n
    vp, vs = _float(m2 / n), (None if n == 1 else _float(m2 / (n - 1)))
    return (
        s,
        _float(exact / n),
        vp,
        vs,
        math.sqrt(vp),
        None if vs is None else math.sqrt(vs),
        n,
    )


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return bool(a == b)


def check(got: dict, live: Counter, step: int) -> None:
    groups: dict[Any, Counter] = {}
    for (g, x), w in live.items():
        if w:
            groups.setdefault(g, Counter())[x] += w
    want = {g: expected(c) for g, c in groups.items()}
    assert set(got) == set(want), (step, got, want)
    for g, row in got.items():
        for name, a, b in zip(CALLS, row, want[g], strict=True):
            assert same(a, b), f"step {step}, group {g}, {name}: dbspark {a!r}, exact {b!r}"


def _rows(view: Any) -> dict:
    return {r[0]: r[1:] for r in view.to_dict()}


@engine_given(STEPS, local=60, spark=4)
def test_circuit_sums_are_the_exact_sums_correctly_rounded(engine: Any, steps: list) -> None:
    c = dbspark.Circuit()
    t = c.input("t", {"g": "int64", "x": "float64"}, kind="bag")
    t.aggregate(by=["g"], **CALLS).output("agg")
    r = c.run(engine)
    live: Counter = Counter()
    for k, (ins, ndel) in enumerate([*steps, ([], 99)]):  # the last step deletes every row
        gone = [(row, w) for row, w in live.items() if w][:ndel]
        rows = [row for row, _ in ins] + [row for row, _ in gone]
        weights = [w for _, w in ins] + [-w for _, w in gone]
        if rows:
            r.push("t", rows, weights)
        r.step()
        for row, w in zip(rows, weights, strict=True):
            live[row] += w
        check(_rows(r.view("agg")), live, k)
    assert _rows(r.view("agg")) == {}


@engine_given(STEPS, local=30, spark=2)
def test_sql_sums_are_the_exact_sums_correctly_rounded(engine: Any, steps: list) -> None:
    p = pipeline_on(engine)
    try:
        p.sql(
            "CREATE TABLE t (g BIGINT, x DOUBLE); CREATE VIEW v AS SELECT g, SUM(x), AVG(x), VAR_POP(x), "
            "VAR_SAMP(x), STDDEV_POP(x), STDDEV_SAMP(x), COUNT(x) FROM t GROUP BY g"
        )
        live: Counter = Counter()
        for k, (ins, ndel) in enumerate([*steps, ([], 99)]):
            gone = [row for row, w in live.items() for _ in range(w)][: ndel * 3]
            rows = [row for row, w in ins for _ in range(min(w, 3))]
            if rows:
                p.insert("t", rows)
            if gone:
                p.delete("t", gone)
            p.step()
            live.update(rows)
            live.subtract(gone)
            check(_rows(p.view("v")), live, k)
    finally:
        p.close()


def test_a_sum_keeps_no_residue_of_what_was_deleted(engine: Any) -> None:
    """The drift a sum of doubles shows: 1e16 + 1 - 1e16 is 0 in doubles, 1 exactly; and the big values
    deleted leave the small ones summed exactly (a double accumulator keeps their rounding)."""
    p = pipeline_on(engine)
    try:
        p.sql("CREATE TABLE t (x DOUBLE); CREATE VIEW v AS SELECT SUM(x) AS s, AVG(x) AS a FROM t")
        p.insert("t", [(1e16,), (1.0,), (-1e16,), (0.1,), (0.2,)])
        p.step()
        assert p.view("v").to_dict() == {(math.fsum([1.0, 0.1, 0.2]), math.fsum([1.0, 0.1, 0.2]) / 5): 1}
        p.insert("t", [(1e300,), (-1e300,), (1e-300,)])
        p.delete("t", [(1.0,), (0.2,)])
        p.step()
        assert p.view("v").to_dict() == {
            (math.fsum([0.1, 1e-300]), float(Fraction(0.1) + Fraction(1e-300)) / 6): 1
        }
        p.delete("t", [(1e16,), (-1e16,), (1e300,), (-1e300,)])
        p.step()
        assert p.view("v").to_dict() == {(0.1, float((Fraction(0.1) + Fraction(1e-300)) / 2)): 1}
    finally:
        p.close()


def test_datalog_sums_are_exact(engine: Any) -> None:
    p = pipeline_on(engine)
    try:
        p.datalog(
            """
            .decl item(g: number, x: float)
            .input item
            .decl total(g: number, s: float)
            total(g, s) :- item(g, _), s = sum x : { item(g, x) }.
            .output total
            """
        )
        p.insert("item", [(1, 1e16), (1, 1.0), (1, -1e16), (2, 0.1), (2, 0.2), (2, 0.3)])
        p.step()
        assert p.view("total").to_dict() == {(1, 1.0): 1, (2, math.fsum([0.1, 0.2, 0.3])): 1}
        p.delete("item", [(1, 1e16)])
        p.step()
        assert p.view("total").to_dict() == {(1, 1.0 - 1e16): 1, (2, math.fsum([0.1, 0.2, 0.3])): 1}
    finally:
        p.close()
