"""Topic routes and consumer-group membership: the model's name server.

Theory of operation
-------------------
RocketMQ clients learn a topic's queues from the name server
(``TopicRouteData`` → ``topicSubscribeInfoTable``) and a group's consumer
ids from the broker (``ConsumerManager`` via ``findConsumerIdList``); when
a consumer joins or leaves, the broker tells every member
(``NOTIFY_CONSUMER_IDS_CHANGED``) and each calls ``rebalanceImmediately``.
The ``Broker`` protocol has neither a route query nor a membership service,
so the model keeps both here:

- ``create_topic`` / ``create_group`` call the broker *and* record the route
  (the retry topic ``%RETRY%{group}`` gets ``retry_queue_nums`` queues);
- consumers ``join`` on start and ``leave`` on shutdown or kill; every other
  member is notified (``on_members_changed``), which schedules an
  immediate rebalance on that client's timer queue.

Simplifications: one broker (``broker-a``); routes never change after
creation except by another ``create_topic`` (which replaces the count).
"""

from __future__ import annotations

from typing import Any, Protocol

from rmqspec.model.message import MessageQueue

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"


def retry_topic(group: str) -> str:
    """``MixAll.getRetryTopic``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


class Member(Protocol):
    client_id: str

    def on_members_changed(self) -> None: ...


class UnknownTopic(LookupError):
    """A client asked for the route of a topic nobody created through the directory."""


class Directory:
    """Routes (topic → queue count) and group membership for the model's clients."""

    def __init__(self, broker_name: str = "broker-a") -> None:
        self.broker_name = broker_name
        self._routes: dict[str, int] = {}
        self._members: dict[str, dict[str, Member]] = {}

    # -- routes ----------------------------------------------------------
    def create_topic(self, broker: Any, topic: str, queue_nums: int) -> None:
        """UPDATE_AND_CREATE_TOPIC on ``broker`` and record the route."""
        broker.create_topic(topic, queue_nums)
        self.add_route(topic, queue_nums)

    def create_group(
        self, broker: Any, group: str, retry_max_times: int = 16, retry_queue_nums: int = 1
    ) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP; the retry topic's route is recorded too."""
        broker.create_group(group, retry_max_times, retry_queue_nums)
        self.add_route(retry_topic(group), retry_queue_nums)

    def add_route(self, topic: str, queue_nums: int) -> None:
        if queue_nums <= 0:
            raise ValueError(f"topic {topic!r}: queue_nums must be positive, got {queue_nums}")
        self._routes[topic] = queue_nums

    def has_route(self, topic: str) -> bool:
        return topic in self._routes

    def queue_nums(self, topic: str) -> int:
        try:
            return self._routes[topic]
        except KeyError:
            raise UnknownTopic(
                f"no route for topic {topic!r}: create it with Directory.create_topic"
            ) from None

    def queues(self, topic: str) -> list[MessageQueue]:
        return [MessageQueue(topic, i, self.broker_name) for i in range(self.queue_nums(topic))]

    # -- membership ------------------------------------------------------
    def join(self, group: str, member: Member) -> None:
        members = self._members.setdefault(group, {})
        if member.client_id in members and members[member.client_id] is not member:
            raise ValueError(f"client id {member.client_id!r} already in group {group!r}")
        members[member.client_id] = member
        self._notify(group)

    def leave(self, group: str, member: Member) -> None:
        members = self._members.get(group, {})
        if members.get(member.client_id) is member:
            del members[member.client_id]
            self._notify(group)

    def consumer_ids(self, group: str) -> list[str]:
        return sorted(self._members.get(group, {}))

    def _notify(self, group: str) -> None:
        for member in list(self._members.get(group, {}).values()):
            member.on_members_changed()
