"""``rmqspec conform --profile rocketmq-5.2 | rocketmq-5.5`` against real RocketMQ 5.3.3 and 5.5.1, with kill crashes.

The same run as ``test_conform_real.py`` (the wall-clock default budget, in lockstep with the model, the
broker in a network namespace of its own, ``--crash-cmd`` / ``--restart-cmd`` kill -9 and restart it on
its store), with the model following each release's profile (``model/versions.py``; docs/fidelity.md, "RocketMQ
5.x profiles"). The 5.x timing differs from the 4.9.8 tier's in two keys: ``transactionCheckInterval``
is 6 s, since a 5.1.0+ round's checks may leave up to 1 s after it began (SLEEP_WHILE_NO_OP) and the
machine keeps that second quiet too; ``transactionOpBatchInterval`` is 700 ms, so the machine's wait for
an END's op message (5.1.0+ writes it in a batch) stays short and the batch passes rarely meet a round.

The two brokers run side by side, each in its own namespace, and the two runs at once: a wall-clock run
mostly waits (a few seconds of CPU in five minutes), so together they take the time of one.
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
VERSIONS_5X = ("5.3.3", "5.5.1")
PROFILE_OF = {"5.3.3": "rocketmq-5.2", "5.5.1": "rocketmq-5.5"}  # model/versions.py
DELAYS = "1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s"
TIMING_5X = [f"messageDelayLevel={DELAYS}", "transactionTimeOut=2000", "transactionCheckInterval=6000",
             "transactionCheckMax=3", "flushDiskType=SYNC_FLUSH", "transactionOpBatchInterval=700"]
LOCK_MS = 5000
BROKER_CONF = "\n".join(["brokerClusterName=DefaultCluster", "brokerName=broker-a", "listenPort=10911",
                         "brokerIP1=127.0.0.1", *TIMING_5X, f"rocketmq.broker.rebalance.lockMaxLiveTime={LOCK_MS}"])


@pytest.fixture()
def brokers5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[RealRocketMQ, Started]]]:
    started: list[tuple[RealRocketMQ, Started]] = []
    try:
        for version in VERSIONS_5X:
            real = RealRocketMQ(version)
            done = subprocess.run(real.cmd("resolve", version=True), capture_output=True, text=True, timeout=900,
                                  check=False)
            assert done.returncode == 0, f"cannot resolve RocketMQ {version}: {done.stderr.strip()}"
            storedir = tmp_path_factory.mktemp(f"rmq-conform-{version}")
            started.append((real, real.start(storedir, *TIMING_5X,
                                             f"-Drocketmq.broker.rebalance.lockMaxLiveTime={LOCK_MS}")))
        yield started
    finally:
        for real, s in started:
            real.stop(s.dir)


def test_conform_with_the_5x_profile_passes_at_the_wall_clock_default_budget(brokers5, tmp_path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(BROKER_CONF + "\n")
    runs = []
    for real, started in brokers5:
        traces = tmp_path / f"traces-{real.version}"
        cmd = started.in_netns(sys.executable, "-m", "rmqspec.cli", "conform", "--broker",
                               "rocketmq://127.0.0.1:9876", "--config", str(conf),
                               "--profile", PROFILE_OF[real.version], "--trace-out", str(traces),
                               *real.crash_options(started))
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        runs.append((real.version, traces, proc))
    failures = []
    for version, traces, proc in runs:
        try:
            out, err = proc.communicate(timeout=1500)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        print(f"RocketMQ {version}\n{out}")
        head = out.splitlines()[0] if out else ""
        passed = re.match(r"PASS: (\d+) examples in [\d.]+ s", head)
        if proc.returncode != 0 or not passed or int(passed.group(1)) < 12 \
                or len(list(traces.glob("example-*.jsonl"))) < 12:
            failures.append(f"RocketMQ {version}: conform exited {proc.returncode}:\n{out}\n{err[-3000:]}")
    assert failures == [], "\n\n".join(failures)
