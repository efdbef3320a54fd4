"""A broker's own ``crash`` row names what a power loss may take (SPEC §8 ``detail.at_risk``): the keys of the
records written since the last flush on an ASYNC broker, none on a kill or under SYNC_FLUSH. Without them an
audit of the broker's recorded trace would judge a message the power loss legitimately took as LOST."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqspec.impl import factory as mmap_factory
from rmqspec.model import BrokerConfig, ListRecorder, ManualClock, Message
from rmqspec.model import factory as model_factory

FACTORIES = {"model": model_factory, "mmap": mmap_factory}


def _crash_row(name: str, tmp_path: Path, flush: str, kind: str) -> dict:
    clock, rec = ManualClock(1_700_000_000_000), ListRecorder()
    broker = FACTORIES[name](clock, BrokerConfig(flush=flush), tmp_path, recorder=rec)
    broker.create_topic("T", 1)
    broker.send(Message("T", b"kept", uniq_key="AA" * 16), 0)
    broker.flush()
    clock.advance(10)
    broker.send(Message("T", b"maybe", uniq_key="BB" * 16), 0)
    broker.send(Message("T", b"maybe too", uniq_key="CC" * 16, delay_level=2), 0)
    clock.advance(10)
    broker.crash(kind)
    return next(e.as_row() for e in rec.events if e.event == "crash")


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_power_loss_on_an_async_broker_names_the_unflushed_keys(name: str, tmp_path: Path) -> None:
    row = _crash_row(name, tmp_path, "ASYNC", "power")
    assert row["detail"]["at_risk"] == ["BB" * 16, "CC" * 16]


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize(("flush", "kind"), [("ASYNC", "kill"), ("SYNC", "power")])
def test_nothing_is_at_risk_on_a_kill_or_under_sync_flush(name: str, flush: str, kind: str, tmp_path: Path) -> None:
    row = _crash_row(name, tmp_path, flush, kind)
    assert row["detail"]["at_risk"] == []
