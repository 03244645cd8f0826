"""Runs of generated SQL cases whose views come and go while the pipeline runs, against DuckDB.

A `Plan` says, for each view of a case (`sql_strategies.Case`), before which step it is declared and
before which it is dropped, and before which steps a durable pipeline is closed and opened again. At
a boundary without a restart the views are dropped (`DROP VIEW`) and added (`CREATE VIEW`) on the
running pipeline, which backfills the new ones; at a restart the pipeline is opened on its directory
with a definition that has gained and lost those views. After every change of the views and every step,
each declared view equals DuckDB's query over the current tables; a view DuckDB cannot answer on them
(an error) must be refused when it is added. At the end, each view's changes since it was declared,
summed, equal its contents (a new view's first change holds what it was backfilled with).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

import dbspark
from dbspark.errors import DbsparkError
from dbspark.testing.sql_oracle import WEIGHT, SqlOracle, compare_frames, expand, view_frame
from dbspark.testing.sql_runs import _note, check_mode, expected_error, queue_step, record_step
from dbspark.testing.sql_strategies import Case, View


@dataclass(frozen=True)
class Plan:
    """`adds[i]` / `drops[i]`: the boundary (0 = before the first step, k = before step k, the number of
    steps = after the last) at which view i is declared / dropped (None: never); `restarts`: the
    boundaries at which the pipeline is closed and opened again (a durable pipeline only)."""

    adds: tuple[int, ...]
    drops: tuple[int | None, ...]
    restarts: frozenset[int] = field(default_factory=frozenset)


Make = Callable[[Path | None], dbspark.Pipeline]


def _ddl(case: Case, views: list[View]) -> str:
    return "\n".join([case.schema.ddl(), *(f"CREATE VIEW {v.name} AS {v.sql};" for v in views)])


def _changes(frame: pl.DataFrame | None, change: Any) -> pl.DataFrame:
    """`frame` (a view's changes so far, summed) plus a step's change, consolidated."""
    df = view_frame(change)
    both = df if frame is None else pl.concat([frame, df.cast(frame.schema)], how="vertical_relaxed")
    cols = [c for c in both.columns if c != WEIGHT]
    return both.group_by(cols, maintain_order=True).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) != 0)


def run_evolving(case: Case, plan: Plan, make: Make, directory: Path | None = None) -> None:
    """Run `case` with its views declared and dropped as `plan` says (see the module's docstring)."""
    views = {v.name: v for v in case.views}
    o = SqlOracle(case.ddl(oracle=True))
    n = len(case.steps)
    declared = [v for v, at in zip(case.views, plan.adds, strict=True) if at == 0]
    sums: dict[str, pl.DataFrame | None] = {v.name: None for v in declared}
    p = make(directory)
    p.sql(_ddl(case, []))
    for v in declared:
        _add(p, o, v)
    present: dict[str, Counter] = {t.name: Counter() for t in case.schema.tables}
    try:
        for b in range(n + 1):
            going = [v for v, at in zip(case.views, plan.drops, strict=True) if at == b and v in declared]
            coming = [v for v, at in zip(case.views, plan.adds, strict=True) if at == b and b > 0]
            if b in plan.restarts and b > 0:
                p.close()
                kept = [v for v in declared if v not in going]
                ok = [v for v in coming if expected_error(o, (v,)) is None]
                _note(f"boundary {b}: reopened with {[v.name for v in kept + ok]}")
                p = make(directory)
                p.sql(_ddl(case, kept + ok))
                declared = kept + ok
                for v in going:
                    sums.pop(v.name, None)
                for v in ok:
                    sums[v.name] = None
            else:
                for v in going:
                    _note(f"boundary {b}: DROP VIEW {v.name}")
                    p.sql(f"DROP VIEW {v.name};")
                    declared.remove(v)
                    sums.pop(v.name)
                for v in coming:
                    if _add(p, o, v):
                        declared.append(v)
                        sums[v.name] = None
            _check(o, p, declared, f"at boundary {b}")
            if b == n:
                break
            step = case.steps[b]
            err, dels = queue_step(o, p, step, present, b, tuple(declared))
            if err is not None:
                _check(o, p, declared, f"after the rejected step {b}")
                continue
            changes = p.step()
            record_step(present, step, dels)
            for v in declared:
                sums[v.name] = _changes(sums[v.name], changes[v.name])
            _check(o, p, declared, f"after step {b}")
        for name, total in sums.items():
            if total is None:
                continue
            got = expand(view_frame(p.view(name)), f"view {name}")
            msg = compare_frames(expand(total, f"changes of {name}"), got, f"view {name}'s changes summed")
            assert msg is None, msg
        assert sorted(p.views) == sorted(v.name for v in declared), (p.views, declared)
        assert all(v in views for v in p.views)
    finally:
        p.close()


def _add(p: dbspark.Pipeline, o: SqlOracle, v: View) -> bool:
    """Declare `v` (its backfill at once); refused exactly when DuckDB cannot answer it now."""
    err = expected_error(o, (v,))
    _note(f"CREATE VIEW {v.name} AS {v.sql}" + (f" (DuckDB: {err})" if err else ""))
    try:
        p.sql(f"CREATE VIEW {v.name} AS {v.sql};")
    except DbsparkError:
        if err is None:
            raise
        assert v.name not in p.views, f"a refused view {v.name} is declared"
        return False
    assert err is None, f"DuckDB cannot answer {v.name} ({err}), but dbspark declared it"
    return True


def _check(o: SqlOracle, p: dbspark.Pipeline, declared: list[View], what: str) -> None:
    o.check(p, [v.name for v in declared if not v.mode], what)
    for v in declared:
        if v.mode:
            check_mode(o, p, v, what)
