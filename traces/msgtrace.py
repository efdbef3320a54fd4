"""RocketMQ 4.9 message-trace records (``RMQ_SYS_TRACE_TOPIC`` bodies) → our schema.

Format facts (RocketMQ 4.9.8, ``client/.../trace/TraceDataEncoder.java``,
``TraceConstants.java``): a trace message body holds records, each ended by
``FIELD_SPLITOR`` (char 2); a record's fields are separated by
``CONTENT_SPLITOR`` (char 1); Java's ``String.split`` drops trailing empty
fields; a null Java field is written as the text ``null``. Field order:

- ``Pub``: type, timeStamp, regionId, groupName, topic, msgId (UNIQ_KEY),
  tags, keys, storeHost, bodyLength, costTime, msgType (ordinal of
  Normal_Msg, Trans_Msg_Half, Trans_msg_Commit, Delay_Msg), offsetMsgId,
  isSuccess [, clientHost] (13 fields in old clients: no offsetMsgId).
- ``SubBefore``: type, timeStamp, regionId, groupName, requestId, msgId,
  retryTimes, keys.
- ``SubAfter``: type, requestId, msgId, costTime, isSuccess, keys,
  contextCode [, timeStamp, groupName]. In CLOUD access-channel mode the last
  two are missing and the record ends with char 1 instead of char 2, so the
  next record is glued on; we split it off.
- ``EndTransaction``: type, timeStamp, regionId, groupName, topic, msgId,
  tags, keys, storeHost, msgType, transactionId, transactionState
  (COMMIT_MESSAGE / ROLLBACK_MESSAGE / UNKNOW), fromTransactionCheck.

Mapping: Pub → ``send`` (``ts`` = timeStamp + costTime, when the producer had
its answer; a Pub of msgType Trans_Msg_Half → ``txn_half`` with
``txn_id`` = msgId, as ``sendMessageInTransaction`` uses the UNIQ_KEY as
transaction id; an unsuccessful Pub is not an acknowledged send and is listed
in ``skipped``); SubBefore → ``deliver``; SubAfter → ``consume`` (SUCCESS /
RECONSUME_LATER from isSuccess; ``ts`` = its timeStamp, else the matching
SubBefore's + costTime); EndTransaction → ``txn_end`` (COMMIT / ROLLBACK /
UNKNOWN, ``detail.from_check``). ``msg_key`` = msgId, ``msg_id`` = offsetMsgId.
What the records lack (queue ids, offsets, broker-side events, the topic of a
consumed message that was never seen published) stays null. Rows are ordered
by time (ties: send, deliver, consume, txn_end, then input order) and numbered.

A message trace records no Pub for a oneway send nor for a send no answer came for (the client's
trace hook needs a SendResult), so a key it shows consumed but never published proves nothing: the
converted trace then has one ``send`` row of status NO_RESPONSE, without msg_key, whose
``detail.unrecorded`` says so, and UNEXPECTED is not judged (``traces.unjudged``).

Input file: one trace-message body per line, either raw (the body text with
its char 1 / char 2 separators) or a JSON object ``{"body": "..."}`` per line
(as exported by tools that dump the topic); both may be mixed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs

from rmqspec.traces.checks_common import NO_RESPONSE
from rmqspec.traces.errors import Rejected, TraceReadError

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRACE_TYPES = ("Pub", "SubBefore", "SubAfter", "EndTransaction")
MESSAGE_TYPES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg")
CONSUME_RETURN_TYPES = ("SUCCESS", "TIME_OUT", "EXCEPTION", "RETURNNULL", "FAILED")
TXN_STATES = {"COMMIT_MESSAGE": "COMMIT", "ROLLBACK_MESSAGE": "ROLLBACK", "UNKNOW": "UNKNOWN"}
# The row a converted trace gets when it shows keys consumed but never published: RocketMQ's
# trace hook writes a Pub only for a send with a result (SendMessageTraceHookImpl.sendMessageAfter
# returns when ``getSendResult()`` is null), so a oneway send and an attempt no answer came for leave
# none. The row has no msg_key: "some sends, of keys the trace cannot name", and UNEXPECTED, which reads
# every send of the trace, does not judge it (``traces.unjudged``, reason ``UNRECORDED``).
UNRECORDED_DETAIL = {
    "unrecorded": True,
    "why": "a RocketMQ message trace has no Pub for a oneway send or a send no answer came for",
}
MIN_FIELDS = {"Pub": 13, "SubBefore": 8, "SubAfter": 6, "EndTransaction": 13}
_RANK = {"send": 0, "txn_half": 0, "deliver": 1, "consume": 2, "txn_end": 3}


def split_records(body: str) -> list[list[str]]:
    """A body → records as field lists (Java split semantics; CLOUD glue undone)."""
    out: list[list[str]] = []
    for text in body.split(FIELD_SPLITOR):
        fields = text.split(CONTENT_SPLITOR)
        while fields and fields[-1] == "":
            fields.pop()
        while fields:
            glued = None
            if fields[0] == "SubAfter" and len(fields) > 7 and fields[7] in TRACE_TYPES:
                fields, glued = fields[:7], fields[7:]
            out.append(fields)
            fields = glued or []
    return out


def _opt(value: str) -> str | None:
    return None if value in ("", "null") else value


def _int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} {value!r} is not an integer") from None


def _bool(value: str) -> bool:
    return value.lower() == "true"  # Boolean.parseBoolean


@attrs.define
class ImportResult:
    rows: list[dict[str, Any]]
    rejected: list[Rejected]
    skipped: list[Rejected]
    bodies: int = 0
    records: int = 0


class MsgTraceConverter:
    """Stateful conversion: remembers topics by msgId and SubBefore contexts by requestId."""

    def __init__(self) -> None:
        self.topic_of: dict[str, str] = {}
        self.sub_before: dict[tuple[str, str], tuple[int, str | None, int]] = {}
        self.pending: list[tuple[int, int, int, dict[str, Any]]] = []
        self.rejected: list[Rejected] = []
        self.skipped: list[Rejected] = []
        self.records = 0
        self._order = 0

    def add_body(self, body: str, position: str) -> None:
        for index, fields in enumerate(split_records(body)):
            self.records += 1
            where = f"{position} record {index + 1}"
            try:
                row = self._convert(fields, where)
            except (ValueError, IndexError) as exc:
                self.rejected.append(Rejected(where, None, f"{fields[0] if fields else '?'}: {exc}"))
                continue
            if row is not None:
                self._order += 1
                self.pending.append((row["ts"], _RANK[row["event"]], self._order, row))

    def _convert(self, f: list[str], where: str) -> dict[str, Any] | None:
        kind = f[0] if f else ""
        if kind not in TRACE_TYPES:
            raise ValueError(f"unknown trace type {kind!r}")
        if len(f) < MIN_FIELDS[kind]:
            raise ValueError(f"{len(f)} fields, expected at least {MIN_FIELDS[kind]}")
        if kind == "Pub":
            return self._pub(f, where)
        if kind == "SubBefore":
            return self._sub_before(f)
        if kind == "SubAfter":
            return self._sub_after(f)
        return self._end_txn(f)

    def _pub(self, f: list[str], where: str) -> dict[str, Any] | None:
        ts = _int(f[1], "timeStamp")
        cost = _int(f[10], "costTime")
        mtype = _int(f[11], "msgType")
        if not 0 <= mtype < len(MESSAGE_TYPES):
            raise ValueError(f"msgType {mtype} is not a MessageType ordinal")
        offset_msg_id = _opt(f[12]) if len(f) >= 14 else None
        success = _bool(f[13] if len(f) >= 14 else f[12])
        client_host = _opt(f[14]) if len(f) >= 15 else None
        msg_id, topic = f[5], f[4]
        if not success:
            self.skipped.append(
                Rejected(where, None, f"Pub of {msg_id} failed (isSuccess=false): not acknowledged")
            )
            return None
        self.topic_of[msg_id] = topic
        detail = {
            "region_id": _opt(f[2]),
            "tags": _opt(f[6]),
            "keys": _opt(f[7]),
            "store_host": _opt(f[8]),
            "body_length": _int(f[9], "bodyLength"),
            "cost_time": cost,
            "msg_type": MESSAGE_TYPES[mtype],
            "trace_ts": ts,
        }
        half = MESSAGE_TYPES[mtype] == "Trans_Msg_Half"
        return {
            "ts": ts + cost,
            "event": "txn_half" if half else "send",
            "actor": client_host or _opt(f[3]),
            "group": _opt(f[3]),
            "topic": topic,
            "msg_key": msg_id,
            "msg_id": offset_msg_id,
            "status": "SEND_OK",
            "txn_id": msg_id if half else None,
            "detail": {k: v for k, v in detail.items() if v is not None},
        }

    def _sub_before(self, f: list[str]) -> dict[str, Any]:
        ts = _int(f[1], "timeStamp")
        retry = _int(f[6], "retryTimes")
        group, request_id, msg_id = _opt(f[3]), f[4], f[5]
        self.sub_before[(request_id, msg_id)] = (ts, group, retry)
        detail = {"request_id": request_id, "region_id": _opt(f[2]), "keys": _opt(f[7])}
        return {
            "ts": ts,
            "event": "deliver",
            "group": group,
            "topic": self.topic_of.get(msg_id),
            "msg_key": msg_id,
            "reconsume_times": retry,
            "detail": {k: v for k, v in detail.items() if v is not None},
        }

    def _sub_after(self, f: list[str]) -> dict[str, Any]:
        request_id, msg_id = f[1], f[2]
        cost = _int(f[3], "costTime")
        before = self.sub_before.get((request_id, msg_id))
        context = _int(f[6], "contextCode") if len(f) >= 7 else None
        if len(f) >= 8:
            ts = _int(f[7], "timeStamp")
        elif before is not None:
            ts = before[0] + cost
        else:
            raise ValueError(
                f"no timeStamp and no SubBefore with requestId {request_id} for {msg_id}"
            )
        group = _opt(f[8]) if len(f) >= 9 else (before[1] if before else None)
        detail: dict[str, Any] = {"request_id": request_id, "cost_time": cost}
        if _opt(f[5]) is not None:
            detail["keys"] = f[5]
        if context is not None and 0 <= context < len(CONSUME_RETURN_TYPES):
            detail["context"] = CONSUME_RETURN_TYPES[context]
        return {
            "ts": ts,
            "event": "consume",
            "group": group,
            "topic": self.topic_of.get(msg_id),
            "msg_key": msg_id,
            "reconsume_times": before[2] if before else None,
            "status": "SUCCESS" if _bool(f[4]) else "RECONSUME_LATER",
            "detail": detail,
        }

    def _end_txn(self, f: list[str]) -> dict[str, Any]:
        ts = _int(f[1], "timeStamp")
        state = f[11]
        if state not in TXN_STATES:
            raise ValueError(f"transactionState {state!r} is not one of {sorted(TXN_STATES)}")
        msg_id = f[5]
        detail = {
            "from_check": _bool(f[12]),
            "region_id": _opt(f[2]),
            "tags": _opt(f[6]),
            "keys": _opt(f[7]),
            "store_host": _opt(f[8]),
        }
        return {
            "ts": ts,
            "event": "txn_end",
            "actor": _opt(f[3]),
            "group": _opt(f[3]),
            "topic": _opt(f[4]),
            "msg_key": msg_id,
            "txn_id": _opt(f[10]) or msg_id,
            "status": TXN_STATES[state],
            "detail": {k: v for k, v in detail.items() if v is not None},
        }

    def finish(self) -> list[dict[str, Any]]:
        """All converted rows in time order, numbered from 0; when the trace shows keys consumed but never
        published, with the row standing for the sends it does not record (``UNRECORDED_DETAIL``), at the
        first such delivery."""
        self.pending.sort(key=lambda p: p[:3])
        published = {r["msg_key"] for *_, r in self.pending if r["event"] in ("send", "txn_half")}
        unpublished = {r["msg_key"]: r["ts"] for *_, r in reversed(self.pending)
                       if r["event"] in ("deliver", "consume") and r["msg_key"] not in published}
        if unpublished:
            row = {"ts": min(unpublished.values()), "event": "send", "status": NO_RESPONSE,
                   "detail": {**UNRECORDED_DETAIL, "keys_consumed_unpublished": len(unpublished)}}
            self.pending.append((row["ts"], -1, 0, row))  # before the first such delivery
            self.pending.sort(key=lambda p: p[:3])
        rows = []
        for seq, (_ts, _rank, _order, row) in enumerate(self.pending):
            rows.append({"seq": seq, **row})
        return rows


def bodies_from_lines(lines: Iterable[tuple[int, str]], path: str) -> Iterable[tuple[str, str | Rejected]]:
    """(position, body or Rejected) for each non-blank input line."""
    for number, line in lines:
        text = line.rstrip("\r\n")
        if not text.strip():
            continue
        where = f"{path}:{number}"
        if text.lstrip().startswith("{"):
            try:
                obj = json.loads(text)
            except ValueError as exc:
                yield where, Rejected(where, None, f"bad JSON: {getattr(exc, 'msg', exc)}")
                continue
            body = obj.get("body") if isinstance(obj, dict) else None
            if not isinstance(body, str):
                yield where, Rejected(where, None, 'JSON line without a string "body"')
                continue
            yield where, body
        else:
            yield where, text


def convert_bodies(bodies: Iterable[str]) -> list[dict[str, Any]]:
    """Trace-message bodies → rows (for tests and tools)."""
    conv = MsgTraceConverter()
    for i, body in enumerate(bodies):
        conv.add_body(body, f"body {i + 1}")
    if conv.rejected:
        raise ValueError("; ".join(str(r) for r in conv.rejected))
    return conv.finish()


def read_msgtrace(
    path: str | Path, on_progress: Callable[[int, int | None], None] | None = None
) -> ImportResult:
    """Read a file of trace-message bodies (see module doc) and convert it."""
    p = Path(path)
    if not p.exists():
        raise TraceReadError(p, "no such file or directory")
    if p.is_dir():
        raise TraceReadError(p, "is a directory; expected a file of trace-message bodies")
    conv = MsgTraceConverter()
    bodies = 0
    try:
        with open(p, encoding="utf-8", newline="\n") as fh:
            for where, body in bodies_from_lines(enumerate(fh, start=1), str(p)):
                if isinstance(body, Rejected):
                    conv.rejected.append(body)
                    continue
                bodies += 1
                conv.add_body(body, where)
                if on_progress and bodies % 10_000 == 0:
                    on_progress(bodies, None)
    except UnicodeDecodeError as exc:
        raise TraceReadError(p, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise TraceReadError(p, f"cannot read: {exc.strerror or exc}") from exc
    if bodies and conv.records and not conv.pending and not conv.skipped and conv.rejected and all(
        "unknown trace type" in r.reason for r in conv.rejected
    ):
        raise TraceReadError(p, "not a RocketMQ message-trace file: no Pub/SubBefore/SubAfter/EndTransaction record")
    return ImportResult(conv.finish(), conv.rejected, conv.skipped, bodies, conv.records)
