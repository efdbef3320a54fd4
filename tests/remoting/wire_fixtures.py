"""Real frames captured from the Java 4.9.8 client and broker (``../shared/rocketmq-notes/results/wire_full.jsonl.gz``).

Each line of the capture is one frame: ``total_len``, ``header_len``, ``serialize_type``, the header (JSON
text, or hex for the binary ROCKETMQ type), the body (text, or ``hex:…`` for binary bodies) and who sent it
(``dir``: req / resp / srv_req). ``frame_bytes`` rebuilds the exact bytes that crossed the wire. The capture
keeps at most a few hundred bytes of a large body: for those rows (``complete(row)`` is false) the frame is
rebuilt with the body as captured and its length fields adjusted.
"""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

CAPTURE = Path(__file__).parent / "fixtures" / "wire_full.jsonl.gz"


def captured() -> list[dict]:
    with gzip.open(CAPTURE, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _bytes(text: str, binary_hex: bool) -> bytes:
    if binary_hex:
        return bytes.fromhex(text)
    if text.startswith("hex:"):
        return bytes.fromhex(text[4:])
    return text.encode("utf-8")


def frame_bytes(row: dict) -> bytes:
    header = _bytes(row["header"], row["serialize_type"] == 1)
    body = _bytes(row["body"], False)
    assert len(header) == row["header_len"] and len(body) <= row["body_len"], row
    mark = (row["serialize_type"] << 24) | len(header)
    return struct.pack(">ii", 4 + len(header) + len(body), mark) + header + body


def complete(row: dict) -> bool:
    return len(_bytes(row["body"], False)) == row["body_len"]
