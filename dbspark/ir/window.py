"""Window calls as the IR describes them (what a window computes, above any engine): the partition and
order of a window and its calls. The fold that computes them is `columnar/window_fold.py`; the operators
`operators/window.py`; the front ends build them (`frontends/sql/windows.py`, `asof.py`, `timewindows.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbspark.ir.order import SortKey

RANKING = ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile")
SHIFTS = ("lag", "lead")
VALUES = ("first_value", "last_value")
SESSIONS = ("session_start", "session_end")  # a session window's bounds: gap `n`, times `arg` (Int64)
PEERS = "__wpeers"  # a RANGE frame's CURRENT ROW end: the current row's peer group's (`WindowCall.bounds`)
ASOF = "asof"  # an ASOF join's match: `arg` of the last row at or before this one whose `default` column is 0
AGGREGATES = ("sum", "count", "count_star", "avg", "min", "max")
FUNCS = (*RANKING, *SHIFTS, *VALUES, *AGGREGATES, ASOF, *SESSIONS)


@dataclass(frozen=True)
class WindowCall:
    """One call: `out` = func(arg) over the window. `n`: LAG / LEAD's offset, NTILE's buckets; `default`:
    the column of LAG / LEAD's default; `start` / `end`: a ROWS frame's bounds as offsets from the
    current row (None: unbounded), or `rows` False for the default frame. `bounds`: a RANGE frame other
    than the default and the whole partition (with `rows` False), its start and end each None
    (UNBOUNDED), `PEERS` (CURRENT ROW: the first / last row tied with the current one) or the column
    holding the bound's value (`x PRECEDING` in an ascending order: the ORDER BY value minus x; NULL
    where that value is NULL, whose frame ends at its peers' end, as DuckDB's)."""

    out: str
    func: str
    dtype: pl.DataType
    arg: str | None = None
    n: int = 1
    default: str | None = None
    rows: bool = False
    start: int | None = None
    end: int | None = None
    bounds: tuple[str | None, str | None] | None = None


@dataclass(frozen=True)
class WindowSpec:
    partition: tuple[str, ...]
    order: tuple[SortKey, ...]
    calls: tuple[WindowCall, ...]
    columns: tuple[str, ...]  # the input's columns, in order (the output adds the calls')
