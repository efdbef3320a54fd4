"""Fixtures for the server tests: an ``RmqServer`` on ephemeral 127.0.0.1 ports in a background thread."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from rmqspec.impl import factory as mmap_factory
from rmqspec.model.config import BrokerConfig
from rmqspec.remoting import bodies
from rmqspec.remoting.context import ServeSettings
from rmqspec.remoting.server import RmqServer, ServerThread
from tests.remoting.wire_client import WireClient

SHORT_DELAYS = "1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s"
TEST_CONFIG = BrokerConfig(message_delay_level=SHORT_DELAYS, commitlog_file_size=1 << 20)


@attrs.define
class Served:
    """A running server and helpers to talk to it."""

    server: RmqServer
    thread: ServerThread
    root: Path
    clients: list[WireClient] = attrs.field(factory=list)

    @property
    def broker(self) -> Any:
        assert self.server.ctx is not None
        return self.server.ctx.broker

    def namesrv(self) -> WireClient:
        c = WireClient(self.server.namesrv_addr)
        self.clients.append(c)
        return c

    def client(self) -> WireClient:
        c = WireClient(self.server.broker_addr)
        self.clients.append(c)
        return c

    def on_loop(self, fn: Callable[[], Any]) -> Any:
        return self.thread.call(fn)

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.thread.stop()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(config: BrokerConfig = TEST_CONFIG, factory: Callable[..., Any] = mmap_factory,
              trace: bool = False, **settings: Any) -> Served:
        root = tmp_path / f"store{len(started)}"
        server = RmqServer(factory, config, ServeSettings(namesrv_port=0, port=0, **settings), root,
                           trace_dir=tmp_path / f"trace{len(started)}" if trace else None)
        served = Served(server, ServerThread(server).start(), root)
        started.append(served)
        return served

    yield start
    for s in started:
        s.stop()


# ---------------------------------------------------------------------------------------------
# request builders the Java 4.9.8 client's way


def lock_body(client: str, group: str = "GL", queue: int = 0, topic: str = "TL") -> bytes:
    """A LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body for one queue of broker-a."""
    return bodies.dumps({"clientId": client, "consumerGroup": group,
                         "mqSet": [{"brokerName": "broker-a", "queueId": queue, "topic": topic}]})


def heartbeat(client_id: str, consumers: dict[str, list[str]] | None = None, producers: tuple[str, ...] = (),
              sub_version: int = 1, expression: str = "*") -> bytes:
    """A HeartbeatData body: consumers maps group -> subscribed topics."""
    data = []
    for group, topics in (consumers or {}).items():
        data.append({"consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                     "groupName": group, "messageModel": "CLUSTERING", "unitMode": False,
                     "subscriptionDataSet": [{"classFilterMode": False, "codeSet": [], "expressionType": "TAG",
                                              "subString": expression, "subVersion": sub_version, "tagsSet": [],
                                              "topic": t} for t in topics]})
    return json.dumps({"clientID": client_id, "consumerDataSet": data,
                       "producerDataSet": [{"groupName": g} for g in producers]}).encode()


_uniq = iter(range(1, 1 << 30))


def uniq_key() -> str:
    return f"7F000001{next(_uniq):024X}"


def props(**kw: str) -> str:
    return "\x02".join(f"{k}\x01{v}" for k, v in kw.items())


def send_ext(topic: str, queue_id: int = 0, *, group: str = "PG", properties: str | None = None,
             sys_flag: int = 0, **extra: str) -> dict[str, str]:
    """SEND_MESSAGE_V2 ext fields (one-letter names) as the Java client writes them."""
    if properties is None:
        properties = props(UNIQ_KEY=uniq_key(), WAIT="true", TAGS="tagA")
    ext = {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": str(sys_flag),
           "g": str(int(time.time() * 1000)), "h": "0", "i": properties, "j": "0", "k": "false", "m": "false",
           "n": "broker-a"}
    ext.update(extra)
    return ext


def pull_ext(group: str, topic: str, queue_id: int = 0, offset: int = 0, *, sys_flag: int = 0,
             suspend_ms: int = 15000, sub_version: int = 1, commit_offset: int = 0, **extra: str) -> dict[str, str]:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": "32", "sysFlag": str(sys_flag), "commitOffset": str(commit_offset),
           "suspendTimeoutMillis": str(suspend_ms), "subVersion": str(sub_version), "expressionType": "TAG"}
    ext.update(extra)
    return ext


def create_topic_ext(topic: str, queues: int) -> dict[str, str]:
    return {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
            "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
