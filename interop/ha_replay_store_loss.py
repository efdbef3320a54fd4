"""Replay: a 4.9.8 SYNC_MASTER whose store was lost acknowledges sends its slave never receives (issue 43).

    scripts/real-rocketmq-pair start --version 4.9.8 --dir /tmp/p --role SYNC_MASTER
    scripts/real-rocketmq-pair exec --dir /tmp/p -- .venv/bin/python -m interop.ha_replay_store_loss --pair-dir /tmp/p
    scripts/real-rocketmq-pair stop --dir /tmp/p

Theory of operation
-------------------
On a running pair (``scripts/real-rocketmq-pair``, run from the pair's client host): five sends to the master
(SEND_OK: the slave acknowledged them), the master's host crashed (``kill --host``), its store deleted
(``drop-store``), the master restarted empty. The slave reconnects and reports its log end, beyond the empty
master's; the master takes it for the slave's acknowledged offset, so a send is answered SEND_OK at once
while the slave's log never moves (the master transfers from the reported offset, where it has nothing).
Prints one JSON line per step and exits 1 when the behaviour is seen (an acknowledged SYNC_MASTER send that
the slave does not hold), 0 when it is not. docs/ha-facts.md ("A lost master store") explains it;
``tests/interop/test_ha_real.py::test_store_loss_per_role`` asserts it on both master roles.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from interop.ha_probe import REPO, Pair
from rmqspec.remoting import client_ops as ops


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pair-dir", required=True)
    p.add_argument("--pair-script", default=str(REPO / "scripts" / "real-rocketmq-pair"))
    a = p.parse_args(argv)
    pair = Pair(Path(a.pair_dir).resolve(), Path(a.pair_script))
    pair.ask("master", ops.create_topic_request(pair.topic, 1))
    before = [pair.send("master", f"before-{i}")["code"] for i in range(5)]
    pair.until(lambda: pair.log_end("slave") == pair.log_end("master"), 30)
    print(json.dumps({"step": "sent", "codes": before, "master_log_end": pair.log_end("master"),
                      "slave_log_end": pair.log_end("slave")}))
    pair.fault("kill", "--host", "master")
    pair.fault("drop-store", "master")
    pair.fault("restart", "master")
    pair.ask("master", ops.create_topic_request(pair.topic, 1))
    slave_end = pair.log_end("slave")
    waited = pair.until(lambda: pair.send("master", "probe")["code"] == 0, 30, 1.0)
    sent = pair.send("master", "after-loss")
    time.sleep(3)
    seen = {"step": "after the loss", "role": pair.env["RMQ_ROLE"], "send": sent["code"], "waited_s": waited,
            "master_log_end": pair.log_end("master"), "slave_log_end_before": slave_end,
            "slave_log_end_after": pair.log_end("slave"), "slave_has_it": "after-loss" in pair.read_all("slave")}
    print(json.dumps(seen))
    return 1 if sent["code"] == 0 and not seen["slave_has_it"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
