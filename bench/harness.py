"""Shared machinery of the benchmark suite: timing, repetition, statistics, result checking, result JSON,
the printed table and the plots.

Timings are measurements, never assertions: a workload reports a requirement as met or not met, and the
run fails only when two systems disagree on a result (`Mismatch`).
"""

from __future__ import annotations

import datetime as _dt
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

RESULTS = Path(os.environ.get("BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
MIN_REPEATS = 3


def skipped(system: str) -> bool:
    """Whether `system` is listed in `$BENCH_SKIP` (comma-separated: pathway, pydbsp, spark), which the
    harness's smoke test uses to leave out the slow-to-start anchors."""
    return system in {s.strip() for s in os.environ.get("BENCH_SKIP", "").split(",")}


def sized(full: Any, quick: Any, quick_run: bool, smoke: Any = None) -> Any:
    """The size for this run: `full`, `quick` (--quick) or, with `$BENCH_SMOKE` set and --quick, `smoke`
    (tiny sizes: the harness's own test runs the workloads end to end without timing anything)."""
    if not quick_run:
        return full
    if smoke is not None and os.environ.get("BENCH_SMOKE"):
        return smoke
    return quick


class Mismatch(AssertionError):
    """Two systems produced different results: the run fails (non-zero exit)."""


class Skipped(Exception):
    """A workload that cannot run here (a missing anchor, `$BENCH_SKIP`, a feature not yet supported):
    reported with its reason, and not a failure."""


# ---- timing ---------------------------------------------------------------------------------------
class Timer:
    """`with Timer() as t: ...` then `t.s` (seconds, perf_counter)."""

    __slots__ = ("s", "_t0")

    def __enter__(self) -> Timer:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.s = time.perf_counter() - self._t0


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def repeat(fn: Callable[[int], Any], n: int, warmup: int = 0) -> list[float]:
    """Call `fn(i)` for i in range(warmup + n) and return the times of the last n calls.

    Each call is one repetition of the measurement (for a stream workload: one step, which also moves
    the state on, so the calls are not idempotent and the warm-up steps are part of the stream)."""
    if n < MIN_REPEATS:
        raise ValueError(f"at least {MIN_REPEATS} repetitions are needed, got {n}")
    out = []
    for i in range(warmup + n):
        t, _ = timed(lambda i=i: fn(i))
        if i >= warmup:
            out.append(t)
    return out


def stats(samples: Sequence[float]) -> dict[str, float]:
    """Median, min, max, mean and count of timing samples (seconds)."""
    if len(samples) < MIN_REPEATS:
        raise ValueError(f"at least {MIN_REPEATS} samples are needed, got {len(samples)}")
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "mean": statistics.fmean(samples),
        "n": len(samples),
    }


def ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def collect() -> None:
    """A full garbage collection between phases, so that one system's garbage is not another's time."""
    gc.collect()


@contextmanager
def phase(label: str) -> Any:
    """Print a progress line with the phase's wall time (to stderr, so the table stays clean)."""
    t0 = time.perf_counter()
    yield
    print(f"  .. {label}: {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)


def wait_idle(max_wait_s: float, below: float = 1.0) -> float:
    """Wait (at most `max_wait_s`) until the 1-minute load average is below `below`: the machine is shared,
    and other processes' CPU time lands in our timings. Returns the load average when it returns."""
    t0 = time.perf_counter()
    while os.getloadavg()[0] >= below and time.perf_counter() - t0 < max_wait_s:
        time.sleep(5)
    return os.getloadavg()[0]


def rss_gb() -> float:
    """Peak resident set size of this process so far, GiB."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


# ---- result checking ------------------------------------------------------------------------------
def canonical(df: pl.DataFrame) -> pl.DataFrame:
    """A frame in canonical form: columns in their given order, rows sorted by every column."""
    return df.sort(df.columns, nulls_last=True).rechunk()


def verify(what: str, results: Mapping[str, pl.DataFrame], float_tol: float = 0.0) -> None:
    """Every system's result (a frame with the same columns) must be equal as a multiset of rows.

    Raises `Mismatch` naming the systems and showing a few differing rows."""
    items = list(results.items())
    if len(items) < 2:
        raise ValueError(f"{what}: verify needs at least two systems, got {[n for n, _ in items]}")
    ref_name, ref = items[0]
    ref = canonical(ref)
    for name, df in items[1:]:
        if list(df.columns) != list(ref.columns):
            raise Mismatch(f"{what}: {name} has columns {df.columns}, {ref_name} has {ref.columns}")
        df = canonical(df.cast(dict(ref.schema)))  # type: ignore[arg-type]
        if df.height == ref.height and _frames_equal(df, ref, float_tol):
            continue
        only_ref = ref.join(df, on=ref.columns, how="anti", nulls_equal=True).head(5)
        only_df = df.join(ref, on=ref.columns, how="anti", nulls_equal=True).head(5)
        raise Mismatch(
            f"{what}: {name} ({df.height} rows) differs from {ref_name} ({ref.height} rows)\n"
            f"  only in {ref_name}: {only_ref.rows()}\n  only in {name}: {only_df.rows()}"
        )


def _frames_equal(a: pl.DataFrame, b: pl.DataFrame, tol: float) -> bool:
    if a.equals(b):
        return True
    if tol <= 0:
        return False
    for c in a.columns:
        x, y = a[c], b[c]
        if x.dtype.is_float():
            if not ((x - y).abs() <= tol * (1 + y.abs())).all():
                return False
        elif not x.equals(y):
            return False
    return True


def duck_apply(con: Any, table: str, ins: pl.DataFrame, dele: pl.DataFrame) -> None:
    """Apply a change to a DuckDB table: insert the rows of `ins`, delete those whose `id` is in `dele`."""
    con.register("ins", ins.to_arrow())
    con.register("del", dele.select("id").to_arrow())
    con.execute(f"INSERT INTO {table} SELECT * FROM ins")
    con.execute(f"DELETE FROM {table} WHERE id IN (SELECT id FROM del)")
    con.unregister("ins")
    con.unregister("del")


def median_range(s: dict[str, float]) -> str:
    """A `stats` dict as "median [min..max]"."""
    return f"{fmt_s(s['median'])} [{fmt_s(s['min'])}..{fmt_s(s['max'])}]"


def insert_delete_changes(
    rng: Any, make: Callable[[Any, Any], pl.DataFrame], n: int, steps: int, change: int
) -> tuple[pl.DataFrame, list[tuple[pl.DataFrame, pl.DataFrame]]]:
    """n initial rows `make(rng, ids)` (ids 0..n-1) and per step `change` / 2 new rows (fresh ids) to insert
    and as many present rows to delete (initial rows, in a random order, each deleted once)."""
    import numpy as np

    init = make(rng, np.arange(n))
    order = rng.permutation(n)
    half = change // 2
    changes = []
    for i in range(steps):
        ins = make(rng, np.arange(n + i * half, n + (i + 1) * half))
        changes.append((ins, init[order[i * half : (i + 1) * half]]))
    return init, changes


def timed_steps(
    label: str, load: Callable[[], None], step: Callable[[int], pl.DataFrame], steps: int, warmup: int
) -> dict[str, Any]:
    """A dbspark system's load (timed) and `steps` steps (`step(i)` applies change i and returns the view),
    wall and this process's CPU per step after the first `warmup`; the views kept for `verify`."""
    collect()
    with phase(f"{label}: load"), Timer() as t:
        load()
    wall, cpu, views = [], [], []
    with phase(f"{label}: {steps} steps"):
        for i in range(steps):
            c0, t0 = time.process_time(), time.perf_counter()
            view = step(i)
            t1, c1 = time.perf_counter(), time.process_time()
            if i >= warmup:
                wall.append(t1 - t0)
                cpu.append(c1 - c0)
            views.append(view)
    return {
        "load_s": t.s,
        "step_s": wall,
        "cpu_s": cpu,
        "wall": stats(wall),
        "cpu": stats(cpu),
        "views": views,
    }


def duck_table(con: Any, name: str, frame: pl.DataFrame) -> None:
    """A DuckDB table `name` holding `frame`."""
    con.register("__src", frame.to_arrow())
    con.execute(f"CREATE TABLE {name} AS SELECT * FROM __src")
    con.unregister("__src")


def versus_cells(a: Mapping[str, Any], b: Mapping[str, Any], duck: Mapping[str, Any]) -> list[str]:
    """A table's cells for system `a` against `b` and a DuckDB recompute, from their `stats`: a's and b's
    median [min..max] step and median CPU, b / a in wall and CPU, DuckDB's median and DuckDB / a."""
    return [
        median_range(a["wall"]),
        fmt_s(a["cpu"]["median"]),
        median_range(b["wall"]),
        fmt_s(b["cpu"]["median"]),
        fmt_x(ratio(b["wall"]["median"], a["wall"]["median"])),
        fmt_x(ratio(b["cpu"]["median"], a["cpu"]["median"])),
        fmt_s(duck["wall"]["median"]),
        fmt_x(ratio(duck["wall"]["median"], a["wall"]["median"])),
    ]


def versus_headers(a: str, b: str) -> list[str]:
    """The headers of `versus_cells`' columns, systems named `a` and `b`."""
    return [a, "(CPU)", b, "(CPU)", f"{b} / {a}", "(CPU)", "duckdb recompute", f"duckdb / {a}"]


def step_series(sizes: Sequence[int], per: Mapping[str, Any], systems: Sequence[str]) -> dict[str, Any]:
    """The plot's series of median step time by size: each dbspark system's and DuckDB's recompute."""
    series = {f"dbspark {s}": (sizes, [per[str(n)][s]["wall"]["median"] for n in sizes], {}) for s in systems}
    series["duckdb recompute"] = (sizes, [per[str(n)]["duckdb"]["wall"]["median"] for n in sizes], {})
    return series


def step_params(sizes: Sequence[int], steps: int, warmup: int, change: int, seed: int) -> dict[str, Any]:
    """The parameters of a run of timed steps (steps after the warm-up ones)."""
    return {"sizes": sizes, "steps": steps - warmup, "warmup": warmup, "change_rows": change, "seed": seed}


def counts_frame(d: Mapping[Any, int], key: str = "g", value: str = "n") -> pl.DataFrame:
    """{key: count} (zero counts dropped) as a two-column Int64 frame."""
    items = [(k, v) for k, v in d.items() if v]
    return pl.DataFrame(items, schema={key: pl.Int64, value: pl.Int64}, orient="row")


# ---- output ---------------------------------------------------------------------------------------
def spawn_worker(module: str, argv: Sequence[Any], timeout: float, label: str) -> dict[str, Any]:
    """Run `python -m <module> --worker <argv...>` in a subprocess (its peak RSS its own) and return
    the JSON object it prints last; a timeout or a crash is returned as {"error": ...}."""
    import subprocess

    cmd = [sys.executable, "-m", module, "--worker", *map(str, argv)]
    print(f"  {label} ...", file=sys.stderr, flush=True)
    try:
        r = subprocess.run(
            cmd, cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"error": f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1:] or ''}"}
    return dict(json.loads(lines[-1]))


def today() -> str:
    return _dt.date.today().isoformat()


def machine() -> dict[str, Any]:
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "mem_gib": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg": list(os.getloadavg()),
        "versions": versions(),
    }


def versions() -> dict[str, str]:
    out = {}
    for mod in ("dbspark", "polars", "numpy", "duckdb", "pandas", "pathway"):
        try:
            m = __import__(mod)
            out[mod] = getattr(m, "__version__", "?")
        except Exception:  # noqa: BLE001 - optional anchors
            out[mod] = "not installed"
    return out


def result_path(workload: str, quick: bool, ext: str, date: str | None = None) -> Path:
    """bench/results/<date>-<workload>.<ext> (quick runs: <date>-<workload>.quick.<ext>)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    return RESULTS / f"{date or today()}-{workload}{'.quick' if quick else ''}.{ext}"


def write_json(workload: str, quick: bool, payload: dict[str, Any]) -> Path:
    doc = {"workload": workload, "date": today(), "quick": quick, "machine": machine(), **payload}
    p = result_path(workload, quick, "json")
    p.write_text(json.dumps(doc, indent=2, default=_json_default) + "\n")
    return p


def _json_default(o: Any) -> Any:
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
    except ImportError:
        pass
    return str(o)


def fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.0f} µs"


def fmt_x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def fmt_rate(r: float | None) -> str:
    if r is None:
        return "-"
    if r >= 1e6:
        return f"{r / 1e6:.2f} M/s"
    if r >= 1e3:
        return f"{r / 1e3:.1f} k/s"
    return f"{r:.0f} /s"


def table(title: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain-text table (also valid Markdown)."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"  # noqa: E731
    out = [f"\n## {title}", line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)


# ---- plots ----------------------------------------------------------------------------------------
Series = Mapping[str, tuple]  # label -> (xs, ys) or (xs, ys, matplotlib style kwargs)
COLORS = {
    "dbspark": "C0",
    "dbspark (spark engine)": "C8",
    "dbspark (spark pipeline)": "C9",
    "hand-written delta": "C1",
    "duckdb recompute": "C2",
    "pathway": "C3",
    "pydbsp": "C4",
    "pandas recompute": "C5",
    "spark sql recompute": "C6",
    "spark structured streaming": "C7",
}


def plot(
    workload: str,
    quick: bool,
    panels: Sequence[dict[str, Any]],
    suptitle: str,
) -> Path:
    """One PNG per workload: a panel per dict {title, series: {label: (xs, ys[, style])}, xlabel, ylabel, logx,
    logy}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.2), squeeze=False)
    for ax, p in zip(axes[0], panels, strict=True):
        for label, spec in p["series"].items():
            xs, ys, style = (*spec, {})[:3]
            ax.plot(xs, ys, **{"marker": "o", "markersize": 3, **style}, label=label)
        ax.set_title(p["title"], fontsize=10)
        ax.set_xlabel(p.get("xlabel", "step"))
        ax.set_ylabel(p.get("ylabel", "time per step (s)"))
        if p.get("logx"):
            ax.set_xscale("log")
        else:
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if p.get("logy", True):
            ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(suptitle, fontsize=11)
    fig.tight_layout()
    path = result_path(workload, quick, "png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
