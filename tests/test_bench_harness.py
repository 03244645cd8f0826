"""The benchmark harness itself (`python -m bench`): it runs every workload, compares the systems'
results, writes JSON and PNG, prints tables, and fails loudly on a mismatch. No timing is checked.

The end-to-end test runs `python -m bench --quick` with `BENCH_SMOKE=1` (tiny sizes) and the anchors that
take long to start (Spark, Pathway, pydbsp) left out through `BENCH_SKIP`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import polars as pl
import pytest

pytest.importorskip("matplotlib")

from bench import WORKLOADS, expand  # noqa: E402
from bench import __main__ as bench_main  # noqa: E402
from bench import harness as h  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_quick_smoke_runs_every_workload_and_verifies(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "BENCH_SMOKE": "1",
        "BENCH_SKIP": "pathway,pydbsp,spark",
        "BENCH_RESULTS": str(tmp_path),
    }
    p = subprocess.run(
        [sys.executable, "-m", "bench", "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "spark_scale: skipped (BENCH_SKIP lists spark)" in p.stdout
    ran = [w for w in WORKLOADS if w != "spark_scale"]
    for w in ran:
        js = sorted(tmp_path.glob(f"*-{w}*.quick.json"))
        assert js, f"no JSON for {w}: {sorted(x.name for x in tmp_path.iterdir())}"
        doc = json.loads(js[0].read_text())
        assert doc["quick"] is True and doc["machine"]["cores"] >= 1
        assert (tmp_path / doc["png"]).stat().st_size > 0
        assert doc["table"].strip().splitlines()[0].startswith("## ")
    state = json.loads(next(tmp_path.glob("*-state_scaling.quick.json")).read_text())
    assert set(state["ops"]) == {"join", "distinct", "min", "join_groupby"}
    assert all(s["verified"] for o in state["ops"].values() for s in o["sizes"].values())
    jg = json.loads(next(tmp_path.glob("*-join_groupby.quick.json")).read_text())
    assert {"dbspark", "hand-written delta", "duckdb recompute", "pandas recompute"} <= set(jg["systems"])
    assert jg["verified"] is True
    assert "spark sql recompute" in jg["skipped"] and "pathway" in jg["skipped"]
    # every timed measurement has at least 3 samples and its statistics
    for e in jg["systems"].values():
        assert (
            e["stats"]["n"] >= h.MIN_REPEATS
            and e["stats"]["min"] <= e["stats"]["median"] <= e["stats"]["max"]
        )


def _fake_workload(monkeypatch: pytest.MonkeyPatch, name: str, run: object) -> None:
    mod = types.ModuleType(f"bench.{name}")
    mod.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, f"bench.{name}", mod)
    monkeypatch.setattr(bench_main, "WORKLOADS", (*WORKLOADS, name))


def test_a_mismatch_fails_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(h, "RESULTS", tmp_path)

    def run(quick: bool) -> dict:
        a = pl.DataFrame({"g": [1, 2], "n": [3, 4]})
        h.verify("fake", {"a": a, "b": a.with_columns(pl.col("n") + (pl.col("g") == 2))})
        raise AssertionError("unreachable")

    _fake_workload(monkeypatch, "fake_mismatch", run)
    assert bench_main.main(["fake_mismatch", "--quick"]) == 1
    err = capsys.readouterr().err
    assert "RESULT MISMATCH in fake_mismatch" in err and "only in a: [(2, 4)]" in err
    assert not list(tmp_path.glob("*.json"))


def test_a_workload_that_cannot_run_is_reported_not_failed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(h, "RESULTS", tmp_path)

    def run(quick: bool) -> dict:
        raise h.Skipped("not yet supported: fake feature")

    _fake_workload(monkeypatch, "fake_skip", run)
    assert bench_main.main(["fake_skip"]) == 0
    assert "fake_skip: skipped (not yet supported: fake feature)" in capsys.readouterr().out


def test_a_crashing_workload_fails_the_run_after_the_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(h, "RESULTS", tmp_path)
    _fake_workload(monkeypatch, "fake_crash", lambda quick: 1 / 0)

    def ok(quick: bool) -> dict:
        return {
            "table": "\n## ok",
            "plot": [{"title": "t", "series": {"x": ([1, 2, 3], [1.0, 2.0, 3.0])}}],
            "plot_title": "ok",
        }

    mod = types.ModuleType("bench.fake_ok")
    mod.run = ok  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bench.fake_ok", mod)
    monkeypatch.setattr(bench_main, "WORKLOADS", (*WORKLOADS, "fake_crash", "fake_ok"))
    assert bench_main.main(["fake_crash", "fake_ok", "--quick"]) == 1
    out = capsys.readouterr()
    assert "ZeroDivisionError" in out.err and "## ok" in out.out
    assert json.loads(next(tmp_path.glob("*-fake_ok.quick.json")).read_text())["png"].endswith(".png")


def test_verify_compares_multisets() -> None:
    a = pl.DataFrame({"g": [1, 2, 2], "x": [0.5, 1.0, 1.0]})
    h.verify("same rows, other order", {"a": a, "b": a.reverse()})
    with pytest.raises(h.Mismatch, match="differs"):
        h.verify("multiplicity", {"a": a, "b": a.unique()})
    with pytest.raises(h.Mismatch, match="columns"):
        h.verify("columns", {"a": a, "b": a.rename({"x": "y"})})
    near = a.with_columns(pl.col("x") * (1 + 1e-12))
    with pytest.raises(h.Mismatch):
        h.verify("exact", {"a": a, "b": near})
    h.verify("tolerance", {"a": a, "b": near}, float_tol=1e-9)


def test_repetitions_and_statistics() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        h.repeat(lambda i: None, 2)
    calls: list[int] = []
    assert len(h.repeat(calls.append, 3, warmup=1)) == 3 and calls == [0, 1, 2, 3]
    st = h.stats([3.0, 1.0, 2.0])
    assert (st["median"], st["min"], st["max"], st["n"]) == (2.0, 1.0, 3.0, 3)


def test_workload_names_and_aliases() -> None:
    assert expand(["scale"]) == ["state_scaling", "spark_scale"]
    assert expand(["aggregates", "tc"]) == ["ordered_aggregates", "tc"]
    assert expand([]) == list(WORKLOADS)
    with pytest.raises(ValueError, match="nope"):
        expand(["nope"])


def _fake_spark_scale_size(n: int, step_s: float, actions: int, jobs: int) -> dict:
    """A `spark_scale.measure` result with made-up figures (3 timed steps after 1 warm-up)."""
    prof = [
        {
            "step": i,
            "warmup": i == 0,
            "s": step_s,
            "actions_n": actions,
            "outside_actions_s": step_s / 2,
            "actions": [{"label": "SparkTrace.append < Integrate.eval", "s": step_s / 2}],
        }
        for i in range(4)
    ]
    times = [step_s] * 3
    return {
        "n": n,
        "load_s": 1.0,
        "load_actions": actions,
        "step_s": times,
        "stats": h.stats(times),
        "step_cpu_s": times,
        "cpu_stats": h.stats(times),
        "actions_per_step": [actions] * 3,
        "actions_median": actions,
        "actions_max": actions,
        "spark_jobs_per_step": [jobs] * 3,
        "spark_jobs_median": jobs,
        "profile": prof,
    }


def test_spark_scale_reports_the_pipeline_beside_the_bare_circuit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Spark-free half of spark_scale (the smoke test skips Spark): given both systems' figures, the
    result has a table, notes and JSON entries for each, and the bare circuit's stay where they were."""
    from bench import spark_scale as ss

    def run_size(
        spark: object, n: int, steps: int, tmp: object, quiet: bool = False, systems: object = None
    ) -> dict:
        rec = h.stats([2.0, 2.0, 2.0])
        return {
            **_fake_spark_scale_size(n, 1.0, 4, 11),
            "recompute_s": [2.0] * 3,
            "recompute": rec,
            "recompute_cpu_s": [2.0] * 3,
            "recompute_cpu": rec,
            "view_rows": 1000,
            "verified": True,
            "pipeline": {**_fake_spark_scale_size(n, 4.0, 6, 22), "view_rows": 1000, "verified": True},
        }

    monkeypatch.setattr(ss, "start_spark", lambda: (types.SimpleNamespace(stop=lambda: None), {}))
    monkeypatch.setattr(ss, "run_size", run_size)
    res = ss.run(True)
    assert res["systems"] == ["dbspark (spark engine)", "dbspark pipeline", "spark sql recompute"]
    assert res["recompute_over_step_large"] == 2.0 and res["actions_per_step_max"] == 4
    p = res["pipeline"]
    assert p["recompute_over_step_large"] == 0.5 and p["actions_per_step_max"] == 6
    assert p["spark_jobs_per_step_median"] == 22 and res["spark_jobs_per_step_median"] == 11
    assert all(r == {"wall": 4.0, "cpu": 4.0} for r in p["over_bare_step_median"].values())
    assert "dbspark pipeline step (wall)" in res["table"] and "22 [max 22]" in res["table"]
    assert any(
        line.startswith("pipeline step / bare circuit step (median): @100k 4.00x") for line in res["notes"]
    )
    series = [k for panel in res["plot"] for k in panel["series"]]
    assert "dbspark pipeline @300k" in series and "dbspark spark engine @300k" in series
