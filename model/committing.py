"""TransientStorePool: the write buffer and the CommitRealTimeService's commits (seed 002, D9, D10).

Theory of operation
-------------------
With ``transientStorePoolEnable`` on an ASYNC_FLUSH master (``MessageStoreConfig.isTransientStorePoolEnable``:
the flag, ASYNC_FLUSH and not SLAVE; rmqspec refuses the flag under SYNC instead of ignoring it), every CommitLog
file the broker *creates* (``AllocateMappedFileService``) borrows an off-heap buffer from the pool: ``appendMessage``
writes the record into that buffer and moves ``wrotePosition``; the bytes reach the file (the page cache) only
when the CommitRealTimeService commits them (``MappedFile.commit0``: a FileChannel write of
``[committedPosition, wrotePosition)``), moving ``committedPosition``. Files *loaded* at a start
(``MappedFileQueue.load``: ``new MappedFile(path, size)``) have no buffer: what is appended to them is in the page
cache at once. 4.9.8's loop (``CommitLog.CommitRealTimeService.run``):

- ``leastPages`` is ``commitCommitLogLeastPages`` (4), or 0 when ``commitCommitLogThoroughInterval`` (200 ms) has
  passed since ``lastCommitTimestamp`` (0 when the service starts: its first pass is thorough), and then the time
  is noted;
- ``MappedFileQueue.commit(leastPages)`` commits only the file holding ``committedWhere``, when
  ``MappedFile.isAbleToCommit`` says so — the file is full (``wrotePosition == fileSize``), or
  ``wrote / 4096 - committed / 4096 >= leastPages`` when ``leastPages > 0``, or anything is uncommitted when 0 —
  and a commit that moved ``committedWhere`` notes the time again (``lastCommitTimestamp = end``) and wakes the
  flush service; the loop then waits ``commitIntervalCommitLog`` (200 ms) or until a put wakes it.

``MappedFile.getReadPosition`` is the committed position of a file with a buffer: the reput (dispatch to the
consume queues: ``CommitLog.getMaxOffset``), every read by offset (``selectMappedBuffer``: a lookup, a pull) and
the flush (``isAbleToFlush`` / ``flush`` up to the read position) see only committed bytes. So an acknowledged
put (PUT_OK before the commit) is neither consumable nor found by offset until committed, and a ``kill`` (the
process dies, the OS keeps its page cache, the buffer goes) loses what was not committed; a power loss loses at
least that. Recovery finds the committed prefix on disk like any other and truncates the rest.

The model runs the service's iterations at each ``tick`` (``CommitRealTime.pass_at``: one file per iteration
while one commits), before the FlushRealTimeService's pass, which then sees the committed position as written.
Between two ticks the real service kept running (it waits at most ``commitIntervalCommitLog`` between
iterations, a full file commits at any iteration, the last file at the latest once a thorough interval passed):
so a pass first counts as committed every record written at least ``interval + thorough interval`` (400 ms)
before the tick (``catch_up_ms``; a prefix, by store time), then applies the rule to the rest;
an explicit ``flush()`` and a clean shutdown commit everything first (``CommitRealTimeService``'s shutdown
commits with 0 pages). The rule is shared by both brokers, the model over its records' offsets
(``model/queues.py``), the mmap broker over its files' real buffers (``impl/mappedfile.py``).
"""

from __future__ import annotations

import attrs

from rmqspec.model.flushing import OS_PAGE_SIZE


def able_to_commit(wrote: int, committed: int, file_size: int, least_pages: int) -> bool:
    """``MappedFile.isAbleToCommit``: positions inside one file."""
    if wrote >= file_size:
        return True
    if least_pages > 0:
        return wrote // OS_PAGE_SIZE - committed // OS_PAGE_SIZE >= least_pages
    return wrote > committed


def buffered_from(end: int, file_size: int) -> int:
    """The first commitlog position in a file with a write buffer, after a start whose recovered (or clean)
    end is ``end``: the files up to the one holding ``end`` were loaded (no buffer); at an exact file boundary
    the next file is a new one (fidelity TS2)."""
    return end - end % file_size + file_size if end % file_size else end


@attrs.define
class CommitRealTime:
    """The service's state: ``lastCommitTimestamp`` (None: just started, the next pass is thorough)."""

    least_pages: int = 4
    thorough_interval_ms: int = 200
    last_commit: int | None = None
    interval_ms: int = 200  # commitIntervalCommitLog: the longest wait between two iterations

    @property
    def catch_up_ms(self) -> int:
        """How long after its write a record is surely committed: the next iteration commits the full files
        before it, the one after a thorough interval the rest."""
        return max(0, self.interval_ms) + max(0, self.thorough_interval_ms)

    def least_for(self, now: int) -> int:
        """The threshold of the iterations at ``now``: 0 when a thorough commit is due (and noted)."""
        if self.last_commit is None or now >= self.last_commit + self.thorough_interval_ms:
            self.last_commit = now
            return 0
        return self.least_pages

    def pass_at(self, now: int, committed_where: int, wrote: int, file_size: int, buffered: int = 0,
                due: int = 0) -> int:
        """``committedWhere`` after the iterations at ``now``: ``committed_where`` and ``wrote`` are absolute
        commitlog positions, files ``file_size`` long, every file before the one holding ``wrote`` full (a rolled
        file ends in its blank), the files from ``buffered`` on with a write buffer. A file without one
        "commits" whatever it holds, whatever the threshold (``MappedFile.commit`` returns its write position),
        and that counts as a commit. ``due``: the end of what was written ``catch_up_ms`` or more ago, committed
        by the iterations since the last tick."""
        committed_where = max(committed_where, due)
        least = self.least_for(now)
        while committed_where < wrote:
            start = committed_where - committed_where % file_size
            in_file = min(wrote - start, file_size)
            if start >= buffered and not able_to_commit(in_file, committed_where - start, file_size, least):
                break
            committed_where = start + in_file
            self.last_commit, least = now, self.least_pages  # a commit notes the time: the next file by pages
        return committed_where

    def restart(self) -> None:
        """A new service (a start, a restart): its first pass is thorough."""
        self.last_commit = None
