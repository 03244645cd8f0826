"""Crash torture: a pipeline killed again and again must finish with every view right and every step's
output written exactly once.

    python -m dbspark.testing.torture --engine local --kills 100 --seed 7 [--workdir DIR]

The pipeline (`SQL`: a join with GROUP BY, a top-k, a recursive view, a DISTINCT, over a keyed table
and two bags, DECIMAL money) runs through the `dbspark run` CLI over a directory of random change
batches (inserts, deletes, a keyed table's replacements), with a state directory and an output
directory. Each round starts the CLI and SIGKILLs it, either at a random moment or at a random
passing of one of `dbspark.faults.POINTS` (inside a step, between a step's outputs and its commit,
inside a trace merge, between a checkpoint's frames and its manifest, between the manifest's write
and its rename), and starts it again; frames are all files (`DBSPARK_CHECKPOINT_FRAME_ROWS=1`), so
that checkpoints write several files per step. After the rounds the CLI runs to the end, and:

- every step's output file exists once per view, and nothing else is in the output directory;
- the changes of each view summed over the steps' files equal the view computed by DuckDB from the
  tables' final contents (a step written twice, or lost, or a wrong state, breaks the sum).

Each round first adds one to three steps of changes, so that every round has steps to run. A round
whose CLI fails other than by the kill fails the run (with its stderr). The result says how many kills
landed (a round may finish its steps before its kill comes), and how many at each point.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from dbspark.faults import POINTS

SQL = """
CREATE TABLE customers (cust BIGINT PRIMARY KEY, region VARCHAR);
CREATE TABLE orders (o_id BIGINT, cust BIGINT, total DECIMAL(12, 2));
CREATE TABLE edges (a BIGINT, b BIGINT);
CREATE VIEW revenue AS
  SELECT c.region, COUNT(*) AS n, SUM(o.total) AS revenue
  FROM orders o JOIN customers c ON o.cust = c.cust GROUP BY c.region;
CREATE VIEW largest AS SELECT o_id, total FROM orders ORDER BY total DESC, o_id LIMIT 3;
CREATE VIEW reach AS
  WITH RECURSIVE r(x, y) AS (SELECT a, b FROM edges UNION SELECT r.x, e.b FROM r JOIN edges e ON r.y = e.a)
  SELECT x, y FROM r;
CREATE VIEW spenders AS SELECT DISTINCT cust FROM orders WHERE total > 500;
"""
VIEWS = ("revenue", "largest", "reach", "spenders")
REGIONS = ("EU", "US", "APAC")


@dataclass
class Tables:
    """The tables' contents as the generated changes leave them."""

    customers: dict[int, str] = field(default_factory=dict)
    orders: dict[int, tuple[int, str]] = field(default_factory=dict)  # o_id -> (cust, total)
    edges: Counter = field(default_factory=Counter)


class Changes:
    """Random change batches for `SQL`, written one step at a time (CSV with an `op` column), and the
    tables' contents they leave."""

    def __init__(self, directory: Path, seed: int) -> None:
        self.directory = directory
        self.rng = random.Random(seed)
        self.tables = Tables()
        self.steps = 0
        self._next_order = 1

    def write(self, n: int = 1) -> None:
        """Write the next `n` steps' batches."""
        for _ in range(n):
            self._step()

    def _step(self) -> None:
        rng, t = self.rng, self.tables
        self.steps += 1
        first = self.steps == 1
        d = self.directory / f"step-{self.steps:04d}"
        d.mkdir(parents=True)
        cust = []
        for c in rng.sample(range(1, 9), rng.randint(4 if first else 0, 6 if first else 2)):
            region = rng.choice(REGIONS)  # a new customer, or a replacement of its row
            t.customers[c] = region
            cust.append((c, region, "insert"))
        orders = []
        for _ in range(rng.randint(0, 6)):
            row = (self._next_order, rng.randint(1, 8), f"{rng.randint(0, 999)}.{rng.randint(0, 99):02d}")
            t.orders[self._next_order] = row[1:]
            orders.append((*row, "insert"))
            self._next_order += 1
        for o in rng.sample(sorted(t.orders), min(len(t.orders), rng.randint(0, 3))):
            orders.append((o, *t.orders.pop(o), "delete"))
        edges = []
        for _ in range(rng.randint(0, 3)):
            e = (rng.randint(1, 7), rng.randint(1, 7))
            t.edges[e] += 1
            edges.append((*e, "insert"))
        for e in rng.sample(sorted(t.edges.elements()), min(sum(t.edges.values()), rng.randint(0, 2))):
            t.edges[e] -= 1
            edges.append((*e, "delete"))
        t.edges = +t.edges
        for name, rows, cols in (
            ("customers", cust, ["cust", "region", "op"]),
            ("orders", orders, ["o_id", "cust", "total", "op"]),
            ("edges", edges, ["a", "b", "op"]),
        ):
            if rows:
                pl.DataFrame(rows, schema=cols, orient="row").write_csv(d / f"{name}.csv")


def oracle(t: Tables) -> dict[str, Counter]:
    """Each view over the tables' final contents, computed by DuckDB from `SQL`."""
    import duckdb

    con = duckdb.connect()
    con.execute(SQL)
    if t.customers:
        con.executemany("INSERT INTO customers VALUES (?, ?)", list(t.customers.items()))
    if t.orders:
        con.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(o, c, x) for o, (c, x) in t.orders.items()])
    if t.edges:
        con.executemany("INSERT INTO edges VALUES (?, ?)", list(t.edges.elements()))
    return {v: Counter(_canon(r) for r in con.execute(f"SELECT * FROM {v}").fetchall()) for v in VIEWS}


def _canon(row: tuple) -> tuple:
    return tuple(str(x) for x in row)


def outputs(out: Path, steps: int) -> dict[str, Counter]:
    """Each view's changes summed over its steps' output files, after checking that there is exactly
    one file per step and view, and nothing else."""
    found = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
    want = sorted(f"{v}/step-{s:08d}.parquet" for v in VIEWS for s in range(1, steps + 1))
    if found != want:
        extra, missing = sorted(set(found) - set(want)), sorted(set(want) - set(found))
        raise AssertionError(f"output files: extra {extra[:10]}, missing {missing[:10]}")
    sums: dict[str, Counter] = {}
    for v in VIEWS:
        c: Counter = Counter()
        for s in range(1, steps + 1):
            for r in pl.read_parquet(out / v / f"step-{s:08d}.parquet").iter_rows():
                c[_canon(r[:-1])] += r[-1]
        sums[v] = Counter({k: w for k, w in c.items() if w})
    return sums


@dataclass
class Result:
    engine: str
    steps: int
    rounds: int
    kills: int = 0
    at: Counter = field(default_factory=Counter)  # kills by where: a fault point, or "random moment"

    def __str__(self) -> str:
        where = ", ".join(f"{k} {n}" for k, n in sorted(self.at.items()))
        return (
            f"{self.engine}: {self.kills} kills survived in {self.rounds} rounds over {self.steps} steps "
            f"({where}); every view equal to DuckDB's, every step's output written once"
        )


def torture(workdir: Path, engine: str = "local", kills: int = 10, seed: int = 0) -> Result:
    """Run the pipeline through `kills` rounds of SIGKILL, then to its end, and check it (see the
    module's docstring). Each round first adds one to three steps of changes, so that every round has
    steps to run and to be killed in."""
    rng = random.Random(seed)
    changes = Changes(workdir / "changes", seed)
    state, out = workdir / "state", workdir / "out"
    (workdir / "pipeline.sql").write_text(SQL)
    args = [
        sys.executable, "-m", "dbspark.cli", "run", str(workdir / "pipeline.sql"), "--changes",
        str(changes.directory), "--state", str(state), "--output", str(out), "--show", "0", "--engine", engine,
    ]  # fmt: skip
    if engine == "spark":
        args += ["--master", "local[2]"]
    env = {**os.environ, "DBSPARK_CHECKPOINT_FRAME_ROWS": "1"}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    result = Result(engine, 0, 0)
    start = 6.0 if engine == "spark" else 1.5  # about how long the CLI takes to reach its first step
    changes.write(2)
    while result.kills < kills and result.rounds < 3 * kills + 10:
        result.rounds += 1
        changes.write(rng.randint(1, 3))
        where = rng.choice([*POINTS, "random moment", "random moment"])
        e = dict(env)
        if where != "random moment":
            e["DBSPARK_KILL_AT"] = f"{where}:{rng.randint(1, 3)}"
        proc = subprocess.Popen(args, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if where == "random moment":
            time.sleep(rng.uniform(0.5 * start, start + 1.5))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=1800)
        if proc.returncode == -signal.SIGKILL:
            result.kills += 1
            result.at[where] += 1
        elif proc.returncode != 0:
            raise AssertionError(f"round {result.rounds} ({where}) failed with {proc.returncode}:\n{err}")
    final = subprocess.run(args, env=env, capture_output=True, text=True, timeout=3600)
    if final.returncode != 0:
        raise AssertionError(f"the last run failed with {final.returncode}:\n{final.stderr}")
    result.steps = changes.steps
    got, want = outputs(out, changes.steps), oracle(changes.tables)
    for v in VIEWS:
        if got[v] != want[v]:
            raise AssertionError(f"view {v}: dbspark {dict(got[v])} != DuckDB {dict(want[v])}")
    return result


def main(argv: list[str] | None = None) -> Any:
    ap = argparse.ArgumentParser(prog="python -m dbspark.testing.torture", description=__doc__.split("\n")[0])
    ap.add_argument("--engine", choices=["local", "spark"], default="local")
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=None, help="(default: a fresh one, printed)")
    ap.add_argument("--workdir", type=Path, default=None, help="(default: a temporary directory, removed)")
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(10**6)
    print(f"torture: engine {a.engine}, {a.kills} kills, seed {seed}", flush=True)
    began = time.perf_counter()
    if a.workdir is not None:
        a.workdir.mkdir(parents=True, exist_ok=True)
        result = torture(a.workdir, a.engine, a.kills, seed)
    else:
        with tempfile.TemporaryDirectory() as d:
            result = torture(Path(d), a.engine, a.kills, seed)
    print(f"{result} ({time.perf_counter() - began:.0f} s)")
    return result


if __name__ == "__main__":
    main()
