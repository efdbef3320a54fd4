"""Who is connected: producer and consumer groups per connection (from heartbeats).

Theory of operation
-------------------
RocketMQ 4.9.8's ``ProducerManager`` / ``ConsumerManager`` (B/client) as data:

- HEART_BEAT registers its connection under every producer group and
  consumer group of its body (``HeartbeatData``); a consumer group also keeps
  the subscriptions of the latest heartbeat (topic → expression, version).
  ``heartbeat`` returns the consumer groups whose membership or subscription
  set changed (``registerConsumer`` → ``r1 || r2``): the server sends those
  groups' connections NOTIFY_CONSUMER_IDS_CHANGED.
- UNREGISTER_CLIENT and a closed connection remove it; the groups that lost a
  member are returned the same way (``unregisterConsumer``,
  ``doChannelCloseEvent``).
- ``expire`` drops connections without a heartbeat for 120 s
  (``CHANNEL_EXPIRED_TIMEOUT``, ``scanNotActiveChannel``) silently, as the
  real scan does, and names them so the server closes them.
- ``departed`` lists the (group, client id) of every consumer channel removed;
  the server unregisters them from the broker, whose ``model/subscriptions.py``
  table is what a pull without the subscription flag filters with (this
  registry's own subscription copy only decides notifications).
- ``producer_channel(group)`` picks a connection of a producer group round
  robin (``getAvailableChannel``): CHECK_TRANSACTION_STATE goes there.

Connections are opaque hashable objects (the server's ``Connection``).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping
from typing import Any

import attrs

from rmqspec.remoting.bodies import BodyError

CHANNEL_EXPIRED_MS = 120_000  # ConsumerManager / ProducerManager CHANNEL_EXPIRED_TIMEOUT


@attrs.frozen
class Subscription:
    topic: str
    sub_string: str
    sub_version: int
    expression_type: str = "TAG"


@attrs.define
class ChannelInfo:
    client_id: str
    language: str
    version: int
    last_update: int


@attrs.define
class ConsumerGroup:
    channels: dict[Hashable, ChannelInfo] = attrs.field(factory=dict)
    subscriptions: dict[str, Subscription] = attrs.field(factory=dict)
    message_model: str = "CLUSTERING"
    consume_type: str = "CONSUME_PASSIVELY"


@attrs.frozen
class ConsumerData:
    group: str
    subscriptions: tuple[Subscription, ...]
    message_model: str
    consume_type: str


@attrs.frozen
class Heartbeat:
    client_id: str
    producer_groups: tuple[str, ...]
    consumers: tuple[ConsumerData, ...]


def _str(obj: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = obj.get(key, default)
    if not isinstance(value, str):
        raise BodyError(0, f"{where}.{key}: expected a string, got {type(value).__name__}")
    return value


def _list(obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyError(0, f"{where}.{key}: expected a list, got {type(value).__name__}")
    return value


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise BodyError(0, f"{where}: expected an object, got {type(value).__name__}")
    return value


def parse_heartbeat(doc: Mapping[str, Any]) -> Heartbeat:
    """A ``HeartbeatData`` body (already JSON-decoded); ``BodyError`` names the bad field."""
    client_id = _str(doc, "clientID", "heartbeat")
    producers = tuple(
        _str(_obj(p, f"producerDataSet[{i}]"), "groupName", f"producerDataSet[{i}]")
        for i, p in enumerate(_list(doc, "producerDataSet", "heartbeat"))
    )
    consumers = []
    for i, raw in enumerate(_list(doc, "consumerDataSet", "heartbeat")):
        where = f"consumerDataSet[{i}]"
        c = _obj(raw, where)
        subs = []
        for j, rs in enumerate(_list(c, "subscriptionDataSet", where)):
            swhere = f"{where}.subscriptionDataSet[{j}]"
            s = _obj(rs, swhere)
            version = s.get("subVersion", 0)
            if isinstance(version, bool) or not isinstance(version, int):
                raise BodyError(0, f"{swhere}.subVersion: expected an integer, got {version!r}")
            subs.append(Subscription(_str(s, "topic", swhere), _str(s, "subString", swhere, "*"), version,
                                     _str(s, "expressionType", swhere, "TAG")))
        consumers.append(ConsumerData(_str(c, "groupName", where), tuple(subs),
                                      _str(c, "messageModel", where, "CLUSTERING"),
                                      _str(c, "consumeType", where, "CONSUME_PASSIVELY")))
    return Heartbeat(client_id, producers, tuple(consumers))


class ClientRegistry:
    """Producer and consumer groups of the live connections."""

    def __init__(self) -> None:
        self.producers: dict[str, dict[Hashable, ChannelInfo]] = {}
        self.consumers: dict[str, ConsumerGroup] = {}
        self._rr = itertools.count(1)
        # (group, client id) of consumer channels removed since the last ``take_departed``: the server
        # unregisters them from the broker's subscription table (``Broker.unregister_consumer``)
        self.departed: list[tuple[str, str]] = []

    def take_departed(self) -> list[tuple[str, str]]:
        out, self.departed = self.departed, []
        return out

    # -- registration ------------------------------------------------------------------------------

    def heartbeat(self, conn: Hashable, hb: Heartbeat, language: str, version: int, now: int) -> list[str]:
        """Register ``conn``; returns the consumer groups whose members or subscriptions changed."""
        changed = []
        for data in hb.consumers:
            group = self.consumers.setdefault(data.group, ConsumerGroup())
            group.message_model, group.consume_type = data.message_model, data.consume_type
            new_channel = conn not in group.channels
            if new_channel or group.channels[conn].client_id != hb.client_id:
                group.channels[conn] = ChannelInfo(hb.client_id, language, version, now)
            group.channels[conn].last_update = now
            if self._update_subscriptions(group, data.subscriptions) or new_channel:
                changed.append(data.group)
        for name in hb.producer_groups:
            channels = self.producers.setdefault(name, {})
            info = channels.get(conn)
            if info is None or info.client_id != hb.client_id:
                channels[conn] = ChannelInfo(hb.client_id, language, version, now)
            channels[conn].last_update = now
        return changed

    @staticmethod
    def _update_subscriptions(group: ConsumerGroup, subs: tuple[Subscription, ...]) -> bool:
        """ConsumerGroupInfo.updateSubscription: added or removed topics count as a change."""
        updated = False
        for sub in subs:
            old = group.subscriptions.get(sub.topic)
            if old is None:
                group.subscriptions[sub.topic] = sub
                updated = True
            elif sub.sub_version > old.sub_version:
                group.subscriptions[sub.topic] = sub
        wanted = {s.topic for s in subs}
        for topic in [t for t in group.subscriptions if t not in wanted]:
            del group.subscriptions[topic]
            updated = True
        return updated

    def unregister(self, conn: Hashable, producer_group: str | None, consumer_group: str | None) -> list[str]:
        """UNREGISTER_CLIENT; returns the consumer group to notify (if any)."""
        if producer_group is not None:
            self.producers.get(producer_group, {}).pop(conn, None)
        if consumer_group is not None and consumer_group in self.consumers:
            group = self.consumers[consumer_group]
            info = group.channels.pop(conn, None)
            if info is not None:
                self.departed.append((consumer_group, info.client_id))
            if not group.channels:
                del self.consumers[consumer_group]
            return [consumer_group]
        return []

    def closed(self, conn: Hashable) -> list[str]:
        """doChannelCloseEvent: drop ``conn`` everywhere; the consumer groups it left."""
        for channels in self.producers.values():
            channels.pop(conn, None)
        left = []
        for name, group in list(self.consumers.items()):
            info = group.channels.pop(conn, None)
            if info is not None:
                left.append(name)
                self.departed.append((name, info.client_id))
                if not group.channels:
                    del self.consumers[name]
        return left

    def expire(self, now: int, timeout_ms: int = CHANNEL_EXPIRED_MS) -> set[Hashable]:
        """scanNotActiveChannel: forget connections silent for more than ``timeout_ms``; returns them."""
        gone: set[Hashable] = set()
        for channels in self.producers.values():
            for conn, info in list(channels.items()):
                if now - info.last_update > timeout_ms:
                    del channels[conn]
                    gone.add(conn)
        for name, group in list(self.consumers.items()):
            for conn, info in list(group.channels.items()):
                if now - info.last_update > timeout_ms:
                    del group.channels[conn]
                    gone.add(conn)
                    self.departed.append((name, info.client_id))
            if not group.channels:
                del self.consumers[name]
        return gone

    # -- queries -----------------------------------------------------------------------------------

    def producer_channel(self, group: str) -> Hashable | None:
        channels = list(self.producers.get(group, {}))
        if not channels:
            return None
        return channels[next(self._rr) % len(channels)]

    def consumer_channels(self, group: str) -> list[Hashable]:
        found = self.consumers.get(group)
        return list(found.channels) if found else []

    def consumer_ids(self, group: str) -> list[str]:
        found = self.consumers.get(group)
        return [info.client_id for info in found.channels.values()] if found else []

    def consumer_group(self, group: str) -> ConsumerGroup | None:
        return self.consumers.get(group)

    def client_id(self, conn: Hashable) -> str | None:
        for group in self.consumers.values():
            if conn in group.channels:
                return group.channels[conn].client_id
        for channels in self.producers.values():
            if conn in channels:
                return channels[conn].client_id
        return None
