"""Measurement behind docs/fidelity.md O1/O2: what 4.9.8's check service does after a kill -9.

Theory of operation
-------------------
One half (producer group ``PG_<mode>``) on a running fixture broker, driven through ``RemoteBroker``:

- ``A``: never answered; after its three checks and the discard, kill -9 at once, restart, watch 14 s;
- ``B``: the same, but wait 6 s (> flushConsumerOffsetInterval) after the discard before the kill;
- ``C``: the first check answered COMMIT, kill -9 at once, restart; a client of another producer group
  watches the half queue and the checks it receives.

Prints one line per event (wall ms first). Run inside the fixture's namespace, from a repository checkout::

    ip netns exec $RMQ_NETNS .venv/bin/python docs/fidelity-o1-o2/kill_after_round.py STOREDIR REPO A|B|C

Outputs of 2026-11-22 (one broker, modes run C, B, A in turn): ``run-*.txt`` beside this file; they come
from a first draft that also printed consumerOffset.json (not JSON: fastjson writes bare integer keys, so
those lines show a decode error) and the half's UNIQ_KEY table.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from rmqspec.model.clock import WallClock
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.results import TxnAction
from rmqspec.remoting.adapter import RemoteBroker

HALF = MessageQueue("RMQ_SYS_TRANS_HALF_TOPIC", 0)
DISC = MessageQueue("TRANS_CHECK_MAX_TIME_TOPIC", 0)


def log(*parts: Any) -> None:
    print(time.time_ns() // 1_000_000, *parts, flush=True)


def queue(b: RemoteBroker, mq: MessageQueue) -> tuple[int, Any]:
    """max offset and (queue offset, store ts, TRANSACTION_CHECK_TIMES, key tail) of each message."""
    try:
        r = b.pull("OBS", mq, 0, 32, "*")
    except Exception as exc:  # the topic does not exist yet
        return 0, repr(exc)[:60]
    return r.max_offset, [(m.queue_offset, m.store_ts, m.properties.get("TRANSACTION_CHECK_TIMES"), m.uniq_key[-4:])
                          for m in r.messages]


def watch(b: RemoteBroker, secs: float, answer: TxnAction | None = None) -> list[Any]:
    end = time.monotonic() + secs
    seen = []
    while time.monotonic() < end:
        for _at, c in b.tick_timed():
            seen.append(c)
            log("CHECK", c.message.uniq_key[-4:], c.message.properties.get("TRANSACTION_CHECK_TIMES"),
                c.tran_state_table_offset)
            if answer is not None:
                code = b.end_transaction(c.producer_group, c.commitlog_offset, c.tran_state_table_offset, answer, True)
                log("answer", answer, code)
        time.sleep(0.05)
    return seen


def main(sd: str, repo: str, mode: str) -> None:
    restart = f"{repo}/scripts/real-rocketmq restart --dir {sd}"  # reuses the -D properties given to start
    b = RemoteBroker("127.0.0.1:9876", WallClock(), crash_cmd=f"{repo}/scripts/real-rocketmq kill --dir {sd}",
                     restart_cmd=restart, producer_group="PG_" + mode)
    b.create_topic("XT", 1)
    b.create_group("OBS")
    h = b.send_half(Message("XT", b"h-" + mode.encode()), 0, "PG_" + mode)
    log("half", h.commitlog_offset, h.queue_offset)
    if mode in ("A", "B"):
        n0 = queue(b, DISC)[0]
        while queue(b, DISC)[0] == n0:
            watch(b, 0.3)
        log("discarded", queue(b, DISC))
        if mode == "B":
            watch(b, 6.0)
        b.crash("kill")
        b.recover()
        log("recovered")
        watch(b, 14.0)
        log("discard topic after", queue(b, DISC))
        return
    seen: list[Any] = []
    while not seen:
        seen = watch(b, 0.3, TxnAction.COMMIT)
    log("half queue before kill", queue(b, HALF))
    b.crash("kill")
    subprocess.run(restart, shell=True, check=True)
    b2 = RemoteBroker("127.0.0.1:9876", WallClock(), producer_group="PG_OTHER")
    b2.create_group("OBS")
    log("restarted; half queue", queue(b2, HALF))
    checks = watch(b2, 14.0)
    log("half queue after", queue(b2, HALF))
    log("discard topic after", queue(b2, DISC))
    log("checks to other", len(checks))


if __name__ == "__main__":
    main(*sys.argv[1:4])
