"""An ORDER BY key, as the IR describes it: what top-k (`operators/topk.py`) and window calls
(`ir/window.py`) order rows by."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SortKey:
    """One ORDER BY key: a column, descending or not, NULLs first or last."""

    column: str
    descending: bool = False
    nulls_first: bool = False
