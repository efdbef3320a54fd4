"""Seeds D9 and E6 judged over the wire: SEARCH_OFFSET_BY_TIMESTAMP answered by ``rmqspec serve`` as the model
answers it, and the model as the rule says, after drawn sends, clock steps and retention.

The property is ``tests/wire_programs.py``'s ``lookups_answer_as_the_model`` on a served MmapBroker and a
ModelBroker on one manual clock (``tests/remoting/wire_pair.py``), with 4 KiB commitlog files and 10-unit
consume-queue files, so lookups choose among several consume-queue files by their mtimes and, after
retention (``Target.expire``), skip units whose commitlog file was deleted. Every clause of
``tests/timesearch_rule.py`` is reached at the budget. The same program runs against real 4.9.8 in
``tests/interop/test_wire_programs_real.py``.

``test_a_broken_lookup_is_caught`` runs the property with the served broker's search replaced by a
deliberately broken one (the mmap store's ``offset_by_time``, monkeypatched for that test only; the model
keeps the right one) and requires the property to fail on a lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from rmqspec.impl import consumequeue
from rmqspec.model.config import BrokerConfig
from rmqspec.model.timesearch import QueueFile, choose_file, offset_by_time
from tests.remoting.wire_pair import served_pair
from tests.wire_programs import SETTINGS, lookups_answer_as_the_model

CONFIG = BrokerConfig(commitlog_file_size=4096, consume_queue_file_size=200)
REACHED = {"no_queue", "exact", "exact_tie", "before_all", "after_all", "nearer_after", "nearer_before",
           "tie_before", "later_file", "gone"}


def _run(reached: set[str], **options: Any) -> None:
    def one(data: st.DataObject) -> None:
        with served_pair(CONFIG) as target:
            lookups_answer_as_the_model(target, data, reached)

    settings(**{**SETTINGS, **options})(given(st.data())(one))()


def test_lookups_by_time_answer_as_the_model_over_the_wire() -> None:
    reached: set[str] = set()
    _run(reached, max_examples=60, derandomize=True)  # a reach assertion: the same draws under any profile
    assert reached >= REACHED, REACHED - reached


# ---------------------------------------------------------------------------------------------------------
# broken lookups: each must be caught by the property above

Search = Callable[[Sequence[QueueFile], int, int, int, Callable[[int, int], int]], int]


def _lower_bound(files: Sequence[QueueFile], timestamp: int, min_offset: int, min_phy: int,
                 store_ts_at: Callable[[int, int], int]) -> int:
    """The first unit stored at or after the timestamp (a plain lower bound), not the nearer neighbour."""
    f = choose_file(files, timestamp)
    if f is None:
        return 0
    for k, (phy, size) in enumerate(f.units):
        if f.first_unit + k >= min_offset and phy >= min_phy and store_ts_at(phy, size) >= timestamp:
            return f.first_unit + k
    return f.first_unit + len(f.units) - 1


def _last_file(files: Sequence[QueueFile], timestamp: int, min_offset: int, min_phy: int,
               store_ts_at: Callable[[int, int], int]) -> int:
    """The file's mtime ignored: always the last file."""
    return offset_by_time(list(files[-1:]), timestamp, min_offset, min_phy, store_ts_at)


def _reads_deleted(files: Sequence[QueueFile], timestamp: int, min_offset: int, min_phy: int,
                   store_ts_at: Callable[[int, int], int]) -> int:
    """Units under the queue's min offset and the commitlog's probed as any other (their records are gone: 0).
    Either guard alone hides the other's absence: retention corrects the min offset past the deleted units."""
    return offset_by_time(files, timestamp, 0, 0, store_ts_at)


def _tie_after(files: Sequence[QueueFile], timestamp: int, min_offset: int, min_phy: int,
               store_ts_at: Callable[[int, int], int]) -> int:
    """Halfway between two units, the later one (4.9.8 keeps the earlier)."""
    ours = offset_by_time(files, timestamp, min_offset, min_phy, store_ts_at)
    before = offset_by_time(files, timestamp - 1, min_offset, min_phy, store_ts_at)
    after = offset_by_time(files, timestamp + 1, min_offset, min_phy, store_ts_at)
    return after if before == ours and after == ours + 1 else ours


BROKEN: dict[str, Search] = {"lower_bound": _lower_bound, "last_file": _last_file, "reads_deleted": _reads_deleted,
                             "tie_after": _tie_after}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_lookup_is_caught(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumequeue, "offset_by_time", BROKEN[name])
    with pytest.raises(AssertionError, match=r"search .*: answered"):
        _run(set(), max_examples=80, database=None, derandomize=True, phases=[Phase.generate])
