"""A recursive CTE's bound column pushed into its base (`frontends/sql/pushdown.py`): the rewrite where
it applies and not elsewhere, and every view equal to DuckDB's answer to the query as written after
every step of generated edge changes, on both engines."""

from __future__ import annotations

from typing import Any

import numpy as np
import sqlglot
from hypothesis import strategies as st

from dbspark.frontends.sql.pushdown import push_bound_columns
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.sql_oracle import SqlOracle
from dbspark.testing.weighted_graphs import N, apply, distances, weighted_changes

TABLES = "CREATE TABLE e (src BIGINT, dst BIGINT);\n"
LEFT = (
    "WITH RECURSIVE tc(src, dst) AS (SELECT src, dst FROM e UNION SELECT tc.src, e.dst FROM tc JOIN e ON "
    "tc.dst = e.src) SELECT * FROM tc WHERE {}"
)
RIGHT = (
    "WITH RECURSIVE tc(src, dst) AS (SELECT src, dst FROM e UNION SELECT e.src, tc.dst FROM e JOIN tc ON "
    "e.dst = tc.src) SELECT * FROM tc WHERE {}"
)
BOTH = (
    "WITH RECURSIVE tc(src, dst) AS (SELECT src, dst FROM e UNION SELECT a.src, b.dst FROM tc a JOIN tc b ON "
    "a.dst = b.src) SELECT * FROM tc WHERE {}"
)
HOPS = (
    "WITH RECURSIVE p(src, dst, hops) AS (SELECT src, dst, 1 FROM e UNION SELECT p.src, e.dst, p.hops + 1 FROM p "
    "JOIN e ON p.dst = e.src WHERE p.hops < 4) SELECT src, dst, hops FROM p WHERE {}"
)
VIEWS = {
    "from_1": LEFT.format("src = 1"),
    "into_2": RIGHT.format("dst = 2"),
    "from_1_right": RIGHT.format("src = 1"),  # src comes from e: not pushed
    "into_2_left": LEFT.format("2 = dst AND src <> 3"),  # dst comes from e: not pushed
    "from_0_hops": HOPS.format("src = 0 AND hops > 1"),
}
DDL = TABLES + "".join(f"CREATE VIEW {v} AS {q};\n" for v, q in VIEWS.items())


def pushed(q: str) -> bool:
    node = sqlglot.parse_one(q, dialect="duckdb")
    return push_bound_columns(node) is not node


def test_where_the_rewrite_applies():
    assert {v for v, q in VIEWS.items() if pushed(q)} == {"from_1", "into_2", "from_0_hops"}
    assert not pushed(BOTH.format("src = 1"))  # tc read twice (DuckDB's answer differs: not compared)
    out = push_bound_columns(sqlglot.parse_one(VIEWS["from_1"], dialect="duckdb")).sql(dialect="duckdb")
    assert 'FROM (SELECT src, dst FROM e) AS "__base"(src, dst) WHERE "__base"."src" = 1 UNION' in out
    other = "WITH RECURSIVE tc(src, dst) AS ({}), q AS (SELECT * FROM tc) SELECT * FROM tc WHERE src = 1"
    body = VIEWS["from_1"].split(" AS (", 1)[1].rsplit(") SELECT", 1)[0]
    assert not pushed(other.format(body))  # another CTE reads tc


@st.composite
def edge_steps(draw: st.DrawFn) -> list[tuple[dict, dict]]:
    cur: set[tuple[int, int]] = set()
    out = []
    for _ in range(draw(st.integers(1, 5))):
        dels = sorted(draw(st.sets(st.sampled_from(sorted(cur)), max_size=3))) if cur else []
        ins = sorted(draw(st.sets(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=6)) - cur)
        cur = (cur - set(dels)) | set(ins)
        out.append(({"e": ins} if ins else {}, {"e": dels} if dels else {}))
    return out


@engine_given(edge_steps(), local=25, spark=2)
def test_views_equal_duckdb(engine: Any, steps):
    p = pipeline_on(engine)
    try:
        p.sql(DDL)
        SqlOracle(DDL).run(p, steps)
    finally:
        p.close()


# a recursion through MIN (`docs/recursive-aggregation.md`): src is a group key copied from sp, so
# `src = 1` is pushed into the base; `src + 0 = 1` is the same query, not pushed (its oracle)
CHEAPEST = """
CREATE TABLE edge (x BIGINT, y BIGINT, w BIGINT);
CREATE VIEW {name} AS WITH RECURSIVE sp(src, dst, cost) AS (
    SELECT x, y, w FROM edge
    UNION
    SELECT sp.src, e.y, MIN(sp.cost + e.w) FROM sp JOIN edge e ON sp.dst = e.x GROUP BY sp.src, e.y)
SELECT dst, cost FROM sp WHERE {where};
"""
PUSHED = CHEAPEST.format(name="pushed", where="src = 1")
WHOLE = CHEAPEST.format(name="whole", where="src + 0 = 1").replace(
    "CREATE TABLE edge (x BIGINT, y BIGINT, w BIGINT);", ""
)


def test_a_recursion_through_min_is_pushed_at_its_group_keys():
    view = lambda text: text.strip().split("CREATE VIEW pushed AS ", 1)[-1].rstrip(";")  # noqa: E731
    assert pushed(view(PUSHED))
    assert not pushed(
        view(
            PUSHED.replace("GROUP BY sp.src, e.y", "GROUP BY e.y").replace(
                "sp.src, e.y, MIN", "MIN(sp.src), e.y, MIN"
            )
        )
    )


@engine_given(weighted_changes(), local=25, spark=2)
def test_cheapest_paths_from_a_node_pushed_against_scipy(engine: Any, steps):
    """The pushed view and the whole one after every step of inserts, deletes and cost changes: equal
    changes, and both views the cheapest paths of one edge or more from node 1 by scipy."""
    p = pipeline_on(engine)
    try:
        p.sql(PUSHED + WHOLE)
        cur: set = set()
        for t, (ins, dels) in enumerate(steps):
            cur = apply(p, "edge", cur, ins, dels)
            out = p.step()
            assert out["pushed"].to_dict() == out["whole"].to_dict(), (t, cur)
            d = distances(cur)
            want = set()
            for y in range(N):
                best = min((w + d[z, y] for (x, z, w) in cur if x == 1), default=np.inf)
                if np.isfinite(best):
                    want.add((y, int(best)))
            for v in ("pushed", "whole"):
                assert set(p.view(v).to_dict()) == want, (v, t, cur)
    finally:
        p.close()
