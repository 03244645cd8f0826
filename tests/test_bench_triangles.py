"""`python -m bench.triangles` at a tiny size: every maintenance of the triangle view (the multiway delta
join, sensitivity indices, the delta join over indexed tries, the binary delta join; with a label per
edge, the indexed join and the multiway delta join) checked equal after each batch and against DuckDB's count (the run's own assertions), and the report's lines. No timing is
checked."""

from __future__ import annotations

from bench import triangles


def test_a_tiny_run_checks_every_maintenance_and_reports_them() -> None:
    result = triangles.run(3000, 3, 11, payload=True)
    inc = result["incremental"]
    assert {"multijoin", "sensitivity", "indexed", "delta_join", "recompute_duckdb"} <= set(inc["median"])
    assert len(inc["view_change_rows"]) == 3 and result["scratch"]["triangles"] > 0
    text = triangles.report([result])
    assert "indexed per batch:" in text and "the binary delta join" in text
    assert {"indexed_payload", "multijoin_payload"} <= set(inc["median"]) and "with a label per edge" in text
