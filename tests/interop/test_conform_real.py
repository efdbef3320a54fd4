"""``rmqspec conform --broker rocketmq://127.0.0.1:9876 --config FILE`` against real Apache RocketMQ 4.9.8.

The fixture (``scripts/real-rocketmq start``) runs a real name server + broker in a private network
namespace with shortened timing; ``conform`` runs inside that namespace (``ip netns exec``) at the
wall-clock default budget, in lockstep with the model configured by the same broker.conf, with kill
crashes: ``--crash-cmd`` is ``kill -9`` of the broker JVM, ``--restart-cmd`` starts it again on the same
store (``real-rocketmq kill`` / ``restart``). Every difference it ever found is fixed in the model or recorded in
``docs/fidelity.md``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.realrmq import RealRocketMQ, Started

REPO = Path(__file__).resolve().parents[2]
DELAYS = "1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s"
TIMING = [f"messageDelayLevel={DELAYS}", "transactionTimeOut=2000", "transactionCheckInterval=3000",
          "transactionCheckMax=3", "flushDiskType=SYNC_FLUSH"]
LOCK_MS = 5000
# what the model is told: the broker's own file plus the lock lifetime it got as -D
BROKER_CONF = "\n".join(["brokerClusterName=DefaultCluster", "brokerName=broker-a", "listenPort=10911",
                         "brokerIP1=127.0.0.1", *TIMING, f"rocketmq.broker.rebalance.lockMaxLiveTime={LOCK_MS}"])
# for `rmqspec check`, whose proofs verify the configuration: clients that trust a lock 3 s and renew it
# every second (the Java default, 30 s, is unsafe against a 5 s broker lock: the proof fails, rightly)
CLIENTS = "\n".join(["rocketmq.client.rebalance.lockMaxLiveTime=3000", "rocketmq.client.rebalance.lockInterval=1000"])


@pytest.fixture()
def real_broker(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    """A fresh broker per test (it starts in ~3 s): a run that fails leaves halves the broker goes on
    checking and discarding on its own, which the next run on that broker would see as its own."""
    storedir = tmp_path_factory.mktemp("rmq-conform")
    try:
        yield realrmq.start(storedir, *TIMING, f"-Drocketmq.broker.rebalance.lockMaxLiveTime={LOCK_MS}")
    finally:
        realrmq.stop(storedir)


def test_conform_against_real_rocketmq_passes_at_the_wall_clock_default_budget(real_broker, realrmq,
                                                                                tmp_path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(BROKER_CONF + "\n")
    done = subprocess.run(real_broker.in_netns(sys.executable, "-m", "rmqspec.cli", "conform",
                                               "--broker", "rocketmq://127.0.0.1:9876", "--config", str(conf),
                                               "--trace-out", str(tmp_path / "traces"),
                                               *realrmq.crash_options(real_broker)),
                          cwd=REPO, capture_output=True, text=True, timeout=1200, check=False)
    print(done.stdout)
    assert done.returncode == 0, f"conform failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}"
    head = done.stdout.splitlines()[0]
    assert re.match(r"PASS: (\d+) examples in [\d.]+ s", head), head
    assert int(re.match(r"PASS: (\d+)", head).group(1)) >= 12
    wall = next(line for line in done.stdout.splitlines() if line.startswith("wall clock:"))
    assert "tolerance 500 ms" in wall
    assert len(list((tmp_path / "traces").glob("example-*.jsonl"))) >= 12


def test_check_against_real_rocketmq_end_to_end(real_broker, realrmq, tmp_path) -> None:
    """Proofs of the configuration, wall-clock conformance with kill crashes, traces, Spark audit, report."""
    conf = tmp_path / "broker.conf"
    conf.write_text(BROKER_CONF + "\n" + CLIENTS + "\n")
    out = tmp_path / "out"
    done = subprocess.run(real_broker.in_netns(sys.executable, "-m", "rmqspec.cli", "check",
                                               "--broker", "rocketmq://127.0.0.1:9876", "--config", str(conf),
                                               "--out", str(out), "--budget", "quick", "--quiet",
                                               *realrmq.crash_options(real_broker)),
                          cwd=REPO, capture_output=True, text=True, timeout=1500, check=False)
    print(done.stdout)
    assert done.returncode == 0, f"check failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["conformance"]["status"] == "PASS" and summary["conformance"]["examples"] >= 6
    assert summary["audit"]["events_read"] > 0 and not any(summary["audit"]["violations"].values())
    assert "workload skipped (a remote broker runs on its own clock)" in summary["meta"]["budget"]
    assert (out / "report.html").stat().st_size > 10_000
