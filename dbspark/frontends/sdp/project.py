"""An SDP project as a dbspark pipeline: its datasets become views over its sources' tables.

`load_project(spec)` reads the spec and the library files (`definitions.py`); `declare(project, p)`
declares on pipeline `p`, in the order their references need:

- a **source** (files a definition reads by path: `parquet.\\`data/orders\\``, `delta.\\`...\\`` in SQL,
  `spark.read.format(...).load(...)` / `spark.readStream...` in Python; `sources.py`) as a table, named
  after its folder (`orders`, or `orders_2` if taken), whose changes each run reads;
- every dataset as a view, its query written in Spark SQL (`p.sql(..., dialect="spark")`): `STREAM(x)`
  / `STREAM x` read x (a streaming read of an append-only source sees what a batch read does), names
  are the datasets' (their last part: `catalog.db.name` is `name`), a path is its source's table, and a
  streaming table fed by flows is the UNION ALL of the flows (each matched by column name).

Materialized views and streaming tables are *published* (written out as tables, `io/published.py`);
temporary views, views and flows are not. A reference to a name that is neither a dataset nor a
source, a cycle, a name defined twice: `SchemaError`s naming the definition and where it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from dbspark.errors import DbsparkError, SchemaError, UnknownNameError, UnsupportedError
from dbspark.frontends.sdp.columns import ident
from dbspark.frontends.sdp.definitions import KINDS, Definition, python_file, sql_file
from dbspark.frontends.sdp.frames import Frame, SourceRef, render
from dbspark.frontends.sdp.sources import FORMATS, Source, open_source
from dbspark.frontends.sdp.spec import Spec, load_spec

if TYPE_CHECKING:
    from dbspark.pipeline import Pipeline

PUBLISHED = ("materialized_view", "streaming_table")


@dataclass
class Dataset:
    name: str
    kind: str
    where: str
    queries: list[Definition] = field(default_factory=list)  # its own query, or its flows'
    columns: tuple[str, ...] | None = None
    format: str | None = None

    @property
    def published(self) -> bool:
        return self.kind in PUBLISHED


@dataclass
class Project:
    spec: Spec
    datasets: dict[str, Dataset]
    conf: dict[str, str]
    sources: dict[SourceRef, Source] = field(default_factory=dict)

    @property
    def published(self) -> list[str]:
        return [n for n, d in self.datasets.items() if d.published]


def bare(name: str) -> str:
    """A dataset's name as the pipeline knows it: its last part, unquoted, lower-cased unless quoted."""
    last = name.split(".")[-1]
    return last[1:-1].replace("``", "`") if last.startswith("`") else last.lower()


def load_project(spec_path: Path) -> Project:
    spec = load_spec(spec_path)
    conf = dict(spec.configuration)
    defs: list[Definition] = []
    for f in spec.files():
        defs += (
            sql_file(f, f.read_text(encoding="utf-8"), conf) if f.suffix == ".sql" else python_file(f, conf)
        )
    datasets: dict[str, Dataset] = {}
    for d in defs:
        if d.kind == "flow":
            continue
        n = bare(d.name)
        if n in datasets:
            raise SchemaError(f"{d.where}: {n} is already defined ({datasets[n].where})")
        datasets[n] = Dataset(n, d.kind, d.where, [d] if d.query is not None else [], d.columns, d.format)
    for d in defs:
        if d.kind != "flow":
            continue
        target = datasets.get(bare(d.target or ""))
        if target is None or target.kind != "streaming_table":
            raise SchemaError(
                f"{d.where}: flow {d.name} inserts into {d.target}, which is not a streaming table of the project"
            )
        target.queries.append(d)
    for ds in datasets.values():
        if not ds.queries:
            raise SchemaError(f"{ds.where}: {KINDS[ds.kind]} {ds.name} has no query and no flow into it")
    return Project(spec, datasets, conf)


# ---- references -------------------------------------------------------------------------------------
def _unstream(text: str) -> str:
    """`text` with `STREAM(x)` and `STREAM x` as `x` (a streaming read of the relation)."""
    from dbspark.frontends.sql.spark import SparkAnsi

    toks = sqlglot.tokenize(text, read=SparkAnsi)
    cut: list[tuple[int, int]] = []  # char ranges to drop
    for i, t in enumerate(toks):
        if t.text.upper() != "STREAM" or t.token_type == TokenType.STRING or i == 0:
            continue
        if toks[i - 1].token_type not in (TokenType.FROM, TokenType.JOIN, TokenType.COMMA):
            continue
        if i + 1 < len(toks) and toks[i + 1].token_type == TokenType.L_PAREN:
            depth = 0
            for k in range(i + 1, len(toks)):
                depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(toks[k].token_type, 0)
                if depth == 0:
                    cut += [(t.start, toks[i + 1].end), (toks[k].start, toks[k].end)]
                    break
        else:
            cut.append((t.start, t.end))
    out, last = [], 0
    for a, b in cut:
        out.append(text[last:a])
        out.append(" ")
        last = b + 1
    out.append(text[last:])
    return "".join(out)


def resolve_sql(text: str, where: str, project: Project) -> tuple[str, set[str]]:
    """A query's Spark SQL with its references resolved: datasets by their bare names, paths as their
    sources' tables (opened here); and the datasets it reads."""
    from dbspark.frontends.sql.spark import SparkAnsi

    try:
        tree = sqlglot.parse_one(_unstream(text), read=SparkAnsi)
    except sqlglot.errors.ParseError as e:
        raise DbsparkError(f"{where}: SQL syntax error: {e}") from None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    reads: set[str] = set()
    for t in list(tree.find_all(exp.Table)):
        db_node = t.args.get("db")
        db = db_node.name.lower() if db_node is not None else ""
        if db in FORMATS and t.this is not None:
            src = source_of(project, SourceRef(db, t.name), where)
            t.set("this", exp.to_identifier(src.table, quoted=True))
            t.set("db", None)
            t.set("catalog", None)
            continue
        if not t.name or (not db and t.name.lower() in ctes):
            continue
        n = t.name if t.this.quoted else t.name.lower()
        if n not in project.datasets:
            raise UnknownNameError(
                f"{where}: {t.sql(dialect=SparkAnsi)} is neither a dataset of the project ({sorted(project.datasets)}) "
                f"nor a path source ({', '.join(f'{f}.`path`' for f in FORMATS)})"
            )
        reads.add(n)
        t.set("this", exp.to_identifier(n, quoted=True))
        t.set("db", None)
        t.set("catalog", None)
    return tree.sql(dialect=SparkAnsi), reads


def source_of(project: Project, ref: SourceRef, where: str) -> Source:
    """The source of `ref` (one per format and path), opened and named once."""
    path = Path(ref.path.removeprefix("file://"))
    path = path if path.is_absolute() else (project.spec.root / path).resolve()
    key = SourceRef(ref.format, str(path), ref.options)
    if key not in project.sources:
        taken = {s.table for s in project.sources.values()} | set(project.datasets)
        project.sources[key] = open_source(key, path, taken, where)
    return project.sources[key]


def _frame_refs(f: Frame, where: str, project: Project) -> tuple[Frame, set[str]]:
    """The frame with its SQL texts and table names resolved, and the datasets it reads."""
    reads: set[str] = set()
    if f.op == "sql":
        text, reads = resolve_sql(f.args[0], where, project)
        return Frame("sql", (text,), (), f.tag), reads
    if f.op == "table":
        n = bare(f.args[0])
        if n not in project.datasets:
            raise UnknownNameError(f"{where}: spark.table({f.args[0]!r}): no dataset {n} in the project")
        return Frame("table", (n,), (), f.tag), {n}
    if f.op == "source":
        src = source_of(project, f.args[0], where)
        return Frame("table", (src.table,), (), f.tag), set()
    ins = []
    for i in f.inputs:
        g, r = _frame_refs(i, where, project)
        ins.append(g)
        reads |= r
    return Frame(f.op, f.args, tuple(ins), f.tag), reads


# ---- declaring ----------------------------------------------------------------------------------------
@dataclass
class Query:
    definition: Definition
    text: str | Frame  # resolved
    reads: set[str]


def resolve(project: Project) -> dict[str, list[Query]]:
    """Every dataset's queries with their references resolved (the project's sources opened)."""
    queries: dict[str, list[Query]] = {}
    for name, ds in project.datasets.items():
        got = []
        for d in ds.queries:
            assert d.query is not None
            try:
                if isinstance(d.query, Frame):
                    frame, reads = _frame_refs(d.query, d.where, project)
                    got.append(Query(d, frame, reads))
                else:
                    text, reads = resolve_sql(d.query, d.where, project)
                    got.append(Query(d, text, reads))
            except DbsparkError as e:
                _name_it(e, d.where, name)
                raise
        queries[name] = got
    return queries


def declare(project: Project, p: Pipeline) -> None:
    """Declare the project's sources as tables and its datasets as views on `p`."""
    queries = resolve(project)
    for src in project.sources.values():
        p.table(src.table, src.schema)
    for name in _order(project, queries):
        ds = project.datasets[name]
        parts = []
        for q in queries[name]:
            n = name if len(queries[name]) == 1 else f"_flow_{bare(q.definition.name)}"
            _view(p, n, q, ds.columns if n == name else None)
            parts.append(n)
        if len(parts) > 1:  # a streaming table of several flows: their union, by column name
            cols = list(p.relation(parts[0]).schema)
            for n in parts[1:]:
                if sorted(p.relation(n).schema) != sorted(cols):
                    raise SchemaError(
                        f"{ds.where}: the flows into {name} give different columns ({cols} and "
                        f"{list(p.relation(n).schema)})"
                    )
            union = " UNION ALL ".join(f"SELECT {', '.join(map(ident, cols))} FROM {ident(n)}" for n in parts)
            p.sql(f"CREATE VIEW {ident(name)} AS {union}", dialect="spark")


def _view(p: Pipeline, name: str, q: Query, columns: tuple[str, ...] | None) -> None:
    d = q.definition
    try:
        if isinstance(q.text, Frame):
            text, _ = render(q.text, lambda n: list(p.relation(n).schema), lambda ref: "")
        else:
            text = q.text
        cols = f" ({', '.join(map(ident, columns))})" if columns else ""
        p.sql(f"CREATE VIEW {ident(name)}{cols} AS {text}", dialect="spark")
    except DbsparkError as e:
        _name_it(e, d.where, bare(d.name))
        raise


def _name_it(e: DbsparkError, where: str, name: str) -> None:
    """The error's message as `where: name: what`."""
    msg = str(e.args[0] if e.args else e)
    rest = msg[len(where) + 2 :] if msg.startswith(f"{where}: ") else msg
    if not rest.startswith(f"{name}: "):
        rest = f"{name}: {rest}"
    e.args = (f"{where}: {rest}",)


def _order(project: Project, queries: dict[str, list[Query]]) -> list[str]:
    """The datasets, each after those it reads; a cycle is an error naming it."""
    done: list[str] = []
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            loop = " -> ".join([*path[path.index(n) :], n])
            raise SchemaError(f"{project.datasets[n].where}: the datasets read each other in a cycle: {loop}")
        state[n] = 1
        for q in queries[n]:
            for r in sorted(q.reads):
                visit(r, [*path, n])
        state[n] = 2
        done.append(n)

    for n in queries:
        visit(n, [])
    return done


def summary(project: Project) -> dict[str, Any]:
    return {
        "datasets": {n: d.kind for n, d in project.datasets.items()},
        "sources": {s.table: f"{r.format}:{r.path}" for r, s in project.sources.items()},
    }


__all__ = ["Dataset", "Project", "UnsupportedError", "declare", "load_project"]
