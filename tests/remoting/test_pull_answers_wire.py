"""Seeds E14 and E15 judged over the wire: every pull's GetMessageStatus, response code, PullStatus and
committed offset, ``rmqspec serve`` against the model, after drawn retention.

The property is ``tests/wire_programs.py``'s ``pulls_answer_as_the_model`` on a served MmapBroker and a
ModelBroker on one manual clock (``tests/remoting/wire_pair.py``), with 4 KiB commitlog files and 10-unit
consume-queue files so that retention (``Target.expire``) deletes files under queue U's units: every
GetMessageStatus the model produces is reached at the budget (OFFSET_FOUND_NULL, MESSAGE_WAS_REMOVING and
OFFSET_TOO_SMALL among them), and so are a commit with an answer other than FOUND and a commit on a pull the
broker suspended. The same program runs against real 4.9.8 in ``tests/interop/test_wire_programs_real.py``.

``test_a_broken_serve_is_caught`` runs the property against ``serve`` with one deliberately broken pull
handler at a time (monkeypatched for that test only) and requires it to fail naming the broken outcome: three
map one GetMessageStatus to another response code, two store the commitOffset wrongly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from rmqspec.model.config import BrokerConfig
from rmqspec.model.message import MessageQueue
from rmqspec.model.queues import GetStatus
from rmqspec.model.results import PullResult, PullStatus
from rmqspec.remoting import handlers_consume
from rmqspec.remoting.codes import PULL_FLAG_COMMIT_OFFSET
from tests.remoting.wire_pair import served_pair
from tests.wire_programs import SETTINGS, pulls_answer_as_the_model

CONFIG = BrokerConfig(commitlog_file_size=4096, consume_queue_file_size=200)


def _run(reached: set[str], **options: Any) -> None:
    def one(data: st.DataObject) -> None:
        with served_pair(CONFIG) as target:
            pulls_answer_as_the_model(target, data, reached)

    settings(**{**SETTINGS, **options})(given(st.data())(one))()


def test_pulls_and_their_commits_answer_as_the_model_over_the_wire() -> None:
    reached: set[str] = set()
    _run(reached, max_examples=40, derandomize=True)  # a reach assertion: the same draws under any profile
    assert reached == {s.name for s in GetStatus} | {"commit:not_found", "commit:held"}


# ---------------------------------------------------------------------------------------------------------
# broken pull handlers: each must be caught by the property above

ORIGINAL_ANSWER = handlers_consume.pull_answer
ORIGINAL_PROCESS = handlers_consume.process_pull


def _found_null_moved(result: PullResult, offset: int, match_all: bool = False) -> tuple[int, str]:
    """OFFSET_FOUND_NULL answered PULL_OFFSET_MOVED (as if the offset were too small)."""
    if result.status is PullStatus.NO_NEW_MSG and 0 < result.max_offset != offset:
        return 21, "OFFSET_FOUND_NULL"
    return ORIGINAL_ANSWER(result, offset, match_all)


def _removing_not_found(result: PullResult, offset: int, match_all: bool = False) -> tuple[int, str]:
    """MESSAGE_WAS_REMOVING answered PULL_NOT_FOUND (the client would wait instead of pulling past the units)."""
    if result.status is PullStatus.NO_MATCHED_MSG and match_all:
        return 19, "MESSAGE_WAS_REMOVING"
    return ORIGINAL_ANSWER(result, offset, match_all)


def _badly_not_found(result: PullResult, offset: int, match_all: bool = False) -> tuple[int, str]:
    """OFFSET_OVERFLOW_BADLY answered PULL_NOT_FOUND (the mapping before 4.9.4)."""
    if result.status is PullStatus.OFFSET_ILLEGAL and offset > result.max_offset > 0:
        return 19, "OFFSET_OVERFLOW_BADLY"
    return ORIGINAL_ANSWER(result, offset, match_all)


def _commit_dropped(ctx: Any, conn: Any, req: Any, allow_suspend: bool) -> Any:
    """The pull's commitOffset is never stored."""
    req.ext_fields["sysFlag"] = str(int(req.ext_fields["sysFlag"]) & ~PULL_FLAG_COMMIT_OFFSET)
    return ORIGINAL_PROCESS(ctx, conn, req, allow_suspend)


def _commit_only_found(ctx: Any, conn: Any, req: Any, allow_suspend: bool) -> Any:
    """The commitOffset is stored only with a FOUND answer (4.9.8 stores it whatever the answer)."""
    flags = int(req.ext_fields["sysFlag"])
    req.ext_fields["sysFlag"] = str(flags & ~PULL_FLAG_COMMIT_OFFSET)
    resp = ORIGINAL_PROCESS(ctx, conn, req, allow_suspend)
    if flags & PULL_FLAG_COMMIT_OFFSET and resp is not None and resp.code == 0:
        mq = MessageQueue(req.ext_fields["topic"], int(req.ext_fields["queueId"]))
        ctx.broker.update_offset(req.ext_fields["consumerGroup"], mq, int(req.ext_fields["commitOffset"]))
    return resp


# name → (the handler function replaced, the replacement, what the property's failure names)
BROKEN: dict[str, tuple[str, Callable[..., Any], str]] = {
    "found_null_moved": ("pull_answer", _found_null_moved, "store OFFSET_FOUND_NULL: answered 21"),
    "removing_not_found": ("pull_answer", _removing_not_found, "store MESSAGE_WAS_REMOVING: answered 19"),
    "badly_not_found": ("pull_answer", _badly_not_found, "store OFFSET_OVERFLOW_BADLY: answered 19"),
    "commit_dropped": ("process_pull", _commit_dropped, "after commit"),
    "commit_only_found": ("process_pull", _commit_only_found, "after commit"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_serve_is_caught(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    attr, broken, names = BROKEN[name]
    monkeypatch.setattr(handlers_consume, attr, broken)
    with pytest.raises(AssertionError, match=names):
        _run(set(), max_examples=60, database=None, derandomize=True, phases=[Phase.generate])
