"""How the trace generator's rows leave it (``traces/generator.py``): row tuples, whose ``seq`` is their
position, become Arrow tables of ``SCHEMA`` column by column or JSON dicts, and Parquet encoding runs on
a background thread (it releases the GIL) while the simulation goes on."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from rmqspec.traces.schema import SCHEMA

Row = tuple  # (ts, event, actor, group, topic, queue_id, queue_offset, commitlog_offset,
#              msg_key, msg_id, reconsume_times, delay_level, deliver_ts, status,
#              client_id, sharding_key, txn_id, detail) — seq is the position.
ROW_FIELDS = tuple(SCHEMA.names[1:])
_ROW_SCHEMA_FIELDS = list(SCHEMA)[1:]


def rows_to_table(rows: list[Row], base: int) -> pa.Table:
    """Row tuples (seq implied from ``base``) → an Arrow table of ``SCHEMA``."""
    cols = list(zip(*rows)) if rows else [() for _ in ROW_FIELDS]
    arrays = [pa.array(range(base, base + len(rows)), pa.int64())]
    for field, col in zip(_ROW_SCHEMA_FIELDS, cols):
        arrays.append(pa.array(col, field.type))
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def row_dicts(rows: list[Row], base: int) -> Iterable[dict[str, Any]]:
    for i, row in enumerate(rows):
        d = {"seq": base + i}
        for name, value in zip(ROW_FIELDS, row):
            if value is not None:
                d[name] = json.loads(value) if name == "detail" else value
        yield d


class WriterThread:
    """Writes Arrow tables on a background thread (Parquet encoding releases the GIL)."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.queue: queue.Queue = queue.Queue(maxsize=2)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="trace-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            table = self.queue.get()
            if table is None:
                return
            if self.error is None:
                try:
                    self.writer.write_batch(table)
                except BaseException as exc:  # re-raised on the caller's thread
                    self.error = exc

    def put(self, table: pa.Table) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(table)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()
        self.writer.close()
        if self.error is not None:
            raise self.error
