"""The crash states ``docs/fidelity.md`` cites still show what it says (the ids replay)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rmqspec.impl import crashfs, crashtest
from rmqspec.impl.codec import SCHEDULE_TOPIC
from rmqspec.impl.consumequeue import UNIT_SIZE, unpack_unit
from rmqspec.impl.store import MessageStore, StoreConfig
from rmqspec.impl.verify import verify_store
from rmqspec.model.config import parse_delay_levels

DOC = Path(__file__).resolve().parents[2] / "docs" / "fidelity.md"
CONFIG = StoreConfig(commitlog_file_size=8192, delay_levels_ms=parse_delay_levels("1s 2s 3s 5s 10s"))


def _cited() -> dict[str, str]:
    """heading → the state id it cites (``### … — `ID` ``)."""
    found = re.findall(r"^### (.+?) \(theirs\) — `([^`]+)`", DOC.read_text(), re.M)
    return {title: sid for title, sid in found}


def test_the_document_cites_every_behaviour() -> None:
    assert len(_cited()) == 5


def _state(tmp_path: Path, sid: str) -> tuple[Path, crashfs.CrashState]:
    state, _lines = crashtest.materialize_state(sid, tmp_path / "s")
    return tmp_path / "s", state


@pytest.mark.parametrize("title", sorted(_cited()))
def test_a_cited_state_shows_the_behaviour(tmp_path: Path, title: str) -> None:
    root, state = _state(tmp_path, _cited()[title])
    files = crashfs.state_files(state)
    if title.startswith("RocketMQ keeps a torn record"):
        with MessageStore.open(root, config=CONFIG) as store:
            assert store.recovery is not None and store.recovery.corrupt is not None
            assert "tail is zeros" in store.recovery.corrupt.reason
    elif title.startswith("RocketMQ keeps a torn consume-queue unit"):
        before = {p: f for p, f in files.items() if p.startswith("consumequeue/")}
        with MessageStore.open(root, config=CONFIG) as store:
            rebuilt = [
                key
                for key in store.queues()
                for i, unit in enumerate(store.queue_units(*key, 0, 1 << 20))
                if (i * UNIT_SIZE) // crashfs.PAGE in before.get(f"consumequeue/{key[0]}/{key[1]}/{0:020d}", (0, {}))[1]
                and _unit_on_disk(before, key, i) not in (None, (unit.commitlog_offset, unit.size, unit.tags_code))
            ]
        assert rebuilt, "no unit differed from the torn one on disk"
    elif title.startswith("RocketMQ rebuilds delay units"):
        with MessageStore.open(root, config=CONFIG) as store:
            units = store.queue_units(SCHEDULE_TOPIC, 0, 0, 10)
            record = store.read(units[0].commitlog_offset)
            assert units[0].tags_code == record.store_ts + 1000  # level 1 = 1 s
    elif title.startswith("RocketMQ refuses to start"):
        assert any(length == 0 and p.startswith("commitlog/") for p, (length, _) in files.items())
        MessageStore.open(root, config=CONFIG).close()
    else:  # a unit made up in an empty consume queue
        empty = [p for p, (length, pages) in files.items() if p.startswith("consumequeue/") and not pages]
        assert empty
        with MessageStore.open(root, config=CONFIG) as store:
            topic, qid = empty[0].split("/")[1:3]
            assert store.max_offset(topic, int(qid)) == 0
    assert verify_store(root, delay_levels_ms=CONFIG.delay_levels_ms).ok


def _unit_on_disk(files: dict, key: tuple[str, int], index: int) -> tuple[int, int, int] | None:
    _length, pages = files.get(f"consumequeue/{key[0]}/{key[1]}/{0:020d}", (0, {}))
    at = index * UNIT_SIZE
    page = pages.get(at // crashfs.PAGE)
    if page is None or at % crashfs.PAGE + UNIT_SIZE > crashfs.PAGE:
        return None
    unit = unpack_unit(page, at % crashfs.PAGE)
    return None if unit == (0, 0, 0) else unit
