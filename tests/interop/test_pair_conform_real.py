"""Wall-clock conformance of a real RocketMQ 4.9.8 master/slave pair (issue 43), per master role.

``interop/pair_conform.py`` (rmqspec's own wire client, run on the pair's client host) drives a seeded program of
sends, sends to the slave, reads of either broker, HA-link cuts and heals, waits and master host crashes with the
store kept, then the failover (a stream whose tail is sent with the link cut, the master's host lost); every answer
is judged as it comes by the black-box forms of the HA invariants, and ``properties/inv_ha.check_pair`` judges the
run's pair rows. The pair is ``scripts/real-rocketmq-pair`` with the settings of ``test_ha_real.py``.

Run time about 1-1.5 minutes per role (a pair of three JVMs started in ~15 s; the program, its two master restarts
and the failover 25-40 s): cpu_heavy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rmqspec.properties.inv_replay_ha import judge_pair
from tests.interop.realrmq import VERSION, resolved
from tests.interop.test_ha_real import CONF, PAIR, REPO, SLAVE_TIMEOUT_MS

pytestmark = pytest.mark.cpu_heavy

KEEP = REPO / "build" / "interop-ha"
# seed 38 draws two master crashes, seven sends with the HA link cut and three sends to the slave in 40 steps
SEED, STEPS, FAILOVER_SENDS, TAIL = 38, 40, 12, 4


def _conform(tmp: Path, role: str) -> tuple[int, dict[str, Any], str]:
    resolved(VERSION)
    try:
        done = subprocess.run([str(PAIR), "start", "--version", VERSION, "--dir", str(tmp), "--role", role, *CONF],
                              capture_output=True, text=True, timeout=400, check=False, env={**os.environ})
        assert done.returncode == 0, f"pair start failed:\n{done.stdout}{done.stderr[-4000:]}"
        out, trace = tmp / "pair-conform.json", tmp / "pair-conform.jsonl"
        cmd = [str(PAIR), "exec", "--dir", str(tmp), "--", sys.executable, "-m", "interop.pair_conform",
               "--pair-dir", str(tmp), "--seed", str(SEED), "--steps", str(STEPS), "--failover-sends",
               str(FAILOVER_SENDS), "--tail", str(TAIL), "--slave-timeout-ms", str(SLAVE_TIMEOUT_MS),
               "--json", str(out), "--trace", str(trace)]
        run = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
        log = run.stdout + run.stderr
        (tmp / "pair-conform.out").write_text(log)
        assert run.returncode in (0, 1) and out.exists(), f"pair_conform failed ({run.returncode}):\n{log[-4000:]}"
        KEEP.mkdir(parents=True, exist_ok=True)
        for f in (out, trace):
            shutil.copy(f, KEEP / f"conform-{role}{f.suffix}")
        rows = [json.loads(line) for line in trace.read_text().splitlines()]
        return run.returncode, {**json.loads(out.read_text()), "trace": rows}, log
    finally:
        subprocess.run([str(PAIR), "stop", "--dir", str(tmp)], capture_output=True, timeout=180, check=False)


@pytest.mark.parametrize("role", ["SYNC_MASTER", "ASYNC_MASTER"])
def test_the_real_pair_conforms_through_cuts_crashes_and_failover(role: str, tmp_path: Path) -> None:
    rc, r, log = _conform(tmp_path, role)
    print(f"--- {role} (4.9.8 pair, seed {r['seed']}, {len(r['ops'])} steps, {r['run_s']} s): ops "
          f"{ {op: r['ops'].count(op) for op in sorted(set(r['ops']))} }, answers {r['answers']}; failover: "
          f"{r['lost']} of {r['acked']} acknowledged lost (a tail: {r['lost_is_tail']}), the slave served all it "
          f"had {r['slave_serves_s']} s after the master's loss, a consumer re-reads {r['reread_on_the_slave']} there "
          f"(offset {r['master_offset_before_loss']} on the master, {r['slave_offset_after_loss']} synced); "
          f"{r['rows']} pair rows")
    assert rc == 0 and r["findings"] == [], (r["findings"], log[-3000:])
    ops = set(r["ops"])
    assert {"send", "cut", "heal", "crash", "read_slave"} <= ops, ops  # the program reached every fault
    assert r["acked"] > FAILOVER_SENDS - TAIL and r["slave_serves_s"] is not None and r["slave_serves_s"] <= 5
    # the rows are not vacuous: the slave's copy of one record changed, the replay finds it
    rows = r["trace"]
    found = judge_pair(rows)
    assert [f for f in found if not f.observation] == []
    # the white-box replay of the run's rows sees the same loss (HA_ASYNC_TAIL_LOST: the tail past the slave's end)
    assert sum(len(f.seqs) - 1 for f in found if f.code == "HA_ASYNC_TAIL_LOST") == r["lost"], found
    last = max(i for i, row in enumerate(rows) if row["event"] == "replicate")
    forged = {**rows[last], "detail": {**rows[last]["detail"], "records": [
        [offset, "FORGED"] for offset, _key in rows[last]["detail"]["records"]]}}
    assert "HA_SLAVE_NOT_PREFIX" in {f.code for f in judge_pair([*rows[:last], forged, *rows[last + 1:]])}
    if role == "SYNC_MASTER":
        assert r["lost"] == 0 and {"SEND_OK", "FLUSH_SLAVE_TIMEOUT"} <= set(r["answers"]), r["answers"]
    else:  # the tail sent with the link cut was acknowledged and is lost with the master
        assert r["lost"] >= TAIL and r["lost_is_tail"] and set(r["answers"]) <= {"SEND_OK", "None"}
