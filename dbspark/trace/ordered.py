"""Per-group ordered state for MIN, MAX, MEDIAN and MODE under insertions and deletions with weights.

These aggregates are not invertible, so unlike SUM or COUNT they cannot be maintained from the old
result and the change alone: the group's whole multiset must be kept, in order
(`../shared/seeds/incremental-aggregation-monotonic-programs.txt`, Ramakrishnan, Ross, Srivastava and
Sudarshan, §2.3-2.4 and Table 2: min and max are O(1) under insertion only, but O(log n) time and O(n)
space once deletions are allowed; median and mode are O(log n) per insert/delete, which is optimal).
The paper keeps two balanced trees around the current median (§2.4, Theorem 2.3), and for the mode a
tree of distinct values pointing into a list of count buckets (Theorem 2.4); both assume unit
changes. Our changes carry arbitrary integer weights (a delta of +10**12 copies is one change), so
`OrderedMultiset` answers every order statistic from one structure instead:

A B+-tree of distinct values, in pure Python. A leaf holds a sorted list of distinct values and a
parallel list of their multiplicities; an internal node holds its children plus three parallel
lists with one entry per child: a separator (an upper bound of the child's values, below every
value of the next child), the child's total multiplicity and the child's largest multiplicity.
Nodes split when they exceed `_LEAF_MAX` / `_NODE_MAX` entries and merge with (or borrow from) a
sibling below a quarter of that, so the height is O(log n) in the number n of distinct values. Every
per-node step is one C-level call on a list of at most 64 entries (`bisect`, `list.insert`,
`itertools.accumulate`, `max`), so a change or a query costs O(height) Python-level steps:

* `add`: descend by separator, bisect the leaf, add the weight to the path's totals; the path's
  max-multiplicity entries change only when the leaf's maximum does (usually they stop at the leaf).
* `kth` / medians: descend by prefix sums of the per-child totals (bisect). Each node caches its
  prefix sums until its totals change; a change resets them only along its own path, so a median
  asked for after every change mostly recomputes the root's alone.
* `mode`: descend to the first child whose max-multiplicity equals the root's; leftmost means the
  smallest value among the tied ones.
* `min` / `max`: the leftmost / rightmost leaf.

Why not `SortedList` plus a Fenwick tree over block totals: a Fenwick tree is indexed by position,
so every block split or merge forces an O(#blocks) rebuild, and the in-block scan for `kth` is
O(block size); with SortedList's block size of 1000 that scan dominates, with small blocks the
rebuilds do. A tree whose internal nodes carry subtree totals has neither cost.

Values must be mutually comparable under a total order (int, float, str, date, Decimal, ...); None
is refused with a TypeError (the caller drops NULLs) and NaN is not supported. Values that compare equal (1 and
1.0) are one value. Multiplicities are Python ints and are never expanded into copies.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from itertools import accumulate
from operator import index as _index
from typing import Any

from dbspark.errors import NegativeStateError

__all__ = ["NegativeMultiplicityError", "OrderedMultiset"]


class NegativeMultiplicityError(NegativeStateError, ValueError):
    """A change that would leave a value with a negative multiplicity; the multiset is left unchanged."""

    def __init__(self, value: Any, count: int) -> None:
        super().__init__(value, count)  # args stay (value, count) so that the error pickles
        self.value = value
        self.count = count

    def __str__(self) -> str:
        return f"multiplicity of {self.value!r} would become {self.count} (below zero)"


class _Leaf:
    """Sorted distinct values and their (positive) multiplicities; `pre` caches their prefix sums."""

    __slots__ = ("keys", "cnts", "pre")

    def __init__(self, keys: list, cnts: list[int]) -> None:
        self.keys = keys
        self.cnts = cnts
        self.pre: list[int] | None = None


class _Node:
    """Children plus, per child: separator (upper bound of its values), total and max multiplicity.

    `pre` caches the prefix sums of `tots` for `kth`; whatever changes `tots` resets it to None.
    """

    __slots__ = ("kids", "seps", "tots", "mcs", "pre")

    def __init__(self, kids: list, seps: list, tots: list[int], mcs: list[int]) -> None:
        self.kids = kids
        self.seps = seps
        self.tots = tots
        self.mcs = mcs
        self.pre: list[int] | None = None


class OrderedMultiset:
    """A multiset of comparable values with integer multiplicities; order statistics in O(log n)."""

    # Node capacities. Subclasses may shrink them (the tests do, to build deep trees from few values);
    # they need 1 <= _LEAF_MIN, 2 <= _NODE_MIN and 2 * MIN <= MAX + 1.
    _LEAF_MAX = 256  # fewer, larger leaves: fewer objects for the garbage collector to walk
    _LEAF_MIN = 64
    _NODE_MAX = 64
    _NODE_MIN = 16

    __slots__ = ("_root", "_height", "_total", "_distinct")

    def __init__(self) -> None:
        self._root: Any = _Leaf([], [])
        self._height = 0  # number of internal levels above the leaves
        self._total = 0
        self._distinct = 0

    # ------------------------------------------------------------------ changes

    def add(self, value: Any, weight: int) -> None:
        """Add `weight` (may be negative) copies of value; weight 0 is a no-op.

        Raises NegativeMultiplicityError, changing nothing, if the multiplicity would go below zero.
        """
        if weight.__class__ is not int:
            weight = _index(weight)
        if not weight:
            return
        if value is None:
            raise TypeError("OrderedMultiset does not store None: the caller drops NULL values")
        node: Any = self._root
        height = self._height
        path: list[tuple[_Node, int]] = []
        bumps = None  # separator lists whose last entry must grow to `value` if it is inserted
        for _ in range(height):
            seps = node.seps
            i = bisect_left(seps, value)
            if i == len(seps):
                i -= 1
                if bumps is None:
                    bumps = [seps]
                else:
                    bumps.append(seps)
            path.append((node, i))
            node = node.kids[i]
        keys = node.keys
        cnts = node.cnts
        j = bisect_left(keys, value)
        if j < len(keys) and keys[j] == value:
            old = cnts[j]
            new = old + weight
            if new > 0:
                cnts[j] = new
            elif new == 0:
                del keys[j]
                del cnts[j]
                self._distinct -= 1
            else:
                raise NegativeMultiplicityError(value, new)
        else:
            if weight < 0:
                raise NegativeMultiplicityError(value, weight)
            old = 0
            new = weight
            keys.insert(j, value)
            cnts.insert(j, weight)
            self._distinct += 1
            if bumps is not None:
                for seps in bumps:
                    seps[-1] = value
        self._total += weight
        node.pre = None
        if height:
            for anc, i in path:
                anc.tots[i] += weight
                anc.pre = None
            anc, i = path[-1]
            top = anc.mcs[i]
            if new > top or old == top:
                self._fix_max_counts(path, cnts, old, new)
            if not new:
                if len(keys) < self._LEAF_MIN:
                    self._rebalance(path)
            elif not old and len(keys) > self._LEAF_MAX:
                self._split(path, node)
        elif not old and len(keys) > self._LEAF_MAX:
            self._split(path, node)

    def update(self, values: Sequence, weights: Sequence[int]) -> None:
        """Apply many changes atomically (weights of a repeated value are summed first).

        If any change would make a multiplicity negative (or fails otherwise), raise and leave the
        multiset unchanged.
        """
        if len(values) != len(weights):
            raise ValueError(f"update: {len(values)} values but {len(weights)} weights")
        if len(values) == 1:  # the common case; `add` is atomic by itself
            self.add(values[0], weights[0])
            return
        net: dict[Any, int] = {}
        get = net.get
        for value, weight in zip(values, weights, strict=True):
            if weight.__class__ is not int:
                weight = _index(weight)
            if weight:
                net[value] = get(value, 0) + weight
        applied: list[tuple[Any, int]] = []
        try:
            for value, weight in net.items():
                if weight:
                    self.add(value, weight)
                    applied.append((value, weight))
        except BaseException:
            for value, weight in reversed(applied):
                self.add(value, -weight)  # restores an earlier, non-negative count: cannot fail
            raise

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        """Total multiplicity (sum of the counts); `len` itself fails beyond 2**63 - 1."""
        return self._total

    def __bool__(self) -> bool:
        return self._total > 0

    def __contains__(self, value: Any) -> bool:
        return self.count(value) > 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(distinct={self._distinct}, total={self._total})"

    def distinct_count(self) -> int:
        """Number of distinct values with a positive multiplicity."""
        return self._distinct

    def count(self, value: Any) -> int:
        """Multiplicity of value (0 if absent)."""
        node: Any = self._root
        for _ in range(self._height):
            seps = node.seps
            i = bisect_left(seps, value)
            if i == len(seps):
                return 0
            node = node.kids[i]
        keys = node.keys
        j = bisect_left(keys, value)
        if j < len(keys) and keys[j] == value:
            return node.cnts[j]
        return 0

    def min(self) -> Any:
        """Smallest value, or None if empty."""
        if not self._distinct:
            return None
        node: Any = self._root
        for _ in range(self._height):
            node = node.kids[0]
        return node.keys[0]

    def max(self) -> Any:
        """Largest value, or None if empty."""
        if not self._distinct:
            return None
        node: Any = self._root
        for _ in range(self._height):
            node = node.kids[-1]
        return node.keys[-1]

    def kth(self, k: int) -> Any:
        """The k-th smallest value (0-based, counting multiplicity); IndexError unless 0 <= k < len."""
        k = _index(k)
        if not 0 <= k < self._total:
            raise IndexError(f"kth: index {k} out of range for a multiset of {self._total} values")
        node: Any = self._root
        for _ in range(self._height):
            pre = node.pre
            if pre is None:
                pre = node.pre = list(accumulate(node.tots))
            i = bisect_right(pre, k)
            if i:
                k -= pre[i - 1]
            node = node.kids[i]
        pre = node.pre
        if pre is None:
            pre = node.pre = list(accumulate(node.cnts))
        return node.keys[bisect_right(pre, k)]

    def median_low(self) -> Any:
        """kth((n - 1) // 2), or None if empty."""
        return self.kth((self._total - 1) // 2) if self._total else None

    def median_high(self) -> Any:
        """kth(n // 2), or None if empty."""
        return self.kth(self._total // 2) if self._total else None

    def mode(self) -> Any:
        """The value with the highest multiplicity, ties broken by the smallest value; None if empty."""
        if not self._distinct:
            return None
        node: Any = self._root
        if self._height:
            top = max(node.mcs)
            for _ in range(self._height):
                node = node.kids[node.mcs.index(top)]
        else:
            top = max(node.cnts)
        return node.keys[node.cnts.index(top)]

    def items(self) -> Iterator[tuple[Any, int]]:
        """(value, multiplicity) pairs in ascending order of value; do not change the multiset meanwhile."""
        for leaf in self._leaves():
            yield from zip(leaf.keys, leaf.cnts, strict=True)

    # ------------------------------------------------------------------ checkpoints

    def to_state(self) -> tuple[list, list[int]]:
        """The distinct values in ascending order and their multiplicities, for a checkpoint."""
        values: list = []
        counts: list[int] = []
        for leaf in self._leaves():
            values.extend(leaf.keys)
            counts.extend(leaf.cnts)
        return values, counts

    @classmethod
    def from_state(cls, values: Sequence, counts: Sequence[int]) -> OrderedMultiset:
        """Rebuild from `to_state()` output in O(n); any other pairs are applied as one `update`."""
        values = list(values)
        counts = [c if c.__class__ is int else _index(c) for c in counts]
        if len(values) != len(counts):
            raise ValueError(f"from_state: {len(values)} values but {len(counts)} counts")
        ms = cls()
        if min(counts, default=1) > 0 and all(a < b for a, b in zip(values, values[1:], strict=False)):
            ms._build(values, counts)
        else:
            ms.update(values, counts)
        return ms

    # ------------------------------------------------------------------ internals

    def _leaves(self) -> Iterator[_Leaf]:
        def walk(node: Any, height: int) -> Iterator[_Leaf]:
            if height == 0:
                yield node
            else:
                for kid in node.kids:
                    yield from walk(kid, height - 1)

        if self._distinct:
            yield from walk(self._root, self._height)

    def _build(self, keys: list, cnts: list[int]) -> None:
        """Bulk-load strictly ascending keys with positive counts into an empty tree, nodes ~3/4 full."""
        self._total = sum(cnts)
        self._distinct = len(keys)
        target = min(self._LEAF_MAX, max(2 * self._LEAF_MIN, 3 * self._LEAF_MAX // 4))
        bounds = _chunk_bounds(len(keys), target)
        level: list[Any] = [_Leaf(keys[a:b], cnts[a:b]) for a, b in bounds]
        seps = [keys[b - 1] for _, b in bounds]
        tots = [sum(cnts[a:b]) for a, b in bounds]
        mcs = [max(cnts[a:b]) for a, b in bounds]
        height = 0
        target = min(self._NODE_MAX, max(2 * self._NODE_MIN, 3 * self._NODE_MAX // 4))
        while len(level) > 1:
            bounds = _chunk_bounds(len(level), target)
            level = [_Node(level[a:b], seps[a:b], tots[a:b], mcs[a:b]) for a, b in bounds]
            seps = [seps[b - 1] for _, b in bounds]
            tots = [sum(tots[a:b]) for a, b in bounds]
            mcs = [max(mcs[a:b]) for a, b in bounds]
            height += 1
        self._root = level[0] if level else _Leaf([], [])
        self._height = height

    @staticmethod
    def _fix_max_counts(path: list[tuple[_Node, int]], entries: list[int], old: int, new: int) -> None:
        """An entry of `entries` (the counts of the leaf at the end of `path`) went old -> new, 0 meaning
        absent: refresh the max-multiplicity entries up the path, stopping where a maximum holds."""
        level = len(path)
        while level:
            level -= 1
            parent, i = path[level]
            top_old = parent.mcs[i]  # the maximum of `entries` before the change
            if new > top_old:
                top_new = new
            elif old == top_old and new < old and top_old not in entries:
                top_new = max(entries, default=0)
            else:
                return
            parent.mcs[i] = top_new
            entries, old, new = parent.mcs, top_old, top_new

    def _split(self, path: list[tuple[_Node, int]], node: Any) -> None:
        """`node` (at the end of `path`) overflowed: split it, and its ancestors while they overflow."""
        level = len(path)
        is_leaf = True
        while True:
            node.pre = None
            if is_leaf:
                half = len(node.keys) // 2
                right: Any = _Leaf(node.keys[half:], node.cnts[half:])
                del node.keys[half:]
                del node.cnts[half:]
                left_sep = node.keys[-1]
                left_tot, right_tot = sum(node.cnts), sum(right.cnts)
                left_mc, right_mc = max(node.cnts), max(right.cnts)
                right_last = right.keys[-1]
            else:
                half = len(node.kids) // 2
                right = _Node(node.kids[half:], node.seps[half:], node.tots[half:], node.mcs[half:])
                del node.kids[half:]
                del node.seps[half:]
                del node.tots[half:]
                del node.mcs[half:]
                left_sep = node.seps[-1]
                left_tot, right_tot = sum(node.tots), sum(right.tots)
                left_mc, right_mc = max(node.mcs), max(right.mcs)
                right_last = right.seps[-1]
            if not level:  # the root split: grow a level
                self._root = _Node(
                    [node, right], [left_sep, right_last], [left_tot, right_tot], [left_mc, right_mc]
                )
                self._height += 1
                return
            level -= 1
            parent, i = path[level]
            parent.kids.insert(i + 1, right)
            parent.seps.insert(i, left_sep)  # the old separator now bounds the right half
            parent.tots[i] = left_tot
            parent.tots.insert(i + 1, right_tot)
            parent.mcs[i] = left_mc
            parent.mcs.insert(i + 1, right_mc)
            parent.pre = None
            if len(parent.kids) <= self._NODE_MAX:
                return
            node = parent
            is_leaf = False

    def _rebalance(self, path: list[tuple[_Node, int]]) -> None:
        """The leaf at the end of `path` underflowed: merge with or borrow from a sibling, upwards."""
        level = len(path) - 1
        is_leaf = True
        while level >= 0:
            parent, i = path[level]
            kids = parent.kids
            if len(kids) < 2:
                break  # only a root can have one child; collapsed below
            a = i if i + 1 < len(kids) else i - 1
            left, right = kids[a], kids[a + 1]
            seps, tots, mcs = parent.seps, parent.tots, parent.mcs
            parent.pre = left.pre = right.pre = None
            if is_leaf:
                size = len(left.keys) + len(right.keys)
                cap = self._LEAF_MAX
            else:
                size = len(left.kids) + len(right.kids)
                cap = self._NODE_MAX
            if size <= cap:  # merge right into left
                if is_leaf:
                    left.keys += right.keys
                    left.cnts += right.cnts
                else:
                    left.kids += right.kids
                    left.seps += right.seps
                    left.tots += right.tots
                    left.mcs += right.mcs
                seps[a] = seps[a + 1]
                tots[a] += tots[a + 1]
                if mcs[a + 1] > mcs[a]:
                    mcs[a] = mcs[a + 1]
                del kids[a + 1]
                del seps[a + 1]
                del tots[a + 1]
                del mcs[a + 1]
            else:  # redistribute evenly; the parent keeps its number of children
                half = size // 2
                if is_leaf:
                    keys = left.keys + right.keys
                    cnts = left.cnts + right.cnts
                    left.keys, right.keys = keys[:half], keys[half:]
                    left.cnts, right.cnts = cnts[:half], cnts[half:]
                    seps[a] = left.keys[-1]
                    tots[a], tots[a + 1] = sum(left.cnts), sum(right.cnts)
                    mcs[a], mcs[a + 1] = max(left.cnts), max(right.cnts)
                else:
                    for attr in ("kids", "seps", "tots", "mcs"):
                        both = getattr(left, attr) + getattr(right, attr)
                        setattr(left, attr, both[:half])
                        setattr(right, attr, both[half:])
                    seps[a] = left.seps[-1]
                    tots[a], tots[a + 1] = sum(left.tots), sum(right.tots)
                    mcs[a], mcs[a + 1] = max(left.mcs), max(right.mcs)
                break
            if level == 0 or len(kids) >= self._NODE_MIN:
                break
            level -= 1
            is_leaf = False
        while self._height and len(self._root.kids) == 1:
            self._root = self._root.kids[0]
            self._height -= 1

    def _check_invariants(self) -> None:
        """Assert the tree's structural invariants (for tests)."""

        def walk(node: Any, height: int, is_root: bool) -> tuple[list, int, int, int]:
            if height == 0:
                assert len(node.keys) == len(node.cnts)
                assert all(c.__class__ is int and c > 0 for c in node.cnts)
                assert all(a < b for a, b in zip(node.keys, node.keys[1:], strict=False))
                assert len(node.keys) <= self._LEAF_MAX
                assert is_root or len(node.keys) >= self._LEAF_MIN
                return node.keys, sum(node.cnts), max(node.cnts, default=0), len(node.keys)
            n = len(node.kids)
            assert n == len(node.seps) == len(node.tots) == len(node.mcs)
            assert n <= self._NODE_MAX
            assert n >= (2 if is_root else self._NODE_MIN)
            out: list = []
            tot = top = distinct = 0
            prev_sep = None
            for t, kid in enumerate(node.kids):
                keys, k_tot, k_mc, k_dist = walk(kid, height - 1, False)
                assert keys, "empty subtree"
                assert node.tots[t] == k_tot and node.mcs[t] == k_mc
                assert not node.seps[t] < keys[-1], "separator below a value of its child"
                assert prev_sep is None or prev_sep < keys[0], "separator not below the next child"
                prev_sep = node.seps[t]
                out += keys
                tot += k_tot
                top = max(top, k_mc)
                distinct += k_dist
            return out, tot, top, distinct

        keys, tot, _, distinct = walk(self._root, self._height, True)
        assert all(a < b for a, b in zip(keys, keys[1:], strict=False))
        assert tot == self._total and distinct == self._distinct == len(keys)


def _chunk_bounds(n: int, target: int) -> list[tuple[int, int]]:
    """Split range(n) into ceil(n / target) contiguous chunks of near-equal size."""
    if n == 0:
        return []
    chunks = -(-n // target)
    cuts = [n * t // chunks for t in range(chunks + 1)]
    return list(zip(cuts, cuts[1:], strict=False))
