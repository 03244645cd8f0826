"""State on disk without pickle: the Python values kept across steps as a JSON tree, frames as Arrow.

An operator's state is a graph of plain values (numbers, strings, tuples, lists, dicts, sets,
DECIMALs, dates, bytes), frames (Polars DataFrames and Series, NumPy arrays and scalars, Polars
schemas and types) and instances of dbspark's own classes (traces, batches, aggregate states). `encode`
turns such a graph into a tree of JSON values; each frame is handed to the caller, which stores it
(`circuit/checkpoint.py`: an Arrow IPC file, or inline) and returns a JSON reference to it. `decode`
builds the graph again from the tree and the frames the caller reads back by reference.

Decoding runs no code named by the file. It builds only the types below and instances of classes
defined in dbspark's own modules (named by module and qualified name, created by `__new__` without
`__init__`, their attributes set as they were), so a corrupted or hostile checkpoint can at worst fail
to decode (`CodecError`), never execute anything; `pickle` executes whatever a file names. A value of
any other type (a user's object, a function) is refused when it is encoded, naming its type.

Objects that are shared in the graph (lists, dicts, sets, dbspark objects) stay shared: each is
numbered in the order the depth-first encoding first meets it, and later meetings are references to
that number (`{"R": n}`), as pickle's memo does; the decoder numbers them in the same order, before
their contents, so cycles through them decode too.

The tree's nodes: None, booleans, integers, strings and finite floats are themselves; every other
value is an object with one tag key: `F` float (nan, inf, -inf), `T` tuple, `L` list, `S` set, `Z`
frozenset, `D` dict (a list of [key, value] pairs: keys of any type), `N` Decimal, `B` bytes (base64),
`d` date, `t` datetime, `h` time, `u` timedelta, `P` DataFrame, `Q` Series, `K` Polars schema, `Y`
Polars type, `A` NumPy array, `G` NumPy scalar, `O` dbspark object (with `V` its attributes, `I` the
items of a tuple subclass, or `W` what its `_stored_state()` keeps, given to its `_from_stored` when
read: a trace's batch keeps its frame, not the hashes derived from it), `E` member of a dbspark enum,
`R` reference.
"""

from __future__ import annotations

import base64
import datetime as dt
import enum
import importlib
import json
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np
import polars as pl

from dbspark.errors import DbsparkError

FrameOut = Callable[[pl.DataFrame], Any]  # a frame to store -> its JSON reference
FrameIn = Callable[[Any], pl.DataFrame]  # a reference -> the frame read back


class CodecError(DbsparkError):
    """A value that cannot be encoded (a type the codec does not store), or a tree that does not decode."""


_MEMO = (list, dict, set)  # mutable containers: their identity is kept
_NUMPY_KINDS = "biufcM"  # NumPy arrays and scalars of booleans, numbers and datetimes


def _is_dbspark(cls: type) -> bool:
    return cls.__module__ == "dbspark" or cls.__module__.startswith("dbspark.")


def _attributes(obj: Any) -> dict[str, Any]:
    """An object's attributes: its `__dict__` and every slot of its classes that is set."""
    out = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for s in (slots,) if isinstance(slots, str) else slots:
            if s not in ("__dict__", "__weakref__") and hasattr(obj, s):
                out[s] = getattr(obj, s)
    return out


class _Encoder:
    def __init__(self, frame_out: FrameOut) -> None:
        self.frame_out = frame_out
        self.memo: dict[int, int] = {}
        self.held: list[Any] = []  # every memoized object stays alive, so that no id is reused

    def _number(self, obj: Any) -> None:
        self.memo[id(obj)] = len(self.memo)
        self.held.append(obj)

    def encode(self, obj: Any) -> Any:
        t = type(obj)
        if obj is None or t is bool or t is int or t is str:
            return obj
        if t is float:
            return obj if math.isfinite(obj) else {"F": repr(obj)}
        n = self.memo.get(id(obj))
        if n is not None:
            return {"R": n}
        if t is tuple:
            return {"T": [self.encode(x) for x in obj]}
        if t is list:
            self._number(obj)
            return {"L": [self.encode(x) for x in obj]}
        if t is dict:
            self._number(obj)
            return {"D": [[self.encode(k), self.encode(v)] for k, v in obj.items()]}
        if t is set:
            self._number(obj)
            return {"S": [self.encode(x) for x in obj]}
        if t is frozenset:
            return {"Z": [self.encode(x) for x in obj]}
        if t is Decimal:
            return {"N": str(obj)}
        if t is bytes:
            return {"B": base64.b64encode(obj).decode("ascii")}
        if t is dt.date:
            return {"d": obj.isoformat()}
        if t is dt.datetime:
            return {"t": obj.isoformat()}
        if t is dt.time:
            return {"h": obj.isoformat()}
        if t is dt.timedelta:
            return {"u": [obj.days, obj.seconds, obj.microseconds]}
        if t is pl.DataFrame:
            return {"P": self.frame_out(obj)}
        if t is pl.Series:
            return {"Q": self.frame_out(obj.to_frame())}
        if t is pl.Schema:
            return {"K": self.frame_out(pl.DataFrame(schema=obj))}
        if isinstance(obj, pl.DataType):
            return {"Y": self.frame_out(pl.DataFrame(schema={"y": obj}))}
        if t is np.ndarray and obj.dtype.kind in _NUMPY_KINDS:
            flat = pl.DataFrame({"a": obj.reshape(-1)})
            return {"A": [self.frame_out(flat), list(obj.shape)]}
        if isinstance(obj, np.generic) and obj.dtype.kind in _NUMPY_KINDS and obj.dtype.kind != "M":
            return {"G": [obj.dtype.str, obj.item()]}
        if isinstance(obj, enum.Enum) and _is_dbspark(t):
            return {"E": f"{t.__module__}:{t.__qualname__}", "V": obj.name}
        if _is_dbspark(t) and not isinstance(obj, type):
            name = f"{t.__module__}:{t.__qualname__}"
            if isinstance(obj, tuple):  # a NamedTuple: immutable, its items are its state
                return {"O": name, "I": [self.encode(x) for x in obj]}
            self._number(obj)
            stored = getattr(obj, "_stored_state", None)
            if stored is not None:  # a class that keeps less than its attributes (derived data)
                return {"O": name, "W": {k: self.encode(v) for k, v in stored().items()}}
            return {"O": name, "V": {k: self.encode(v) for k, v in _attributes(obj).items()}}
        raise CodecError(
            f"a value of type {t.__module__}.{t.__qualname__} cannot be stored in dbspark's state "
            "(the state holds plain values, frames and dbspark's own objects)"
        )


def encode(obj: Any, frame_out: FrameOut) -> Any:
    """`obj` as a tree of JSON values; each frame in it stored by `frame_out`."""
    return _Encoder(frame_out).encode(obj)


def _class(name: str) -> type:
    module, _, qualname = name.partition(":")
    if not (module == "dbspark" or module.startswith("dbspark.")) or not qualname:
        raise CodecError(f"the state names {name!r}, which is not one of dbspark's classes")
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        raise CodecError(f"the state names {name!r}, which this version of dbspark does not have") from None
    if not isinstance(found, type):
        raise CodecError(f"the state names {name!r}, which is not a class")
    return found


class _Decoder:
    def __init__(self, frame_in: FrameIn) -> None:
        self.frame_in = frame_in
        self.memo: list[Any] = []

    def decode(self, node: Any) -> Any:
        if node is None or isinstance(node, (bool, int, str, float)):
            return node
        if not isinstance(node, dict) or not node:
            raise CodecError(f"not a node of dbspark's state: {str(node)[:80]!r}")
        tag = "O" if "O" in node else "E" if "E" in node else next(iter(node))
        arg = node[tag]
        match tag:
            case "R":
                return self.memo[arg]
            case "F":
                return float(arg)
            case "T":
                return tuple(self.decode(x) for x in arg)
            case "L":
                lst: list[Any] = []
                self.memo.append(lst)
                lst.extend(self.decode(x) for x in arg)
                return lst
            case "D":
                d: dict[Any, Any] = {}
                self.memo.append(d)
                for k, v in arg:
                    key = self.decode(k)
                    d[key] = self.decode(v)
                return d
            case "S":
                s: set[Any] = set()
                self.memo.append(s)
                s.update(self.decode(x) for x in arg)
                return s
            case "Z":
                return frozenset(self.decode(x) for x in arg)
            case "N":
                return Decimal(arg)
            case "B":
                return base64.b64decode(arg)
            case "d":
                return dt.date.fromisoformat(arg)
            case "t":
                return dt.datetime.fromisoformat(arg)
            case "h":
                return dt.time.fromisoformat(arg)
            case "u":
                return dt.timedelta(*arg)
            case "P":
                return self.frame_in(arg)
            case "Q":
                return self.frame_in(arg).to_series(0)
            case "K":
                return self.frame_in(arg).schema
            case "Y":
                return self.frame_in(arg).schema["y"]
            case "A":
                ref, shape = arg
                flat = self.frame_in(ref).to_series(0)
                return flat.to_numpy(writable=True).reshape(shape)
            case "G":
                dtype = np.dtype(arg[0])
                if dtype.kind not in _NUMPY_KINDS:
                    raise CodecError(f"the state holds a NumPy scalar of type {arg[0]!r}")
                return dtype.type(arg[1])
            case "E":
                cls = _class(arg)
                if not issubclass(cls, enum.Enum):
                    raise CodecError(f"the state holds {arg!r} as an enum, which it is not")
                return cls[node["V"]]
            case "O":
                return self._object(_class(arg), node)
        raise CodecError(f"not a node of dbspark's state: {str(node)[:80]!r}")

    def _object(self, cls: type, node: dict[str, Any]) -> Any:
        if "I" in node:
            if not issubclass(cls, tuple):
                raise CodecError(f"the state holds {cls.__qualname__} as a tuple, which it is not")
            return tuple.__new__(cls, [self.decode(x) for x in node["I"]])
        if "W" in node:  # built by the class from what `_stored_state` kept (no cycle through it)
            at = len(self.memo)
            self.memo.append(None)
            made = getattr(cls, "_from_stored", None)
            if made is None:
                raise CodecError(
                    f"the state holds {cls.__qualname__} as stored state, which it does not keep"
                )
            self.memo[at] = made({k: self.decode(v) for k, v in node["W"].items()})
            return self.memo[at]
        obj: Any = object.__new__(cls)
        self.memo.append(obj)
        for k, v in node["V"].items():
            object.__setattr__(obj, k, self.decode(v))
        return obj


def decode(tree: Any, frame_in: FrameIn) -> Any:
    """The value `encode` made `tree` of, its frames read by `frame_in`; `CodecError` if it is not one."""
    try:
        return _Decoder(frame_in).decode(tree)
    except CodecError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        raise CodecError(f"the state does not decode: {type(e).__name__}: {e}") from None


def _no_frames(obj: Any) -> Any:
    raise CodecError(f"a frame ({type(obj).__name__}) cannot be stored in a single value")


def dumps(value: Any) -> bytes:
    """A plain value (no frames) as canonical JSON bytes: equal values, equal bytes."""
    if type(value) is int:  # (not a bool) what json.dumps gives, without the tree
        return str(value).encode()
    return json.dumps(encode(value, _no_frames), separators=(",", ":"), allow_nan=False).encode()


def loads(data: bytes) -> Any:
    """The value `dumps` made `data` of."""
    if data[:1].isdigit() or (data[:1] == b"-" and data[1:2].isdigit()):
        try:  # an integer (most accumulated values): what json.loads gives, 20x faster
            return int(data)
        except ValueError:  # a float
            pass
    try:
        tree = json.loads(data)
    except ValueError as e:
        raise CodecError(f"a stored value is not JSON: {e}") from None
    return decode(tree, _no_frames)
