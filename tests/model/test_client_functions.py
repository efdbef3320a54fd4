"""Facts of the 4.9.8 client's functions that the client differential holds (docs/fidelity.md CL1-CL7).

``tests/interop/test_client_differential.py`` checks them against the release jar for drawn inputs; these
are the cases it shrank to, kept where ``make test`` runs them."""

from __future__ import annotations

import pytest

from rmqspec.model.allocate import allocate_averagely, allocate_averagely_by_circle
from rmqspec.model.consumer import ConsumerConfig
from rmqspec.model.consumer_check import ConsumerConfigError
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


@pytest.mark.parametrize("changes, field", [
    ({"consume_thread_min": 0}, "consumeThreadMin"), ({"consume_thread_min": 21}, "consumeThreadMin"),
    ({"consume_thread_max": 1001, "pull_batch_size": 0}, "consumeThreadMax"),
    ({"pull_threshold_for_topic": 0}, "pullThresholdForTopic"), ({"pull_interval_ms": 65536}, "pullInterval"),
    ({"pull_batch_size": 1025}, "pullBatchSize"),
    ({"pull_threshold_size_for_queue": 1025}, "pullThresholdSizeForQueue"),
])
def test_check_config_refuses_at_the_first_failing_check(changes: dict[str, int], field: str) -> None:
    with pytest.raises(ConsumerConfigError) as info:
        ConsumerConfig(**changes)
    assert info.value.field == field


def test_check_config_takes_the_edges_and_unlimited() -> None:
    ConsumerConfig(consume_thread_min=1000, consume_thread_max=1000, pull_threshold_for_topic=-1,
                   pull_threshold_size_for_topic=102_400, pull_interval_ms=0, consume_message_batch_max_size=1024)
