"""A runtime's checkpoint: a JSON manifest, and its large frames as Arrow files written once.

A checkpoint is the state of every operator, written after each committed step. Written whole, it
would cost O(state) per step: a local pipeline over 10^6 rows spent 160 ms of a 175 ms step writing it.
But the large frames in it are the batches of the traces' spines (and other values kept across
steps), which are immutable: a batch written at one step is the same object at the next, until a merge
replaces it. So each frame of at least `MIN_ROWS` rows is written once, as an Arrow IPC stream file under
`frames/` beside the checkpoint, and the manifest names the file; a step writes its new batches and
the manifest, O(change) amortized, as the spines' merges are. Smaller frames are inline in the
manifest (Arrow IPC stream bytes, base64).

The manifest (`checkpoint.json`) holds the format and its version, the fingerprint of the circuit that
wrote it, the step, each frame file's CRC-32 and size (a checksum against corruption, as Parquet's
page checksums are; a SHA-256 of the files a step writes cost 2x as much), the state as `codec`
encodes it (no pickle: reading a checkpoint runs no code named by the file), and the SHA-256 of all of
that. A checkpoint that does not read back exactly (truncated, corrupted, a frame file missing or
changed, another format version) is a `CheckpointError` naming the file, raised
before anything in the directory is changed.

Commit: the new frames are written (temporary name, then renamed), then the manifest is renamed over the
old one (the commit point), then the files no committed manifest names are deleted. A crash before
the rename leaves the old manifest and every file it names; files of an uncommitted checkpoint are
deleted when the checkpoint is next read or written.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import io
import json
import os
import socket
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import polars as pl

from dbspark import codec, faults
from dbspark.errors import CheckpointError

# smaller frames are inline in the manifest (`DBSPARK_CHECKPOINT_FRAME_ROWS`: the crash tests put every
# frame in a file)
MIN_ROWS = int(os.environ.get("DBSPARK_CHECKPOINT_FRAME_ROWS", "4096"))
FRAMES = "frames"
FORMAT = "dbspark-checkpoint"
# 4 (2026-12-05): integer keys hashed by NumPy (`algebra/consolidate.column_hash`): a Z-set kept in a
# state may hold its rows' hashes, which an older version computed otherwise; 3 (2026-12-02): floating
# sums in limbs (`columnar/exactsum.py`); 2: state by node key
VERSION = 4


def fingerprint(circuit_text: str) -> str:
    """The fingerprint of a circuit, as a checkpoint records it: the SHA-256 of its text."""
    return hashlib.sha256(circuit_text.encode()).hexdigest()


def _ipc(df: pl.DataFrame) -> bytes:
    """A frame as Arrow IPC stream bytes (Polars writes the stream format directly: 10-15 us for a small
    frame, where `write_ipc` plans a sink, 250-750 us)."""
    buf = io.BytesIO()
    df.write_ipc_stream(buf, compression="uncompressed")
    return buf.getvalue()


def _write(path: Path, data: bytes, fault: str | None = None) -> None:
    """`data` at `path`, durably: written under a temporary name, synced, renamed."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if fault is not None:
        faults.point(fault)
    tmp.replace(path)


def _sealed(body: dict[str, Any]) -> bytes:
    """The manifest's text: `body`, then the SHA-256 of its text as its last key."""
    text = json.dumps(body, separators=(",", ":"), allow_nan=False)
    seal = hashlib.sha256(text.encode()).hexdigest()
    return (text[:-1] + f',"sha256":"{seal}"}}').encode()


class FrameFiles:
    """The checkpoints written at one path (by one runtime), and the frame files they name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.directory = path.parent / FRAMES
        # id(frame) -> (the frame, where it is: ("file", its name) or ("inline", its bytes)) for the
        # frames the last checkpoint names: frames are immutable, and holding each keeps its id from
        # being reused
        self.written: dict[int, tuple[pl.DataFrame, Any]] = {}
        self.files: dict[str, dict[str, Any]] = {}  # file name -> its CRC-32 and size

    # ---- writing ------------------------------------------------------------------------------
    def dump(self, state: Any, *, circuit: str, step: int) -> None:
        """Write `state` as the checkpoint of `step` of `circuit` (its fingerprint): new large frames to
        files, then the manifest atomically."""
        named: dict[int, tuple[pl.DataFrame, Any]] = {}
        files: dict[str, dict[str, Any]] = {}
        inline: list[str] = []
        inline_at: dict[int, int] = {}

        def out(df: pl.DataFrame) -> Any:
            hit = self.written.get(id(df)) or named.get(id(df)) or (df, self._store(df))
            named[id(df)] = hit
            kind, ref = hit[1]
            if kind == "file":
                files[ref] = self.files[ref]
                return ref
            if id(df) not in inline_at:  # a frame met twice is inline once
                inline_at[id(df)] = len(inline)
                inline.append(ref)
            return {"i": inline_at[id(df)]}

        tree = codec.encode(state, out)
        body = {"format": FORMAT, "version": VERSION, "circuit": circuit, "step": step}
        body |= {"frames": files, "inline": inline, "state": tree}
        faults.point("frames")
        _write(self.path, _sealed(body), "manifest")  # the commit: one atomic rename
        self.written, self.files = named, files
        self._keep(set(files))

    def _store(self, df: pl.DataFrame) -> tuple[str, str]:
        """A new frame: ("file", the name of a file written now) or ("inline", its bytes in base64)."""
        data = _ipc(df)
        if df.height < MIN_ROWS:
            return "inline", base64.b64encode(data).decode("ascii")
        name = f"{uuid.uuid4().hex}.arrows"
        self.directory.mkdir(parents=True, exist_ok=True)
        _write(self.directory / name, data)
        self.files[name] = {"crc32": zlib.crc32(data), "bytes": len(data)}
        return "file", name

    # ---- reading ------------------------------------------------------------------------------
    def load(self) -> tuple[Any, int]:
        """The checkpoint's state and step, its frames read from their files; a `CheckpointError` naming
        the file at fault if it does not read back exactly. (It may be another circuit's: the runtime
        restores the state of the nodes both circuits have, `Runtime.restore`.)"""
        body = self._manifest()
        files: dict[str, dict[str, Any]] = body["frames"]
        inline: list[str] = body["inline"]
        named: dict[int, tuple[pl.DataFrame, Any]] = {}
        read: dict[Any, pl.DataFrame] = {}

        def frame_in(ref: Any) -> pl.DataFrame:
            if isinstance(ref, str):
                if ref not in read:
                    read[ref] = self._read_file(ref, files.get(ref))
                    named[id(read[ref])] = (read[ref], ("file", ref))  # not written again
                return read[ref]
            if not isinstance(ref, dict) or not isinstance(ref.get("i"), int):
                raise codec.CodecError(f"not a frame reference: {str(ref)[:80]!r}")
            k = ref["i"]
            if k not in read:
                read[k] = _read_ipc(base64.b64decode(inline[k]), self.path)
                named[id(read[k])] = (read[k], ("inline", inline[k]))
            return read[k]

        try:
            state = codec.decode(body["state"], frame_in)
            step = body["step"]
        except (codec.CodecError, KeyError, IndexError, ValueError) as e:
            raise CheckpointError(f"checkpoint {self.path} does not hold dbspark's state: {e}") from None
        self.written, self.files = named, files
        self._keep(set(files))
        return state, int(step)

    def _manifest(self) -> dict[str, Any]:
        try:
            raw = self.path.read_bytes()
        except OSError as e:
            raise CheckpointError(f"checkpoint {self.path} cannot be read: {e.strerror or e}") from None
        try:
            body = json.loads(raw)
        except ValueError:
            raise CheckpointError(
                f"checkpoint {self.path} is not a dbspark checkpoint (not JSON: truncated or corrupted)"
            ) from None
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise CheckpointError(f"checkpoint {self.path} is not a dbspark checkpoint")
        seal = body.pop("sha256", None)
        if _sealed(body) != raw or seal is None:
            raise CheckpointError(
                f"checkpoint {self.path} is corrupted: its checksum does not match its contents"
            )
        if body.get("version") != VERSION:
            raise CheckpointError(
                f"checkpoint {self.path} has format version {body.get('version')!r}; this version of "
                f"dbspark reads version {VERSION}"
            )
        return body

    def _read_file(self, name: str, meta: dict[str, Any] | None) -> pl.DataFrame:
        path = self.directory / name
        if meta is None or Path(name).name != name:
            raise CheckpointError(f"checkpoint {self.path} names a frame file it does not list: {name!r}")
        try:
            data = path.read_bytes()
        except OSError as e:
            raise CheckpointError(
                f"frame file {path} of checkpoint {self.path} cannot be read: {e.strerror or e}"
            ) from None
        if len(data) != meta.get("bytes") or zlib.crc32(data) != meta.get("crc32"):
            raise CheckpointError(
                f"frame file {path} of checkpoint {self.path} is corrupted: its checksum does not match"
            )
        return _read_ipc(data, path)

    def _keep(self, live: set[str]) -> None:
        """Delete the frame files the committed checkpoint does not name."""
        if not self.directory.is_dir():
            return
        for f in os.listdir(self.directory):
            if f not in live:
                try:
                    os.remove(self.directory / f)
                except FileNotFoundError:
                    pass


def _read_ipc(data: bytes, where: Path) -> pl.DataFrame:
    try:
        return pl.read_ipc_stream(io.BytesIO(data))
    except Exception as e:  # Polars' own errors for bytes that are not Arrow IPC
        raise CheckpointError(f"{where}: a frame is not Arrow IPC data ({type(e).__name__})") from None


class DirectoryLock:
    """A state directory held by one running pipeline: an exclusive `flock` on its `LOCK` file, which
    names the holder (process, host, since when). The kernel releases it when the holder closes the
    pipeline or exits, however it ends (a killed process holds nothing)."""

    NAME = "LOCK"

    def __init__(self, directory: Path) -> None:
        self.path = directory / self.NAME
        f = open(self.path, "a+")  # noqa: SIM115 (held open: the lock lives as long as the file)
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            f.close()
            if holder.startswith(f"process {os.getpid()} "):
                holder += " (this process: another Pipeline on the directory is open)"
            raise CheckpointError(
                f"pipeline directory {directory} is in use by {holder} (its lock: {self.path}); "
                "close that pipeline, or use another directory"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(
            f"process {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n"
        )
        f.flush()
        self._file: Any = f

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the descriptor releases the lock
            self._file = None
