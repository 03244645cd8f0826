"""Metrics per operator and step (`circuit/metrics.py`, `Pipeline(metrics=True)`, `dbspark run --metrics`):
rows in and out match the changes pushed and emitted, state rows match the traces the operators hold,
both engines; metrics off is a clear error."""

from __future__ import annotations

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
