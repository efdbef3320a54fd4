"""``rmqspec conform --broker rocketmq://127.0.0.1:9876 --config FILE --profile P`` against real Apache RocketMQ.

The fixture (``scripts/real-rocketmq start``) runs a real name server + broker in a private network
namespace with shortened timing; ``conform`` runs inside that namespace (``ip netns exec``) at the
wall-clock default budget, in lockstep with the model configured by the same broker.conf, with kill
crashes: ``--crash-cmd`` is ``kill -9`` of the broker JVM, ``--restart-cmd`` starts it again on the same
store (``real-rocketmq kill`` / ``restart``). Every difference it ever found is fixed in the model or recorded in
``docs/fidelity.md``.

The conformance test runs the release under test (4.9.8 unless ``RMQ_VERSION``) and, with ``INTEROP=full``
(the default), 5.3.3 and 5.5.1 beside it, each with its version profile (``rocketmq-5.2``, ``rocketmq-5.5``:
``model/versions.py``; docs/fidelity.md, "RocketMQ 5.x profiles") and its timing (``timing_of``); on 5.x a
timer message the machine draws is judged on the wall clock (the run's ``wall clock:`` line names the worst
timer lateness), and every example's prelude runs the pop ladder (``properties/conform_pop_wall.py``): the run
must reach the POP and POP_ORDER rows (pop, revive, orderly pop) and judge revives (``pop_revive``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.realrmq import TIER, RealRocketMQ, Started

REPO = Path(__file__).resolve().parents[2]
DELAYS = "1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s"
TIMING = [f"messageDelayLevel={DELAYS}", "transactionTimeOut=2000", "transactionCheckInterval=3000",
          "transactionCheckMax=3", "flushDiskType=SYNC_FLUSH"]
LOCK_MS = 5000
# 5.x (model/versions.py): a 5.1.0+ round's checks may leave up to 1 s after it began (SLEEP_WHILE_NO_OP)
# and the machine keeps that second quiet too, so rounds are 6 s apart; the op message of an END is
# written by a batch service, every 700 ms here, and the machine waits for it
TIMING_5X = [*TIMING[:2], "transactionCheckInterval=6000", *TIMING[3:], "transactionOpBatchInterval=700"]
VERSIONS_5X = ("5.3.3", "5.5.1")
TIER_5X_TESTS = ("test_conform_against_real_rocketmq_passes_at_the_wall_clock_default_budget",)  # with 5x: 5.x only
PROFILE_OF = {"4.9.8": "rocketmq-4.9", "5.3.3": "rocketmq-5.2", "5.5.0": "rocketmq-5.5", "5.5.1": "rocketmq-5.5"}


def timing_of(version: str) -> list[str]:
    return TIMING_5X if version.startswith("5.") else TIMING


def broker_conf(version: str) -> str:
    """What the model is told: the broker's own file plus the lock lifetime it got as -D."""
    return "\n".join(["brokerClusterName=DefaultCluster", "brokerName=broker-a", "listenPort=10911",
                      "brokerIP1=127.0.0.1", *timing_of(version),
                      f"rocketmq.broker.rebalance.lockMaxLiveTime={LOCK_MS}"])


BROKER_CONF = broker_conf("4.9.8")
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


@pytest.fixture()
def release_brokers(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        list[tuple[RealRocketMQ, Started]]]:
    """The release under test, and with ``INTEROP=full`` (the default) also 5.3.3 and 5.5.1 (with ``5x`` only
    those two): each a fresh
    broker in a namespace of its own, with its version's timing (``timing_of``)."""
    versions = {"quick": [realrmq.version], "5x": list(VERSIONS_5X),
                "full": [realrmq.version, *(v for v in VERSIONS_5X if v != realrmq.version)]}[TIER]
    started: list[tuple[RealRocketMQ, Started]] = []
    try:
        for version in versions:
            real = RealRocketMQ(version)
            done = subprocess.run(real.cmd("resolve", version=True), capture_output=True, text=True, timeout=900,
                                  check=False)
            assert done.returncode == 0, f"cannot resolve RocketMQ {version}: {done.stderr.strip()}"
            storedir = tmp_path_factory.mktemp(f"rmq-conform-{version}")
            started.append((real, real.start(storedir, *timing_of(version),
                                             f"-Drocketmq.broker.rebalance.lockMaxLiveTime={LOCK_MS}")))
        yield started
    finally:
        for real, s in started:
            real.stop(s.dir)


def test_conform_against_real_rocketmq_passes_at_the_wall_clock_default_budget(release_brokers, tmp_path) -> None:
    """Every release at once, each in lockstep with the model of its profile (``PROFILE_OF``): a wall-clock
    run mostly waits (a few seconds of CPU in five minutes), so together they take the time of one."""
    runs = []
    for real, started in release_brokers:
        conf = tmp_path / f"broker-{real.version}.conf"
        conf.write_text(broker_conf(real.version) + "\n")
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
        print(f"RocketMQ {version} ({PROFILE_OF[version]})\n{out}")
        lines = out.splitlines()
        passed = re.match(r"PASS: (\d+) examples in [\d.]+ s", lines[0]) if lines else None
        wall = next((line for line in lines if line.startswith("wall clock:")), "")
        # on 5.x timer messages are among the operations, their fires judged on the wall clock
        timers = not version.startswith("5.") or re.search(r"timer \d+ ms \((\d+) judged\)", wall)
        # on 5.x the pop ladder runs in every example's prelude (properties/conform_pop_wall.py): its rows
        # reach the POP and POP_ORDER tables, and its revives are judged on the wall clock
        pops = not version.startswith("5.") or (
            re.search(r"pop_revive \d+ ms \((\d+) judged\)", wall)
            and all(_reached(out, t) for t in ("pop: READY --pop--> POPPED", "pop: POPPED --revive[expired]--> READY",
                                                "pop_order: IDLE --pop--> INFLIGHT")))
        if proc.returncode != 0 or not passed or int(passed.group(1)) < 12 or "tolerance 500 ms" not in wall \
                or not timers or not pops or len(list(traces.glob("example-*.jsonl"))) < 12:
            failures.append(f"RocketMQ {version}: conform exited {proc.returncode}:\n{out}\n{err[-3000:]}")
    assert failures == [], "\n\n".join(failures)


def _reached(out: str, transition: str) -> bool:
    """The run's coverage report shows ``transition`` taken at least once."""
    line = next((row for row in out.splitlines() if row.strip().startswith(transition)), "")
    count = re.search(r"\s(\d+)(\s|$)", line[line.find(transition) + len(transition):])
    return count is not None and int(count.group(1)) > 0


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
