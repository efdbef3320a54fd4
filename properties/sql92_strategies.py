"""Hypothesis strategies for SQL92 filters: expressions (well- and ill-typed) and message properties.

Theory of operation
-------------------
``expressions()`` draws token lists from the 4.9.8 grammar (``model/sql92.py``) and joins them with
blanks: comparisons of properties and literals of every type (so string ``>``, ``NULL`` operands,
boolean literals on the left, unordered BETWEEN bounds, numbers in IN lists appear), BETWEEN / NOT
BETWEEN, IN / NOT IN, IS [NOT] NULL, NOT / AND / OR with parentheses, unary minus, keywords in random
case, comments, and with a small probability a syntax error (a dropped or doubled token) or trailing
tokens. About a third of what it draws does not compile, which the brokers must refuse alike.
``property_maps()`` draws user properties over a few names with values that hit the typing rules:
integers, longs, doubles (exponent, NaN, blanks), booleans in any case, words, and quotes.
Used by the conformance machine (``filters.py``) and the real-broker differential test.
"""

from __future__ import annotations

from hypothesis import strategies as st

PROPERTY_NAMES = ("a", "b", "c", "region")
REFERENCED = (*PROPERTY_NAMES, "TAGS", "zz", "CLUSTER")  # zz is never set; CLUSTER is set by the broker
TAG_VALUES = (None, "logistics", "food", "Aa", "BB")

_VALUES = (
    "1", "2", "-3", "10", "05", "+5", "3000000000", "1.5", "-0.5", "1e2", "NaN", "Infinity", " 7 ",
    "true", "TRUE", "false", "HZ", "SH", "BJ", "x", "it's", "logistics", "0x10", "1,5",
)


def property_maps() -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(st.sampled_from(PROPERTY_NAMES), st.sampled_from(_VALUES), max_size=4)


def _kw(word: str) -> st.SearchStrategy[str]:
    return st.sampled_from([word, word.lower(), word.capitalize()])


_STRING_LITERALS = st.sampled_from(["'HZ'", "'SH'", "'x'", "'1'", "'true'", "'it''s'", "''", "'logistics'",
                                    "'food'", "'Aa'"])
_GOOD_NUMBERS = st.sampled_from(["1", "2", "0", "10", "-1", "-2.5", "3000000000", "1.5", ".5", "5.", "1e2", "2L",
                                 "007"])
_BAD_NUMBERS = st.sampled_from(["0.0", "9223372036854775808", "1e-400"])
_BOOL_LITERALS = st.sampled_from(["TRUE", "FALSE", "NULL"])
_PROPS = st.sampled_from(REFERENCED)


def _operand() -> st.SearchStrategy[str]:
    """Any operand (ill-typed combinations included)."""
    return st.one_of(_PROPS, _STRING_LITERALS, _GOOD_NUMBERS, _BOOL_LITERALS, _BAD_NUMBERS,
                     st.builds(lambda x: f"-{x}", st.one_of(_GOOD_NUMBERS, _PROPS)))


def _well_typed() -> st.SearchStrategy[str]:
    rel = st.sampled_from([">", ">=", "<", "<="])
    eq = st.sampled_from(["=", "<>"])
    strings = st.lists(_STRING_LITERALS, min_size=1, max_size=5).map(", ".join)
    return st.one_of(
        st.builds(lambda a, o, b: f"{a} {o} {b}", _PROPS, eq, st.one_of(_STRING_LITERALS, _GOOD_NUMBERS, _PROPS,
                                                                        st.sampled_from(["TRUE", "FALSE"]))),
        st.builds(lambda a, o, b: f"{a} {o} {b}", _PROPS, rel, st.one_of(_GOOD_NUMBERS, _PROPS)),
        st.builds(lambda a, o, b: f"{b} {o} {a}", _PROPS, rel, _GOOD_NUMBERS),
        st.builds(lambda a, n, lo, hi: f"{a} {n}BETWEEN {min(lo, hi)} AND {max(lo, hi)}", _PROPS,
                  st.sampled_from(["", "NOT "]), st.integers(-3, 12), st.integers(-3, 12)),
        st.builds(lambda a, n, items: f"{a} {n}IN ({items})", _PROPS, st.sampled_from(["", "NOT "]), strings),
        st.builds(lambda a, n: f"{a} IS {n}NULL", _PROPS, st.sampled_from(["", "NOT "])),
    )


def _comparison() -> st.SearchStrategy[str]:
    op = st.sampled_from(["=", "<>", ">", ">=", "<", "<="])
    mixed = st.lists(st.one_of(_STRING_LITERALS, _GOOD_NUMBERS), min_size=1, max_size=3).map(", ".join)
    ill = st.one_of(
        st.builds(lambda a, o, b: f"{a} {o} {b}", _operand(), op, _operand()),
        st.builds(lambda a, n, lo, hi: f"{a} {n}BETWEEN {lo} AND {hi}", _operand(),
                  st.sampled_from(["", "NOT "]), _operand(), _operand()),
        st.builds(lambda a, n, items: f"{a} {n}IN ({items})", _operand(), st.sampled_from(["", "NOT "]), mixed),
        st.builds(lambda a, n: f"{a} IS {n}NULL", _operand(), st.sampled_from(["", "NOT "])),
    )
    return st.one_of(_well_typed(), _well_typed(), _well_typed(), _well_typed(), ill)


def _recase(text: str, flags: list[bool]) -> str:
    """Keywords in a random case (identifiers and literals untouched)."""
    words = text.split(" ")
    keywords = {"AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE"}
    out = []
    for i, w in enumerate(words):
        if w.upper() in keywords and w.upper() == w and flags and flags[i % len(flags)]:
            out.append(w.lower())
        else:
            out.append(w)
    return " ".join(out)


def _tree() -> st.SearchStrategy[str]:
    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.builds(lambda a, o, b: f"{a} {o} {b}", children, st.sampled_from(["AND", "OR"]), children),
            st.builds(lambda a: f"({a})", children),
            st.builds(lambda a: f"NOT ({a})", children),
        )

    leaves = st.one_of(_comparison(), _comparison(), _comparison(), st.sampled_from(REFERENCED),
                       st.sampled_from(["TRUE", "FALSE", "NULL"]))
    return st.recursive(leaves, extend, max_leaves=4)


def _damage(text: str, kind: int, at: int) -> str:
    words = text.split(" ")
    i = at % len(words)
    if kind == 0:  # drop a token
        return " ".join(words[:i] + words[i + 1:])
    if kind == 1:  # double a token
        return " ".join([*words[:i], words[i], *words[i:]])
    if kind == 2:  # trailing tokens
        return text + " " + ["zz", "AND", "NOT x", "-- c", "#", "b = 1", ")"][at % 7]
    if kind == 3:  # a comment in the middle
        return " ".join([*words[:i], "/* c */", *words[i:]])
    return text


_EXPRESSIONS = st.builds(
    lambda tree, flags, damage, at: _damage(_recase(tree, flags), damage, at),
    _tree(),
    st.lists(st.booleans(), max_size=6),
    st.sampled_from([9, 9, 9, 9, 9, 9, 0, 1, 2, 3]),
    st.integers(0, 30),
)


@st.composite
def _expressions(draw: st.DrawFn) -> str:
    return draw(_EXPRESSIONS)  # a composite keeps the strategy's repr short in reports


def expressions() -> st.SearchStrategy[str]:
    """SQL92 expressions, mostly well-formed; some ill-typed or broken on purpose."""
    return _expressions()
