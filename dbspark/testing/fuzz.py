"""Differential fuzzing of the SQL front end against DuckDB.

    python -m dbspark.testing.fuzz --cases 10000 --engine local [--seed S] [--out DIR] [--minutes M]
        [--families F,...] [--joins auto|leapfrog|binary|sensitivity|indexed]

Each case is a generated schema (two or three tables of BIGINT, DOUBLE, DECIMAL, VARCHAR, DATE,
TIMESTAMP, TIMESTAMPTZ, BOOLEAN columns with NULLs), one to three views of one family of the SQL
surface (selections, expressions, aggregates, MODE, joins of every kind, subqueries, set operations,
top-k, CTEs, recursion, wide DECIMALs and dates, BIGINT overflow) or a mix of them, and a change stream
with deletes, duplicates, NULLs and extreme values (`dbspark.testing.sql_strategies`). A pipeline on the
engine steps through it and every view is compared with DuckDB's answer after every step
(`dbspark.testing.sql_runs.run_case`); a step DuckDB cannot answer must be rejected whole. `--joins`
picks the plan of cyclic inner joins (`Pipeline.sql`'s `joins`: the `cyclic` family's subject).

A mismatch is shrunk by Hypothesis to a minimal case, which is written to `DIR` as a ready-to-paste
regression test (`test_fuzz_<seed>.py`) and printed; the exit status is then 1. The seed is printed
first (a fresh one unless given), so that any run can be repeated.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import dbspark
from dbspark.frontends.sql.multiway import JOIN_PLANS
from dbspark.testing.sql_runs import run_case
from dbspark.testing.sql_strategies import FAMILIES, Case, cases

REGRESSION = '''"""A case `python -m dbspark.testing.fuzz --engine {engine} --seed {seed} --joins {joins}` found: {what}."""

import datetime
from decimal import Decimal

from dbspark.testing.sql_runs import run_case
from dbspark.testing.sql_strategies import Case, Column, Schema, Step, Table, View

CASE = {case}


def test_fuzz_{seed}() -> None:
    run_case(CASE, joins="{joins}")
'''


@dataclass
class Result:
    engine: str
    seed: int
    cases: int = 0
    families: Counter = field(default_factory=Counter)
    failure: str | None = None
    regression: Path | None = None

    def __str__(self) -> str:
        if self.failure is None:
            return f"{self.engine}, seed {self.seed}: {self.cases} cases, 0 mismatches"
        return (
            f"{self.engine}, seed {self.seed}: a mismatch after {self.cases} cases: {self.failure}\n"
            f"the minimal case, as a test: {self.regression}"
        )


def fuzz(
    n: int,
    engine: str = "local",
    seed_: int = 0,
    out: Path | None = None,
    spark: Any = None,
    minutes: float = 0,
    families: tuple[str, ...] = (*FAMILIES, "mix"),
    joins: str = "auto",
) -> Result:
    """Run `n` generated cases (or as many as fit in `minutes`, if given) on `engine`, of the `families`;
    see the module."""
    result = Result(engine, seed_)
    if engine == "spark" and spark is None:
        from dbspark.engines.spark.session import get_session

        spark = get_session(master="local[2]").spark  # one session for every case

    def make() -> dbspark.Pipeline:
        if engine == "spark":
            return dbspark.Pipeline(engine="spark", spark=spark)
        return dbspark.Pipeline(engine="local")

    deadline = time.monotonic() + 60 * minutes if minutes else None
    last: list[Case] = []

    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        print_blob=False,
        report_multiple_bugs=False,  # one mismatch at a time: its minimal case is the last one run
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @seed(seed_)
    @given(st.sampled_from(families).flatmap(lambda f: cases(f, max_steps=4).map(lambda c: (f, c))))
    def one(drawn: tuple[str, Case]) -> None:
        family, case = drawn
        if deadline is not None and time.monotonic() > deadline:
            return
        result.cases += 1
        result.families[family] += 1
        try:
            run_case(case, make, joins)
        except BaseException:
            last[:] = [case]  # the last failing case Hypothesis runs is its minimal one
            raise

    try:
        one()
    except Exception as e:
        result.failure = str(e).strip().splitlines()[0][:300]
        target = (out or Path.cwd()) / f"test_fuzz_{seed_}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            REGRESSION.format(engine=engine, seed=seed_, joins=joins, what=result.failure, case=repr(last[0]))
        )
        result.regression = target
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m dbspark.testing.fuzz", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--engine", choices=["local", "spark"], default="local")
    ap.add_argument("--seed", type=int, default=None, help="(default: a fresh one, printed)")
    ap.add_argument("--out", type=Path, default=Path("."), help="where a regression test is written")
    ap.add_argument("--minutes", type=float, default=0, help="stop generating after this long (0: no limit)")
    ap.add_argument(
        "--families", default="", help=f"comma-separated, of {', '.join(FAMILIES)}, mix (default: every one)"
    )
    ap.add_argument("--joins", choices=JOIN_PLANS, default="auto", help="the plan of cyclic inner joins")
    a = ap.parse_args(argv)
    families = tuple(f for f in a.families.split(",") if f) or (*FAMILIES, "mix")
    unknown = [f for f in families if f not in (*FAMILIES, "mix")]
    if unknown:
        ap.error(f"unknown families {unknown}; choose from {', '.join(FAMILIES)}, mix")
    logging.getLogger("sqlglot").setLevel(logging.ERROR)  # (its dialect warnings, once per case)
    s = a.seed if a.seed is not None else random.SystemRandom().randrange(10**9)
    print(f"fuzz: engine {a.engine}, {a.cases} cases, seed {s}, joins {a.joins}", flush=True)
    began = time.perf_counter()
    result = fuzz(a.cases, a.engine, s, a.out, minutes=a.minutes, families=families, joins=a.joins)
    print(f"{result} ({time.perf_counter() - began:.0f} s)")
    print("families: " + ", ".join(f"{f} {k}" for f, k in sorted(result.families.items())))
    return 0 if result.failure is None else 1


if __name__ == "__main__":
    sys.exit(main())
