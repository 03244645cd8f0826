"""Checkpoints whose large frames are Arrow files written once (`circuit/checkpoint.py`), on the local
engine: a pipeline reopened at any step equals one that never stopped, a step writes only its new
frames, the files no committed checkpoint names are deleted, and a checkpoint that fails before its
commit leaves the previous one whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.circuit import checkpoint

SQL = """
CREATE TABLE r (k BIGINT, g BIGINT);
CREATE TABLE s (k BIGINT PRIMARY KEY, v BIGINT);
CREATE VIEW j AS SELECT g, COUNT(*) AS n, SUM(v) AS sv, MIN(v) AS lo FROM r JOIN s USING (k) GROUP BY g;
CREATE VIEW d AS SELECT DISTINCT g FROM r WHERE k > 2;
CREATE VIEW top AS SELECT k, v FROM s ORDER BY v DESC, k LIMIT 2;
"""
row = st.tuples(st.integers(0, 6), st.integers(0, 3))
steps = st.lists(
    st.tuples(st.lists(row, max_size=6), st.lists(st.integers(0, 30), max_size=3)), min_size=1, max_size=6
)


@pytest.fixture
def every_frame_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint, "MIN_ROWS", 1)


def _frames(d: Path) -> set[str]:
    f = d / checkpoint.FRAMES
    return set(os.listdir(f)) if f.is_dir() else set()


def _views(p: dbspark.Pipeline) -> dict:
    return {v: p.view(v).to_dict() for v in p.views}


def _opened(d: Path, rows: int = 0) -> dbspark.Pipeline:
    """The pipeline on directory `d`, with `rows` rows inserted into r by a first step if it has none."""
    p = dbspark.Pipeline(d, engine="local")
    p.sql(SQL)
    if rows:
        p.insert("r", [(k, k % 3) for k in range(rows)])
        p.step()
    return p


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=steps, reopen=st.lists(st.booleans(), min_size=6, max_size=6))
def test_reopened_at_any_step_equals_a_pipeline_that_never_stopped(
    every_frame_a_file: None, tmp_path_factory: pytest.TempPathFactory, steps: list, reopen: list
) -> None:
    d = tmp_path_factory.mktemp("ckpt")
    mem = dbspark.Pipeline(engine="local")
    mem.sql(SQL)
    p = dbspark.Pipeline(d, engine="local")
    p.sql(SQL)
    rows: list[tuple] = []
    for (ins, dels), again in zip(steps, reopen, strict=False):
        gone = sorted({i % len(rows) for i in dels}) if rows else []
        out = [rows[i] for i in gone]
        rows = [r for i, r in enumerate(rows) if i not in gone] + ins
        for q in (mem, p):
            if out:
                q.delete("r", out)
            if ins:
                q.insert("r", ins)
                q.insert("s", [(k, g * 10 + k) for k, g in ins])
        assert {v: c.to_dict() for v, c in p.step().items()} == {
            v: c.to_dict() for v, c in mem.step().items()
        }
        if again:
            p.close()
            p = _opened(d)
            assert _views(p) == _views(mem)
        assert _frames(d) or not rows, "the state's frames are files"
    p.close()


def test_a_step_writes_its_new_frames_and_old_ones_are_deleted(
    every_frame_a_file: None, tmp_path: Path
) -> None:
    p = _opened(tmp_path, 50)
    first = _frames(tmp_path)
    p.insert("r", [(60, 1)])
    p.step()
    second = _frames(tmp_path)
    assert first & second, "frames of unchanged state are not written again"
    assert second - first, "a step writes its new frames"
    for _ in range(12):
        p.insert("r", [(61, 2)])
        p.step()
    assert len(_frames(tmp_path)) <= 3 * len(second), "frames no checkpoint names are deleted"
    p.close()


def test_a_checkpoint_that_fails_before_its_commit_leaves_the_last_one(
    every_frame_a_file: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _opened(tmp_path, 20)
    views = _views(p)
    (tmp_path / checkpoint.FRAMES / "stray.arrow").write_bytes(b"left by a crashed writer")

    def fail(self: Path, target: Path) -> None:
        raise OSError("disk full")

    replace = Path.replace
    monkeypatch.setattr(Path, "replace", fail)
    p.insert("r", [(100, 7)])
    with pytest.raises(OSError):
        p.step()
    monkeypatch.setattr(Path, "replace", replace)
    p.close()
    q = _opened(tmp_path)
    assert q.steps == 1 and _views(q) == views
    assert "stray.arrow" not in _frames(tmp_path) and not any(f.endswith(".tmp") for f in _frames(tmp_path))
    q.insert("r", [(100, 7)])
    q.step()
    assert q.view("d").to_dict() == {**views["d"], (7,): 1}
    q.close()
