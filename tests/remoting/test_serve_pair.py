"""rmqspec serve --ha-role: a master and its slave (``MmapHaPair``) on two broker ports, as 4.9.8's pair answers
(docs/ha-facts.md): the route names both, sends to the master replicate, sends to the slave are refused."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqspec.impl import factory as mmap_factory
from rmqspec.impl.codec import decode_record
from rmqspec.model.ha import BrokerRole
from rmqspec.model.queues import SLAVE_PUT_REMARK
from rmqspec.remoting.bodies import decode_messages
from rmqspec.remoting.context import ServeSettings
from rmqspec.remoting.pair_views import SYNC_FIRST_MS
from rmqspec.remoting.records import BatchItem, encode_batch
from rmqspec.remoting.server import RmqServer, ServerThread
from tests.remoting.conftest import TEST_CONFIG, create_topic_ext, props, pull_ext, send_ext, uniq_key
from tests.remoting.wire_client import WireClient

SUBSCRIPTION = 4  # PULL_FLAG_SUBSCRIPTION: filter with the request's expression ("*")


class Pair:
    def __init__(self, root: Path, role: BrokerRole, tick_ms: int = 100) -> None:
        self.root = root
        self.server = RmqServer(mmap_factory, TEST_CONFIG,
                                ServeSettings(namesrv_port=0, port=0, slave_port=0, tick_ms=tick_ms), root,
                                ha_role=role)
        self.thread = ServerThread(self.server).start()
        self.clients: list[WireClient] = []

    def _client(self, addr: str | None) -> WireClient:
        assert addr is not None
        c = WireClient(addr)
        self.clients.append(c)
        return c

    def master(self) -> WireClient:
        return self._client(self.server.broker_addr)

    def slave(self) -> WireClient:
        return self._client(self.server.slave_addr)

    def namesrv(self) -> WireClient:
        return self._client(self.server.namesrv_addr)

    def on_loop(self, fn: Callable[[], Any]) -> Any:
        return self.thread.call(fn)

    @property
    def pair(self) -> Any:
        assert self.server.ctx is not None
        return self.server.ctx.broker.pair

    def sync_metadata(self) -> None:
        assert self.on_loop(self.pair.sync_metadata)

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.thread.stop()


@pytest.fixture
def serve_pair(tmp_path: Path) -> Iterator[Callable[..., Pair]]:
    started: list[Pair] = []

    def start(role: BrokerRole = BrokerRole.SYNC_MASTER, **kw: Any) -> Pair:
        p = Pair(tmp_path / f"pair{len(started)}", role, **kw)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


def _until(check: Callable[[], bool], timeout: float = 5.0) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, "not within the timeout"
        time.sleep(0.02)
    return time.monotonic() - started


def _send(c: WireClient, topic: str = "T", body: bytes = b"m") -> Any:
    return c.call(310, send_ext(topic, properties=props(UNIQ_KEY=uniq_key(), WAIT="true", TAGS="a")), body)


@pytest.mark.parametrize("role", [BrokerRole.SYNC_MASTER, BrokerRole.ASYNC_MASTER])
def test_the_route_and_the_cluster_name_the_master_as_0_and_the_slave_as_1(serve_pair, role) -> None:
    p = serve_pair(role)
    assert p.master().call(17, create_topic_ext("T", 2)).code == 0
    ns = p.namesrv()
    route = ns.json(ns.call(105, {"topic": "T"}))
    addrs = {"0": p.server.broker_addr, "1": p.server.slave_addr}
    assert route["brokerDatas"] == [{"brokerAddrs": addrs, "brokerName": "broker-a", "cluster": "DefaultCluster"}]
    assert route["queueDatas"] == [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 2, "topicSysFlag": 0,
                                    "writeQueueNums": 2}]  # the master's queue data only (registerBroker: id 0)
    cluster = ns.call(106)
    assert f'"brokerAddrs":{{0:"{addrs["0"]}",1:"{addrs["1"]}"}}' in cluster.body.decode()
    assert p.server.slave_addr != p.server.broker_addr


def test_a_sync_send_is_send_ok_and_then_readable_from_the_slave_with_its_msg_id(serve_pair) -> None:
    p = serve_pair(BrokerRole.SYNC_MASTER, tick_ms=60_000)  # no tick: the send itself replicates
    m, s = p.master(), p.slave()
    assert m.call(17, create_topic_ext("T", 1)).code == 0
    sent = [_send(m, body=b"m%d" % i) for i in range(3)]
    assert [r.code for r in sent] == [0, 0, 0]
    assert p.on_loop(lambda: p.pair.slave_records) == 3  # replicated inside the send, before its answer
    p.sync_metadata()
    r = s.call(11, pull_ext("G", "T", sys_flag=SUBSCRIPTION))
    assert (r.code, r.remark, r.ext_fields["suggestWhichBrokerId"]) == (0, "FOUND", "0")
    got = decode_messages(r.body)
    assert [g.body for g in got] == [b"m0", b"m1", b"m2"]
    assert [g.msg_id for g in got] == [x.ext_fields["msgId"] for x in sent]  # the master's store host and offsets
    off = int(sent[1].ext_fields["msgId"][16:], 16)
    rec = decode_record(s.call(33, {"offset": str(off)}).body, base_offset=off)  # VIEW_MESSAGE_BY_ID on the slave
    assert (rec.body, rec.commitlog_offset) == (b"m1", got[1].commitlog_offset)


def test_the_slave_learns_topics_from_slave_synchronize_on_the_tick(serve_pair) -> None:
    p = serve_pair(BrokerRole.SYNC_MASTER, tick_ms=50)
    m, s = p.master(), p.slave()
    assert m.call(17, create_topic_ext("TS", 1)).code == 0
    assert _send(m, "TS").code == 0
    assert s.call(11, pull_ext("G", "TS", sys_flag=SUBSCRIPTION)).code == 17  # not synced yet: TOPIC_NOT_EXIST
    waited = _until(lambda: s.call(11, pull_ext("G", "TS", sys_flag=SUBSCRIPTION)).code == 0,
                    timeout=SYNC_FIRST_MS / 1000 + 3)
    assert waited > 0.5  # the first syncAll comes 3 s after the start, not at once


def test_a_send_to_the_slave_is_refused_and_writes_nothing(serve_pair) -> None:
    p = serve_pair(BrokerRole.SYNC_MASTER)
    m, s = p.master(), p.slave()
    assert m.call(17, create_topic_ext("T", 1)).code == 0
    assert _send(m).code == 0
    p.sync_metadata()
    before = p.on_loop(lambda: (p.pair.slave_records, p.pair.master.commitlog_record_count()))
    r = _send(s)
    assert (r.code, r.remark) == (14, SLAVE_PUT_REMARK)  # SERVICE_NOT_AVAILABLE, checkStoreStatus's remark
    assert r.remark.startswith("service not available now.")
    assert p.on_loop(lambda: (p.pair.slave_records, p.pair.master.commitlog_record_count())) == before == (1, 1)
    r = s.call(11, pull_ext("G", "T", sys_flag=SUBSCRIPTION))
    assert len(decode_messages(r.body)) == 1
    batch = encode_batch([BatchItem(0, b"b%d" % i, {"UNIQ_KEY": uniq_key()}) for i in range(2)])
    r = s.call(320, send_ext("T"), batch)  # SEND_BATCH_MESSAGE: the store refuses it too
    assert (r.code, r.remark) == (14, SLAVE_PUT_REMARK)
    assert p.on_loop(lambda: p.pair.slave_records) == 1
    r = m.call(320, send_ext("T"), batch)  # on the master (straight to its store), replicated by the tick
    assert r.code == 0
    _until(lambda: p.on_loop(lambda: p.pair.slave_records) == 3)


def test_under_async_master_the_slave_catches_up_on_the_tick(serve_pair) -> None:
    p = serve_pair(BrokerRole.ASYNC_MASTER, tick_ms=50)
    m = p.master()
    assert m.call(17, create_topic_ext("T", 1)).code == 0
    assert [_send(m, body=b"a%d" % i).code for i in range(5)] == [0] * 5
    assert _until(lambda: p.on_loop(lambda: p.pair.slave_records) == 5, timeout=2.0) < 2.0


def test_a_held_pull_on_the_slave_is_answered_when_replication_brings_the_message(serve_pair) -> None:
    p = serve_pair(BrokerRole.ASYNC_MASTER, tick_ms=50)
    m, s = p.master(), p.slave()
    assert m.call(17, create_topic_ext("T", 1)).code == 0
    p.sync_metadata()
    sent: list[int] = []
    later = threading.Timer(0.3, lambda: sent.append(_send(m, body=b"late").code))
    later.start()
    started = time.monotonic()
    r = s.call(11, pull_ext("G", "T", sys_flag=SUBSCRIPTION | 2, suspend_ms=8000), timeout=10)  # suspend: held
    later.join()
    assert sent == [0] and time.monotonic() - started < 4  # woken by the replicated message, not the deadline
    assert r.code == 0 and [g.body for g in decode_messages(r.body)] == [b"late"]


def test_the_slave_answers_past_its_end_with_retry_immediately_and_keeps_the_offset(serve_pair) -> None:
    p = serve_pair(BrokerRole.SYNC_MASTER)
    m, s = p.master(), p.slave()
    assert m.call(17, create_topic_ext("T", 1)).code == 0
    assert _send(m).code == 0
    p.sync_metadata()
    r = s.call(11, pull_ext("G", "T", offset=5, sys_flag=SUBSCRIPTION))
    assert (r.code, r.remark, r.ext_fields["nextBeginOffset"], r.ext_fields["maxOffset"]) == \
        (20, "OFFSET_OVERFLOW_BADLY", "5", "1")
    assert s.call(11, pull_ext("G", "T", offset=1, sys_flag=SUBSCRIPTION)).code == 19  # at its end: as a master
    r = m.call(11, pull_ext("G", "T", offset=5, sys_flag=SUBSCRIPTION))
    assert (r.code, r.remark, r.ext_fields["nextBeginOffset"]) == (21, "OFFSET_OVERFLOW_BADLY", "1")  # moved


def test_consumer_offsets_are_committed_and_queried_on_the_slave(serve_pair) -> None:
    p = serve_pair(BrokerRole.SYNC_MASTER)
    m, s = p.master(), p.slave()
    assert m.call(17, create_topic_ext("T", 1)).code == 0
    assert _send(m).code == 0
    p.sync_metadata()
    commit = {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "1"}
    assert s.call(15, commit).code == 0
    query = {"consumerGroup": "G", "topic": "T", "queueId": "0"}
    assert s.call(14, query).ext_fields["offset"] == "1"
    assert m.call(14, query).ext_fields["offset"] == "0"  # the master never saw the commit (min offset 0)
    r = s.call(11, pull_ext("G", "T", sys_flag=SUBSCRIPTION | 1, commit_offset=0))  # commit bit: not stored
    assert r.code == 0 and s.call(14, query).ext_fields["offset"] == "1"
    r = s.call(11, {**pull_ext("G", "T"), "sysFlag": "x"})  # a bad sysFlag: SYSTEM_ERROR, as a master answers
    assert r.code == 1


def test_a_sync_send_with_the_link_cut_is_flush_slave_timeout_and_stored_on_the_master(serve_pair) -> None:
    """No wire verb cuts the link (a real pair has none either): the test cuts the served pair on the server's loop.
    4.9.8 answers 12 after slaveTimeout (3 s); the served pair at once (the wall clock is not moved: HA-17)."""
    p = serve_pair(BrokerRole.SYNC_MASTER, tick_ms=60_000)
    m = p.master()
    assert m.call(17, create_topic_ext("T", 1)).code == 0
    p.on_loop(p.pair.cut)
    started = time.monotonic()
    r = _send(m, body=b"cut")
    assert (r.code, r.remark, time.monotonic() - started < 1) == (12, None, True)  # FLUSH_SLAVE_TIMEOUT
    assert (r.ext_fields["queueOffset"], r.ext_fields["msgId"][16:]) == ("0", f"{0:016X}")  # sendOK's header
    assert p.on_loop(lambda: (p.pair.master.commitlog_record_count(), p.pair.slave_records)) == (1, 0)
    p.on_loop(p.pair.heal)
    assert _send(m, body=b"healed").code == 0
    assert p.on_loop(lambda: p.pair.slave_records) == 2  # the send replicated the cut one too
