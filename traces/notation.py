"""A tiny text notation for hand-written traces (STYLE lesson 12).

One event per line::

    # comments and blank lines are ignored
    0  send     t=1000 topic=T q=0 key=K1
    1  store    t=1001 topic=T q=0 off=0 key=K1
       deliver  t=1002 g=G topic=T q=0 off=0 key=K1 c=C1
    3  consume  t=1003 g=G topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS

A line is ``[SEQ] EVENT field=value ...``. Without ``SEQ`` the seq is the
previous one + 1 (the first line without one gets 0). ``ts`` defaults to the
previous row's ts (0 at the start), so only time jumps need writing. Field
names are the columns of SPEC §8 or these short aliases:

    t=ts  g=group  q=queue_id  off=queue_offset  clo=commitlog_offset
    key=msg_key  id=msg_id  rt=reconsume_times  lvl=delay_level
    due=deliver_ts  st=status  c=client_id  sk=sharding_key  txn=txn_id

Integer columns are parsed as integers; ``-`` stands for null; any other
name (``trace_id`` for example) is kept as an extra string column. ``parse``
returns plain row dicts (every schema column present) in line order;
``render`` writes rows back in the same notation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rmqspec.model.events import EVENT_NAMES, FIELDS

__all__ = ["ALIASES", "INT_COLUMNS", "NotationError", "parse", "render"]

ALIASES: dict[str, str] = {
    "t": "ts",
    "g": "group",
    "q": "queue_id",
    "off": "queue_offset",
    "clo": "commitlog_offset",
    "key": "msg_key",
    "id": "msg_id",
    "rt": "reconsume_times",
    "lvl": "delay_level",
    "due": "deliver_ts",
    "st": "status",
    "c": "client_id",
    "sk": "sharding_key",
    "txn": "txn_id",
}
_SHORT: dict[str, str] = {v: k for k, v in ALIASES.items()}

INT_COLUMNS: frozenset[str] = frozenset(
    {
        "seq",
        "ts",
        "queue_id",
        "queue_offset",
        "commitlog_offset",
        "reconsume_times",
        "delay_level",
        "deliver_ts",
    }
)
_COLUMNS: tuple[str, ...] = ("seq", "ts", "event", *FIELDS, "detail")


class NotationError(ValueError):
    """A line of notation cannot be read: names the line number and the reason."""

    def __init__(self, line_no: int, line: str, reason: str) -> None:
        super().__init__(f"line {line_no}: {reason}: {line.strip()!r}")
        self.line_no = line_no
        self.reason = reason


def _value(name: str, raw: str, line_no: int, line: str) -> Any:
    if raw == "-":
        return None
    if name in INT_COLUMNS:
        try:
            return int(raw)
        except ValueError:
            raise NotationError(line_no, line, f"{name}={raw!r} is not an integer") from None
    return raw


def parse(text: str) -> list[dict[str, Any]]:
    """Rows of ``text`` in line order; raises ``NotationError`` on a bad line."""
    rows: list[dict[str, Any]] = []
    next_seq = 0
    last_ts = 0
    for line_no, line in enumerate(text.splitlines(), start=1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        tokens = body.split()
        seq: int | None = None
        if tokens[0].lstrip("-").isdigit():
            seq = int(tokens.pop(0))
        if not tokens:
            raise NotationError(line_no, line, "no event name")
        event = tokens.pop(0)
        if event not in EVENT_NAMES:
            raise NotationError(line_no, line, f"unknown event {event!r}")
        row: dict[str, Any] = dict.fromkeys(_COLUMNS)
        row["seq"] = next_seq if seq is None else seq
        row["event"] = event
        row["ts"] = last_ts
        for token in tokens:
            name, sep, raw = token.partition("=")
            if not sep or not name:
                raise NotationError(line_no, line, f"{token!r} is not name=value")
            column = ALIASES.get(name, name)
            if column in ("seq", "event"):
                raise NotationError(line_no, line, f"{column} is positional")
            row[column] = _value(column, raw, line_no, line)
        if row["ts"] is None:
            raise NotationError(line_no, line, "ts must not be null")
        rows.append(row)
        next_seq = row["seq"] + 1
        last_ts = row["ts"]
    return rows


def render(rows: Iterable[Mapping[str, Any]]) -> str:
    """The notation of ``rows`` (nulls and ``detail`` omitted), one line each."""
    lines = []
    for row in rows:
        parts = [str(row["seq"]), str(row["event"]), f"t={row['ts']}"]
        for name, value in row.items():
            if name in ("seq", "event", "ts", "detail") or value is None:
                continue
            parts.append(f"{_SHORT.get(name, name)}={value}")
        lines.append(" ".join(parts))
    return "\n".join(lines) + ("\n" if lines else "")
