"""``rmqspec conform --profile rocketmq-5.2+`` against real Apache RocketMQ 5.3.3 and 5.5.1, with kill crashes.

The same run as ``test_conform_real.py`` (the wall-clock default budget, in lockstep with the model, the
broker in a network namespace of its own, ``--crash-cmd`` / ``--restart-cmd`` kill -9 and restart it on
its store), with the model following the 5.2.0+ profile (``model/versions.py``; docs/fidelity.md, "RocketMQ
5.x profiles"). The 5.x timing differs from the 4.9.8 tier's in two keys: ``transactionCheckInterval``
is 6 s, since a 5.1.0+ round's checks may leave up to 1 s after it began (SLEEP_WHILE_NO_OP) and the
machine keeps that second quiet too; ``transactionOpBatchInterval`` is 700 ms, so the machine's wait for
an END's op message (5.1.0+ writes it in a batch) stays short and the batch passes rarely meet a round.
``INTEROP=quick`` leaves this module out (the Makefile's ``INTEROP_5X_ONLY``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.realrmq import RealRocketMQ, Started

REPO = Path(__file__).resolve().parents[2]
DELAYS = "1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s"
TIMING_5X = [f"messageDelayLevel={DELAYS}", "transactionTimeOut=2000", "transactionCheckInterval=6000",
             "transactionCheckMax=3", "flushDiskType=SYNC_FLUSH", "transactionOpBatchInterval=700"]
LOCK_MS = 5000
BROKER_CONF = "\n".join(["brokerClusterName=DefaultCluster", "brokerName=broker-a", "listenPort=10911",
                         "brokerIP1=127.0.0.1", *TIMING_5X, f"rocketmq.broker.rebalance.lockMaxLiveTime={LOCK_MS}"])


@pytest.fixture(params=["5.3.3", "5.5.1"])
def broker5(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[RealRocketMQ, Started]]:
    real = RealRocketMQ(request.param)
    done = subprocess.run(real.cmd("resolve", version=True), capture_output=True, text=True, timeout=900,
                          check=False)
    assert done.returncode == 0, f"cannot resolve RocketMQ {real.version}: {done.stderr.strip()}"
    storedir = tmp_path_factory.mktemp(f"rmq-conform-{real.version}")
    try:
        yield real, real.start(storedir, *TIMING_5X, f"-Drocketmq.broker.rebalance.lockMaxLiveTime={LOCK_MS}")
    finally:
        real.stop(storedir)


def test_conform_with_the_5x_profile_passes_at_the_wall_clock_default_budget(broker5, tmp_path) -> None:
    real, started = broker5
    conf = tmp_path / "broker.conf"
    conf.write_text(BROKER_CONF + "\n")
    done = subprocess.run(started.in_netns(sys.executable, "-m", "rmqspec.cli", "conform",
                                           "--broker", "rocketmq://127.0.0.1:9876", "--config", str(conf),
                                           "--profile", "rocketmq-5.2+", "--trace-out", str(tmp_path / "traces"),
                                           *real.crash_options(started)),
                          cwd=REPO, capture_output=True, text=True, timeout=1500, check=False)
    print(f"RocketMQ {real.version}\n{done.stdout}")
    assert done.returncode == 0, f"conform failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}"
    head = done.stdout.splitlines()[0]
    assert re.match(r"PASS: (\d+) examples in [\d.]+ s", head), head
    assert int(re.match(r"PASS: (\d+)", head).group(1)) >= 12
    assert len(list((tmp_path / "traces").glob("example-*.jsonl"))) >= 12
