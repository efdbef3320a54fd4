"""``rmqspec serve --trace-out DIR``: the SPEC §8 trace of a served broker, as JSONL files.

Theory of operation
-------------------
``TraceWriter`` is a ``Recorder`` (SPEC §8): it numbers events (``seq``) and
appends each as one JSON object per line. Two files, one ``seq`` space:

- ``DIR/serve-NNN.jsonl`` — every event but ``commit_offset``: what
  ``rmqspec audit DIR`` reads;
- ``DIR/_commit_offset-NNN.jsonl`` — the ``commit_offset`` events. A server
  sees deliveries and offset commits but never the clients' consume results,
  and SPEC §8.1's OFFSET_OVERRUN counts a delivered offset as pending until a
  SUCCESS ``consume`` (or a ``send_back``): a server-only trace with both
  would flag every honest commit. The audit's directory discovery skips files
  starting with ``_``; name the file explicitly together with client traces
  that carry ``consume`` events (``rmqspec audit DIR/serve-000.jsonl
  DIR/_commit_offset-000.jsonl client.jsonl``).

A restart with the same ``DIR`` continues the numbering (the next file pair,
``seq`` after the largest seq found) and starts the new file with a
``recover`` event (status ``RESTART``): the broker's lock table and check
timer did not survive, so the audit must treat it as a new epoch. A partial
last line left by a run that was killed mid-write is cut first.

``DIR/_audit.json`` is the audit configuration (``rmqspec audit --config``)
matching the served broker's timing (delay levels, transaction timeout and
check max, broker lock lifetime; under 5.1+ profiles the op batch period, audited with that ``--profile``),
written at start. Timer messages need no parameter there: the
trace's ``deliver_ts`` (timer ``send`` / ``store``, ``timer_fire``) carries each due time, already
rounded by the broker's ``timerPrecisionMs``.

Lines are buffered and flushed every ``flush`` call (the server flushes on
every tick) and on ``close``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import IO, Any

from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import TraceEvent

MAIN = "serve-{:03d}.jsonl"
SIDE = "_commit_offset-{:03d}.jsonl"
AUDIT_CONFIG = "_audit.json"
SIDE_EVENTS = frozenset({"commit_offset"})
_NUMBERED = re.compile(r"^(?:serve|_commit_offset)-(\d{3,})\.jsonl$")


def _drop_torn_tail(path: Path) -> None:
    """A previous run killed mid-write leaves a partial last line: cut it (it was never a whole event)."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)


def _last_seq(path: Path) -> int:
    last = -1
    with path.open("rb") as fh:
        for line in fh:
            try:
                seq = json.loads(line).get("seq")
            except (ValueError, AttributeError):
                continue
            if type(seq) is int:
                last = max(last, seq)
    return last


def audit_config(config: BrokerConfig) -> dict[str, Any]:
    """The ``rmqspec audit --config`` parameters of a broker configuration; under a profile that batches
    op messages (5.1+) also its ``transactionOpBatchInterval``, which ``rmqspec audit`` accepts only with
    that ``--profile`` (so a 5.x trace audited as 4.9 is refused, not misjudged)."""
    out: dict[str, Any] = {
        "messageDelayLevel": config.message_delay_level,
        "brokerLockMaxLiveTime": config.broker_lock_max_live_ms,
        "transactionTimeOut": config.transaction_timeout_ms,
        "transactionCheckMax": config.transaction_check_max,
    }
    if config.behaviour.op_batch:
        out["transactionOpBatchInterval"] = config.transaction_op_batch_interval_ms
    return out


class TraceWriter:
    """A JSONL recorder for one server run (see the module docstring)."""

    def __init__(self, directory: str | Path, config: BrokerConfig) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        numbers = [int(m.group(1)) for f in self.directory.iterdir() if (m := _NUMBERED.match(f.name))]
        previous = [f for f in self.directory.iterdir() if _NUMBERED.match(f.name)]
        for f in previous:
            _drop_torn_tail(f)
        self._seq = max((_last_seq(f) for f in previous), default=-1) + 1
        index = max(numbers, default=-1) + 1
        self.path = self.directory / MAIN.format(index)
        self.side_path = self.directory / SIDE.format(index)
        (self.directory / AUDIT_CONFIG).write_text(json.dumps(audit_config(config), indent=1) + "\n")
        self._main: IO[str] = self.path.open("w", encoding="utf-8")
        self._side: IO[str] = self.side_path.open("w", encoding="utf-8")
        self.restarted = bool(previous)
        self.closed = False

    def emit(self, event: str, ts: int, **fields: Any) -> TraceEvent:
        ev = TraceEvent(seq=self._seq, ts=ts, event=event, **fields)
        self._seq += 1
        row = ev.as_row()
        row["detail"] = dict(row["detail"]) if row["detail"] is not None else None
        line = json.dumps({k: v for k, v in row.items() if v is not None}, sort_keys=True) + "\n"
        if not self.closed:
            (self._side if event in SIDE_EVENTS else self._main).write(line)
        return ev

    def flush(self) -> None:
        if not self.closed:
            self._main.flush()
            self._side.flush()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._main.close()
            self._side.close()
