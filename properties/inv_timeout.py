"""consumeTimeout (issue 42): the client's cleanExpiredMsg sends back only a message that outlived it.

Theory of operation
-------------------
RocketMQ 4.9.8's concurrent push consumer sets CONSUME_START_TIME on each message it hands to the listener;
every consumeTimeout minutes its clean task sends back (delay level 3), while the listener still runs, the
first message of a process queue whose start is more than consumeTimeout old
(``ProcessQueue.cleanExpiredMsg``; ``model/consumer_concurrent.py``). Its retry copy and the listener's late
SUCCESS are a DUPLICATED observation, never a violation. A clean that sends back a message sooner
re-delivers messages whose listeners are well within their time: the client is at fault, not the broker,
and the ``send_back`` row says so — ``detail.clean_expired`` true, with ``detail.consume_start`` and
``detail.consume_timeout_min`` (the client's configured consumeTimeout). A row without both numbers is not
judged.

``check_clean_early`` is the invariant (``CleanAfterTimeoutProperty``, RETRY_EARLY: the retry was made
early, by the client); ``traces/checks_retry.detect_clean_early`` judges the same on traces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rmqspec.properties.codes import Code
from rmqspec.properties.history import History
from rmqspec.properties.inv_base import Invariant, Violation, _v


def clean_timing(detail: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """A clean's send-back detail as (consume start, consumeTimeout in ms): ``clean_expired`` true and both
    numbers JSON integers (the timeout > 0), else None (not the clean's, or not judged)."""
    if not detail or detail.get("clean_expired") is not True:
        return None
    start, minutes = detail.get("consume_start"), detail.get("consume_timeout_min")
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (start, minutes)) or minutes <= 0:
        return None
    return start, minutes * 60_000


def clean_reason(ts: int, start: int, timeout_ms: int) -> str:
    return (f"the client's cleanExpiredMsg sent back a running message {ts - start} ms after its consume start, "
            f"not more than consumeTimeout ({timeout_ms} ms): a client fault, not the broker's")


def check_clean_early(h: History) -> list[Violation]:
    """A send-back by the client's clean comes more than consumeTimeout after its message's consume start."""
    out: list[Violation] = []
    for ev in h.of("send_back"):
        timing = clean_timing(ev.detail)
        if timing is None:
            continue
        start, timeout = timing
        if ev.ts - start <= timeout:
            out.append(_v(h, Code.RETRY_EARLY, ev, clean_reason(ev.ts, start, timeout),
                          f"ts > {start + timeout}", ev.ts))
    return out


TIMEOUT_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("CleanAfterTimeoutProperty", Code.RETRY_EARLY, "always",
              "The client's clean sends back only a message in its listener for more than consumeTimeout.",
              "ProcessQueue.cleanExpiredMsg (ConsumeMessageConcurrentlyService.cleanExpireMsg)",
              check_clean_early),
)
