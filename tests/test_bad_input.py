"""The bad-input catalogue (`docs/bad-input.md`): one test per row.

Change files: `dbspark run` over a first good step and a second step holding the fault: the run fails
with the error class and a message naming the fault in the user's names (file, table, column, row,
step), prints no traceback, leaves the directory at step 1 (nothing half-applied), and once the file
is fixed the same command goes on from step 1. The faults that reach the engine (rows a table refuses,
deletes of absent rows, weights that overflow) also run through the Pipeline API on both engines. The
pipeline files' own faults (SQL, Datalog) fail before any step. The catalogue's other rows name tests
elsewhere; a last test checks that every row of the table names a test that exists.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import dbspark
from dbspark import errors
from dbspark.cli.main import push_batch
from dbspark.io import read_changes

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = ROOT / "docs" / "bad-input.md"
SQL = """
CREATE TABLE t (k BIGINT PRIMARY KEY, name VARCHAR, amount DECIMAL(10, 2));
CREATE TABLE e (a BIGINT, b BIGINT);
CREATE VIEW v AS SELECT k, amount FROM t WHERE amount > 0;
CREATE VIEW w AS SELECT a, COUNT(*) AS n FROM e GROUP BY a;
"""
GOOD = {"t.csv": "k,name,amount\n1,x,1.50\n", "e.csv": "a,b\n1,2\n1,3\n"}
MAX = 2**63 - 1

# id -> (the second step's files, the error class, what its message says; None: no error)
CASES: dict[str, tuple[dict[str, str | bytes], str | None, str]] = {
    "unparsable-value": ({"t.csv": "k,name,amount\n2,x,abc\n"}, "CoercionError",
                         r"t\.csv: column 'amount' \(DECIMAL\(10,2\)\) cannot take the value 'abc' \(row 0\)"),
    "value-too-wide": ({"t.csv": "k,name,amount\n8,x,123456789012.00\n"}, "CoercionError",
                       r"t\.csv: column 'amount' \(DECIMAL\(10,2\)\) cannot take the value '123456789012\.00'"),
    "malformed-csv": ({"e.csv": 'a,b\n1,"2\n'}, "SchemaError", r"e\.csv: cannot read it as csv"),
    "malformed-json": ({"e.json": '{"a": 1, "b": \n'}, "SchemaError", r"e\.json: cannot read it as json"),
    "malformed-parquet": ({"e.parquet": b"PAR1 not parquet"}, "SchemaError", r"e\.parquet: cannot read it as parquet"),
    "non-utf8-text": ({"t.csv": b"k,name,amount\n3,\xff\xfe,1.00\n"}, "SchemaError",
                      r"t\.csv: cannot read it as csv: invalid utf-8"),
    "extra-column": ({"e.csv": "a,b,c\n1,2,3\n"}, "SchemaError", r"e\.csv: column\(s\) \['c'\] are not in the schema"),
    "missing-column": ({"e.csv": "a\n1\n"}, "SchemaError", r"e\.csv: missing column\(s\) \['b'\] of the schema"),
    "renamed-column": ({"e.csv": "a,bb\n1,2\n"}, "SchemaError",
                       r"e\.csv: missing column\(s\) \['b'\] of the schema; it has columns \['a', 'bb'\]"),
    "retyped-column": ({"e.csv": "a,b\n1,2.5\n"}, "CoercionError", r"e\.csv: column 'b' \(BIGINT\) cannot take the value '2\.5'"),
    "unknown-table": ({"zz.csv": "a\n1\n"}, "UnknownNameError", r"zz\.csv: no table 'zz' in the pipeline"),
    "unknown-op": ({"e.csv": "a,b,op\n1,2,upsert\n"}, "SchemaError", r"e\.csv: row 0 has op 'upsert'"),
    "null-key": ({"t.csv": "k,name,amount\n,x,1.00\n"}, "DataError",
                 r"t\.csv: table 't': column 'k' is NOT NULL but row 0"),
    "delete-of-absent-row": ({"e.csv": "a,b,op\n9,9,delete\n"}, "NegativeStateError",
                             r"step 2 rejected, nothing applied: table 'e': delete of row \(9, 9\) that is not there"),
    "delete-of-absent-key": ({"t.csv": "k,name,amount,op\n77,x,1.00,delete\n"}, "NegativeStateError",
                             r"step 2 rejected, nothing applied: table 't': delete of key \(k=77\) that is not there"),
    "weight-overflow": ({"e.csv": f"a,b,weight\n1,2,{MAX}\n1,2,{MAX}\n"}, "WeightError",
                        r"step 2 rejected, nothing applied: weight overflow"),
    "one-key-twice-in-a-batch": ({"t.csv": "k,name,amount\n5,x,1.00\n5,y,2.00\n"}, None, "the last row wins"),
    "empty-file": ({"e.csv": ""}, None, "an empty batch"),
    "empty-batch": ({"e.csv": "a,b\n"}, None, "an empty batch"),
}  # fmt: skip


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dbspark.cli", "run", *args, "--engine", "local", "--show", "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )


def _write(d: Path, files: dict[str, str | bytes]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for f in d.iterdir():
        f.unlink()
    for name, data in files.items():
        (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def _committed(state: Path) -> int:
    return json.loads((state / "checkpoint.json").read_text())["step"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_change_file_is_rejected_whole_and_the_run_goes_on_once_fixed(
    tmp_path: Path, case: str
) -> None:
    files, error, message = CASES[case]
    (tmp_path / "p.sql").write_text(SQL)
    changes, state = tmp_path / "changes", tmp_path / "state"
    _write(changes / "step-1", GOOD)
    _write(changes / "step-2", files)
    args = (str(tmp_path / "p.sql"), "--changes", str(changes), "--state", str(state))
    run = _cli(*args)
    said = " ".join((run.stdout + run.stderr).split())  # (rich wraps long lines)
    assert "Traceback" not in said
    if error is None:  # not a fault: what the catalogue says happens
        assert run.returncode == 0, said
        assert _committed(state) == 2
        return
    assert run.returncode == 1 and re.search(message, said), said
    assert _committed(state) == 1, "nothing of step 2 is applied"
    p = dbspark.Pipeline(engine="local")  # the error's class, in process
    p.sql(SQL)
    with pytest.raises(getattr(errors, error)):
        push_batch(p, changes / "step-2")
        p.step()
    _write(changes / "step-2", {"e.csv": "a,b\n4,5\n"})
    again = _cli(*args)
    assert again.returncode == 0 and "resuming after step 1" in again.stdout, again.stdout + again.stderr
    assert _committed(state) == 2


ENGINE_CASES = [
    "null-key",
    "delete-of-absent-row",
    "delete-of-absent-key",
    "weight-overflow",
    "one-key-twice-in-a-batch",
]


@pytest.mark.parametrize("case", ENGINE_CASES)
def test_rows_the_engine_refuses_reject_the_step_on_both_engines(
    engine_session: tuple[str, Any], tmp_path: Path, case: str
) -> None:
    engine, spark = engine_session
    p = (
        dbspark.Pipeline(engine=engine, spark=spark)
        if engine == "spark"
        else dbspark.Pipeline(engine="local")
    )
    p.sql(SQL)

    def push(files: dict[str, str | bytes], d: Path) -> None:
        _write(d, files)
        for f in sorted(d.iterdir()):
            table = f.stem
            rows, weights = read_changes(f, p.circuit.nodes[p.circuit.inputs[table]].shape.schema)
            p.push(table, rows, weights)

    push(GOOD, tmp_path / "1")
    p.step()
    before = {v: p.view(v).to_dict() for v in p.views}
    files, error, message = CASES[case]
    if error is None:
        push(files, tmp_path / "2")
        p.step()
        assert p.view("v").to_dict() == {(1, Decimal("1.50")): 1, (5, Decimal("2.00")): 1}
        return
    with pytest.raises(getattr(errors, error), match=message.split(": ", 1)[-1]):
        push(files, tmp_path / "2")
        p.step()
    assert {v: p.view(v).to_dict() for v in p.views} == before and p.steps == 1
    push({"e.csv": "a,b\n4,5\n"}, tmp_path / "3")
    p.step()
    assert p.view("w").to_dict()[(4, 1)] == 1 and p.steps == 2
    p.close()


@pytest.fixture(params=["local", "spark"])
def engine_session(request: pytest.FixtureRequest) -> tuple[str, Any]:
    if request.param == "spark":
        request.applymarker(pytest.mark.spark)
        return "spark", request.getfixturevalue("spark_session")
    return "local", None


PIPELINE_FILES = {
    "sql-syntax-error": ("p.sql", "CREATE TABLE e (a BIGINT, b BIGINT);\nCREATE VIEW w AS SELEC a FROM e;\n",
                         r"SQL syntax error: .* \(line 2, column \d+\)"),
    "sql-unknown-column": ("p.sql", "CREATE TABLE e (a BIGINT, b BIGINT);\nCREATE VIEW bad AS SELECT c FROM e;\n",
                           r"unknown column c; the columns here are \['e\.a', 'e\.b'\] at line 2"),
    "datalog-unstratifiable": ("p.dl", ".decl e(a: number, b: number)\n.input e\n.decl r(a: number)\n"
                               "r(x) :- e(x, y), !r(y).\n.output r\n",
                               r"cannot be stratified: r depends on itself through negation .*\(line 4, column \d+\)"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(PIPELINE_FILES))
def test_a_bad_pipeline_file_fails_before_any_step_naming_the_line(tmp_path: Path, case: str) -> None:
    name, text, message = PIPELINE_FILES[case]
    (tmp_path / name).write_text(text)
    _write(tmp_path / "changes" / "step-1", {"e.csv": "a,b\n1,2\n"})
    run = _cli(
        str(tmp_path / name), "--changes", str(tmp_path / "changes"), "--state", str(tmp_path / "state")
    )
    said = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 1 and re.search(message, said) and "Traceback" not in said, said
    assert not (tmp_path / "state" / "checkpoint.json").exists()


def test_every_row_of_the_catalogue_names_a_test_that_exists() -> None:
    rows = [
        ln for ln in CATALOGUE.read_text().splitlines() if ln.startswith("| ") and not ln.endswith("| test |")
    ]
    assert len(rows) >= len(CASES) + len(PIPELINE_FILES)
    named = set()
    for row in rows:
        test = row.rstrip(" |").rsplit("|", 1)[-1].strip().strip("`")
        path, _, name = test.partition("::")
        named.add(name)
        if path == "tests/test_bad_input.py":
            assert name in CASES or name in PIPELINE_FILES, row
        else:
            assert re.search(rf"^def {re.escape(name)}\(", (ROOT / path).read_text(), re.M), row
    assert set(CASES) | set(PIPELINE_FILES) <= named, "every case is in the catalogue"
