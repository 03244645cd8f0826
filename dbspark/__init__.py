"""dbspark: incremental view maintenance on DBSP, with a local (in-process) engine and a Spark engine.

import dbspark
from dbspark import col
c = dbspark.Circuit()
t = c.input("t", {"a": "int64", "b": "str"})
c.output("v", t.filter(col("a") > 2).map("b").stream_distinct())
q = c.incrementalize().run()          # Q^Δ on the local engine
q.insert("t", [(3, "x")]); q.step()   # {"v": ZSet({('x',): 1})}
"""

from dbspark.algebra.zset import IndexedZSet, ZSet
from dbspark.circuit.circuit import Circuit, Feedback
from dbspark.circuit.runtime import Runtime
from dbspark.circuit.stream import Stream
from dbspark.errors import (
    CircuitError,
    DataError,
    DbsparkError,
    IncrementalizationError,
    NegativeStateError,
    ParseError,
    RecursionLimitError,
    SchemaError,
    UnknownNameError,
    UnsupportedError,
    WeightError,
)
from dbspark.functors import register_functor
from dbspark.ir.aggregate import UserAggregate
from dbspark.ir.expr import Cast, col, lit
from dbspark.pipeline import Pipeline

__version__ = "0.1.0"

__all__ = [
    "Cast",
    "Circuit",
    "CircuitError",
    "DataError",
    "DbsparkError",
    "Feedback",
    "IncrementalizationError",
    "IndexedZSet",
    "NegativeStateError",
    "ParseError",
    "Pipeline",
    "RecursionLimitError",
    "Runtime",
    "SchemaError",
    "Stream",
    "UnknownNameError",
    "UnsupportedError",
    "UserAggregate",
    "WeightError",
    "ZSet",
    "col",
    "lit",
    "register_functor",
]
