"""Metrics per operator and step (`circuit/metrics.py`, `Pipeline(metrics=True)`, `dbspark run --metrics`):
rows in and out match the changes pushed and emitted, state rows match the traces the operators hold,
both engines; metrics off is a clear error."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from dbspark.cli.main import app
from dbspark.errors import UnsupportedError
from dbspark.testing.engines import pipeline_on

DDL = "CREATE TABLE t (k INTEGER, x INTEGER); CREATE VIEW v AS SELECT k, SUM(x) AS s, COUNT(*) AS n FROM t GROUP BY k;"
ORDERS = Path(__file__).parent.parent / "examples" / "orders"


def test_rows_and_state_per_operator_and_step(engine) -> None:
    p = pipeline_on(engine, metrics=True)
    try:
        p.sql(DDL)
        p.insert("t", [(k % 4, k) for k in range(40)])
        first = p.step()["v"].to_dict()
        p.insert("t", [(9, 1), (9, 2)])
        p.delete("t", [(0, 0)])
        second = p.step()["v"].to_dict()
        m = p.metrics()
        assert set(m.columns) >= {"step", "node", "operator", "family", "ms", "rows_in", "rows_out"}
        assert m["step"].unique().sort().to_list() == [1, 2]
        nodes = m.filter(pl.col("step") == 2)
        assert nodes.height == m.height // 2 and nodes["node"].n_unique() == nodes.height
        assert (m["ms"] >= 0).all()
        source = m.filter(pl.col("family") == "source")
        assert source["rows_out"].to_list() == [40, 3]  # the rows pushed into t, step by step
        out = m.filter(pl.col("node") == nodes["node"][-1])  # the view's last operator: its change
        assert out["rows_out"].to_list() == [len(first), len(second)]
        agg = nodes.filter(pl.col("operator").str.starts_with("aggregate"))
        assert agg.height == 1 and agg["state_rows"][0] >= 5  # a row per group at least (0-3, 9)
        held = nodes["state_rows"].drop_nulls().sum()
        assert (
            0 < held <= p.state_rows()
        )  # the operators' traces (the table's check and the view: not theirs)
        assert nodes.filter(pl.col("state_rows").is_not_null())["state_bytes"].drop_nulls().min() > 0
    finally:
        p.close()


def test_metrics_off_is_a_clear_error() -> None:
    p = pipeline_on("local")
    try:
        p.sql(DDL)
        p.step()
        with pytest.raises(UnsupportedError, match=r"metrics are off: .*Pipeline\(\.\.\., metrics=True\)"):
            p.metrics()
    finally:
        p.close()


def test_run_prints_the_operators_table() -> None:
    args = ["run", str(ORDERS / "pipeline.sql"), "--changes", str(ORDERS / "changes"), "--engine", "local"]
    r = CliRunner().invoke(app, [*args, "--metrics"], terminal_width=200)
    assert r.exit_code == 0, r.output
    steps = len([d for d in (ORDERS / "changes").iterdir() if d.is_dir()])
    assert f"operators over {steps} steps" in r.output and "stream_join" in r.output
    r = CliRunner().invoke(app, args, terminal_width=200)
    assert r.exit_code == 0 and "operators over" not in r.output


TC = (
    ".decl edge(x: number, y: number) .input edge\n.decl path(x: number, y: number) .output path\n"
    "path(x, y) :- edge(x, y).\npath(x, y) :- path(x, z), edge(z, y).\n"
)


@pytest.mark.parametrize("recursion", ["auto", "nested"])
def test_a_recursive_scope_says_how_its_step_ran(engine, recursion: str) -> None:
    """`how` names the way each step of a recursive scope ran, with its iterations (NULL for every other
    operator): the load a fresh run, an insert semi-naive evaluation continued, a delete
    delete-and-rederive, a step `auto` chose to recompute (forced here) recomputed; nested throughout."""
    p = pipeline_on(engine, metrics=True, recursion=recursion)
    try:
        p.datalog(TC, closure_operator=False)
        p.insert("edge", [(i, i + 1) for i in range(6)])
        p.step()
        p.insert("edge", [(6, 7)])
        p.step()
        p.delete("edge", [(2, 3)])
        p.step()
        assert p.runtime is not None
        scopes = [s for s in p.runtime.states.values() if hasattr(s, "how")]
        if recursion == "auto":
            (scope,) = scopes
            scope.skip = 1  # (this step recomputes)
        p.insert("edge", [(2, 3)])
        p.step()
        m = p.metrics()
        ways = m.filter(pl.col("how").is_not_null())
        assert ways["node"].n_unique() == 1 and ways.height == 4  # the scope, at each step
        want = (
            ["fresh run", "semi-naive", "delete-and-rederive", "recomputed"]
            if recursion == "auto"
            else ["nested"] * 4
        )
        assert [w.split(",")[0] for w in ways.sort("step")["how"]] == want
        assert all(re.fullmatch(r"[a-z -]+, \d+ iterations", w) for w in ways["how"])
        assert p.view("path").to_dict() == {(x, y): 1 for x in range(8) for y in range(x + 1, 8)}
        # its state: the traces of its body (each of the 28 facts held at least once), not only the
        # imports' (the 7 edges)
        held = ways.sort("step")["state_rows"][-1]
        assert 28 + 7 <= held <= p.state_rows()
    finally:
        p.close()


def test_run_prints_how_a_recursive_scope_ran(tmp_path: Path) -> None:
    from dbspark.testing.datalog import REACH_FROM_ROOTS

    (tmp_path / "reach.dl").write_text(REACH_FROM_ROOTS)
    step = tmp_path / "changes" / "1"
    step.mkdir(parents=True)
    (step / "edge.csv").write_text("x,y\n0,1\n1,2\n2,3\n")
    (step / "root.csv").write_text("x\n0\n")
    args = ["run", str(tmp_path / "reach.dl"), "--changes", str(tmp_path / "changes"), "--engine", "local"]
    r = CliRunner().invoke(app, [*args, "--metrics"], env={"COLUMNS": "220"})
    assert r.exit_code == 0, r.output
    assert "last step" in r.output and re.search(r"fresh run, \d+ iterations", r.output), r.output
