"""Retention in the conformance machine (issue 42): expired files deleted, disk pressure, a full disk.

Theory of operation
-------------------
``RetentionRules`` (a mixin of ``ConformanceBase``) drives the clean service of ``model/retention.py`` on
the manual clock. The rule ``retention`` draws one of:

- **age**: the clock jumps to an instant at least ``fileReservedTime`` ahead that falls in a
  ``deleteWhen`` hour (a drawn minute of it), and the broker ticks: every file rolled before the jump's
  start has expired and the pass deletes up to 10 of them (``age`` reaches the path on any broker);
- **disk** (a candidate with ``Capability.DISK_USAGE``, as the model): the disk's usage is set to a
  drawn level — under diskMaxUsedSpaceRatio (nothing), over it (expired files outside ``deleteWhen``),
  over 0.85 (every file but the last, expired or not), over 0.90 (the store also refuses every put with
  SERVICE_NOT_AVAILABLE until a pass finds the disk at or under 0.85; the rule tries a send then) — and
  the clock moves past the next pass (60 s: the first pass after a start waits that long); then the
  disk is back under the max and one more pass runs.
  The pressure is transient so a pass never takes a copy the observer has not seen (every pass runs
  right after a reveal, and before the tick's other services write).

Lockstep compares what follows: the ``expire`` rows, pulls below a queue's new min offset
(OFFSET_TOO_SMALL, answered PULL_OFFSET_MOVED with the min; the machine's consumers move to it, as
the reference client does), units whose record is gone (MESSAGE_WAS_REMOVING), refused puts. The
invariants except what the files took with them (``inv_saved.expired_keys``) and a half pending while
the disk was full (``History.disk_full``: a discard's copy refused leaves no trace). The machine learns
what is gone through the protocol: each pull's min offset, a pull with ``*`` answered NO_MATCHED_MSG
past units whose records are gone, and (``Capability.DISK_USAGE``) the commitlog's min offset after
each tick. The rule is drawn only once a copy lies in a file before the last (else a pass has nothing
to take), and not with a 5.x timer wheel (what the wheel does with copies retention took is not
modelled: issue 42 keeps it open). Coverage: ``retention:<kind>``, ``retention:deleted`` (a pass deleted files),
``retention:refused`` (a put refused on a full disk), ``retention:observed:<min|removed|commitlog>``.
"""

from __future__ import annotations

import datetime

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from rmqspec.model.message import MessageQueue
from rmqspec.model.protocol import Capability
from rmqspec.model.results import PullResult, PullStatus
from rmqspec.model.retention import CLEAN_FORCIBLY_RATIO
from rmqspec.properties.conform_base import PICK

# the disk levels the rule sets: under the max ratio, over it, over 0.85, over 0.90
DISK_LEVELS: dict[str, float] = {"disk_ok": 0.30, "disk_over_max": 0.80, "disk_forcibly": 0.86, "disk_full": 0.95}
RETENTION_KINDS = ("age", "disk_forcibly", "disk_full", "disk_over_max")
PASS_STEP_MS = 60_001  # past the next clean pass (the first runs 60 s after a start, then every 10 s)


def next_delete_instant(now: int, reserved_ms: int, hours: tuple[int, ...], minute: int) -> int:
    """The first instant at least ``reserved_ms`` after ``now`` inside a deleteWhen hour (UTC): that
    instant itself when it is in one, else ``minute`` past the next such hour."""
    base = now + reserved_ms
    moment = datetime.datetime.fromtimestamp(base / 1000, datetime.UTC)
    if moment.hour in hours:
        return base
    anchor = moment.replace(minute=minute % 60, second=0, microsecond=0)
    step = next(k for k in range(1, 25) if (moment.hour + k) % 24 in hours)
    return int((anchor + datetime.timedelta(hours=step)).timestamp() * 1000)


class RetentionRules:
    """Mixin: the clean service's triggers (see the module docstring)."""

    def _files_to_delete(self) -> bool:
        """Some copy the machine saw lies in a commitlog file before the last: a pass has a file to take."""
        size = self.config.commitlog_file_size
        offsets = [e.commitlog_offset for e in self.history.events if e.event == "store" and e.commitlog_offset]
        return bool(offsets) and max(offsets) // size > self.commitlog_low // size

    def _retention_ok(self) -> bool:
        return type(self).wall is None and not self.config.timer_running and self._files_to_delete()

    @precondition(lambda self: self._retention_ok())
    @rule(kind=st.sampled_from(RETENTION_KINDS), pick=PICK)
    def retention(self, kind: str, pick: int) -> None:
        disk = Capability.DISK_USAGE in getattr(self.ls.candidate, "capabilities", frozenset())
        if kind != "age" and not disk:
            return self._idle("retention")
        self._record("retention", kind=kind, pick=pick)
        self._sometimes(f"retention:{kind}")
        before = len(self.history.of("expire"))
        if kind == "age":
            policy = self.config.retention
            target = next_delete_instant(self._now(), policy.reserved_ms, policy.delete_hours, pick % 60)
            self._advance(max(0, target - self._now()))
        else:
            full_from = self._now()
            if kind == "disk_full":  # the store refuses every put, the schedule service's too
                if self.disk_full_until <= full_from:
                    self.disk_full_from = full_from
                self.disk_full_until = max(self.disk_full_until, full_from + PASS_STEP_MS)
            self._disk(DISK_LEVELS[kind])
            if kind == "disk_full" and self.topics \
                    and self._send(self._message(self.t0, "TagA"), pick % self.topics[self.t0]) is None:
                self._sometimes("retention:refused")
            low_at = self._now()
            self._disk(DISK_LEVELS["disk_ok"])
            if self.disk_full_until > low_at:
                # the flag clears at the first pass that finds the disk at or under 0.85: by one pass step
                # after the usage fell (sooner when the advance was not cut short by an orderly window)
                self.disk_full_until = low_at + PASS_STEP_MS
                self.history.disk_full.append((self.disk_full_from, self.disk_full_until))
            if DISK_LEVELS[kind] > CLEAN_FORCIBLY_RATIO:
                self.history.forcible.append((full_from, self._now()))
        if len(self.history.of("expire")) > before:
            self._sometimes("retention:deleted")
        self._after()

    def _disk(self, level: float) -> None:
        """The disk's usage set, then at least one pass."""
        self._call(f"set_disk_usage({level})", lambda b: b.set_disk_usage(level))
        self._advance(PASS_STEP_MS)
        self._after()

    def _note_commitlog(self) -> None:
        """After a tick on a candidate with ``Capability.DISK_USAGE``: the commitlog's min offset it
        reports, an ``expire`` row of the commitlog when it grew (every copy below it is gone)."""
        if Capability.DISK_USAGE not in getattr(self.ls.candidate, "capabilities", frozenset()):
            return
        out = self._call("commitlog_min_offset()", lambda b: b.commitlog_min_offset())
        if out.error is None and out.value > self.commitlog_low:
            self.commitlog_low = out.value
            self._sometimes("retention:observed:commitlog")
            self._emit("expire", actor="broker", commitlog_offset=out.value)

    def _note_queue(self, mq: MessageQueue, start: int, res: PullResult, sub: str | None) -> None:
        """What a pull shows of retention: the queue's min offset grew (every answer carries it), or a
        pull with ``*`` was answered NO_MATCHED_MSG past ``start`` (MESSAGE_WAS_REMOVING: units whose
        records went with their files while the queue's min stayed — correctMinOffset finds no unit
        in the queue's first file). Either writes an ``expire`` row of the machine's own: the copies
        below it are gone (the invariants' exemption, ``inv_saved.expired_keys``)."""
        lows = self.__dict__.setdefault("queue_low", {})
        low = res.min_offset
        # once retention was seen at work (a min offset moved), a ``*`` pull answered NO_MATCHED_MSG
        # past ``start`` is MESSAGE_WAS_REMOVING: no other answer of 4.9.8's has that shape
        seen = lows or self.commitlog_low
        if seen and sub == "*" and res.status is PullStatus.NO_MATCHED_MSG:
            low = max(low, res.next_begin_offset)
        if low > lows.get(mq, 0):
            lows[mq] = low
            self._sometimes(f"retention:observed:{'min' if low == res.min_offset else 'removed'}")
            self._emit("expire", actor="broker", topic=mq.topic, queue_id=mq.queue_id, queue_offset=low,
                       detail={"observed": res.status.value})
