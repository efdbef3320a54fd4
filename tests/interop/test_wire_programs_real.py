"""Seeds E14, E15, C11, D9 and E6 against real RocketMQ 4.9.8: ``tests/wire_programs.py``'s drawn programs, the
real broker step for step against the model (4.9.8 only: no ``ALSO_ON_5X``).

The programs run inside the fixture's namespace (``python -m tests.wire_programs '{json}'``), with a
``RemoteBroker`` and one raw connection to the real broker and one ``ModelBroker`` for the whole run (every
example uses fresh topic and group names, so both commitlogs stay alike, OFFSET_MOVED_EVENT records included):

- ``pulls`` (E14, E15): each pull's response code must be what 4.9.8's PullMessageProcessor answers for the model
  store's GetMessageStatus, its remark that status's name, the client's reading of it the model's
  ``PullResult``, and a pull with the commit flag must leave the commitOffset stored (QUERY_CONSUMER_OFFSET)
  whatever the answer. Without retention (its first pass waits a minute and its ages are file mtimes:
  ``tests/interop/test_retention_real.py`` measures it) and without the suspend flag (4.9.8's hold service
  answers a held pull only at its 5 s check);
- ``subscriptions`` (C11): heartbeats of up to three clients with drawn subVersions, topics dropped,
  unregisters, and pulls without the subscription flag: the broker filters with the greatest subVersion's
  subscription, or refuses as the model does;
- ``lookups`` (D9, E6): sends with sleeps of 0 to 3 ms between them (the model's clock set to each store time
  the broker reports), then SEARCH_OFFSET_BY_TIMESTAMP at drawn times: the broker's offset is the model's, and
  the model's is what ``tests/timesearch_rule.py`` allows. One consume-queue file per queue (4.9.8's 300000
  units), so the files' mtimes choose nothing, and without retention.

Each program must reach its outcomes at this budget (``REACHED``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.interop.realrmq import RealRocketMQ

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = 40
REACHED = {
    "pulls": {"FOUND", "NO_MATCHED_MESSAGE", "NO_MESSAGE_IN_QUEUE", "OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY",
              "commit:not_found"},
    "subscriptions": {"older_kept", "newer_replaced", "topic_dropped", "SUBSCRIPTION_NOT_EXIST",
                      "SUBSCRIPTION_NOT_LATEST", "FOUND"},
    # no "exact_tie": a send and its read-back take a millisecond or more, so two units rarely share a store time
    "lookups": {"no_queue", "exact", "before_all", "after_all", "nearer_after", "nearer_before"},
}


@pytest.fixture(scope="module")
def real_runs(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> dict:
    storedir = tmp_path_factory.mktemp("rmq-wire-programs")
    try:
        started = realrmq.start(storedir)
        args = {"programs": sorted(REACHED), "examples": EXAMPLES, "prefix": f"WP{int(time.time()) % 100000}"}
        cmd = started.in_netns(sys.executable, "-m", "tests.wire_programs", json.dumps(args))
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
        lines = done.stdout.strip().splitlines()
        assert done.returncode == 0 and lines, f"programs failed ({done.returncode}): {done.stderr[-3000:]}"
        return json.loads(lines[-1])
    finally:
        realrmq.stop(storedir)


@pytest.mark.parametrize("program", sorted(REACHED))
def test_real_broker_answers_the_drawn_program_as_the_model(real_runs: dict, program: str) -> None:
    run = real_runs[program]
    assert "failed" not in run, run.get("failed")
    assert REACHED[program] <= set(run["reached"]), run["reached"]
