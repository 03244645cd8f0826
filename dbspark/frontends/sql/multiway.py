"""A FROM clause's inner joins as one multiway join, when its equality conditions form a cycle.

The relations of an inner-join pool (`joins.py`) and the conditions `a.x = b.y` between plain columns
of two of them define equivalence classes of columns (union-find); each class is a join variable, each
relation an atom over the classes of its columns. When those atoms form a cyclic hypergraph (three or
more relations; `operators/multijoin.is_cyclic`: a triangle of joins, TPC-H Q5's customer-orders-
lineitem-supplier cycle through the nation key), the relations are joined at once by the leapfrog join
(`Stream.stream_multijoin`), and every field of a class reads the class's column after it. The other
conditions stay for the filter after the join. `JOIN_PLANS` chooses: "auto" (cyclic pools), "leapfrog"
(any connected pool of two or more relations), "binary" (never), "sensitivity" (as "auto", the join
maintained by sensitivity indices: `operators/maintained_join.py`), "indexed" (as "auto", the delta
join over the inputs kept as tries, a variable order per change: `columnar/indexed_delta.py`). Not
inside a recursive CTE's body (its doubly-incremental scope is written for binary joins), nor where a
class's columns have different types or a relation has two columns of one class (the binary joins cast
and compare those).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sqlglot import exp

from dbspark.frontends.sql.scope import Rel, Scope
from dbspark.ir import expr as ir
from dbspark.operators.multijoin import connected, is_cyclic

if TYPE_CHECKING:
    from dbspark.frontends.sql.compiler import Compiler
    from dbspark.frontends.sql.parse import Source

JOIN_PLANS = ("auto", "leapfrog", "binary", "sensitivity", "indexed")
MAINTAINED = ("sensitivity", "indexed")  # plans that are "auto" with another maintenance of the join


def multiway(
    c: Compiler, src: Source, rels: list[Rel], pending: list[exp.Expression]
) -> tuple[Rel, list[exp.Expression]] | None:
    """The pool's relations joined at once (one relation: every column, in the pool's order of
    relations) and the conditions left to filter it by; None where the plan says binary joins."""
    auto = c.joins == "auto" or c.joins in MAINTAINED
    if c.joins == "binary" or len(rels) < 2 or (auto and len(rels) < 3):
        return None
    if any(r.stream.circuit is not c.p.circuit for r in rels):  # inside a recursive CTE's body
        return None
    names = [col for r in rels for col in r.stream.schema]
    if len(names) != len(set(names)):
        return None
    parent: dict[tuple[int, str], tuple[int, str]] = {}

    def root(k: tuple[int, str]) -> tuple[int, str]:
        while parent.get(k, k) != k:
            k = parent[k]
        return k

    used: list[exp.Expression] = []
    for cond in pending:
        if not (isinstance(cond, exp.EQ) and isinstance(cond.this, exp.Column)):
            continue
        if not isinstance(cond.expression, exp.Column):
            continue
        ends = []
        for side in (cond.this, cond.expression):
            hits = [
                (i, got) for i, r in enumerate(rels) if (got := Scope(r.fields, src).find(side)) is not None
            ]
            if len(hits) == 1:
                ends.append(hits[0])
        if len(ends) != 2 or ends[0][0] == ends[1][0]:
            continue
        a, b = root(ends[0]), root(ends[1])
        if a != b:
            parent[a] = b
        used.append(cond)
    classes: dict[tuple[int, str], str] = {}
    members: dict[tuple[int, str], str] = {}  # (relation, column) -> its class's variable
    for k in dict.fromkeys([*parent, *parent.values()]):  # (in a fixed order: names are identities)
        top = root(k)
        if top not in classes:
            classes[top] = c.names.fresh("j")
        members[k] = classes[top]
    atoms: list[list[str]] = []
    for i, r in enumerate(rels):
        vs = [members[(i, col)] for col in r.stream.schema if (i, col) in members]
        if not vs or len(vs) != len(set(vs)):
            return None
        atoms.append(vs)
    types: dict[str, object] = {}
    for (i, col), v in members.items():
        t = rels[i].stream.schema[col]
        if types.setdefault(v, t) != t:
            return None
    if not connected(atoms) or (auto and not is_cyclic(atoms)):
        return None
    streams = []
    for i, r in enumerate(rels):
        items = [(members.get((i, col), col), ir.Col(col)) for col in r.stream.schema]
        streams.append(r.stream.map(*items))
    joined = streams[0].stream_multijoin(
        *streams[1:], maintenance=c.joins if c.joins in MAINTAINED else "delta", names=_shown(rels, members)
    )
    # each field of a class reads the class's column (no copies: column pruning narrows the inputs to
    # what is read after the join)
    fields = [replace(f, col=members.get((i, f.col), f.col)) for i, r in enumerate(rels) for f in r.fields]
    return Rel(joined, fields), [x for x in pending if not any(x is u for u in used)]


def _shown(rels: list[Rel], members: dict[tuple[int, str], str]) -> dict[str, str]:
    """What an error calls each column of the joined relations: a variable made of an equality by its
    columns as the query names them ("r.y = s.x"), another column by its name."""
    out: dict[str, list[str]] = {}
    for i, r in enumerate(rels):
        for f in r.fields:
            if f.col in r.stream.schema:
                shown = f"{f.qualifier}.{f.name}" if f.qualifier else f.name
                names = out.setdefault(members.get((i, f.col), f.col), [])
                if shown not in names:
                    names.append(shown)
    return {v: " = ".join(ns) for v, ns in out.items()}
