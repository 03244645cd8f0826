"""User aggregates without an inverse, maintained by scan trees: `lftj-incremental-maintenance.txt`
§2.3.3 (semigroup aggregates), §3.1 (scan trees) and §3.1.1 (leaves that aggregate a page of records).

A user aggregate with no inverse of g (a product modulo p, a bitwise OR, a set union, the largest value
by some key, ...) cannot undo a deleted value: folded again from the group's rows, a step costs
O(group) calls of f and g (`ordered_fold`). Here each group's rows sit under a scan tree: its leaves
are pages of rows, each node holds the ⊕ (g) of its children, its root is the group's value. A change
refolds its pages and the nodes above them, and nothing else: O(δ · (page + 16 · depth)) calls of g
per step, δ the change's rows, instead of O(group).

Geometry. g folds a multiset, so it is commutative and associative (`ir.aggregate.UserAggregate`) and
the order of the leaves is free: a row's place is its stable 64-bit hash (`algebra.keyhash`), and a
node at level ℓ (1 ≤ ℓ ≤ D, fan-out 16) holds the rows whose hash starts with its prefix of 4ℓ bits.
The pages are the nodes at level D, the group's depth, chosen from its row count so that a page holds
about `Geometry.page` rows: the hash keeps the pages even with no splits or merges, and the depth
changes only when the group's count leaves its band by a factor of 2 (the group is then read whole and
its tree built again: amortized O(1) per row, the seed's occasional rebalancing). At depth 0 the page
is the group: a group of up to 2 pages' rows is read whole.

State, in the kernel's traces (either engine): the rows by (group, page) (`records`); the nodes below
the root by (group, level, parent's prefix), each with its prefix, its rows' count and one accumulated
value per call (`nodes`); the root in the user aggregates' accumulator trace (`user_fold`) with the
group's depth. A step seeks the change's pages and, for each node on the change's paths, its parent's
children (its siblings are its parent's fold's other inputs), then folds bottom-up in one `cogroup` by
group (`fold`), which also gives the output's change (`user_fold.fold_groups`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from dbspark import codec
from dbspark.algebra.keyhash import stable_hash
from dbspark.algebra.zset import WEIGHT
from dbspark.columnar import user_fold
from dbspark.columnar.aggfold import CNT, G, has_floats, key_schema, keys_of
from dbspark.errors import NegativeStateError
from dbspark.ir.aggregate import AggCall, AggSpec, UserAggregate

TREES = True  # False: such aggregates are folded from the group's rows (`ordered_fold`; the bench's "refold")
PAGE = 64  # a page's rows, about (`Geometry`)
BITS = 4  # a node's prefix grows by BITS per level: fan-out 16
MAX_DEPTH = 4  # pages of 16-bit prefixes at most: 65,536 per group
DEP, PG, LVL, PAR, PFX, RC = "__dep", "__pg", "__lvl", "__par", "__pfx", "__rc"
K = user_fold.K  # 0: output; 1: the roots' trace; 2: the records' trace; 3: the nodes' trace
REC = "__r:"  # a record's column in `fold`'s rows (beside the output's columns, which may share names)


@dataclass(frozen=True)
class Geometry:
    """The pages' size: a group of n rows has pages of `page` to 4 · `page` rows (n within the band of
    its depth), and n > 2 · page · 16^D deepens its tree, n < page · 16^(D-1) / 2 makes it shallower."""

    page: int = PAGE

    def depth(self, d: int, n: int) -> int:
        """The depth of a group's tree of depth `d` once it holds n rows."""
        while d < MAX_DEPTH and n > 2 * self.page * (1 << (BITS * d)):
            d += 1
        while d > 0 and n < self.page * (1 << (BITS * (d - 1))) // 2:
            d -= 1
        return d


def applies(spec: AggSpec) -> bool:
    """Whether the spec is folded here: some user call without an inverse, the others user or linear
    calls (no MIN / MAX / MEDIAN / MODE, whose ordered state ranks large groups, and no floating sums,
    whose limbs are the ordered fold's)."""
    if not TREES or spec.needs_ordered or has_floats(spec):
        return False
    return spec.needs_rows


def tree_calls(spec: AggSpec) -> list[tuple[int, AggCall]]:
    """The user calls without an inverse: the ones the trees fold."""
    return [
        (i, c) for i, c in enumerate(spec.calls) if isinstance(c.func, UserAggregate) and c.func.d is None
    ]


def root_schema(spec: AggSpec) -> pl.Schema:
    """The roots' trace (the user aggregates' accumulator trace, `user_fold`) with the group's depth."""
    return pl.Schema([*user_fold.user_schema(spec).items(), (DEP, pl.Int8())])


def node_schema(spec: AggSpec) -> pl.Schema:
    """A node below the root: the group, its level, its parent's prefix (the trace's keys), its own
    prefix, its rows' count and per call without an inverse the accumulated value (`codec.dumps`)."""
    cols: list[tuple[str, pl.DataType]] = [
        (LVL, pl.Int8()),
        (PAR, pl.Int64()),
        (PFX, pl.Int64()),
        (RC, pl.Int64()),
    ]
    cols += [(f"__u{i}", pl.Binary()) for i, _ in tree_calls(spec)]
    return pl.Schema([*key_schema(spec).items(), *cols])


def record_schema(rows: pl.Schema) -> pl.Schema:
    """The records' trace: the input's rows as the aggregate keeps them (`rows`), and their page."""
    return pl.Schema([*rows.items(), (PG, pl.Int64())])


def fold_schema(spec: AggSpec, rows: pl.Schema) -> pl.Schema:
    """`fold`'s rows: `user_fold`'s (the output's, the roots') and the records' and nodes' columns."""
    out = user_fold.out_schema(spec, root_schema(spec))
    keys = set(keys_of(spec))
    cols = list(out.items())
    cols += [(REC + c, t) for c, t in rows.items() if c not in keys] + [(PG, pl.Int64())]
    cols += [(c, t) for c, t in node_schema(spec).items() if c not in out]
    return pl.Schema(cols)


def prefix(h: np.ndarray, level: int) -> np.ndarray:
    """The prefix of `level` · BITS bits of each hash (0 at level 0)."""
    if level == 0:
        return np.zeros(len(h), dtype=np.int64)
    return (h >> np.uint64(64 - BITS * level)).astype(np.int64)


def _hashes(frame: pl.DataFrame, spec: AggSpec) -> np.ndarray:
    return stable_hash(frame, list(spec.input_schema))


def _depths(
    spec: AggSpec, geo: Geometry, d: pl.DataFrame, roots: pl.DataFrame, lin: pl.DataFrame
) -> pl.DataFrame:
    """Per group of the change: its tree's depth before (`__d0`) and after the change (`__d1`)."""
    keys = keys_of(spec)
    groups = d.group_by(keys).agg(pl.col(WEIGHT).sum().alias("__dw"))
    old_n = lin.group_by(keys).agg(pl.col(CNT).sum().alias("__n0"))
    dep = roots.group_by([*keys, DEP]).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) > 0).select(*keys, DEP)
    j = groups.join(old_n, on=keys, how="left", nulls_equal=True).join(
        dep, on=keys, how="left", nulls_equal=True
    )
    d0 = j[DEP].fill_null(0).to_list()
    n1 = (j["__n0"].fill_null(0) + j["__dw"]).to_list()
    d1 = [geo.depth(a, n) for a, n in zip(d0, n1, strict=True)]
    return j.select(keys).with_columns(
        pl.Series("__d0", d0, dtype=pl.Int8), pl.Series("__d1", d1, dtype=pl.Int8)
    )


def _everything(plan: pl.DataFrame, keys: list[str], values: Callable[[int], pl.DataFrame]) -> pl.DataFrame:
    """For every group of `plan` whose depth changes, the rows `values(old depth)` (all its pages, or
    all its nodes' keys) with the group's keys."""
    parts = []
    for row in plan.filter(pl.col("__d0") != pl.col("__d1")).iter_rows(named=True):
        frame = values(int(row["__d0"]))
        if frame.height:
            parts.append(frame.with_columns([pl.lit(row[k], plan.schema[k]).alias(k) for k in keys]))
    return pl.concat(parts, how="vertical") if parts else pl.DataFrame()


def probe_schema(spec: AggSpec) -> pl.Schema:
    """`probes`' rows: the group's keys, `PG` for a record's page (`LVL`, `PAR` NULL) or `LVL`, `PAR`
    for a node's (`PG` NULL)."""
    return pl.Schema([*key_schema(spec).items(), (PG, pl.Int64()), (LVL, pl.Int8()), (PAR, pl.Int64())])


def probes(spec: AggSpec, geo: Geometry, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function over (the change's rows, the roots and the linear accumulators at its
    groups): the keys of what a step reads of the trees: the (group, page) of each change row's page
    and, for each node on its path (levels 1 to the depth), the (group, level, parent) of its parent's
    children; of a group whose tree is built again, every page and node at its old depth."""
    d, roots, lin = frames
    keys = keys_of(spec)
    schema = pl.Schema([*probe_schema(spec).items(), (WEIGHT, pl.Int64())])
    if d.height == 0:
        return pl.DataFrame(schema=schema)
    plan = _depths(spec, geo, d, roots, lin)
    rows = d.join(plan, on=keys, how="left", nulls_equal=True).filter(pl.col("__d0") == pl.col("__d1"))
    h = _hashes(rows, spec)
    dep = rows["__d0"].to_numpy()
    pg = np.zeros(len(h), dtype=np.int64)
    parts = [pl.DataFrame(schema=probe_schema(spec))]  # every column, where no row has a node's
    for level in range(1, MAX_DEPTH + 1):
        pg[dep == level] = prefix(h[dep == level], level)
        at = dep >= level
        if at.any():
            parts.append(
                rows.filter(pl.Series(at))
                .select(keys)
                .with_columns(
                    pl.lit(level, pl.Int8).alias(LVL),
                    pl.Series(PAR, prefix(h[at], level - 1), dtype=pl.Int64),
                )
            )
    parts.append(rows.select(keys).with_columns(pl.Series(PG, pg, dtype=pl.Int64)))
    parts += [
        f for f in (_everything(plan, keys, _all_pages), _everything(plan, keys, _all_nodes)) if f.height
    ]
    out = pl.concat(parts, how="diagonal").unique().with_columns(pl.lit(1, pl.Int64).alias(WEIGHT))
    return out.select(list(schema))


def _all_pages(depth: int) -> pl.DataFrame:
    return pl.DataFrame({PG: np.arange(1 << (BITS * depth), dtype=np.int64)})


def _all_nodes(depth: int) -> pl.DataFrame:
    lv = [np.full(1 << (BITS * (k - 1)), k, dtype=np.int8) for k in range(1, depth + 1)]
    par = [np.arange(1 << (BITS * (k - 1)), dtype=np.int64) for k in range(1, depth + 1)]
    if not lv:
        return pl.DataFrame({LVL: [], PAR: []}, schema={LVL: pl.Int8, PAR: pl.Int64})
    return pl.DataFrame({LVL: np.concatenate(lv), PAR: np.concatenate(par)})


def fold(
    spec: AggSpec, geo: Geometry, was: bool, rows: pl.Schema, frames: list[pl.DataFrame]
) -> pl.DataFrame:
    """`cogroup` function by group over (the change's linear accumulators, its rows, the traces' entries
    at its groups: linear accumulators, roots, the records of the probed pages, the probed nodes): the
    output's change (`K` 0) and the changes of the roots' (1), records' (2) and nodes' (3) traces, in
    `fold_schema` with weights. A group's tree is refolded from the change's pages up."""
    dacc, d, lin, roots, recs, nodes = frames
    schema = pl.Schema([*fold_schema(spec, rows).items(), (WEIGHT, pl.Int64())])
    changes: list[pl.DataFrame] = []

    def tree(groups: pl.DataFrame, n: pl.DataFrame) -> tuple[dict[int, list[Any]], dict[str, pl.Series]]:
        folded = _Folder(spec, geo, rows, groups, d, roots, recs, nodes)
        values: dict[int, list[Any]] = {i: [] for i, _ in tree_calls(spec)}
        deps = []
        for j, key in enumerate(groups.rows()):
            accs, depth = folded.group(j, key, int(n[CNT][j]))
            for i, _ in tree_calls(spec):
                values[i].append(accs[i])
            deps.append(depth)
        changes.extend(folded.changes)
        return values, {DEP: pl.Series(DEP, deps, dtype=pl.Int8)}

    out = user_fold.fold_groups(spec, was, dacc, d, lin, roots, tree, root_schema(spec))
    parts = [pl.DataFrame(schema=schema), out, *changes]
    return pl.concat(parts, how="diagonal_relaxed").select(list(schema))


class _Folder:
    """The refold of one batch of groups (`fold`): the change's and the found rows split by group (by
    the group's position in `groups`, found by a join: NaN keys are equal there, not in a dict)."""

    def __init__(
        self,
        spec: AggSpec,
        geo: Geometry,
        rows: pl.Schema,
        groups: pl.DataFrame,
        d: pl.DataFrame,
        roots: pl.DataFrame,
        recs: pl.DataFrame,
        nodes: pl.DataFrame,
    ) -> None:
        self.spec, self.geo, self.keys = spec, geo, keys_of(spec)
        self.at = groups.with_row_index("__j")
        self.calls = tree_calls(spec)
        self.funcs = [c.func for _, c in self.calls if isinstance(c.func, UserAggregate)]
        self.vcols = [c for c in rows if c not in self.keys]
        d = d if spec.by else d.with_columns(pl.lit(0, pl.Int8).alias(G))
        self.d = self._split(d.select(*rows, WEIGHT))
        self.recs = self._split(recs)
        nschema = node_schema(spec)
        live = nodes.group_by(list(nschema)).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) != 0)
        self.nodes = self._split(live)
        dep = roots.group_by([*self.keys, DEP]).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) > 0)
        self.depth = {j: int(v) for j, v in self._indexed(dep).select("__j", DEP).iter_rows()}
        self.rows = rows
        self.changes: list[pl.DataFrame] = []

    def _indexed(self, frame: pl.DataFrame) -> pl.DataFrame:
        return frame.join(self.at, on=self.keys, how="inner", nulls_equal=True)

    def _split(self, frame: pl.DataFrame) -> dict[int, pl.DataFrame]:
        if frame.height == 0:
            return {}
        parts = self._indexed(frame).partition_by("__j", as_dict=True, maintain_order=False)
        return {int(k[0]): v.drop("__j") for k, v in parts.items()}

    def _keyed(self, frame: pl.DataFrame, key: tuple) -> pl.DataFrame:
        """`frame` with the group's keys as columns of their types (the hash reads them)."""
        cols = [pl.lit(v, self.rows[k]).alias(k) for k, v in zip(self.keys, key, strict=True)]
        return frame.with_columns(cols)

    def _paged(self, frame: pl.DataFrame, key: tuple, depth: int) -> pl.DataFrame:
        h = _hashes(self._keyed(frame, key), self.spec)
        return frame.with_columns(pl.Series(PG, prefix(h, depth), dtype=pl.Int64))

    def group(self, j: int, key: tuple, n: int) -> tuple[dict[int, Any], int]:
        """The new accumulated values (by call) and depth of group `j` (keys `key`); its traces'
        changes to `changes`."""
        d0 = self.depth.get(j, 0)
        d1 = self.geo.depth(d0, n)
        ch = self.d.get(j)
        found = self.recs.get(j)
        old_nodes = self.nodes.get(j)
        parts = [f.select(*self.vcols, WEIGHT) for f in (found, ch) if f is not None and f.height]
        if not parts:
            return {i: None for i, _ in self.calls}, d1
        rows = pl.concat(parts, how="vertical").group_by(self.vcols).agg(pl.col(WEIGHT).sum())
        rows = rows.filter(pl.col(WEIGHT) != 0)
        if (rows[WEIGHT] < 0).any():
            name = self.calls[0][1].name
            raise NegativeStateError(
                f"aggregate {name!r}, group {key if self.spec.by else ()}: a row deleted more times than present"
            )
        rows = self._paged(rows, key, d1)
        if d0 == d1:  # only the change's pages were read: they change, by the change's rows
            assert ch is not None
            ch = self._paged(ch, key, d1)
            self._records(ch, key, 1)
            pages = set(ch[PG].to_list())
            olds = self._olds(old_nodes)
        else:  # built again: every record and node moves
            pages = set(rows[PG].to_list())
            if found is not None and found.height:
                self._records(found, key, -1)
            self._records(rows, key, 1)
            if old_nodes is not None and old_nodes.height:
                self._nodes(old_nodes, -1)
            olds = {}
        new = self._pages(rows, d1, pages)
        return self._up(new, olds, d1, key, rebuilt=d0 != d1), d1

    def _olds(self, nodes: pl.DataFrame | None) -> dict[tuple[int, int], tuple[int, list[Any]]]:
        """The found nodes by (level, prefix): their count and stored values."""
        if nodes is None:
            return {}
        values = [nodes[f"__u{i}"].to_list() for i, _ in self.calls]
        cols = zip(nodes[LVL].to_list(), nodes[PFX].to_list(), nodes[RC].to_list(), strict=True)
        return {(lv, pfx): (rc, [v[k] for v in values]) for k, (lv, pfx, rc) in enumerate(cols)}

    def _pages(
        self, rows: pl.DataFrame, depth: int, pages: set[int]
    ) -> dict[tuple[int, int], tuple[int, list[Any]]]:
        """Each of `pages`' count and accumulated values (by position in `calls`), at level `depth`
        (an empty page: count 0)."""
        out: dict[tuple[int, int], tuple[int, list[Any]]] = {
            (depth, int(p)): (0, [None] * len(self.calls)) for p in pages
        }
        if rows.height == 0:
            return out
        rows = rows.sort(PG)
        pg = rows[PG].to_numpy()
        cuts = [0, *(np.flatnonzero(pg[1:] != pg[:-1]) + 1).tolist(), len(pg)]
        ws = rows[WEIGHT].to_list()
        args = [rows[str(c.arg)].to_list() for _, c in self.calls]
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            w = ws[a:b]
            accs = [ua.fold(vals[a:b], w) for ua, vals in zip(self.funcs, args, strict=True)]
            out[(depth, int(pg[a]))] = (sum(w), accs)
        return out

    def _up(
        self,
        new: dict[tuple[int, int], tuple[int, list[Any]]],
        olds: dict[tuple[int, int], tuple[int, list[Any]]],
        depth: int,
        key: tuple,
        rebuilt: bool,
    ) -> dict[int, Any]:
        """Fold the changed nodes' parents level by level up to the root; the nodes' trace changes."""
        changed = dict(new)
        level_nodes = dict(new)
        by_level: dict[int, list[tuple[int, tuple[int, list[Any]]]]] = {}
        for (lv, pfx), v in olds.items():
            by_level.setdefault(lv, []).append((pfx, v))
        for level in range(depth - 1, -1, -1):
            below = [(pfx, v) for (lv, pfx), v in level_nodes.items() if lv == level + 1]
            parents = {pfx >> BITS for pfx, _ in below}
            kids: dict[int, dict[int, tuple[int, list[Any], bool]]] = {q: {} for q in parents}
            for pfx, (rc, accs) in by_level.get(level + 1, []):
                if (pfx >> BITS) in kids:
                    kids[pfx >> BITS][pfx] = (rc, accs, True)
            for pfx, (rc, accs) in below:
                kids[pfx >> BITS][pfx] = (rc, accs, False)
            level_nodes = {}
            for q, children in kids.items():
                level_nodes[(level, q)] = self._combine(list(children.values()))
            changed.update(level_nodes)
        root = changed.get((0, 0), (0, [None] * len(self.calls)))
        rows = []
        for (lv, pfx), (rc, accs) in changed.items():
            if lv == 0:
                continue
            if not rebuilt and (lv, pfx) in olds:
                orc, oaccs = olds[(lv, pfx)]
                rows.append((lv, pfx >> BITS, pfx, orc, oaccs, -1))
            if rc > 0:
                stored = [user_fold.stored_value(ua, a) for ua, a in zip(self.funcs, accs, strict=True)]
                rows.append((lv, pfx >> BITS, pfx, rc, stored, 1))
        if rows:
            self._node_rows(rows, key)
        return {i: a for (i, _), a in zip(self.calls, root[1], strict=True)}

    def _combine(self, children: list[tuple[int, list[Any], bool]]) -> tuple[int, list[Any]]:
        """A node's count and values from its children's (stored ones decoded)."""
        rc = 0
        accs: list[Any] = [None] * len(self.calls)
        for crc, caccs, stored in children:
            if crc <= 0:
                continue
            rc += crc
            for k, ua in enumerate(self.funcs):
                a = caccs[k]
                if a is None:
                    continue
                v = codec.loads(a) if stored else a
                accs[k] = v if accs[k] is None else ua.g(accs[k], v)
        return rc, accs

    def _records(self, frame: pl.DataFrame, key: tuple, sign: int) -> None:
        cols = [pl.lit(v, self.rows[k]).alias(k) for k, v in zip(self.keys, key, strict=True)]
        f = frame.select(*self.vcols, PG, WEIGHT).with_columns(*cols, (pl.col(WEIGHT) * sign).alias(WEIGHT))
        f = f.rename({c: REC + c for c in self.vcols})
        self.changes.append(f.with_columns(pl.lit(2, pl.Int8).alias(K)))

    def _nodes(self, frame: pl.DataFrame, sign: int) -> None:
        f = frame.select(*node_schema(self.spec), (pl.col(WEIGHT) * sign).alias(WEIGHT))
        self.changes.append(f.with_columns(pl.lit(3, pl.Int8).alias(K)))

    def _node_rows(self, rows: list[tuple[int, int, int, int, list[Any], int]], key: tuple) -> None:
        nschema = node_schema(self.spec)
        data: dict[str, list[Any]] = {c: [] for c in [*nschema, WEIGHT]}
        for lv, par, pfx, rc, accs, w in rows:
            for k, v in zip(self.keys, key, strict=True):
                data[k].append(v)
            data[LVL].append(lv)
            data[PAR].append(par)
            data[PFX].append(pfx)
            data[RC].append(rc)
            for (i, _), a in zip(self.calls, accs, strict=True):
                data[f"__u{i}"].append(a)
            data[WEIGHT].append(w)
        self.changes.append(
            pl.DataFrame(data, schema=pl.Schema([*nschema.items(), (WEIGHT, pl.Int64())])).with_columns(
                pl.lit(3, pl.Int8).alias(K)
            )
        )
