"""Checkpoints in open formats (`circuit/checkpoint.py`, `codec.py`): no pickle anywhere in the package;
the codec round-trips the state's values, keeps shared objects shared, and refuses what it cannot
store or must not build; a checkpoint that does not read back exactly (truncated, corrupted, a frame
file missing or changed, another format version, the old pickle format) is a
`CheckpointError` naming the file, and the directory is left as it was; a directory is held by one
open pipeline at a time, in this process or another."""

from __future__ import annotations

import ast
import datetime as dt
import hashlib
import json
import math
import shutil
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dbspark
from dbspark import codec
from dbspark.circuit import checkpoint
from dbspark.errors import CheckpointError

ROOT = Path(__file__).resolve().parents[1]

# ---- no pickle -------------------------------------------------------------------------------------

UNSAFE = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "shelve", "marshal", "joblib"}


def test_no_module_of_the_package_imports_pickle() -> None:
    found = []
    for f in sorted((ROOT / "dbspark").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{f.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in UNSAFE]
    assert not found, found


# ---- the codec -------------------------------------------------------------------------------------

plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
    | st.decimals(allow_nan=False, allow_infinity=False, places=4)
    | st.binary(max_size=5)
    | st.dates()
    | st.datetimes().map(lambda t: t.replace(fold=0))  # (no value of a frame has a fold)
    | st.times().map(lambda t: t.replace(fold=0))
    | st.timedeltas(),
    lambda inner: (
        st.tuples(inner, inner)
        | st.lists(inner, max_size=3)
        | st.dictionaries(
            st.tuples(st.integers(), st.text(max_size=2)) | st.text(max_size=3), inner, max_size=3
        )
        | st.frozensets(st.integers(), max_size=3)
        | st.sets(st.text(max_size=2), max_size=3)
    ),
    max_leaves=12,
)


def _roundtrip(value: Any) -> Any:
    frames: list[pl.DataFrame] = []

    def out(df: pl.DataFrame) -> int:
        frames.append(df)
        return len(frames) - 1

    tree = json.loads(json.dumps(codec.encode(value, out), allow_nan=False))
    return codec.decode(tree, lambda ref: frames[ref])


def _shape(v: Any) -> Any:
    """`v` with the type of every part (1, 1.0 and True stay apart; -0.0 and 0.0 too)."""
    if isinstance(v, (set, frozenset)):
        return type(v).__name__, sorted(repr(_shape(x)) for x in v)
    if isinstance(v, dict):
        return "dict", [(_shape(k), _shape(x)) for k, x in v.items()]
    if isinstance(v, (list, tuple)):
        return type(v).__name__, [_shape(x) for x in v]
    return type(v).__name__, repr(v)


@settings(max_examples=200, deadline=None)
@given(value=plain)
def test_plain_values_round_trip_with_their_types(value: Any) -> None:
    back = _roundtrip(value)
    assert back == value and _shape(back) == _shape(value)
    assert codec.loads(codec.dumps(value)) == value


def test_floats_frames_arrays_and_shared_objects() -> None:
    shared: list[Any] = [1]
    loop: dict[str, Any] = {}
    loop["self"] = loop
    value = {
        "floats": [math.inf, -math.inf, -0.0, 1e308],
        "frame": pl.DataFrame(
            {"a": [1, None], "d": [Decimal("1.50"), None]}, schema_overrides={"d": pl.Decimal(38, 2)}
        ),
        "series": pl.Series("s", ["x", None]),
        "schema": pl.Schema({"k": pl.Int64(), "t": pl.Datetime("us", "UTC")}),
        "dtype": pl.List(pl.String()),
        "hashes": np.array([2**64 - 1, 0], dtype=np.uint64),
        "matrix": np.arange(6, dtype=np.int32).reshape(2, 3),
        "scalar": np.uint64(2**63),
        "twice": (shared, shared),
        "loop": loop,
        "nan": math.nan,
    }
    back = _roundtrip(value)
    assert back["floats"] == value["floats"] and math.copysign(1, back["floats"][2]) == -1
    assert math.isnan(back["nan"])
    assert back["frame"].equals(value["frame"]) and back["frame"].schema == value["frame"].schema
    assert back["series"].equals(value["series"]) and back["series"].name == "s"
    assert back["schema"] == value["schema"] and back["dtype"] == value["dtype"]
    for k in ("hashes", "matrix"):
        assert back[k].dtype == value[k].dtype and (back[k] == value[k]).all()
    back["hashes"][0] = 1  # writable, as the state's arrays were
    assert type(back["scalar"]) is np.uint64 and back["scalar"] == value["scalar"]
    assert back["twice"][0] is back["twice"][1], "a shared list stays shared"
    assert back["loop"]["self"] is back["loop"], "a cycle decodes"


class UsersAccumulator:
    pass


@pytest.mark.parametrize("value", [UsersAccumulator(), print, lambda x: x, object(), np.array([object()])])
def test_values_the_codec_does_not_store_are_refused_naming_their_type(value: Any) -> None:
    with pytest.raises(codec.CodecError, match="cannot be stored"):
        codec.encode({"k": [value]}, lambda df: 0)


@pytest.mark.parametrize(
    "tree, why",
    [
        ({"O": "os:system", "V": {}}, "not one of dbspark's classes"),
        ({"O": "subprocess:Popen", "V": {}}, "not one of dbspark's classes"),
        ({"O": "dbspark.codec:no_such_class", "V": {}}, "does not have"),
        ({"O": "dbspark.codec:decode", "V": {}}, "not a class"),
        ({"E": "dbspark.codec:CodecError", "V": "x"}, "as an enum, which it is not"),
        ({"G": ["|O", 1]}, "NumPy scalar"),
        ({"L": [{"R": 7}]}, "does not decode"),
        ({"??": 1}, "not a node"),
        ([1, 2], "not a node"),
    ],
)
def test_trees_that_name_anything_else_are_refused(tree: Any, why: str) -> None:
    with pytest.raises(codec.CodecError, match=why):
        codec.decode(tree, lambda ref: pl.DataFrame())


def test_a_user_aggregate_whose_accumulator_cannot_be_stored_names_the_aggregate() -> None:
    from dbspark.ir.aggregate import UserAggregate

    c = dbspark.Circuit()
    t = c.input("t", {"g": "int64", "x": "int64"})
    agg = UserAggregate(
        "boxed",
        f=lambda x: UsersAccumulator(),
        g=lambda a, b: a,
        d=lambda a, b: a,
        r=lambda a: 0,
        dtype="int64",
    )
    c.output("v", t.aggregate("g", b=(agg, "x")))
    rt = c.incrementalize().run("local")
    rt.insert("t", [(1, 2)])
    with pytest.raises(dbspark.errors.UnsupportedError, match="user aggregate 'boxed'.*UsersAccumulator"):
        rt.step()


# ---- checkpoints on disk ---------------------------------------------------------------------------

SQL = """
CREATE TABLE r (k BIGINT, g BIGINT);
CREATE TABLE s (k BIGINT PRIMARY KEY, v BIGINT);
CREATE TABLE e (a BIGINT, b BIGINT);
CREATE VIEW j AS SELECT g, COUNT(*) AS n, SUM(v) AS sv, MIN(v) AS lo FROM r JOIN s USING (k) GROUP BY g;
CREATE VIEW top AS SELECT k, v FROM s ORDER BY v DESC, k LIMIT 2;
CREATE VIEW reach AS WITH RECURSIVE p(x, y) AS (SELECT a, b FROM e UNION SELECT p.x, e.b FROM p JOIN e ON p.y = e.a)
SELECT x, y FROM p;
"""


def _open(d: Path, engine: str, spark: Any, sql: str = SQL) -> dbspark.Pipeline:
    p = (
        dbspark.Pipeline(d, engine=engine, spark=spark)
        if engine == "spark"
        else dbspark.Pipeline(d, engine="local")
    )
    p.sql(sql)
    return p


def _views(p: dbspark.Pipeline) -> dict[str, Any]:
    return {v: p.view(v).to_dict() for v in p.views}


def _files(d: Path) -> dict[str, str]:
    """Every file under `d` (but the lock) and the SHA-256 of its bytes."""
    return {
        str(f.relative_to(d)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(d.rglob("*"))
        if f.is_file() and f.name != checkpoint.DirectoryLock.NAME
    }


@pytest.fixture(params=["local", "spark"])
def engine_session(request: pytest.FixtureRequest) -> tuple[str, Any]:
    if request.param == "spark":
        request.applymarker(pytest.mark.spark)
        return "spark", request.getfixturevalue("spark_session")
    return "local", None


@pytest.fixture
def written(
    engine_session: tuple[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, dict[str, Any]]:
    """A pipeline's directory after two steps, every frame in a file, and its views."""
    monkeypatch.setattr(checkpoint, "MIN_ROWS", 1)
    d = tmp_path / "p"
    with _open(d, *engine_session) as p:
        p.insert("r", [(k, k % 3) for k in range(20)])
        p.insert("s", [(k, 10 * k) for k in range(8)])
        p.insert("e", [(1, 2), (2, 3), (3, 1), (4, 5)])
        p.step()
        p.delete("e", [(3, 1)])
        p.insert("r", [(3, 7)])
        p.step()
        views = _views(p)
    return d, views


def _manifest(d: Path) -> Path:
    return d / "checkpoint.json"


def _frame_file(d: Path) -> Path:
    return next(iter(sorted((d / checkpoint.FRAMES).iterdir(), key=lambda f: f.stat().st_size)))


def _reseal(d: Path, change: Callable[[dict[str, Any]], None]) -> None:
    body = json.loads(_manifest(d).read_bytes())
    del body["sha256"]
    change(body)
    _manifest(d).write_bytes(checkpoint._sealed(body))


def _flip(f: Path, at: float = 0.5) -> None:
    data = bytearray(f.read_bytes())
    i = int(len(data) * at)
    data[i] = ord("7") if data[i] != ord("7") else ord("8")
    f.write_bytes(bytes(data))


FAULTS: dict[str, tuple[Callable[[Path], Any], str]] = {
    "manifest truncated": (
        lambda d: _manifest(d).write_bytes(_manifest(d).read_bytes()[:300]),
        "checkpoint.json",
    ),
    "manifest changed": (  # still JSON, still a checkpoint, one step later
        lambda d: _manifest(d).write_bytes(_manifest(d).read_bytes().replace(b'"step":2', b'"step":3')),
        "checkpoint.json is corrupted: its checksum",
    ),
    "manifest garbled": (lambda d: _flip(_manifest(d), 0.6), "checkpoint.json"),
    "manifest empty": (lambda d: _manifest(d).write_bytes(b""), "checkpoint.json"),
    "not a checkpoint": (
        lambda d: _manifest(d).write_text('{"tables": []}'),
        "checkpoint.json is not a dbspark",
    ),
    "another version": (
        lambda d: _reseal(d, lambda b: b.update(version=99)),
        "checkpoint.json has format version 99",
    ),
    "a frame file missing": (lambda d: _frame_file(d).unlink(), r"frames/[0-9a-f]+\.arrows"),
    "a frame file changed": (lambda d: _flip(_frame_file(d)), r"frames/[0-9a-f]+\.arrows.*checksum"),
    "a frame file truncated": (
        lambda d: _frame_file(d).write_bytes(_frame_file(d).read_bytes()[:-9]),
        r"frames/[0-9a-f]+\.arrows",
    ),
    "a state file missing": (  # the spark engine's traces' runs; the local engine's frame files
        lambda d: (
            next(f for f in sorted((d / "state" / "traces").rglob("*.arrow"))).unlink()
            if (d / "state").is_dir()
            else _frame_file(d).unlink()
        ),
        r"traces/[0-9a-f]+\.[0-9a-f]+/.*\.arrow is missing|frames/[0-9a-f]+\.arrows of checkpoint",
    ),
    "a class it does not have": (
        lambda d: _reseal(d, lambda b: b.update(state={"O": "os:system", "V": {}})),
        "checkpoint.json does not hold dbspark's state.*os:system",
    ),
    "the pickle of an earlier version": (
        lambda d: _manifest(d).rename(d / "checkpoint.pkl"),
        "checkpoint.pkl is the checkpoint of an earlier version",
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_checkpoint_that_does_not_read_back_is_refused_naming_the_file_and_left_as_it_was(
    written: tuple[Path, dict[str, Any]], engine_session: tuple[str, Any], tmp_path: Path, fault: str
) -> None:
    d, views = written
    kept = tmp_path / "kept"
    shutil.copytree(d, kept)
    damage, message = FAULTS[fault]
    damage(d)
    before = _files(d)
    p = _open(d, *engine_session)
    with pytest.raises(CheckpointError, match=message):
        p.steps  # noqa: B018 (opening the pipeline reads its checkpoint)
    p.close()
    assert _files(d) == before, "the directory is left as it was"
    shutil.rmtree(d)
    shutil.copytree(kept, d)
    with _open(d, *engine_session) as q:  # the undamaged copy still opens, where it was
        assert q.steps == 2 and _views(q) == views


def test_a_checkpoint_of_other_views_reopens_with_the_changed_view_backfilled(
    written: tuple[Path, dict[str, Any]], engine_session: tuple[str, Any]
) -> None:
    """Opened with a definition whose view `top` changed (LIMIT 3) and `reach` dropped: the other view's
    state is restored, `top` is backfilled from the tables' contents, and the state the checkpoint names
    stays until a step commits: opened with the first definition again, the pipeline is as written
    (issue 18, item 3; `tests/test_evolving_views.py` checks changed definitions at random)."""
    d, views = written
    sql = SQL.replace("LIMIT 2", "LIMIT 3").split("CREATE VIEW reach")[0]
    p = _open(d, *engine_session, sql=sql)
    assert p.steps == 2 and p.views == ["j", "top"]
    assert p.view("j").to_dict() == views["j"]
    assert sorted(k for k, _ in p.view("top").to_dict()) == [5, 6, 7]
    p.close()
    with _open(d, *engine_session) as q:  # and the first definition again: as written
        assert q.steps == 2 and _views(q) == views


def test_the_manifest_is_json_with_its_format_fingerprint_and_checksums(
    written: tuple[Path, dict[str, Any]],
) -> None:
    d, _ = written
    body = json.loads(_manifest(d).read_bytes())
    assert (
        body["format"] == "dbspark-checkpoint" and body["version"] == checkpoint.VERSION and body["step"] == 2
    )
    assert len(body["circuit"]) == 64 and len(body["sha256"]) == 64
    on_disk = {f.name for f in (d / checkpoint.FRAMES).iterdir()}
    assert set(body["frames"]) == on_disk and on_disk
    for name, meta in body["frames"].items():
        data = (d / checkpoint.FRAMES / name).read_bytes()
        assert meta == {"crc32": zlib.crc32(data), "bytes": len(data)}


# ---- one pipeline per directory --------------------------------------------------------------------

LOCAL_SQL = "CREATE TABLE t (k BIGINT); CREATE VIEW v AS SELECT k FROM t WHERE k > 1;"


def test_a_directory_is_held_by_one_open_pipeline_in_this_process(tmp_path: Path) -> None:
    a = _open(tmp_path, "local", None, LOCAL_SQL)
    a.insert("t", [(2,)])
    a.step()
    b = _open(tmp_path, "local", None, LOCAL_SQL)
    with pytest.raises(CheckpointError, match=r"is in use by process \d+ on .* \(this process"):
        b.steps  # noqa: B018
    a.close()
    assert b.steps == 1 and b.view("v").to_dict() == {(2,): 1}
    b.close()


def test_a_directory_held_by_another_process_is_refused_naming_it(tmp_path: Path) -> None:
    holder = textwrap.dedent(
        f"""
        import sys, dbspark
        p = dbspark.Pipeline({str(tmp_path)!r}, engine="local")
        p.sql({LOCAL_SQL!r})
        p.insert("t", [(5,)])
        p.step()
        print("held", flush=True)
        sys.stdin.read()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        p = _open(tmp_path, "local", None, LOCAL_SQL)
        with pytest.raises(CheckpointError, match=rf"in use by process {proc.pid} on "):
            p.steps  # noqa: B018
        p.close()
    finally:
        proc.communicate("", timeout=60)
    with _open(tmp_path, "local", None, LOCAL_SQL) as q:  # released when its holder ended
        assert q.steps == 1 and q.view("v").to_dict() == {(5,): 1}


def test_dates_decimals_and_user_aggregates_survive_a_reopen(tmp_path: Path) -> None:
    sql = """
    CREATE TABLE t (g BIGINT, d DATE, x DECIMAL(30, 4));
    CREATE VIEW v AS SELECT g, MAX(d) AS last, SUM(x) AS total FROM t GROUP BY g;
    """
    rows = [
        (1, dt.date(2020, 1, 2), Decimal("12345678901234567890.1234")),
        (1, dt.date(1999, 5, 6), Decimal("-1")),
    ]
    with _open(tmp_path, "local", None, sql) as p:
        p.insert("t", rows)
        p.step()
        want = _views(p)
    with _open(tmp_path, "local", None, sql) as q:
        assert _views(q) == want
        q.delete("t", rows[:1])
        q.step()
        assert q.view("v").to_dict() == {(1, dt.date(1999, 5, 6), Decimal("-1.0000")): 1}


def test_an_empty_float_aggregate_reopens(tmp_path: Path, engine_session: tuple[str, Any]) -> None:
    """A floating-point AVG whose groups are all empty keeps an empty trace of the rows it emitted; its
    checkpoint stored None for it (an empty trace is falsy), and reopening failed (found by the
    evolving-views oracle across restarts)."""
    sql = "CREATE TABLE t (k BIGINT, x DOUBLE); CREATE VIEW a AS SELECT k, avg(x) AS m FROM t WHERE x > 1 GROUP BY k;"
    with _open(tmp_path, *engine_session, sql=sql) as p:
        p.insert("t", [(1, 0.5)])
        p.step()
    with _open(tmp_path, *engine_session, sql=sql) as q:
        assert q.steps == 1
        q.insert("t", [(1, 2.5)])
        q.step()
        assert q.view("a").to_dict() == {(1, 2.5): 1}
