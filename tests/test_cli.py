"""The `dbspark` command's own surface: its version and what its help says a pipeline file is."""

from __future__ import annotations

from typer.testing import CliRunner

import dbspark
from dbspark.cli.main import app


def test_version() -> None:
    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0
    assert r.output.strip() == f"dbspark {dbspark.__version__}"


def test_run_help_names_the_pipeline_kinds() -> None:
    r = CliRunner().invoke(app, ["run", "--help"], terminal_width=200)
    assert r.exit_code == 0
    for kind in (".sql", ".dl", ".py"):
        assert kind in r.output
