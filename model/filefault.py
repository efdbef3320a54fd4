"""A commitlog file that cannot be created: CREATE_MAPEDFILE_FAILED (seed D3), shared by both brokers.

Theory of operation
-------------------
``Capability.FILE_CREATE_FAULT``: ``block_next_file()`` makes the commitlog file after the one holding the
write position uncreatable until ``unblock_next_file()`` (in the mmap broker a directory stands at that
file's path, so opening it fails with a real OSError). A put whose record would start in that file is
refused with SYSTEM_ERROR; nothing else of the store changes, except that a roll (the record does not fit
before the old file's end marker) first wrote the old file's blank end, so the write position stays at the
uncreatable file's start (``FileFault.uncreated``) and every later put needs that file, whatever its size.
A restart resumes before the blank (no file follows it: recovery ends where the blank starts) and the fault
ends with the process (the obstacle stands for a process-level failure of the mmap: ENOMEM, the map count).

Facts followed (RocketMQ 4.9.8, read with ``javap -c`` from rocketmq-store-4.9.8 / rocketmq-broker-4.9.7 as
the release ships them):

- CommitLog.asyncPutMessage under the put lock: the last mapped file null or full → ``getLastMappedFile(0)``;
  null → PutMessageStatus.CREATE_MAPEDFILE_FAILED ("create mapped file1 error"). appendMessage answering
  END_OF_FILE (the blank end already written, the file full) → ``getLastMappedFile(0)`` again; null →
  CREATE_MAPEDFILE_FAILED ("create mapped file2 error"), the blank stays. putMessages (a batch) alike.
- SendMessageProcessor.handlePutMessageResult: CREATE_MAPEDFILE_FAILED → SYSTEM_ERROR (1), remark
  ``CREATE_FILE_REMARK``; EndTransactionProcessor.sendFinalMessage → SYSTEM_ERROR, ``CREATE_FILE_END_REMARK``
  (the half is not deleted: no op is written).
- The 4.9.8 producer retries SYSTEM_ERROR (DefaultMQProducer.retryResponseCodes: 17, 14, 1, 16, 204, 205).

Deviation: 4.9.8's AllocateMappedFileService creates the file after the next one ahead of time
(``nextNextFilePath``); rmqspec creates each file when the first record needs it, so an obstacle placed
after that pre-allocation would not stop a real broker's next roll (docs/fidelity.md WR2).
"""

from __future__ import annotations

import attrs

from rmqspec.model.results import ResponseCode

# SendMessageProcessor.handlePutMessageResult's remark for CREATE_MAPEDFILE_FAILED (code SYSTEM_ERROR)
CREATE_FILE_REMARK = "create mapped file failed, server is busy or broken."
# EndTransactionProcessor.sendFinalMessage's remark for it (code SYSTEM_ERROR)
CREATE_FILE_END_REMARK = "Create mapped file failed."
CREATE_FILE_CODE = ResponseCode.SYSTEM_ERROR


def next_file_start(write_pos: int, file_size: int) -> int:
    """The start of the commitlog file after the one holding the write position (``write_pos`` at a file's
    start counts as in that file, whether or not it exists yet)."""
    return write_pos - write_pos % file_size + file_size


@attrs.define
class FileFault:
    """The uncreatable file (``blocked``: its start offset, or None) and a failed roll's write position."""

    blocked: int | None = None
    # a roll to ``blocked`` failed after the old file's blank end: the write position is this file's start,
    # and the file does not exist (recovery resumes where the blank starts)
    uncreated: int | None = None

    def block(self, write_pos: int, file_size: int) -> int:
        """Make the next file uncreatable; returns its start offset. Caller misuse when one already is."""
        if self.blocked is not None:
            raise ValueError(f"the commitlog file at {self.blocked} is already uncreatable")
        self.blocked = next_file_start(write_pos, file_size)
        return self.blocked

    def unblock(self) -> None:
        self.blocked = None

    def refuses(self, pos: int) -> bool:
        """Whether a record starting at ``pos`` needs the uncreatable file (``CHECK``: without this guard a
        broker stores what it could not write)."""
        return self.blocked is not None and pos >= self.blocked

    def reach(self, write_pos: int) -> int:
        """How far the commitlog's files reach: the write position, less the uncreated file's start (a
        failed roll ends the data with the old file's blank; no file follows it)."""
        return write_pos - 1 if self.uncreated is not None and self.uncreated == write_pos else write_pos
