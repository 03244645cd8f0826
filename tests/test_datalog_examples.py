"""The Datalog examples under examples/datalog run step by step (as `dbspark run` does) on the local
engine (and one on Spark), and after every step each output view equals the naive evaluator on the
current facts."""

from __future__ import annotations

from pathlib import Path

import pytest

import dbspark
from dbspark.cli.main import app, load_pipeline, push_batch, step_dirs
from dbspark.frontends.datalog.check import check
from dbspark.frontends.datalog.files import fact_file, read_facts
from dbspark.frontends.datalog.parser import parse
from dbspark.io import list_batches, read_changes
from dbspark.testing.datalog import evaluate

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "datalog"
PROGRAMS = sorted(EXAMPLES.glob("*/*.dl"))


def test_there_are_four_examples():
    assert {p.parent.name for p in PROGRAMS} == {
        "transitive_closure",
        "same_generation",
        "points_to",
        "unreachable",
    }


CASES = [(p, "local") for p in PROGRAMS] + [(p, "spark") for p in PROGRAMS if p.parent.name == "unreachable"]


@pytest.mark.parametrize("program,engine", CASES, ids=lambda x: x.parent.name if isinstance(x, Path) else x)
def test_example_against_naive_evaluator(request, program: Path, engine: str):
    text = program.read_text()
    checked = check(parse(text))
    inputs = {n: r for n, r in checked.relations.items() if r.origin == "input"}
    outputs = [n for n, r in checked.relations.items() if r.output]
    state: dict[str, set[tuple]] = {}
    for n, r in inputs.items():
        f = fact_file(r, program.parent)
        state[n] = set(read_facts(f, r).rows()) if f is not None else set()
    assert any(state.values()), "the example loads its input data"
    if engine == "spark":
        p = dbspark.Pipeline(engine="spark", spark=request.getfixturevalue("spark_session"))
    else:
        p = dbspark.Pipeline(engine="local")
    load_pipeline(program, p)
    steps = step_dirs(program.parent / "changes")
    assert len(steps) >= 3
    changed = set()
    for d in steps:
        push_batch(p, d)
        for f in list_batches(d):
            rows, weights = read_changes(f, inputs[f.stem].schema)
            for row, w in zip(rows.rows(), weights, strict=True):
                changed.add(w)
                state[f.stem] = state[f.stem] | {row} if w > 0 else state[f.stem] - {row}
        p.step()
        want = evaluate(text, state)
        for o in outputs:
            got = p.view(o).to_dict()
            assert got == {r: 1 for r in want[o]}, f"{program.name} after {d.name}: view {o}"
    assert changed == {1, -1}, "the changes insert and delete facts"
    p.close()


def test_cli_runs_a_datalog_program(tmp_path):
    from typer.testing import CliRunner

    prog = EXAMPLES / "transitive_closure" / "tc.dl"
    r = CliRunner().invoke(
        app,
        [
            "run",
            str(prog),
            "--changes",
            str(prog.parent / "changes"),
            "--engine",
            "local",
            "--output",
            str(tmp_path / "out"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "views after 3 steps" in r.output.replace("\n", " ").replace("  ", " ") or "path" in r.output
    assert sorted(x.name for x in (tmp_path / "out" / "path").iterdir())[:1] == ["step-00000001.parquet"]


def test_cli_reports_datalog_errors(tmp_path):
    from typer.testing import CliRunner

    bad = tmp_path / "bad.dl"
    bad.write_text(".decl e(x: number)\n.input e\n.decl p(x: number)\n.output p\np(x) :- e(x), !p(x).\n")
    (tmp_path / "changes" / "1").mkdir(parents=True)
    r = CliRunner().invoke(
        app, ["run", str(bad), "--changes", str(tmp_path / "changes"), "--engine", "local"]
    )
    assert r.exit_code == 1
    assert "cannot be stratified" in r.output
