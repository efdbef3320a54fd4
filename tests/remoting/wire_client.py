"""A small blocking test client on top of ``rmqspec.remoting.frame`` (real sockets, 127.0.0.1 only).

``WireClient(addr)`` sends requests and waits for the response with the same
opaque; requests the server initiates on the connection (CHECK_TRANSACTION_STATE,
NOTIFY_CONSUMER_IDS_CHANGED) are kept in ``pushed``. It is deliberately not the
project's client (``remoting/client.py``): the server tests need their own,
independent view of the protocol.
"""

from __future__ import annotations

import itertools
import socket
import time
from typing import Any

from rmqspec.remoting import bodies
from rmqspec.remoting.command import RemotingCommand, SerializeType, request
from rmqspec.remoting.frame import FrameDecoder, encode_frame


def split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


class WireClient:
    def __init__(self, addr: str, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(split(addr), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.opaque = itertools.count(1)
        self.pushed: list[RemotingCommand] = []
        self.responses: dict[int, RemotingCommand] = {}
        self.timeout = timeout

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read(self, deadline: float) -> bool:
        """Read once; False when the server closed the connection."""
        self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
        data = self.sock.recv(1 << 20)
        if not data:
            return False
        for cmd in self.decoder.feed(data):
            if cmd.is_response:
                self.responses[cmd.opaque] = cmd
            else:
                self.pushed.append(cmd)
        return True

    def request(self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"", *, oneway: bool = False,
                version: int = 409, serialize_type: SerializeType = SerializeType.JSON,
                timeout: float | None = None) -> RemotingCommand | None:
        opaque = next(self.opaque)
        cmd = request(code, ext, body, opaque=opaque, oneway=oneway, version=version, serialize_type=serialize_type)
        self.sock.sendall(encode_frame(cmd))
        if oneway:
            return None
        return self.wait_response(opaque, timeout)

    def call(self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"", **kw: Any) -> RemotingCommand:
        resp = self.request(code, ext, body, **kw)
        assert resp is not None
        return resp

    def wait_response(self, opaque: int, timeout: float | None = None) -> RemotingCommand:
        deadline = time.monotonic() + (timeout or self.timeout)
        while opaque not in self.responses:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no response to opaque {opaque}")
            if not self._read(deadline):
                raise ConnectionError("server closed the connection")
        return self.responses.pop(opaque)

    def wait_pushed(self, code: int, timeout: float = 10.0) -> RemotingCommand:
        deadline = time.monotonic() + timeout
        while True:
            for i, cmd in enumerate(self.pushed):
                if cmd.code == code:
                    return self.pushed.pop(i)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no server request with code {code}")
            try:
                if not self._read(deadline):
                    raise ConnectionError("server closed the connection")
            except TimeoutError:
                continue

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        """Whether the server closes the connection within ``timeout`` (reading and dropping data)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if not self._read(deadline):
                    return True
            except TimeoutError:
                return False
            except ConnectionResetError:
                return True
        return False

    def json(self, cmd: RemotingCommand) -> Any:
        return bodies.loads(cmd.body)
