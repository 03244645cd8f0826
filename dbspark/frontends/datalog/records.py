"""Soufflé's records (`.type Pair = [a: number, b: symbol]`, `[1, "x"]`, `nil`) and algebraic data types
(`.type Tree = Leaf {x: number} | Node {l: Tree, r: Tree}`, `$Leaf(1)`, `$Node($Leaf(1), $Leaf(2))`).

A record or ADT value is a string column holding its encoding, in which equality is the values'
structural equality (Soufflé's: records are compared by what they hold):

    [1, "ab"]          ->  [1:1,2:ab]          each field as <length in characters>:<text>
    [1, [2, nil]]      ->  [1:1,10:[1:2,3:nil]]
    nil                ->  nil
    $Node($Leaf(1), x) ->  $Node(10:$Leaf(1:1),...)    a branch as $Name(<fields>), without fields $Name

A field's text is a number's decimal digits, a symbol itself, a record's or ADT's encoding. Making a
record is one `concat`; reading field i walks the length prefixes before it (`field_steps`, a few
string functions per field, evaluated by either engine). Float fields are refused: a float's text is
the engine's own, and two engines' (or a fact file's) texts of one float would not be equal strings.

`.output` files and `dbspark run` write Soufflé's form (`render`: `[1, [2, nil]]`, `$Leaf(1)`); a fact
file's record column is read in Soufflé's form too (`parse`). Through the Python API a record column
holds the encoding; `decode` gives it as Python values (a tuple, None for nil, `(branch, tuple)`).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbspark.errors import DataError, SchemaError
from dbspark.frontends.datalog.ast import AdtDecl, Call, Pos, RecordDecl, at
from dbspark.ir.expr import Cast, Expr, Func, col, lit

RECORD = "[]"  # a record's `Call` name; `nil` is `Call("nil")`, a branch's `Call("$Name")`


@dataclass(frozen=True)
class RecordType:
    name: str  # as declared
    fields: tuple[tuple[str, str], ...]  # (field, type): a primitive type or a record / ADT type's key


@dataclass(frozen=True)
class AdtType:
    name: str
    branches: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]  # (branch, its fields)

    def fields(self, branch: str) -> tuple[tuple[str, str], ...]:
        return dict(self.branches)[branch]


# every record and ADT type of the programs loaded in this process, by key: the declared name, or
# `Name'2` where another program declared the name otherwise
REGISTRY: dict[str, RecordType | AdtType] = {}
_OWNER: dict[str, str] = {}  # key -> the fingerprint of the declarations that made it


def is_record_term(t: object) -> bool:
    return isinstance(t, Call) and (t.name in (RECORD, "nil") or t.name.startswith("$"))


def is_structured(t: str | None) -> bool:
    """A record or ADT type's key."""
    return t is not None and t in REGISTRY


def declare(decls: list[RecordDecl | AdtDecl], aliases: dict[str, str]) -> dict[str, str]:
    """Register a program's record and ADT types; returns name -> key (to add to `aliases`) and, for
    each branch, "$Branch" -> the key of its ADT."""
    if not decls:
        return {}
    names = [d.name for d in decls]
    for d in decls:
        if d.name in aliases or names.count(d.name) > 1:
            raise at(SchemaError, f".type {d.name} is declared twice", d.pos)
    fingerprint = repr(
        [
            (d.name, [(f, t) for f, t, _ in d.fields])
            if isinstance(d, RecordDecl)
            else (d.name, [(b, [(f, t) for f, t, _ in fs]) for b, fs in d.branches])
            for d in decls
        ]
    )
    keys: dict[str, str] = {}
    for n in names:
        key, i = n, 1
        while key in _OWNER and _OWNER[key] != fingerprint:
            i += 1
            key = f"{n}'{i}"
        keys[n] = key
    scope = {**aliases, **keys}

    def resolved(fields: tuple[tuple[str, str, Pos], ...], where: str) -> tuple[tuple[str, str], ...]:
        out = []
        for f, t, pos in fields:
            if t not in scope:
                raise at(SchemaError, f"{where}: field {f} has unknown type {t!r}", pos)
            if scope[t] == "float":
                raise at(
                    SchemaError,
                    f"{where}: field {f} is a float; dbspark does not keep floats in records or ADTs "
                    "(their text is not one string on every engine)",
                    pos,
                )
            out.append((f, scope[t]))
        if len({f for f, _ in out}) != len(out):
            raise at(SchemaError, f"{where}: duplicate field names", fields[0][2])
        return tuple(out)

    out = dict(keys)
    branches: set[str] = set()
    for d in decls:
        if isinstance(d, RecordDecl):
            REGISTRY[keys[d.name]] = RecordType(d.name, resolved(d.fields, f".type {d.name}"))
        else:
            bs = []
            for b, fields in d.branches:
                if b in branches:
                    raise at(SchemaError, f".type {d.name}: branch {b} is declared twice", d.pos)
                branches.add(b)
                bs.append((b, resolved(fields, f".type {d.name}, branch {b}")))
                out["$" + b] = keys[d.name]
            REGISTRY[keys[d.name]] = AdtType(d.name, tuple(bs))
        _OWNER[keys[d.name]] = fingerprint
    return out


def shown(t: str) -> str:
    """A type as the program names it."""
    r = REGISTRY.get(t)
    return r.name if r is not None else t


# ---- the encoding, in Python (facts, fact files, outputs) ------------------------------------------
def _field(text: str) -> str:
    return f"{len(text)}:{text}"


def pack(prefix: str, texts: list[str], close: str) -> str:
    return prefix + ",".join(map(_field, texts)) + close


def fields_of(s: str) -> list[str]:
    """The field texts of a record's or branch's encoding."""
    start = 1 if s.startswith("[") else s.find("(") + 1
    if start == 0:  # a branch without fields
        return []
    out, i = [], start
    while i < len(s) - 1:
        colon = s.index(":", i)
        n = int(s[i:colon])
        out.append(s[colon + 1 : colon + 1 + n])
        i = colon + 2 + n
    return out


def encode(value: object, t: str) -> str:
    """The encoding of a Python value of type t (a tuple for a record, None for nil, `(branch, tuple)`
    for an ADT, as `decode` gives them)."""
    r = REGISTRY.get(t)
    if r is None:
        return value if isinstance(value, str) else str(value)
    if isinstance(r, RecordType):
        if value is None:
            return "nil"
        assert isinstance(value, tuple)
        return pack("[", [encode(v, ft) for v, (_, ft) in zip(value, r.fields, strict=True)], "]")
    assert isinstance(value, tuple)
    branch, args = value
    fs = r.fields(branch)
    if not fs:
        return "$" + branch
    return pack(f"${branch}(", [encode(v, ft) for v, (_, ft) in zip(args, fs, strict=True)], ")")


def decode(s: str, t: str) -> object:
    """A value of type t from its encoding (its Python form as `encode` takes it)."""
    r = REGISTRY.get(t)
    if r is None:
        return int(s) if t in ("number", "unsigned") else s
    if isinstance(r, RecordType):
        if s == "nil":
            return None
        return tuple(decode(x, ft) for x, (_, ft) in zip(fields_of(s), r.fields, strict=True))
    branch = s[1:].split("(")[0]
    return (branch, tuple(decode(x, ft) for x, (_, ft) in zip(fields_of(s), r.fields(branch), strict=True)))


def render(s: str, t: str) -> str:
    """A value's text as Soufflé writes it: `[1, [2, nil]]`, `$Node($Leaf(1), $Leaf(2))`, `$Empty`."""
    r = REGISTRY.get(t)
    if r is None:
        return s
    if isinstance(r, RecordType):
        if s == "nil":
            return "nil"
        parts = [render(x, ft) for x, (_, ft) in zip(fields_of(s), r.fields, strict=True)]
        return "[" + ", ".join(parts) + "]"
    branch = s[1:].split("(")[0]
    fs = r.fields(branch)
    if not fs:
        return "$" + branch
    return f"${branch}(" + ", ".join(render(x, ft) for x, (_, ft) in zip(fields_of(s), fs, strict=True)) + ")"


def parse(text: str, t: str, where: str) -> str:
    """The encoding of a value of type t written as Soufflé writes it (a fact file's field): symbols
    in records bare or in double quotes."""
    p = _Reader(text, where)
    out = p.value(t)
    p.skip()
    if p.i != len(text):
        p.fail("text after the value")
    return out


class _Reader:
    def __init__(self, text: str, where: str) -> None:
        self.s, self.i, self.where = text, 0, where

    def fail(self, why: str) -> None:
        raise DataError(f"{self.where}: cannot read {self.s!r}: {why} (at character {self.i + 1})")

    def skip(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def expect(self, c: str) -> None:
        self.skip()
        if not self.s.startswith(c, self.i):
            self.fail(f"expected {c!r}")
        self.i += len(c)

    def value(self, t: str) -> str:
        self.skip()
        r = REGISTRY.get(t)
        if r is None:
            return self.atom(t)
        if isinstance(r, RecordType):
            if self.s.startswith("nil", self.i):
                self.i += 3
                return "nil"
            self.expect("[")
            return pack("[", self.items([ft for _, ft in r.fields], "]"), "]")
        self.expect("$")
        start = self.i
        while self.i < len(self.s) and (self.s[self.i].isalnum() or self.s[self.i] == "_"):
            self.i += 1
        branch = self.s[start : self.i]
        if branch not in dict(r.branches):
            self.fail(f"{r.name} has no branch {branch!r}")
        fs = r.fields(branch)
        if not fs:
            self.skip()
            if self.s.startswith("(", self.i):
                self.expect("(")
                self.expect(")")
            return "$" + branch
        self.expect("(")
        return pack(f"${branch}(", self.items([ft for _, ft in fs], ")"), ")")

    def items(self, types: list[str], close: str) -> list[str]:
        out = []
        for k, ft in enumerate(types):
            if k:
                self.expect(",")
            out.append(self.value(ft))
        self.expect(close)
        return out

    def atom(self, t: str) -> str:
        if self.s.startswith('"', self.i):
            j = self.i + 1
            buf = []
            while j < len(self.s) and self.s[j] != '"':
                if self.s[j] == "\\" and j + 1 < len(self.s):
                    j += 1
                buf.append(self.s[j])
                j += 1
            if j >= len(self.s):
                self.fail("an unterminated string")
            self.i = j + 1
            text = "".join(buf)
        else:
            j = self.i
            while j < len(self.s) and self.s[j] not in ",])":
                j += 1
            text, self.i = self.s[self.i : j].strip(), j
        if t in ("number", "unsigned"):
            try:
                n = int(text, 0) if text[:2].lower() in ("0x", "0b") else int(text)
            except ValueError:
                self.fail(f"{text!r} is not a {t}")
            if t == "unsigned" and n < 0:
                self.fail(f"{text!r} is negative, the field is unsigned")
            return str(n)
        return text


# ---- the encoding as scalar expressions (the engines') ----------------------------------------------
def as_text(e: Expr, t: str | None) -> Expr:
    return e if t == "symbol" or is_structured(t) else Cast(e, pl.String())


def construct(call: Call, args: list[Expr], types: list[str | None]) -> Expr:
    """The encoding of `[a, b]`, `nil` or `$B(a, b)` from its fields' values."""
    if call.name == "nil":
        return lit("nil")
    prefix, close = ("[", "]") if call.name == RECORD else (f"{call.name}(", ")")
    if not args and call.name != RECORD:
        return lit(call.name)
    parts: list[Expr] = [lit(prefix)]
    for k, (a, t) in enumerate(zip(args, types, strict=True)):
        x = as_text(a, t)
        if k:
            parts.append(lit(","))
        parts += [Cast(Func("length", (x,)), pl.String()), lit(":"), x]
    parts.append(lit(close))
    return Func("concat", tuple(parts))


def is_shape(e: Expr, call: Call) -> Expr:
    """Where a value is of the pattern's shape: a record (not nil), nil, or the branch."""
    if call.name == RECORD:
        return Func("starts_with", (e, lit("[")))
    if call.name == "nil":
        return e.eq(lit("nil"))
    if not call.args:
        return e.eq(lit(call.name))
    return Func("starts_with", (e, lit(call.name + "(")))


def field_steps(rest: str, width: str, out: str) -> tuple[list[tuple[str, Expr]], list[tuple[str, Expr]]]:
    """Two rounds of new columns reading the field at the start of the column `rest` (a field's
    `<n>:<text>` and what follows it): first the width of its length prefix (`width`), then its text
    (`out`) and, in `rest`, what follows (the next field)."""
    colon = Func("strpos", (col(rest), lit(":")))
    first: list[tuple[str, Expr]] = [(width, colon)]
    n = Cast(Func("substring", (col(rest), lit(1), col(width) - lit(1))), pl.Int64())
    text = Func("substring", (col(rest), col(width) + lit(1), n))
    after = Func("substring", (col(rest), col(width) + n + lit(2)))
    return first, [(out, text), (rest, after)]


def after_prefix(e: Expr, call: Call) -> Expr:
    """The fields of a record's or branch's encoding (what follows `[` or `$B(`)."""
    k = 2 if call.name == RECORD else len(call.name) + 2
    return Func("substring", (e, lit(k)))


def field_types(key: str, call: Call) -> list[str]:
    r = REGISTRY[key]
    if isinstance(r, RecordType):
        return [t for _, t in r.fields]
    return [t for _, t in r.fields(call.name[1:])]


def typed(e: Expr, t: str) -> Expr:
    """A field's text as a value of its type."""
    return Cast(e, pl.Int64()) if t in ("number", "unsigned") else e
