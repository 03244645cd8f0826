"""A runtime's checkpoint: one small pickled manifest, and its large frames as Arrow files written once.

A checkpoint is the state of every operator, written after each committed step. Pickled whole, it costs
O(state) per step: a local pipeline over 10^6 rows spent 160 ms of a 175 ms step writing it. But the
large frames in it are the batches of the traces' spines (and other values kept across steps), which
are immutable: a batch written at one step is the same object at the next, until a merge replaces it.
So each frame of at least `MIN_ROWS` rows is written once, as an Arrow IPC file under `frames/` beside
the checkpoint, and the pickle names the file (`pickle`'s persistent IDs); a step writes its new
batches and the manifest, O(change) amortized, as the spines' merges are.

Commit: the new frames are written (temporary name, then renamed), then the manifest is renamed over the
old one (the commit point), then the files no committed manifest names are deleted. A crash before
the rename leaves the old manifest and every file it names; files of an uncommitted checkpoint are
deleted when the checkpoint is next read or written.
"""

from __future__ import annotations

import io
import os
import pickle
import uuid
from pathlib import Path
from typing import Any

import polars as pl

# smaller frames are pickled inline (`DBSPARK_CHECKPOINT_FRAME_ROWS`: the crash tests put every frame in
# a file)
MIN_ROWS = int(os.environ.get("DBSPARK_CHECKPOINT_FRAME_ROWS", "4096"))
FRAMES = "frames"


class FrameFiles:
    """The frame files of the checkpoints written at one path (by one runtime)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.directory = path.parent / FRAMES
        # id(frame) -> (the frame, its file) for the frames the last checkpoint names: frames are
        # immutable, and holding each keeps its id from being reused
        self.written: dict[int, tuple[pl.DataFrame, str]] = {}

    def dump(self, data: Any) -> None:
        """Write `data` as the checkpoint: new large frames to files, then the manifest atomically."""
        live: set[str] = set()
        buf = io.BytesIO()
        pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.persistent_id = lambda obj: self._frame_id(obj, live)  # type: ignore[method-assign]
        pickler.dump(data)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(buf.getvalue())
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)  # the commit: one atomic rename
        self._keep(live)

    def load(self) -> Any:
        """The checkpoint's data, its frames read from their files."""
        live: set[str] = set()

        def frame(name: str) -> pl.DataFrame:
            live.add(name)
            df = pl.read_ipc(self.directory / name)
            self.written[id(df)] = (df, name)  # not written again by the next checkpoint
            return df

        unpickler = pickle.Unpickler(io.BytesIO(self.path.read_bytes()))
        unpickler.persistent_load = frame  # type: ignore[method-assign]
        data = unpickler.load()
        self._keep(live)
        return data

    def _frame_id(self, obj: Any, live: set[str]) -> str | None:
        if type(obj) is not pl.DataFrame or obj.height < MIN_ROWS:
            return None
        hit = self.written.get(id(obj))
        if hit is None:
            name = f"{uuid.uuid4().hex}.arrow"
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.directory / f"{name}.tmp"
            obj.write_ipc(tmp, compression="uncompressed")
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            tmp.replace(self.directory / name)
            hit = (obj, name)
            self.written[id(obj)] = hit
        live.add(hit[1])
        return hit[1]

    def _keep(self, live: set[str]) -> None:
        """Forget and delete the frame files the committed checkpoint does not name."""
        self.written = {k: v for k, v in self.written.items() if v[1] in live}
        if not self.directory.is_dir():
            return
        for f in os.listdir(self.directory):
            if f not in live:
                try:
                    os.remove(self.directory / f)
                except FileNotFoundError:
                    pass
