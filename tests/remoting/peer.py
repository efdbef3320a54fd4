"""A tiny real TCP peer on 127.0.0.1 for client tests, built on ``remoting.frame``.

``Peer(handler)`` listens on an ephemeral loopback port; every accepted connection gets a thread that
decodes frames with ``FrameDecoder`` and calls ``handler(conn, cmd)`` for each. The handler decides
what goes back: ``conn.send(cmd)`` (a frame), ``conn.send_raw(bytes)`` (anything, e.g. half a frame),
``conn.close()``. What the peer answers in the tests comes from the frames captured between the real
Java 4.9.8 client and broker (``wire_fixtures``), not from hand-written replies.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable

from rmqspec.remoting.command import RemotingCommand
from rmqspec.remoting.frame import FrameDecoder, FrameError, encode_frame


class PeerConn:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.received: list[RemotingCommand] = []
        self.error: FrameError | None = None
        self._lock = threading.Lock()

    def send(self, cmd: RemotingCommand) -> None:
        self.send_raw(encode_frame(cmd))

    def send_raw(self, data: bytes) -> None:
        with self._lock:
            self.sock.sendall(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


Handler = Callable[[PeerConn, RemotingCommand], None]


class Peer:
    def __init__(self, handler: Handler, on_connect: Callable[[PeerConn], None] | None = None) -> None:
        self.handler = handler
        self.on_connect = on_connect
        self.conns: list[PeerConn] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._threads: list[threading.Thread] = []
        self._stopped = False
        self._accept = threading.Thread(target=self._accept_loop, daemon=True)
        self._accept.start()

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for conn in self.conns:
            conn.close()
        self._accept.join(timeout=5)
        for t in self._threads:
            t.join(timeout=5)

    def _accept_loop(self) -> None:
        while not self._stopped:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            conn = PeerConn(sock)
            self.conns.append(conn)
            if self.on_connect is not None:
                self.on_connect(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: PeerConn) -> None:
        decoder = FrameDecoder()
        while True:
            try:
                data = conn.sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            try:
                commands = decoder.feed(data)
            except FrameError as exc:
                conn.error = exc
                conn.close()
                return
            for cmd in commands:
                conn.received.append(cmd)
                try:
                    self.handler(conn, cmd)
                except OSError:
                    return


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
