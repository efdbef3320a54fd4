"""Scenario fixtures: every scenario runs against every broker in ``BROKERS``.

``BROKERS`` maps a name to a factory ``(clock, config, workdir) -> Broker``.
Scenarios use only the ``Broker`` protocol, so the mmap broker joins by adding
one entry here. ``make_broker(config)`` builds one with a non-default config;
``crashable`` lists the entries that declare ``Capability.CRASH``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rmqspec.impl.broker import factory as mmap_factory
from rmqspec.impl.verify import verify_store
from rmqspec.model import BrokerConfig, Capability, ManualClock, factory

Factory = Callable[[Any, BrokerConfig, Path], Any]

# Stores the mmap factory opened during the current test: (workdir, delay levels).
MMAP_STORES: list[tuple[Path, tuple[int, ...]]] = []


def mmap(clock: Any, config: BrokerConfig, workdir: Path) -> Any:
    """The MmapBroker; its store directory is verified after the test (``_verify_mmap_stores``)."""
    MMAP_STORES.append((Path(workdir), config.delay_levels_ms))
    return mmap_factory(clock, config, workdir)


BROKERS: dict[str, Factory] = {
    "model": factory,
    "mmap": mmap,
}

START_MS = 1_700_000_000_000  # 2023-11-14, any fixed instant works


def _capabilities(name: str, tmp: Path) -> frozenset[Capability]:
    broker = BROKERS[name](ManualClock(START_MS), BrokerConfig(), tmp)
    caps = frozenset(broker.capabilities)
    broker.close()
    return caps


def crashable_names(tmp: Path) -> list[str]:
    return [name for name in sorted(BROKERS) if Capability.CRASH in _capabilities(name, tmp)]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture(params=sorted(BROKERS))
def broker_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_broker(broker_name: str, clock: ManualClock, tmp_path: Path) -> Callable[..., Any]:
    made: list[Any] = []

    def make(config: BrokerConfig | None = None) -> Any:
        workdir = tmp_path / f"broker{len(made)}"
        workdir.mkdir()
        broker = BROKERS[broker_name](clock, config or BrokerConfig(), workdir)
        made.append(broker)
        return broker

    return make


@pytest.fixture
def broker(make_broker: Callable[..., Any]) -> Any:
    return make_broker()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``crash_broker_name`` is parametrized over the brokers with the CRASH capability."""
    if "crash_broker_name" in metafunc.fixturenames:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            names = crashable_names(Path(tmp))
        metafunc.parametrize("crash_broker_name", names)


@pytest.fixture
def make_crash_broker(
    crash_broker_name: str, clock: ManualClock, tmp_path: Path
) -> Callable[..., Any]:
    def make(config: BrokerConfig | None = None) -> Any:
        return BROKERS[crash_broker_name](clock, config or BrokerConfig(), tmp_path)

    return make


@pytest.fixture(autouse=True)
def _verify_mmap_stores() -> Any:
    """After every scenario, ``store verify`` must be clean on each store the mmap broker left."""
    MMAP_STORES.clear()
    yield
    stores = list(dict.fromkeys(MMAP_STORES))
    MMAP_STORES.clear()
    for workdir, delays in stores:
        report = verify_store(workdir, delay_levels_ms=delays)
        assert report.ok, f"store verify on {workdir}: " + "; ".join(
            f.line() for f in report.findings
        )
