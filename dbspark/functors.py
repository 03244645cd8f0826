"""User-defined functors of Datalog programs: the Python counterpart of Soufflé's C++ functors.

    .functor score(name: symbol, n: number): float        // in the program
    r(x, @score(x, n)) :- p(x, n).

    import dbspark
    dbspark.register_functor("score", lambda name, n: len(name) / (n + 1))
    p.datalog(text)                          # or p.datalog(text, functors={"score": fn})

A functor is called once per row with the row's values (Python's int, float, str; so it is per-row
Python, as Soufflé's functors are per-tuple C++); it must return a value of its declared type and be
deterministic (an incremental view calls it again on deletes and expects the same value). On Spark it
runs as a Python UDF on the executors, so it must be picklable (module-level functions are). A functor
that raises, or returns the wrong type, rejects the step with a `DataError` naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dbspark.errors import DataError

REGISTRY: dict[str, Callable[..., Any]] = {}
PYTHON_TYPES = {"number": int, "unsigned": int, "float": float, "symbol": str}


def register_functor(name: str, fn: Callable[..., Any]) -> None:
    """Bind the functor `@name` of Datalog programs to the Python function `fn` (replacing any before)."""
    if not callable(fn):
        raise TypeError(f"register_functor({name!r}, ...): {fn!r} is not callable")
    REGISTRY[name] = fn


def call_functor(fn: Callable[..., Any], name: str, result: str, args: tuple) -> Any:
    """`fn(*args)`, its failure or a result of the wrong type a DataError naming the functor."""
    try:
        out = fn(*args)
    except Exception as e:  # (any error of user code becomes the step's rejection, named)
        raise DataError(f"functor @{name}{args!r} raised {type(e).__name__}: {e}") from None
    want = PYTHON_TYPES[result]
    if want is float and isinstance(out, int) and not isinstance(out, bool):
        out = float(out)
    if (
        not isinstance(out, want)
        or isinstance(out, bool)
        or (isinstance(out, int) and out < 0 and result == "unsigned")
    ):
        raise DataError(f"functor @{name}{args!r} returned {out!r}, not a {result}")
    return out
