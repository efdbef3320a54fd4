"""FilterAPI.buildSubscriptionData's parse (``model/filterapi.py``): the cases the client differential
holds to the 4.9.8 jar (``tests/interop/test_client_differential.py::test_subscription``)."""

from __future__ import annotations

import pytest

from rmqspec.model.filterapi import SubscriptionSplitError, build_subscription, java_trim
from rmqspec.model.javahash import java_string_hash
from rmqspec.model.queues import SubscriptionError, tag_filter


@pytest.mark.parametrize("sub", [None, "", "*"])
def test_sub_all(sub: str | None) -> None:
    parsed = build_subscription(sub)
    assert parsed.sub_all and parsed.sub_string == "*" and parsed.tags == frozenset()
    assert tag_filter(sub) is None


def test_a_padded_star_is_the_tag_star() -> None:
    parsed = build_subscription(" * ")
    assert not parsed.sub_all and parsed.tags == {"*"} and parsed.sub_string == " * "


def test_parts_are_trimmed_as_java_trims() -> None:
    parsed = build_subscription("TagA ||\tTagB|| \u00a0TagC||")
    assert parsed.tags == {"TagA", "TagB", "\u00a0TagC"}  # U+00A0 is not trimmed by String.trim
    assert parsed.codes == {java_string_hash(t) for t in parsed.tags}
    assert java_trim("\x00 a \x1f") == "a"


def test_blank_parts_match_nothing_at_the_broker_and_everything_at_the_client() -> None:
    parsed = build_subscription(" || ")
    assert parsed.tags == frozenset() and not parsed.sub_all
    assert not parsed.broker_matches(java_string_hash("TagA")) and parsed.client_keeps("TagA")
    matches = tag_filter(" || ")
    assert matches is not None and not matches(0)


def test_nothing_left_after_the_split_is_an_error() -> None:
    with pytest.raises(SubscriptionSplitError):
        build_subscription("||||")
    with pytest.raises(SubscriptionError, match="split error"):
        tag_filter("||")


def test_the_broker_compares_the_low_32_bits_of_a_tags_code() -> None:
    parsed = build_subscription("Aa")
    assert parsed.broker_matches(java_string_hash("BB"))  # a hash collision is returned; the client re-checks
    assert not parsed.client_keeps("BB")
    assert parsed.broker_matches(java_string_hash("Aa") + (1 << 32))
