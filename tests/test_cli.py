"""The `dbspark` command's own surface: its version and what its help says a pipeline file is."""

from __future__ import annotations

import re

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


def test_a_missing_pipeline_file_is_a_one_line_error(tmp_path) -> None:
    for args in (
        ["explain", str(tmp_path / "nope.sql")],
        ["run", str(tmp_path / "nope.sql"), "--changes", "."],
    ):
        r = CliRunner().invoke(app, args, terminal_width=200)
        assert r.exit_code == 2
        text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", r.output).split())  # the message boxed and wrapped
        assert "does not exist" in text and "Traceback" not in text


def test_an_unexpected_error_is_one_line_and_status_1(tmp_path) -> None:
    f = tmp_path / "bad.py"
    f.write_text("def define(p):\n    raise ValueError('boom\\nsecond line')\n")
    r = CliRunner().invoke(app, ["explain", str(f)], terminal_width=200)
    assert r.exit_code == 1
    assert "error: ValueError: boom" in r.output and "second line" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_ctrl_c_during_a_step_keeps_the_committed_steps(tmp_path, monkeypatch) -> None:
    """An interrupt rolls the step in progress back (the runtime's step is atomic) and exits 130; a rerun
    on the state directory resumes after the last committed step."""
    sql = tmp_path / "p.sql"
    sql.write_text("CREATE TABLE t (a BIGINT); CREATE VIEW v AS SELECT a FROM t;")
    changes = tmp_path / "changes"
    for i in (1, 2, 3):
        (changes / str(i)).mkdir(parents=True)
        (changes / str(i) / "t.csv").write_text(f"a,weight\n{i},1\n")
    from dbspark.pipeline import Pipeline

    real_step = Pipeline.step

    def step(self, *a, **kw):
        if self.steps == 1:
            raise KeyboardInterrupt
        return real_step(self, *a, **kw)

    state = tmp_path / "state"
    args = ["run", str(sql), "--changes", str(changes), "--engine", "local", "--state", str(state)]
    monkeypatch.setattr(Pipeline, "step", step)
    r = CliRunner().invoke(app, args, terminal_width=200)
    assert r.exit_code == 130 and "interrupted" in r.output
    monkeypatch.setattr(Pipeline, "step", real_step)
    r = CliRunner().invoke(app, args, terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "resuming after step 1" in r.output


def test_steps_are_numbered_from_1_everywhere(tmp_path) -> None:
    """The first change directory is step 1 in the printed changes, in the output files and in errors."""
    sql = tmp_path / "p.sql"
    sql.write_text("CREATE TABLE t (a BIGINT); CREATE VIEW v AS SELECT a FROM t;")
    changes = tmp_path / "changes"
    for name, body in (("1", "a,weight\n1,1\n"), ("2", "a,weight\n5,-1\n")):  # step 2 deletes a missing row
        (changes / name).mkdir(parents=True)
        (changes / name / "t.csv").write_text(body)
    out = tmp_path / "out"
    args = ["run", str(sql), "--changes", str(changes), "--engine", "local", "--output", str(out)]
    r = CliRunner().invoke(app, args, terminal_width=200)
    assert r.exit_code == 1
    assert "step 1: v, 1 changed row(s)" in r.output
    assert "step 2 rejected" in r.output
    assert [p.name for p in (out / "v").iterdir()] == ["step-00000001.parquet"]
