"""Soufflé's functors as scalar expressions (`dbspark.ir.expr`), with Soufflé's semantics where dbspark
can keep them and a rejected step (a `DataError` naming the rule) where Soufflé's behaviour is undefined
or a crash.

- Integer `/` and `%` truncate toward zero (C++); a zero divisor rejects the step.
- `band bor bxor bnot bshl bshr bshru` on 64-bit integers; a shift amount is taken modulo 64.
- `land lor lxor lnot` are 1 or 0 (any non-zero operand is true).
- `x ^ y` is C's pow: for integers the double result truncated toward zero (a result past 64 bits, or
  one that is not finite, rejects the step).
- `min`, `max`, `abs`, `cat`, `strlen` (in characters; Soufflé counts bytes), `substr(s, i, n)` (0-based;
  an index outside the string gives "", as Soufflé after its warning; a negative length means the rest).
- `to_number`, `to_unsigned`, `to_float` of a symbol read the whole symbol as a number (else the step is
  rejected: Soufflé aborts); of a float, truncated toward zero; `to_string` writes a number's digits.
- `as(x, T)` changes only the type, between number and unsigned (a negative value as unsigned rejects
  the step: dbspark's unsigned values are 64-bit integers >= 0).
- `x = range(lo, hi[, step])` is a generator, lowered by `Lowering.generate` to the `ranges` operator.
- `contains(a, b)` holds when b contains a; `match(p, s)` when the whole of s matches the regular
  expression p (Polars' / Java's regular expressions, not C++'s ECMAScript ones: the common subset
  agrees).
"""

from __future__ import annotations

import polars as pl

from dbspark.frontends.datalog.ast import Call
from dbspark.ir.expr import Binary, Case, Cast, Expr, Func, Unary, lit
from dbspark.operators.checks import fail

BITWISE = {
    "band": "bitwise_and",
    "bor": "bitwise_or",
    "bxor": "xor",
    "bshl": "shift_left",
    "bshr": "shift_right",
    "bshru": "shift_right_unsigned",
}
INT_PATTERN = r"[-+]?[0-9]+"
FLOAT_PATTERN = r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?"
TWO_63 = 2.0**63


def _truth(e: Expr) -> Expr:
    return e.ne(lit(0))


def _bit(e: Expr) -> Expr:
    """1 where the condition holds, else 0."""
    return Case(((e, lit(1)),), lit(0))


def _repr(e: Expr) -> Expr:
    return Func("__repr", (e,))


class Functors:
    """Lowers the functors of one rule; `where` names the rule in messages."""

    def __init__(self, where: str) -> None:
        self.where = where

    def error(self, what: str, value: Expr, why: str) -> Expr:
        return fail("DataError", f"{self.where}: {what} of ", _repr(value), f" {why}")

    def divide(self, op: str, a: Expr, b: Expr, floats: bool) -> Expr:
        """`a / b` or `a % b`: IEEE for floats; for integers truncated toward zero, a zero divisor an
        error."""
        if floats:
            return Binary("truediv" if op == "/" else "mod", a, b)
        q = Binary("int_div" if op == "/" else "sql_mod", a, b)
        return Case(((b.eq(lit(0)), self.error(f"'{op}'", a, "by zero")),), q)

    def truncate(self, x: Expr, what: str) -> Expr:
        """A double truncated toward zero as a 64-bit integer, an error past that range (or NaN)."""
        bad = Binary("or", Unary("not", Binary("lt", Unary("abs", x), lit(TWO_63))), x.is_null())
        whole = Case(((x >= lit(0.0), Func("floor", (x,))),), Func("ceil", (x,)))
        return Case(((bad, self.error(what, x, "is not a 64-bit integer")),), Cast(whole, pl.Int64()))

    def parsed(self, s: Expr, pattern: str, to: pl.DataType, what: str) -> Expr:
        ok = Func("regexp_full_match", (s, lit(pattern)))
        kind = "an integer" if to == pl.Int64() else "a number"
        return Case(((Unary("not", ok), self.error(what, s, f"is not {kind}")),), Cast(s, to))

    def unsigned(self, x: Expr, what: str) -> Expr:
        return Case(((x < lit(0), self.error(what, x, "is negative (unsigned values are >= 0)")),), x)

    def lower(self, t: Call, args: list[Expr], types: list[str | None]) -> Expr:
        """The expression of `t` over its lowered arguments, whose Datalog types are `types`."""
        n = t.name
        if n.startswith("@"):  # user-defined (`dbspark.functors`)
            return Func("__functor", (lit(n[1:]), lit(t.type.split(":")[0]), *args))
        if n in BITWISE:
            return Func(BITWISE[n], tuple(args))
        if n == "bnot":
            return Func("bitwise_not", (args[0],))
        if n in ("land", "lor", "lxor"):
            a, b = (_truth(x) for x in args)
            op = {"land": "and", "lor": "or", "lxor": "ne"}[n]
            return _bit(Binary(op, a, b))
        if n == "lnot":
            return _bit(args[0].eq(lit(0)))
        if n == "^":
            p = Func("power", (args[0], args[1]))
            return p if "float" in types else self.truncate(p, str(t))
        if n in ("min", "max"):
            return Func("least" if n == "min" else "greatest", tuple(args))
        if n == "abs":
            return Unary("abs", args[0])
        if n == "cat":
            return Func("concat", tuple(args))
        if n == "strlen":
            return Func("length", (args[0],))
        if n == "substr":
            return self.substr(*args)
        if n in ("contains", "match"):
            a, b = args
            test = Func("contains", (b, a)) if n == "contains" else Func("regexp_full_match", (b, a))
            return _bit(test)
        if n == "range":  # (the checks leave a range only as an assignment: `Lowering.generate`)
            raise AssertionError(f"range outside an assignment: {t}")
        if n == "as":
            return self.unsigned(args[0], str(t)) if t.type == "unsigned" else args[0]
        return self.convert(t, args[0], types[0])

    def substr(self, s: Expr, i: Expr, n: Expr) -> Expr:
        outside = Binary("or", i < lit(0), i > Func("length", (s,)))
        rest = Func("substring", (s, i + lit(1)))
        return Case(((outside, lit("")), (n < lit(0), rest)), Func("substring", (s, i + lit(1), n)))

    def convert(self, t: Call, x: Expr, typ: str | None) -> Expr:
        """to_number, to_unsigned, to_float, to_string of `x` (a `typ`)."""
        what = str(t)
        if t.name == "to_string":
            return x if typ == "symbol" else Cast(x, pl.String())
        if t.name == "to_float":
            if typ == "symbol":
                return self.parsed(x, FLOAT_PATTERN, pl.Float64(), what)
            return Cast(x, pl.Float64())
        if typ == "symbol":
            out = self.parsed(x, INT_PATTERN, pl.Int64(), what)
        elif typ == "float":
            out = self.truncate(x, what)
        else:
            out = x
        return self.unsigned(out, what) if t.name == "to_unsigned" else out
