"""The algebra of DBSP (`dbsp-paper.txt` §4.1, §7.3): weights, Z-sets, indexed Z-sets, time."""

from dbspark.algebra.time import NestedTime, Time
from dbspark.algebra.weights import AbelianGroup, Monoid, Semigroup, Z
from dbspark.algebra.zset import WEIGHT, IndexedZSet, ZSet

__all__ = ["WEIGHT", "AbelianGroup", "IndexedZSet", "Monoid", "NestedTime", "Semigroup", "Time", "Z", "ZSet"]
