"""GROUP BY ROLLUP / CUBE / GROUPING SETS and GROUPING() / GROUPING_ID(), as DuckDB evaluates them: a
query with grouping sets is the UNION ALL of one plain GROUP BY query per set.

    SELECT a, b, SUM(x), GROUPING(b) FROM t GROUP BY ROLLUP (a, b)
    =  SELECT a, b, SUM(x), 0 FROM t GROUP BY a, b
       UNION ALL SELECT a, NULL AS b, SUM(x), 1 FROM t GROUP BY a
       UNION ALL SELECT NULL AS a, NULL AS b, SUM(x), 1 FROM t GROUP BY ()

In the branch of a set, a grouping key the set leaves out is NULL wherever the SELECT list and HAVING
use it outside an aggregate's argument, and GROUPING(k1, ..., kn) is the bitmask of the keys left out
(k1 the most significant bit). The empty set is a GROUP BY (): one row even over an empty table (in
Spark's dialect, as Spark evaluates it, none). The
sets of a GROUP BY are the product of its elements' (`a, ROLLUP (b, c)` is (a, b, c), (a, b), (a)); a
CUBE of n keys has 2^n sets. ORDER BY, LIMIT, OFFSET, DISTINCT and WITH apply to the whole union. A key
written as a position (`ROLLUP (1, 2)`) is the SELECT item it names, and a bare name that is not a
column of the FROM clause the SELECT item it aliases (`SELECT a AS k ... ROLLUP (k)`: DuckDB's binding,
decided where the FROM clause is known, `alias_keys`); an expression that is a kept key is that key whole
(`a + 1` kept while `a` is left out). An ORDER BY expression that is a SELECT item's (`ORDER BY SUM(x)`)
orders by that item's column of the union. Window functions and QUALIFY run after the grouping,
over every set's rows together (`over_windows`), as in DuckDB. The branches read the FROM clause once,
and where the aggregates allow, a coarse set aggregates a finer set's groups (`grouping_levels.py`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from sqlglot import exp

from dbspark.frontends.sql.aggregates import AGGREGATES
from dbspark.frontends.sql.parse import Source, name_of
from dbspark.frontends.sql.scope import canonical

MAX_CUBE = 8  # keys in one CUBE: 2^8 = 256 branches
ALIAS_KEY = "__dbspark_alias_key"  # an item aliased as a key a set leaves out: `alias_keys` decides


HIVE = ("rollup", "cube", "grouping_sets")  # `GROUP BY a, b WITH ROLLUP | WITH CUBE | GROUPING SETS (...)`


def present(node: exp.Select) -> bool:
    group = node.args.get("group")
    if group is None:
        return False
    sets = any(isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets)) for g in group.expressions)
    return sets or any(group.args.get(k) for k in HIVE) or node.find(exp.Grouping, exp.GroupingId) is not None


def standard(node: exp.Select) -> exp.Select:
    """The query with Spark's (Hive's, MySQL's) forms written as the standard's: `GROUP BY a, b WITH
    ROLLUP` is `GROUP BY ROLLUP (a, b)`, `WITH CUBE` a CUBE, and `GROUP BY a, b GROUPING SETS ((a), ())`
    the sets listed (the keys before them only declare what the sets may use)."""
    group = node.args.get("group")
    if group is None or not any(group.args.get(k) for k in HIVE):
        return node
    keys = [k.copy() for k in group.expressions]
    if group.args.get("grouping_sets"):
        elems: list[exp.Expression] = [g.copy() for g in group.args["grouping_sets"]]
    elif group.args.get("cube"):
        elems = [exp.Cube(expressions=keys)]
    else:
        elems = [exp.Rollup(expressions=keys)]
    out = node.copy()
    out.set("group", exp.Group(expressions=elems))
    return out


def expand(node: exp.Select, src: Source) -> tuple[exp.Expression, list[exp.Select], list[frozenset[int]]]:
    """The UNION ALL (UNION for SELECT DISTINCT) of the query's grouping sets' plain queries; its
    branches, and each branch's set as the positions of its keys among all the sets' keys."""
    sets, every = _sets(node.args["group"], node, src)
    names = [_output_name(item) for item in node.expressions]
    distinct = bool(node.args.get("distinct"))
    branches = [_branch(node, s, every, names, src, distinct and len(sets) == 1) for s in sets]
    positions = [frozenset(i for i, e in enumerate(every) if any(_same(e, k) for k in s)) for s in sets]
    out: exp.Expression = branches[0]
    for b in branches[1:]:
        out = exp.Union(this=out, expression=b, distinct=distinct)
    for key in ("order", "limit", "offset", "with_"):
        if node.args.get(key) is not None:
            out.set(key, node.args[key].copy())
    order = out.args.get("order")
    if order is not None:  # an item's expression: that item's column of the union
        for o in order.expressions:
            e = o.this if isinstance(o, exp.Ordered) else o
            hit = next(
                (
                    n
                    for item, n in zip(node.expressions, names, strict=True)
                    if not isinstance(e, exp.Column)
                    and (item.this if isinstance(item, exp.Alias) else item) == e
                ),
                None,
            )
            if hit is not None:
                e.replace(exp.column(exp.to_identifier(hit, quoted=True)))
    return out, branches, positions


def _sets(
    group: exp.Expression, node: exp.Select, src: Source
) -> tuple[list[list[exp.Expression]], list[exp.Expression]]:
    """A GROUP BY's grouping sets (positions as the SELECT items they name), and every key they use, once."""
    sets = [
        [_at(k, node, src) for k in s] for s in _product([_element_sets(g, src) for g in group.expressions])
    ]
    every: list[exp.Expression] = []
    for s in sets:
        for k in s:
            if not any(_same(k, e) for e in every):
                every.append(k)
    return sets, every


def over_windows(node: exp.Select, src: Source) -> exp.Select | None:
    """A query with grouping sets whose SELECT list or QUALIFY has window functions, as DuckDB evaluates
    it (the windows after grouping, over the rows of every set together): an outer SELECT of the windows
    and the items, QUALIFY, ORDER BY and LIMIT over the union of the sets' rows of keys, aggregates and
    GROUPING() values (`__gsk*`, `__gsa*`, `__gsg*`); None without windows."""
    qualify = node.args.get("qualify")
    texts = [*node.expressions, *([qualify] if qualify is not None else [])]
    if not any(e.find(exp.Window) for e in texts):
        return None
    from dbspark.frontends.sql.aggregates import find_aggregates

    group = _positions_resolved(node.args["group"], node, src)
    _, every = _sets(group, node, src)
    order = node.args.get("order")
    exprs = [*texts, *(order.expressions if order is not None else [])]
    aggs = find_aggregates(exprs)
    marks = list({g.sql(): g for e in exprs for g in e.find_all(exp.Grouping, exp.GroupingId)}.values())
    plain = [e for e in node.expressions if not e.find(exp.Window)]  # (their aliases may be keys)
    inner = node.copy()
    for key in ("qualify", "order", "limit", "offset", "distinct", "with_"):
        inner.set(key, None)
    inner.set("group", group)
    hidden = [(f"__gsk{i}", k) for i, k in enumerate(every)]
    hidden += [(f"__gsa{i}", a) for i, a in enumerate(aggs)]
    hidden += [(f"__gsg{i}", g) for i, g in enumerate(marks)]
    inner.set(
        "expressions",
        [e.copy() for e in plain]
        + [exp.alias_(e.copy(), exp.to_identifier(n, quoted=True)) for n, e in hidden],
    )

    def ref(name: str) -> exp.Column:
        return exp.column(exp.to_identifier(name, quoted=True), table=exp.to_identifier("__gs", quoted=True))

    agg_at = {canonical(a): f"__gsa{i}" for i, a in enumerate(aggs)}
    mark_at = {g.sql(): f"__gsg{i}" for i, g in enumerate(marks)}

    def mapped(e: exp.Expression) -> exp.Expression:
        if isinstance(e, (exp.Subquery, exp.Select, exp.Exists)):
            return e.copy()
        if isinstance(e, AGGREGATES) and canonical(e) in agg_at:
            return ref(agg_at[canonical(e)])
        if isinstance(e, (exp.Grouping, exp.GroupingId)):
            return ref(mark_at[e.sql()])
        for i, k in enumerate(every):
            if _same(e, k):
                return ref(f"__gsk{i}")
        if isinstance(e, exp.Column) and not isinstance(e.this, exp.Star):
            name = name_of(e.this)
            if not e.args.get("table") and name in outputs:  # QUALIFY's and ORDER BY's SELECT aliases
                item = outputs[name]
                return item.copy() if item is not None else e.copy()
            src.schema_error(
                f"column {e.sql(dialect='duckdb')} must appear in the GROUP BY clause or be used in an "
                "aggregate function",
                e,
            )
        # a window's own function (`SUM(...) OVER`) is no aggregate of the grouping: its arguments are mapped
        window = isinstance(e, exp.Window)
        return _each_child(
            e,
            lambda arg, x: _each_child(x, lambda _, y: mapped(y)) if window and arg == "this" else mapped(x),
        )

    outputs: dict[str, exp.Expression | None] = {}  # none in the SELECT list; ORDER BY reads the outputs
    items = [
        exp.alias_(
            mapped(e.this if isinstance(e, exp.Alias) else e), exp.to_identifier(_output_name(e), quoted=True)
        )
        for e in node.expressions
    ]
    out = exp.select(*items).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("__gs")))
    )
    if qualify is not None:  # a SELECT alias stands for its item (DuckDB binds it so)
        outputs.update({_output_name(e): i.this for e, i in zip(node.expressions, items, strict=True)})
        out.set("qualify", exp.Qualify(this=mapped(qualify.this)))
    if order is not None:
        outputs.update({_output_name(e): None for e in node.expressions})
        out.set("order", mapped(order))
    for key in ("limit", "offset", "distinct", "with_"):
        if node.args.get(key) is not None:
            out.set(key, node.args[key].copy())
    return out


def _each_child(e: exp.Expression, f: Callable[[str, exp.Expression], exp.Expression]) -> exp.Expression:
    """A copy of `e` with each child expression x (of argument `arg`, or in its list) as f(arg, x)."""
    new = e.copy()
    for arg, v in list(new.args.items()):
        if isinstance(v, exp.Expression):
            new.set(arg, f(arg, v))
        elif isinstance(v, list):
            new.set(arg, [f(arg, x) if isinstance(x, exp.Expression) else x for x in v])
    return new


def _positions_resolved(g: exp.Expression, node: exp.Select, src: Source) -> exp.Expression:
    """A GROUP BY clause with each key written as a position (`ROLLUP (1, 2)`) the SELECT item it names."""
    sets = (exp.Rollup, exp.Cube, exp.GroupingSets, exp.Tuple, exp.Paren)
    return _each_child(
        g, lambda _, x: _positions_resolved(x, node, src) if isinstance(x, sets) else _at(x, node, src)
    )


def _element_sets(g: exp.Expression, src: Source) -> list[list[exp.Expression]]:
    """The grouping sets of one GROUP BY element."""
    if isinstance(g, exp.Rollup):
        keys = list(g.expressions)
        return [keys[:i] for i in range(len(keys), -1, -1)]
    if isinstance(g, exp.Cube):
        keys = list(g.expressions)
        if len(keys) > MAX_CUBE:
            src.unsupported(f"CUBE of {len(keys)} keys (at most {MAX_CUBE}: 2^n grouping sets)", g)
        return [
            [k for k, on in zip(keys, bits, strict=True) if on]
            for bits in itertools.product((1, 0), repeat=len(keys))
        ]
    if isinstance(g, exp.GroupingSets):
        out: list[list[exp.Expression]] = []
        for item in g.expressions:
            if isinstance(item, exp.Tuple):
                out += (
                    _product([_element_sets(x, src) for x in item.expressions]) if item.expressions else [[]]
                )
            elif isinstance(item, exp.Paren):
                out += _element_sets(item.this, src)
            else:
                out += _element_sets(item, src)
        return out
    return [[g]]


def _at(key: exp.Expression, node: exp.Select, src: Source) -> exp.Expression:
    """A key written as a position (`ROLLUP (1, 2)`) as the SELECT item it names."""
    if not (isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit()):
        return key
    i = int(key.this)
    if not 1 <= i <= len(node.expressions):
        src.schema_error(f"GROUP BY position {i} is not in the select list", key)
    item = node.expressions[i - 1]
    return (item.this if isinstance(item, exp.Alias) else item).copy()


def _product(parts: list[list[list[exp.Expression]]]) -> list[list[exp.Expression]]:
    return [[k for s in combo for k in s] for combo in itertools.product(*parts)]


def _bare(k: exp.Expression) -> bool:
    return isinstance(k, exp.Column) and not k.args.get("table") and isinstance(k.this, exp.Identifier)


def alias_keys(items: list[exp.Expression], in_from: Callable[[exp.Column], bool]) -> list[exp.Expression]:
    """A branch's SELECT items with each item aliased as a key its set leaves out decided, now that the
    FROM clause is known: NULL where the key is the alias (no column of the FROM clause has its name,
    DuckDB's binding of a GROUP BY name), else the item as written (the key is that column)."""

    def decide(e: exp.Expression) -> exp.Expression:
        if isinstance(e, exp.Anonymous) and e.name == ALIAS_KEY:
            key, item = e.expressions
            return item if in_from(key) else exp.Null()
        return e

    return [i.transform(decide) for i in items]


def _same(a: exp.Expression, b: exp.Expression) -> bool:
    """One grouping key written twice (`a` and `t.a` when either is unqualified)."""
    if isinstance(a, exp.Column) and isinstance(b, exp.Column):
        ta, tb = a.args.get("table"), b.args.get("table")
        return name_of(a.this) == name_of(b.this) and (ta is None or tb is None or name_of(ta) == name_of(tb))
    return a == b


def _output_name(item: exp.Expression) -> str:
    """The name the compiler gives a SELECT item (`Compiler.select_items`)."""
    if isinstance(item, exp.Alias):
        return name_of(item.args["alias"])
    if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
        return name_of(item.this)
    return item.sql(dialect="duckdb").lower()


def _branch(
    node: exp.Select,
    keys: list[exp.Expression],
    every: list[exp.Expression],
    names: list[str],
    src: Source,
    distinct: bool,
) -> exp.Select:
    """The plain query of one grouping set (SELECT DISTINCT if `distinct`)."""
    out = node.copy()
    for key in ("order", "limit", "offset", "with_", *(() if distinct else ("distinct",))):
        out.set(key, None)
    out.set("group", exp.Group(expressions=[k.copy() for k in keys]))
    left_out = [k for k in every if not any(_same(k, s) for s in keys)]
    items = []
    for item, name in zip(out.expressions, names, strict=True):
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            src.unsupported("* in a query with grouping sets", item)
        plain = item.this if isinstance(item, exp.Alias) else item
        new = _rewrite(plain, keys, every, left_out, src)
        if isinstance(item, exp.Alias) and not any(_same(plain, k) for k in every):
            named = next((k for k in left_out if _bare(k) and name_of(k.this) == name), None)
            if named is not None:  # NULL if the key is this alias (no FROM column of its name)
                new = exp.Anonymous(this=ALIAS_KEY, expressions=[named.copy(), new])
        items.append(exp.alias_(new, exp.to_identifier(name, quoted=True)))
    out.set("expressions", items)
    having = out.args.get("having")
    if having is not None:
        out.set("having", exp.Having(this=_rewrite(having.this, keys, every, left_out, src)))
    if not keys and src.dialect == "spark":  # Spark's empty set has no row over no rows (its Expand)
        rows = exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(0))
        out.set("having", exp.Having(this=exp.and_(rows, *([out.args["having"].this] if having else []))))
    return out


def _rewrite(
    e: exp.Expression,
    keys: list[exp.Expression],
    every: list[exp.Expression],
    left_out: list[exp.Expression],
    src: Source,
) -> exp.Expression:
    """`e` with GROUPING(...) the set's bitmask and the keys it leaves out NULL, outside aggregates."""
    if isinstance(e, (exp.Grouping, exp.GroupingId)):
        mask = 0
        for arg in e.expressions:
            if not any(_same(arg, k) for k in every):
                src.schema_error(f"GROUPING argument {arg.sql(dialect='duckdb')} is not a grouping key", arg)
            mask = mask * 2 + (0 if any(_same(arg, k) for k in keys) else 1)
        return exp.Literal.number(mask)
    if any(_same(e, k) for k in left_out):
        return exp.Null()
    if any(_same(e, k) for k in keys):  # a kept key, whole (`a + 0` kept while `a` is left out)
        return e.copy()
    if isinstance(e, AGGREGATES) or isinstance(e, (exp.Subquery, exp.Select, exp.Exists)):
        return e.copy()
    return _each_child(e, lambda _, x: _rewrite(x, keys, every, left_out, src))
