"""SQL views through a pipeline, on both engines, each step checked against DuckDB (`SqlOracle`):
joins of every kind, subqueries, set operations, top-k, recursion, with deletes, NULLs, duplicates
and primary-key updates."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

import dbspark
from dbspark.testing.engines import is_spark, pipeline_on
from dbspark.testing.sql_oracle import SqlOracle

DDL = """
CREATE TABLE emp (id BIGINT PRIMARY KEY, name VARCHAR NOT NULL, dept BIGINT, salary DECIMAL(10, 2),
                  hired DATE, boss BIGINT);
CREATE TABLE dept (id BIGINT PRIMARY KEY, title VARCHAR, budget DOUBLE);
CREATE TABLE sale (emp BIGINT, amount BIGINT, day DATE);
"""

VIEWS = """
CREATE VIEW by_dept AS SELECT d.title, count(*) AS n, sum(e.salary) AS total, avg(e.salary) AS mean,
  min(e.hired) AS first, max(e.name) AS last, count(DISTINCT e.boss) AS bosses
  FROM emp e JOIN dept d ON e.dept = d.id GROUP BY d.title HAVING count(*) >= 1;
CREATE VIEW everyone AS SELECT e.name, d.title FROM emp e LEFT JOIN dept d ON e.dept = d.id AND d.budget > 10;
CREATE VIEW all_depts AS SELECT e.name, d.title FROM emp e RIGHT JOIN dept d ON e.dept = d.id;
CREATE VIEW full_outer AS SELECT e.name, d.title, coalesce(e.dept, d.id) AS k FROM emp e FULL JOIN dept d ON e.dept = d.id;
CREATE VIEW using_join AS SELECT * FROM sale JOIN (SELECT id AS emp, name FROM emp) USING (emp);
CREATE VIEW self_using AS SELECT emp, s.amount, t.day FROM sale s JOIN sale t USING (emp);
CREATE VIEW natural_ AS SELECT * FROM emp NATURAL JOIN (SELECT id, title AS name FROM dept);
CREATE VIEW sellers AS SELECT name FROM emp WHERE EXISTS (SELECT * FROM sale WHERE sale.emp = emp.id);
CREATE VIEW idle AS SELECT name FROM emp WHERE NOT EXISTS (SELECT * FROM sale WHERE sale.emp = emp.id AND amount > 0);
CREATE VIEW not_in AS SELECT name FROM emp WHERE dept NOT IN (SELECT id FROM dept WHERE budget < 100);
CREATE VIEW in_sub AS SELECT name FROM emp WHERE id IN (SELECT emp FROM sale GROUP BY emp HAVING sum(amount) > 5);
CREATE VIEW n_sales AS SELECT name, (SELECT count(*) FROM sale WHERE sale.emp = emp.id) AS n FROM emp;
CREATE VIEW above_avg AS SELECT name FROM emp WHERE salary > (SELECT avg(salary) FROM emp);
CREATE VIEW names AS SELECT name FROM emp UNION SELECT title FROM dept;
CREATE VIEW names_all AS SELECT name FROM emp UNION ALL SELECT title FROM dept;
CREATE VIEW both_ AS SELECT dept FROM emp INTERSECT SELECT id FROM dept;
CREATE VIEW only_emp AS SELECT dept FROM emp EXCEPT SELECT id FROM dept;
CREATE VIEW both_all AS SELECT amount FROM sale INTERSECT ALL SELECT amount + 5 FROM sale;
CREATE VIEW only_all AS SELECT emp, amount FROM sale EXCEPT ALL SELECT id, 5 FROM emp;
CREATE VIEW top2 AS SELECT name, salary FROM emp ORDER BY salary DESC, name LIMIT 2;
CREATE VIEW page AS SELECT amount, day FROM sale ORDER BY amount, day LIMIT 3 OFFSET 1;
CREATE VIEW chain AS WITH RECURSIVE up(id, top) AS (
    SELECT id, boss FROM emp WHERE boss IS NOT NULL
    UNION SELECT up.id, emp.boss FROM up JOIN emp ON up.top = emp.id WHERE emp.boss IS NOT NULL)
  SELECT * FROM up;
CREATE VIEW exprs AS SELECT upper(name) AS u, CASE WHEN salary > 100 THEN 'high' ELSE 'low' END AS band,
  extract(year FROM hired) AS y, hired + INTERVAL 1 MONTH AS later, name LIKE 'a%' AS a_name,
  CAST(salary AS DOUBLE) / 2 AS half FROM emp WHERE hired BETWEEN DATE '2020-01-01' AND DATE '2023-12-31';
CREATE VIEW distinct_days AS SELECT DISTINCT day FROM sale;
CREATE VIEW stats AS SELECT count(*) AS n, sum(amount) AS s, median(amount) AS med, stddev(amount) AS sd FROM sale;
"""

D = dt.date
STEPS = [
    {
        "insert": {
            "emp": [
                (1, "ann", 10, Decimal("120.50"), D(2020, 3, 1), None),
                (2, "bob", 10, Decimal("90"), D(2021, 5, 31), 1),
                (3, "cy", 20, Decimal("150"), D(2022, 1, 31), 2),
                (4, "al", None, None, None, 3),
            ],
            "dept": [(10, "eng", 50.0), (20, "ops", 5.0), (30, "hr", None)],
            "sale": [(1, 5, D(2024, 1, 1)), (1, 5, D(2024, 1, 1)), (2, 0, D(2024, 1, 2)), (None, 3, None)],
        }
    },
    {"delete": {"sale": [(1, 5, D(2024, 1, 1))]}, "insert": {"sale": [(3, 7, D(2024, 1, 3))]}},
    # primary-key updates: bob moves to ops with a raise, ann leaves, a new boss appears
    {
        "insert": {
            "emp": [
                (2, "bob", 20, Decimal("200"), D(2021, 5, 31), 1),
                (5, "ed", 30, Decimal("80"), D(2023, 2, 28), 2),
            ]
        },
        "delete": {"emp": [(1, "ann", 10, Decimal("120.50"), D(2020, 3, 1), None)]},
    },  # by key: only the key counts
    {"delete": {"dept": [(20, "ops", 5.0)], "sale": [(None, 3, None)]}},
    {},  # an empty step
    {"insert": {"dept": [(20, "ops", 500.0)], "emp": [(1, "ann", 10, Decimal("120.50"), D(2020, 3, 1), 5)]}},
]


@pytest.fixture(params=["local", "spark"])
def pipeline(request):
    if request.param == "spark":
        spark = request.getfixturevalue("spark_session")
        p = dbspark.Pipeline(engine="spark", spark=spark)
    else:
        p = dbspark.Pipeline(engine="local")
    yield p
    p.close()


def run_against_the_oracle(p: dbspark.Pipeline, oracle: SqlOracle, steps: list[dict]) -> None:
    """Each step's deletes and inserts into both, then the views compared after every step."""
    for i, step in enumerate(steps):
        for table, rows in step.get("delete", {}).items():
            p.delete(table, rows)
            oracle.delete(table, rows)
        for table, rows in step.get("insert", {}).items():
            p.insert(table, rows)
            oracle.insert(table, rows)
        p.step()
        oracle.check(p, what=f"after step {i}")


def test_sql_views_equal_duckdb_after_every_step(pipeline):
    oracle = SqlOracle(DDL + VIEWS)
    pipeline.sql(DDL + VIEWS)
    run_against_the_oracle(pipeline, oracle, STEPS)


def test_a_rejected_step_changes_nothing(pipeline):
    oracle = SqlOracle(DDL + VIEWS)
    pipeline.sql(DDL + VIEWS)
    for table, rows in STEPS[0]["insert"].items():
        pipeline.insert(table, rows)
        oracle.insert(table, rows)
    pipeline.step()
    pipeline.insert("sale", [(9, 9, D(2024, 2, 2))])
    pipeline.delete("sale", [(7, 7, D(2024, 1, 9))])  # not there: a bag's delete must match
    with pytest.raises(dbspark.NegativeStateError, match="sale"):
        pipeline.step()
    oracle.check(pipeline, what="after the rejected step")
    pipeline.delete("emp", [(42,)])  # an absent key
    with pytest.raises(dbspark.DbsparkError, match="emp"):
        pipeline.step()
    oracle.check(pipeline, what="after the second rejected step")
    assert pipeline.steps == 1


def test_runaway_recursion_stops_at_the_limit_and_rejects_the_step():
    p = dbspark.Pipeline(engine="local", recursion_limit=50)
    p.sql("""CREATE TABLE s (n BIGINT);
             CREATE VIEW nums AS WITH RECURSIVE r(n) AS (SELECT n FROM s UNION SELECT n + 1 FROM r WHERE n < 100)
             SELECT count(*) AS c FROM r""")
    p.insert("s", [(90,)])
    p.step()
    assert p.view("nums").to_dict() == {(11,): 1}
    p.insert("s", [(1,)])  # needs 99 iterations
    with pytest.raises(dbspark.RecursionLimitError, match="view nums: WITH RECURSIVE r"):
        p.step()
    assert p.steps == 1 and p.view("nums").to_dict() == {(11,): 1}
    p.delete("s", [(90,)])
    p.insert("s", [(95,)])
    p.step()
    assert p.view("nums").to_dict() == {(6,): 1}


def _parity(nodes: set[int]) -> set[tuple[str, int]]:
    """The oracle: even/odd distance from 0 along the chain 0, 1, 2, ... of present nodes."""
    out = set()
    n = 0
    while n in nodes:
        out.add(("even" if n % 2 == 0 else "odd", n))
        n += 1
    return out


def test_mutually_recursive_ctes_are_one_scope_maintained_with_deletes():
    p = dbspark.Pipeline(engine="local")
    p.sql("""CREATE TABLE e (a BIGINT);
      CREATE VIEW parity AS WITH RECURSIVE
        even(n) AS (SELECT a FROM e WHERE a = 0 UNION SELECT o.n + 1 FROM odd o JOIN e ON e.a = o.n + 1),
        odd(n) AS (SELECT a FROM e WHERE a < 0 UNION SELECT v.n + 1 FROM even v JOIN e ON e.a = v.n + 1)
      SELECT 'even' AS k, n FROM even UNION ALL SELECT 'odd', n FROM odd""")
    nodes: set[int] = set()
    for add, remove in [(range(8), ()), ((), (3,)), ((3, 9, 10), (0,)), ((0, 8), (5,)), ((5,), ())]:
        p.insert("e", [(a,) for a in add])
        p.delete("e", [(a,) for a in remove])
        nodes |= set(add)
        nodes -= set(remove)
        p.step()
        assert p.view("parity").to_dict() == {r: 1 for r in _parity(nodes)}


def apply_steps(p: dbspark.Pipeline, o: SqlOracle, steps: list) -> None:
    """Each step (inserts into t0, t1, deletes from t0, t1) on the pipeline and the oracle, then a check."""
    for ins0, ins1, del0, del1 in steps:
        for t, rows, f in (
            ("t0", ins0, "insert"),
            ("t1", ins1, "insert"),
            ("t0", del0, "delete"),
            ("t1", del1, "delete"),
        ):
            if rows:
                getattr(p, f)(t, rows)
                getattr(o, f)(t, rows)
        p.step()
        o.check(p)


def test_subqueries_as_values_under_or_and_in_the_select_list():
    ddl = """CREATE TABLE t0 (k BIGINT, c0 BIGINT); CREATE TABLE t1 (k BIGINT, c0 BIGINT);
    CREATE VIEW v0 AS SELECT k FROM t0 AS x WHERE x.k IN (SELECT y.k FROM t1 AS y) OR x.c0 = 0;
    CREATE VIEW v1 AS SELECT k FROM t0 AS x WHERE EXISTS (SELECT 1 FROM t1 AS y WHERE y.k = x.k) OR x.c0 = 0;
    CREATE VIEW v2 AS SELECT k, k IN (SELECT c0 FROM t1) AS f,
                      EXISTS (SELECT * FROM t1 WHERE t1.k = t0.k AND t1.c0 > t0.c0) AS g FROM t0;
    CREATE VIEW v3 AS SELECT k FROM t0 WHERE NOT (k IN (SELECT c0 FROM t1)) OR c0 IS NULL;"""
    p = dbspark.Pipeline(engine="local")
    p.sql(ddl)
    o = SqlOracle(ddl)
    steps = [
        ([(1, 0), (2, 5), (None, 1), (3, None)], [(1, 9), (2, None)], [], []),
        ([(4, 4)], [(None, 4)], [], [(2, None)]),
        ([], [], [(1, 0)], [(1, 9)]),
    ]
    apply_steps(p, o, steps)


def test_the_sql_example_with_the_cli_equals_duckdb(tmp_path):
    from pathlib import Path

    import polars as pl
    from typer.testing import CliRunner

    from dbspark.cli.main import app
    from dbspark.io import list_batches, read_changes

    ex = Path(__file__).resolve().parent.parent / "examples" / "orders"
    out = tmp_path / "out"
    r = CliRunner().invoke(
        app,
        [
            "run",
            str(ex / "pipeline.sql"),
            "--changes",
            str(ex / "changes"),
            "--engine",
            "local",
            "--output",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    ddl = (ex / "pipeline.sql").read_text()
    p = dbspark.Pipeline(engine="local")
    p.sql(ddl)
    oracle = SqlOracle(ddl)
    for step_dir in sorted((ex / "changes").iterdir()):
        for batch in list_batches(step_dir):
            table = batch.name.split(".")[0]
            rows, w = read_changes(batch, dict(p.relation(table).schema))
            for sign, f in ((-1, "delete"), (1, "insert")):
                part = rows.filter(pl.Series(w) == sign)
                if part.height:
                    getattr(p, f)(table, part)
                    getattr(oracle, f)(table, part)
        p.step()
        oracle.check(p, what=f"after {step_dir.name}")
    # the CLI wrote each view's changes; summed over the steps they are the view
    for view in p.views:
        logs = sorted((out / view).glob("step-*.parquet"))
        total = pl.concat([pl.read_parquet(f) for f in logs])
        data = [c for c in total.columns if c != "weight"]
        summed = total.group_by(data).agg(pl.col("weight").sum()).filter(pl.col("weight") != 0)
        assert sorted(summed.rows()) == sorted(p.view(view).to_polars().rows()), view


CORRELATED = """CREATE TABLE t0 (k BIGINT, c0 BIGINT); CREATE TABLE t1 (k BIGINT, c0 BIGINT);
CREATE VIEW not_in_corr AS SELECT k FROM t0 AS x WHERE x.c0 NOT IN (SELECT y.c0 FROM t1 AS y WHERE y.k = x.k);
CREATE VIEW in_value AS SELECT k, x.c0 IN (SELECT y.c0 FROM t1 AS y WHERE y.k = x.k) AS sq FROM t0 AS x;
CREATE VIEW count_ne AS SELECT k, (SELECT count(*) FROM t1 AS y WHERE y.k <> x.k) AS sq FROM t0 AS x;
CREATE VIEW sum_lt AS SELECT k, (SELECT sum(y.c0) FROM t1 AS y WHERE y.k = x.k AND y.c0 < x.c0) AS sq FROM t0 AS x;
CREATE VIEW max_or AS SELECT k FROM t0 AS x WHERE x.c0 < (SELECT max(c0) FROM t1 y WHERE y.k >= x.k OR x.k IS NULL);
CREATE VIEW full_right_only AS SELECT x.k AS a, y.k AS b FROM t0 AS x FULL JOIN t1 AS y ON x.k = y.k AND y.c0 = 2;
"""


def test_correlated_subqueries_beyond_equalities_and_full_joins_with_one_sided_conditions():
    p = dbspark.Pipeline(engine="local")
    p.sql(CORRELATED)
    o = SqlOracle(CORRELATED)
    steps = [
        (
            [(1, 5), (1, 5), (2, None), (None, 3), (3, 1), (4, 4)],
            [(1, 2), (1, 5), (2, 1), (None, 9), (3, None), (1, 2), (2, 2)],
            [],
            [],
        ),
        ([(5, 3)], [(4, 1)], [(1, 5)], [(1, 5)]),
        ([], [], [(4, 4), (None, 3)], [(3, None), (2, 2)]),
    ]
    apply_steps(p, o, steps)


# column names Spark would parse (a dot: a nested field; a backtick: a quoting error) and a space
ODD_DDL = """
CREATE TABLE "o.t" ("k.1" BIGINT PRIMARY KEY, "a`b" VARCHAR, "x y" DECIMAL(10, 2) UNIQUE);
CREATE TABLE e ("k.1" BIGINT, "g.`2" VARCHAR, "v.v" BIGINT);
"""
ODD_VIEWS = """
CREATE VIEW joined AS SELECT t."k.1", t."a`b", e."g.`2", e."v.v" FROM "o.t" t JOIN e ON t."k.1" = e."k.1";
CREATE VIEW using_ AS SELECT * FROM "o.t" JOIN e USING ("k.1");
CREATE VIEW grouped AS SELECT "g.`2", min("v.v") AS lo, sum("v.v") AS s, count(DISTINCT "k.1") AS nk,
  count(*) AS n FROM e GROUP BY "g.`2";
CREATE VIEW whole AS SELECT min("x y") AS lo, sum("x y") AS s, median("v.v") AS med FROM "o.t", e;
CREATE VIEW dist AS SELECT DISTINCT "g.`2", "v.v" > 1 AS big FROM e;
CREATE VIEW keyed AS SELECT "k.1", "a`b", "x y" FROM "o.t" WHERE "x y" IS NOT NULL;
CREATE VIEW top AS SELECT "k.1", "v.v" FROM e ORDER BY "v.v" DESC, "k.1" LIMIT 2;
"""
ODD_STEPS: list[dict] = [
    {
        "insert": {
            "o.t": [(1, "a", Decimal("1.50")), (2, "b", None), (3, None, Decimal("-2.25"))],
            "e": [(1, "x", 5), (1, "x", 5), (2, None, 1), (3, "y", None), (None, "x", 2)],
        }
    },
    {  # primary-key update of k.1 = 2, a delete by key, bag deletes
        "insert": {"o.t": [(2, "b2", Decimal("7.00"))], "e": [(2, "y", 9)]},
        "delete": {"o.t": [(3, None, Decimal("-2.25"))], "e": [(1, "x", 5), (None, "x", 2)]},
    },
    {"insert": {"o.t": [(3, "c", Decimal("0.01"))]}, "delete": {"e": [(2, None, 1)]}},
]


def test_column_names_with_dots_and_backticks_equal_duckdb(engine: Any) -> None:
    """Quoted names a Spark column API would parse ("k.1" as field 1 of k, "a`b" a quoting error) are
    each one column on both engines, through joins (ON and USING), groups, DISTINCT, a primary key, a
    UNIQUE column, top-k and median. On Spark every step runs on the cluster (placement=cluster), so
    the DataFrame paths see the names, not only the driver's."""
    spark = engine.spark if is_spark(engine) else None
    if spark is not None:
        spark.conf.set("spark.dbspark.placement", "cluster")
    try:
        oracle = SqlOracle(ODD_DDL + ODD_VIEWS)
        with pipeline_on(engine) as p:
            p.sql(ODD_DDL + ODD_VIEWS)
            run_against_the_oracle(p, oracle, ODD_STEPS)
    finally:
        if spark is not None:
            spark.conf.unset("spark.dbspark.placement")
