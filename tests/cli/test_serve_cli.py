"""``rmqspec serve`` as a subprocess: ready line, graceful SIGTERM/SIGINT (store verifies, offsets persisted),
a trace that audits clean, and one-line errors with exit 2."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqspec.impl.configfiles import parse_fastjson
from rmqspec.remoting.bodies import decode_messages
from rmqspec.spark.config import load_config
from rmqspec.traces.checker import check
from tests.remoting.conftest import SHORT_DELAYS, create_topic_ext, heartbeat, props, pull_ext, send_ext, uniq_key
from tests.remoting.serve_process import REPO, ServeProcess
from tests.remoting.wire_client import WireClient

CONF = f"""# shortened timing, as the real-broker fixture runs
brokerName = broker-z
brokerClusterName = ZCluster
messageDelayLevel = {SHORT_DELAYS}
transactionTimeOut = 2000
transactionCheckInterval = 3000
transactionCheckMax = 3
flushDiskType = SYNC_FLUSH
rocketmq.broker.rebalance.lockMaxLiveTime = 5000
mappedFileSizeCommitLog = 1048576
deleteWhen = 04
"""


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _workload(proc: ServeProcess) -> tuple[int, int]:
    """Produce, consume (commit), a delayed message that fires, a lock; returns (committed offset, sent)."""
    with WireClient(proc.broker) as b:
        assert b.call(17, create_topic_ext("T", 1)).code == 0
        b.call(34, body=heartbeat("127.0.0.1@cli", {"G": ["T"]}, producers=("PG",)))
        for i in range(5):
            assert b.call(310, send_ext("T", properties=props(UNIQ_KEY=uniq_key(), TAGS="a")), b"m%d" % i).code == 0
        assert b.call(310, send_ext("T", properties=props(UNIQ_KEY=uniq_key(), DELAY="1")), b"late").code == 0
        r = b.call(11, pull_ext("G", "T"))
        got = decode_messages(r.body)
        assert [m.body for m in got] == [b"m%d" % i for i in range(5)]
        b.call(15, {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "5"})
        r = b.call(11, pull_ext("G", "T", offset=5, sys_flag=3, suspend_ms=5000, commit_offset=5), timeout=10)
        assert [m.body for m in decode_messages(r.body)] == [b"late"]  # fired after 1 s, woke the held pull
        body = b'{"clientId":"127.0.0.1@cli","consumerGroup":"G","mqSet":[{"brokerName":"broker-z","queueId":0,' \
               b'"topic":"T"}]}'
        assert b.call(41, body=body).code == 0
        b.request(15, {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "6"}, oneway=True)
        b.call(30, {"topic": "T", "queueId": "0"})  # after the oneway: processed in order
    return 6, 6


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_stops_cleanly_and_leaves_a_verifiable_store(tmp_path: Path, sig: int) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    store, trace = tmp_path / "store", tmp_path / "trace"
    proc = ServeProcess(store, "--config", str(conf), "--trace-out", str(trace)).start()
    try:
        print(f"rmqspec serve: spawn to ready {proc.spawn_to_ready_s:.2f} s ({proc.ready_line})")
        assert (store / "abort").exists()
        with WireClient(proc.namesrv) as ns:
            cluster = ns.call(106).body
        assert b'"broker-z":{"brokerAddrs":{0:"' + proc.broker.encode() in cluster and b'"ZCluster"' in cluster
        committed, sent = _workload(proc)
        code, out = proc.terminate(sig)
    finally:
        proc.kill()
    assert code == 0 and "stopped" in out
    assert not (store / "abort").exists()
    assert "Traceback" not in proc.stderr()
    offsets = parse_fastjson((store / "config" / "consumerOffset.json").read_text())
    assert offsets["offsetTable"]["T@G"] == {0: committed}
    verify = subprocess.run([sys.executable, "-m", "rmqspec.cli", "store", "verify", str(store), "--delay-levels",
                             SHORT_DELAYS], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # the trace: every event but commit_offset in serve-000.jsonl, commits beside it; audits clean
    main, side = _rows(trace / "serve-000.jsonl"), _rows(trace / "_commit_offset-000.jsonl")
    assert {r["event"] for r in side} == {"commit_offset"} and len(side) >= 2
    assert [r["event"] for r in main].count("send") == sent
    assert {"store", "send", "deliver", "schedule_fire", "lock"} <= {r["event"] for r in main}
    seqs = sorted(r["seq"] for r in main + side)
    assert seqs == list(range(len(seqs)))
    config = load_config(trace / "_audit.json")
    assert config.params.broker_lock_ms == 5000 and config.params.transaction_timeout_ms == 2000
    report = check(main, config.params)
    assert report.violations == () and report.rows_rejected == 0
    assert set(report.not_judged) >= {"LOST", "TXN_UNRESOLVED"}


def test_a_restart_continues_the_trace_as_a_new_epoch(tmp_path: Path) -> None:
    store, trace = tmp_path / "store", tmp_path / "trace"
    for run in range(2):
        proc = ServeProcess(store, "--trace-out", str(trace)).start()
        try:
            with WireClient(proc.broker) as b:
                assert b.call(310, send_ext("T"), b"x").code == 0
            assert proc.terminate()[0] == 0
        finally:
            proc.kill()
        if run == 0:
            with (trace / "serve-000.jsonl").open("a") as fh:
                fh.write('{"seq": 99, "ev')  # as if killed mid-write
    first, second = _rows(trace / "serve-000.jsonl"), _rows(trace / "serve-001.jsonl")
    assert second[0]["event"] == "recover" and second[0]["status"] == "RESTART"
    assert second[0]["seq"] == first[-1]["seq"] + 1
    assert [r["queue_offset"] for r in first + second if r["event"] == "send"] == [0, 1]


def test_a_broker_without_a_recorder_is_traced_from_the_wire(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    proc = ServeProcess(tmp_path / "store", "--trace-out", str(trace), "--broker",
                        "tests.broken_brokers:RollbackCommits").start()
    try:
        with WireClient(proc.broker) as b:
            b.call(34, body=heartbeat("127.0.0.1@w", {"G": ["T"]}, producers=("PG",)))
            key = uniq_key()
            r = b.call(310, send_ext("T", sys_flag=4, properties=props(UNIQ_KEY=key, TRAN_MSG="true", PGROUP="PG")),
                       b"half")
            ext = {"producerGroup": "PG", "tranStateTableOffset": r.ext_fields["queueOffset"],
                   "commitLogOffset": str(int(r.ext_fields["msgId"][16:], 16)), "commitOrRollback": "12",
                   "msgId": key}
            assert b.call(37, ext).code == 0
            msgs = decode_messages(b.call(11, pull_ext("G", "T")).body)
            assert [m.body for m in msgs] == [b"half"]  # the broken broker shows a rolled-back half
        assert proc.terminate()[0] == 0
    finally:
        proc.kill()
    rows = _rows(trace / "serve-000.jsonl")
    assert [r["event"] for r in rows] == ["txn_half", "txn_end", "deliver"]
    report = check(rows, load_config(trace / "_audit.json").params)
    assert [v.code for v in report.violations] == ["TXN_ROLLBACK_VISIBLE"]


def _serve_fails(tmp_path: Path, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "rmqspec.cli", "serve", "--store", str(tmp_path / "s"),
                        "--namesrv-port", "0", "--port", "0", *args], capture_output=True, text=True, cwd=REPO,
                       timeout=60)
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr


def test_usage_and_input_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    assert "no such file" in _serve_fails(tmp_path, "--config", str(tmp_path / "missing.conf"))
    bad = tmp_path / "bad.conf"
    bad.write_text("transactionTimeOut = soon\n")
    assert f"{bad}:1: transactionTimeOut" in _serve_fails(tmp_path, "--config", str(bad))
    bad.write_text("flushDiskType = MAYBE\n")
    assert f"{bad}:1: flushDiskType: 'MAYBE' is not SYNC_FLUSH or ASYNC_FLUSH" in \
        _serve_fails(tmp_path, "--config", str(bad))
    assert "cannot import" in _serve_fails(tmp_path, "--broker", "no_such_module:factory")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = subprocess.run([sys.executable, "-m", "rmqspec.cli", "serve", "--store", str(tmp_path / "s2"),
                              "--namesrv-port", str(port), "--port", "0"], capture_output=True, text=True,
                             cwd=REPO, timeout=60)
    assert err.returncode == 2 and "cannot listen on 127.0.0.1" in err.stderr and "Traceback" not in err.stderr


def test_a_store_in_use_is_refused(tmp_path: Path) -> None:
    proc = ServeProcess(tmp_path / "store").start()
    try:
        time.sleep(0.1)
        err = _serve_fails(tmp_path, "--store", str(tmp_path / "store"))
        assert "locked" in err
    finally:
        proc.terminate()
        proc.kill()
