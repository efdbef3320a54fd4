"""``scripts/real-rocketmq`` as the interop tests use it: start, stop, crash, the oracle, the Java programs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "real-rocketmq"
VERSION = os.environ.get("RMQ_VERSION", "4.9.8")  # the broker version under test
V5 = "5.3.3"  # the 5.x broker of INTEROP=full and 5x
RUST = "rust-1.0.0"  # rocketmq-rust, the independent implementation of INTEROP=rust (docs/conformance)
# INTEROP: quick = the 4.9.8 tier, 5x = the 5.x tier, full (the default) = both in one session. CI runs the
# two tiers one after the other (.ci/run), each within its time budget. rust = the rocketmq-rust tier (its
# report's programs, against it and against real 5.3.3), never part of full: it builds the broker from the
# Rust crate registry first
TIER = os.environ.get("INTEROP", "full")
if TIER not in ("quick", "5x", "full", "rust"):
    raise SystemExit(f"INTEROP must be quick, 5x, full or rust, got {TIER!r}")


@attrs.frozen
class Started:
    """A running fixture: its directory and what ``rmq.env`` says of it."""

    dir: Path
    env: dict[str, str]

    @property
    def netns(self) -> str:
        return self.env["RMQ_NETNS"]

    @property
    def broker_pid_file(self) -> Path:
        return self.dir / "broker.pid"

    def in_netns(self, *cmd: str) -> list[str]:
        return list(cmd) if self.netns == "host" else ["ip", "netns", "exec", self.netns, *cmd]


@attrs.frozen
class RealRocketMQ:
    """``scripts/real-rocketmq`` for one RocketMQ version."""

    version: str

    def cmd(self, verb: str, *args: str, version: bool = False) -> list[str]:
        return [str(SCRIPT), verb, *(["--version", self.version] if version else []), *args]

    def start(self, directory: Path, *conf: str) -> Started:
        """Start a name server and a broker in ``directory`` (KEY=VALUE broker.conf lines, -D properties)."""
        done = subprocess.run(self.cmd("start", "--dir", str(directory), *conf, version=True), capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, f"real-rocketmq start failed:\n{done.stdout}{done.stderr[-4000:]}"
        env = dict(line.split("=", 1) for line in (directory / "rmq.env").read_text().splitlines() if "=" in line)
        return Started(directory, env)

    def stop(self, directory: Path, drop_store: bool = True) -> None:
        subprocess.run(self.cmd("stop", "--dir", str(directory)), capture_output=True, timeout=120, check=False)
        if drop_store:
            shutil.rmtree(directory / "store", ignore_errors=True)

    def crash_commands(self, started: Started) -> tuple[str, str]:
        """(crash, restart) shell commands: kill -9 of the broker, then a restart on its store."""
        return (" ".join(self.cmd("kill", "--dir", str(started.dir))),
                " ".join(self.cmd("restart", "--dir", str(started.dir))))

    def crash_options(self, started: Started) -> list[str]:
        """``--crash-cmd`` / ``--restart-cmd`` for ``rmqspec conform``."""
        crash, restart = self.crash_commands(started)
        return ["--crash-cmd", crash, "--restart-cmd", restart]

    def oracle(self, *args: str) -> list[str]:
        return self.cmd("oracle", *args, version=True)

    def java(self, main: str, *args: str) -> list[str]:
        return self.cmd("java", main, *args, version=True)

    def java_scenarios(self, directory: Path, lock_ms: int | None = None) -> list[str]:
        """The Java scenario program (the 4.9.8 client) against the fixture, or the serve, of ``directory``."""
        return self.cmd("scenarios", "--dir", str(directory), *(["--lock-ms", str(lock_ms)] if lock_ms else []))


# The timing of the scenario programs' runs (retry ladder, delays, transaction checks, locks): delay levels
# of 1 s steps, short transaction checks, 5 s broker locks; serve gets the same in its broker.conf.
DELAYS = "1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s"
LOCK_MS, TXN_TIMEOUT_MS, TXN_INTERVAL_MS = 5000, 2000, 3000
SCENARIO_TIMING = [f"messageDelayLevel={DELAYS}", f"transactionTimeOut={TXN_TIMEOUT_MS}",
                   f"transactionCheckInterval={TXN_INTERVAL_MS}", "transactionCheckMax=3", "flushDiskType=SYNC_FLUSH"]
SCENARIO_PROPS = [f"-Drocketmq.broker.rebalance.lockMaxLiveTime={LOCK_MS}"]
# 5.1.0+ writes the op message of a COMMIT / ROLLBACK in batches, up to transactionOpBatchInterval (3000 ms)
# later; with the scenarios' transactionTimeOut of 2000 ms a check round may fall before it and check a
# finished half (fidelity V7). A 1000 ms batch keeps the scenario runs about the rules, not that race.
SCENARIO_5X = ["transactionOpBatchInterval=1000"]


def scenario_conf(version: str) -> list[str]:
    """The broker.conf lines and -D properties of a scenario run against a real broker of ``version``
    (rocketmq-rust follows the 5.x broker: 5.x's)."""
    return [*SCENARIO_TIMING, *(SCENARIO_5X if version.startswith(("5.", "rust-")) else []), *SCENARIO_PROPS]


def scenario_rows(stdout: str) -> dict[str, dict]:
    """A scenario program's JSON lines, by their ``scenario`` name."""
    return {row["scenario"]: row for row in (json.loads(x) for x in stdout.splitlines() if x.startswith("{"))}


def run_program(cmd: list[str], timeout: float = 600) -> tuple[int, str, str]:
    """Run a scenario program in a session of its own; a hung one loses its whole process group."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def run_scenarios(realrmq: RealRocketMQ, storedir: Path, label: str, *names: str) -> dict[str, dict]:
    """Start a broker of ``realrmq``'s version in ``storedir`` (the scenario timing), run the Java scenario
    program's ``names`` against it, stop it; the program's JSON lines by scenario name (kept as
    ``<label>-scenarios.jsonl`` in ``storedir``). Fails, with the program's output, when it exits non-zero
    or a scenario reports an error."""
    started = realrmq.start(storedir, *scenario_conf(realrmq.version))
    try:
        code, out, err = run_program(realrmq.cmd("scenarios", "--dir", str(started.dir), *names))
    finally:
        realrmq.stop(storedir)
    (storedir / f"{label}-scenarios.jsonl").write_text(out)
    rows = scenario_rows(out)
    if code != 0 or "error" in json.dumps(rows):
        raise AssertionError(f"scenarios {' '.join(names)} failed (exit {code}):\n{out[-4000:]}{err[-4000:]}")
    return rows


_SHARED: dict[tuple[str, tuple[str, ...]], dict[str, dict]] = {}


def shared_scenarios(realrmq: RealRocketMQ, tmp_path_factory: Any, label: str, *names: str) -> dict[str, dict]:
    """``run_scenarios`` once per session for (version, names): the modules that read one run share it (the
    scenario ``t`` mostly waits, on a thread of its own beside the others)."""
    key = (realrmq.version, names)
    if key not in _SHARED:
        storedir = tmp_path_factory.mktemp(f"real-{label}-{realrmq.version}")
        _SHARED[key] = run_scenarios(realrmq, storedir, label, *names)
    return _SHARED[key]


def resolved(version: str) -> RealRocketMQ:
    """RocketMQ ``version`` resolved into the jar cache; the session ends (exit 2) when it cannot be."""
    real = RealRocketMQ(version)
    done = subprocess.run(real.cmd("resolve", version=True), capture_output=True, text=True, timeout=900,
                          check=False)
    if done.returncode != 0:
        pytest.exit(f"cannot resolve RocketMQ {version}: {done.stderr.strip()}", returncode=2)
    return real
