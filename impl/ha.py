"""RocketMQ 4.9.8's HA transfer between two mmap stores, over a real TCP connection on 127.0.0.1.

Theory of operation
-------------------
The master's side is ``HaServer`` (HAService.AcceptSocketService: a listening socket on 127.0.0.1, port 0) and
``HaConnection`` (HAConnection: one slave's accepted socket with its ReadSocketService and WriteSocketService
state); the slave's side is ``HaClient`` (HAService.HAClient). The bytes on the wire are 4.9.8's, big-endian:

- the slave → master: its max commitlog offset, 8 bytes (``encode_report``; HAClient.reportSlaveMaxOffset). The
  master reads the last whole 8 bytes it has (ReadSocketService.processReadEvent): the first report of a
  connection is ``slave_request_offset``, every report is ``slave_ack_offset`` and goes to the pair's
  push2SlaveMaxOffset (HAService.notifyTransferSome keeps the largest);
- the master → slave: frames ``phyOffset (8) | size (4) | body`` of raw CommitLog bytes (``encode_frame``;
  WriteSocketService), the body at most ``haTransferBatchSize`` (32 KiB, ``HA_TRANSFER_BATCH_SIZE``) and never
  across a commitlog file (getCommitLogData selects within one mapped file); a size-0 frame is the heartbeat,
  written when the write side was idle longer than haSendHeartbeatInterval (at ``nextTransferFromWhere``).

Facts settled in the sources (apache/rocketmq, 4.x: store/src/main/java/org/apache/rocketmq/store/ha/
HAConnection.java and HAService.java, CommitLog.appendData and DefaultMessageStore.appendToCommitLog, as the
search tool stores them — HAConnection a class, before 5.0's HA rewrite; fidelity HA-11..HA-14):

- where the master starts (WriteSocketService.run, ``first_transfer_offset``): nothing is written before the
  slave's first report (slaveRequestOffset −1); a report of 0 starts at the start of the master's LAST commitlog
  file (``maxOffset - maxOffset % mappedFileSizeCommitLog``), any other report at the reported offset;
- what the slave accepts (HAClient.dispatchReadRequest, ``accept_frame``): a frame whose phyOffset is not the
  slave's max offset is refused — the client returns false and closeMaster closes the connection — unless the
  slave's log is empty (max offset 0: any offset is taken, which is how an empty slave starts at the master's
  last file); the check applies to heartbeats too. An accepted body goes to
  DefaultMessageStore.appendToCommitLog (refused once the store is shut down; CommitLog.appendData under the put
  lock: MappedFile.appendMessage(data) at the write position of getLastMappedFile(startOffset), which creates the
  first file at startOffset's file start for an empty log; then the reput is woken), and the slave reports its
  new max offset when it grew (reportSlaveMaxOffsetPlus);
- the slave also reports every haSendHeartbeatInterval (isTimeToReportOffset); the master drops a connection it
  read nothing from for more than haHousekeepingInterval (ReadSocketService.run: strict ``>``), which closes
  the socket and uncounts it (connectionCount, what isSlaveOK reads). A report larger than the master's max
  offset closes the connection too, except the first (slaveRequestOffset): that one is how an empty master takes
  a slave ahead of it (fidelity HA-R9; the stored HAConnection has the check, the 4.9.8 tag itself was not
  read here).

Deterministic, no threads: the pair (``impl/ha_pair.py``) drives each step — the slave writes a report, the
master reads it; the master writes its frames, the slave reads exactly those, appends and dispatches them
(``MmapBroker.append_replica``: the store's own append and dispatch, ``MessageStore.append_data``) and reports.
Blocking sockets with a timeout (``IO_TIMEOUT_S``): a step that cannot complete fails loudly instead of hanging.

Simplifications (docs/fidelity.md HA-1, HA-11..HA-14): frames are cut at record boundaries (a frame holds whole
records up to 32 KiB, a record larger than that goes alone in one frame; a file's blank tail goes in frames of
its own), so ``transfer(n)`` moves exactly n records and the slave's end is always a record's end — the model's
``HaPair.replicate(n)`` counts records, and a lockstep run compares counts; real 4.9.8 cuts at 32 KiB whatever
the records (a cut inside a record is invisible to clients: the reput dispatches whole records only). The slave
reports at every pair operation while the link is up (4.9.8: every haSendHeartbeatInterval, 5 s), as the
model's pair assumes, so a live link never drops and a cut one drops haHousekeepingInterval after the cut. The
slave's own housekeeping (closing a master silent for haHousekeepingInterval) is not run; a cut link closes
nothing until the master's housekeeping does. No TransientStorePool on either side.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import attrs

from rmqspec.impl.codec import DecodedRecord
from rmqspec.impl.commitlog import CommitLog, ScanStop

# the slave's append: (offset, body) -> the records the body completed (MmapBroker.append_replica)
AppendFn = Callable[[int, bytes], list[DecodedRecord]]

HA_TRANSFER_BATCH_SIZE = 32 * 1024  # MessageStoreConfig.haTransferBatchSize
HEADER_SIZE = 8 + 4  # phyOffset + size
REPORT_SIZE = 8
IO_TIMEOUT_S = 10
LOOPBACK = "127.0.0.1"


class HaProtocolError(Exception):
    """The peer broke the HA protocol (a frame at a wrong offset, a closed stream mid-frame)."""


# -- the wire, pure -----------------------------------------------------------------------------------------


def encode_report(offset: int) -> bytes:
    """HAClient.reportSlaveMaxOffset: the slave's max commitlog offset, 8 bytes big-endian."""
    return offset.to_bytes(REPORT_SIZE, "big", signed=True)


def decode_report(data: bytes) -> int:
    return int.from_bytes(data[-REPORT_SIZE:], "big", signed=True)


def encode_frame(offset: int, body: bytes) -> bytes:
    """WriteSocketService: header ``phyOffset (8) | size (4)`` then the body (size 0: a heartbeat)."""
    return offset.to_bytes(8, "big", signed=True) + len(body).to_bytes(4, "big", signed=True) + body


def decode_header(header: bytes) -> tuple[int, int]:
    """(phyOffset, size) of a frame header."""
    if len(header) != HEADER_SIZE:
        raise HaProtocolError(f"a frame header is {HEADER_SIZE} bytes, got {len(header)}")
    return int.from_bytes(header[:8], "big", signed=True), int.from_bytes(header[8:], "big", signed=True)


def first_transfer_offset(slave_request_offset: int, master_max_offset: int, file_size: int) -> int:
    """WriteSocketService.run: where the master starts for a connection whose first report was
    ``slave_request_offset`` — 0 means the start of the master's last commitlog file."""
    if slave_request_offset != 0:
        return slave_request_offset
    return max(0, master_max_offset - master_max_offset % file_size)


def accept_frame(slave_max_offset: int, frame_offset: int) -> bool:
    """HAClient.dispatchReadRequest: an empty slave takes any offset, any other only its own max offset."""
    return slave_max_offset == 0 or slave_max_offset == frame_offset


@attrs.frozen
class Frame:
    """One frame to write: the body's commitlog offset and length, and how many records it completes."""

    offset: int
    size: int
    records: int


def plan_frames(commitlog: CommitLog, start: int, limit: int, n: int | None,
                batch: int = HA_TRANSFER_BATCH_SIZE) -> list[Frame]:
    """The frames that move up to ``n`` more records (all by default) from ``start`` to ``limit``: whole
    records, at most ``batch`` bytes a frame unless one record is larger, never across a file; a file's blank
    tail (the bytes after its last record) in frames of its own, sent before the next file's first record."""
    frames: list[Frame] = []
    size = commitlog.file_size
    begin = end = start
    count = 0  # records of the frame being built
    for total, item in enumerate(commitlog.scan(start, limit=limit, check_crc=False)):  # total: of all frames
        if isinstance(item, ScanStop) or (n is not None and total >= n):
            break
        if item.commitlog_offset != end:  # the rest of ``end``'s file is its blank tail
            if end > begin:
                frames.append(Frame(begin, end - begin, count))
            file_end = end - end % size + size
            while end < file_end:
                step = min(batch, file_end - end)
                frames.append(Frame(end, step, 0))
                end += step
            begin = end = item.commitlog_offset
            count = 0
        if end > begin and end - begin + item.size > batch:
            frames.append(Frame(begin, end - begin, count))
            begin, count = end, 0
        end = item.commitlog_offset + item.size
        count += 1
    if end > begin:
        frames.append(Frame(begin, end - begin, count))
    return frames


def _read_exact(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``sock``; ``HaProtocolError`` when the stream ends first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise HaProtocolError(f"the HA stream closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


# -- the master's side --------------------------------------------------------------------------------------


class HaConnection:
    """HAConnection: one slave's accepted socket, its request / ack offsets and its write position."""

    def __init__(self, sock: socket.socket, now: int) -> None:
        sock.settimeout(IO_TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock: socket.socket | None = sock
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        self.last_read_ts = now
        self.last_write_ts = now

    @property
    def open(self) -> bool:
        return self.sock is not None

    def read_report(self, now: int, commitlog: CommitLog) -> int:
        """ReadSocketService: one report read; returns the slave's acknowledged offset. The first is the
        connection's slaveRequestOffset, and the WriteSocketService fixes nextTransferFromWhere from it at once
        (its loop runs every ≤ 1 s); a later report past the master's max offset closes the connection
        (``HaProtocolError``)."""
        assert self.sock is not None
        offset = decode_report(_read_exact(self.sock, REPORT_SIZE))
        self.last_read_ts = now
        self.slave_ack_offset = offset
        master_max_offset = commitlog.max_offset
        if self.slave_request_offset < 0:
            self.slave_request_offset = offset
            self.next_transfer_from = first_transfer_offset(offset, master_max_offset, commitlog.file_size)
        elif offset > master_max_offset:
            self.close()
            raise HaProtocolError(f"slave reported {offset}, past the master's max offset {master_max_offset}")
        return offset

    def write_frames(self, commitlog: CommitLog, limit: int, n: int | None, now: int) -> list[Frame]:
        """WriteSocketService: the frames moving up to ``n`` more records, written; nothing before the first
        report."""
        assert self.sock is not None
        if self.slave_request_offset < 0:
            return []
        frames = plan_frames(commitlog, self.next_transfer_from, limit, n)
        for f in frames:
            self.sock.sendall(encode_frame(f.offset, commitlog.files.read(f.offset, f.size)))
            self.next_transfer_from = f.offset + f.size
            self.last_write_ts = now
        return frames

    def heartbeat_due(self, now: int, interval_ms: int) -> bool:
        return self.slave_request_offset >= 0 and now - self.last_write_ts > interval_ms

    def write_heartbeat(self, now: int) -> Frame:
        """A size-0 frame at nextTransferFromWhere."""
        assert self.sock is not None
        frame = Frame(self.next_transfer_from, 0, 0)
        self.sock.sendall(encode_frame(frame.offset, b""))
        self.last_write_ts = now
        return frame

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class HaServer:
    """HAService.AcceptSocketService: the master's HA port, listening on 127.0.0.1 (an ephemeral port)."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.settimeout(IO_TIMEOUT_S)
        self.sock.bind((LOOPBACK, 0))
        self.sock.listen(1)
        self.address: tuple[str, int] = self.sock.getsockname()

    def accept(self, now: int) -> HaConnection:
        """The next slave's connection (its connect returned: the handshake is done)."""
        assert self.sock is not None
        conn, _peer = self.sock.accept()
        return HaConnection(conn, now)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


# -- the slave's side ---------------------------------------------------------------------------------------


class HaClient:
    """HAService.HAClient: the slave's connection to the master's HA port."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.current_reported_offset = 0
        self.reports = 0  # reports written (the master reads as many)

    @property
    def open(self) -> bool:
        return self.sock is not None

    def connect(self, address: tuple[str, int], max_offset: int) -> None:
        """connectMaster: the socket to the master's HA port; the offset to report is the slave's max."""
        self.close()
        self.sock = socket.create_connection(address, timeout=IO_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.current_reported_offset = max_offset

    def report(self, max_offset: int) -> None:
        """reportSlaveMaxOffset."""
        assert self.sock is not None
        self.current_reported_offset = max_offset
        self.sock.sendall(encode_report(max_offset))
        self.reports += 1

    def read_frame(self) -> tuple[int, bytes]:
        """One frame: (phyOffset, body)."""
        assert self.sock is not None
        offset, size = decode_header(_read_exact(self.sock, HEADER_SIZE))
        return offset, _read_exact(self.sock, size) if size else b""

    def dispatch(self, frames: int, max_offset: int, append: AppendFn) -> list[DecodedRecord]:
        """dispatchReadRequest over ``frames`` frames: each checked against the slave's max offset (a wrong one
        closes the connection: ``HaProtocolError``), its body appended (``append(offset, body)`` returns the
        records it completed, the new max offset follows), then reportSlaveMaxOffsetPlus."""
        records: list[DecodedRecord] = []
        for _ in range(frames):
            offset, body = self.read_frame()
            if not accept_frame(max_offset, offset):
                self.close()
                raise HaProtocolError(f"master pushed offset {offset}, not the slave's max offset {max_offset}")
            if body:
                records += append(offset, body)
                max_offset = offset + len(body)
                if max_offset > self.current_reported_offset:
                    self.report(max_offset)
        return records

    def at_eof(self) -> bool:
        """Whether the master closed the stream (processReadEvent reads −1: closeMaster); closes it then."""
        if self.sock is None:
            return True
        self.sock.setblocking(False)
        try:
            data = self.sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        finally:
            if self.sock is not None:
                self.sock.settimeout(IO_TIMEOUT_S)
        if not data:
            self.close()
            return True
        return False

    def close(self) -> None:
        """closeMaster."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None


