"""The conformance machine's inconsistent group in lockstep with real 4.9.8, run INSIDE the fixture's namespace.

``test_filter_group_real.py`` runs ``ip netns exec $RMQ_NETNS python -m tests.interop.filter_group_scenario
BROKER_CONF``. Per case a program — ``init``, six ``send_with_properties`` on T0's two queues, then two
``inconsistent_group`` rounds (each client acting once) with the case's subscriptions (TAG or SQL92, which
one built later), then the clients leaving one by one (``group_leave``) and a round after the group info
went — is replayed through ``RemoteBroker`` in wall-clock mode, in lockstep with the model
configured by BROKER_CONF: both GF clients heartbeat on their own connections and pull without the
subscription flag. Prints one JSON object: per case "PASS" and the rule's coverage, or the failure.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

from rmqspec.properties.adapters import load_factory
from rmqspec.properties.brokerconf import broker_config_from_file
from rmqspec.properties.program import Op, replay
from rmqspec.properties.wallclock import WallOptions

MESSAGES = [(0, "logistics", {"region": "HZ"}), (0, "food", {"region": "SH"}), (1, "Aa", {}),
            (1, "BB", {"region": "HZ"}), (0, "food", {}), (1, "logistics", {})]
# name -> (style: client-1's tag or None (SQL92), client-2's, the later client; SQL92 expressions)
CASES: dict[str, tuple[tuple, tuple[str, str]]] = {
    "tag-tag": (("logistics", "food || Aa", 1), ("a = 1", "b = 2")),
    "tag-tag-older-acts": (("BB", "*", 0), ("a = 1", "b = 2")),
    "sql-sql": ((None, None, 1), ("region = 'HZ'", "TAGS IN ('food', 'Aa') OR region IS NULL")),
    "sql-sql-older-acts": ((None, None, 0), ("region = 'HZ'", "TAGS IN ('food', 'Aa') OR region IS NULL")),
    "tag-sql": (("logistics", None, 1), ("unused", "region = 'SH'")),
    "sql-tag": ((None, "food || Aa", 0), ("region IS NOT NULL", "unused")),
    "bad-sql-never-starts": ((None, None, 0), ("a >", "region = 'HZ'")),
}


LABELS = ("inconsistent_group", "sql92", "group_leave")


def program(style: tuple, exprs: tuple[str, str]) -> list[Op]:
    ops = [Op.of("init", queues=2, retry_max=1, orderly_max=1, flush="SYNC")]
    ops += [Op.of("send_with_properties", topic=0, queue=q, tags=t, props=p) for q, t, p in MESSAGES]
    ops += [Op.of("inconsistent_group", first=exprs[0], second=exprs[1], which=w, n=8, style=style)
            for w in (0, 1)]
    # GF's clients leave: client-1 (client-2 takes every queue, filtered by the subscription the
    # unregister left), then client-2 (the last: its pull in flight is refused), then client-2 again
    # (no member: nothing changes); a round after the group info went, then client-1 leaves again
    ops += [Op.of("send_with_properties", topic=0, queue=q, tags=t, props=p) for q, t, p in MESSAGES[:2]]
    ops += [Op.of("group_leave", which=w, n=8) for w in (0, 1, 1)]
    ops += [Op.of("inconsistent_group", first=exprs[0], second=exprs[1], which=0, n=8, style=style),
            Op.of("group_leave", which=0, n=8)]
    return ops


def main(argv: list[str]) -> int:
    config = broker_config_from_file(argv[0])
    factory = load_factory("rocketmq://127.0.0.1:9876")
    out: dict[str, Any] = {}
    for name, (style, exprs) in CASES.items():
        try:
            m = replay(program(style, exprs), factory, config=config, wall=WallOptions())
            out[name] = {"result": "PASS", "coverage": {k: v for k, v in m.coverage.items() if k.startswith(LABELS)}}
        except BaseException as exc:
            out[name] = {"result": "FAIL", "error": f"{type(exc).__name__}: {exc}"[-3000:],
                         "traceback": traceback.format_exc()[-2000:]}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
