"""The conformance machine's store probe: when the candidate's files are read back, and against what.

Theory of operation
-------------------
``StoreProbeRules`` is a mixin of the conformance machine (``conformance.ConformanceBase``). It
adds no rule (the draws do not change); it runs ``store_probe.probe_store`` — the pristine
RocketMQ 4.9 reader over the candidate's store directory (the machine's ``workdir``) — at the
points where the files are what a restarted RocketMQ would read:

- right after a clean shutdown (``close_reopen``, the teardown): the full probe, with what the
  machine expects — the topics it created, the consumer offsets the broker answered just
  before the shutdown (``_answered_offsets``: a direct read-only query of the candidate, not a
  step of the program) and, in lockstep, the delay progress of the reference's forks;
- right after a reopen or a crash's recovery: the format probe (the broker runs: ``abort`` is
  there, an undispatched tail is tolerated).

With each, what the broker holds of the directory (``store_hold.py``): while it runs (at the start,
after a reopen or a recovery) RocketMQ's lock, a write record lock on byte 0 of ``lock``
(``STORE_UNLOCKED`` without it: a second broker would start on the same files); once it stopped
(a clean shutdown, or the crash itself: a dead process holds nothing) no file under it open or
mapped by this process (``STORE_HELD``).

Only a candidate declaring ``Capability.ROCKETMQ_STORE`` (the mmap broker) is probed; any other
(the in-process model, a third-party adapter with files of its own format; the wall-clock mode,
whose broker's files are not ours) is never judged. A declared store the probe cannot find (no
``commitlog`` directory) is counted ``store_probe:not_judged`` and never a finding. A violation
fails the example as an invariant does (``invariant STORE_… violated: …``), with the replayable
program.
"""

from __future__ import annotations

from rmqspec.model.protocol import Capability
from rmqspec.properties.store_hold import held_under, lock_held
from rmqspec.properties.store_probe import StoreExpectation, probe_store


class StoreProbeRules:
    """Mixin: judge the candidate's store with the pristine reader after shutdowns and restarts."""

    # the state and plumbing are MachineCore's (ls, workdir, topics, committed_keys, config, failed,
    # _sometimes, _fail)

    def _store_probe_on(self) -> bool:
        return type(self).wall is None and getattr(self, "ls", None) is not None

    def _store_declared(self) -> bool:
        """Only a candidate that declares a RocketMQ store in its workdir (``ROCKETMQ_STORE``) is probed:
        another broker's files, whatever their names, are its own business."""
        return self._store_probe_on() and \
            Capability.ROCKETMQ_STORE in getattr(self.ls.candidate, "capabilities", frozenset())

    def _answered_offsets(self) -> dict[tuple[str, str, int], int]:
        """The offsets the running candidate answers for every (group, queue) ever committed."""
        out: dict[tuple[str, str, int], int] = {}
        if not self._store_declared():
            return out
        for group, mq in sorted(self.committed_keys, key=lambda k: (k[0], k[1].topic, k[1].queue_id)):
            try:
                out[(group, mq.topic, mq.queue_id)] = int(self.ls.candidate.query_offset(group, mq))
            except Exception:  # the broker refuses: nothing to expect in the file
                continue
        return out

    def _reference_delay_progress(self) -> tuple[dict[int, int], ...] | None:
        """Lockstep: every reference fork's delay progress (what its clean shutdown persists)."""
        if not self._store_declared() or not self.ls.enabled:
            return None
        found = tuple(dict(fork.schedule.progress) for fork in self.ls.forks
                      if isinstance(getattr(getattr(fork, "schedule", None), "progress", None), dict))
        return found or None

    def _probe_store(self, when: str, *, closed: bool = False,
                     offsets: dict[tuple[str, str, int], int] | None = None,
                     delay: tuple[dict[int, int], ...] | None = None) -> None:
        if self.failed or not self._store_probe_on():
            return
        if not self._store_declared():
            self._sometimes("store_probe:not_judged")
            return
        expect = StoreExpectation(closed=closed, topics=dict(self.topics) if closed else {},
                                  offsets=offsets or {},
                                  delay_levels_ms=tuple(self.config.delay_levels_ms),
                                  delay_progress=delay)
        self._probe_hold(when, running=not closed)
        if self.failed:
            return
        found = probe_store(self.workdir, expect)
        if found is None:
            self._sometimes("store_probe:not_judged")
            return
        self._sometimes("store_probe:judged")
        if found:
            first = found[0]
            more = f" (+{len(found) - 1} more: {', '.join(v.code for v in found[1:])})" if len(found) > 1 else ""
            self._fail(f"invariant {first.code} violated {when}: {first.render()}{more}")

    def _probe_hold(self, when: str, *, running: bool) -> None:
        """RocketMQ's lock held while the broker runs; nothing under the store held once it stopped."""
        if self.failed or not self._store_declared():
            return
        if running:
            held = lock_held(self.workdir)
            if held is False:
                self._fail(f"invariant STORE_UNLOCKED violated {when}: no write record lock on byte 0 of "
                           f"{self.workdir}/lock while the broker runs (DefaultMessageStore.start: "
                           "tryLock(0, 1, false), else \"Lock failed,MQ already started\")")
            self._sometimes(f"store_lock:{'not_judged' if held is None else 'judged'}")
            return
        files = held_under(self.workdir)
        if files:
            more = f" (+{len(files) - 3} more)" if len(files) > 3 else ""
            self._fail(f"invariant STORE_HELD violated {when}: the stopped broker still holds "
                       f"{', '.join(files[:3])}{more}")
        self._sometimes(f"store_held:{'not_judged' if files is None else 'judged'}")

    def _final_store_probe(self) -> None:
        """The teardown's shutdown, probed (the teardown closes the candidate anyway)."""
        if self.failed or not self._store_probe_on():
            return
        if not self._store_declared():
            self._sometimes("store_probe:not_judged")
            return
        self._close_candidate_and_probe("after the final clean shutdown")

    def _close_candidate_and_probe(self, when: str) -> None:
        """Close the candidate cleanly and probe its store against what it answered just before."""
        answered, delay = self._answered_offsets(), self._reference_delay_progress()
        try:
            self.ls.candidate.close()
        except Exception as exc:
            self._fail(f"candidate failed to close(): {exc!r}")
        self._probe_store(when, closed=True, offsets=answered, delay=delay)
