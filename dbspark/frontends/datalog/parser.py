"""Parsing the Soufflé-style Datalog dialect with lark (LALR) into `ast` nodes.

    .decl edge(x: number, y: number)      .type Node <: number
    .input edge                           .input edge(IO=file, filename="edges.csv", delimiter=",")
    .output path
    path(x, y) :- edge(x, y).
    path(x, y) :- path(x, z), edge(z, y).
    a(x), b(x) :- c(x) ; d(x).            // several heads, several bodies (disjunction)
    deg(x, n) :- node(x), n = count : { edge(x, _) }.
    total(x, s) :- groupby(q(x, _, y), [x], s = sum<y>).
    r(x band 0xFF, cat(s, "!")) :- p(x, s), x bshr 2 > 1, !match("a.*", s), true.

Expressions follow Soufflé's grammar and operator precedence; functors are `ast.Call` nodes, and
`contains` / `match` written as body literals become comparisons of their 0 / 1 with 0. Comments are `//` to the end of the line and `/* ... */`. Syntax errors raise
`dbspark.errors.ParseError` with the 1-based line and column of the offending token.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from dbspark.errors import ParseError
from dbspark.frontends.datalog.aggterms import AggTerm, lift
from dbspark.frontends.datalog.ast import (
    FUNCTORS,
    INFIX,
    PREFIX,
    AdtDecl,
    Atom,
    BinOp,
    Call,
    Component,
    CompRef,
    Const,
    Constraint,
    Decl,
    Directive,
    FunctorDecl,
    GroupBy,
    Init,
    Neg,
    Pos,
    Program,
    RecordDecl,
    Rule,
    Subsumption,
    TypeDecl,
    Var,
    Wild,
)
from dbspark.frontends.datalog.autoinc import number_calls
from dbspark.frontends.datalog.disjunction import And, Not, Or, normal_form

GRAMMAR = r"""
start: item*

?item: decl | type_decl | directive | clause | plan | pragma | comp | init | override | functor_decl

functor_decl: ".functor" NAME "(" [attr ("," attr)*] ")" ":" NAME [STATEFUL]
STATEFUL.2: /stateful\b/

// components: templates of declarations and rules, instantiated with `.init`
comp: ".comp" NAME [LT NAME ("," NAME)* GT] [":" comp_ref ("," comp_ref)*] "{" item* "}"
comp_ref: NAME [LT NAME ("," NAME)* GT]
init: ".init" NAME "=" comp_ref
override: ".override" NAME

// a rule's join orders and Soufflé's options: accepted and ignored (dbspark plans its own joins)
plan: ".plan" plan_entry ("," plan_entry)*
plan_entry: INT ":" "(" [INT ("," INT)*] ")"
pragma: ".pragma" STRING [STRING]

decl: ".decl" (NAME | QNAME) "(" [attr ("," attr)*] ")" QUALIFIER* [CHOICE choice ("," choice)*]
choice: NAME | "(" NAME ("," NAME)* ")"
CHOICE.2: "choice-domain"
attr: NAME ":" NAME
type_decl: ".type" NAME ("<:" | "=") NAME ("|" NAME)*
        | ".type" NAME "=" "[" [attr ("," attr)*] "]"                  -> record_type
        | ".type" NAME "=" NAME "{" [attr ("," attr)*] "}" ("|" NAME "{" [attr ("," attr)*] "}")* -> adt_type
directive: DIRECTIVE relname ("," relname)* [params]
?relname: NAME | QNAME
params: "(" [param ("," param)*] ")"
param: NAME "=" pvalue
?pvalue: STRING -> pstring
       | NAME   -> pname
       | INT    -> pint

clause: heads [":-" disj] "."
      | atom CMP atom ":-" disj "."                       -> subsume
heads: atom ("," atom)*
disj: conj (";" conj)*
conj: term ("," term)*
?term: literal
     | "!" term                                           -> negated
     | "(" disj ")"

?literal: atom
        | expr cmp expr                                   -> constraint
        | "groupby" "(" atom "," "[" [NAME ("," NAME)*] "]" "," NAME cmp AGG LT [expr] GT ")" -> groupby
        | "true"                                          -> true_lit
        | "false"                                         -> false_lit

?cmp: CMP | LT | GT

agg_body: "{" disj "}" | atom

// `(a(x))` in a body is an atom, not a parenthesized functor call (the priority settles it)
atom.2: (NAME | QNAME) "(" [expr ("," expr)*] ")"

// Soufflé's precedence, lowest first: lor, lxor, land, bor, bxor, band, shifts, + -, * / %, unary - bnot
// lnot, and ^ (right-associative, above unary minus: -2^2 is -4)
?expr: lor
?lor: lxor | lor "lor" lxor -> lor
?lxor: land | lxor "lxor" land -> lxor
?land: bor | land "land" bor -> land
?bor: bxor | bor "bor" bxor -> bor
?bxor: band | bxor "bxor" band -> bxor
?band: shift | band "band" shift -> band
?shift: sum
    | shift "bshl" sum -> bshl
    | shift "bshr" sum -> bshr
    | shift "bshru" sum -> bshru
?sum: product
    | sum "+" product -> add
    | sum "-" product -> sub
?product: unary
    | product "*" unary -> mul
    | product "/" unary -> div
    | product "%" unary -> mod
?unary: power
    | "-" unary -> neg
    | "bnot" unary -> bnot
    | "lnot" unary -> lnot
?power: primary
    | primary "^" unary -> pow
?primary: NAME           -> var
        | INT            -> intlit
        | UINT           -> uintlit
        | FLOAT          -> floatlit
        | STRING         -> stringlit
        | "(" expr ")"
        | NAME "(" [expr ("," expr)*] ")"   -> call
        | AGG "(" expr ("," expr)+ ")"      -> aggcall
        | AGG [expr] ":" agg_body           -> agg_term
        | "@" NAME "(" [expr ("," expr)*] ")"   -> user_call
        | "[" [expr ("," expr)*] "]"        -> record_lit
        | NIL                               -> nil_lit
        | BRANCH ["(" [expr ("," expr)*] ")"] -> branch_lit

AGG.2: /(count|sum|min|max|mean)\b/
NIL.2: /nil\b/
BRANCH: /\$[A-Za-z_][A-Za-z0-9_]*/
DIRECTIVE.2: ".input" | ".output" | ".printsize" | ".limitsize"
// Soufflé's relation qualifiers: eqrel is an equivalence relation; the others choose data structures
// and optimisations, accepted and ignored
QUALIFIER.2: /(brie|btree_delete|btree|eqrel|inline|no_inline|magic|no_magic|overridable)\b/
CMP: "!=" | "<=" | ">=" | "="
LT: "<"
GT: ">"
NAME: /[A-Za-z_][A-Za-z0-9_]*/
// a relation of a component's instance: `g.edge`
QNAME.3: /[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+/
FLOAT: /[0-9]+\.[0-9]+([eE][-+]?[0-9]+)?/
UINT.3: /(0x[0-9a-fA-F]+|0b[01]+|[0-9]+)u/
INT: /0x[0-9a-fA-F]+|0b[01]+|[0-9]+/
STRING: /"([^"\\\n]|\\.)*"/

COMMENT: /\/\/[^\n]*/
BLOCK_COMMENT: /\/\*(.|\n)*?\*\//
%import common.WS
%ignore WS
%ignore COMMENT
%ignore BLOCK_COMMENT
"""

_parser = Lark(GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=True)

_NICE = {t.name: repr(t.pattern.value) for t in _parser.terminals if t.pattern.type == "str"}
_NICE.update(
    {
        "NAME": "a name",
        "INT": "an integer",
        "FLOAT": "a float",
        "STRING": "a string",
        "CMP": "a comparison",
        "LT": "'<'",
        "GT": "'>'",
        "UINT": "an unsigned integer",
        "AGG": "an aggregate",
        "$END": "the end of the program",
        "DIRECTIVE": "a directive",
    }
)


def _pos(node: Any) -> Pos:
    if isinstance(node, Token):
        return Pos(node.line or 0, node.column or 0)
    meta = getattr(node, "meta", None)
    if meta is not None and not getattr(meta, "empty", True):
        return Pos(meta.line, meta.column)
    return Pos(0, 0)


def _unescape(s: str) -> str:
    body = s[1:-1]
    return body.encode("utf-8").decode("unicode_escape") if "\\" in body else body


def _need_eq(tok: Token) -> None:
    if str(tok) != "=":
        raise ParseError(
            f"Datalog syntax error: an aggregate is bound with '=', not {str(tok)!r}", tok.line, tok.column
        )


class _Build(Transformer):
    """Tree -> ast. Methods get the children; `v_args(meta=True)` gives the position."""

    def __init__(self) -> None:
        super().__init__()
        self.fresh = itertools.count()  # the variables that aggregate terms become (`aggterms.lift`)

    # ---- terms
    @v_args(meta=True)
    def var(self, meta: Any, ch: list) -> Any:
        name = str(ch[0])
        p = Pos(ch[0].line, ch[0].column)
        return Wild(p) if name == "_" else Var(name, p)

    def intlit(self, ch: list) -> Const:
        return Const(int(str(ch[0]), 0), "number", _pos(ch[0]))

    def uintlit(self, ch: list) -> Const:
        return Const(int(str(ch[0])[:-1], 0), "unsigned", _pos(ch[0]))

    def floatlit(self, ch: list) -> Const:
        return Const(float(ch[0]), "float", _pos(ch[0]))

    def stringlit(self, ch: list) -> Const:
        return Const(_unescape(str(ch[0])), "symbol", _pos(ch[0]))

    @v_args(meta=True)
    def record_lit(self, meta: Any, ch: list) -> Call:
        return Call("[]", tuple(a for a in ch if a is not None), Pos(meta.line, meta.column))

    def nil_lit(self, ch: list) -> Call:
        return Call("nil", (), _pos(ch[0]))

    def branch_lit(self, ch: list) -> Call:
        return Call(str(ch[0]), tuple(a for a in ch[1:] if a is not None), _pos(ch[0]))

    def _bin(self, op: str, meta: Any, ch: list) -> BinOp:
        return BinOp(op, ch[0], ch[1], Pos(meta.line, meta.column))

    @v_args(meta=True)
    def add(self, meta: Any, ch: list) -> BinOp:
        return self._bin("+", meta, ch)

    @v_args(meta=True)
    def sub(self, meta: Any, ch: list) -> BinOp:
        return self._bin("-", meta, ch)

    @v_args(meta=True)
    def mul(self, meta: Any, ch: list) -> BinOp:
        return self._bin("*", meta, ch)

    @v_args(meta=True)
    def div(self, meta: Any, ch: list) -> BinOp:
        return self._bin("/", meta, ch)

    @v_args(meta=True)
    def mod(self, meta: Any, ch: list) -> BinOp:
        return self._bin("%", meta, ch)

    @v_args(meta=True)
    def call(self, meta: Any, ch: list) -> Call:
        name, args = str(ch[0]), [a for a in ch[1:] if a is not None]
        if name in REFUSED:
            raise ParseError(
                f"Datalog: {name}(...) is not supported: {REFUSED[name]}", meta.line, meta.column
            )
        if name not in FUNCTORS:
            raise ParseError(
                f"Datalog: unknown functor {name!r} (the functors are {', '.join(FUNCTORS)}; a relation "
                "cannot be called inside an expression)",
                meta.line,
                meta.column,
            )
        typ = ""
        if name == "as":
            if len(args) != 2 or not isinstance(args[1], Var):
                raise ParseError("Datalog: as(x, T) takes a value and a type name", meta.line, meta.column)
            typ, args = args[1].name, args[:1]
        lo, hi = FUNCTORS[name]
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = f"{lo}" if lo == hi else f"at least {lo}" if hi is None else f"{lo} to {hi}"
            raise ParseError(
                f"Datalog: {name}(...) takes {want} argument(s), got {len(args)}", meta.line, meta.column
            )
        return Call(name, tuple(args), Pos(meta.line, meta.column), typ)

    @v_args(meta=True)
    def aggcall(self, meta: Any, ch: list) -> Call:
        name = str(ch[0])
        if name not in ("min", "max"):
            raise ParseError(
                f"Datalog: {name}(...) is an aggregate, not a functor (write {name} x : {{ ... }})",
                meta.line,
                meta.column,
            )
        return Call(name, tuple(ch[1:]), Pos(meta.line, meta.column))

    @v_args(meta=True)
    def neg(self, meta: Any, ch: list) -> Any:
        a = ch[0]
        if isinstance(a, Const) and a.type != "symbol":  # fold -3 into a constant
            return Const(-a.value, a.type, Pos(meta.line, meta.column))
        return Neg(a, Pos(meta.line, meta.column))

    # ---- literals
    @v_args(meta=True)
    def atom(self, meta: Any, ch: list) -> Atom:
        args = tuple(a for a in ch[1:] if a is not None)
        return Atom(str(ch[0]), args, Pos(meta.line, meta.column))

    def negated(self, ch: list) -> Not:
        return Not(_test(ch[0]))

    @v_args(meta=True)
    def constraint(self, meta: Any, ch: list) -> Constraint:
        return Constraint(str(ch[1]), ch[0], ch[2], Pos(meta.line, meta.column))

    def agg_body(self, ch: list) -> tuple:
        bodies = normal_form(ch[0])
        if len(bodies) != 1:
            lit = bodies[0][0]
            raise ParseError(
                "Datalog: a disjunction inside an aggregate's body is not supported (aggregate a "
                "relation derived by several rules instead)",
                lit.pos.line,
                lit.pos.column,
            )
        return tuple(bodies[0])

    @v_args(meta=True)
    def agg_term(self, meta: Any, ch: list) -> AggTerm:
        func, expr, body = ch
        return AggTerm(str(func), expr, body, Pos(meta.line, meta.column))

    @v_args(meta=True)
    def groupby(self, meta: Any, ch: list) -> GroupBy:
        atom, *rest = ch
        rest = [x for x in rest if not (isinstance(x, Token) and x.type in ("LT", "GT"))]
        expr = rest[-1]
        func = str(rest[-2])
        _need_eq(rest[-3])
        var = str(rest[-4])
        keys = tuple(str(k) for k in rest[:-4] if k is not None)
        return GroupBy(atom, keys, var, func, expr, Pos(meta.line, meta.column))

    @v_args(meta=True)
    def true_lit(self, meta: Any, ch: list) -> Constraint:
        p = Pos(meta.line, meta.column)
        return Constraint("=", Const(1, "number", p), Const(1, "number", p), p)

    @v_args(meta=True)
    def false_lit(self, meta: Any, ch: list) -> Constraint:
        p = Pos(meta.line, meta.column)
        return Constraint("!=", Const(1, "number", p), Const(1, "number", p), p)

    def conj(self, ch: list) -> And:
        return And(tuple(_test(x) for x in ch))

    def disj(self, ch: list) -> Or:
        return Or(tuple(ch))

    def heads(self, ch: list) -> list:
        return list(ch)

    @v_args(meta=True)
    def clause(self, meta: Any, ch: list) -> list[Rule]:
        heads, bodies = ch[0], ch[1]
        p = Pos(meta.line, meta.column)
        if bodies is None:
            return [Rule(*lift(h, [], self.fresh), p) for h in heads]
        rules = []
        for h in heads:
            for b in normal_form(bodies):
                head, body = lift(h, b, self.fresh)
                rules.append(Rule(head, body, p))
        return rules

    @v_args(meta=True)
    def subsume(self, meta: Any, ch: list) -> list[Subsumption]:
        dominated, op, dominating, bodies = ch
        if str(op) != "<=":
            raise ParseError(
                f"Datalog syntax error: a subsumptive clause is written {dominated} <= {dominating} :- ..., "
                f"not with {str(op)!r}",
                meta.line,
                meta.column,
            )
        if dominated.pred != dominating.pred:
            raise ParseError(
                f"Datalog: a subsumptive clause relates two tuples of one relation, not {dominated.pred} "
                f"and {dominating.pred}",
                meta.line,
                meta.column,
            )
        p = Pos(meta.line, meta.column)
        return [Subsumption(dominated, dominating, tuple(b), p) for b in normal_form(bodies)]

    def choice(self, ch: list) -> list[str]:
        return [str(x) for x in ch]

    # ---- declarations
    def attr(self, ch: list) -> tuple[str, str, Pos]:
        return (str(ch[0]), str(ch[1]), _pos(ch[1]))

    @v_args(meta=True)
    def decl(self, meta: Any, ch: list) -> Decl:
        attrs = [a for a in ch[1:] if isinstance(a, tuple)]
        quals = tuple(str(q) for q in ch[1:] if isinstance(q, Token) and q.type == "QUALIFIER")
        choice = tuple(tuple(c) for c in ch[1:] if isinstance(c, list))
        d = Decl(str(ch[0]), tuple((a, t) for a, t, _ in attrs), Pos(meta.line, meta.column), quals, choice)
        object.__setattr__(d, "_type_pos", {a: p for a, _, p in attrs})
        return d

    @v_args(meta=True)
    def type_decl(self, meta: Any, ch: list) -> TypeDecl:
        return TypeDecl(str(ch[0]), str(ch[1]), Pos(meta.line, meta.column), tuple(str(x) for x in ch[2:]))

    @v_args(meta=True)
    def record_type(self, meta: Any, ch: list) -> RecordDecl:
        return RecordDecl(str(ch[0]), tuple(a for a in ch[1:] if a is not None), Pos(meta.line, meta.column))

    @v_args(meta=True)
    def adt_type(self, meta: Any, ch: list) -> AdtDecl:
        branches: list[tuple[str, list]] = []
        for x in ch[1:]:
            if isinstance(x, Token):
                branches.append((str(x), []))
            elif x is not None:
                branches[-1][1].append(x)
        return AdtDecl(str(ch[0]), tuple((b, tuple(fs)) for b, fs in branches), Pos(meta.line, meta.column))

    def pstring(self, ch: list) -> str:
        return _unescape(str(ch[0]))

    def pname(self, ch: list) -> str:
        return str(ch[0])

    def pint(self, ch: list) -> int:
        return int(ch[0])

    def param(self, ch: list) -> tuple[str, Any]:
        return (str(ch[0]), ch[1])

    def params(self, ch: list) -> tuple:
        return tuple(p for p in ch if p is not None)

    @v_args(meta=True)
    def directive(self, meta: Any, ch: list) -> list[Directive]:
        kind = str(ch[0])[1:]
        params = ch[-1] if isinstance(ch[-1], tuple) else ()
        names = [str(n) for n in ch[1:] if isinstance(n, Token)]
        return [Directive(kind, n, params or (), Pos(meta.line, meta.column)) for n in names]

    def plan(self, ch: list) -> None:
        return None

    def pragma(self, ch: list) -> None:
        return None

    def start(self, ch: list) -> Program:
        prog = Program()
        for item in ch:
            if isinstance(item, Decl):
                prog.decls.append(item)
            elif isinstance(item, TypeDecl):
                prog.types.append(item)
            elif isinstance(item, (RecordDecl, AdtDecl)):
                prog.records.append(item)
            elif isinstance(item, Component):
                prog.comps.append(item)
            elif isinstance(item, Init):
                prog.inits.append(item)
            elif isinstance(item, FunctorDecl):
                prog.functors.append(item)
            elif isinstance(item, tuple) and item[0] == "@override":
                prog.overrides.append(item[1])
            elif isinstance(item, list) and item and isinstance(item[0], Subsumption):
                prog.subsumptions.extend(item)
            elif isinstance(item, list) and item and isinstance(item[0], Directive):
                prog.directives.extend(item)
            elif isinstance(item, list):
                prog.rules.extend(item)
        return prog

    @v_args(meta=True)
    def functor_decl(self, meta: Any, ch: list) -> FunctorDecl:
        if ch[-1] is not None:
            raise ParseError(
                f"Datalog: .functor {ch[0]}: stateful functors are not supported (they read Soufflé's "
                "symbol and record tables)",
                meta.line,
                meta.column,
            )
        attrs = tuple((a[0], a[1]) for a in ch[1:-2] if a is not None)
        return FunctorDecl(str(ch[0]), attrs, str(ch[-2]), Pos(meta.line, meta.column))

    @v_args(meta=True)
    def user_call(self, meta: Any, ch: list) -> Call:
        return Call("@" + str(ch[0]), tuple(a for a in ch[1:] if a is not None), Pos(meta.line, meta.column))

    def comp_ref(self, ch: list) -> CompRef:
        return CompRef(str(ch[0]), tuple(str(x) for x in ch[1:] if isinstance(x, Token) and x.type == "NAME"))

    @v_args(meta=True)
    def comp(self, meta: Any, ch: list) -> Component:
        name = str(ch[0])
        params = tuple(str(x) for x in ch[1:] if isinstance(x, Token) and x.type == "NAME")
        bases = tuple(x for x in ch[1:] if isinstance(x, CompRef))
        items = [x for x in ch[1:] if not isinstance(x, (Token, CompRef)) and x is not None]
        return Component(name, params, bases, self.start(items), Pos(meta.line, meta.column))

    @v_args(meta=True)
    def init(self, meta: Any, ch: list) -> Init:
        return Init(str(ch[0]), ch[1], Pos(meta.line, meta.column))

    def override(self, ch: list) -> tuple[str, str]:
        return ("@override", str(ch[0]))


def _operator(name: str) -> Any:
    @v_args(meta=True)
    def build(self: _Build, meta: Any, ch: list) -> Call:
        return Call(name, tuple(ch), Pos(meta.line, meta.column))

    return build


# the grammar's operator rules (named as the operators, but `pow` for ^) build functor calls
for _op in (*INFIX, *PREFIX):
    setattr(_Build, "pow" if _op == "^" else _op, _operator(_op))


# functors Soufflé has that dbspark refuses, and why
REFUSED = {
    "ord": "Soufflé's ord is the index of a symbol in its symbol table (the order symbols were first "
    "seen), which an incrementally maintained program cannot reproduce",
}


def _test(lit: Any) -> Any:
    """`contains(a, b)` and `match(p, s)` written as body literals are tests: comparisons of the
    functor's 0 / 1 with 0 (negated, the opposite comparison)."""
    if not (isinstance(lit, Atom) and lit.pred in ("contains", "match")):
        return lit
    if len(lit.args) != 2:
        raise ParseError(
            f"Datalog: {lit.pred}(...) takes 2 argument(s), got {len(lit.args)}", lit.pos.line, lit.pos.column
        )
    return Constraint("!=", Call(lit.pred, lit.args, lit.pos), Const(0, "number", lit.pos), lit.pos)


def _expected(e: UnexpectedInput) -> str:
    exp = sorted(getattr(e, "expected", None) or getattr(e, "allowed", None) or [])
    names = [_NICE.get(x, repr(x.strip('"')) if x.startswith('"') else x) for x in exp][:8]
    return f"; expected {', '.join(names)}" if names else ""


def _end(text: str) -> tuple[int, int]:
    """The position just after the last non-blank character."""
    body = text.rstrip()
    lines = body.split("\n")
    return len(lines), len(lines[-1]) + 1


def parse(text: str) -> Program:
    """Parse a program; a syntax error raises `ParseError(message, line, column)`."""
    try:
        tree: Tree = _parser.parse(text)
    except UnexpectedCharacters as e:
        at = e.pos_in_stream
        ch = text[at] if at is not None and at < len(text) else ""
        raise ParseError(
            f"Datalog syntax error: unexpected character {ch!r}{_expected(e)}", e.line, e.column
        ) from None
    except UnexpectedEOF as e:
        raise ParseError(
            f"Datalog syntax error: the program ends too early (a clause must end with '.'){_expected(e)}",
            *_end(text),
        ) from None
    except UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            raise ParseError(
                f"Datalog syntax error: unexpected the end of the program{_expected(e)}", *_end(text)
            ) from None
        if str(tok) == "." and tok.start_pos is not None:
            m = re.match(r"\.(\w+)", text[tok.start_pos :])
            known: tuple[str, ...] = ("decl", "type", "input", "output", "printsize", "limitsize", "plan")
            known += ("pragma", "comp")
            known += ("init", "override", "functor")
            if m and m.group(1) not in known:
                raise ParseError(
                    f"Datalog syntax error: unknown directive .{m.group(1)} (the directives are "
                    f"{', '.join('.' + k for k in known)})",
                    e.line,
                    e.column,
                ) from None
        raise ParseError(
            f"Datalog syntax error: unexpected {str(tok)!r}{_expected(e)}", e.line, e.column
        ) from None
    try:
        return number_calls(_Build().transform(tree))
    except VisitError as e:
        raise e.orig_exc from None
