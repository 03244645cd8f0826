"""The exceptions dbspark raises: one class per kind of fault, each message naming what is at fault."""

from __future__ import annotations


class DbsparkError(Exception):
    """Base class of every error dbspark raises on purpose."""


class SchemaError(DbsparkError):
    """Rows or columns that do not match the declared schema of an input or operator."""


class UnknownNameError(DbsparkError, KeyError):
    """An input, output, column or view name that does not exist."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class WeightError(DbsparkError):
    """A weight that is not an integer, or integer arithmetic on weights that overflowed."""


class NegativeStateError(DbsparkError):
    """A change that would leave a stateful operator with a negative multiplicity (e.g. a delete of an absent row)."""


class CircuitError(DbsparkError):
    """A malformed circuit: an unconnected feedback, a stream of another circuit, a cycle without a delay."""


class IncrementalizationError(DbsparkError):
    """An operator that the incrementalization rules cannot rewrite."""


class UnsupportedError(DbsparkError):
    """A construct that dbspark does not support; the message names it."""


class RecursionLimitError(DbsparkError):
    """A recursive scope that did not reach its fixpoint within its iteration limit."""


class DataError(DbsparkError):
    """A value that cannot be computed or stored: integer overflow, a failed cast, a pushed value that
    does not fit its column's declared type."""


class EngineError(DbsparkError):
    """The engine failed while running a step (a Spark job that failed for a reason other than the
    data: a lost executor, a killed worker, out of memory): nothing was applied, and the step's
    changes stay queued, so running the step again retries it."""


class CheckpointError(DbsparkError):
    """A pipeline's saved state that cannot be used: a checkpoint that is truncated, corrupted, missing a
    file, of another format version or written by another circuit, or a directory another process is
    running. The message names the file; nothing in the directory was changed."""


class MemoryLimitError(DbsparkError):
    """A step whose state would pass the local engine's memory limit (`engines/local/memory.py`): the
    step is rejected, nothing applied."""


class ExecutorLostError(EngineError):
    """An `EngineError` because the cluster lost an executor mid-step (with it, blocks the step had
    computed there): a `Pipeline` runs such a step again once by itself."""


class ParseError(DbsparkError):
    """Program text (SQL, Datalog) that does not parse; `line` and `column` locate the fault (1-based)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(message + where)
        self.line = line
        self.column = column


class CoercionError(DataError, SchemaError):
    """A pushed value that cannot be coerced to its column's declared type (a DataError; also a
    SchemaError, which is what such a value raised before columns had SQL types)."""
