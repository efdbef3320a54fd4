"""rocketmq-rust 1.0.0 against its conformance report (docs/conformance/rocketmq-rust.md), as regression checks.

``make interop INTEROP=rust`` (the tier of ``TIER_RUST`` modules; tests/interop/conftest.py) installs rocketmq-rust's
name server and broker from the Rust crate registry (``scripts/real-rocketmq resolve --version rust-1.0.0``) and runs
every program of the report twice: against rocketmq-rust, where each finding's program must fail (``xfail``, strict,
with the finding's id: a fixed finding turns the run red until the report says so), and against real RocketMQ 5.3.3,
where it must pass (no finding is a checker artefact). Both brokers run with the same broker.conf
(``docs/conformance/rocketmq-rust/broker.conf``, the 5.x conformance timing), each in a network namespace of its own.

- the replayable programs ``docs/conformance/rocketmq-rust/*.prog`` (``rmqspec conform --replay``, profile
  rocketmq-5.2, which stands for 5.2.0 - 5.3.3; rocketmq-rust names itself 5.3.1);
- ``interop/compat_probe.py``'s checks (requests other clients send);
- the SQL92 corner batch of ``test_sql92_real.py`` (``enablePropertyFilter=true``), judged against the model;
- the Java 4.9.8 client's scenario program and the Go client's;
- ``rmqspec store verify`` of rocketmq-rust's store after a clean stop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop import goclient
from tests.interop import test_sql92_real as sql92
from tests.interop.realrmq import RUST, V5, RealRocketMQ, Started, run_program, scenario_conf, scenario_rows
from tests.interop.scenario_compare import V5_CHECK_SLEEP_MS, comparison_table, java_measures

TIER_RUST = True  # the rocketmq-rust tier (INTEROP=rust; tests/interop/conftest.py)

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "docs" / "conformance" / "rocketmq-rust"
CONF = REPORT / "broker.conf"
PROFILE = "rocketmq-5.2"
NAMESRV = "rocketmq://127.0.0.1:9876"


def _conf_lines() -> list[str]:
    """broker.conf's lines for ``real-rocketmq start``: the lock lifetime as the -D both brokers read."""
    lines = [line for line in CONF.read_text().splitlines() if line.strip() and not line.startswith("#")]
    lock = "rocketmq.broker.rebalance.lockMaxLiveTime="
    return [f"-D{line}" if line.startswith(lock) else line for line in lines]


def _finding(path: Path) -> str:
    """The finding id a program file is named for: ``RR-2`` of ``RR-2-orderly-pop-offsets.prog``."""
    return "-".join(path.name.split("-")[:2])


def _started(version: str, directory: Path, *extra: str) -> Started:
    real = RealRocketMQ(version)
    done = subprocess.run(real.cmd("resolve", version=True), capture_output=True, text=True, timeout=3600,
                          check=False)
    assert done.returncode == 0, f"cannot resolve {version}: {done.stderr[-3000:]}"
    return real.start(directory, *_conf_lines(), *extra)


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Started]]:
    """rocketmq-rust and real 5.3.3, both with the report's broker.conf."""
    started: dict[str, Started] = {}
    try:
        for version in (RUST, V5):
            started[version] = _started(version, tmp_path_factory.mktemp(f"report-{version}"))
        yield started
    finally:
        for version, s in started.items():
            RealRocketMQ(version).stop(s.dir, drop_store=False)


def _replay(started: Started, program: Path) -> subprocess.CompletedProcess[str]:
    """``rmqspec conform --replay`` of ``program`` against ``started``, with the options its header's command names
    (``--without pop``, ``--no-lockstep``) and the fixture's kill -9 and restart."""
    header = " ".join(line for line in program.read_text().splitlines() if line.startswith("#"))
    options = [*(["--without", "pop"] if "--without pop" in header else []),
               *(["--no-lockstep"] if "--no-lockstep" in header else [])]
    real = RealRocketMQ(started.env["RMQ_VERSION"])
    cmd = started.in_netns(sys.executable, "-m", "rmqspec.cli", "conform", "--replay", str(program), "--broker",
                           NAMESRV, "--profile", PROFILE, "--config", str(CONF), *options,
                           *real.crash_options(started))
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)


PROGRAMS = sorted(REPORT.glob("*.prog"))  # RR-n-*.prog: a finding's; ok-*.prog: passes on both


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_program_passes_on_real_5x(brokers: dict[str, Started], program: Path) -> None:
    done = _replay(brokers[V5], program)
    assert done.returncode == 0, f"{program.name} on real {V5}:\n{done.stdout}\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("program", [pytest.param(p, id=p.stem, marks=[pytest.mark.xfail(
    strict=True, reason=f"{_finding(p)}: docs/conformance/rocketmq-rust.md")] if p.name.startswith("RR-") else [])
    for p in PROGRAMS])
def test_program_on_rocketmq_rust(brokers: dict[str, Started], program: Path) -> None:
    done = _replay(brokers[RUST], program)
    print(done.stdout)
    assert done.returncode != 2, f"{program.name} could not run:\n{done.stdout}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{program.name} on {RUST}:\n{done.stdout[:3000]}"


PROBES = {"retry_send": "RR-1", "lock_4x": "RR-4", "go_header": "RR-8"}


def _probe(started: Started, check: str) -> dict:
    out = started.dir / f"compat-{check}.json"
    cmd = started.in_netns(sys.executable, "-m", "interop.compat_probe", "--broker", NAMESRV, "--profile", PROFILE,
                           "--checks", check, "--json", str(out))
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    print(done.stdout)
    assert done.returncode in (0, 1), f"compat_probe {check} could not run:\n{done.stdout}\n{done.stderr[-3000:]}"
    return json.loads(out.read_text())


@pytest.mark.parametrize("check", sorted(PROBES))
def test_compat_probe_passes_on_real_5x(brokers: dict[str, Started], check: str) -> None:
    assert _probe(brokers[V5], check)["differences"] == []


@pytest.mark.parametrize("check", [pytest.param(c, marks=pytest.mark.xfail(
    strict=True, reason=f"{PROBES[c]}: docs/conformance/rocketmq-rust.md")) for c in sorted(PROBES)])
def test_compat_probe_on_rocketmq_rust(brokers: dict[str, Started], check: str) -> None:
    assert _probe(brokers[RUST], check)["differences"] == []


def _sql92_corners(started: Started) -> list[str]:
    """test_sql92_real's corner batch (every corner expression on every corner message) against ``started``
    (a broker with enablePropertyFilter=true), each answer compared with the model's."""
    msgs = list(zip(sql92.TAG_VALUES * 4, sql92.CORNER_PROPS, strict=False))
    return sql92.judge_batch(started.netns, sql92.batch_args(1, msgs, sql92.CORNERS))[0]


@pytest.fixture(scope="module")
def filter_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Started]]:
    started: dict[str, Started] = {}
    try:
        for version in (RUST, V5):
            started[version] = _started(version, tmp_path_factory.mktemp(f"sql92-{version}"),
                                        "enablePropertyFilter=true")
        yield started
    finally:
        for version, s in started.items():
            RealRocketMQ(version).stop(s.dir)


def test_sql92_corners_on_real_5x(filter_brokers: dict[str, Started]) -> None:
    assert _sql92_corners(filter_brokers[V5]) == []


@pytest.mark.xfail(strict=True, reason="RR-9: docs/conformance/rocketmq-rust.md")
def test_sql92_corners_on_rocketmq_rust(filter_brokers: dict[str, Started]) -> None:
    differences = _sql92_corners(filter_brokers[RUST])
    print(f"{len(differences)} of {len(sql92.CORNERS)} corner expressions differ:\n" + "\n".join(differences))
    assert differences == []


@pytest.fixture(scope="module")
def java_on_rust(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The Java scenario program (the 4.9.8 client) against rocketmq-rust with the scenario timing."""
    real = RealRocketMQ(RUST)
    storedir = tmp_path_factory.mktemp("java-rust")
    started = real.start(storedir, *scenario_conf(RUST))
    try:
        _code, out, err = run_program(real.java_scenarios(started.dir))
    finally:
        real.stop(storedir)
    (storedir / "java-scenarios.jsonl").write_text(out)
    rows = scenario_rows(out)
    assert set(rows) >= {"setup", "a_retry_dlq", "b_delay", "c_transaction", "d"}, out[-3000:] + err[-3000:]
    return rows


@pytest.mark.parametrize("scenario", ["a_retry_dlq", "b_delay", "c_transaction"])
def test_java_client_scenario_runs_on_rocketmq_rust(java_on_rust: dict[str, dict], scenario: str) -> None:
    assert "error" not in java_on_rust[scenario], java_on_rust[scenario]


def test_java_client_figures_within_the_rules_and_near_real_5x(java_on_rust: dict[str, dict],
                                                               java_scenarios_on_real) -> None:
    """Scenarios (a) to (c): the retry ladder, delays and transaction checks, timed as on real 5.3.3."""
    rows = java_measures(java_on_rust, java_scenarios_on_real(V5), check_sleep_ms=V5_CHECK_SLEEP_MS, locks=False)
    print("\nJava client 4.9.8\n" + comparison_table(rows, f"real {V5}", subject=RUST))
    assert [m for m in rows if not m.ok] == []


@pytest.mark.xfail(strict=True, reason="RR-4: docs/conformance/rocketmq-rust.md")
def test_java_client_locks_queues_on_rocketmq_rust(java_on_rust: dict[str, dict]) -> None:
    assert "error" not in java_on_rust["d"], java_on_rust["d"]["error"][:300]


@pytest.mark.xfail(strict=True, reason="RR-8: docs/conformance/rocketmq-rust.md")
def test_go_client_on_rocketmq_rust(tmp_path_factory: pytest.TempPathFactory) -> None:
    real = RealRocketMQ(RUST)
    storedir = tmp_path_factory.mktemp("go-rust")
    started = real.start(storedir, *scenario_conf(RUST))
    try:
        code, out, err = run_program(started.in_netns(*goclient.program(goclient.build(), started.env["RMQ_NAMESRV"],
                                                                        storedir / "go-client.log")))
    finally:
        real.stop(storedir)
    print(out[-2000:])
    goclient.checked(code, out, err)


# broker.conf keys of the Java broker that rocketmq-rust's Java-properties reader refuses (the broker does not start)
REFUSED_KEYS = ("transactionTimeOut=2000", "diskMaxUsedSpaceRatio=95", "serverWorkerThreads=4",
                "serverSelectorThreads=1")


@pytest.mark.xfail(strict=True, reason="RR-11: docs/conformance/rocketmq-rust.md")
@pytest.mark.parametrize("line", REFUSED_KEYS)
def test_java_broker_conf_keys_start_rocketmq_rust(brokers: dict[str, Started], tmp_path: Path, line: str) -> None:
    """The broker reads a broker.conf of one Java key (``-p``: print the configuration and exit), as BrokerStartup
    of every Java release does: these four are the Java broker's own, and real 5.3.3 started in ``brokers`` with
    all of them (the fixture's defaults and the report's broker.conf)."""
    cache = Path(os.environ.get("RMQSPEC_CACHE") or REPO / "build" / "rocketmq")
    conf = tmp_path / "broker.conf"
    conf.write_text(line + "\n")
    done = subprocess.run([str(cache / RUST / "bin" / "rocketmq-broker-rust"), "-c", str(conf), "-p"],
                          env={**os.environ, "ROCKETMQ_HOME": str(tmp_path)}, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-500:]


def _verify(store: Path) -> dict:
    """``rmqspec store verify --json`` with the report's delay levels (a SCHEDULE_TOPIC_XXXX unit's tagsCode is its
    delivery time by those levels)."""
    levels = next(line.split("=", 1)[1] for line in CONF.read_text().splitlines()
                  if line.startswith("messageDelayLevel="))
    done = subprocess.run([sys.executable, "-m", "rmqspec.cli", "store", "verify", str(store), "--json",
                           "--delay-levels", levels], cwd=REPO, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode in (0, 1), f"store verify could not read {store}:\n{done.stderr[-2000:]}"
    return json.loads(done.stdout)


def test_rocketmq_rust_writes_rocketmq_s_commitlog_and_consume_queues(brokers: dict[str, Started]) -> None:
    """After the programs ran (this test runs last in the module), a clean stop of both brokers: real 5.3.3's store
    verifies clean, and every finding on rocketmq-rust's is its timer checkpoint's (RR-10, its own timer store)."""
    reports = {}
    for version, started in brokers.items():
        RealRocketMQ(version).stop(started.dir, drop_store=False)
        reports[version] = _verify(started.dir / "store")
        print(version, json.dumps(reports[version]["stats"]))
    assert reports[V5]["findings"] == [] and reports[V5]["stats"]["records"] > 0
    assert reports[RUST]["stats"]["records"] > 0 and reports[RUST]["stats"]["cq_units"] > 0
    assert [f for f in reports[RUST]["findings"] if f["file"] != "config/timercheck"] == []
