"""Interop tier: tests against real Apache RocketMQ from its official release jars, run by ``make interop``.

The fixture is the project's own command, ``scripts/real-rocketmq`` (interop/README.md): it resolves the
release jars of a version from Maven Central into ``build/rocketmq/<version>``, runs a name server and a
broker in a network namespace of their own (root), and runs the store oracle and the Java scenario program
compiled from ``interop/java``. ``make test`` never collects this folder (it passes ``--ignore=tests/interop``):
it needs Maven Central, Java and root. Here a fixture that cannot start is an error, never a skip.

``RMQ_VERSION`` (default 4.9.8) is the broker version the tier runs against. A module that sets
``ALSO_ON_5X = True`` runs its tests once more against RocketMQ 5.3.3 (its tests then read
``realrmq.version``), unless ``INTEROP=quick``.

Tiers (``INTEROP``, ``realrmq.TIER``): ``quick`` runs the 4.9.8 tier (the Makefile leaves the 5.x-only
modules out); ``5x`` runs the 5.x tier only: the modules that set ``TIER_5X = True``, the tests a module
names in ``TIER_5X_TESTS``, and the 5.3.3 runs of the ``ALSO_ON_5X`` modules — everything else is
deselected; ``full`` runs both in one session. ``rust`` runs only the modules that set ``TIER_RUST = True``
(rocketmq-rust's report, docs/conformance/rocketmq-rust.md), which every other tier leaves out.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.interop import goclient
from tests.interop.realrmq import (
    TIER,
    V5,
    VERSION,
    RealRocketMQ,
    Started,
    run_program,
    scenario_conf,
    scenario_rows,
)
from tests.interop.reports import REPORTS


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "realrmq" in metafunc.fixturenames and getattr(metafunc.module, "ALSO_ON_5X", False):
        # the rust tier deselects these modules (pytest_collection_modifyitems): any one version to collect
        versions = {"quick": [VERSION], "5x": [V5], "full": list(dict.fromkeys([VERSION, V5])), "rust": [VERSION]}[TIER]
        metafunc.parametrize("realrmq", versions, indirect=True, scope="module")


@pytest.fixture(scope="session")
def realrmq(request: pytest.FixtureRequest) -> RealRocketMQ:
    """The version under test (or the module's parameter), its jars resolved (the artifact list goes to
    the test log)."""
    real = RealRocketMQ(getattr(request, "param", VERSION))
    done = subprocess.run(real.cmd("resolve", version=True), capture_output=True, text=True, timeout=900,
                          check=False)
    if done.returncode != 0:
        pytest.exit(f"cannot resolve RocketMQ {real.version}: {done.stderr.strip()}", returncode=2)
    print(done.stdout)
    return real


def _once_per_version(tmp_path_factory: pytest.TempPathFactory, label: str,
                      command: Callable[[RealRocketMQ, Started], list[str]],
                      checked: Callable[[int, str, str], dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    """``run(version)``: ``command`` against a real broker of that version started with the scenario timing,
    its rows ``checked``; measured once per version and session, output kept beside the broker's store."""
    done: dict[str, dict[str, Any]] = {}

    def run(version: str) -> dict[str, Any]:
        if version not in done:
            real = RealRocketMQ(version)
            storedir = tmp_path_factory.mktemp(f"real-{label}-{version}")
            try:
                code, out, err = run_program(command(real, real.start(storedir, *scenario_conf(version))))
            finally:
                real.stop(storedir)
            (storedir / f"{label}-scenarios.jsonl").write_text(out)
            (storedir / f"{label}-scenarios.stderr").write_text(err)
            done[version] = checked(code, out, err)
        return done[version]

    return run


def _java_checked(code: int, out: str, err: str) -> dict[str, Any]:
    rows = scenario_rows(out)
    assert code == 0 and "error" not in json.dumps(rows), out[-4000:] + err[-4000:]
    return rows


@pytest.fixture(scope="session")
def java_scenarios_on_real(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory
                           ) -> Callable[[str], dict[str, Any]]:
    """The Java scenario program (4.9.8 client) per broker version (about 75 s each)."""
    return _once_per_version(tmp_path_factory, "java", lambda real, started: real.java_scenarios(started.dir),
                             _java_checked)


@pytest.fixture(scope="session")
def go_scenarios_on_real(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, Any]]:
    """The Go client's scenario program per broker version (about 70 s each)."""
    def command(_real: RealRocketMQ, started: Started) -> list[str]:
        return started.in_netns(*goclient.program(goclient.build(), started.env["RMQ_NAMESRV"],
                                                  started.dir / "go-client.log"))

    return _once_per_version(tmp_path_factory, "go", command, goclient.checked)


def _in_5x_tier(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    if getattr(module, "TIER_5X", False) or item.originalname in getattr(module, "TIER_5X_TESTS", ()):
        return True
    param = getattr(item, "callspec", None)
    return getattr(module, "ALSO_ON_5X", False) and param is not None and param.params.get("realrmq") == V5


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller, or a run without pytest-xdist
        shutil.rmtree(REPORTS, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The tables the tests measured (``report_table``), after the run: under pytest-xdist a worker's
    own output never reaches the terminal."""
    for path in sorted(REPORTS.glob("*.md")) if not hasattr(config, "workerinput") else ():
        terminalreporter.write_sep("-", path.stem)
        terminalreporter.write_line(path.read_text().rstrip())


def _in_rust_tier(item: pytest.Item) -> bool:
    return bool(getattr(getattr(item, "module", None), "TIER_RUST", False))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep = {"5x": _in_5x_tier, "rust": _in_rust_tier}.get(TIER, lambda item: not _in_rust_tier(item))
    dropped = [item for item in items if not keep(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if keep(item)]
    for item in items:
        item.add_marker(pytest.mark.interop)
