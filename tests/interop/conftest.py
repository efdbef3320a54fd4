"""Interop tier: tests against real Apache RocketMQ from its official release jars, run by ``make interop``.

The fixture is the project's own command, ``scripts/real-rocketmq`` (interop/README.md): it resolves the
release jars of a version from Maven Central into ``build/rocketmq/<version>``, runs a name server and a
broker in a network namespace of their own (root), and runs the store oracle and the Java scenario program
compiled from ``interop/java``. ``make test`` never collects this folder (it passes ``--ignore=tests/interop``):
it needs Maven Central, Java and root. Here a fixture that cannot start is an error, never a skip.

``RMQ_VERSION`` (default 4.9.8) is the broker version the tier runs against. A module that sets
``ALSO_ON_5X = True`` runs its tests once more against RocketMQ 5.3.3 (its tests then read
``realrmq.version``), unless ``INTEROP=quick``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.interop import goclient
from tests.interop.realrmq import (
    V5,
    VERSION,
    RealRocketMQ,
    run_program,
    scenario_conf,
    scenario_rows,
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "realrmq" in metafunc.fixturenames and getattr(metafunc.module, "ALSO_ON_5X", False):
        versions = [VERSION] if os.environ.get("INTEROP") == "quick" or VERSION == V5 else [VERSION, V5]
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


@pytest.fixture(scope="session")
def java_scenarios_on_real(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory
                           ) -> Callable[[str], dict[str, Any]]:
    """``run(version)``: the Java scenario program (4.9.8 client) against a real broker of that version
    started with the scenario timing; measured once per version and session (about 75 s each)."""
    done: dict[str, dict[str, Any]] = {}

    def run(version: str) -> dict[str, Any]:
        if version not in done:
            real = RealRocketMQ(version)
            storedir = tmp_path_factory.mktemp(f"real-java-{version}")
            try:
                real.start(storedir, *scenario_conf(version))
                code, out, err = run_program(real.java_scenarios(storedir))
            finally:
                real.stop(storedir)
            (storedir / "scenarios.jsonl").write_text(out)
            rows = scenario_rows(out)
            assert code == 0 and "error" not in json.dumps(rows), out[-4000:] + err[-4000:]
            done[version] = rows
        return done[version]

    return run


@pytest.fixture(scope="session")
def go_scenarios_on_real(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, Any]]:
    """``run(version)``: the Go client's scenario program against a real broker of that version started
    with the scenario timing; measured once per version and session (about 70 s each)."""
    done: dict[str, dict[str, Any]] = {}

    def run(version: str) -> dict[str, Any]:
        if version not in done:
            binary = goclient.build()
            real = RealRocketMQ(version)
            storedir = tmp_path_factory.mktemp(f"real-go-{version}")
            try:
                started = real.start(storedir, *scenario_conf(version))
                code, out, err = run_program(started.in_netns(
                    *goclient.program(binary, started.env["RMQ_NAMESRV"], storedir / "go-client.log")))
            finally:
                real.stop(storedir)
            (storedir / "go-scenarios.jsonl").write_text(out)
            (storedir / "go-scenarios.stderr").write_text(err)
            done[version] = goclient.checked(code, out, err)
        return done[version]

    return run


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.interop)
