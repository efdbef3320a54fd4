"""The conformance machine's inconsistent group (properties/filters.py) against real RocketMQ 4.9.8.

A fresh broker with ``enablePropertyFilter=true`` and the conformance timing; ``filter_group_scenario.py``
replays, inside the fixture's namespace, one short program per subscription mix (TAG/TAG, SQL92/SQL92,
TAG/SQL92, SQL92/TAG, a SQL92 that does not compile) in wall-clock lockstep with the model: both GF
clients heartbeat on their own connections, pull without the subscription flag and keep what the Java
client keeps; then the clients leave (UNREGISTER_CLIENT). Every case must pass, and the rules must have seen
a client filtered by the other client's subscription, the TAG re-check dropping messages, a client that
never starts, a client taking the leaver's queues, the last leaver's pull refused and a non-member leaving.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.interop.realrmq import RealRocketMQ

REPO = Path(__file__).resolve().parents[2]
DELAYS = "1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s"
TIMING = [f"messageDelayLevel={DELAYS}", "transactionTimeOut=2000", "transactionCheckInterval=3000",
          "transactionCheckMax=3", "flushDiskType=SYNC_FLUSH", "enablePropertyFilter=true"]
BROKER_CONF = "\n".join(["brokerClusterName=DefaultCluster", "brokerName=broker-a", "listenPort=10911",
                         "brokerIP1=127.0.0.1", *TIMING, "rocketmq.broker.rebalance.lockMaxLiveTime=5000"])


def test_inconsistent_group_in_lockstep_with_real_rocketmq(realrmq: RealRocketMQ, tmp_path: Path) -> None:
    storedir = tmp_path / "rmq"
    storedir.mkdir()
    try:
        started = realrmq.start(storedir, *TIMING, "-Drocketmq.broker.rebalance.lockMaxLiveTime=5000")
        conf = tmp_path / "broker.conf"
        conf.write_text(BROKER_CONF + "\n")
        cmd = started.in_netns(sys.executable, "-m", "tests.interop.filter_group_scenario", str(conf))
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    finally:
        realrmq.stop(storedir)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"scenario failed ({done.returncode}): {done.stderr[-3000:]}"
    cases = json.loads(lines[-1])
    failed = {name: c for name, c in cases.items() if c["result"] != "PASS"}
    assert not failed, json.dumps(failed, indent=1)
    seen: dict[str, int] = {}
    for c in cases.values():
        for key, n in c["coverage"].items():
            seen[key] = seen.get(key, 0) + n
    for wanted in ("inconsistent_group:filtered_by_other", "inconsistent_group:client_dropped",
                   "inconsistent_group:start_refused", "inconsistent_group:FOUND", "sql92:FOUND",
                   "group_leave:rebalanced", "group_leave:last", "group_leave:stale_pull_refused",
                   "group_leave:not_member"):
        assert seen.get(wanted, 0) > 0, (wanted, seen)
