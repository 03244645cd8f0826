"""spark_scale: the incremental `SELECT g, COUNT(*) FROM R JOIN S USING (k) GROUP BY g` on the spark engine.

One local SparkSession (`local[2]`, 4 shuffle partitions, UI off, 6 GiB driver heap) is created once for
the workload, and every runtime runs on it through `SparkKernel(spark=session)`; an untimed run warms the
JVM up first. The view is built the way the SQL reads:
`R.stream_join(S, on="k").stream_aggregate("g", n="count")`, then `incrementalize()`d.

Data (the shape of `join_groupby`): R(k, g) and S(k, v) hold N rows each, k uniform in [0, N) (so the
join has about N rows), g in [0, 1000). Sizes: full 1M and 5M, --quick 100k and 300k. Each size gets a
fresh runtime on the same session: R and S are loaded in one initial step (not timed), then 1,000-row
changes are timed step by step: 250 inserts of new rows and 250 deletes of existing rows (never deleted
twice) into R, and the same into S. One warm-up step, then 10 timed steps (quick: 3). A step time
covers the two `push`es of Polars frames with a `weight` column and `step()`. Every time is also taken as
CPU time of this process plus Spark's JVM (less sensitive to the shared machine's load).

Two dbspark systems are measured at each size, one after the other on the same session and data:

* **bare circuit** (`BareCircuit`): the circuit above on a `SparkKernel` with a state directory; a step is
  as described above.
* **dbspark pipeline** (`PipelinePath`): the public API as `dbspark run` uses it,
  `dbspark.Pipeline(directory, engine="spark", spark=session)` with the tables and view declared in SQL
  (`PIPELINE_SQL`: `r(k BIGINT, g BIGINT)`, `s(k BIGINT, v BIGINT)`, view `v`). The load pushes Spark
  DataFrames (not timed). A timed step builds Spark DataFrames from the step's four Polars frames with
  `spark.createDataFrame(frame.to_arrow())` (Arrow, no pandas), `p.insert`s the inserts and `p.delete`s
  the deletes of each table, then calls `p.step()`: building the DataFrames is in the step time, as it
  is in a user's. (`dbspark run --output` also writes each view's change as Parquet; no sink is given
  here.) What it does that the bare circuit does not: SQL tables are bags, so each table keeps an
  integral of its own, appended every step with the check that no delete removes an absent row; the
  Spark input frames are coerced and checked inside the plan; every step ends with a checkpoint in the
  directory (both write their state files and the view's change log).

Reported, for each system:

1. the median [min..max] step time at both sizes, and the growth ratio large / small (goal <= 2x);
2. Spark SQL recomputing the view from scratch over the same current tables (written once as Parquet,
   read by Spark, the query run with one `collect`), median of 3, at both sizes; the ratio recompute /
   incremental step at the large size (goal >= 20x). The recomputed view must equal both systems' views
   (`.view("v").to_dict()`) after the measured steps, or the run fails with RESULT MISMATCH;
3. Spark actions per step (`kernel.actions` before / after each step), median and max (goal <= 4), and
   Spark jobs per step.

The bare circuit's figures are where they were in the result (the table's first rows, the top-level keys
of each size and of the result); the pipeline's are in a second table and under `pipeline` (per size and
at the top level), with the pipeline step / bare step ratio.

Always on (cheap): every `kernel.act` call is wrapped to time it and label it with the dbspark functions
that called it (e.g. `SparkTrace._merge`), and each step runs under a Spark job group of its own, so the
status tracker gives its Spark jobs.

`python -m bench.spark_scale --profile [--quick] [--n ROWS] [--steps K] [--system bare|pipeline]
[--conf spark.key=value ...]` goes further on one size (default: the large one) of one system (default:
the bare circuit): Spark's event log gives, per action, its jobs, the time in jobs against the driver's
time between jobs, the executor run time and the rows read from files; py4j round trips are counted;
pyinstrument records the Python side. Output: `results/<date>-spark_scale-profile[-pipeline]-<n>.txt`.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

import dbspark
from bench import harness as h

SEED = 5150
GROUPS = 1000
CHANGE = 1000  # per step: CHANGE // 4 inserts + CHANGE // 4 deletes into R, the same into S
WARMUP = 1
STEPS_FULL, STEPS_QUICK = 10, 3
RECOMPUTE_REPEATS = 3
# An untimed run (rows, steps) first, so that the JVM's JIT and class loading land on no measured size
# (with none, or a 20k-row 3-step one, the first size measured ran 1.3-1.5x slower in its first steps).
# 8 steps include a trace merge, so that code is warm too.
JVM_WARMUP = (100_000, 8)
SIZES_FULL, SIZES_QUICK = (1_000_000, 5_000_000), (100_000, 300_000)
# `SPARK_SCALE_SIZES=1000000,5000000,20000000` measures other sizes (growth: the last over the first)
SIZES_ENV = "SPARK_SCALE_SIZES"
GOAL_GROWTH, GOAL_RECOMPUTE, GOAL_ACTIONS = 2.0, 20.0, 4
SPARK_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "ERROR",
    # local mode runs everything in the driver JVM; the default 1 GiB heap is tight for 5M-row loads
    "spark.driver.memory": os.environ.get("SPARK_SCALE_DRIVER_MEMORY", "6g"),
}
MASTER = "local[2]"
PIPELINE_COLOR = "C9"
VIEW_SQL = "SELECT g, COUNT(*) AS n FROM R JOIN S USING (k) GROUP BY g"
# the pipeline system's declarations: R(k, g) and S(k, v) as the data has them (int64 columns), the same view
PIPELINE_SQL = (
    "CREATE TABLE r (k BIGINT, g BIGINT); CREATE TABLE s (k BIGINT, v BIGINT); "
    "CREATE VIEW v AS SELECT g, COUNT(*) AS n FROM r JOIN s USING (k) GROUP BY g;"
)


def dbspark_src_hash() -> str:
    """A hash of dbspark's sources (others edit the engine while benchmarks run; as in `bench.tc`)."""
    root = Path(__file__).resolve().parents[1]
    hs = hashlib.sha256()
    for f in sorted((root / "dbspark").rglob("*.py")):
        hs.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return hs.hexdigest()[:12]


# ---- data ------------------------------------------------------------------------------------------
@dataclass
class Data:
    n: int
    r: pl.DataFrame  # rid, k, g
    s: pl.DataFrame  # sid, k, v
    steps: list[tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]]  # R ins, R del, S ins, S del

    def change(self, i: int) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Step i as dbspark sees it: R(k, g, weight) and S(k, v, weight)."""
        ri, rd, si, sd = self.steps[i]
        w = lambda df, x: df.with_columns(pl.lit(x, pl.Int64).alias("weight"))  # noqa: E731
        return (
            pl.concat([w(ri.select("k", "g"), 1), w(rd.select("k", "g"), -1)]),
            pl.concat([w(si.select("k", "v"), 1), w(sd.select("k", "v"), -1)]),
        )

    def current(self, upto: int) -> tuple[pl.DataFrame, pl.DataFrame]:
        """R(k, g) and S(k, v) after the first `upto` steps."""
        used = self.steps[:upto]
        rdel = pl.concat([rd["rid"] for _, rd, _, _ in used])
        sdel = pl.concat([sd["sid"] for _, _, _, sd in used])
        r = pl.concat([self.r.filter(~pl.col("rid").is_in(rdel.implode())), *[ri for ri, _, _, _ in used]])
        s = pl.concat([self.s.filter(~pl.col("sid").is_in(sdel.implode())), *[si for _, _, si, _ in used]])
        return r.select("k", "g"), s.select("k", "v")


def make_data(n: int, nsteps: int, seed: int = SEED) -> Data:
    rng = np.random.default_rng(seed + n)
    r = pl.DataFrame({"rid": np.arange(n), "k": rng.integers(0, n, n), "g": rng.integers(0, GROUPS, n)})
    s = pl.DataFrame({"sid": np.arange(n), "k": rng.integers(0, n, n), "v": rng.integers(0, 1 << 40, n)})
    q = CHANGE // 4
    r_order, s_order = rng.permutation(n), rng.permutation(n)
    steps = []
    for b in range(nsteps):
        ids = np.arange(n + b * q, n + (b + 1) * q)
        ri = pl.DataFrame({"rid": ids, "k": rng.integers(0, n, q), "g": rng.integers(0, GROUPS, q)})
        si = pl.DataFrame({"sid": ids, "k": rng.integers(0, n, q), "v": rng.integers(0, 1 << 40, q)})
        steps.append((ri, r[r_order[b * q : (b + 1) * q]], si, s[s_order[b * q : (b + 1) * q]]))
    return Data(n, r, s, steps)


# ---- Spark ---------------------------------------------------------------------------------------------
class Cpu:
    """CPU seconds of this process plus Spark's JVM (local mode: all of Spark's work is in that JVM).

    The machine is shared, and CPU time is less sensitive than wall time to other processes' load."""

    def __init__(self, spark: Any) -> None:
        try:
            self.pid: int | None = spark.sparkContext._gateway.proc.pid  # the JVM pyspark launched
            self._jvm()
        except Exception:  # noqa: BLE001 - a JVM not launched by pyspark: Python's CPU time only
            self.pid = None
        self.tick = os.sysconf("SC_CLK_TCK")

    def _jvm(self) -> float:
        if self.pid is None:
            return 0.0
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def now(self) -> float:
        return self._jvm() + time.process_time()


def start_spark() -> tuple[Any, dict[str, str]]:
    """The workload's one SparkSession, with dbspark's own defaults under the settings above."""
    from pyspark.sql import SparkSession

    from dbspark.engines.spark.session import DEFAULTS, check_java

    check_java()
    conf = {**DEFAULTS, **SPARK_CONF}
    b = SparkSession.builder.master(MASTER).appName("dbspark-bench-spark_scale")
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, conf


def group_jobs(tracker: Any, group: str) -> dict[str, int]:
    """The Spark jobs of a job group, with their stages run and tasks, from the status tracker."""
    jobs = tracker.getJobIdsForGroup(group)
    stages = tasks = 0
    for j in jobs:
        info = tracker.getJobInfo(j)
        if info is None:
            continue
        for sid in info.stageIds:
            st = tracker.getStageInfo(sid)
            if st is not None:  # skipped stages (shuffle output reused) have no info
                stages += 1
                tasks += st.numTasks
    return {"jobs": len(jobs), "stages": stages, "tasks": tasks}


class ActionProbe:
    """Wraps `kernel.act`: times each action and labels it with its dbspark callers. Spark jobs are counted
    per step through a job group (one `setJobGroup` per step, outside the timed region). With
    `per_action=True` (the --profile mode) each action gets a job group of its own, and py4j round trips
    are counted in and outside actions; both cost py4j calls of their own, so the benchmark leaves them off."""

    def __init__(self, kernel: Any, per_action: bool = False) -> None:
        self.kernel = kernel
        self.sc = kernel.spark.sparkContext
        self.tracker = self.sc.statusTracker()
        self.per_action = per_action
        self._act = kernel.act
        self.records: list[dict] = []
        self.group = "spark_scale-idle"
        self._seq = 0
        self.in_act = False
        self.py4j = {"in": [0, 0.0], "out": [0, 0.0]}  # calls, seconds
        self._send = None
        if per_action:
            from py4j.clientserver import ClientServerConnection

            send = self._send = ClientServerConnection.send_command
            probe = self

            def counted(conn: Any, command: Any, *a: Any, **kw: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return send(conn, command, *a, **kw)
                finally:
                    c = probe.py4j["in" if probe.in_act else "out"]
                    c[0] += 1
                    c[1] += time.perf_counter() - t0

            ClientServerConnection.send_command = counted
        kernel.act = self._wrapped  # an instance attribute: `self.act(...)` inside the kernel finds it

    def detach(self) -> None:
        self.kernel.act = self._act
        if self._send is not None:
            from py4j.clientserver import ClientServerConnection

            ClientServerConnection.send_command = self._send

    @staticmethod
    def _label() -> str:
        names = []
        f = sys._getframe(2)
        while f is not None and len(names) < 3:
            co = f.f_code
            path = co.co_filename.replace(os.sep, "/")
            if "/dbspark/" in path and co.co_name not in ("act", "write", "<lambda>"):
                names.append(getattr(co, "co_qualname", co.co_name))
            f = f.f_back
        return " < ".join(names) if names else "?"

    def _wrapped(self, fn: Any) -> Any:
        self._seq += 1
        gid = f"{self.group}-act{self._seq}" if self.per_action else self.group
        label = self._label()
        if self.per_action:
            self.sc.setJobGroup(gid, label)
        self.in_act = True
        t0 = time.perf_counter()
        try:
            return self._act(fn)
        finally:
            self.records.append({"group": gid, "label": label, "s": time.perf_counter() - t0})
            self.in_act = False
            if self.per_action:
                self.sc.setJobGroup(self.group, "outside actions")

    def begin(self, group: str) -> None:
        self.group = group
        self.records = []
        self.py4j = {"in": [0, 0.0], "out": [0, 0.0]}
        self.sc.setJobGroup(group, "outside actions" if self.per_action else "step")

    def jobs(self, group: str) -> dict[str, int]:
        return group_jobs(self.tracker, group)

    def end(self) -> dict:
        """This step's actions, and its Spark jobs: all of them (`step_jobs`), and with `per_action` per
        action and outside any action (`outside`)."""
        self.sc.setJobGroup("spark_scale-idle", "idle")
        if self.per_action:
            acts = [{**r, **self.jobs(r["group"])} for r in self.records]
            outside = self.jobs(self.group)
            total = {k: outside[k] + sum(a[k] for a in acts) for k in outside}
            out = {"actions": acts, "outside": outside, "step_jobs": total, "py4j": self.py4j}
        else:
            out = {"actions": list(self.records), "step_jobs": self.jobs(self.group)}
        self.group = "spark_scale-idle"
        return out


def build_view() -> dbspark.Circuit:
    c = dbspark.Circuit()
    R = c.input("R", {"k": "int64", "g": "int64"})
    S = c.input("S", {"k": "int64", "v": "int64"})
    c.output("v", R.stream_join(S, on="k").stream_aggregate("g", n="count"))
    return c.incrementalize()


def view_frame(d: dict[tuple, int], what: str) -> pl.DataFrame:
    """dbspark's view {(g, n): weight} as a (g, n) frame; every weight must be 1."""
    bad = [(row, w) for row, w in d.items() if w != 1]
    if bad:
        raise h.Mismatch(f"{what}: dbspark's view has rows with weight != 1: {bad[:5]}")
    return pl.DataFrame(list(d), schema={"g": pl.Int64, "n": pl.Int64}, orient="row")


_RUN_IDS = itertools.count()


# ---- the two systems ------------------------------------------------------------------------------------
class BareCircuit:
    """The bare circuit: `build_view()` run on a `SparkKernel`; a step pushes the step's two prebuilt Polars
    frames (with a `weight` column) and calls `step()`."""

    key, name, tag = "bare", "dbspark (spark engine)", ""

    def __init__(self, spark: Any, d: Data, state: Path) -> None:
        from dbspark.engines.spark.kernel import SparkKernel

        self.d, self.state = d, state
        self.changes = [d.change(i) for i in range(len(d.steps))]  # built before the steps (not timed)
        self.kernel = SparkKernel(spark=spark, directory=state)
        self.rt = build_view().run(self.kernel)

    def load(self) -> None:
        self.rt.push("R", self.d.r.select("k", "g"), 1)
        self.rt.push("S", self.d.s.select("k", "v"), 1)
        self.rt.step()

    def step(self, i: int) -> None:
        dr, ds = self.changes[i]
        self.rt.push("R", dr)
        self.rt.push("S", ds)
        self.rt.step()

    def view(self) -> dict[tuple, int]:
        return self.rt.view("v").to_dict()

    def close(self) -> None:
        self.kernel.close()  # stops nothing: the session is ours, not the kernel's
        shutil.rmtree(self.state, ignore_errors=True)  # a directory we gave the kernel is ours to delete


class PipelinePath:
    """The public API as `dbspark run` uses it: `dbspark.Pipeline(directory, engine="spark", spark=session)`
    with the tables and the view declared in SQL (`PIPELINE_SQL`). Every step commits: state files, the
    view's change log, and the checkpoint in the directory. A step builds Spark DataFrames from the step's
    Polars frames (`spark.createDataFrame(frame.to_arrow())`, as a user holding Polars frames would), then
    `p.insert` and `p.delete` them into each table, then `p.step()`: all of it is in the step time."""

    key, name, tag = "pipeline", "dbspark pipeline", "pipeline "

    def __init__(self, spark: Any, d: Data, state: Path) -> None:
        self.spark, self.d, self.state = spark, d, state
        self.p = dbspark.Pipeline(state, engine="spark", spark=spark)
        self.p.sql(PIPELINE_SQL)
        self.kernel = self.p.start().kernel

    def frame(self, df: pl.DataFrame) -> Any:
        return self.spark.createDataFrame(df.to_arrow())

    def load(self) -> None:
        self.p.insert("r", self.frame(self.d.r.select("k", "g")))
        self.p.insert("s", self.frame(self.d.s.select("k", "v")))
        self.p.step()

    def step(self, i: int) -> None:
        ri, rd, si, sd = self.d.steps[i]
        self.p.insert("r", self.frame(ri.select("k", "g")))
        self.p.delete("r", self.frame(rd.select("k", "g")))
        self.p.insert("s", self.frame(si.select("k", "v")))
        self.p.delete("s", self.frame(sd.select("k", "v")))
        self.p.step()

    def view(self) -> dict[tuple, int]:
        return self.p.view("v").to_dict()

    def close(self) -> None:
        self.p.close()  # closes the kernel; the session is ours
        shutil.rmtree(self.state, ignore_errors=True)


SYSTEMS: dict[str, type] = {"bare": BareCircuit, "pipeline": PipelinePath}


def measure(spark: Any, system: Any, n: int, steps: int, group: str, quiet: bool) -> dict:
    """Load (one untimed step), then WARMUP + `steps` timed steps of `system`; its view at the end."""
    kernel = system.kernel
    probe = ActionProbe(kernel)
    cpu = Cpu(spark)
    tag = system.tag
    try:
        # ---- load: one step ----
        a0 = kernel.actions
        probe.begin(f"{group}-load")
        with h.phase(f"n={n:,}: {tag}load (one step)"), h.Timer() as load:
            system.load()
        load_prof = probe.end()
        load_actions = kernel.actions - a0

        # ---- steps ----
        times: list[float] = []
        cpus: list[float] = []
        actions: list[int] = []
        jobs: list[int] = []
        profile: list[dict] = []
        with h.phase(f"n={n:,}: {tag}{WARMUP} + {steps} steps"):
            for i in range(WARMUP + steps):
                a0 = kernel.actions
                probe.begin(f"{group}-step{i}")
                c0, t0 = cpu.now(), time.perf_counter()
                system.step(i)
                t = time.perf_counter() - t0
                c = cpu.now() - c0
                prof = probe.end()
                na = kernel.actions - a0
                in_acts = sum(a["s"] for a in prof["actions"])
                prof.update(step=i, warmup=i < WARMUP, s=t, actions_n=na, outside_actions_s=t - in_acts)
                profile.append(prof)
                if not quiet:
                    print(
                        f"     {tag}step {i}{' (warm-up)' if i < WARMUP else ''}: {h.fmt_s(t)} (CPU {h.fmt_s(c)}), "
                        f"{na} actions, "
                        f"{prof['step_jobs']['jobs']} Spark jobs; "
                        + ", ".join(
                            f"{a['label'].split(' < ')[0]} {h.fmt_s(a['s'])}" for a in prof["actions"]
                        ),
                        file=sys.stderr,
                        flush=True,
                    )
                if i >= WARMUP:
                    times.append(t)
                    cpus.append(c)
                    actions.append(na)
                    jobs.append(prof["step_jobs"]["jobs"])

        with h.phase(f"n={n:,}: collect dbspark's {tag}view"):
            ours = view_frame(system.view(), f"spark_scale n={n} ({system.name})")
        state_mib = sum(f.stat().st_size for f in system.state.rglob("*") if f.is_file()) / 2**20
    finally:
        probe.detach()
    return {
        "n": n,
        "load_s": load.s,
        "load_actions": load_actions,
        "load_profile": load_prof,
        "step_s": times,
        "stats": h.stats(times),
        "step_cpu_s": cpus,
        "cpu_stats": h.stats(cpus),
        "cpu_measured": "this process + the Spark JVM" if cpu.pid else "this process only",
        "actions_per_step": actions,
        "actions_median": statistics.median(actions),
        "actions_max": max(actions),
        "spark_jobs_per_step": jobs,
        "spark_jobs_median": statistics.median(jobs),
        "profile": profile,
        "view": ours,
        "state_dir_mib_at_end": state_mib,
    }


# ---- one size ---------------------------------------------------------------------------------------------
def run_size(
    spark: Any,
    n: int,
    steps: int,
    tmp: Path,
    quiet: bool = False,
    systems: tuple[str, ...] = ("bare", "pipeline"),
) -> dict:
    """Each of `systems` in turn (the bare circuit first, alone on the session, as before the pipeline was
    added), on the same data; then Spark SQL's recompute over the tables after the steps, which every
    system's view must equal. The bare circuit's figures are at the top level, the pipeline's under
    `pipeline`."""
    with h.phase(f"data n={n:,}"):
        d = make_data(n, WARMUP + steps)
    h.collect()
    run_id = next(_RUN_IDS)  # names must not repeat: the warm-up run may have this size too
    measured: dict[str, dict] = {}
    for key in systems:
        cls = SYSTEMS[key]
        system = cls(spark, d, tmp / f"state-{run_id}-{n}-{key}")
        try:
            measured[key] = measure(spark, system, n, steps, f"spark_scale-{run_id}-{n}-{key}", quiet)
        finally:
            system.close()
        h.collect()

    # ---- Spark SQL recompute over the same current tables ----
    cpu = Cpu(spark)
    sc = spark.sparkContext
    try:
        r_cur, s_cur = d.current(WARMUP + steps)
        pdir = tmp / f"tables-{n}"
        pdir.mkdir(parents=True, exist_ok=True)
        r_cur.write_parquet(pdir / "R.parquet", row_group_size=256 * 1024)
        s_cur.write_parquet(pdir / "S.parquet", row_group_size=256 * 1024)
        spark.read.parquet(str(pdir / "R.parquet")).createOrReplaceTempView("R")
        spark.read.parquet(str(pdir / "S.parquet")).createOrReplaceTempView("S")
        rec_rows: list[Any] = []
        rec_cpu: list[float] = []

        def recompute(_: int) -> None:
            c0 = cpu.now()
            rec_rows[:] = spark.sql(VIEW_SQL).collect()
            rec_cpu.append(cpu.now() - c0)

        rec_group = f"spark_scale-{run_id}-{n}-recompute"
        sc.setJobGroup(rec_group, "recompute")
        with h.phase(f"n={n:,}: Spark SQL recompute x{RECOMPUTE_REPEATS}"):
            rec = h.repeat(recompute, RECOMPUTE_REPEATS)
        rec_jobs = group_jobs(sc.statusTracker(), rec_group)
        sc.setJobGroup("spark_scale-idle", "idle")
        theirs = pl.DataFrame(
            [tuple(r) for r in rec_rows], schema={"g": pl.Int64, "n": pl.Int64}, orient="row"
        )
        h.verify(
            f"spark_scale n={n}",
            {"spark sql recompute": theirs, **{SYSTEMS[k].name: m.pop("view") for k, m in measured.items()}},
        )
        spark.catalog.dropTempView("R")
        spark.catalog.dropTempView("S")
    finally:
        shutil.rmtree(tmp / f"tables-{n}", ignore_errors=True)
    shared = {
        "recompute_s": rec,
        "recompute": h.stats(rec),
        "recompute_cpu_s": rec_cpu,
        "recompute_cpu": h.stats(rec_cpu),
        "recompute_jobs_total": rec_jobs,
        "view_rows": theirs.height,
        "verified": True,
    }
    out: dict[str, Any] = {"n": n, **measured.get("bare", {}), **shared}
    if "pipeline" in measured:
        out["pipeline"] = {**measured["pipeline"], "view_rows": theirs.height, "verified": True}
    return out


def breakdown(profile: list[dict]) -> list[tuple[str, float, float, float]]:
    """Per action label (plus 'outside actions'): median seconds per timed step, its share of the median
    step, and mean seconds per step (merges happen in few steps: their median is 0)."""
    timed = [p for p in profile if not p["warmup"]]
    per: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(timed))
    for i, p in enumerate(timed):
        for a in p["actions"]:
            per[a["label"]][i] += a["s"]
        per["(outside actions: Python, py4j plan building)"][i] = p["outside_actions_s"]
    med_step = statistics.median(p["s"] for p in timed)
    out = []
    for k, secs in per.items():
        m = statistics.median(secs)
        out.append((k, m, m / med_step if med_step else 0.0, sum(secs) / len(timed)))
    return sorted(out, key=lambda r: -r[3])


# ---- the workload -------------------------------------------------------------------------------------
def run(quick: bool) -> dict:
    if h.skipped("spark"):
        raise h.Skipped("BENCH_SKIP lists spark")
    import pyspark

    sizes = SIZES_QUICK if quick else SIZES_FULL
    if os.environ.get(SIZES_ENV):
        sizes = tuple(int(x) for x in os.environ[SIZES_ENV].split(","))
    steps = STEPS_QUICK if quick else STEPS_FULL
    src_start = dbspark_src_hash()
    tmp = Path(tempfile.mkdtemp(prefix="dbspark-bench-spark_scale-"))
    with h.phase(f"SparkSession {MASTER}"), h.Timer() as boot:
        spark, conf = start_spark()
    per: dict[str, dict] = {}
    try:
        with h.phase(f"JVM warm-up: an untimed run at n={JVM_WARMUP[0]:,}, {JVM_WARMUP[1]} steps"):
            run_size(spark, JVM_WARMUP[0], JVM_WARMUP[1], tmp, quiet=True)
        for n in sizes:
            per[str(n)] = run_size(spark, n, steps, tmp)
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    src_end = dbspark_src_hash()
    small, large = per[str(sizes[0])], per[str(sizes[-1])]
    growth = h.ratio(large["stats"]["median"], small["stats"]["median"])
    speedup = h.ratio(large["recompute"]["median"], large["stats"]["median"])
    growth_cpu = h.ratio(large["cpu_stats"]["median"], small["cpu_stats"]["median"])
    speedup_cpu = h.ratio(large["recompute_cpu"]["median"], large["cpu_stats"]["median"])
    actions_all = small["actions_per_step"] + large["actions_per_step"]
    act_med, act_max = statistics.median(actions_all), max(actions_all)
    lbl = {n: (f"{n / 1e6:g}M" if n >= 1e6 else f"{n / 1e3:g}k") for n in sizes}

    def size_row(n: int, e: dict) -> list[str]:
        """One table row: system `e`'s figures at size n, against that size's recompute."""
        st, rc, rc_cpu = e["stats"], per[str(n)]["recompute"], per[str(n)]["recompute_cpu"]
        return [
            lbl[n],
            f"{h.fmt_s(st['median'])} [{h.fmt_s(st['min'])}..{h.fmt_s(st['max'])}]",
            h.fmt_s(e["cpu_stats"]["median"]),
            f"{e['actions_median']:g} [max {e['actions_max']}]",
            f"{e['spark_jobs_median']:g} [max {max(e['spark_jobs_per_step'])}]",
            f"{h.fmt_s(rc['median'])} [{h.fmt_s(rc['min'])}..{h.fmt_s(rc['max'])}]",
            h.fmt_s(rc_cpu["median"]),
            h.fmt_x(h.ratio(rc["median"], st["median"])),
            h.fmt_x(h.ratio(rc_cpu["median"], e["cpu_stats"]["median"])),
            f"{h.fmt_s(e['load_s'])} ({e['load_actions']} actions)",
        ]

    columns = [
        "N (R, S rows each)",
        "dbspark step (wall)",
        "step CPU",
        "actions/step",
        "Spark jobs/step",
        "Spark SQL recompute (wall)",
        "recompute CPU",
        "recompute/step (wall)",
        "(CPU)",
        "load",
    ]
    rows = [size_row(n, per[str(n)]) for n in sizes]
    text = h.table(
        f"spark_scale: {CHANGE:,}-row changes (half deletes) of `{VIEW_SQL}` on the spark engine "
        f"({MASTER}); median [min..max] of {steps} steps after {WARMUP} warm-up",
        columns,
        rows,
    )
    bd = breakdown(large["profile"])
    text += h.table(
        f"where a step's time goes @{lbl[sizes[-1]]} (per action, labelled by its dbspark callers)",
        ["action", "median s/step", "share of median step", "mean s/step"],
        [[k, h.fmt_s(m), f"{100 * sh:.0f}%", h.fmt_s(mean)] for k, m, sh, mean in bd],
    )

    # ---- the same through the public Pipeline API ----
    psmall, plarge = small["pipeline"], large["pipeline"]
    p_growth = h.ratio(plarge["stats"]["median"], psmall["stats"]["median"])
    p_speedup = h.ratio(large["recompute"]["median"], plarge["stats"]["median"])
    p_growth_cpu = h.ratio(plarge["cpu_stats"]["median"], psmall["cpu_stats"]["median"])
    p_speedup_cpu = h.ratio(large["recompute_cpu"]["median"], plarge["cpu_stats"]["median"])
    p_actions_all = psmall["actions_per_step"] + plarge["actions_per_step"]
    p_act_med, p_act_max = statistics.median(p_actions_all), max(p_actions_all)
    p_jobs_all = psmall["spark_jobs_per_step"] + plarge["spark_jobs_per_step"]
    jobs_all = small["spark_jobs_per_step"] + large["spark_jobs_per_step"]
    p_over_bare = {
        str(n): {
            "wall": h.ratio(per[str(n)]["pipeline"]["stats"]["median"], per[str(n)]["stats"]["median"]),
            "cpu": h.ratio(
                per[str(n)]["pipeline"]["cpu_stats"]["median"], per[str(n)]["cpu_stats"]["median"]
            ),
        }
        for n in sizes
    }
    text += h.table(
        'spark_scale through the public API: `dbspark.Pipeline(directory, engine="spark")`, tables and view in '
        "SQL, changes pushed as Spark DataFrames with `insert` / `delete`, every step committed (checkpoint); "
        "same session, data and recompute",
        [*columns[:1], "dbspark pipeline step (wall)", *columns[2:]],
        [size_row(n, per[str(n)]["pipeline"]) for n in sizes],
    )
    p_bd = breakdown(plarge["profile"])
    text += h.table(
        f"where a pipeline step's time goes @{lbl[sizes[-1]]} (per action, labelled by its dbspark callers)",
        ["action", "median s/step", "share of median step", "mean s/step"],
        [[k, h.fmt_s(m), f"{100 * sh:.0f}%", h.fmt_s(mean)] for k, m, sh, mean in p_bd],
    )

    def merge_steps(system: str | None) -> list[str]:
        return [
            f"@{lbl[n]} step {p['step']}: {p['actions_n']} actions, "
            f"{sum(1 for a in p['actions'] if a['label'].startswith('SparkTrace._merge'))} of them LSM merges "
            f"({h.fmt_s(sum(a['s'] for a in p['actions'] if a['label'].startswith('SparkTrace._merge')))} of "
            f"{h.fmt_s(p['s'])})"
            for n in sizes
            for p in (per[str(n)][system] if system else per[str(n)])["profile"]
            if not p["warmup"] and any(a["label"].startswith("SparkTrace._merge") for a in p["actions"])
        ]

    merges, p_merges = merge_steps(None), merge_steps("pipeline")
    notes = [
        f"growth {lbl[sizes[-1]]}/{lbl[sizes[0]]} of the median step: {h.fmt_x(growth)} "
        f"(goal <= {GOAL_GROWTH:g}x: {'met' if growth <= GOAL_GROWTH else 'NOT met'}); "
        f"in CPU time {h.fmt_x(growth_cpu)}",
        f"Spark SQL recompute / incremental step @{lbl[sizes[-1]]}: {h.fmt_x(speedup)} "
        f"(goal >= {GOAL_RECOMPUTE:g}x: {'met' if speedup >= GOAL_RECOMPUTE else 'NOT met'}); "
        f"in CPU time {h.fmt_x(speedup_cpu)}",
        f"Spark actions per step: median {act_med:g}, max {act_max} "
        f"(goal <= {GOAL_ACTIONS}: {'met' if act_max <= GOAL_ACTIONS else ('median met, max NOT' if act_med <= GOAL_ACTIONS else 'NOT met')})",
        f"SparkSession start: {h.fmt_s(boot.s)}; dbspark's views (bare circuit and pipeline) verified equal to "
        "Spark SQL's at both sizes",
        *(["steps with trace merges: " + "; ".join(merges)] if merges else []),
        f"pipeline: growth {lbl[sizes[-1]]}/{lbl[sizes[0]]} of the median step {h.fmt_x(p_growth)} "
        f"(CPU {h.fmt_x(p_growth_cpu)}); Spark SQL recompute / pipeline step @{lbl[sizes[-1]]}: "
        f"{h.fmt_x(p_speedup)} (CPU {h.fmt_x(p_speedup_cpu)}); actions per step median {p_act_med:g}, max "
        f"{p_act_max}; Spark jobs per step median {statistics.median(p_jobs_all):g} (bare circuit: "
        f"{statistics.median(jobs_all):g})",
        "pipeline step / bare circuit step (median): "
        + ", ".join(
            f"@{lbl[n]} {h.fmt_x(p_over_bare[str(n)]['wall'])} (CPU {h.fmt_x(p_over_bare[str(n)]['cpu'])})"
            for n in sizes
        ),
        *(["pipeline steps with trace merges: " + "; ".join(p_merges)] if p_merges else []),
        f"dbspark sources: {src_start}"
        + (
            ""
            if src_end == src_start
            else f" at the start, {src_end} at the end (they changed during the run)"
        ),
    ]
    xs = list(range(WARMUP, WARMUP + steps))  # step numbers as in the progress lines (0 = warm-up)

    def per_size(label: str, values: Any, style: dict[str, Any], flat: bool = False) -> dict[str, Any]:
        """One series per size (dotted: the smallest size; solid: the largest; dash-dotted and dashed
        between); `values(result of a size)`; `flat`: a horizontal line at that value across the steps."""
        out = {}
        styles = [":", *(["-.", "--"] * len(sizes))[: max(len(sizes) - 2, 0)], "-"][-len(sizes) :]
        for n, ls in zip(sizes, styles, strict=True):
            v = values(per[str(n)])
            out[f"{label} @{lbl[n]}" + (" (median)" if flat else "")] = (
                [xs[0], xs[-1]] if flat else xs,
                [v] * 2 if flat else v,
                {**style, "linestyle": ls},
            )
        return out

    bare, pipe = {"color": h.COLORS["dbspark"]}, {"color": PIPELINE_COLOR}
    recompute = {"color": h.COLORS["duckdb recompute"], "marker": None}
    panels = [
        {
            "title": "time per 1k-row step",
            "xlabel": "step",
            "ylabel": "time per step (s)",
            "series": {
                **per_size("dbspark spark engine", lambda r: r["step_s"], bare),
                **per_size("dbspark pipeline", lambda r: r["pipeline"]["step_s"], pipe),
                **per_size("Spark SQL recompute", lambda r: r["recompute"]["median"], recompute, flat=True),
            },
        },
        {
            "title": "CPU per 1k-row step (Python + Spark JVM)",
            "xlabel": "step",
            "ylabel": "CPU s per step",
            "series": {
                **per_size("dbspark spark engine", lambda r: r["step_cpu_s"], bare),
                **per_size("dbspark pipeline", lambda r: r["pipeline"]["step_cpu_s"], pipe),
                **per_size(
                    "Spark SQL recompute", lambda r: r["recompute_cpu"]["median"], recompute, flat=True
                ),
            },
        },
        {
            "title": "Spark actions (and jobs) per step",
            "xlabel": "step",
            "ylabel": "actions (o), Spark jobs (x)",
            "logy": False,
            "series": {
                **per_size("actions", lambda r: r["actions_per_step"], bare),
                **per_size("pipeline actions", lambda r: r["pipeline"]["actions_per_step"], pipe),
                **per_size(
                    "pipeline Spark jobs",
                    lambda r: r["pipeline"]["spark_jobs_per_step"],
                    {**pipe, "marker": "x"},
                ),
                **per_size("Spark jobs", lambda r: r["spark_jobs_per_step"], {**bare, "marker": "x"}),
            },
        },
    ]
    return {
        "params": {
            "sizes": list(sizes),
            "size_means": "rows in each of R and S",
            "steps": steps,
            "warmup": WARMUP,
            "change_rows": CHANGE,
            "groups": GROUPS,
            "seed": SEED,
            "recompute_repeats": RECOMPUTE_REPEATS,
            "jvm_warmup_rows_steps": JVM_WARMUP,
            "master": MASTER,
            "spark_conf": conf,
            "pyspark": pyspark.__version__,
            "view_sql": VIEW_SQL,
            "pipeline_sql": PIPELINE_SQL,
            "pipeline_changes_as": "spark.createDataFrame(polars_frame.to_arrow()), built inside the timed step",
        },
        "systems": [BareCircuit.name, PipelinePath.name, "spark sql recompute"],
        "sizes": per,
        "session_start_s": boot.s,
        "dbspark_src": src_start,
        "dbspark_src_end": src_end,
        "growth_large_small_median": growth,
        "recompute_over_step_large": speedup,
        "growth_large_small_cpu_median": growth_cpu,
        "recompute_over_step_large_cpu": speedup_cpu,
        "actions_per_step_median": act_med,
        "actions_per_step_max": act_max,
        "goals": {
            "growth_le_2x": growth <= GOAL_GROWTH,
            "recompute_ge_20x": speedup >= GOAL_RECOMPUTE,
            "actions_median_le_4": act_med <= GOAL_ACTIONS,
            "actions_max_le_4": act_max <= GOAL_ACTIONS,
        },
        "breakdown_large": [
            {"action": k, "median_s": m, "share_of_median_step": sh, "mean_s": mean} for k, m, sh, mean in bd
        ],
        "pipeline": {
            "growth_large_small_median": p_growth,
            "recompute_over_step_large": p_speedup,
            "growth_large_small_cpu_median": p_growth_cpu,
            "recompute_over_step_large_cpu": p_speedup_cpu,
            "actions_per_step_median": p_act_med,
            "actions_per_step_max": p_act_max,
            "spark_jobs_per_step_median": statistics.median(p_jobs_all),
            "spark_jobs_per_step_max": max(p_jobs_all),
            "over_bare_step_median": p_over_bare,
            "breakdown_large": [
                {"action": k, "median_s": m, "share_of_median_step": sh, "mean_s": mean}
                for k, m, sh, mean in p_bd
            ],
        },
        "spark_jobs_per_step_median": statistics.median(jobs_all),
        "spark_jobs_per_step_max": max(jobs_all),
        "verified": True,
        "notes": notes,
        "table": text,
        "plot": panels,
        "plot_title": f"spark_scale: 1k-row changes of a join + GROUP BY COUNT view on Spark ({MASTER})",
    }


# ---- profiling: Spark's event log, per action and per job ------------------------------------------------
def read_event_log(path: Path) -> dict[str, Any]:
    """Jobs (with their job group, times, stages) and per-stage task totals from a Spark event log."""
    import json

    jobs: dict[int, dict] = {}
    stages: dict[int, dict] = defaultdict(
        lambda: {
            "tasks": 0,
            "run_ms": 0,
            "cpu_ns": 0,
            "in_rows": 0,
            "in_bytes": 0,
            "shuf_read_rows": 0,
            "shuf_write_rows": 0,
            "out_rows": 0,
            "deser_ms": 0,
        }
    )
    stage_info: dict[int, dict] = {}
    sql: dict[int, dict] = {}
    files = [path]
    if path.is_dir():  # a rolling log (Spark 4's default): events_<i>_<app> files
        files = sorted(
            (f for f in path.iterdir() if f.name.startswith("events_")),
            key=lambda f: int(f.name.split("_")[1]),
        )
    lines = [line for f in files for line in f.read_text().splitlines() if line.strip()]
    for line in lines:
        e = json.loads(line)
        ev = e.get("Event", "")
        if ev == "SparkListenerJobStart":
            props = e.get("Properties") or {}
            jobs[e["Job ID"]] = {
                "id": e["Job ID"],
                "group": props.get("spark.jobGroup.id"),
                "sql": props.get("spark.sql.execution.id"),
                "start": e["Submission Time"],
                "stages": e["Stage IDs"],
            }
        elif ev == "SparkListenerJobEnd":
            jobs[e["Job ID"]]["end"] = e["Completion Time"]
        elif ev == "SparkListenerStageCompleted":
            si = e["Stage Info"]
            stage_info[si["Stage ID"]] = {
                "name": si["Stage Name"],
                "ntasks": si["Number of Tasks"],
                "start": si.get("Submission Time"),
                "end": si.get("Completion Time"),
            }
        elif ev == "SparkListenerTaskEnd":
            m = e.get("Task Metrics") or {}
            st = stages[e["Stage ID"]]
            st["tasks"] += 1
            st["run_ms"] += m.get("Executor Run Time", 0)
            st["cpu_ns"] += m.get("Executor CPU Time", 0)
            st["deser_ms"] += m.get("Executor Deserialize Time", 0)
            st["in_rows"] += (m.get("Input Metrics") or {}).get("Records Read", 0)
            st["in_bytes"] += (m.get("Input Metrics") or {}).get("Bytes Read", 0)
            st["shuf_read_rows"] += (m.get("Shuffle Read Metrics") or {}).get("Total Records Read", 0)
            st["shuf_write_rows"] += (m.get("Shuffle Write Metrics") or {}).get("Shuffle Records Written", 0)
            st["out_rows"] += (m.get("Output Metrics") or {}).get("Records Written", 0)
        elif ev.endswith("SparkListenerSQLExecutionStart"):
            sql[e["executionId"]] = {"start": e["time"], "description": e.get("description", "")}
        elif ev.endswith("SparkListenerSQLExecutionEnd"):
            sql.setdefault(e["executionId"], {})["end"] = e["time"]
    for sid, info in stage_info.items():
        stages[sid].update(info)
    return {"jobs": jobs, "stages": dict(stages), "sql": sql}


def _union_ms(intervals: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s_, e_ in sorted(intervals):
        if cur_e is None or s_ > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s_, e_
        else:
            cur_e = max(cur_e, e_)
    return total + (cur_e - cur_s if cur_e is not None else 0)


def profile(
    quick: bool, n: int | None, steps: int, extra_conf: dict[str, str] | None = None, system: str = "bare"
) -> None:
    """Run one size of one system (`bare` or `pipeline`) with Spark's event log on and pyinstrument on the
    Python side; print, per action, where its wall time goes: Spark jobs (tasks: executor run time, rows
    read) against driver time between jobs (planning, code generation, AQE re-planning, file commits), and
    the Python time outside actions."""
    from pyinstrument import Profiler

    n = n or (SIZES_QUICK if quick else SIZES_FULL)[-1]
    tmp = Path(tempfile.mkdtemp(prefix="dbspark-bench-spark_scale-profile-"))
    logdir = tmp / "eventlog"
    logdir.mkdir()
    SPARK_CONF.update(
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": f"file://{logdir}",
            "spark.eventLog.compress": "false",
            **(extra_conf or {}),
        }
    )
    spark, _ = start_spark()
    try:
        run_size(spark, JVM_WARMUP[0], JVM_WARMUP[1], tmp, quiet=True, systems=(system,))
        d = make_data(n, WARMUP + steps)
        sut = SYSTEMS[system](spark, d, tmp / f"state-{n}")
        kernel = sut.kernel
        probe = ActionProbe(kernel, per_action=True)
        probe.begin(f"p-{n}-load")
        sut.load()
        probe.end()
        prof = Profiler(interval=0.001)
        steps_out = []
        for i in range(WARMUP + steps):
            probe.begin(f"p-{n}-step{i}")
            if i >= WARMUP:
                prof.start()
            t0 = time.perf_counter()
            sut.step(i)
            t = time.perf_counter() - t0
            if i >= WARMUP:
                prof.stop()
            acts = list(probe.records)
            py4j = {k: list(v) for k, v in probe.py4j.items()}
            probe.end()
            steps_out.append({"step": i, "s": t, "acts": acts, "group": f"p-{n}-step{i}", "py4j": py4j})
        probe.detach()
        sut.close()
    finally:
        spark.stop()
    logs = [p for p in logdir.iterdir()]
    ev = read_event_log(logs[0])
    shutil.rmtree(tmp, ignore_errors=True)

    by_group: dict[str, list[dict]] = defaultdict(list)
    for j in ev["jobs"].values():
        by_group[j["group"]].append(j)
    rows, per_label = [], defaultdict(lambda: defaultdict(list))
    for st in steps_out:
        timed = st["step"] >= WARMUP
        for a in st["acts"] + [{"group": st["group"], "label": "(outside actions)", "s": None}]:
            js = by_group.get(a["group"], [])
            in_jobs = _union_ms([(j["start"], j.get("end", j["start"])) for j in js]) / 1e3
            stg = [ev["stages"].get(sid, {}) for j in js for sid in j["stages"]]
            stg = [x for x in stg if x.get("tasks")]
            run_s = sum(x["run_ms"] for x in stg) / 1e3
            in_rows = sum(x["in_rows"] for x in stg)
            ntasks = sum(x["tasks"] for x in stg)
            wall = a["s"]
            if wall is None:
                wall = st["s"] - sum(x["s"] for x in st["acts"])
            rows.append(
                [
                    st["step"],
                    a["label"].split(" < ")[0]
                    + (" (in " + a["label"].split(" < ")[1] + ")" if " < " in a["label"] else ""),
                    h.fmt_s(wall),
                    len(js),
                    len(stg),
                    ntasks,
                    h.fmt_s(in_jobs),
                    h.fmt_s(max(wall - in_jobs, 0.0)),
                    h.fmt_s(run_s),
                    f"{in_rows:,}",
                ]
            )
            if timed:
                key = a["label"]
                per_label[key]["wall"].append(wall)
                per_label[key]["jobs"].append(in_jobs)
                per_label[key]["run"].append(run_s)
                per_label[key]["rows"].append(in_rows)
                per_label[key]["njobs"].append(len(js))
    report: list[str] = [
        f"{h.today()} {time.strftime('%H:%M')}, system: {SYSTEMS[system].name}, dbspark sources "
        f"{dbspark_src_hash()}, load average {os.getloadavg()[0]:.1f}"
    ]
    if extra_conf:
        report.append(f"extra Spark settings: {extra_conf}")
    report.append(
        h.table(
            f"spark_scale profile ({SYSTEMS[system].name}) @{n:,}: every action of every step (warm-up = step 0)",
            [
                "step",
                "action",
                "wall",
                "jobs",
                "stages run",
                "tasks",
                "time in jobs",
                "driver time between jobs",
                "executor run time",
                "rows read from files",
            ],
            rows,
        )
    )
    nsteps = len([s_ for s_ in steps_out if s_["step"] >= WARMUP])
    summary = []
    for k, v in sorted(per_label.items(), key=lambda kv: -sum(kv[1]["wall"])):
        summary.append(
            [
                k,
                h.fmt_s(sum(v["wall"]) / nsteps),
                h.fmt_s(sum(v["jobs"]) / nsteps),
                h.fmt_s(max(sum(v["wall"]) - sum(v["jobs"]), 0) / nsteps),
                h.fmt_s(sum(v["run"]) / nsteps),
                f"{sum(v['njobs']) / nsteps:.1f}",
                f"{sum(v['rows']) / nsteps:,.0f}",
            ]
        )
    tot = sum(s_["s"] for s_ in steps_out if s_["step"] >= WARMUP) / nsteps
    report.append(
        h.table(
            f"mean per timed step ({nsteps} steps, mean step {h.fmt_s(tot)}), by action label",
            [
                "action",
                "wall",
                "in Spark jobs",
                "driver, between jobs",
                "executor run time (2 cores)",
                "jobs",
                "rows read",
            ],
            summary,
        )
    )
    py = [s_["py4j"] for s_ in steps_out if s_["step"] >= WARMUP]
    report.append(
        f"\npy4j round trips per timed step (mean): {sum(x['out'][0] for x in py) / nsteps:.0f} outside actions "
        f"taking {h.fmt_s(sum(x['out'][1] for x in py) / nsteps)} (building plans: every DataFrame and Column "
        f"call is one or more), {sum(x['in'][0] for x in py) / nsteps:.0f} inside actions (mostly py4j's "
        "deletes of Java objects Python has dropped)"
    )
    out = h.result_path(f"spark_scale-profile-{'' if system == 'bare' else system + '-'}{n}", quick, "txt")
    report.append(
        f"\npyinstrument tree of the timed steps (Python side; time inside kernel.act is Spark's): {out}"
    )
    text = "\n".join(report)
    out.write_text(text + "\n\n" + prof.output_text(unicode=False, color=False, show_all=False))
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    if "--profile" in sys.argv:
        args = sys.argv[1:]
        n_arg = int(args[args.index("--n") + 1]) if "--n" in args else None
        k_arg = int(args[args.index("--steps") + 1]) if "--steps" in args else 8
        confs = dict(a.split("=", 1) for i, a in enumerate(args) if i and args[i - 1] == "--conf")
        sys_arg = args[args.index("--system") + 1] if "--system" in args else "bare"
        if sys_arg not in SYSTEMS:
            sys.exit(f"--system {sys_arg}: one of {', '.join(SYSTEMS)}")
        profile("--quick" in args, n_arg, k_arg, confs, sys_arg)
    else:
        print(
            "usage: python -m bench spark_scale [--quick]   |   python -m bench.spark_scale --profile "
            "[--quick] [--n ROWS] [--steps K] [--system bare|pipeline] [--conf spark.key=value ...]"
        )
