"""Grouping sets as levels of detail of one aggregation: `lftj-incremental-maintenance.txt` §2.3.3's note
that the intermediate predicate of a semigroup aggregate "provides aggregations at multiple levels of
detail" (max of s per x and per (x, y) from one `A_max-scan[x, y, z] = s`), and §3.1.1's index pages,
whose scan fields aggregate the pages below them.

The branches of a query with grouping sets (`grouping_sets.expand`) read its FROM and WHERE once. When
every aggregate of the query folds from its own values over a finer grouping (MIN and MAX, semigroups;
COUNT and SUM of integers and DECIMALs, whose partial sums add up exactly), the finest set (every key)
aggregates the rows and each coarser set aggregates the groups of its parent, the set with the fewest
keys among the computed sets that contain it:

    ROLLUP (a, b):  (a, b) <- rows;  (a) <- the (a, b) groups;  () <- the (a) groups
    MAX(x) of (a) = MAX over b of MAX(x) of (a, b);  COUNT(*) of (a) = SUM over b of COUNT(*) of (a, b)

Each level is a `stream_aggregate`, so its state is the core's for that call over the finer level's
groups: MIN and MAX keep ordered state of the sub-groups' values, not of every row, and a change
reaches a coarse group as at most two rows per changed sub-group (its old and new values). A ROLLUP of
n keys keeps the rows once instead of n + 1 times, like the seed's paged tree whose index records
carry the scan of the page below. Otherwise (AVG, STDDEV, MEDIAN, DISTINCT, a sum of floats,
whose exact value the rounded partial sums lose; or a query without its finest set among its sets) each
set aggregates the rows, as a plain GROUP BY. `SHARED = False` turns both off (the bench's "separate").

A level's columns keep the names its parent's have, so each branch binds its keys and aggregates as
the plain GROUP BY would (`aggregates.aggregate`'s `computed`), and its HAVING, windows and SELECT list
compile unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl
from sqlglot import exp

from dbspark.frontends.sql.aggregates import aggregate, find_aggregates, group_keys
from dbspark.frontends.sql.exprs import ExprCompiler
from dbspark.frontends.sql.scope import Rel, Scope, bound
from dbspark.ir import expr as ir

if TYPE_CHECKING:
    from dbspark.frontends.sql.compiler import Compiler

SHARED = True  # False: every branch reads the FROM clause and aggregates its rows (the bench's "separate")
META = "dbspark_grouping_level"  # a branch's (query's levels, its set's position) in `exp.Select.meta`

# how a level folds its sub-groups' values of an aggregate (`Levels.kind`)
MIN, MAX, COUNT, SUM = "min", "max", "count", "sum"


@dataclass
class Levels:
    """One query's grouping sets: its branches, each one's set (positions among the query's keys), the
    FROM clause compiled once, and the levels computed so far by set."""

    branches: list[exp.Select]
    sets: list[frozenset[int]]
    source: Rel | None = None
    shared: bool | None = None  # decided on the first aggregate: whether coarse sets fold finer ones
    kinds: dict[str, str] = field(default_factory=dict)  # an aggregate's column: how a level folds it
    aggregates: list[exp.Expression] | None = None  # every branch's, once (`_every_aggregate`)
    done: dict[frozenset[int], tuple[Rel, Scope]] = field(default_factory=dict)

    def root(self) -> int | None:
        """The branch of the finest set (every key), if it is one of the sets."""
        every = frozenset().union(*self.sets)
        return next((i for i, s in enumerate(self.sets) if s == every), None)

    def parent(self, i: int) -> int:
        """The branch a coarse set folds: of the sets containing it, the one with the fewest keys (a
        ROLLUP's chain, a CUBE's lattice one key up)."""
        s = self.sets[i]
        above = [j for j, t in enumerate(self.sets) if s < t]
        return min(above, key=lambda j: (len(self.sets[j]), j))


def register(c: Compiler, branches: list[exp.Select], sets: list[frozenset[int]]) -> None:
    """Marks a grouping-sets query's branches so that `Compiler.select` compiles them as its levels."""
    if not SHARED:
        return
    key = len(c.levels)
    c.levels.append(Levels(branches, sets))
    for i, b in enumerate(branches):
        b.meta[META] = (key, i)


def of(c: Compiler, node: exp.Select) -> tuple[Levels, int] | None:
    mark = node.meta.get(META)
    return None if mark is None else (c.levels[mark[0]], mark[1])


def aggregated(
    c: Compiler, levels: Levels, i: int, rel: Rel, scope: Scope, items: list[tuple[str, exp.Expression]]
) -> tuple[Rel, Scope, list[tuple[str, exp.Expression]]]:
    """Branch i's GROUP BY: from its parent's groups when the query's aggregates fold, else from the rows."""
    if levels.shared is None:
        levels.shared = _folds(c, levels, rel, scope)
    if not levels.shared:
        return aggregate(c, levels.branches[i], rel, scope, items)
    out, post = _level(c, levels, i, rel, scope)
    return out, post, items


def _folds(c: Compiler, levels: Levels, rel: Rel, scope: Scope) -> bool:
    root = levels.root()
    if root is None:
        return False
    for a in _every_aggregate(c, levels, rel):
        kind = _kind(a)
        if kind is None:
            return False
        if kind == SUM:
            t = ExprCompiler(scope)(a.this, rel.stream.schema).dtype(rel.stream.schema)
            if t.is_float():  # an exact sum's rounded partials do not add up to it
                return False
    return True


def _kind(a: exp.Expression) -> str | None:
    """How a level folds the sub-groups' values of aggregate `a`, if it does."""
    if isinstance(a.this, exp.Distinct):
        return None
    if isinstance(a, exp.Min):
        return MIN
    if isinstance(a, exp.Max):
        return MAX
    if isinstance(a, exp.Count):
        return COUNT
    if isinstance(a, exp.Sum) and not a.args.get("expressions"):
        return SUM
    return None


def _every_aggregate(c: Compiler, levels: Levels, rel: Rel) -> list[exp.Expression]:
    """The aggregates of every branch's SELECT list and HAVING (the Spark dialect's empty set adds a
    COUNT(*)), each once."""
    if levels.aggregates is None:
        exprs: list[exp.Expression] = []
        for b in levels.branches:
            exprs += [e for _, e in c.select_items(b, rel)]
            if b.args.get("having") is not None:
                exprs.append(b.args["having"].this)
        levels.aggregates = find_aggregates(exprs)
    return levels.aggregates


def _level(c: Compiler, levels: Levels, i: int, rel: Rel, scope: Scope) -> tuple[Rel, Scope]:
    s = levels.sets[i]
    if s in levels.done:
        return levels.done[s]
    root = levels.root()
    assert root is not None
    if i == root:
        node = levels.branches[root]
        items = c.select_items(node, rel)
        every = _every_aggregate(c, levels, rel)
        out, post, _ = aggregate(c, node, rel, scope, items + [("", a) for a in every])
        for a in every:
            kind = _kind(a)
            assert kind is not None
            levels.kinds[post.computed[bound(a, scope)]] = kind
    else:
        above, upper = _level(c, levels, levels.parent(i), rel, scope)
        out, post = _fold(c, levels, i, above, upper, rel, scope)
    levels.done[s] = (out, post)
    return out, post


def _fold(
    c: Compiler, levels: Levels, i: int, above: Rel, upper: Scope, rel: Rel, scope: Scope
) -> tuple[Rel, Scope]:
    """Set i's groups from its parent's: its keys' columns, and each aggregate folded over the sub-groups
    into a column of the parent's name and type."""
    node = levels.branches[i]
    keys: list[str] = []
    for k in group_keys(c, node, c.select_items(node, rel), scope):
        col = upper.computed[bound(k, scope)]
        if col not in keys:
            keys.append(col)
    schema = above.stream.schema
    calls: dict[str, tuple[str, str] | str] = {}
    after: list[tuple[str, ir.Expr]] = []
    for col, kind in levels.kinds.items():
        calls[col] = (kind if kind in (MIN, MAX) else "sum", col)
        if kind == COUNT:  # a count of no sub-groups (GROUP BY () over no rows) is 0, as COUNT's
            after.append((col, ir.Cast(ir.Func("coalesce", (ir.Col(col), ir.Lit(0))), pl.Int64())))
        elif kind == SUM:  # the core's sum of a sum's type (BIGINT, DECIMAL(38, s)) in the column's own
            after.append((col, ir.Cast(ir.Col(col), schema[col])))
    if not calls:  # (a query of keys only: one row per group)
        calls[c.names.fresh("a")] = "count_star"
    s = above.stream.stream_aggregate(keys or None, **calls)
    if after:
        s = s.map(*keys, *[col for col in calls if col not in dict(after)], *after)
    out = Rel(s, [f for f in above.fields if f.col in keys])
    kept = set(keys) | set(calls)
    computed = {text: col for text, col in upper.computed.items() if col in kept}
    return out, Scope(out.fields, c.src, computed=computed, outer=upper.outer, grouped=True, pre=scope)
