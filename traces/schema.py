"""The trace schema of SPEC §8 as one pyarrow schema.

Required columns: ``seq``, ``ts``, ``event``. Every other column of the table
is optional per row (null when an event does not carry it). ``detail`` is a
JSON-encoded string of the event's ``detail`` mapping. Columns a trace carries
beyond these are kept and passed through untouched.
"""

from __future__ import annotations

import pyarrow as pa

from rmqspec.model.events import EVENT_NAMES, EVENTS, FIELDS

__all__ = ["COLUMNS", "EVENTS", "EVENT_NAMES", "REQUIRED", "SCHEMA"]

SCHEMA = pa.schema(
    [
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("event", pa.string(), nullable=False),
        pa.field("actor", pa.string()),
        pa.field("group", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("queue_id", pa.int32()),
        pa.field("queue_offset", pa.int64()),
        pa.field("commitlog_offset", pa.int64()),
        pa.field("msg_key", pa.string()),
        pa.field("msg_id", pa.string()),
        pa.field("reconsume_times", pa.int32()),
        pa.field("delay_level", pa.int32()),
        pa.field("deliver_ts", pa.int64()),
        pa.field("status", pa.string()),
        pa.field("client_id", pa.string()),
        pa.field("sharding_key", pa.string()),
        pa.field("txn_id", pa.string()),
        pa.field("detail", pa.string()),
    ]
)
COLUMNS: tuple[str, ...] = tuple(SCHEMA.names)
REQUIRED: tuple[str, ...] = ("seq", "ts", "event")

if ("seq", "ts", "event", *FIELDS, "detail") != COLUMNS:  # pragma: no cover - import-time guard
    raise ImportError("traces.schema drifted from model.events")
