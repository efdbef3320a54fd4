"""rmqspec serve: heartbeated subscriptions and pulls without the subscription flag over the wire.

``tests/heartbeat_groups.py`` through ``RemoteBroker`` (one connection per client, HEART_BEAT 34 with the
Java client's SubscriptionData, PULL_MESSAGE 11 with sysFlag 0, UNREGISTER_CLIENT 35) against a served
MmapBroker with ``enablePropertyFilter=true``: every step answers as the in-process ModelBroker does
(the same scenario the interop test runs on real 4.9.8). Closing a member's connection takes it out of
the broker's table as UNREGISTER_CLIENT does.
"""

from __future__ import annotations

import time

import attrs
import pytest

from rmqspec.model import ManualClock, MessageQueue, ModelBroker
from rmqspec.model.clock import WallClock
from rmqspec.model.results import BrokerError, ResponseCode
from rmqspec.remoting.adapter import RemoteBroker
from tests.heartbeat_groups import CASES, STALE_FILTER, run, run_stale_filter
from tests.remoting.conftest import TEST_CONFIG

CONFIG = attrs.evolve(TEST_CONFIG, enable_property_filter=True)


@pytest.fixture
def remote(serve):
    s = serve(config=CONFIG)
    b = RemoteBroker(s.server.namesrv_addr, WallClock())
    yield b
    b.close()


def test_every_case_answers_as_the_model(remote: RemoteBroker) -> None:
    for name in [*sorted(CASES), STALE_FILTER]:
        suffix = name.replace("-", "_")
        scenario = run_stale_filter if name == STALE_FILTER else (lambda b, t, g, n=name: run(b, n, t, g))
        wire = scenario(remote, f"S_{suffix}", f"S_G_{suffix}")
        model = scenario(ModelBroker(ManualClock(1_700_000_000_000), CONFIG), f"S_{suffix}", f"S_G_{suffix}")
        assert wire == model, name


def test_a_closed_member_connection_leaves_the_group(remote: RemoteBroker) -> None:
    remote.create_topic("T", 1)
    remote.heartbeat("G", "127.0.0.1@only", {"T": ("*", "TAG", 5)})
    assert remote.pull("G", MessageQueue("T", 0), 0, 32, None, "TAG", 5).status.name == "NO_NEW_MSG"
    remote._members["127.0.0.1@only"].close()  # the client process goes away without unregistering
    for _ in range(200):
        try:
            remote.pull("G", MessageQueue("T", 0), 0, 32, None, "TAG", 5)
        except BrokerError as exc:
            assert exc.code is ResponseCode.SUBSCRIPTION_NOT_EXIST
            assert exc.remark.startswith("the consumer's group info not exist")
            return
        time.sleep(0.01)
    raise AssertionError("the served broker kept the subscription of a closed connection")
