"""``rmqspec serve``: QUERY_ASSIGNMENT 400 and SET_MESSAGE_REQUEST_MODE 401 (``remoting/handlers_assign.py``),
against the mmap broker and the model broker, under the rocketmq-5.2 profile (4.9: not supported).

What is checked is what 5.3.3's QueryAssignmentProcessor answers (read from its source; the 5.3.3 Java
client's pop consumer against serve and real 5.3.3 / 5.5.1 in ``tests/interop/test_serve_java_pop.py``):
the refusals and their remarks, PULL by default with the strategy's allocation, POP with every queue as
queue id -1 (popShareQueueNum -1) or with the following clients' queues (popShareQueueNum 1), no assignment
(``{}``) for an unknown topic, an unknown strategy or a group without clients, and the modes persisted in
``config/messageRequestMode.json`` and read back on a restart.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from rmqspec.impl import factory as mmap_factory
from rmqspec.model.config import default_config
from rmqspec.model.message import MessageQueue
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.remoting import bodies
from rmqspec.remoting.context import ServeSettings
from rmqspec.remoting.handlers_assign import allocate_for_pop
from rmqspec.remoting.server import RmqServer, ServerThread
from tests.remoting.conftest import SHORT_DELAYS, create_topic_ext, heartbeat
from tests.remoting.wire_client import WireClient

V5 = attrs.evolve(default_config("rocketmq-5.2"), message_delay_level=SHORT_DELAYS, commitlog_file_size=1 << 20)
V49 = attrs.evolve(default_config("rocketmq-4.9"), message_delay_level=SHORT_DELAYS, commitlog_file_size=1 << 20)
FACTORIES = {"mmap": mmap_factory, "model": model_factory}


@pytest.fixture(params=sorted(FACTORIES))
def factory(request: pytest.FixtureRequest) -> Callable[..., Any]:
    return FACTORIES[request.param]


def _mode(topic: str, group: str, mode: str, share: int = 0) -> bytes:
    return bodies.dumps({"consumerGroup": group, "mode": mode, "popShareQueueNum": share, "topic": topic})


def _query(c: Any, topic: str, group: str, client: str, strategy: str = "AVG") -> Any:
    r = c.call(400, body=bodies.dumps({"clientId": client, "consumerGroup": group, "messageModel": "CLUSTERING",
                                       "strategyName": strategy, "topic": topic}))
    assert (r.code, r.remark) == (0, None)
    doc = json.loads(r.body)
    if "messageQueueAssignments" not in doc:
        return None
    return sorted((a["messageQueue"]["queueId"], a["mode"]) for a in doc["messageQueueAssignments"])


def test_a_4_9_profile_has_neither_code(serve, factory) -> None:
    c = serve(V49, factory).client()
    for code in (400, 401):
        r = c.call(code, body=b"{}")
        assert (r.code, r.remark) == (3, f" request type {code} not supported")


def test_set_mode_refusals_and_success(serve, factory) -> None:
    s = serve(V5, factory)
    c = s.client()
    r = c.call(401, body=_mode("%RETRY%G", "G", "POP"))
    assert (r.code, r.remark) == (16, "retry topic is not allowed to set mode")
    r = c.call(401, body=_mode("NOPE", "G", "POP"))
    assert (r.code, r.remark) == (17, "topic[NOPE] not exist")
    c.call(17, create_topic_ext("T", 4))
    r = c.call(401, body=_mode("T", "G", "POP", -1))
    assert (r.code, r.remark) == (0, None)
    saved = json.loads((s.root / "config" / "messageRequestMode.json").read_text())
    assert saved == {"messageRequestModeMap": {"T": {"G": {"consumerGroup": "G", "mode": "POP",
                                                           "popShareQueueNum": -1, "topic": "T"}}}}


def test_pull_by_default_allocated_by_the_strategy(serve, factory) -> None:
    s = serve(V5, factory)
    c = s.client()
    c.call(17, create_topic_ext("T", 4))
    for x in "ab":  # one connection per client, as the registry keeps them
        s.client().call(34, body=heartbeat(f"127.0.0.1@{x}", {"G": ["T"]}))
    assert _query(c, "T", "G", "127.0.0.1@a") == [(0, "PULL"), (1, "PULL")]
    assert _query(c, "T", "G", "127.0.0.1@b") == [(2, "PULL"), (3, "PULL")]
    assert _query(c, "T", "G", "127.0.0.1@a", "AVG_BY_CIRCLE") == [(0, "PULL"), (2, "PULL")]
    assert _query(c, "T", "G", "127.0.0.1@a", "NO_SUCH") is None
    assert _query(c, "NOPE", "G", "127.0.0.1@a") is None
    assert _query(c, "T", "NO_CLIENTS", "127.0.0.1@a") is None


def test_pop_every_queue_as_minus_one_and_read_back_after_a_restart(serve, factory) -> None:
    s = serve(V5, factory)
    c = s.client()
    c.call(17, create_topic_ext("T", 4))
    c.call(34, body=heartbeat("127.0.0.1@a", {"G": ["T", "%RETRY%G"]}))
    assert c.call(401, body=_mode("T", "G", "POP", -1)).code == 0
    assert _query(c, "T", "G", "127.0.0.1@a") == [(-1, "POP")]
    assert _query(c, "%RETRY%G", "G", "127.0.0.1@a") in (None, [(0, "PULL")])  # a retry topic: PULL
    s.stop()
    thread = ServerThread(RmqServer(factory, V5, ServeSettings(namesrv_port=0, port=0), s.root)).start()
    try:  # serve again on the same store: the mode is read back from config/messageRequestMode.json
        c2 = WireClient(thread.server.broker_addr)
        c2.call(17, create_topic_ext("T", 4))
        c2.call(34, body=heartbeat("127.0.0.1@a", {"G": ["T"]}))
        assert _query(c2, "T", "G", "127.0.0.1@a") == [(-1, "POP")]
        c2.close()
    finally:
        thread.stop()


def test_pop_share_queue_num_adds_the_following_clients_queues(serve, factory) -> None:
    s = serve(V5, factory)
    c = s.client()
    c.call(17, create_topic_ext("T", 4))
    for x in "abc":
        s.client().call(34, body=heartbeat(f"127.0.0.1@{x}", {"G": ["T"]}))
    assert c.call(401, body=_mode("T", "G", "POP", 1)).code == 0
    # AVG over 4 queues and 3 clients: a [0, 1], b [2], c [3]; each also gets the next client's
    assert _query(c, "T", "G", "127.0.0.1@a") == [(0, "POP"), (1, "POP"), (2, "POP")]
    assert _query(c, "T", "G", "127.0.0.1@c") == [(0, "POP"), (1, "POP"), (3, "POP")]


def test_allocate_for_pop_with_more_clients_than_queues() -> None:
    mqs = [MessageQueue("T", q) for q in range(2)]
    cids = ["a", "b", "c", "d"]
    assert allocate_for_pop("AVG", "c", mqs, cids, 1) == [MessageQueue("T", 0)]
    assert allocate_for_pop("AVG", "d", mqs, cids, 1) == [MessageQueue("T", 1)]
    assert allocate_for_pop("AVG", "x", mqs, cids, 1) == []
    assert allocate_for_pop("AVG", "a", mqs, cids, 3) == [MessageQueue("T", -1), MessageQueue("T", -1)]
