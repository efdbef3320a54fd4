"""RemoteBroker's orchestration over real loopback sockets; the peer answers each request code with the
response the real 4.9.8 broker / name server gave to that code in the capture.

What the real broker *does* with these requests is checked in tests/interop/test_remote_adapter_real.py.
"""

from __future__ import annotations

import threading
import time

import attrs
import pytest

from rmqspec.cli.main import main
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.protocol import Broker, Capability
from rmqspec.model.results import BrokerError, ResponseCode, SendStatus, TxnAction
from rmqspec.properties.adapters import FactoryError, load_factory
from rmqspec.remoting import bodies
from rmqspec.remoting import client_ops as ops
from rmqspec.remoting.adapter import CrashCommandError, RemoteBroker, RemoteSetupError, locate_broker, remote_factory
from rmqspec.remoting.client import ConnectionLost, RemotingClient
from rmqspec.remoting.codes import RequestCode
from rmqspec.remoting.command import RemotingCommand
from tests.remoting.capture_pairs import broker_requests, check_body, exchanges
from tests.remoting.peer import Peer, PeerConn, closed_port


def _first_answers() -> dict[int, RemotingCommand]:
    out: dict[int, RemotingCommand] = {}
    for e in exchanges():
        if e.response is not None and e.response.code == 0 and e.request.serialize_type == 0:
            out.setdefault(e.request.code, e.response)
    return out


ANSWERS = _first_answers()


class CapturedBroker(Peer):
    """Name server and broker on one loopback port, answering by request code with captured responses."""

    def __init__(self, cluster: dict[str, dict[int, str]] | None = None) -> None:
        self.cluster = cluster
        self.silent: set[int] = set()
        self.overrides: dict[int, RemotingCommand] = {}  # answer these codes with another captured response
        self.close_on: set[int] = set()  # close the connection instead of answering these codes (once)
        self.busy: dict[int, int] = {}  # answer this code SYSTEM_BUSY this many times first (flow control)
        # GET_BROKER_RUNTIME_INFO (the adapter's dispatch barrier): dispatchBehindBytes answered in turn,
        # then 0 (the capture has no such exchange: the body is the KVTable 4.9.8's AdminBrokerProcessor
        # writes, {"table": {...}})
        self.behind: list[int] = []
        # ... and remainHowManyDataToFlush in turn, then "0 B" (5.3.0+ under SYNC_FLUSH dispatches only flushed bytes)
        self.unflushed: list[str] = []
        # GET_MAX_OFFSET (a oneway send's watch): these offsets in turn, then the last again (the capture
        # has no such exchange: the answer is extFields {"offset": ...}, as 4.9.8's AdminBrokerProcessor writes)
        self.max_offsets: list[int] = []
        super().__init__(self._answer)
        if self.cluster is None:
            self.cluster = {"broker-a": {0: self.address}}

    def _answer(self, conn: PeerConn, cmd: RemotingCommand) -> None:
        if cmd.code in self.close_on:
            self.close_on.discard(cmd.code)
            conn.close()
            return
        if cmd.is_oneway or cmd.code in self.silent:
            return
        if self.busy.get(cmd.code, 0) > 0:
            self.busy[cmd.code] -= 1
            conn.send(attrs.evolve(ANSWERS[RequestCode.SEND_MESSAGE_V2], opaque=cmd.opaque, code=2, ext_fields={},
                                   remark="[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
                                          "period in queue: 204ms, size of queue: 3"))
            return
        if cmd.code == RequestCode.GET_BROKER_CLUSTER_INFO:
            table = {name: {"brokerAddrs": addrs, "brokerName": name, "cluster": "DefaultCluster"}
                     for name, addrs in (self.cluster or {}).items()}
            body = bodies.dumps({"brokerAddrTable": table, "clusterAddrTable": {"DefaultCluster": list(table)}},
                                bare_int_keys=True)
            conn.send(attrs.evolve(ANSWERS[cmd.code], opaque=cmd.opaque, body=body))
        elif cmd.code == RequestCode.GET_BROKER_RUNTIME_INFO and cmd.code not in self.overrides:
            behind = self.behind.pop(0) if self.behind else 0
            unflushed = self.unflushed.pop(0) if self.unflushed else "0 B"
            body = bodies.dumps({"table": {"dispatchBehindBytes": str(behind), "brokerVersion": "413",
                                           "remainHowManyDataToFlush": unflushed}})
            conn.send(attrs.evolve(ANSWERS[RequestCode.HEART_BEAT], opaque=cmd.opaque, body=body, ext_fields={}))
        elif cmd.code == RequestCode.GET_MAX_OFFSET and self.max_offsets:
            offset = self.max_offsets.pop(0) if len(self.max_offsets) > 1 else self.max_offsets[0]
            conn.send(attrs.evolve(ANSWERS[RequestCode.HEART_BEAT], opaque=cmd.opaque, body=b"",
                                   ext_fields={"offset": str(offset)}))
        elif cmd.code in self.overrides or cmd.code in ANSWERS:
            conn.send(attrs.evolve(self.overrides.get(cmd.code) or ANSWERS[cmd.code], opaque=cmd.opaque))

    def requests(self, code: int | None = None) -> list[RemotingCommand]:
        return [c for conn in self.conns for c in conn.received if code is None or c.code == code]

    def wait_for(self, code: int, timeout_s: float = 3) -> RemotingCommand:
        deadline = time.monotonic() + timeout_s
        while not self.requests(code) and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.requests(code)[-1]

    def broker_side(self, count: int, timeout_s: float = 3) -> list[RemotingCommand]:
        """What the broker connections received, waiting until there are ``count`` requests (the
        dispatch barrier's GET_BROKER_RUNTIME_INFO not counted: ``requests(28)``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            got = [c for conn in self.conns if conn.received and conn.received[0].code == RequestCode.HEART_BEAT
                   for c in conn.received if c.code != RequestCode.GET_BROKER_RUNTIME_INFO]
            if len(got) >= count or time.monotonic() > deadline:
                return got
            time.sleep(0.01)


def _route_queue_nums() -> int:
    route = bodies.loads_object(ANSWERS[RequestCode.GET_ROUTEINFO_BY_TOPIC].body, "route")
    return route["queueDatas"][0]["writeQueueNums"]


def test_operations_map_to_requests_and_the_heartbeat_names_the_groups() -> None:
    clock = ManualClock(1_795_000_000_000)
    with CapturedBroker() as peer:
        broker = remote_factory(peer.address)(clock, BrokerConfig(), None)
        assert isinstance(broker, Broker) and broker.capabilities == frozenset()
        assert broker.crash_kinds == ("kill",)
        assert [c.code for c in peer.requests()] == [106, 106, 34]  # factory probe, broker lookup, heartbeat

        broker.create_topic("T", _route_queue_nums())
        broker.create_group("G", 3, 1)
        res = broker.send(Message("T", b"x", tags="a"), 0)
        assert res.status is SendStatus.SEND_OK and res.uniq_key is not None
        half = broker.send_half(Message("T", b"h", delay_level=2), 0, "PG")
        assert broker.end_transaction("PG", half.commitlog_offset, half.queue_offset, TxnAction.UNKNOWN,
                                      False) is ResponseCode.SUCCESS
        sent = peer.broker_side(8)
        assert [c.code for c in sent] == [34, 17, 200, 34, 310, 34, 310, 37]
        assert [c.ext_fields["topic"] for c in peer.requests(RequestCode.GET_ROUTEINFO_BY_TOPIC)] == ["T"]

        _, _, group, _, plain_send, _, half_send, end = sent
        assert bodies.loads_object(group.body, "group")["retryMaxTimes"] == 3
        beats = peer.requests(RequestCode.HEART_BEAT)
        assert [[d["groupName"] for d in bodies.loads_object(b.body, "hb")["consumerDataSet"]] for b in beats] \
            == [[], ["G"], ["G"]]
        assert bodies.loads_object(beats[-1].body, "hb")["producerDataSet"] == [{"groupName": "PG"}]
        assert plain_send.ext_fields["g"] == str(clock.now()) and plain_send.ext_fields["f"] == "0"
        assert (half_send.ext_fields["a"], half_send.ext_fields["f"]) == ("PG", "4")
        assert "TRAN_MSG\x01true" in half_send.ext_fields["i"] and "DELAY" not in half_send.ext_fields["i"]
        assert end.is_oneway and end.ext_fields["commitOrRollback"] == "0"
        assert end.ext_fields["msgId"] == half.uniq_key

        broker.close()
        unregistered = peer.requests(RequestCode.UNREGISTER_CLIENT)
        assert sorted(c.ext_fields.get("producerGroup") or "C:" + c.ext_fields["consumerGroup"]
                      for c in unregistered) == ["C:G", "PG", "rmqspec_producer"]
        with pytest.raises(RuntimeError, match="closed"):
            broker.send(Message("T", b"x"), 0)


def test_a_oneway_send_is_a_send_with_the_oneway_flag_and_returns_once_its_queue_grew() -> None:
    clock = ManualClock(1_795_000_000_000)
    with CapturedBroker() as peer:
        peer.max_offsets = [4, 4, 4, 5]  # before the send, then twice not yet, then grown
        broker = remote_factory(peer.address)(clock, BrokerConfig(), None)
        broker.create_topic("T", _route_queue_nums())
        assert broker.send_oneway(Message("T", b"x", tags="a"), 1) is None
        sent = peer.wait_for(RequestCode.SEND_MESSAGE_V2)
        assert sent.is_oneway and sent.ext_fields["e"] == "1" and "UNIQ_KEY" in sent.ext_fields["i"]
        watches = peer.requests(RequestCode.GET_MAX_OFFSET)
        assert len(watches) == 4 and {(c.ext_fields["topic"], c.ext_fields["queueId"]) for c in watches} == {("T", "1")}
        assert peer.requests(RequestCode.GET_BROKER_RUNTIME_INFO)  # then the dispatch barrier
        broker.close()


def test_a_oneway_send_to_a_broker_that_refuses_the_watch_awaits_nothing() -> None:
    clock = ManualClock(1_795_000_000_000)
    with CapturedBroker() as peer:
        peer.overrides[RequestCode.GET_MAX_OFFSET] = attrs.evolve(ANSWERS[RequestCode.HEART_BEAT], code=17,
                                                                  remark="topic not exist")
        broker = remote_factory(peer.address)(clock, BrokerConfig(), None)
        broker.create_topic("T", _route_queue_nums())
        assert broker.send_oneway(Message("T", b"x", tags="a"), 1) is None
        assert peer.wait_for(RequestCode.SEND_MESSAGE_V2).is_oneway
        assert len(peer.requests(RequestCode.GET_MAX_OFFSET)) == 1
        assert not peer.requests(RequestCode.GET_BROKER_RUNTIME_INFO)
        broker.close()


def test_consumer_operations_return_what_the_captured_broker_answered() -> None:
    not_found = next(e.response for e in exchanges() if e.request.code == RequestCode.PULL_MESSAGE
                     and e.response is not None and e.response.code == 19)
    lock = next(e for e in exchanges() if e.request.code == RequestCode.LOCK_BATCH_MQ
                and b'"lockOKMQSet":[{' in e.response.body)
    held = bodies.loads_object(lock.response.body, "lock")["lockOKMQSet"][0]
    with CapturedBroker() as peer:
        peer.overrides[RequestCode.PULL_MESSAGE] = not_found
        broker = RemoteBroker(peer.address, ManualClock())
        broker.create_group("G")
        mq = MessageQueue(held["topic"], held["queueId"])
        res = broker.pull("G", mq, 5, max_nums=4, subscription="a || b")
        assert (res.status.name, res.next_begin_offset) == ("NO_NEW_MSG", int(not_found.ext_fields["nextBeginOffset"]))
        assert broker.send_back("G", 597, 0, "U", -1) is ResponseCode.SUCCESS
        broker.update_offset("G", mq, 3)
        assert broker.query_offset("G", mq) == int(ANSWERS[RequestCode.QUERY_CONSUMER_OFFSET].ext_fields["offset"])
        assert broker.lock_batch("G", "c1", [mq, MessageQueue("other", 0)]) == frozenset({mq})
        broker.unlock_batch("G", "c1", [mq])
        broker.flush()
        sent = peer.broker_side(9)
        pull, back, update, query, lock_req, unlock = sent[3:]
        assert (pull.ext_fields["queueOffset"], pull.ext_fields["maxMsgNums"], pull.ext_fields["subscription"]) == (
            "5", "4", "a || b")
        assert back.ext_fields["maxReconsumeTimes"] == "16"  # -1 is sent as the Java consumer sends it
        assert (update.code, query.code, lock_req.code, unlock.code) == (15, 14, 41, 42)
        assert [m["topic"] for m in bodies.loads_object(lock_req.body, "lock")["mqSet"]] == [mq.topic, "other"]
        assert len(sent) == 9  # flush() sent nothing
        broker.close()


def test_a_route_that_never_shows_is_topic_not_exist() -> None:
    with CapturedBroker() as peer:
        broker = RemoteBroker(peer.address, ManualClock(), route_wait_ms=300)
        with pytest.raises(BrokerError, match=r"does not show topic T with 7 queues on broker-a within 300 ms "
                                              r"\(last seen read/write queues: \(\d+, \d+\)\)") as err:
            broker.create_topic("T", 7)
        assert err.value.code is ResponseCode.TOPIC_NOT_EXIST
        with pytest.raises(ValueError, match="queue_nums must be positive"):
            broker.create_topic("T", 0)
        broker.close()


def test_consumer_groups_can_be_left_out_of_the_heartbeat() -> None:
    with CapturedBroker() as peer:
        broker = RemoteBroker(peer.address, ManualClock(), heartbeat_consumers=False)
        broker.create_group("G")
        broker.send_half(Message("T", b"h"), 0, "PG")
        beats = [bodies.loads_object(b.body, "hb") for b in peer.broker_side(4)
                 if b.code == RequestCode.HEART_BEAT]
        assert [(b["consumerDataSet"], b["producerDataSet"]) for b in beats] == [([], []),
                                                                                 ([], [{"groupName": "PG"}])]
        broker.close()


def test_tick_returns_the_checks_the_broker_pushed_and_re_heartbeats() -> None:
    java = next(c for c in broker_requests() if c.code == RequestCode.CHECK_TRANSACTION_STATE)
    check = attrs.evolve(java, body=check_body(dict(java.ext_fields)))
    notify = next(c for c in broker_requests() if c.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
    with CapturedBroker() as peer:
        broker = RemoteBroker(peer.address, ManualClock(), heartbeat_interval_ms=0)
        broker_conn = peer.conns[-1]
        broker_conn.send(notify)
        broker_conn.send(check)
        deadline = time.monotonic() + 3
        checks = []
        while not checks and time.monotonic() < deadline:
            checks = broker.tick()
        (got,) = checks
        assert (got.producer_group, got.commitlog_offset, got.tran_state_table_offset) == ("PG_TXN_931679", 8387, 3)
        assert got.transaction_id == java.ext_fields["transactionId"] and broker.notifications == 1
        assert len(peer.requests(RequestCode.HEART_BEAT)) >= 2  # interval 0: every tick heartbeats
        # the check's UNIQ_KEY becomes the msgId of the answer
        broker.end_transaction("PG_TXN_931679", 8387, 3, TxnAction.UNKNOWN, True)
        answer = peer.wait_for(RequestCode.END_TRANSACTION)
        assert answer.ext_fields["msgId"] == java.ext_fields["msgId"]
        assert answer.ext_fields["transactionId"] == java.ext_fields["msgId"]
        assert answer.ext_fields["fromTransactionCheck"] == "true"
        broker.close()


def test_a_lost_connection_fails_the_call_and_the_next_call_reconnects() -> None:
    with CapturedBroker() as peer:
        broker = RemoteBroker(peer.address, ManualClock())
        peer.close_on.add(RequestCode.SEND_MESSAGE_V2)
        with pytest.raises(ConnectionLost, match="request code=310 opaque=1 connection lost: the peer closed"):
            broker.send(Message("T", b"x"), 0)
        assert broker.send(Message("T", b"y"), 0).status is SendStatus.SEND_OK
        assert [c.code for c in peer.conns[-1].received] == [34, 310, 28]  # a new connection, heartbeat first
        # a loss noticed between calls: the next call just reconnects
        peer.conns[-1].close()
        time.sleep(0.05)
        assert broker.send(Message("T", b"z"), 0).status is SendStatus.SEND_OK
        assert [c.code for c in peer.conns[-1].received] == [34, 310, 28]  # 28: the dispatch barrier
        broker.close()


def test_checks_received_before_a_connection_loss_still_reach_tick() -> None:
    java = next(c for c in broker_requests() if c.code == RequestCode.CHECK_TRANSACTION_STATE)
    check = attrs.evolve(java, body=check_body(dict(java.ext_fields)))
    with CapturedBroker() as peer:
        broker = RemoteBroker(peer.address, ManualClock())
        first = peer.conns[-1]
        first.send(check)
        time.sleep(0.1)
        first.close()
        time.sleep(0.05)
        (got,) = broker.tick()  # reconnects, and still returns the check of the lost connection
        assert got.commitlog_offset == 8387 and len(peer.conns) == 3
        assert broker.tick() == []
        broker.close()


def test_crash_and_recover_run_the_commands_and_reconnect(tmp_path) -> None:
    marks = tmp_path / "marks"
    crash, restart = f"echo crash >> {marks}", f"echo restart >> {marks}"
    with CapturedBroker() as peer:
        broker = remote_factory(peer.address, crash_cmd=crash, restart_cmd=restart)(ManualClock(), None, None)
        assert broker.capabilities == frozenset({Capability.CRASH})
        with pytest.raises(ValueError, match=r"only be crashed with \('kill',\), not 'power'"):
            broker.crash("power")
        with pytest.raises(RuntimeError, match="only after crash"):
            broker.recover()
        broker.crash("kill")
        with pytest.raises(BrokerError) as err:
            broker.send(Message("T", b"x"), 0)
        assert err.value.code is ResponseCode.SERVICE_NOT_AVAILABLE
        broker.recover()
        assert marks.read_text().split() == ["crash", "restart"]
        assert broker.send(Message("T", b"x"), 0).status is SendStatus.SEND_OK
        broker.close()


def test_failing_commands_and_a_broker_that_does_not_come_back(tmp_path) -> None:
    with CapturedBroker() as peer:
        broker = RemoteBroker(peer.address, ManualClock(), crash_cmd="echo gone >&2; exit 3", restart_cmd="true",
                              recover_timeout_ms=600)
        with pytest.raises(CrashCommandError, match="exited with 3: gone"):
            broker.crash("kill")
        broker.crash_cmd = "true"
        broker.crash("kill")
        peer.cluster = {}  # the name server no longer lists it
        with pytest.raises(CrashCommandError, match=r"did not come back within 600 ms .*no broker named 'broker-a'"):
            broker.recover()
        broker.close()


def test_setup_errors_name_the_address_and_reason() -> None:
    port = closed_port()
    with pytest.raises(RemoteSetupError, match=rf"name server 127\.0\.0\.1:{port}: .*Connection refused"):
        locate_broker(f"127.0.0.1:{port}", None, 1000)
    with CapturedBroker({"broker-b": {1: "127.0.0.1:1"}, "broker-c": {0: "127.0.0.1:2"}}) as peer:
        with pytest.raises(RemoteSetupError, match=r"no broker named 'broker-a' registered \(brokers: broker-b, "
                                                   r"broker-c\)"):
            locate_broker(peer.address, "broker-a", 1000)
        peer.cluster = {"broker-b": {1: "127.0.0.1:1"}}
        with pytest.raises(RemoteSetupError, match="'broker-b' has no master"):
            locate_broker(peer.address, "broker-a", 1000)
        peer.cluster = {"other": {0: "127.0.0.1:2"}}
        assert locate_broker(peer.address, "broker-a", 1000) == ("other", "127.0.0.1:2")  # the only broker
        peer.silent.add(RequestCode.GET_BROKER_CLUSTER_INFO)
        with pytest.raises(RemoteSetupError, match="no response within 300 ms"):
            locate_broker(peer.address, None, 300)


def test_load_factory_resolves_rocketmq_urls() -> None:
    port = closed_port()
    with pytest.raises(FactoryError, match=rf"cannot use rocketmq://127\.0\.0\.1:{port}: name server "
                                           rf"127\.0\.0\.1:{port}: .*Connection refused"):
        load_factory(f"rocketmq://127.0.0.1:{port}")
    with pytest.raises(FactoryError, match="must look like rocketmq://HOST:PORT"):
        load_factory("rocketmq://localhost")
    with pytest.raises(FactoryError, match="apply to a rocketmq://HOST:PORT broker"):
        load_factory("rmqspec.model:factory", crash_cmd="kill -9 1")
    with CapturedBroker() as peer:
        with pytest.raises(FactoryError, match="give both or neither"):
            load_factory(f"rocketmq://{peer.address}", crash_cmd="true")
        factory = load_factory(f"rocketmq://{peer.address}/", crash_cmd="true", restart_cmd="true")
        broker = factory(ManualClock(), BrokerConfig(), None, recorder=None)
        assert Capability.CRASH in broker.capabilities
        broker.close()


def test_a_cluster_of_several_brokers_takes_the_broker_named_by_the_config() -> None:
    """``--config``'s brokerName picks the broker (cmd_conform / cmd_check pass it); without one, broker-a."""
    with CapturedBroker() as peer:
        peer.cluster = {"broker-a": {0: peer.address}, "broker-b": {0: peer.address}}
        broker = load_factory(f"rocketmq://{peer.address}", broker_name="broker-b")(ManualClock(), BrokerConfig())
        assert broker.broker_name == "broker-b"
        broker.close()
        broker = load_factory(f"rocketmq://{peer.address}")(ManualClock(), BrokerConfig())
        assert broker.broker_name == "broker-a"
        broker.close()
        peer.cluster = {"broker-b": {0: peer.address}, "broker-c": {0: peer.address}}
        with pytest.raises(FactoryError, match=r"no broker named 'broker-a' registered \(brokers: broker-b, "):
            load_factory(f"rocketmq://{peer.address}")


def test_conform_cli_exits_2_for_an_unreachable_name_server(capsys) -> None:
    port = closed_port()
    assert main(["conform", "--broker", f"rocketmq://127.0.0.1:{port}", "--examples", "1"]) == 2
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in err and "Connection refused" in err and "Traceback" not in err
    assert main(["conform", "--broker", "rmqspec.model:factory", "--crash-cmd", "true"]) == 2


def test_one_caller_and_the_reader_thread() -> None:
    """Checks pushed while the caller sends: both streams arrive intact on one connection."""
    java = next(c for c in broker_requests() if c.code == RequestCode.CHECK_TRANSACTION_STATE)
    check = attrs.evolve(java, body=check_body(dict(java.ext_fields)))
    with CapturedBroker() as peer:
        broker = RemoteBroker(peer.address, ManualClock())
        conn = peer.conns[-1]
        pusher = threading.Thread(target=lambda: [conn.send(attrs.evolve(check, opaque=i)) for i in range(200)])
        pusher.start()
        results = [broker.send(Message("T", b"x"), 0) for _ in range(200)]
        pusher.join()
        got: list = []
        deadline = time.monotonic() + 3
        while len(got) < 200 and time.monotonic() < deadline:
            got += broker.tick()
        assert len(results) == 200 and len(got) == 200
        broker.close()


def test_on_5_3_under_sync_flush_the_barrier_waits_for_the_flush_too() -> None:
    """5.3.0+ under SYNC_FLUSH builds consume queues only up to the flushed position, and
    dispatchBehindBytes counts from there: a send-back (its put does not wait for the flush) reads
    "nothing behind" while a pull cannot see it yet. Seen against real 5.5.1: the DLQ copy of a
    send-back missing from the observer's pull right after SUCCESS. Not under ASYNC_FLUSH or on 4.9."""
    with CapturedBroker() as peer:
        sync5 = RemoteBroker(peer.address, ManualClock(), BrokerConfig(version="rocketmq-5.2", flush="SYNC"))
        peer.unflushed = ["387 B", "1.2 KiB"]  # unflushed twice, then "0 B"
        sync5.send_back("G", 597, 0, "U", -1)
        assert len(peer.requests(RequestCode.GET_BROKER_RUNTIME_INFO)) == 3 and sync5.dispatch_waits == 1
        for config in (BrokerConfig(version="rocketmq-5.2", flush="ASYNC"), BrokerConfig(flush="SYNC")):
            other = RemoteBroker(peer.address, ManualClock(), config)
            peer.unflushed = ["387 B"]
            before = len(peer.requests(RequestCode.GET_BROKER_RUNTIME_INFO))
            other.send_back("G", 597, 0, "U", -1)
            assert len(peer.requests(RequestCode.GET_BROKER_RUNTIME_INFO)) == before + 1, config
            assert other.dispatch_waits == 0
            peer.unflushed = []


def test_every_write_ends_with_the_dispatch_barrier() -> None:
    """A 4.9 broker answers a send before its consume queue has the message (fidelity: wire row 4):
    after each write the adapter asks GET_BROKER_RUNTIME_INFO until dispatchBehindBytes is 0."""
    with CapturedBroker() as peer:
        broker = RemoteBroker(peer.address, ManualClock())
        peer.behind = [310, 120]  # the first send: behind twice, then caught up
        broker.send(Message("T", b"x"), 0)
        assert len(peer.requests(RequestCode.GET_BROKER_RUNTIME_INFO)) == 3 and broker.dispatch_waits == 1
        broker.send_back("G", 597, 0, "U", -1)
        peer.overrides[RequestCode.END_TRANSACTION] = ANSWERS[RequestCode.SEND_MESSAGE_V2]  # any code-0 answer
        broker.end_transaction("PG", 10, 0, TxnAction.COMMIT, False)
        assert len(peer.requests(RequestCode.GET_BROKER_RUNTIME_INFO)) == 5 and broker.dispatch_waits == 1
        broker.end_transaction("PG", 10, 0, TxnAction.UNKNOWN, False)  # oneway, writes nothing
        broker.query_offset("G", MessageQueue("T", 0))  # a read: no barrier
        assert len(peer.requests(RequestCode.GET_BROKER_RUNTIME_INFO)) == 5
        broker.close()


def test_the_barrier_gives_up_after_its_bound_and_is_off_for_a_broker_without_runtime_info() -> None:
    with CapturedBroker() as peer:
        broker = RemoteBroker(peer.address, ManualClock(), dispatch_wait_ms=50)
        peer.behind = [1] * 10_000  # never catches up
        started = time.monotonic()
        broker.send(Message("T", b"x"), 0)
        assert 0.05 <= time.monotonic() - started < 3 and broker.dispatch_waits == 1
        broker.close()
    unsupported = next(e.response for e in exchanges() if e.response is not None and e.response.code == 3)
    with CapturedBroker() as peer:  # a 4.9.8 broker's first second: SYSTEM_ERROR from its TPS statistics
        refused = attrs.evolve(unsupported, code=1, remark="java.util.NoSuchElementException, "
                               "java.base/java.util.LinkedList.getLast(LinkedList.java:261)")
        peer.overrides[RequestCode.GET_BROKER_RUNTIME_INFO] = refused
        broker = RemoteBroker(peer.address, ManualClock(), dispatch_wait_ms=50)
        broker.send(Message("T", b"x"), 0)
        assert broker.dispatch_refused >= 1 and broker.dispatch_wait_ms == 50  # asked again, still on
        del peer.overrides[RequestCode.GET_BROKER_RUNTIME_INFO]
        broker.send(Message("T", b"y"), 0)
        assert broker.dispatch_waits == 1  # the refused write waited out its bound
        broker.close()
    with CapturedBroker() as peer:
        peer.overrides[RequestCode.GET_BROKER_RUNTIME_INFO] = unsupported  # e.g. rmqspec serve
        broker = RemoteBroker(peer.address, ManualClock())
        broker.send(Message("T", b"x"), 0)
        broker.send(Message("T", b"y"), 0)
        assert len(peer.requests(RequestCode.GET_BROKER_RUNTIME_INFO)) == 1 and broker.dispatch_wait_ms == 0
        broker.close()


def test_a_flow_controlled_request_is_sent_again_until_the_broker_takes_it() -> None:
    """SYSTEM_BUSY is a request the broker dropped unprocessed (BrokerFastFailure's TIMEOUT_CLEAN_QUEUE on
    a loaded machine, seen in CI against real 5.3.3 on a probe send): sent again, as the Java producer
    does, counted; past ``busy_wait_ms`` the refusal reaches the caller."""
    with CapturedBroker() as peer:
        broker = RemoteBroker(peer.address, ManualClock())
        peer.busy[RequestCode.SEND_MESSAGE_V2] = 3
        result = broker.send(Message("T", b"x"), 0)
        assert result.status is SendStatus.SEND_OK and broker.busy_retries == 3
        assert len(peer.requests(RequestCode.SEND_MESSAGE_V2)) == 4
        peer.busy[RequestCode.QUERY_CONSUMER_OFFSET] = 1  # any request, not only sends
        broker.query_offset("G", MessageQueue("T", 0))
        assert broker.busy_retries == 4
        own = RemotingClient.connect(peer.address)  # a caller's own connection (interop/timer_probe's sends)
        peer.busy[RequestCode.SEND_MESSAGE_V2] = 2
        resp = broker.ask(own, ops.send_request("P", Message("T", b"y"), 0, {}, 0, broker.broker_name))
        assert resp.code == 0 and broker.busy_retries == 6 and len(peer.requests(RequestCode.SEND_MESSAGE_V2)) == 7
        own.close()
        broker.close()
    with CapturedBroker() as peer:
        broker = RemoteBroker(peer.address, ManualClock(), busy_wait_ms=100)
        peer.busy[RequestCode.SEND_MESSAGE_V2] = 10_000  # busy for good
        started = time.monotonic()
        with pytest.raises(BrokerError) as refused:
            broker.send(Message("T", b"x"), 0)
        assert refused.value.code is ResponseCode.SYSTEM_BUSY and "TIMEOUT_CLEAN_QUEUE" in str(refused.value)
        assert 0.05 <= time.monotonic() - started < 3 and 2 <= broker.busy_retries <= 8
        broker.close()
