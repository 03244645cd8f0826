"""Pictures of circuits (`circuit/picture.py`, `dbspark explain --format`): the SVG is well-formed and holds
every operator of both circuits (nested scopes' too) and every view; DOT and Mermaid name them all;
bad formats and a missing Graphviz are clear errors."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import dbspark
from dbspark.circuit import picture
from dbspark.circuit.circuit import Circuit
from dbspark.circuit.explain import evaluation_order
from dbspark.cli.main import app
from dbspark.errors import UnsupportedError

ORDERS = Path(__file__).parent.parent / "examples" / "orders" / "pipeline.sql"
SG = """
.decl e(x: number, y: number)
.input e
.decl sg(x: number, y: number)
.output sg
sg(x, y) :- e(p, x), e(p, y), x != y.
sg(x, y) :- e(a, x), sg(a, b), e(b, y).
"""
SVG = "{http://www.w3.org/2000/svg}"


def names(c: Circuit, prefix: str) -> dict[str, str]:
    """Every node's name in the picture, with the start of its operator's label; the views'."""
    num = {nid: i for i, nid in enumerate(evaluation_order(c))}
    out = {f"{prefix}n{num[nid]}": n.op.label()[:20] for nid, n in c.nodes.items()}
    for nid, n in c.nodes.items():
        inner = getattr(n.op, "inner", None)
        if inner is not None:
            out.update(names(inner, f"{prefix}n{num[nid]}_"))
    out.update({f"{prefix}{v}": v for v in c.outputs})
    return out


def pipelines() -> list[dbspark.Pipeline]:
    sql = dbspark.Pipeline(engine="local")
    sql.sql(ORDERS.read_text())
    dl = dbspark.Pipeline(engine="local")
    dl.datalog(SG, closure_operator=False)
    return [sql, dl]


needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


@needs_dot
@pytest.mark.parametrize("which", [0, 1], ids=["sql", "recursive-datalog"])
def test_the_svg_holds_every_operator_and_view(which: int) -> None:
    p = pipelines()[which]
    want = {**names(p.circuit, "c0_"), **names(p.circuit.incrementalize(), "c1_")}
    if which == 1:
        assert any("_n1_n" in n for n in want)  # the recursive scope's body is drawn
    svg = p.picture("svg")
    assert isinstance(svg, str)
    root = ET.fromstring(svg)  # well-formed
    assert root.tag == f"{SVG}svg"
    titles = {t.text for t in root.iter(f"{SVG}title")}
    assert set(want) <= titles, sorted(set(want) - titles)[:5]
    text = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    for label in want.values():
        assert label.replace("&", "&amp;")[:12] in text.replace("&", "&amp;"), label
    assert p._repr_svg_() == svg


def test_dot_and_mermaid_name_every_operator() -> None:
    for p in pipelines():
        want = {**names(p.circuit, "c0_"), **names(p.circuit.incrementalize(), "c1_")}
        dot, mer = p.picture("dot"), p.picture("mermaid")
        assert isinstance(dot, str) and isinstance(mer, str)
        assert mer.startswith("flowchart TB\n")
        for name in want:
            assert f"\t{name} [" in dot or f"\t{name} -> " in dot, name
            assert f" {name}[" in mer or f" {name}[(" in mer or f" {name}[/" in mer, name


@needs_dot
def test_explain_writes_pictures(tmp_path: Path) -> None:
    runner = CliRunner()
    for fmt in ("svg", "png", "dot", "mermaid"):
        out = tmp_path / f"p.{fmt}"
        r = runner.invoke(app, ["explain", str(ORDERS), "--format", fmt, "--output", str(out)])
        assert r.exit_code == 0, r.output
        data = out.read_bytes()
        assert data.startswith(
            {"svg": b"<?xml", "png": b"\x89PNG", "dot": b"digraph", "mermaid": b"flowchart"}[fmt]
        )
    r = runner.invoke(app, ["explain", str(ORDERS), "-f", "mermaid"], terminal_width=80)
    assert r.exit_code == 0 and "c1_top_orders" in r.output
    assert all(len(line) < 200 for line in r.output.splitlines())  # one node per line, whatever the terminal
    r = runner.invoke(app, ["explain", str(ORDERS)])
    assert r.exit_code == 0 and r.output.startswith("circuit\n") and "\nincremental circuit\n" in r.output


def test_bad_formats_and_a_missing_graphviz_are_clear_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    r = runner.invoke(app, ["explain", str(ORDERS), "-f", "png"])
    assert r.exit_code == 1 and "binary: give a file with --output" in r.output
    r = runner.invoke(app, ["explain", str(ORDERS), "-f", "jpeg"])
    assert r.exit_code == 1 and "picture format 'jpeg'" in r.output
    monkeypatch.setattr(picture.shutil, "which", lambda _: None)
    p = pipelines()[0]
    with pytest.raises(UnsupportedError, match="needs Graphviz's `dot` program"):
        p.picture("svg")
    assert p._repr_svg_() is None
    assert isinstance(p.picture("mermaid"), str)  # text formats need nothing


def test_a_notebook_shows_a_view_as_a_table(pipeline: Any) -> None:
    """`_repr_html_` of a view (on both engines): a table of its first rows with their weights, and how
    many rows there are when not all are shown."""
    import re

    pipeline.sql("CREATE TABLE t (k BIGINT, s VARCHAR); CREATE VIEW v AS SELECT k, s FROM t;")
    pipeline.insert("t", [(i, f"<row {i}>") for i in range(30)] + [(0, "<row 0>")])
    pipeline.step()
    html = pipeline.view("v")._repr_html_()
    assert "<table" in html and "weight" in html and "30 rows (first 20 shown)" in html
    body = html.split("<tbody>")[1]
    assert len(re.findall(r"<tr>", body)) == 20
    assert "&lt;row" in html  # values escaped
