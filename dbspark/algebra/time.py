"""Logical time: integers for a top-level circuit, product-order pairs inside nested scopes.

`dbsp-paper.txt` §2 (streams indexed by N) and §6 (nested streams, time (t0, t1) ordered by the
product order); `rhizome-dbsp-implementation-notes.txt` §2.6 (product-order time and its lattice).
"""

from __future__ import annotations

from dataclasses import dataclass

Time = int


@dataclass(frozen=True, order=False)
class NestedTime:
    """A time (outer, inner) ordered by the product order: a <= b iff both coordinates are <=."""

    outer: int
    inner: int

    def __le__(self, other: NestedTime) -> bool:
        return self.outer <= other.outer and self.inner <= other.inner

    def __lt__(self, other: NestedTime) -> bool:
        return self <= other and self != other

    def __ge__(self, other: NestedTime) -> bool:
        return other <= self

    def __gt__(self, other: NestedTime) -> bool:
        return other < self

    def join(self, other: NestedTime) -> NestedTime:
        """Least upper bound in the product order."""
        return NestedTime(max(self.outer, other.outer), max(self.inner, other.inner))

    def meet(self, other: NestedTime) -> NestedTime:
        """Greatest lower bound in the product order."""
        return NestedTime(min(self.outer, other.outer), min(self.inner, other.inner))

    def comparable(self, other: NestedTime) -> bool:
        return self <= other or other <= self
