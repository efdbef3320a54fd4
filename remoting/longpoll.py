"""Suspended pulls (long polling), as RocketMQ 4.9.8's ``PullRequestHoldService``.

Theory of operation
-------------------
A PULL_MESSAGE with the suspend flag that finds nothing new (PULL_NOT_FOUND:
the offset is the queue's max) is not answered; it is held here, keyed by
(topic, queue), until ``suspendTimeoutMillis`` has passed. The server asks
``candidates(now, max_offset)`` after every request that may have stored a
message and on every tick of its background loop; a held pull is a
candidate when its queue's max offset moved past the pull's offset (a
message arrived; ``notifyMessageArriving``) or its deadline passed. The
server re-runs a candidate without the suspend permission
(``executeRequestWhenWakeup``) and answers it, except that a re-run which
still finds nothing (or nothing matching the subscription) before the
deadline goes back on hold: the real service wakes a pull only for a message
its filter matches.

Deviation: the real service checks deadlines every 5 s (a 1 s suspend was
held 4.6 s); this one at its tick (100 ms by default), so a timed-out pull
is answered at the deadline.

``max_offset(topic, queue)`` returns None when the broker cannot say
cheaply; every pull of that queue is then a candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import attrs

from rmqspec.remoting.command import RemotingCommand


@attrs.define(eq=False)
class HeldPull:
    conn: Hashable
    request: RemotingCommand
    topic: str
    queue_id: int
    offset: int
    deadline: int


class HeldPulls:
    def __init__(self) -> None:
        self._held: dict[tuple[str, int], list[HeldPull]] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._held.values())

    def hold(self, pull: HeldPull) -> None:
        self._held.setdefault((pull.topic, pull.queue_id), []).append(pull)

    def drop_connection(self, conn: Hashable) -> int:
        """Forget the pulls of a closed connection; how many were dropped."""
        dropped = 0
        for key in list(self._held):
            keep = [p for p in self._held[key] if p.conn is not conn]
            dropped += len(self._held[key]) - len(keep)
            if keep:
                self._held[key] = keep
            else:
                del self._held[key]
        return dropped

    def candidates(self, now: int, max_offset: Callable[[str, int], int | None]) -> list[HeldPull]:
        """Take out the pulls whose queue grew past their offset or whose deadline passed."""
        out: list[HeldPull] = []
        for key in list(self._held):
            top = max_offset(*key)
            keep = []
            for pull in self._held[key]:
                if top is None or top > pull.offset or now >= pull.deadline:
                    out.append(pull)
                else:
                    keep.append(pull)
            if keep:
                self._held[key] = keep
            else:
                del self._held[key]
        return out

    def all(self) -> list[HeldPull]:
        """Take out every held pull (shutdown)."""
        out = [p for pulls in self._held.values() for p in pulls]
        self._held.clear()
        return out
