"""Where the spark engine keeps its files: the state directory, named by the step that writes them.

Traces live under `state/` (`engines/spark/buckets.py`), the views' change logs under `outputs/`, values
a delay holds across steps under `held/`. Files a committed step replaced are deleted after the commit
(`collect`); after a restart, files of steps that never committed are swept (`sweep_uncommitted`).
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path


class Storage:
    """Where an engine's state files live, with the step number that names new files."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.step = 0
        self.garbage: list[str] = []

    def new_path(self, kind: str = "traces") -> str:
        return str(self.root / kind / f"s{self.step:08d}-{uuid.uuid4().hex[:12]}")

    def collect(self) -> None:
        """Delete the files a committed step replaced."""
        for p in self.garbage:
            shutil.rmtree(p, ignore_errors=True)
        self.garbage = []

    def sweep_uncommitted(self, committed_steps: int) -> None:
        """After a restart: delete files written by steps that never committed (step >= committed), the
        state files (`s<step>-...`) and the outputs' change logs (`outputs/<view>/step-<step>`)."""
        dirs = [self.root / "traces", self.root / "held"]
        if (self.root / "outputs").exists():
            dirs += [d for d in (self.root / "outputs").iterdir() if d.is_dir()]
        for d in dirs:
            if not d.exists():
                continue
            for p in d.iterdir():
                m = re.match(r"(?:s|step-)(\d{8})", p.name)
                if m and int(m.group(1)) >= committed_steps:
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
