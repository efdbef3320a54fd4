"""Timer messages (5.x) against real RocketMQ 5.3.3 and 4.9.8 and against ``rmqspec serve --profile rocketmq-5.2``.

Each broker is started once per module (``scripts/real-rocketmq start`` with ``timerPrecisionMs=100``,
``timerMaxDelaySec=60``, SYNC_FLUSH; a second 5.3.3 with ``timerWheelEnable=false``; 4.9.8 with the same
keys, which it does not know) and measured by the reusable probe ``interop/timer_probe.py`` (rmqspec's own
wire client), run inside the fixture's network namespace; ``rmqspec serve`` (its default broker, the mmap
store) gets the same broker.conf keys on the host's loopback and is killed -9 and restarted on its store for
the crash check. The tests assert the facts ``model/timer.py`` models, first on the real broker (what
RocketMQ does), then on serve (the probe's own comparison with the model: no difference), then side by
side. The one difference found (fullwidth digits, ``test_unicode_digits``) was fixed in the model
(docs/fidelity.md TM-4).

Timing: lateness is judged "never before the requested time" and "at most LATE_MS after the slot's
end" (measured on 5.3.3 at precision 100: 6-64 ms; the tolerance leaves room for a busy 2-core machine).
Run time about 100 s (three real brokers' start-ups and stops ~45 s, the crash checks ~15 s).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.interop.realrmq import V5, Started, resolved

REPO = Path(__file__).resolve().parents[2]
V4 = "4.9.8"
TIMER_CONF = ["timerPrecisionMs=100", "timerMaxDelaySec=60", "flushDiskType=SYNC_FLUSH"]
DISABLED_CONF = ["timerWheelEnable=false", *TIMER_CONF]
ALL_CHECKS = "lateness,refusals,delay_wins,not_after_now,batch,txn_commit"
LATE_MS = 1000  # the latest acceptable re-put after TIMER_OUT_MS + precision
ILLEGAL = ("timer message illegal, the delay time should not be bigger than the max delay 60000ms; "
           "or if set del msg, the delay time should be bigger than the current time")
NOT_ENABLED = "accurate timer message is not enabled, timerWheelEnable is false"
REFUSED = {"sec_over_max", "ms_over_max", "deliver_over_max", "ms_text", "deliver_decimal", "sec_blank"}
TIMED = {"valid_delay_ms", "ms_plus_sign"}

TIER_5X = True  # the 5.x tier (INTEROP=5x; tests/interop/conftest.py)


def _probe(cmd_prefix: list[str], namesrv: str, profile: str, out: Path, checks: str, *extra: str) -> dict[str, Any]:
    cmd = [*cmd_prefix, sys.executable, "-m", "interop.timer_probe", "--broker", f"rocketmq://{namesrv}",
           "--profile", profile, "--checks", checks, "--json", str(out), *extra]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, f"timer probe failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
    (out.parent / f"{out.stem}.report.txt").write_text(done.stdout)
    print(done.stdout)
    return json.loads(out.read_text())



def _on_real(tmp: Path, version: str, conf: list[str], profile: str, checks: str, crash: bool) -> dict[str, Any]:
    real = resolved(version)
    try:
        started: Started = real.start(tmp, *conf)
        extra: list[str] = []
        if crash:
            kill, restart = real.crash_commands(started)
            extra = ["--crash-cmd", kill, "--restart-cmd", restart]
        prefix = [] if started.netns == "host" else ["ip", "netns", "exec", started.netns]
        return _probe(prefix, started.env["RMQ_NAMESRV"], profile, tmp / "probe.json",
                      checks + (",crash" if crash else ""), *extra)
    finally:  # a kill first: the store is thrown away, a clean 5.3.3 shutdown takes ~10 s
        subprocess.run(real.cmd("kill", "--dir", str(tmp)), capture_output=True, timeout=60, check=False)
        real.stop(tmp)


class Serve:
    """``rmqspec serve`` on free loopback ports, restartable on its store (the crash check's commands)."""

    def __init__(self, root: Path, conf: list[str]) -> None:
        self.root = root
        (root / "broker.conf").write_text("brokerIP1=127.0.0.1\n" + "".join(f"{line}\n" for line in conf))
        self.pid_file = root / "serve.pid"
        self.log = root / "serve.log"

    def argv(self, namesrv_port: int, port: int) -> list[str]:
        return [sys.executable, "-m", "rmqspec.cli", "serve", "--store", str(self.root / "store"), "--config",
                str(self.root / "broker.conf"), "--profile", "rocketmq-5.2", "--namesrv-port", str(namesrv_port),
                "--port", str(port)]

    def start(self) -> str:
        with self.log.open("a") as log:
            self.proc = proc = subprocess.Popen(self.argv(0, 0), cwd=REPO, stdout=subprocess.PIPE, stderr=log,
                                                text=True)
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert "ready" in ready, ready
        self.pid_file.write_text(str(proc.pid))
        self.namesrv = ready.split("namesrv=", 1)[1].split()[0]
        broker = ready.split("broker=", 1)[1].split()[0]
        self.ports = (int(self.namesrv.rsplit(":", 1)[1]), int(broker.rsplit(":", 1)[1]))
        return self.namesrv

    def crash_options(self) -> list[str]:
        restart = " ".join(self.argv(*self.ports))
        return ["--crash-cmd", f"kill -9 $(cat {self.pid_file})",
                "--restart-cmd", f"cd {REPO} && ({restart} >> {self.log} 2>&1 < /dev/null & echo $! > {self.pid_file})"]

    def stop(self) -> None:
        try:
            pid = int(self.pid_file.read_text())
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            pid = -1
        if self.proc.poll() is None or pid == self.proc.pid:  # our child (else reaped by init once it exits)
            try:
                self.proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate(timeout=30)
        if pid in (-1, self.proc.pid):
            return
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                return
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)


def _on_serve(tmp: Path, conf: list[str], checks: str, crash: bool) -> dict[str, Any]:
    serve = Serve(tmp, conf)
    try:
        namesrv = serve.start()
        return _probe([], namesrv, "rocketmq-5.2", tmp / "probe.json", checks + (",crash" if crash else ""),
                      *(serve.crash_options() if crash else []))
    finally:
        serve.stop()


@pytest.fixture(scope="module")
def real5(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _on_real(tmp_path_factory.mktemp("timer-real5"), V5, TIMER_CONF, "rocketmq-5.2", ALL_CHECKS, crash=True)


@pytest.fixture(scope="module")
def real5_disabled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _on_real(tmp_path_factory.mktemp("timer-real5-off"), V5, DISABLED_CONF, "rocketmq-5.2",
                    "refusals,not_after_now,delay_wins,batch,txn_commit", crash=False)


@pytest.fixture(scope="module")
def real4(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _on_real(tmp_path_factory.mktemp("timer-real4"), V4, TIMER_CONF, "rocketmq-4.9", ALL_CHECKS, crash=False)


@pytest.fixture(scope="module")
def serve5(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _on_serve(tmp_path_factory.mktemp("timer-serve5"), TIMER_CONF, ALL_CHECKS, crash=True)


@pytest.fixture(scope="module")
def serve5_disabled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _on_serve(tmp_path_factory.mktemp("timer-serve5-off"), DISABLED_CONF,
                     "refusals,not_after_now,delay_wins,batch,txn_commit", crash=False)


def _timer_facts(result: dict[str, Any], *, recall_handle: bool) -> None:
    """What 5.x does with a timer send at precision 100 (model/timer.py), asserted on one broker."""
    x = result["checks"]["lateness"]
    assert x["sent"] == x["accepted"] == x["fired"] == x["timed"] == 30, x
    # TIMER_OUT_MS = the largest multiple of the precision strictly below the requested time
    assert x["out_rule_agrees"] == 30 and x["exact_multiples"] == x["exact_multiples_rounded_below"] > 0, x
    # never early: not before the requested time, not before the slot's end (TIMER_OUT_MS + precision)
    assert x["early"] == [] and x["before_due"] == [] and x["late_vs_due_ms"]["min"] >= 0, x
    assert x["late_vs_due_ms"]["max"] <= LATE_MS, x["late_vs_due_ms"]
    assert x["duplicates"] == 0
    # the fired copy: in the queue asked for, REAL_TOPIC / REAL_QID still there, enqueue and dequeue times
    assert x["fired_in_real_queue"] == x["real_qid_as_sent"] == x["request_prop_kept"] == 30
    assert set(x["fired_props"].values()) == {30}, x["fired_props"]
    # the answer: the queue asked for, the timer copy's offsets (rmq_sys_wheel_timer queue 0)
    assert x["answer_queue_id_as_sent"] == x["answer_is_timer_copy"] == 30
    assert x["recall_handles"] == (30 if recall_handle else 0)
    cases = result["checks"]["refusals"]["cases"]
    for name in REFUSED:
        assert (cases[name]["went"], cases[name]["code"], cases[name]["remark"]) == ("refused", 13, ILLEGAL), name
    for name in TIMED:
        assert (cases[name]["went"], cases[name]["code"]) == ("timer", 0), name
    for row in result["checks"]["delay_wins"]["rows"]:  # DELAY=1 wins; the timer properties are dropped
        assert row["code"] == 0 and row["copies"] == 1 and row["timer_props_left"] == [], row
        assert row["after_send_ms"] >= 1000 - 50, row  # measured from the send's start (the broker stored it after)
    for row in result["checks"]["not_after_now"]["rows"]:  # stored at once, as it is, in its own topic
        assert row["code"] == 0 and row["stored_at_once"] and row["props_kept"] and row["out"] is None, row
    batch = result["checks"]["batch"]  # the hook reads the batch's properties, never an item's
    assert batch["item_properties"]["timed"] == [False, False] and batch["item_properties"]["code"] == 0
    assert batch["batch_properties"]["timed"] == [True, True]
    txn = result["checks"]["txn_commit"]  # the half is timed into the half topic; the commit lands there
    assert txn["half_timed"] and txn["half_real_topic"] == "RMQ_SYS_TRANS_HALF_TOPIC" and txn["commit_code"] == 0
    assert txn["in_business_topic"] == [] and [c["sys_flag"] for c in txn["in_half_topic"]] == [8, 0], txn
    crash = result["checks"]["crash"]  # kill -9: every pending one fires, none early; at-least-once
    assert crash["lost"] == [] and crash["early"] == [], crash
    # only a copy that fired before the kill fires again (the checkpoint lags by up to timerFlushIntervalMs)
    assert all(ms <= 0 for ms in crash["duplicated_first_vs_killed_ms"].values()), crash


def test_real_5_3_3_times_messages_as_modelled(real5: dict[str, Any]) -> None:
    _timer_facts(real5, recall_handle=True)  # 5.3.2+: SendMessageProcessor.attachRecallHandle
    assert real5["settings"] == {"enabled": True, "precision_ms": 100, "max_delay_sec": 60,
                                 "config_has_timer_keys": True}
    assert real5["differences"] == [], real5["differences"]


def test_serve_times_messages_as_real_5_3_3(serve5: dict[str, Any], real5: dict[str, Any]) -> None:
    _timer_facts(serve5, recall_handle=False)  # docs/fidelity.md: serve answers no recallHandle
    assert serve5["differences"] == [], serve5["differences"]
    assert serve5["settings"] == real5["settings"]
    for name, case in real5["checks"]["refusals"]["cases"].items():
        served = serve5["checks"]["refusals"]["cases"][name]
        assert (served["went"], served["code"], served["remark"]) == (case["went"], case["code"], case["remark"])


def test_unicode_digits(real5: dict[str, Any], serve5: dict[str, Any]) -> None:
    """TIMER_DELAY_MS="１５００" (fullwidth digits): 5.3.3 times it (Long.parseLong accepts any Unicode
    decimal digit, Character.digit), and so do the model and serve (docs/fidelity.md TM-4)."""
    real = real5["checks"]["refusals"]["cases"]["ms_unicode_digits"]
    served = serve5["checks"]["refusals"]["cases"]["ms_unicode_digits"]
    assert (real["went"], real["code"]) == (served["went"], served["code"]) == ("timer", 0)


def _disabled_facts(result: dict[str, Any]) -> None:
    for name, case in result["checks"]["refusals"]["cases"].items():  # refused before anything is parsed
        assert (case["went"], case["code"], case["remark"]) == ("refused", 1, NOT_ENABLED), name
    for row in result["checks"]["not_after_now"]["rows"]:
        assert (row["code"], row["remark"]) == (1, NOT_ENABLED), row
    for row in result["checks"]["delay_wins"]["rows"]:  # a delay level is no timer message
        assert row["code"] == 0 and row["copies"] == 1 and row["timer_props_left"] == [], row
    batch = result["checks"]["batch"]
    assert batch["item_properties"]["code"] == 0 and batch["item_properties"]["fired"] == 2
    assert (batch["batch_properties"]["code"], batch["batch_properties"]["remark"]) == (1, NOT_ENABLED)
    assert result["checks"]["txn_commit"]["half_refused"] == [1, NOT_ENABLED]


def test_a_disabled_wheel_refuses_timer_messages(real5_disabled: dict[str, Any],
                                                 serve5_disabled: dict[str, Any]) -> None:
    _disabled_facts(real5_disabled)
    _disabled_facts(serve5_disabled)
    assert real5_disabled["differences"] == [] and serve5_disabled["differences"] == []


def test_real_4_9_8_ignores_timer_properties(real4: dict[str, Any]) -> None:
    assert not real4["settings"]["config_has_timer_keys"]
    x = real4["checks"]["lateness"]
    assert x["sent"] == x["accepted"] == x["fired"] == 30 and x["timed"] == 0 and x["request_prop_kept"] == 30
    assert x["late_vs_send_ms"]["max"] <= 500 and x["answer_is_timer_copy"] == 0, x["late_vs_send_ms"]
    assert {c["went"] for c in real4["checks"]["refusals"]["cases"].values()} == {"as_is"}
    for row in real4["checks"]["delay_wins"]["rows"]:  # ordinary user properties: kept on the delayed copy
        assert row["code"] == 0 and row["timer_props_left"] == sorted(row["props"]), row
    batch = real4["checks"]["batch"]
    assert batch["item_properties"]["timed"] == batch["batch_properties"]["timed"] == [False, False]
    txn = real4["checks"]["txn_commit"]
    assert not txn["half_timed"] and len(txn["in_business_topic"]) == 1
    assert real4["differences"] == []
