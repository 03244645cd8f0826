"""The operator library, one module per family; each operator declares linear, bilinear or neither."""

from dbspark.operators.aggregate import Aggregate, StreamAggregate
from dbspark.operators.base import BILINEAR, LINEAR, NONLINEAR, SOURCE, Operator
from dbspark.operators.distinct import DistinctH, StreamDistinct
from dbspark.operators.join import StreamJoin, StreamProduct
from dbspark.operators.linear import Filter, FlatMap, Index, Map, Neg, Plus, Ranges
from dbspark.operators.source import Input
from dbspark.operators.time import Delay, Differentiate, Integrate

__all__ = [
    "BILINEAR",
    "LINEAR",
    "NONLINEAR",
    "SOURCE",
    "Aggregate",
    "Delay",
    "Differentiate",
    "DistinctH",
    "Filter",
    "FlatMap",
    "Ranges",
    "Index",
    "Input",
    "Integrate",
    "Map",
    "Neg",
    "Operator",
    "Plus",
    "StreamAggregate",
    "StreamDistinct",
    "StreamJoin",
    "StreamProduct",
]
