"""The README's Python blocks run as written (in order, in one namespace, in a scratch directory), on the
local engine: `dbspark.Pipeline()`'s default engine is switched to "local" for the test, since the Spark
path of the same calls is what the README's set-up command runs in CI."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import dbspark

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), re.M | re.S)


def test_the_readme_has_python_blocks() -> None:
    assert len(python_blocks()) >= 5


def test_the_readme_python_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_init = dbspark.Pipeline.__init__

    def local_init(self: Any, *args: Any, **kw: Any) -> None:
        kw.setdefault("engine", "local")
        real_init(self, *args, **kw)

    monkeypatch.setattr(dbspark.Pipeline, "__init__", local_init)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    for i, block in enumerate(python_blocks(), start=1):
        try:
            exec(compile(block, f"README.md python block {i}", "exec"), namespace)
        except Exception as e:  # name the block: the traceback's file name does too
            raise AssertionError(f"README python block {i} failed: {type(e).__name__}: {e}") from e
    # the example in both dialects: the DuckDB block's first step and the Spark block's give one view
    from decimal import Decimal

    assert namespace["s"].view("big").to_dict() == {(7, Decimal("1200.00")): 1}
