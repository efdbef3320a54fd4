"""A push consumer's subscription of one topic: ``SubscriptionData`` built by TAG or by a MessageSelector.

Theory of operation
-------------------
RocketMQ 4.9.8's client (``DefaultMQPushConsumerImpl.subscribe``, ``FilterAPI``, ``MessageSelector``)
holds one ``SubscriptionData`` per topic. This module builds it the way the 4.9.8 jar does (read with
``javap -c`` from ``rocketmq-client-4.9.8.jar`` and ``rocketmq-common-4.9.8.jar``):

- ``subscribe(topic, "TagA || TagB")`` is ``FilterAPI.buildSubscriptionData``: type TAG, the tags set of
  ``model/filterapi.py``;
- ``subscribe(topic, MessageSelector)``: a null selector is ``subscribe(topic, "*")``; otherwise
  ``FilterAPI.build(topic, expression, type)``: type ``TAG`` (or null) is the TAG parse above; any other
  type needs a non-empty expression ("Expression can't be null!" + type, thrown as "subscription
  exception") and keeps the expression *as given* (not trimmed, not parsed: the broker compiles it) with
  that type and an **empty** tags set. ``MessageSelector.bySql`` is type ``SQL92``, ``byTag`` type ``TAG``;
- ``subVersion`` is the time the ``SubscriptionData`` was built (``System.currentTimeMillis()`` in its
  constructor): here the client's clock when it subscribed;
- ``PullAPIWrapper.processPullResult`` re-checks tag strings only when the tags set is non-empty (and not
  class-filter mode), so a SQL92 subscription is never filtered client-side: the broker's SQL92 filter
  decides alone.

A pull sends ``subExpression`` (when the subscription flag is set), ``expressionType`` and
``subVersion`` (``DefaultMQPushConsumerImpl.pullMessage`` → ``PullAPIWrapper.pullKernelImpl``); a
heartbeat sends every ``SubscriptionData`` (``heartbeat_entry``). The reference client's pulls carry their
subscription (the flag set; docs/seeds.md E4); ``pull`` below sends a TAG subscription exactly as before
(expression only: the type and version are the protocol's defaults) and a non-TAG one with its type and
version. The %RETRY% subscription the client adds at start is always ``*`` by TAG.

Not modelled: the class-filter mode (``subscribe(topic, className, filterClassSource)``) and the start's
CHECK_CLIENT_CONFIG (``MQClientInstance.checkClientInBroker``: for each non-TAG subscription the broker
compiles the expression; a refusal — SYSTEM_ERROR without ``enablePropertyFilter``, or
SUBSCRIPTION_PARSE_FAILED — is thrown out of ``start()`` as an MQClientException after the consumer is
already running). The reference client learns the same refusal from its pulls, which then fail and are
re-tried after ``pull_exception_delay_ms``.
"""

from __future__ import annotations

from typing import Any

import attrs

from rmqspec.model.filterapi import TagSubscription, build_subscription
from rmqspec.model.message import MessageQueue, StoredMessage
from rmqspec.model.results import PullResult
from rmqspec.model.sql92 import SQL92, TAG, is_tag_type

__all__ = ["MessageSelector", "Subscription", "SubscriptionBuildError", "pull"]


class SubscriptionBuildError(ValueError):
    """Caller misuse: ``FilterAPI.build`` refused the selector (4.9.8: MQClientException "subscription
    exception" around IllegalArgumentException "Expression can't be null!" + type)."""


@attrs.frozen
class MessageSelector:
    """``org.apache.rocketmq.client.consumer.MessageSelector``: an expression and its type."""

    expression_type: str
    expression: str | None

    @classmethod
    def by_sql(cls, expression: str | None) -> MessageSelector:
        """``MessageSelector.bySql``: type SQL92."""
        return cls(SQL92, expression)

    @classmethod
    def by_tag(cls, expression: str | None) -> MessageSelector:
        """``MessageSelector.byTag``: type TAG."""
        return cls(TAG, expression)


@attrs.frozen
class Subscription(TagSubscription):
    """A consumer's ``SubscriptionData`` of one topic: the expression as sent, its tags set (TAG only), the
    topic, the expression type and the subVersion."""

    topic: str
    expression_type: str = TAG
    sub_version: int = 0

    @property
    def expression(self) -> str:
        return self.sub_string

    @property
    def tag_type(self) -> bool:
        return is_tag_type(self.expression_type)

    @classmethod
    def parse(cls, topic: str, expression: str | None, sub_version: int = 0) -> Subscription:
        """``FilterAPI.buildSubscriptionData`` (a TAG expression)."""
        sub = build_subscription(expression)
        return cls(sub.sub_string, sub.tags, topic, TAG, sub_version)

    @classmethod
    def build(cls, topic: str, selector: MessageSelector | None, sub_version: int = 0) -> Subscription:
        """``subscribe(topic, MessageSelector)``: null → ``*``; ``FilterAPI.build`` otherwise."""
        if selector is None or selector.expression_type == TAG:
            return cls.parse(topic, None if selector is None else selector.expression, sub_version)
        if not selector.expression:
            raise SubscriptionBuildError(f"subscription exception: Expression can't be null!{selector.expression_type}")
        return cls(selector.expression, frozenset(), topic, selector.expression_type, sub_version)

    def matches(self, msg: StoredMessage) -> bool:
        """PullAPIWrapper.processPullResult: with a non-empty tags set, keep a message whose TAGS is in it
        (a non-TAG subscription has none: everything the broker returned is kept)."""
        return self.client_keeps(msg.tags)

    def consume_detail(self, msg: StoredMessage) -> dict[str, Any] | None:
        """A filtering subscription's ``consume`` rows (SQL92, or tags other than ``*``) state it and the
        message's tags and properties (``traces/checks_filter.py`` judges FILTER_MISMATCH / FILTER_SKIPPED and
        exempts the messages it filtered out from LOST with them); None for ``*``, whose rows stay as they were."""
        if is_tag_type(self.expression_type) and self.sub_string.strip() in ("", "*"):
            return None
        return {"subscription": self.sub_string, "expression_type": self.expression_type, "tags": msg.tags,
                "properties": dict(msg.properties)}

    def heartbeat_entry(self) -> tuple[str, str, int]:
        """What HEART_BEAT's ConsumerData carries for this topic: (subString, expressionType, subVersion)."""
        return self.expression, self.expression_type, self.sub_version


def pull(broker: Any, group: str, mq: MessageQueue, offset: int, max_nums: int, sub: Subscription) -> PullResult:
    """PULL_MESSAGE with the subscription flag: a TAG subscription sends its expression alone (the protocol's
    defaults for type and version, as the reference client always has), another type its type and version."""
    if sub.tag_type:
        return broker.pull(group, mq, offset, max_nums, sub.expression)
    return broker.pull(group, mq, offset, max_nums, sub.expression, sub.expression_type, sub.sub_version)
