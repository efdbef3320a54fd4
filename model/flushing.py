"""ASYNC flush: the FlushRealTimeService's passes and their least-pages threshold (issue 42, D11, D20).

Theory of operation
-------------------
An ASYNC_FLUSH broker does not flush at the put. A put wakes the CommitLog's FlushRealTimeService
(``CommitLog.handleDiskFlush``: ``flushCommitLogService.wakeup()``), which otherwise waits up to
``flushIntervalCommitLog`` (500 ms) and then calls ``MappedFileQueue.flush(leastPages)``. 4.9.8's loop
(``CommitLog.FlushRealTimeService.run``; the same in 5.3.3):

- ``leastPages`` is ``flushCommitLogLeastPages`` (4), except when ``flushCommitLogThoroughInterval``
  (10 s) has passed since the last thorough pass (``lastFlushTimestamp``, 0 when the service starts, so
  its first pass, at the start, is thorough — ``restart``): then 0 once, and the time is noted; the
  flush itself follows the wait (up to ``flushIntervalCommitLog``, 500 ms), so the model places a
  thorough pass at the first tick 10.5 s after the last one;
- ``MappedFileQueue.flush`` flushes only the file holding ``flushedWhere``, and only when
  ``MappedFile.isAbleToFlush`` says so: the file is full (a rolled file: its end-of-file blank made it
  so), or ``wrote / 4096 - flushed / 4096 >= leastPages`` counted in OS pages when ``leastPages > 0``,
  or anything is unflushed when it is 0. ``flushedWhere`` becomes that file's start plus its flushed
  position.

So a record stays in the page cache until a full file or 4 dirty pages carry it to disk, or at most
10 s. The model runs the service's iterations at each ``tick`` (``pass_at``): the first with the
thorough threshold when due, the next ones (one file each, as the loop's later wake-ups) with
``leastPages`` until one flushes nothing. A pass sees the commitlog as it was at the previous pass
(``mark``): the service runs on its own thread, sometime between two ticks, so what a tick's services
wrote (a fired delayed copy, say) may still be in the page cache when the next tick persists the
services' progress — as on a real broker, whose flush and persist threads drift apart (fidelity W5:
the model never promises a flush before the real service could have made it). Both brokers call it: the model
broker with its records' offsets (``model/crash.py``), the mmap broker with its files' real written
and flushed positions (``impl/store.py``); lockstep and the power-loss oracle compare the outcomes.
"""

from __future__ import annotations

import attrs

OS_PAGE_SIZE = 4096  # MappedFile.OS_PAGE_SIZE


def able_to_flush(wrote: int, flushed: int, file_size: int, least_pages: int) -> bool:
    """``MappedFile.isAbleToFlush``: positions inside one file."""
    if wrote >= file_size:
        return True
    if least_pages > 0:
        return wrote // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE >= least_pages
    return wrote > flushed


@attrs.define
class FlushRealTime:
    """The service's state: the time of its last thorough pass (``lastFlushTimestamp``)."""

    least_pages: int = 4
    thorough_interval_ms: int = 10_000
    wait_ms: int = 500  # flushIntervalCommitLog: the longest the loop waits between a decision and its flush
    last_thorough: int = 0
    mark: int = 0  # the commitlog's write position at the previous pass: what this one sees

    def least_for(self, now: int) -> int:
        """The first iteration's threshold at ``now``: 0 when a thorough pass is due (and noted). The
        loop decides at ``lastFlushTimestamp + interval`` and flushes after its wait: the model's thorough
        pass is the first at least ``interval + wait`` after the last (its latest)."""
        if now >= self.last_thorough + self.thorough_interval_ms + self.wait_ms:
            self.last_thorough = now
            return 0
        return self.least_pages

    def pass_at(self, now: int, flushed_where: int, wrote: int, file_size: int) -> int:
        """The flushed position after the iterations run at ``now`` over what was written by the previous
        pass (``mark``; ``wrote`` becomes the next one's): ``flushed_where`` and ``wrote`` are absolute
        commitlog positions, files ``file_size`` long, every file before the one holding a position full
        (a rolled file ends in its blank)."""
        least = self.least_for(now)
        seen, self.mark = self.mark, wrote
        while flushed_where < seen:
            start = flushed_where - flushed_where % file_size
            in_file = min(seen - start, file_size)
            if not able_to_flush(in_file, flushed_where - start, file_size, least):
                break
            flushed_where = start + in_file
            least = self.least_pages
        return flushed_where

    def restart(self, now: int, wrote: int) -> None:
        """A new service (a start, a restart): its first pass, at ``now``, is thorough; everything written
        before it (to ``wrote``) is on disk already (recovered, or flushed at the shutdown)."""
        self.last_thorough, self.mark = now, wrote
