"""Topic and subscription-group metadata: ``config/topics.json`` and ``config/subscriptionGroup.json``.

Theory of operation
-------------------
Follows B/topic/TopicConfigManager and B/subscription/SubscriptionGroupManager
(RocketMQ 4.9.8). Both tables are durable the moment they change: RocketMQ
persists them on every UPDATE_AND_CREATE_* request and on every topic it
creates itself (``createTopicInSendMessageBackMethod`` for ``%RETRY%`` /
``%DLQ%``, the transaction topics, …), so a crash never loses a topic. The
files use RocketMQ's JSON shape (fastjson, written by
``configfiles.write_atomically``: tmp + fsync, previous copy to ``.bak``,
rename)::

    {"topicConfigTable":{"T":{"topicName":"T","readQueueNums":4,"writeQueueNums":4,
      "perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false}}}
    {"subscriptionGroupTable":{"g":{"groupName":"g","consumeEnable":true,
      "consumeFromMinEnable":true,"consumeBroadcastEnable":true,"retryQueueNums":1,
      "retryMaxTimes":16,"brokerId":0,"whichBrokerWhenConsumeSlowly":1,
      "notifyConsumerIdsChangedEnable":true}}}

Loading falls back to ``.bak`` like ``ConfigManager.load``. The queue count of
a topic is ``readQueueNums`` (rmqspec keeps read = write).

``ensure_topic`` creates a topic only when absent and never resizes it
(createTopicInSendMessageBackMethod); ``set_topic`` creates or resizes
(UPDATE_AND_CREATE_TOPIC).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from rmqspec.impl.configfiles import ConfigFileError, dump_fastjson, load_with_backup, write_atomically

TOPICS_FILE = "topics.json"
GROUPS_FILE = "subscriptionGroup.json"
PERM_READ_WRITE = 6  # PermName.PERM_READ | PERM_WRITE


@attrs.frozen
class GroupConfig:
    retry_max_times: int = 16
    retry_queue_nums: int = 1


def _int(value: Any, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ConfigFileError(None, 0, f"{what}: {value!r} is not an integer")


def decode_topics(doc: Any) -> dict[str, int]:
    table = doc.get("topicConfigTable", {}) if isinstance(doc, dict) else None
    if not isinstance(table, dict):
        raise ConfigFileError(None, 0, "topicConfigTable is not an object")
    out: dict[str, int] = {}
    for name, cfg in table.items():
        if not isinstance(cfg, dict):
            raise ConfigFileError(None, 0, f"topicConfigTable[{name!r}] is not an object")
        out[str(name)] = _int(cfg.get("readQueueNums"), f"{name}.readQueueNums")
    return out


def decode_groups(doc: Any) -> dict[str, GroupConfig]:
    table = doc.get("subscriptionGroupTable", {}) if isinstance(doc, dict) else None
    if not isinstance(table, dict):
        raise ConfigFileError(None, 0, "subscriptionGroupTable is not an object")
    out: dict[str, GroupConfig] = {}
    for name, cfg in table.items():
        if not isinstance(cfg, dict):
            raise ConfigFileError(None, 0, f"subscriptionGroupTable[{name!r}] is not an object")
        out[str(name)] = GroupConfig(
            _int(cfg.get("retryMaxTimes", 16), f"{name}.retryMaxTimes"),
            _int(cfg.get("retryQueueNums", 1), f"{name}.retryQueueNums"),
        )
    return out


def encode_topics(topics: dict[str, int]) -> str:
    return dump_fastjson(
        {
            "topicConfigTable": {
                name: {
                    "topicName": name,
                    "readQueueNums": nums,
                    "writeQueueNums": nums,
                    "perm": PERM_READ_WRITE,
                    "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": 0,
                    "order": False,
                }
                for name, nums in sorted(topics.items())
            }
        }
    )


def encode_groups(groups: dict[str, GroupConfig]) -> str:
    return dump_fastjson(
        {
            "subscriptionGroupTable": {
                name: {
                    "groupName": name,
                    "consumeEnable": True,
                    "consumeFromMinEnable": True,
                    "consumeBroadcastEnable": True,
                    "retryQueueNums": cfg.retry_queue_nums,
                    "retryMaxTimes": cfg.retry_max_times,
                    "brokerId": 0,
                    "whichBrokerWhenConsumeSlowly": 1,
                    "notifyConsumerIdsChangedEnable": True,
                }
                for name, cfg in sorted(groups.items())
            }
        }
    )


class Metadata:
    """The topic table (topic → queue nums) and the group table, persisted on change."""

    def __init__(self, config_dir: Path) -> None:
        self.topics_path = config_dir / TOPICS_FILE
        self.groups_path = config_dir / GROUPS_FILE
        self.topics: dict[str, int] = load_with_backup(self.topics_path, decode_topics, dict).table
        self.groups: dict[str, GroupConfig] = load_with_backup(
            self.groups_path, decode_groups, dict
        ).table

    def has_topic(self, topic: str) -> bool:
        return topic in self.topics

    def queue_nums(self, topic: str, default: int = 1) -> int:
        return self.topics.get(topic, default)

    def set_topic(self, topic: str, queue_nums: int) -> None:
        if self.topics.get(topic) != queue_nums:
            self.topics[topic] = queue_nums
            write_atomically(self.topics_path, encode_topics(self.topics))

    def ensure_topic(self, topic: str, queue_nums: int) -> None:
        if topic not in self.topics:
            self.set_topic(topic, queue_nums)

    def set_group(self, group: str, config: GroupConfig) -> None:
        if self.groups.get(group) != config:
            self.groups[group] = config
            write_atomically(self.groups_path, encode_groups(self.groups))
