"""Message identities: UNIQ_KEY (producer-assigned) and msgId (offset id).

- msgId (``MessageDecoder.createMessageId``): upper-case hex of store IPv4
  (4 bytes) + port (4 bytes) + commitlog offset (8 bytes) = 32 chars.
- UNIQ_KEY (``MessageClientIDSetter.createUniqID``): upper-case hex of a
  fixed prefix (the client's IP — 4 bytes for IPv4, 16 for IPv6 —, pid as 2
  bytes, a 4-byte class-loader hash) + 4 bytes of milliseconds since the
  start of the current month + a 2-byte counter = 32 chars from an IPv4
  host, 56 from an IPv6 one. rmqspec makes the prefix and counter explicit
  so that runs are reproducible.

That layout is how keys are *made* here, never a rule for keys a client
sends: to a broker a UNIQ_KEY is an opaque string (other clients write other
formats — the Go client's suffix is lower-case hex, 5.x clients send 34
chars — and a message may carry none), so nothing in rmqspec decodes an IP,
pid or time out of one (``message.check_uniq_key``, docs/fidelity.md B14).
"""

from __future__ import annotations

import datetime as _dt
import ipaddress


def offset_msg_id(host: str, port: int, commitlog_offset: int) -> str:
    """The offset msgId of the record at ``commitlog_offset`` on ``host:port``."""
    ip = ipaddress.ip_address(host)
    raw = ip.packed + port.to_bytes(4, "big") + commitlog_offset.to_bytes(8, "big")
    return raw.hex().upper()


def parse_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """Inverse of ``offset_msg_id``: (host, port, commitlog offset)."""
    raw = bytes.fromhex(msg_id)
    if len(raw) == 16:
        host = str(ipaddress.IPv4Address(raw[:4]))
        rest = raw[4:]
    elif len(raw) == 28:
        host = str(ipaddress.IPv6Address(raw[:16]))
        rest = raw[16:]
    else:
        raise ValueError(f"msgId {msg_id!r} has {len(raw)} bytes, expected 16 (IPv4) or 28 (IPv6)")
    return host, int.from_bytes(rest[:4], "big"), int.from_bytes(rest[4:], "big")


def _month_start_ms(now_ms: int) -> int:
    t = _dt.datetime.fromtimestamp(now_ms / 1000, tz=_dt.UTC)
    start = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


class UniqKeyFactory:
    """Deterministic UNIQ_KEY generator in RocketMQ's layout (32 chars for an IPv4 ``client_ip``, 56 for IPv6)."""

    def __init__(self, client_ip: str = "127.0.0.1", pid: int = 1, loader_hash: int = 0) -> None:
        ip = ipaddress.ip_address(client_ip)
        self._prefix = (
            ip.packed + (pid & 0xFFFF).to_bytes(2, "big") + (loader_hash & 0xFFFFFFFF).to_bytes(4, "big")
        )
        self._counter = 0

    def next(self, now_ms: int) -> str:
        diff = (now_ms - _month_start_ms(now_ms)) & 0xFFFFFFFF
        counter = self._counter & 0xFFFF
        self._counter += 1
        return (self._prefix + diff.to_bytes(4, "big") + counter.to_bytes(2, "big")).hex().upper()
