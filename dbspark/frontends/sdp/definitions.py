"""The datasets and flows an SDP project's library files define, as `spark-pipelines` reads them.

SQL files (Spark SQL, statements separated by `;`):

    CREATE [OR REFRESH] MATERIALIZED VIEW name [(columns)] [COMMENT ..] [TBLPROPERTIES ..] [USING fmt] AS query
    CREATE [OR REFRESH] STREAMING TABLE name [(columns)] [...] [AS query]
    CREATE [OR REPLACE] TEMPORARY VIEW name AS query        CREATE [OR REPLACE] VIEW name AS query
    CREATE FLOW name [COMMENT ..] AS INSERT INTO target [BY NAME] query
    SET key = value                                         USE [CATALOG | SCHEMA | DATABASE] name

Python files: `@dp.materialized_view`, `@dp.table` (a streaming table), `@dp.temporary_view`,
`@dp.append_flow(target=...)` and `dp.create_streaming_table(name)`, run with dbspark's registry and
`spark` (`frames.py`); a definition returns `spark.sql(...)` or a DataFrame chain dbspark can write as
SQL. Each definition keeps where it was written (file and line, or file and function) for messages.
"""

from __future__ import annotations

import importlib.util
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot.tokens import Token, TokenType

from dbspark.errors import DbsparkError, ParseError, UnsupportedError
from dbspark.frontends.sdp.frames import Frame, Session


@dataclass
class Definition:
    """A dataset (`kind`: materialized_view, streaming_table, temporary_view, view) or a flow into one."""

    name: str
    kind: str
    query: str | Frame | None  # Spark SQL text, a Python definition's frame; None: filled by flows
    where: str
    target: str | None = None  # a flow's dataset
    columns: tuple[str, ...] | None = None  # names given to the query's columns
    format: str | None = None  # the table's format (USING / format=)


KINDS = {
    "materialized_view": "materialized view",
    "streaming_table": "streaming table",
    "temporary_view": "temporary view",
    "view": "view",
    "flow": "flow",
}


# ---- SQL files ---------------------------------------------------------------------------------------
def sql_file(path: Path, text: str, conf: dict[str, str]) -> list[Definition]:
    """The definitions of a SQL file (its SET statements go into `conf`)."""
    from dbspark.frontends.sql.spark import SparkAnsi

    try:
        tokens = sqlglot.tokenize(text, read=SparkAnsi)
    except sqlglot.errors.TokenError as e:
        raise ParseError(f"{path}: SQL syntax error: {e}") from None
    out: list[Definition] = []
    stmt: list[Token] = []
    for t in [*tokens, None]:
        if t is None or t.token_type == TokenType.SEMICOLON:
            if stmt:
                d = _statement(path, text, stmt, conf)
                if d is not None:
                    out.append(d)
            stmt = []
        else:
            stmt.append(t)
    return out


def _word(t: Token) -> str:
    return t.text.upper() if t.token_type != TokenType.STRING else ""


def _statement(path: Path, text: str, ts: list[Token], conf: dict[str, str]) -> Definition | None:
    where = f"{path.name}:{ts[0].line}"
    words = [_word(t) for t in ts]
    whole = text[ts[0].start : ts[-1].end + 1]
    if words[0] == "SET":
        setting = text[ts[1].start : ts[-1].end + 1] if len(ts) > 1 else ""
        key, sep, value = setting.partition("=")
        if not sep:
            raise ParseError(f"{where}: SET key = value, not {whole!r}")
        conf[key.strip()] = value.strip().strip("'\"")
        return None
    if words[0] == "USE":
        return None  # (names are resolved by their last part: the project's datasets)
    if words[0] != "CREATE":
        raise UnsupportedError(
            f"{where}: the statement {whole[:60]!r} (an SDP SQL file defines datasets and flows)"
        )
    i = 1
    if words[i : i + 2] in (["OR", "REFRESH"], ["OR", "REPLACE"]):
        i += 2
    heads = {
        ("MATERIALIZED", "VIEW"): "materialized_view",
        ("STREAMING", "TABLE"): "streaming_table",
        ("TEMPORARY", "VIEW"): "temporary_view",
        ("TEMP", "VIEW"): "temporary_view",
        ("VIEW",): "view",
        ("FLOW",): "flow",
    }
    kind = next((k for h, k in heads.items() if tuple(words[i : i + len(h)]) == h), None)
    if kind is None:
        raise UnsupportedError(
            f"{where}: {whole[:60]!r} (SDP defines MATERIALIZED VIEW, STREAMING TABLE, TEMPORARY VIEW, VIEW and FLOW)"
        )
    i += 2 if kind in ("materialized_view", "streaming_table", "temporary_view") else 1
    name, i = _name(ts, i, where)
    columns: tuple[str, ...] | None = None
    fmt: str | None = None
    body: int | None = None
    depth = 0
    j = i
    while j < len(ts):
        t, w = ts[j], words[j]
        if t.token_type == TokenType.L_PAREN:
            if depth == 0 and j == i:
                columns = _columns(ts, j)
            depth += 1
        elif t.token_type == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and w == "USING" and j + 1 < len(ts):
            fmt = ts[j + 1].text.lower()
        elif depth == 0 and w == "AS":
            body = j + 1
            break
        j += 1
    if body is None or body >= len(ts):
        if kind == "streaming_table":
            return Definition(name, kind, None, where, columns=columns, format=fmt)
        raise ParseError(f"{where}: {KINDS[kind]} {name} has no AS query")
    if kind == "flow":
        return _flow(name, ts, words, body, text, where)
    query = text[ts[body].start : ts[-1].end + 1]
    return Definition(name, kind, query, where, columns=columns, format=fmt)


def _name(ts: list[Token], i: int, where: str) -> tuple[str, int]:
    parts: list[str] = []
    while i < len(ts):
        t = ts[i]
        if t.token_type in (TokenType.VAR, TokenType.IDENTIFIER) or (
            t.token_type not in (TokenType.L_PAREN, TokenType.ALIAS) and t.text.isidentifier() and not parts
        ):
            parts.append(t.text)
            i += 1
            if i < len(ts) and ts[i].token_type == TokenType.DOT:
                i += 1
                continue
        break
    if not parts:
        raise ParseError(f"{where}: a dataset name is missing")
    return ".".join(parts), i


def _columns(ts: list[Token], j: int) -> tuple[str, ...]:
    """The names of a column list `(a, b TYPE COMMENT '...', ...)`: the first word of each item."""
    names: list[str] = []
    depth, first = 0, True
    for t in ts[j:]:
        if t.token_type == TokenType.L_PAREN:
            depth += 1
            if depth == 1:
                continue
        elif t.token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                break
        if depth == 1 and t.token_type == TokenType.COMMA:
            first = True
        elif depth == 1 and first:
            names.append(t.text)
            first = False
    return tuple(names)


def _flow(name: str, ts: list[Token], words: list[str], i: int, text: str, where: str) -> Definition:
    if words[i : i + 2] != ["INSERT", "INTO"]:
        raise UnsupportedError(f"{where}: flow {name}: a flow is AS INSERT INTO target [BY NAME] query")
    i += 2
    if words[i] == "ONCE":
        raise UnsupportedError(f"{where}: flow {name}: INSERT INTO ONCE (a one-time backfill flow)")
    target, i = _name(ts, i, where)
    if words[i : i + 2] == ["BY", "NAME"]:
        i += 2
    if i >= len(ts):
        raise ParseError(f"{where}: flow {name} has no query")
    return Definition(name, "flow", text[ts[i].start : ts[-1].end + 1], where, target=target)


# ---- Python files ------------------------------------------------------------------------------------
def python_file(path: Path, conf: dict[str, str]) -> list[Definition]:
    """The definitions of a Python file: it is imported with dbspark's registry and `spark`, and each
    flow's function is called (`frames.py`)."""
    from pyspark.pipelines.graph_element_registry import graph_element_registration_context

    registry = Registry(path)
    spec = importlib.util.spec_from_file_location(f"dbspark_sdp_{path.stem}", str(path))
    if spec is None or spec.loader is None:
        raise DbsparkError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    module.__dict__["spark"] = Session(conf)
    with _connect_columns(), graph_element_registration_context(registry):  # type: ignore[arg-type]
        try:
            spec.loader.exec_module(module)
        except DbsparkError as e:
            e.args = (f"{path}: {e.args[0] if e.args else e}",)
            raise
        return registry.definitions()


@contextmanager
def _connect_columns() -> Any:
    """`pyspark.sql.functions` in Spark Connect's mode (pure Python columns), as under spark-pipelines."""
    before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        else:
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = before


class Registry:
    """SDP's graph element registry (`pyspark.pipelines.graph_element_registry`), keeping what a file
    registers: its datasets, and its flows with their functions called."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.outputs: list[Any] = []
        self.flows: list[tuple[Any, Frame, str]] = []

    def register_output(self, output: Any) -> None:
        from pyspark.pipelines.output import MaterializedView, StreamingTable, TemporaryView

        if not isinstance(output, (MaterializedView, StreamingTable, TemporaryView)):
            raise UnsupportedError(f"{self._where(output)}: {type(output).__name__} {output.name} (a sink)")
        self.outputs.append(output)

    def register_flow(self, flow: Any) -> None:
        where = self._where(flow)
        try:
            got = flow.func()
        except DbsparkError as e:
            raise type(e)(f"{where}: {flow.name}: {e.args[0] if e.args else e}") from None
        if not isinstance(got, Frame):
            raise UnsupportedError(
                f"{where}: {flow.name} returns {type(got).__name__}, not a DataFrame of spark.sql, "
                "spark.table or spark.read"
            )
        self.flows.append((flow, got, where))

    def register_auto_cdc_flow(self, flow: Any) -> None:
        raise UnsupportedError(f"{self._where(flow)}: create_auto_cdc_flow {getattr(flow, 'name', '')}")

    def register_sql(self, sql_text: str, file_path: Path) -> None:
        raise UnsupportedError(f"{file_path}: SQL registered from Python")

    def _where(self, element: Any) -> str:
        loc = getattr(element, "source_code_location", None)
        line = getattr(loc, "line_number", None)
        return f"{self.path.name}:{line}" if line else self.path.name

    def definitions(self) -> list[Definition]:
        from pyspark.pipelines.output import MaterializedView, StreamingTable

        out: list[Definition] = []
        flows = {f.name: (f, frame, w) for f, frame, w in self.flows}
        for o in self.outputs:
            kind = (
                "materialized_view"
                if isinstance(o, MaterializedView)
                else "streaming_table"
                if isinstance(o, StreamingTable)
                else "temporary_view"
            )
            own = flows.pop(o.name, None)  # a decorated dataset's own flow is named after it
            schema = getattr(o, "schema", None)
            if schema is not None:
                raise UnsupportedError(
                    f"{self._where(o)}: {o.name}: an explicit schema= (dbspark takes the query's)"
                )
            fmt = getattr(o, "format", None)
            query = own[1] if own is not None and own[0].target == o.name else None
            out.append(Definition(o.name, kind, query, self._where(o), format=fmt))
        for f, frame, w in flows.values():
            out.append(Definition(f.name, "flow", frame, w, target=f.target))
        return out
