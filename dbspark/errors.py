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
