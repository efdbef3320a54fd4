"""The SQL92 filter language of RocketMQ 4.9.8: every construct, the typing and null rules, parse failures.

Expected values are the 4.9.8 sources' answers (``SelectorParser``, ``ComparisonExpression``,
``UnaryExpression``, ``LogicExpression``, ``ConstantExpression``), derived by hand per case; the
differential test against the real broker is ``tests/interop/test_sql92_real.py``.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.model.sql92 import (
    FilterEvalError,
    FilterParseError,
    compile_filter,
    evaluate,
    is_tag_type,
    matches,
    parse_java_double,
    parse_java_integer,
)

SEED = "TAGS = 'logistics' AND region IN ('HZ','SH')"


def ev(expr: str, **props: str) -> object:
    return evaluate(compile_filter(expr), props)


def test_seed_example() -> None:
    node = compile_filter(SEED)
    assert matches(node, {"TAGS": "logistics", "region": "HZ"})
    assert matches(node, {"TAGS": "logistics", "region": "SH"})
    assert not matches(node, {"TAGS": "logistics", "region": "BJ"})
    assert not matches(node, {"TAGS": "food", "region": "HZ"})
    assert evaluate(node, {"TAGS": "logistics"}) is None  # region missing: unknown, not delivered
    assert not matches(node, {"TAGS": "logistics"})


@pytest.mark.parametrize(
    ("expr", "props", "expected"),
    [
        # = and <> on strings and numbers; a string against a number is parsed as that number's type
        ("a = 'x'", {"a": "x"}, True),
        ("a = 'x'", {"a": "y"}, False),
        ("a <> 'x'", {"a": "y"}, True),
        ("a = 5", {"a": "5"}, True),
        ("a = 5", {"a": "+5"}, True),
        ("a = 5.0", {"a": "5"}, True),
        ("a = 5", {"a": "05"}, True),
        ("a = 3000000000", {"a": "3000000000"}, True),  # a long literal
        ("a = 1.5", {"a": " 1.5 "}, True),  # Double.valueOf trims blanks
        ("a = 1.5", {"a": "1.5f"}, True),  # and accepts a type suffix
        ("a = TRUE", {"a": "true"}, True),
        ("a = TRUE", {"a": "TRUE"}, True),
        ("a = FALSE", {"a": "yes"}, True),  # Boolean.valueOf("yes") is false
        ("a = b", {"a": "x", "b": "x"}, True),
        ("a = b", {}, True),  # doCreateEqual: both null → TRUE
        ("a = b", {"b": "x"}, None),  # left null → null
        ("a = b", {"a": "x"}, False),  # right null → FALSE
        ("a <> b", {"a": "x"}, True),  # so NOT FALSE is TRUE
        ("a = 'x'", {}, None),
        ("a <> 'x'", {}, None),
        ("1 = 1.0", {}, True),
        ("1 = TRUE", {}, False),  # Integer vs Boolean: __compare answers -1
        ("'true' = TRUE", {}, True),
        ("(a = 'x') = TRUE", {"a": "x"}, True),
        ("a = 1 = FALSE", {"a": "2"}, True),  # equality chains left to right
        # relational operators
        ("a > 5", {"a": "6"}, True),
        ("a > 5", {"a": "5"}, False),
        ("a >= 5", {"a": "5"}, True),
        ("a < 5", {"a": "-6"}, True),
        ("a <= 5.5", {"a": "5.5"}, True),
        ("a > 5", {}, None),
        ("a > b", {"a": "10", "b": "9.5"}, True),  # two strings are compared as doubles
        ("a < b", {"a": "1e2", "b": "99"}, False),
        ("a > -5", {"a": "-4"}, True),
        ("-5 < a", {"a": "0"}, True),
        ("- -5 = 5", {}, True),
        ("+5 = 5", {}, True),
        ("-a > 1", {"a": "5"}, None),  # negating a string is null
        ("a > 1.5", {"a": "NaN"}, True),  # Double.compareTo: NaN above everything
        ("a = 0.5", {"a": "0x1p-1"}, True),  # hexadecimal double
        # BETWEEN
        ("a BETWEEN 1 AND 3", {"a": "2"}, True),
        ("a BETWEEN 1 AND 3", {"a": "3"}, True),
        ("a BETWEEN 1 AND 3", {"a": "4"}, False),
        ("a BETWEEN 1 AND 3", {}, None),
        ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
        ("a NOT BETWEEN 1 AND 3", {"a": "2"}, False),
        ("a BETWEEN -5 AND 5", {"a": "0"}, True),
        ("a BETWEEN 5 AND -5", {"a": "0"}, False),  # a negated bound is not a literal: no order check
        # IN / NOT IN
        ("a IN ('x', 'y')", {"a": "y"}, True),
        ("a IN ('x', 'y')", {"a": "z"}, False),
        ("a IN ('x', 'y', 'z', 'w', 'v')", {"a": "v"}, True),
        ("a NOT IN ('x')", {"a": "z"}, True),
        ("a NOT IN ('x')", {}, None),
        ("a IN ('x')", {}, None),
        # IS [NOT] NULL
        ("a IS NULL", {}, True),
        ("a IS NULL", {"a": ""}, False),
        ("a IS NOT NULL", {"a": "x"}, True),
        ("a IS NOT NULL", {}, False),
        ("(a = 'x') IS NULL", {}, True),
        ("5 IS NULL", {}, False),
        # constants, casts, three-valued logic
        ("TRUE", {}, True),
        ("FALSE", {}, False),
        ("NULL", {}, None),
        ("a", {"a": "true"}, False),  # a property as a boolean: FALSE unless null
        ("a", {}, None),
        ("NOT a", {"a": "true"}, True),
        ("NOT (a = 'x')", {"a": "x"}, False),
        ("NOT (a = 'x')", {}, None),
        ("a = 'x' AND b = 'y'", {"a": "x", "b": "y"}, True),
        ("a = 'x' AND b = 'y'", {"a": "x"}, None),
        ("a = 'x' AND b = 'y'", {"a": "z"}, False),
        ("a = 'x' OR b = 'y'", {"b": "y"}, True),
        ("a = 'x' OR b = 'y'", {"a": "z"}, None),
        ("a = 'x' OR b = 'y'", {"a": "z", "b": "z"}, False),
        ("NULL OR TRUE", {}, True),
        ("NULL AND FALSE", {}, False),
        ("a = 'x' OR b = 'y' AND c = 'z'", {"a": "x"}, True),  # AND binds tighter
        ("(a = 'x' OR b = 'y') AND c = 'z'", {"a": "x"}, None),
        # lexical
        ("a = 'it''s'", {"a": "it's"}, True),
        ("A = 'x'", {"A": "x"}, True),  # names are case-sensitive, keywords are not
        ("a = 'x' aNd b iS nOt NuLl", {"a": "x", "b": "1"}, True),
        ("$a_1 = 'x'", {"$a_1": "x"}, True),
        ("a = 5L", {"a": "5"}, True),
        ("a = 5.", {"a": "5"}, True),
        ("a = .5", {"a": "0.5"}, True),
        ("a = 5E1", {"a": "50"}, True),
        ("a = /* comment */ 'x'", {"a": "x"}, True),
        ("a = 'x' -- comment\n OR b = 'y'", {"b": "y"}, True),
        # trailing tokens: the parser stops at the first token that cannot continue
        ("a = 'x' b c", {"a": "x"}, True),
        ("a = 'x' -- no newline", {"a": "x"}, True),  # "--" without a line end is two minus tokens
        ("a = 007", {"a": "0"}, True),  # "0" is a whole decimal: the trailing "07" is ignored
        ("a = 'x' b #", {"a": "x"}, True),  # "#" is never tokenized
    ],
)
def test_evaluation(expr: str, props: dict[str, str], expected: object) -> None:
    assert evaluate(compile_filter(expr), props) is expected
    assert matches(compile_filter(expr), props) is (expected is True)


@pytest.mark.parametrize(
    ("expr", "props"),
    [
        ("a = 5", {"a": "abc"}),  # Integer.valueOf throws: the broker logs it and does not deliver
        ("a = 5", {"a": "5.0"}),
        ("a = 5", {"a": "3000000000"}),  # Integer overflow
        ("a > 5", {"a": ""}),
        ("a > b", {"a": "x", "b": "1"}),  # two strings that are not doubles
        ("TRUE = a", {"a": "true"}),  # Boolean vs String: ClassCastException
        ("NOT a = 'x'", {"a": "y"}),  # (NOT a) = 'x': a Boolean against a String
        ("a = 1 OR b = 'y'", {"a": "z", "b": "y"}),  # the throw aborts the whole OR
    ],
)
def test_evaluation_throws_and_does_not_match(expr: str, props: dict[str, str]) -> None:
    node = compile_filter(expr)
    with pytest.raises(FilterEvalError):
        evaluate(node, props)
    assert not matches(node, props)


def test_short_circuit_skips_the_throw() -> None:
    assert ev("b = 'y' OR a = 1", a="z", b="y") is True
    assert ev("b = 'n' AND a = 1", a="z", b="y") is False


@pytest.mark.parametrize(
    "expr",
    [
        "",
        "   ",
        "a =",
        "a = = 1",
        "'x'",  # not a boolean
        "5",
        "-a",
        "NOT 5",
        "NOT 'x'",
        "a = NULL",  # NULL literal cannot be compared
        "NULL = a",
        "TRUE = 'x'",  # a boolean literal against a non-boolean literal
        "a > 'x'",  # a string literal cannot be compared by >
        "a < TRUE",
        "(a = 1) > 1",  # a boolean expression cannot be compared by >
        "a BETWEEN 5 AND 1",  # literal bounds out of order
        "a BETWEEN 'a' AND 'b'",
        "a BETWEEN NULL AND 1",
        "5 IN ('x')",  # IN needs a property
        "a IN ()",
        "a IN (1, 2)",  # IN takes string literals only
        "a > 0.0",  # createFloat rejects values below Double.MIN_VALUE
        "a > 1e-400",
        "a > 1e400",  # and above Double.MAX_VALUE
        "a = 9223372036854775808",  # Long overflow
        "a = 'x",  # unterminated string
        "a = 1 #",  # the token after the expression cannot be tokenized
        "a == 1",
        "a != 1",
        "a IS 5",
        "a IS NOT 5",
        "a = 'x' NOT c",  # a NOT after an operand must start NOT BETWEEN / NOT IN (real 4.9.8)
        "a NOT LIKE 'x'",
        "(a = 1",
        "a = /* open comment",
        "é = 'x'",
    ],
)
def test_parse_failures(expr: str) -> None:
    with pytest.raises(FilterParseError):
        compile_filter(expr)


@pytest.mark.parametrize(
    ("expr", "same_as"),
    [
        ("a + 1 = 2", "a"),  # no binary plus: the parser stops before "+"
        ("a = 1)", "a = 1"),  # ")" cannot continue a top-level expression
        ("a = 1 b = 2", "a = 1"),
    ],
)
def test_trailing_tokens_are_ignored(expr: str, same_as: str) -> None:
    assert compile_filter(expr) == compile_filter(same_as)


def test_is_tag_type() -> None:
    assert is_tag_type(None) and is_tag_type("") and is_tag_type("TAG")
    assert not is_tag_type("SQL92") and not is_tag_type("tag")


def test_java_number_parsing() -> None:
    assert parse_java_integer("-12", -(2**31), 2**31 - 1) == -12
    assert parse_java_integer("١٢", -(2**31), 2**31 - 1) == 12  # Character.digit accepts any Unicode digit
    for bad in ("", "+", "-", "1 ", "1_0", "0x1"):
        with pytest.raises(FilterEvalError):
            parse_java_integer(bad, -(2**31), 2**31 - 1)
    assert parse_java_double("\t-1.5e1d ") == -15.0
    assert parse_java_double("Infinity") == math.inf
    assert parse_java_double("-Infinity") == -math.inf
    assert math.isnan(parse_java_double("NaN"))
    assert parse_java_double("0x1.8p1") == 3.0
    assert parse_java_double("-0x10p0") == -16.0
    for bad in ("", "inf", "1e", "1_0", "١", "nan", "0x1.8"):
        with pytest.raises(FilterEvalError):
            parse_java_double(bad)


def test_double_order_and_equality() -> None:
    assert ev("a < 0.5", a="-0.0") is True
    assert ev("a = 0.5", a="0.5") is True
    # -0.0 vs 0.0: Double.equals differs and compareTo orders -0.0 first
    assert ev("a = b", a="-0.0", b="0.0") is False  # both strings: String.equals / compareTo
    assert ev("a >= b", a="-0.0", b="0.0") is False  # as doubles: -0.0 < 0.0
    assert ev("a >= b", a="NaN", b="NaN") is True


def test_integer_negation_wraps() -> None:
    # 2147483648 is a Long literal; its negation is Long -2^31; -(-2147483648) as Integer wraps
    assert ev("a = -2147483648", a="-2147483648") is True
    assert ev("- -2147483648 = -2147483648") is False  # Long: -(-2^31) = 2^31 (no wrap in 64 bits)


_NAMES = st.sampled_from(["a", "b", "TAGS"])
_VALUES = st.one_of(st.sampled_from(["x", "1", "2.5", "-3", "true", "", "NaN"]), st.text(max_size=3))


@given(st.dictionaries(_NAMES, _VALUES), st.sampled_from(["a", "b"]), st.sampled_from(["x", "1"]))
def test_in_is_equality_disjunction_on_strings(props: dict[str, str], name: str, lit: str) -> None:
    """For string literals, ``p IN ('v')`` and ``p = 'v'`` agree whenever ``p`` is present."""
    in_value = ev(f"{name} IN ('{lit}')", **props)
    eq_value = ev(f"{name} = '{lit}'", **props)
    assert in_value == eq_value


@given(st.dictionaries(_NAMES, _VALUES))
def test_not_between_is_not_of_between_for_literal_bounds(props: dict[str, str]) -> None:
    """Where neither throws, ``NOT BETWEEN`` is the negation of ``BETWEEN`` (three-valued)."""
    try:
        inside = ev("a BETWEEN 1 AND 2", **props)
        outside = ev("a NOT BETWEEN 1 AND 2", **props)
    except FilterEvalError:
        return
    assert outside == (None if inside is None else not inside)
