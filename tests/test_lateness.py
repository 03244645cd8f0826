"""Lateness and bounded state (`circuit/waterline.py`, `docs/lateness.md`): tables declared with a
lateness drop (and count) their late rows, views over them equal DuckDB on the rows that were on time,
and the state below the waterlines is collected, on both engines.

After every step of a generated out-of-order stream (with deletes, some of them late): every view's
changes so far, summed, equal DuckDB's query over the rows on time (the finished windows included); a
view's contents equal that result at or above the view's waterline; the late rows are those a model of
the waterline finds late. A long run asserts that the state stays within a bound over 1M events.
"""

from __future__ import annotations

import datetime as dt
import random

import duckdb
import polars as pl
import pytest
from hypothesis import strategies as st

from dbspark.errors import CircuitError, DataError, SchemaError
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.sql_oracle import compare_frames, view_frame

TABLES = """
CREATE TABLE e (id BIGINT, k VARCHAR, ts TIMESTAMP, v INTEGER)
    WITH (lateness_column = ts, lateness = INTERVAL '10 minutes');
CREATE TABLE f (k VARCHAR, ts TIMESTAMP, u INTEGER)
    WITH (lateness_column = ts, lateness = INTERVAL '4 minutes', late_rows = 'drop');
"""
VIEWS = {
    "tum": (
        "SELECT window_start, window_end, COUNT(*) AS n, SUM(v) AS s FROM tumble(e, ts, INTERVAL '5 minutes') "
        "GROUP BY ALL",
        "SELECT time_bucket(INTERVAL '5 minutes', ts) AS window_start, time_bucket(INTERVAL '5 minutes', ts) "
        "+ INTERVAL '5 minutes' AS window_end, COUNT(*) AS n, SUM(v) AS s FROM e GROUP BY ALL",
    ),
    "keyed": (
        "SELECT time_bucket(INTERVAL '5 minutes', ts) AS w, k, MIN(v) AS lo, MAX(v) AS hi, COUNT(DISTINCT v) AS nd "
        "FROM e GROUP BY ALL",
        None,
    ),
    "seen": ("SELECT DISTINCT time_bucket(INTERVAL '5 minutes', ts) AS w, k FROM e", None),
    "big": ("SELECT id, ts, v FROM e WHERE v > 4", None),
    "wj": (
        "SELECT a.window_start, a.k, a.n, b.m FROM "
        "(SELECT window_start, k, COUNT(*) AS n FROM tumble(e, ts, INTERVAL '5 minutes') GROUP BY ALL) a JOIN "
        "(SELECT window_start, k, MAX(u) AS m FROM tumble(f, ts, INTERVAL '5 minutes') GROUP BY ALL) b "
        "ON a.window_start = b.window_start AND a.k = b.k",
        "SELECT a.window_start, a.k, a.n, b.m FROM "
        "(SELECT time_bucket(INTERVAL '5 minutes', ts) AS window_start, k, COUNT(*) AS n FROM e GROUP BY ALL) a "
        "JOIN (SELECT time_bucket(INTERVAL '5 minutes', ts) AS window_start, k, MAX(u) AS m FROM f GROUP BY ALL) b "
        "ON a.window_start = b.window_start AND a.k IS NOT DISTINCT FROM b.k",
    ),
    "total": ("SELECT k, COUNT(*) AS n FROM e GROUP BY k", None),
    "per_min": ("SELECT strftime(ts, '%Y-%m-%d %H:%M') AS m, k, COUNT(*) AS n FROM e GROUP BY ALL", None),
    "ij": (  # a join on a time range: each side's rows no later row of the other can reach are collected
        "SELECT a.id, a.k, f.u, f.ts FROM e AS a JOIN f ON a.k = f.k "
        "AND f.ts BETWEEN a.ts - INTERVAL '1 minute' AND a.ts + INTERVAL '3 minutes'",
        None,
    ),
    "hp": (
        "SELECT window_start, k, COUNT(*) AS n FROM hop(e, ts, INTERVAL '5 minutes', INTERVAL '15 minutes') "
        "GROUP BY ALL",
        "SELECT ws AS window_start, k, COUNT(*) AS n FROM (SELECT k, time_bucket(INTERVAL '5 minutes', ts) "
        "- to_minutes(5 * g) AS ws FROM e, range(3) t(g)) GROUP BY ALL",
    ),
    "run": (  # window functions: the rows below the waterline leave the window's state for totals
        "SELECT id, k, ts, v, SUM(v) OVER (PARTITION BY k ORDER BY ts) AS rs, RANK() OVER (PARTITION BY k "
        "ORDER BY ts) AS rk, DENSE_RANK() OVER (PARTITION BY k ORDER BY ts) AS dr, MIN(v) OVER (PARTITION BY k "
        "ORDER BY ts) AS mn FROM e",
        None,
    ),
    "run_all": (
        "SELECT id, ts, ROW_NUMBER() OVER (ORDER BY ts, id) AS rn, COUNT(v) OVER (ORDER BY ts, id) AS c, "
        "AVG(v) OVER (ORDER BY ts, id) AS a, FIRST_VALUE(id) OVER (ORDER BY ts, id) AS fv FROM e",
        None,
    ),
}
# the columns whose waterline each view has (a view over a lateness that no column carries keeps all)
MARKED = {
    "tum": "window_start",
    "keyed": "w",
    "seen": "w",
    "big": "ts",
    "wj": "window_start",
    "total": None,
    "hp": "window_start",
    "ij": None,
    "per_min": "m",
    "run": "ts",
    "run_all": "ts",
}
READS = {"wj": "ef"}  # the tables whose waterlines a view's waterline takes (others: e's)
LATENESS = {"e": dt.timedelta(minutes=10), "f": dt.timedelta(minutes=4)}
T0 = dt.datetime(2024, 3, 5, 10, 0)


def ddl() -> str:
    return TABLES + "".join(f"CREATE VIEW {v} AS {q};\n" for v, (q, _) in VIEWS.items())


class Model:
    """The tables' rows on time, in DuckDB, and the waterlines and late rows as the docs define them."""

    def __init__(self) -> None:
        self.con = duckdb.connect()
        self.con.execute("CREATE TABLE e (id BIGINT, k VARCHAR, ts TIMESTAMP, v INTEGER)")
        self.con.execute("CREATE TABLE f (k VARCHAR, ts TIMESTAMP, u INTEGER)")
        self.waterline: dict[str, dt.datetime] = {}
        self.late = {"e": 0, "f": 0}

    def on_time(self, table: str, rows: list[tuple], ts: int) -> list[tuple]:
        w = self.waterline.get(table)
        kept = [r for r in rows if w is None or r[ts] >= w]
        self.late[table] += len(rows) - len(kept)
        return kept

    def advance(self, table: str, inserted: list[tuple], ts: int) -> None:
        if inserted:
            w = max(r[ts] for r in inserted) - LATENESS[table]
            self.waterline[table] = max(w, self.waterline.get(table, w))


def events(step: int, draws: list[tuple[int, str | None, int, int]]) -> list[tuple]:
    """Events of a step: time about 4 minutes a step, up to 15 minutes early (some of them late)."""
    return [
        (step * 100 + i, k, T0 + dt.timedelta(minutes=4 * step + back, seconds=sec), v)
        for i, (back, k, sec, v) in enumerate(draws)
    ]


DRAW = st.tuples(
    st.integers(-15, 3), st.sampled_from(["a", "b", None]), st.sampled_from([0, 30]), st.integers(0, 9)
)
F_DRAW = st.tuples(st.integers(-8, 2), st.sampled_from(["a", "b"]), st.integers(0, 9))
STEPS = st.lists(
    st.tuples(st.lists(DRAW, max_size=6), st.lists(F_DRAW, max_size=3), st.integers(0, 3)),
    min_size=1,
    max_size=7,
)
SPARK_STEPS = [
    ([(0, "a", 0, 5), (-2, "b", 30, 7), (1, None, 0, 9)], [(0, "a", 1), (-1, "b", 3)], 0),
    ([(-15, "a", 0, 1), (2, "a", 0, 6), (3, "b", 0, 2)], [(-8, "a", 9), (2, "b", 4)], 1),
    ([(-3, "b", 30, 8), (-14, "a", 0, 3), (0, "a", 0, 6)], [(0, "a", 5)], 2),
    ([(1, "b", 0, 4)], [], 1),
]


@engine_given(STEPS, local=30, spark=1, spark_strategies=(st.just(SPARK_STEPS),))
def test_views_over_lateness_match_duckdb(engine, steps):
    model = Model()
    p = pipeline_on(engine)
    try:
        p.sql(ddl())
        present: list[tuple] = []
        summed: dict[str, list[pl.DataFrame]] = {v: [] for v in VIEWS}
        for step, (draws, f_draws, ndel) in enumerate(steps):
            ins = events(step, draws)
            f_ins = [(k, T0 + dt.timedelta(minutes=4 * step + back), u) for back, k, u in f_draws]
            gone, present = present[:ndel], present[ndel:]
            for table, rows in (("e", ins), ("f", f_ins)):
                if rows:
                    p.insert(table, rows)
            if gone:
                p.delete("e", gone)
            ins = model.on_time("e", ins, 2)
            f_ins = model.on_time("f", f_ins, 1)
            gone = model.on_time("e", gone, 2)
            present += ins
            if ins:
                model.con.executemany("INSERT INTO e VALUES (?, ?, ?, ?)", ins)
            if f_ins:
                model.con.executemany("INSERT INTO f VALUES (?, ?, ?)", f_ins)
            for row in gone:
                model.con.execute("DELETE FROM e WHERE id = ?", [row[0]])
            model.advance("e", ins, 2)
            model.advance("f", f_ins, 1)
            changes = p.step()
            assert p.late_rows == {t: n for t, n in model.late.items() if n}  # (a table with none: absent)
            for t in ("e", "f"):
                assert p.waterline(t) == ({"ts": model.waterline[t]} if t in model.waterline else {})
            for view, (query, oracle) in VIEWS.items():
                expected = model.con.sql(oracle or query).pl()
                summed[view].append(view_frame(changes[view]))
                so_far = pl.concat(summed[view], how="vertical_relaxed")
                data = [c for c in so_far.columns if c != "__w"]
                so_far = so_far.group_by(data).agg(pl.col("__w").sum()).filter(pl.col("__w") != 0)
                differ = compare_frames(so_far, expected, f"{view}: its changes summed")
                assert differ is None, differ
                marks = p.waterline(view)
                column = MARKED[view]
                if column is None:
                    assert marks == {}, view
                    live = expected
                elif column in marks:
                    live = expected.filter(pl.col(column) >= marks[column])
                else:  # no waterline yet (a table it reads has none): everything is live
                    assert not set(READS.get(view, "e")) <= set(model.waterline), (view, marks)
                    live = expected
                differ = compare_frames(view_frame(p.view(view)), live, f"{view}: its live rows")
                assert differ is None, differ
            bucket = model.waterline.get("e")
            if bucket is not None:
                start = T0.replace(minute=0) + (bucket - T0.replace(minute=0)) // dt.timedelta(minutes=5) * (
                    dt.timedelta(minutes=5)
                )
                assert p.waterline("tum")["window_start"] == start
    finally:
        p.close()


def test_a_join_on_a_time_range_collects_only_what_no_later_row_reaches(engine):
    """e ⋈ f on f.ts in [e.ts - 1 min, e.ts + 3 min]: after f's waterline reaches T+6, an e row at T+4 still
    joins a later f row at T+7 (kept: e rows are collected below f's waterline less 3 minutes), one at
    T+2 is collected; f rows are collected below e's waterline less a minute."""
    at = [T0 + dt.timedelta(minutes=m) for m in range(20)]
    query = VIEWS["ij"][0]
    p = pipeline_on(engine)
    con = duckdb.connect()
    try:
        p.sql(TABLES + f"CREATE VIEW ij AS {query};")
        con.execute("CREATE TABLE e (id BIGINT, k VARCHAR, ts TIMESTAMP, v INTEGER)")
        con.execute("CREATE TABLE f (k VARCHAR, ts TIMESTAMP, u INTEGER)")
        steps = [
            ([(1, "a", at[4], 0), (2, "a", at[2], 0)], [("a", at[10], 1)]),
            ([], [("b", at[9], 9)]),  # (z^-1 of an integral shows a collection a step later)
            ([], [("a", at[7], 2), ("a", at[6], 3)]),
            ([(3, "a", at[12], 0)], [("a", at[14], 4)]),
        ]
        for e_rows, f_rows in steps:
            for table, rows in (("e", e_rows), ("f", f_rows)):
                if rows:
                    p.insert(table, rows)
                    con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
            p.step()
            differ = compare_frames(view_frame(p.view("ij")), con.sql(query).pl(), "ij")
            assert differ is None, differ
        assert sorted(r[2] for r in view_frame(p.view("ij")).rows()) == [2, 3, 4]
        assert p.state_rows() < 2 * (3 + 4) + 3 * 3  # the e row at T+2 and the f rows before T+11 are gone
    finally:
        p.close()


def test_waterlines_and_collected_state_survive_a_restart(engine, tmp_path):
    """A pipeline reopened on its directory resumes with its waterlines, late-row counts and collected
    state: a row late before the restart is late after it, and the windows go on as in one run."""
    ddl_text = TABLES + "CREATE VIEW tum AS " + VIEWS["tum"][0] + ";"
    at = [T0 + dt.timedelta(minutes=m) for m in range(40)]
    batches = [
        [(1, "a", at[20], 1), (2, "a", at[3], 2)],
        [(3, "b", at[25], 3), (4, "a", at[8], 4)],  # at[8] is late: the waterline is at[10]
        [(5, "a", at[14], 5), (6, "b", at[35], 6)],  # at[14] is late (at[15]) only if it is restored
    ]
    one = pipeline_on(engine, tmp_path / "one")
    try:
        one.sql(ddl_text)
        for b in batches:
            one.insert("e", b)
            one.step()
        expected = sorted(view_frame(one.view("tum")).rows())
        expected_late, expected_rows = one.late_rows, one.state_rows()
    finally:
        one.close()
    two = pipeline_on(engine, tmp_path / "two")
    try:
        two.sql(ddl_text)
        two.insert("e", batches[0])
        two.step()
    finally:
        two.close()
    for b in batches[1:]:
        again = pipeline_on(engine, tmp_path / "two")
        try:
            again.sql(ddl_text)
            again.insert("e", b)
            again.step()
        finally:
            again.close()
    again = pipeline_on(engine, tmp_path / "two")
    try:
        again.sql(ddl_text)
        assert sorted(view_frame(again.view("tum")).rows()) == expected
        assert again.late_rows == expected_late == {"e": 2}
        assert again.waterline("e") == {"ts": at[25]}
        assert again.state_rows() == expected_rows
    finally:
        again.close()


def test_unique_indexes_on_the_lateness_column_are_collected_and_still_checked(engine):
    p = pipeline_on(engine)
    try:
        p.sql(
            "CREATE TABLE e (id BIGINT, ts TIMESTAMP, UNIQUE (id, ts), UNIQUE (ts, id)) "
            "WITH (lateness_column = ts, lateness = INTERVAL '1 minute'); "
            "CREATE VIEW n AS SELECT COUNT(*) AS c FROM e;"
        )
        for m in range(10):
            p.insert("e", [(i, T0 + dt.timedelta(minutes=m)) for i in range(20)])
            p.step()
        held = p.state_rows()  # the table's check and its two UNIQUE indexes: two minutes of rows each
        assert held <= 3 * 2 * 20 + 10, held
        p.insert("e", [(3, T0 + dt.timedelta(minutes=9))])  # on time, and a duplicate of a live row
        with pytest.raises(DataError, match="UNIQUE"):
            p.step()
        assert view_frame(p.view("n")).rows() == [(200, 1)]
    finally:
        p.close()


def test_late_rows_rejected_with_their_values(engine):
    p = pipeline_on(engine)
    try:
        p.sql(
            "CREATE TABLE e (k VARCHAR, ts TIMESTAMP) WITH (lateness_column = ts, lateness = INTERVAL '1 minute', "
            "late_rows = 'error'); CREATE VIEW n AS SELECT k, COUNT(*) AS c FROM e GROUP BY k;"
        )
        p.insert("e", [("a", T0 + dt.timedelta(minutes=10))])
        p.step()
        p.insert("e", [("b", T0 + dt.timedelta(minutes=9, seconds=30)), ("c", T0)])
        with pytest.raises(
            DataError, match=r"table 'e': a late row, ts = 2024-03-05 10:00:00 is below the waterline"
        ):
            p.step()
        assert sorted(view_frame(p.view("n")).rows()) == [("a", 1, 1)]  # nothing of the step applied
        assert p.waterline("e") == {"ts": T0 + dt.timedelta(minutes=9)}
    finally:
        p.close()


def test_numeric_lateness_and_keyed_tables():
    p = pipeline_on("local")
    try:
        p.sql(
            "CREATE TABLE e (seq BIGINT, x INTEGER, PRIMARY KEY (seq)) WITH (lateness_column = seq, lateness = 5);"
            "CREATE VIEW b AS SELECT seq // 10 AS bucket, SUM(x) AS s FROM e GROUP BY ALL;"
        )
        p.insert("e", [(i, 1) for i in range(30)])
        p.step()
        p.insert("e", [(3, 7), (26, 2), (40, 1)])  # 3 is late; 26 replaces its row
        p.step()
        assert p.late_rows == {"e": 1}
        assert p.waterline("e") == {"seq": 35} and p.waterline("b") == {"bucket": 3}
        assert sorted(view_frame(p.view("b")).rows()) == [(4, 1, 1)]
    finally:
        p.close()


@pytest.mark.parametrize(
    "options, error, message",
    [
        ("lateness_column = ts", SchemaError, "lateness_column and lateness go together"),
        ("lateness_column = ts, lateness = 5", SchemaError, "the lateness of column ts is an INTERVAL"),
        (
            "lateness_column = x, lateness = INTERVAL '1 minute'",
            SchemaError,
            "the lateness of column x is a number",
        ),
        ("lateness_column = ts, lateness = INTERVAL '1 month'", Exception, "a lateness of months"),
        ("lateness_column = zz, lateness = 1", Exception, "lateness column zz is not a column of table t"),
        (
            "lateness_column = ts, lateness = INTERVAL '1 hour', late_rows = 'keep'",
            SchemaError,
            "'drop' or 'error'",
        ),
        ("compression = 'zstd'", Exception, "table option compression"),
        ("lateness_column = k, lateness = 3", CircuitError, "must be a TIMESTAMP, DATE or numeric column"),
    ],
)
def test_lateness_declaration_errors(options, error, message):
    p = pipeline_on("local")
    try:
        with pytest.raises(error, match=message):
            p.sql(f"CREATE TABLE t (k VARCHAR, ts TIMESTAMP, x INTEGER) WITH ({options});")
        with pytest.raises(CircuitError, match="takes a lateness on a key column only"):
            p.sql(
                "CREATE TABLE u (id INTEGER PRIMARY KEY, ts TIMESTAMP) WITH (lateness_column = ts, "
                "lateness = INTERVAL '1 minute');"
            )
    finally:
        p.close()


def bounded_run(engine, steps: int, per_step: int, keys: int, spark_frames: bool = False) -> None:
    """`steps` steps of `per_step` events a minute apart (step s covers minute s, with events up to two
    minutes early, some later than the 90 s lateness), through tumbling windows and window functions:
    the state, in rows, stays within what a few minutes of events and their windows hold. `spark_frames`: every other step's
    rows pushed as a Spark DataFrame (the change, its late rows and its waterline computed on Spark)."""
    p = pipeline_on(engine)
    rng = random.Random(7)
    try:
        p.sql(
            "CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP) "
            "WITH (lateness_column = ts, lateness = INTERVAL '90 seconds');"
            "CREATE VIEW per_minute AS SELECT window_start, COUNT(*) AS n, SUM(price) AS s "
            "FROM tumble(bids, ts, INTERVAL '1 minute') GROUP BY ALL;"
            "CREATE VIEW per_auction AS SELECT window_start, auction, MAX(price) AS top, COUNT(*) AS n "
            "FROM tumble(bids, ts, INTERVAL '1 minute') GROUP BY ALL;"
            "CREATE VIEW auctions_seen AS SELECT DISTINCT time_bucket(INTERVAL '1 minute', ts) AS m, auction FROM bids;"
            "CREATE VIEW running AS SELECT auction, ts, price, SUM(price) OVER (PARTITION BY auction ORDER BY ts) "
            "AS rs, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY ts, price) AS rn FROM bids;"
        )
        # (the window functions: two windows' rows and the view's, each within four minutes of events,
        # and their totals per auction)
        bound = 6 * per_step + 4 * 6 * (keys + 1) + 3 * 4 * per_step + 2 * (keys + 1)
        counted = 0
        for s in range(steps):
            us = [rng.randrange(-120_000_000, 60_000_000) for _ in range(per_step)]
            rows = pl.DataFrame(
                {
                    "auction": [rng.randrange(keys) for _ in range(per_step)],
                    "price": [rng.randrange(1000) for _ in range(per_step)],
                    "ts": [T0 + dt.timedelta(minutes=s, microseconds=u) for u in us],
                }
            )
            p.insert(
                "bids", engine.spark.createDataFrame(rows.to_pandas()) if spark_frames and s % 2 else rows
            )
            changes = p.step()
            change = view_frame(changes["per_minute"])
            counted += int((change["n"] * change["__w"]).sum())
            held = p.state_rows()
            assert held <= bound, f"step {s + 1}: the state holds {held:,} rows, more than {bound:,}"
        assert counted == steps * per_step - p.late_rows.get("bids", 0)  # every on-time bid counted once
        assert p.late_rows.get("bids", 0) > 0
    finally:
        p.close()


def test_state_stays_bounded_over_half_a_million_events():
    bounded_run("local", steps=50, per_step=10_000, keys=50)


@pytest.mark.spark
@pytest.mark.parametrize("in_driver", [True, False], ids=["drops-in-driver", "drops-in-a-job"])
def test_state_stays_bounded_on_spark(spark_engine, in_driver, monkeypatch):
    from dbspark.engines.spark.kernel import SparkKernel

    init = SparkKernel.__init__

    def kernel(self, *args, **kw):
        init(self, *args, **kw)
        self.drops_in_driver = in_driver

    monkeypatch.setattr(SparkKernel, "__init__", kernel)
    bounded_run(spark_engine, steps=8, per_step=2_000, keys=20, spark_frames=True)
