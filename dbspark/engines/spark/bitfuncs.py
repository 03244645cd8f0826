"""Bitwise operations, `regexp_full_match` and user-defined Datalog functors on the Spark engine, as on the local engine
(`engines/local/bitfuncs.py`): Java's shifts take the amount modulo 64, and a left shift wraps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dbspark.engines.spark.exprs import _F
from dbspark.engines.spark.sqlfuncs import _args, _impl
from dbspark.functors import REGISTRY, call_functor
from dbspark.ir import functions as fn
from dbspark.ir.expr import Func

if TYPE_CHECKING:
    from dbspark.engines.spark.exprs import SparkCompiler


@_impl("bitwise_and", "bitwise_or", "xor")
def _bitwise(comp: SparkCompiler, e: Func) -> Any:
    a, b = (x.cast("long") for x in _args(comp, e))
    return {"bitwise_and": a.bitwiseAND, "bitwise_or": a.bitwiseOR, "xor": a.bitwiseXOR}[e.name](b)


@_impl("bitwise_not")
def _bitwise_not(comp: SparkCompiler, e: Func) -> Any:
    return _F().bitwise_not(comp.c(e.args[0]).cast("long"))


@_impl("shift_left", "shift_right", "shift_right_unsigned")
def _shift(comp: SparkCompiler, e: Func) -> Any:
    a, k = (x.cast("long") for x in _args(comp, e))
    name = {"shift_left": "shiftleft", "shift_right": "shiftright"}.get(e.name, "shiftrightunsigned")
    return _F().call_function(name, a, k.cast("int"))


@_impl("regexp_full_match")
def _regexp_full_match(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    s, p = _args(comp, e)
    return F.regexp_like(s, F.concat(F.lit("^(?:"), p, F.lit(r")\z")))


@_impl("__functor")
def _functor(comp: SparkCompiler, e: Func) -> Any:
    """A Datalog program's user-defined functor as a Python UDF on the executors (`dbspark.functors`)."""
    name, result = (str(fn.literal_value("__functor", a, "argument")) for a in e.args[:2])
    f = REGISTRY[name]
    rt = {"symbol": "string", "float": "double"}.get(result, "long")
    return _F().udf(lambda *xs: call_functor(f, name, result, xs), rt)(*[comp.c(a) for a in e.args[2:]])
