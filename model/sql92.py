"""The SQL92 message filter of RocketMQ 4.9.8 (``filter`` module): parser, typing rules, evaluation.

Theory of operation
-------------------
``compile_filter(text)`` turns an expression into an immutable tree of nodes; ``evaluate(tree,
properties)`` runs it on a message's stored properties (TAGS, KEYS, UNIQ_KEY, CLUSTER and the user
properties, all strings) and ``matches`` answers what the broker's ``ExpressionMessageFilter`` answers:
delivered iff the result is Boolean TRUE. Every fact below comes from the 4.9.8 sources
(``SelectorParser.jj`` and the generated ``SelectorParser.java``, ``ComparisonExpression``,
``UnaryExpression``, ``LogicExpression``, ``ConstantExpression``, ``BooleanConstantExpression``,
``PropertyExpression``; broker ``ExpressionMessageFilter``); the code is ours.

Syntax (a lark LALR grammar written from ``SelectorParser.jj``; keywords are case-insensitive):
``OR`` < ``AND`` < ``= <> IS [NOT] NULL`` < ``> >= < <= [NOT] BETWEEN x AND y``, ``[NOT] IN ('a', …)``
< unary ``+ - NOT`` < literal / property / parenthesis. Literals: ``'str''ing'`` (``''`` is a quote),
decimals (int when they fit 32 bits, else long; suffix ``L``; overflow is a parse error), floats
(``5.``, ``.5``, ``5E3``; ``0.0`` or an underflow is a parse error: ``createFloat`` rejects values below
``Double.MIN_VALUE``), ``TRUE FALSE NULL``. Comments ``/* */`` and ``-- …<newline>``.
The generated parser has no end-of-input rule: it stops at the first token that cannot continue the
expression, so ``a = 1 b`` is ``a = 1`` (text after that token is never even tokenized). A ``NOT``
or ``IS`` after an operand enters the comparison loop, so ``a = 1 NOT x`` and ``a IS 5`` fail (real
broker, ``tests/interop/test_sql92_real.py``). ``_parse_tree`` feeds lark's interactive parser token
by token from a lazy lexer and stops where JavaCC stops.

Parse-time checks (the factories throw, which the parser reports as a failure): ``=``/``<>`` with a
``NULL`` literal operand; ``TRUE = 'x'`` (a boolean literal on the left compared with a non-boolean
literal); a relational operand that is a non-number literal or a boolean expression; ``BETWEEN`` with
both bounds literals where a bound is NULL or high < low; ``IN`` whose left side is not a property;
``AND``/``OR``/``NOT``/the whole expression on a non-boolean (a property is cast: ``a`` alone is
NULL when missing, else FALSE).

Evaluation (Java values: String, Boolean, Integer, Long, Double, null): AND/OR are three-valued and
short-circuit; ``=`` is ``doCreateEqual``: both null → TRUE, left null → null, right null → FALSE;
relational operators give null when either side is null; two strings under a relational operator are
both parsed as doubles; a string against a number is parsed as that number's Java type
(``Integer.valueOf`` etc.), against a boolean with ``Boolean.valueOf``; a failed conversion (or
Java's ClassCastException of ``TRUE = prop``) aborts the whole evaluation, which the broker turns into
"no match". ``IN`` is null on a missing property. Unary minus of a non-number is null.
"""

from __future__ import annotations

import functools
import math
import re
import struct
import unicodedata
from collections.abc import Iterator, Mapping

import attrs
from lark import Lark, Token
from lark.exceptions import LarkError

SQL92 = "SQL92"
TAG = "TAG"

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MIN_VALUE = 5e-324  # Java Double.MIN_VALUE (the smallest positive double)


def is_tag_type(expression_type: str | None) -> bool:
    """ExpressionType.isTagType: null, empty and ``TAG`` are the tag filter."""
    return expression_type is None or expression_type == "" or expression_type == TAG


class FilterParseError(ValueError):
    """The expression does not compile (SelectorParser.parse throws MQFilterException)."""


class FilterEvalError(Exception):
    """Evaluation threw (NumberFormatException, ClassCastException): the broker logs it, no match."""


# ----------------------------------------------------------------------------------------------
# Java values


@attrs.frozen
class Num:
    """A Java number: kind ``I`` (Integer), ``L`` (Long) or ``D`` (Double)."""

    kind: str
    value: int | float


Value = str | bool | Num | None


def _wrap(v: int, bits: int) -> int:
    mask = (1 << bits) - 1
    v &= mask
    return v - (1 << bits) if v >> (bits - 1) else v


def _java_digit(ch: str) -> int:
    """Character.digit(ch, 10): any Unicode decimal digit."""
    d = unicodedata.decimal(ch, -1)
    if d < 0:
        raise FilterEvalError(f"NumberFormatException: {ch!r}")
    return d


def parse_java_integer(text: str, lo: int, hi: int) -> int:
    """Integer.parseInt / Long.parseLong (radix 10): optional sign, at least one digit, no spaces."""
    if not text:
        raise FilterEvalError("NumberFormatException: empty")
    sign = 1
    body = text
    if text[0] in "+-":
        sign = -1 if text[0] == "-" else 1
        body = text[1:]
        if not body:
            raise FilterEvalError(f"NumberFormatException: {text!r}")
    n = 0
    for ch in body:
        n = n * 10 + _java_digit(ch)
    n *= sign
    if not lo <= n <= hi:
        raise FilterEvalError(f"NumberFormatException: {text!r} out of range")
    return n


_DEC_FLOAT = re.compile(r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)\Z", re.ASCII)
_HEX_FLOAT = re.compile(
    r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+))[pP]([+-]?\d+)[fFdD]?\Z", re.ASCII
)


def parse_java_double(text: str) -> float:
    """Double.valueOf(String): trims chars <= ' ', NaN/Infinity, decimal or hex, optional f/d suffix."""
    s = text
    start, end = 0, len(s)
    while start < end and ord(s[start]) <= 0x20:
        start += 1
    while end > start and ord(s[end - 1]) <= 0x20:
        end -= 1
    s = s[start:end]
    if _DEC_FLOAT.match(s):
        core = s.rstrip("fFdD") if not s.endswith(("NaN", "Infinity")) else s
        if core.lstrip("+-") == "NaN":
            return math.nan
        if core.lstrip("+-") == "Infinity":
            return -math.inf if core.startswith("-") else math.inf
        return float(core)
    m = _HEX_FLOAT.match(s)
    if m:
        sign, mant, exp = m.groups()
        if "." not in mant:
            mant += "."
        value = float.fromhex(f"0x{mant}p{exp}")
        return -value if sign == "-" else value
    raise FilterEvalError(f"NumberFormatException: {text!r}")


def _double_bits(x: float) -> int:
    if math.isnan(x):
        return 0x7FF8000000000000
    return struct.unpack(">q", struct.pack(">d", x))[0]


def _double_compare(a: float, b: float) -> int:
    """Double.compareTo: -0.0 < 0.0, NaN equal to itself and above everything."""
    if a < b:
        return -1
    if a > b:
        return 1
    ba, bb = _double_bits(a), _double_bits(b)
    return (ba > bb) - (ba < bb)


def _java_equals(lv: Value, rv: Value) -> bool:
    """``lv == rv || lv.equals(rv)`` for non-null Java values."""
    if isinstance(lv, bool) or isinstance(rv, bool):
        return isinstance(lv, bool) and isinstance(rv, bool) and lv == rv
    if isinstance(lv, str) or isinstance(rv, str):
        return isinstance(lv, str) and isinstance(rv, str) and lv == rv
    assert isinstance(lv, Num) and isinstance(rv, Num)
    if lv.kind != rv.kind:
        return False
    if lv.kind == "D":
        return _double_bits(float(lv.value)) == _double_bits(float(rv.value))
    return lv.value == rv.value


def _from_string(text: str, kind: str) -> Num:
    if kind == "I":
        return Num("I", parse_java_integer(text, INT_MIN, INT_MAX))
    if kind == "L":
        return Num("L", parse_java_integer(text, LONG_MIN, LONG_MAX))
    return Num("D", parse_java_double(text))


_RANK = {"I": 0, "L": 1, "D": 2}


def java_compare(lv: Value, rv: Value) -> int:
    """ComparisonExpression.__compare with convertStringExpressions = true (set while parsing)."""
    if isinstance(lv, bool):
        if isinstance(rv, bool):
            return (lv > rv) - (lv < rv)
        if isinstance(rv, str):  # `lv = Boolean.valueOf((String) lv)`: lv is a Boolean → ClassCastException
            raise FilterEvalError("ClassCastException: Boolean cannot be cast to String")
        return -1
    if isinstance(lv, str):
        if isinstance(rv, str):
            return _string_compare(lv, rv)
        if isinstance(rv, bool):
            b = lv.lower() == "true"
            return (b > rv) - (b < rv)
        assert isinstance(rv, Num)
        return _num_compare(_from_string(lv, rv.kind), rv)
    assert isinstance(lv, Num)
    if isinstance(rv, str):
        return _num_compare(lv, _from_string(rv, lv.kind))
    if isinstance(rv, bool):
        return -1
    assert isinstance(rv, Num)
    return _num_compare(lv, rv)


def _num_compare(lv: Num, rv: Num) -> int:
    kind = lv.kind if _RANK[lv.kind] >= _RANK[rv.kind] else rv.kind
    if kind == "D":
        return _double_compare(float(lv.value), float(rv.value))
    a, b = int(lv.value), int(rv.value)
    return (a > b) - (a < b)


def _utf16(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


def _string_compare(a: str, b: str) -> int:
    """String.compareTo: UTF-16 code unit order."""
    ua, ub = _utf16(a), _utf16(b)
    units_a = [int.from_bytes(ua[i : i + 2], "big") for i in range(0, len(ua), 2)]
    units_b = [int.from_bytes(ub[i : i + 2], "big") for i in range(0, len(ub), 2)]
    for x, y in zip(units_a, units_b, strict=False):
        if x != y:
            return x - y
    return len(units_a) - len(units_b)


# ----------------------------------------------------------------------------------------------
# the expression tree


@attrs.frozen
class Const:
    value: Value
    boolean: bool = False  # a BooleanConstantExpression (TRUE, FALSE, NULL literals)


@attrs.frozen
class Prop:
    name: str


@attrs.frozen
class Negate:
    operand: Node


@attrs.frozen
class Not:
    operand: Node


@attrs.frozen
class BoolCast:
    operand: Prop


@attrs.frozen
class And:
    left: Node
    right: Node


@attrs.frozen
class Or:
    left: Node
    right: Node


@attrs.frozen
class Eq:
    left: Node
    right: Node


@attrs.frozen
class Rel:
    op: str  # > >= < <=
    left: Node
    right: Node


@attrs.frozen
class In:
    prop: Prop
    values: frozenset[str]
    negated: bool


Node = Const | Prop | Negate | Not | BoolCast | And | Or | Eq | Rel | In


def is_boolean(node: Node) -> bool:
    """``instanceof BooleanExpression``."""
    if isinstance(node, Const):
        return node.boolean
    return isinstance(node, Not | BoolCast | And | Or | Eq | Rel | In)


def as_boolean(node: Node) -> Node:
    """SelectorParser.asBooleanExpression."""
    if is_boolean(node):
        return node
    if isinstance(node, Prop):
        return BoolCast(node)
    raise FilterParseError(f"Expression will not result in a boolean value: {node}")


def _check_less_than_operand(node: Node) -> None:
    if isinstance(node, Const):
        if isinstance(node.value, Num):
            return
        raise FilterParseError(f"Value '{node.value!r}' cannot be compared.")
    if is_boolean(node):
        raise FilterParseError("a boolean expression cannot be compared by > >= < <=")


def make_rel(op: str, left: Node, right: Node) -> Node:
    _check_less_than_operand(left)
    _check_less_than_operand(right)
    return Rel(op, left, right)


def make_equal(left: Node, right: Node) -> Node:
    for side in (left, right):
        if isinstance(side, Const) and side.value is None:
            raise FilterParseError("'NULL' cannot be compared.")
    if isinstance(left, Const) and isinstance(right, Const) and left.boolean and not right.boolean:
        raise FilterParseError(f"'{left.value}' cannot be compared with '{right.value}'")
    return Eq(left, right)


def make_between(value: Node, low: Node, high: Node) -> Node:
    if isinstance(low, Const) and isinstance(high, Const):
        if low.value is None or high.value is None:
            raise FilterParseError("Illegal values of between, values can not be null!")
        try:
            order = java_compare(high.value, low.value)
        except FilterEvalError as e:
            raise FilterParseError(str(e)) from None
        if order < 0:
            raise FilterParseError("Illegal values of between, left value must less than or equal to right value")
    return And(make_rel(">=", value, low), make_rel("<=", value, high))


def make_in(left: Node, values: list[str], negated: bool) -> Node:
    if not isinstance(left, Prop):
        raise FilterParseError(f"Expected a property for In expression, got: {left}")
    return In(left, frozenset(values), negated)


def make_decimal(text: str) -> Const:
    digits = text[:-1] if text[-1] in "lL" else text
    n = int(digits)
    if n > LONG_MAX:
        raise FilterParseError(f"NumberFormatException: {text}")
    return Const(Num("I" if INT_MIN <= n <= INT_MAX else "L", n))


def make_float(text: str) -> Const:
    value = float(text)
    if value > 1.7976931348623157e308:
        raise FilterParseError(f"{text} is greater than Double.MAX_VALUE")
    if value < DOUBLE_MIN_VALUE:
        raise FilterParseError(f"{text} is less than Double.MIN_VALUE")
    return Const(Num("D", value))


# ----------------------------------------------------------------------------------------------
# evaluation


def _negate(v: Value) -> Value:
    if isinstance(v, Num):
        if v.kind == "I":
            return Num("I", _wrap(-int(v.value), 32))
        if v.kind == "L":
            return Num("L", _wrap(-int(v.value), 64))
        return Num("D", -float(v.value))
    return None


def evaluate(node: Node, props: Mapping[str, str]) -> Value:
    """Expression.evaluate; raises FilterEvalError where Java throws."""
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Prop):
        return props.get(node.name)
    if isinstance(node, Negate):
        return _negate(evaluate(node.operand, props))
    if isinstance(node, BoolCast):
        v = evaluate(node.operand, props)
        if v is None:
            return None
        return v if isinstance(v, bool) else False
    if isinstance(node, Not):
        v = evaluate(node.operand, props)
        return None if v is None else not v
    if isinstance(node, And):
        lv = evaluate(node.left, props)
        if lv is False:
            return False
        rv = evaluate(node.right, props)
        if rv is False:
            return False
        return None if lv is None or rv is None else True
    if isinstance(node, Or):
        lv = evaluate(node.left, props)
        if lv is True:
            return True
        rv = evaluate(node.right, props)
        if rv is True:
            return True
        return None if lv is None or rv is None else False
    if isinstance(node, Eq):
        lv = evaluate(node.left, props)
        rv = evaluate(node.right, props)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None or _java_equals(lv, rv):
            return True
        return java_compare(lv, rv) == 0
    if isinstance(node, Rel):
        lv = evaluate(node.left, props)
        if lv is None:
            return None
        rv = evaluate(node.right, props)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            order = _double_compare(parse_java_double(lv), parse_java_double(rv))
        else:
            order = java_compare(lv, rv)
        return {">": order > 0, ">=": order >= 0, "<": order < 0, "<=": order <= 0}[node.op]
    assert isinstance(node, In)
    v = evaluate(node.prop, props)
    if v is None or not isinstance(v, str):
        return None
    return (v in node.values) != node.negated


def matches(node: Node, props: Mapping[str, str]) -> bool:
    """ExpressionMessageFilter.isMatchedByCommitLog: TRUE matches; null, FALSE or a throw do not."""
    try:
        return evaluate(node, props) is True
    except FilterEvalError:
        return False


# ----------------------------------------------------------------------------------------------
# parsing


def _kw(word: str) -> str:
    cls = "".join(f"[{c.upper()}{c.lower()}]" for c in word)
    return f"/{cls}(?![A-Za-z0-9_$])/"


_GRAMMAR = rf"""
?start: or_expr
?or_expr: and_expr | or_expr OR and_expr -> or_
?and_expr: eq_expr | and_expr AND eq_expr -> and_
?eq_expr: cmp_expr
    | eq_expr EQ cmp_expr -> eq
    | eq_expr NE cmp_expr -> ne
    | eq_expr IS NULL -> is_null
    | eq_expr IS NOT NULL -> is_not_null
?cmp_expr: unary
    | cmp_expr GT unary -> gt
    | cmp_expr GE unary -> ge
    | cmp_expr LT unary -> lt
    | cmp_expr LE unary -> le
    | cmp_expr BETWEEN unary AND unary -> between
    | cmp_expr NOT BETWEEN unary AND unary -> not_between
    | cmp_expr IN LPAR strings RPAR -> in_
    | cmp_expr NOT IN LPAR strings RPAR -> not_in
strings: STRING (COMMA STRING)*
?unary: primary
    | PLUS unary -> pos
    | MINUS unary -> neg
    | NOT unary -> not_
?primary: STRING -> string
    | DECIMAL -> decimal
    | FLOAT -> float
    | TRUE -> true
    | FALSE -> false
    | NULL -> null
    | ID -> prop
    | LPAR or_expr RPAR

NOT.5: {_kw("not")}
AND.5: {_kw("and")}
OR.5: {_kw("or")}
BETWEEN.5: {_kw("between")}
IN.5: {_kw("in")}
TRUE.5: {_kw("true")}
FALSE.5: {_kw("false")}
NULL.5: {_kw("null")}
IS.5: {_kw("is")}
FLOAT.4: /[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+/
DECIMAL.3: /[1-9][0-9]*[lL]?|0/
STRING.3: /'(?:''|[^'])*'/
ID.2: /[A-Za-z_$][A-Za-z0-9_$]*/
LINE_COMMENT.6: /--[^\n\r]*(?:\r\n|\n|\r)/
BLOCK_COMMENT.6: /\/\*[^*]*\*+(?:[^*\/][^*]*\*+)*\//
NE.2: "<>"
GE.2: ">="
LE.2: "<="
EQ: "="
GT: ">"
LT: "<"
LPAR: "("
RPAR: ")"
COMMA: ","
PLUS: "+"
MINUS: "-"
WS: /[ \t\n\r\f]+/
%ignore WS
%ignore LINE_COMMENT
%ignore BLOCK_COMMENT
"""

_PARSER = Lark(_GRAMMAR, parser="lalr", lexer="basic", maybe_placeholders=False)


def _tokens(text: str) -> Iterator[Token]:
    yield from _PARSER.lex(text)


def _parse_tree(text: str):
    """Feed tokens one by one, stopping where SelectorParser stops (see the module docstring)."""
    ip = _PARSER.parse_interactive("")
    toks = _tokens(text)
    pending = next(toks, None)
    while True:
        if pending is None:
            return ip.feed_eof()
        accepts = ip.accepts()
        complete = "$END" in accepts
        if pending.type not in accepts:
            if complete:
                return ip.feed_eof()
            raise FilterParseError(f"Encountered {pending.value!r} at column {pending.column}")
        ip.feed_token(pending)
        pending = next(toks, None)


def _unquote(image: str) -> str:
    return image[1:-1].replace("''", "'")


def _build(tree) -> Node:
    if isinstance(tree, Token):
        raise FilterParseError(f"unexpected token {tree!r}")
    kids = [k for k in tree.children if not (isinstance(k, Token) and k.type in _PUNCT)]
    rule = tree.data
    if rule == "string":
        return Const(_unquote(kids[0].value))
    if rule == "decimal":
        return make_decimal(kids[0].value)
    if rule == "float":
        return make_float(kids[0].value)
    if rule == "true":
        return Const(True, boolean=True)
    if rule == "false":
        return Const(False, boolean=True)
    if rule == "null":
        return Const(None, boolean=True)
    if rule == "prop":
        return Prop(kids[0].value)
    if rule in ("pos", "primary"):
        return _build(kids[0])
    if rule == "neg":
        return Negate(_build(kids[0]))
    if rule == "not_":
        return Not(as_boolean(_build(kids[0])))
    if rule in ("in_", "not_in"):
        left = _build(kids[0])
        values = [_unquote(t.value) for t in kids[1].children if t.type == "STRING"]
        return make_in(left, values, rule == "not_in")
    if rule in ("between", "not_between"):
        value, low, high = (_build(k) for k in kids)
        if rule == "between":
            return make_between(value, low, high)
        return Or(make_rel("<", value, low), make_rel(">", value, high))
    if rule in ("is_null", "is_not_null"):
        eq = Eq(_build(kids[0]), Const(None, boolean=True))
        return eq if rule == "is_null" else Not(eq)
    left, right = _build(kids[0]), _build(kids[1])
    if rule == "or_":
        return Or(as_boolean(left), as_boolean(right))
    if rule == "and_":
        return And(as_boolean(left), as_boolean(right))
    if rule == "eq":
        return make_equal(left, right)
    if rule == "ne":
        return Not(make_equal(left, right))
    return make_rel(_REL[rule], left, right)


_PUNCT = frozenset(
    {"OR", "AND", "EQ", "NE", "IS", "NOT", "NULL", "GT", "GE", "LT", "LE", "BETWEEN", "IN", "LPAR", "RPAR",
     "PLUS", "MINUS", "COMMA"}
)
_REL = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


@functools.lru_cache(maxsize=1024)
def compile_filter(text: str) -> Node:
    """SelectorParser.parse: the boolean expression tree, or FilterParseError."""
    try:
        tree = _parse_tree(text)
    except LarkError as e:
        raise FilterParseError(f"Invalid MessageSelector. {type(e).__name__}: {str(e).splitlines()[0]}") from None
    return as_boolean(_build(tree))


def sql_filter(text: str):
    """A property predicate for the store's scan (FilterParseError if ``text`` does not compile)."""
    node = compile_filter(text)
    return lambda props: matches(node, props)
