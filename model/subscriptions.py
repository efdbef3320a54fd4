"""Subscriptions a broker holds from heartbeats, and the filter of a pull that carries none (4.9.8).

Theory of operation
-------------------
A 4.9.8 push consumer heartbeats (HEART_BEAT 34) its ``SubscriptionData`` per topic — expression,
``expressionType`` and ``subVersion`` (``System.currentTimeMillis()`` when the client built the
subscription) — and, with the default ``postSubscriptionWhenPull=false``, pulls *without* the
subscription flag: the broker filters with what it holds for the group and topic. Two broker tables
decide what that is, both modelled here:

- ``ConsumerGroupInfo.updateSubscription`` (per group, topic → subscription): a topic not held is
  added; a held one is replaced only by a *strictly greater* ``subVersion`` — the most recently
  built subscription wins, not the most recent heartbeat, and re-heartbeating an older one changes
  nothing; a topic the heartbeat does not list is removed from the group. The group's clients are
  its channels (here: client ids); when the last one unregisters the group info is dropped
  (``ConsumerManager.unregisterConsumer``) and its filter data marked dead. All of it lives in
  memory: a broker restart forgets it until the clients heartbeat again.
- ``ConsumerFilterManager.register`` (per topic and group, SQL92 only, fed by the same heartbeat):
  a tag-type or empty expression is not registered; a first one is compiled and kept (one that does
  not compile is not kept); a later one replaces it only with a strictly greater version (an equal
  version revives a dead entry); a greater version whose expression does not compile *removes* the
  entry. A pull evaluates this entry's compiled expression (``ExpressionMessageFilter``
  ``realFilterData``), not the subscription table's string.

``resolve`` is ``PullMessageProcessor``'s branch without the subscription flag, in its order:
no group info → SUBSCRIPTION_NOT_EXIST "the consumer's group info not exist"; no subscription for
the topic → SUBSCRIPTION_NOT_EXIST "the consumer's subscription not exist"; held ``subVersion`` below
the request's → SUBSCRIPTION_NOT_LATEST; for a non-tag type, no filter data → FILTER_DATA_NOT_EXIST
and filter data whose version is below the request's → FILTER_DATA_NOT_LATEST. It returns the
(expression, type) the pull filters with; the caller applies ``enablePropertyFilter`` and the
tag-hash / SQL92 filters as for a pull that carries its subscription. Deviation: the filter table
is kept in memory (4.9.8 persists it to ``consumerFilter.json``; its entries only matter while a
group's subscription exists, which a restart forgets too) and without bloom-filter data.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from rmqspec.model.results import BrokerError, ResponseCode
from rmqspec.model.sql92 import FilterParseError, compile_filter, is_tag_type

# topic -> (expression, expression_type, sub_version): one client's heartbeat for one group
HeartbeatSubs = Mapping[str, tuple[str, str, int]]


@attrs.frozen
class Registered:
    """One topic's SubscriptionData as the broker holds it."""

    expression: str
    expression_type: str
    sub_version: int


@attrs.define
class FilterData:
    """ConsumerFilterData: a compiled SQL92 expression of a group and topic."""

    expression: str
    expression_type: str
    client_version: int
    dead: bool = False


@attrs.define
class GroupInfo:
    """ConsumerGroupInfo: the clients (channels) of a group and its subscription table."""

    clients: set[str] = attrs.field(factory=set)
    subscriptions: dict[str, Registered] = attrs.field(factory=dict)


def _compiles(expression: str, expression_type: str) -> bool:
    if expression_type.upper() != "SQL92":
        return False  # FilterFactory has no other filter: build returns null
    try:
        compile_filter(expression)
    except FilterParseError:
        return False
    return True


class ConsumerTable:
    """ConsumerManager + ConsumerFilterManager of one broker (see the module docstring)."""

    def __init__(self) -> None:
        self.groups: dict[str, GroupInfo] = {}
        self.filters: dict[tuple[str, str], FilterData] = {}  # (topic, group) -> filter data

    def heartbeat(self, group: str, client_id: str, subscriptions: HeartbeatSubs) -> bool:
        """registerConsumer: True when the group gained a client or a topic, or lost a topic."""
        info = self.groups.setdefault(group, GroupInfo())
        new_client = client_id not in info.clients
        info.clients.add(client_id)
        changed = False
        for topic, (expression, kind, version) in subscriptions.items():
            old = info.subscriptions.get(topic)
            if old is None:
                info.subscriptions[topic] = Registered(expression, kind, version)
                changed = True
            elif version > old.sub_version:
                info.subscriptions[topic] = Registered(expression, kind, version)
        for topic in [t for t in info.subscriptions if t not in subscriptions]:
            del info.subscriptions[topic]
            changed = True
        self._register_filters(group, subscriptions)
        return new_client or changed

    def _register_filters(self, group: str, subscriptions: HeartbeatSubs) -> None:
        for topic, (expression, kind, version) in subscriptions.items():
            if is_tag_type(kind) or not expression:
                continue
            key = (topic, group)
            old = self.filters.get(key)
            if old is not None and version <= old.client_version:
                if version == old.client_version and old.dead:
                    old.dead = False
                continue
            if old is not None and old.expression == expression and old.expression_type == kind:
                old.client_version, old.dead = version, False
            elif _compiles(expression, kind):
                self.filters[key] = FilterData(expression, kind, version)
            elif old is not None:
                del self.filters[key]  # "new expression compile error, remove old, let client report error"
        for (topic, g), data in self.filters.items():
            if g == group and topic not in subscriptions:
                data.dead = True

    def unregister(self, group: str, client_id: str) -> bool:
        """unregisterConsumer: drop the client; the last one takes the group info with it."""
        info = self.groups.get(group)
        if info is None or client_id not in info.clients:
            return False
        info.clients.discard(client_id)
        if not info.clients:
            del self.groups[group]
            for (_, g), data in self.filters.items():
                if g == group:
                    data.dead = True
        return True

    def clear(self) -> None:
        """A broker restart: the consumer tables are in memory."""
        self.groups.clear()
        self.filters.clear()

    def resolve(self, group: str, topic: str, sub_version: int, suggest: str) -> tuple[str, str]:
        """(expression, expression_type) a pull without the subscription flag filters with; ``suggest`` ends the
        remarks of the refusals (``Version.suggest_todo()``)."""
        info = self.groups.get(group)
        if info is None:
            raise BrokerError(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                              f"the consumer's group info not exist{suggest}")
        sub = info.subscriptions.get(topic)
        if sub is None:
            raise BrokerError(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                              f"the consumer's subscription not exist{suggest}")
        if sub.sub_version < sub_version:
            raise BrokerError(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
        if is_tag_type(sub.expression_type):
            return sub.expression, sub.expression_type
        data = self.filters.get((topic, group))
        if data is None:
            raise BrokerError(ResponseCode.FILTER_DATA_NOT_EXIST,
                              "The broker's consumer filter data is not exist!Your expression may be wrong!")
        if data.client_version < sub_version:
            raise BrokerError(ResponseCode.FILTER_DATA_NOT_LATEST, "the consumer's consumer filter data not latest")
        return data.expression, data.expression_type
