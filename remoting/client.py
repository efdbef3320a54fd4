"""``RemotingClient``: one blocking TCP connection to a RocketMQ name server or broker.

Theory of operation
-------------------
The socket layer is thin: frames are built and parsed by ``frame.py``; this
module only moves bytes and matches answers to questions.

- ``connect`` opens ``HOST:PORT`` with a connect timeout and starts one
  daemon *reader thread* that feeds every received byte to a
  ``FrameDecoder``.
- ``invoke(cmd)`` stamps the request with the next *opaque* of this
  connection (our own counter, as the Java client's ``requestId``), registers
  a pending slot under it, writes the frame and waits for the reader thread to
  deliver the response carrying that opaque (flag bit 0). A response whose
  slot has gone (it timed out) is counted in ``late_responses`` and dropped.
  ``send(cmd)`` is the same without waiting (a ``PendingResponse`` to wait
  on later), ``invoke_oneway(cmd)`` sets flag bit 1 and expects no answer.
- Requests *from* the peer (not responses) — the broker's
  CHECK_TRANSACTION_STATE (39) and NOTIFY_CONSUMER_IDS_CHANGED (40), both
  oneway — are queued for the owner to take with ``drain_server_requests``
  or ``wait_server_request``. A non-oneway request from the peer is queued
  too and, unless ``answer_unsupported`` is off, answered at once with
  REQUEST_CODE_NOT_SUPPORTED (3), as RocketMQ answers a code it has no
  processor for.
- Failure is typed and final: connection refused or timed out
  (``ConnectFailed``), no answer in time (``RequestTimeout``), the peer closed
  the connection or the socket failed (``ConnectionLost``; "mid-frame" when it
  closed inside a frame), the peer sent bytes that are not frames
  (``PeerProtocolError``: the ``FrameError`` with its stream offset), a
  request that cannot be framed — over 16 MiB, or a field that does not fit
  the binary ROCKETMQ header (``RequestNotEncodable``; nothing is sent, the
  connection stays usable). Every error names the
  address and, where there is one, the request code and opaque. Once the
  connection has failed, every waiting and every later request raises the
  same kind of error; the client does not reconnect (its owner does).

Threads: one caller thread plus the reader thread. The pending table and the
socket writes are guarded by locks, so the reader thread may answer the
peer's requests while the caller is sending.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import threading
import time
from collections.abc import Callable

import attrs

from rmqspec.remoting.codes import unsupported_remark
from rmqspec.remoting.command import FLAG_ONEWAY, RemotingCommand, response_to
from rmqspec.remoting.frame import MAX_FRAME, FrameDecoder, FrameError, encode_frame

DEFAULT_CONNECT_TIMEOUT_MS = 3000
DEFAULT_TIMEOUT_MS = 3000
REQUEST_CODE_NOT_SUPPORTED = 3
_OPAQUE_MODULUS = 1 << 31  # opaque is an int32; the counter wraps to 0


class RemotingError(Exception):
    """A request that could not be completed over the wire (base class)."""

    what = "remoting error"

    def __init__(self, address: str, reason: str, *, code: int | None = None, opaque: int | None = None) -> None:
        about = "" if code is None else f" request code={code}" + ("" if opaque is None else f" opaque={opaque}")
        super().__init__(f"{address}:{about} {self.what}: {reason}")
        self.address = address
        self.reason = reason
        self.code = code
        self.opaque = opaque

    def for_request(self, code: int, opaque: int | None) -> RemotingError:
        """The same failure, as seen by one request."""
        return type(self)(self.address, self.reason, code=code, opaque=opaque)


class ConnectFailed(RemotingError):
    what = "cannot connect"


class RequestTimeout(RemotingError):
    what = "no response in time"


class ConnectionLost(RemotingError):
    what = "connection lost"


class PeerProtocolError(RemotingError):
    what = "peer broke the framing"


class RequestNotEncodable(RemotingError):
    what = "request not sent"


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 as ``[::1]:PORT``) → (host, port); ``ValueError`` naming what is wrong."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"address {address!r} is not HOST:PORT")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"address {address!r}: port {port!r} is not a number in 1..65535")
    return host, int(port)


@attrs.define
class PendingResponse:
    """One request waiting for its response (filled by the reader thread)."""

    address: str
    code: int
    opaque: int
    _done: threading.Event = attrs.field(factory=threading.Event)
    response: RemotingCommand | None = None
    error: RemotingError | None = None

    def _resolve(self, response: RemotingCommand | None, error: RemotingError | None) -> None:
        self.response, self.error = response, error
        self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_ms: int) -> RemotingCommand:
        if not self._done.wait(max(timeout_ms, 0) / 1000):
            raise RequestTimeout(self.address, f"no response within {timeout_ms} ms", code=self.code,
                                 opaque=self.opaque)
        if self.error is not None:
            raise self.error
        assert self.response is not None
        return self.response


class RemotingClient:
    """A blocking client connection; see the module docstring."""

    def __init__(self, address: str, sock: socket.socket, *, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 max_frame: int = MAX_FRAME, answer_unsupported: bool = True) -> None:
        self.address = address
        self.timeout_ms = timeout_ms
        self.answer_unsupported = answer_unsupported
        self.late_responses = 0
        self._sock = sock
        self._decoder = FrameDecoder(max_frame)
        self._next_opaque = 0
        self._pending: dict[int, PendingResponse] = {}
        self._lock = threading.Lock()  # pending table, opaque counter, failure
        self._send_lock = threading.Lock()
        self._server_requests: collections.deque[RemotingCommand] = collections.deque()
        self._arrival_ms: dict[int, int] = {}  # id(request from the peer) -> wall-clock ms it arrived
        self._arrived = threading.Condition(self._lock)
        self._failure: RemotingError | None = None
        self._closing = False
        self._reader = threading.Thread(target=self._read_loop, name=f"remoting-reader {address}", daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ connect / close

    @classmethod
    def connect(cls, address: str, *, connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
                timeout_ms: int = DEFAULT_TIMEOUT_MS, max_frame: int = MAX_FRAME,
                answer_unsupported: bool = True) -> RemotingClient:
        try:
            host, port = parse_address(address)
        except ValueError as exc:
            raise ConnectFailed(address, str(exc)) from None
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout_ms / 1000)
        except TimeoutError:
            raise ConnectFailed(address, f"no connection within {connect_timeout_ms} ms") from None
        except OSError as exc:
            raise ConnectFailed(address, exc.strerror or str(exc)) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The timeout bounds each send (a peer that stops reading) and wakes the reader now and then.
        sock.settimeout(max(timeout_ms, 1) / 1000)
        return cls(address, sock, timeout_ms=timeout_ms, max_frame=max_frame,
                   answer_unsupported=answer_unsupported)

    def __enter__(self) -> RemotingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once the connection is unusable (closed by us, by the peer, or failed)."""
        return self._failure is not None

    @property
    def failure(self) -> RemotingError | None:
        """Why the connection is unusable (``None`` while it is open)."""
        return self._failure

    def close(self) -> None:
        """Close the socket and fail whatever still waits (``ConnectionLost``: "closed by the client")."""
        self._closing = True
        self._fail(ConnectionLost(self.address, "closed by the client"))
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5)

    # ------------------------------------------------------------------ requests

    def send(self, cmd: RemotingCommand) -> PendingResponse:
        """Send a request with the next opaque; returns its pending slot (``wait`` for the response)."""
        with self._lock:
            opaque = self._next_opaque
            self._next_opaque = (self._next_opaque + 1) % _OPAQUE_MODULUS
            if self._failure is not None:
                raise self._failure.for_request(cmd.code, opaque)
            pending = PendingResponse(self.address, cmd.code, opaque)
            self._pending[opaque] = pending
        try:
            self._write(attrs.evolve(cmd, opaque=opaque, flag=cmd.flag & ~FLAG_ONEWAY & ~1), cmd.code, opaque)
        except RemotingError:
            with self._lock:
                self._pending.pop(opaque, None)
            raise
        return pending

    def invoke(self, cmd: RemotingCommand, timeout_ms: int | None = None) -> RemotingCommand:
        """Send a request and wait for its response (``RequestTimeout`` after ``timeout_ms``)."""
        timeout = self.timeout_ms if timeout_ms is None else timeout_ms
        pending = self.send(cmd)
        try:
            return pending.wait(timeout)
        finally:
            with self._lock:
                self._pending.pop(pending.opaque, None)

    def invoke_oneway(self, cmd: RemotingCommand) -> int:
        """Send a oneway request (flag bit 1); nothing is awaited. Returns the opaque used."""
        with self._lock:
            opaque = self._next_opaque
            self._next_opaque = (self._next_opaque + 1) % _OPAQUE_MODULUS
            if self._failure is not None:
                raise self._failure.for_request(cmd.code, opaque)
        self._write(attrs.evolve(cmd, opaque=opaque, flag=(cmd.flag | FLAG_ONEWAY) & ~1), cmd.code, opaque)
        return opaque

    def _write(self, cmd: RemotingCommand, code: int, opaque: int) -> None:
        try:
            data = encode_frame(cmd)
        except FrameError as exc:
            raise RequestNotEncodable(self.address, exc.reason, code=code, opaque=opaque) from None
        with self._send_lock:
            try:
                self._sock.sendall(data)
            except TimeoutError:
                err = ConnectionLost(self.address, f"the peer did not take the {len(data)}-byte frame in time")
                self._fail(err)
                raise err.for_request(code, opaque) from None
            except OSError as exc:
                err = self._failure or ConnectionLost(self.address, exc.strerror or str(exc))
                self._fail(err)
                raise err.for_request(code, opaque) from None

    # ------------------------------------------------------------------ requests from the peer

    def drain_server_requests(self) -> list[RemotingCommand]:
        """Every request the peer sent since the last drain, oldest first."""
        return [cmd for _, cmd in self.drain_server_requests_timed()]

    def drain_server_requests_timed(self) -> list[tuple[int, RemotingCommand]]:
        """Like ``drain_server_requests``, each with the wall-clock ms its frame was read."""
        with self._lock:
            out = [(self._arrival_ms.pop(id(cmd), 0), cmd) for cmd in self._server_requests]
            self._server_requests.clear()
            self._arrival_ms.clear()
            return out

    def wait_server_request(self, timeout_ms: int,
                            match: Callable[[RemotingCommand], bool] | None = None) -> RemotingCommand | None:
        """Take the oldest queued peer request (that ``match`` accepts), waiting up to ``timeout_ms``."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self._arrived:
            while True:
                for cmd in self._server_requests:
                    if match is None or match(cmd):
                        self._server_requests.remove(cmd)
                        return cmd
                left = deadline - time.monotonic()
                if left <= 0 or self._failure is not None:
                    return None
                self._arrived.wait(left)

    # ------------------------------------------------------------------ reader thread

    def _read_loop(self) -> None:
        while not self._closing:
            try:
                data = self._sock.recv(65536)
            except TimeoutError:
                continue
            except OSError as exc:
                self._fail(ConnectionLost(self.address, exc.strerror or str(exc)))
                return
            if not data:
                if self._decoder.pending:
                    reason = (f"the peer closed the connection mid-frame ({self._decoder.pending} bytes of an "
                              f"incomplete frame at stream byte {self._decoder.offset})")
                else:
                    reason = "the peer closed the connection"
                self._fail(ConnectionLost(self.address, reason))
                return
            try:
                commands = self._decoder.feed(data)
            except FrameError as exc:
                self._fail(PeerProtocolError(self.address, str(exc)))
                return
            for cmd in commands:
                self._dispatch(cmd)

    def _dispatch(self, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            with self._lock:
                pending = self._pending.pop(cmd.opaque, None)
                if pending is None:
                    self.late_responses += 1
                    return
            pending._resolve(cmd, None)
            return
        with self._arrived:
            self._server_requests.append(cmd)
            self._arrival_ms[id(cmd)] = time.time_ns() // 1_000_000
            self._arrived.notify_all()
        if not cmd.is_oneway and self.answer_unsupported:
            answer = response_to(cmd, REQUEST_CODE_NOT_SUPPORTED, unsupported_remark(cmd.code))
            try:
                self._write(answer, cmd.code, cmd.opaque)
            except RemotingError:
                return

    def _fail(self, error: RemotingError) -> None:
        with self._arrived:
            if self._failure is not None:
                return
            self._failure = error
            pending = list(self._pending.values())
            self._pending.clear()
            self._arrived.notify_all()
        for slot in pending:
            slot._resolve(None, error.for_request(slot.code, slot.opaque))
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
