"""Java's ``String.hashCode`` — RocketMQ uses it for tagsCode and queue selection.

Java hashes UTF-16 code units: ``h = 31*h + c`` in signed 32-bit arithmetic.
Characters outside the BMP count as two code units (a surrogate pair).
"""

from __future__ import annotations


def java_string_hash(s: str) -> int:
    """Return ``s.hashCode()`` as Java computes it (a signed 32-bit int)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def select_queue_by_hash(sharding_key: str, queue_nums: int) -> int:
    """RocketMQ's ``SelectMessageQueueByHash``: ``hashCode(key) % n``, made non-negative.

    Java's ``%`` truncates towards zero and RocketMQ then takes ``Math.abs``,
    which equals ``abs(hash) % n`` computed without overflow.
    """
    if queue_nums <= 0:
        raise ValueError(f"queue_nums must be positive, got {queue_nums}")
    return abs(java_string_hash(sharding_key)) % queue_nums
