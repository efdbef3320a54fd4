"""Facts of the 4.9.8 client's functions that the client differential found (docs/fidelity.md CL1-CL3).

``tests/interop/test_client_differential.py`` checks them against the release jar for drawn inputs; these
are the cases it shrank to, kept where ``make test`` runs them."""

from __future__ import annotations

import pytest

from rmqspec.model.allocate import allocate_averagely, allocate_averagely_by_circle
from rmqspec.model.message import InvalidMessage, Message, MessageQueue, java_blank, put_user_property


@pytest.mark.parametrize("name, value", [(" ", "x"), ("a", "\t"), ("a", ""), ("", "v"), ("DELAY", "1"),
                                         ("CLUSTER", "c")])
def test_put_user_property_refuses_reserved_and_blank(name: str, value: str) -> None:
    with pytest.raises(InvalidMessage):
        put_user_property({}, name, value)


def test_put_user_property_keeps_what_java_keeps() -> None:
    props = put_user_property({"a": "1"}, "b", "\u00a0")  # U+00A0 is not blank to Java's trim()
    assert props == {"a": "1", "b": "\u00a0"}
    assert Message("T", b"", properties=props).properties == props
    assert java_blank("\x00 \x1f") and not java_blank("\u3000")


def test_a_lone_surrogate_is_refused_not_raised() -> None:
    with pytest.raises(InvalidMessage, match="lone surrogate"):
        Message("T", b"", properties={"a": "\ud800"})


def test_allocation_sorts_as_java_strings_do() -> None:
    # UTF-16: the surrogate pair of U+1F600 (D83D) sorts before U+FF21; code points the other way round
    mqs = [MessageQueue("T\uff21", 0), MessageQueue("T\U0001f600", 0)]
    assert allocate_averagely("c1", mqs, ["c1", "c2"]) == [MessageQueue("T\U0001f600", 0)]
    assert allocate_averagely_by_circle("c\U0001f600", mqs, ["c\uff21", "c\U0001f600"]) == \
        [MessageQueue("T\U0001f600", 0)]
