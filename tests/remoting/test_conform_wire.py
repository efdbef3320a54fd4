"""``rmqspec conform --broker rocketmq://…`` against ``rmqspec serve``: wall-clock conformance over the wire.

A served MmapBroker (name server + broker on ephemeral 127.0.0.1 ports, background services every 100 ms)
passes; a served broken broker is caught. The budgets are small: every step of a wall-clock run may sleep.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from rmqspec.model.config import BrokerConfig
from rmqspec.properties.adapters import load_factory
from rmqspec.properties.runner import budget_settings, check_conformance
from rmqspec.properties.wallclock import WallOptions
from tests.remoting.conftest import SHORT_DELAYS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
BROKEN = importlib.import_module("broken_brokers").BROKEN

CONFIG = BrokerConfig(message_delay_level=SHORT_DELAYS, transaction_timeout_ms=2000,
                      transaction_check_interval_ms=3000, transaction_check_max=3, broker_lock_max_live_ms=5000,
                      flush="SYNC")


def _conform(served, examples: int, steps: int):
    factory = load_factory(f"rocketmq://{served.server.namesrv_addr}")
    return check_conformance(factory, config=CONFIG, wall=WallOptions(),
                             settings=budget_settings(examples, steps, wall=True))


@pytest.mark.slow
def test_served_mmap_broker_passes_wall_clock_conformance_over_the_wire(serve) -> None:
    result = _conform(serve(config=CONFIG), 5, 18)
    assert result.passed, result.render()
    assert result.examples >= 5 and result.wall is not None
    assert all(0 <= late <= 500 for late in result.wall["worst_lateness_ms"].values())
    assert result.coverage["init"] >= 5


def test_a_served_broken_broker_is_caught_over_the_wire(serve) -> None:
    """ROLLBACK that commits, served over the wire: the revealed copy has no counterpart in the model."""
    result = _conform(serve(config=CONFIG, factory=BROKEN["rollback_commits"]), 12, 20)
    assert not result.passed
    assert "lockstep mismatch" in result.failure and "[reveal]" in result.failure
    assert result.program and result.program[0].rule == "init"

