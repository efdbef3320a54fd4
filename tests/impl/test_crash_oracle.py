"""Each property of the crash-state oracle (``impl/crashoracle.py``) can fail: hand-broken states and promises."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from rmqspec.impl import crashfs, crashoracle, crashwork
from rmqspec.impl.crashfs import CrashState
from rmqspec.impl.crashoracle import Promises, Written
from rmqspec.impl.crashwork import Driver, Recording, Workload, workload_config
from rmqspec.impl.effects import Create, Rename, Resize, Sync, SyncDir, Write


def _small(d: Driver) -> None:
    d.setup()
    for i in range(4):
        d.send("TopicA", 0, tags="TagA")
        d.send("TopicA", 1, tags=None if i % 2 else "TagB")
    d.consume("GroupA", "TopicA", 0)
    d.tick(5000)  # consumerOffset.json written
    d.flush()


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return crashwork.record(Workload("small", workload_config("SYNC"), _small), tmp_path_factory.mktemp("rec"))


def _last(recording: Recording, extra: tuple = ()) -> tuple[CrashState, Promises, Recording]:
    rec = attrs.evolve(recording, effects=recording.effects + tuple(extra))
    points, _model = crashfs.replay(rec.effects)
    promises = crashoracle.promises(rec, points)
    return CrashState(points[-1], len(points[-1].pending), ()), promises[-1], rec


def _codes(violations: list[crashoracle.Violation]) -> set[str]:
    return {v.code for v in violations}


def test_the_recorded_end_state_keeps_every_promise(recording: Recording, tmp_path: Path) -> None:
    state, promised, rec = _last(recording)
    assert promised.required_end == promised.written[-1].end and len(promised.written) == 8
    assert {h.file for h in promised.configs} >= {"config/consumerOffset.json", "config/topics.json"}
    assert crashoracle.check(state, promised, rec, tmp_path / "s") == []


def test_a_foreign_file_makes_recovery_fail(recording: Recording, tmp_path: Path) -> None:
    state, promised, rec = _last(recording, (Create("commitlog/junk.txt"), SyncDir("commitlog")))
    violations = crashoracle.check(state, promised, rec, tmp_path / "s")
    assert _codes(violations) == {"RecoveryNeverFails"} and "junk.txt" in violations[0].reason


def _replace(path: str, text: bytes) -> tuple:
    return (
        Create(path + ".tmp"),
        Resize(path + ".tmp", len(text)),
        Write(path + ".tmp", 0, text),
        Sync(path + ".tmp", 0, len(text), True),
        Rename(path + ".tmp", path),
        SyncDir("config"),
    )


def test_a_table_never_written_and_an_unreadable_one(recording: Recording, tmp_path: Path) -> None:
    path = "config/consumerOffset.json"
    state, promised, rec = _last(recording, _replace(path, b'{"offsetTable":{"TopicA@GroupA":{0:99}}}'))
    violations = crashoracle.check(state, promised, rec, tmp_path / "s")
    assert _codes(violations) == {"ConfigOnceWritten"} and "99" in violations[0].reason
    garbage = _replace(path, b"{not json") + _replace(path + ".bak", b"{nor this")
    state, promised, rec = _last(recording, garbage)
    violations = crashoracle.check(state, promised, rec, tmp_path / "s")
    assert _codes(violations) == {"RecoveryNeverFails"}  # the oracle's load and the broker's both fail
    assert len(violations) == 2


def test_bytes_that_no_record_wrote(recording: Recording, tmp_path: Path) -> None:
    state, promised, rec = _last(recording)
    first = promised.written[0]
    other = attrs.evolve(first, data=first.data[:-1] + b"X")
    assert "differs" in _only(state, attrs.evolve(promised, written=(other, *promised.written[1:])), rec, tmp_path)
    # recovery kept more than was written: data past the last promised record
    shorter = attrs.evolve(promised, written=promised.written[:-1], required_end=0)
    assert "no record wrote" in _only(state, shorter, rec, tmp_path, "CommitLogIsPrefix")
    # a record that recovery kept only in part
    longer = attrs.evolve(promised.written[-1], data=promised.written[-1].data + b"tail")
    partial = attrs.evolve(promised, written=(*promised.written[:-1], longer), required_end=0)
    assert "part of the record" in _only(state, partial, rec, tmp_path, "CommitLogIsPrefix")


def test_a_promise_past_the_end(recording: Recording, tmp_path: Path) -> None:
    state, promised, rec = _last(recording)
    ghost = Written(promised.written[-1].end, b"g" * 100, "TopicA", 0, 99, None)
    broken = attrs.evolve(promised, written=(*promised.written, ghost), required_end=ghost.end)
    assert "was promised" in _only(state, broken, rec, tmp_path, "PromisedRecordsSurvive")


def test_queues_that_do_not_index_the_prefix(recording: Recording, tmp_path: Path) -> None:
    state, promised, rec = _last(recording)
    w = promised.written[0]
    assert w.unit is not None
    wrong = attrs.evolve(w, unit=(w.unit[0], w.unit[1], w.unit[2] + 1))
    reason = _only(state, attrs.evolve(promised, written=(wrong, *promised.written[1:])), rec, tmp_path,
                   "QueuesIndexPrefix")
    assert "queue offset 0" in reason
    # a queue the promises do not know: its units are all unexpected; the probe's queue offset is off too
    hidden = attrs.evolve(promised, written=tuple(attrs.evolve(x, unit=None) for x in promised.written))
    found = crashoracle.check(state, hidden, rec, tmp_path / "s", verify=False)
    assert _codes(found) == {"QueuesIndexPrefix", "NewWritesInPlace"}
    assert any("past the 0 expected" in v.reason for v in found)


def test_a_refused_probe(recording: Recording, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state, promised, rec = _last(recording)
    monkeypatch.setattr(crashoracle, "PROBE_TOPIC", "SCHEDULE_TOPIC_XXXX")  # not a topic a client may send to
    violations = crashoracle.check(state, promised, rec, tmp_path / "s", verify=False)
    assert any(v.code == "NewWritesInPlace" and "failed" in v.reason for v in violations)


def _only(state: CrashState, promised: Promises, rec: Recording, tmp_path: Path, code: str | None = None) -> str:
    violations = [v for v in crashoracle.check(state, promised, rec, tmp_path / "s") if code in (None, v.code)]
    assert violations
    return violations[0].reason
