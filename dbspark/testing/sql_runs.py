"""Runs of generated SQL cases (`sql_strategies.Case`) against DuckDB: a pipeline steps through a case's
changes, and after every step each view equals DuckDB's answer over the current tables
(`sql_oracle.SqlOracle`); a step DuckDB cannot answer (an error, a value outside BIGINT) must be
rejected whole. Used by `tests/test_sql_oracle.py`, the fuzzer (`dbspark.testing.fuzz`) and the
regression tests it writes.

* ORDER BY ... LIMIT: DuckDB's query carries the front end's tie rule, so its top k is unique.
* MODE: DuckDB picks any of tied values, so the view's MODE must be one of the values of greatest count
  in its group (NULL when the group has none), its other columns equal to DuckDB's.
* INTERSECT ALL / EXCEPT ALL are unsupported by the front end: a view using them must raise
  UnsupportedError naming the construct (and, once supported, must equal DuckDB like any other).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import duckdb
import polars as pl
from hypothesis import note, reject
from hypothesis.control import currently_in_test_context

import dbspark
from dbspark.errors import DbsparkError, UnsupportedError
from dbspark.testing.sql_oracle import OracleUnavailable, SqlOracle, compare_frames, expand, view_frame
from dbspark.testing.sql_strategies import Case, Step, View

DUCK_ERRORS = (duckdb.OutOfRangeException, duckdb.ConversionException, duckdb.InvalidInputException)
INT64 = (-(2**63), 2**63 - 1)
UNSUPPORTED_ALL = ("INTERSECT ALL", "EXCEPT ALL")


def _note(text: str) -> None:
    """Hypothesis's `note` inside a Hypothesis test (shown with a failing example), else nothing."""
    if currently_in_test_context():
        note(text)


def local() -> dbspark.Pipeline:
    return dbspark.Pipeline(engine="local")


def supported_views(case: Case, make: Callable[[], dbspark.Pipeline]) -> Case:
    """The case without views using INTERSECT ALL / EXCEPT ALL that the front end rejects, after checking
    that it rejects them with an UnsupportedError naming the construct."""
    keep = []
    for v in case.views:
        used = [w for w in UNSUPPORTED_ALL if w in v.sql]
        if not used:
            keep.append(v)
            continue
        p = make()
        try:
            p.sql(f"{case.schema.ddl()}\nCREATE VIEW {v.name} AS {v.sql};")
        except UnsupportedError as e:
            assert any(w in str(e) for w in used), f"the error for {v.sql!r} names none of {used}: {e}"
            continue
        finally:
            p.close()
        keep.append(v)  # supported now: checked like any other view
    return Case(case.schema, tuple(keep), case.steps)


def expected_error(o: SqlOracle, views: tuple[View, ...]) -> str | None:
    """Why DuckDB's answers on the current tables cannot be a view's contents (an error, or a HUGEINT
    value outside BIGINT), or None."""
    for v in views:
        for sql in [v.duck, v.mode] if v.mode else [f'SELECT * FROM "{v.name}"']:
            try:
                df = o.query(sql)
            except DUCK_ERRORS as e:
                return f"{v.name}: {e}"
            several = several_rows_unoptimized(o, sql)
            if several is not None:
                return f"{v.name}: {several}"
            for c, t in df.schema.items():  # HUGEINT (SUM of BIGINT) arrives as DECIMAL(38, 0)
                if (t == pl.Int128 or (isinstance(t, pl.Decimal) and t.scale == 0)) and any(
                    not INT64[0] <= x <= INT64[1] for x in df[c].drop_nulls().to_list()
                ):
                    return f"{v.name}: column {c} does not fit BIGINT (DuckDB: HUGEINT)"
    return None


def several_rows_unoptimized(o: SqlOracle, sql: str) -> str | None:
    """DuckDB's scalar-subquery error of `sql` when its optimizer is off, or None.

    A scalar subquery returning several rows is an error when DuckDB evaluates it, and dbspark rejects
    such a step whatever the outer rows; DuckDB's optimizer skips the subquery where it proves the outer
    rows empty (a WHERE that folds to false, `c BETWEEN '2022-06-15' AND '2020-01-31'`), which no
    incremental plan can: the oracle is DuckDB's semantics, its unoptimized plan."""
    o.con.execute("PRAGMA disable_optimizer")
    try:
        o.query(sql)
    except DUCK_ERRORS as e:
        return str(e) if "More than one row returned by a subquery" in str(e) else None
    finally:
        o.con.execute("PRAGMA enable_optimizer")
    return None


def check_mode(o: SqlOracle, p: dbspark.Pipeline, v: View, what: str) -> None:
    """A MODE view: its other columns equal DuckDB's; its MODE is a most frequent value of its group."""
    got = expand(view_frame(p.view(v.name)), f"view {v.name}")
    msg = compare_frames(got.drop("mo"), o.query(v.duck), f"view {v.name} {what} (without mo)")
    assert msg is None, msg
    allowed: dict[Any, set] = {}
    for g, x in o.query(v.mode).rows():
        allowed.setdefault(g, set()).add(x)
    for row in got.iter_rows(named=True):
        ok = allowed.get(row.get("g", 0), set())
        assert (row["mo"] in ok) if ok else row["mo"] is None, (
            f"view {v.name} {what}: MODE {row['mo']!r} of group {row.get('g', 0)!r}; most frequent: {sorted(ok, key=repr)}"
        )


def snapshot(o: SqlOracle) -> None:
    for t in o.tables:
        o.con.execute(f'CREATE OR REPLACE TEMP TABLE "__snap_{t}" AS SELECT * FROM "{t}"')


def restore(o: SqlOracle) -> None:
    for t in o.tables:
        o.con.execute(f'DELETE FROM "{t}"; INSERT INTO "{t}" SELECT * FROM "__snap_{t}"')


def check_all(o: SqlOracle, p: dbspark.Pipeline, case: Case, what: str) -> None:
    o.check(p, [v.name for v in case.views if not v.mode], what)
    for v in case.views:
        if v.mode:
            check_mode(o, p, v, what)


def queue_step(
    o: SqlOracle,
    p: dbspark.Pipeline,
    step: Step,
    present: dict[str, Counter],
    i: int,
    views: tuple[View, ...],
) -> tuple[str | None, dict[str, list[tuple]]]:
    """Queue step i on the pipeline and the oracle: its deletes of rows present (a rejected earlier step
    may have left out some the stream expects) and its inserts; returns (why, the deletes queued). If
    DuckDB cannot answer `views` then, the step must be rejected: it is run here, checked rejected, the
    oracle put back, and DuckDB's reason is `why`; else `why` is None (the caller runs the step)."""
    dels = {}
    for t, rows in step.deletes.items():
        have = Counter(present[t])
        dels[t] = [r for r in rows if have[r] > 0 and not have.subtract([r])]
    _note(f"step {i}: deletes {dels}, inserts {step.inserts}")
    snapshot(o)
    for t, rows in dels.items():
        if rows:
            p.delete(t, rows)
            o.delete(t, rows)
    for t, rows in step.inserts.items():
        p.insert(t, rows)
        o.insert(t, rows)
    err = expected_error(o, views)
    if err is None:
        return None, dels
    _note(f"step {i}: DuckDB: {err}")
    try:
        p.step()
    except DbsparkError:
        pass
    else:
        raise AssertionError(f"step {i}: DuckDB cannot answer ({err}), but dbspark applied the step")
    restore(o)
    return err, dels


def record_step(present: dict[str, Counter], step: Step, dels: dict[str, list[tuple]]) -> None:
    """The rows present after a step that `queue_step` queued (with `dels`) and that was applied."""
    for t, rows in dels.items():
        present[t].subtract(rows)
    for t, rows in step.inserts.items():
        present[t].update(rows)


def run_case(case: Case, make: Callable[[], dbspark.Pipeline] = local, joins: str = "auto") -> None:
    """Step a pipeline of the case's views through its changes; after each step the views equal DuckDB.
    `joins`: the plan of cyclic inner joins (`Pipeline.sql`)."""
    case = supported_views(case, make)
    if not case.views:
        return
    _note(case.ddl())
    p = make()
    try:
        p.sql(case.ddl(), joins=joins)
        o = SqlOracle(case.ddl(oracle=True))
        present: dict[str, Counter] = {t.name: Counter() for t in case.schema.tables}
        for i, step in enumerate(case.steps):
            err, dels = queue_step(o, p, step, present, i, case.views)
            if err is not None:
                check_all(o, p, case, f"after the rejected step {i}")
                continue
            p.step()
            record_step(present, step, dels)
            check_all(o, p, case, f"after step {i}")
    except OracleUnavailable as e:  # (DuckDB's own assertion: the case is drawn again, not passed)
        reject_case(str(e))
    finally:
        p.close()


def reject_case(why: str) -> None:
    """Under Hypothesis, the drawn case is rejected (another is drawn); run directly, an error naming why."""
    if currently_in_test_context():
        reject()
    raise AssertionError(f"the oracle cannot answer this case: {why}")
