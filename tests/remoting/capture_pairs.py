"""The captured Java 4.9.8 session as (request, response) pairs and the broker's own requests.

Built on ``wire_fixtures``: every frame is decoded with our codec (the capture's own ``code``/``opaque``
columns are empty for the one binary ROCKETMQ exchange, so the decoded command is authoritative). A
request's response is the next response frame on the same TCP connection with the same opaque; oneway
requests have none.
"""

from __future__ import annotations

import functools

import attrs

from rmqspec.impl.codec import MessageRecord, encode_record
from rmqspec.remoting.command import RemotingCommand
from rmqspec.remoting.frame import decode_frame
from tests.remoting.wire_fixtures import captured, complete, frame_bytes


@attrs.frozen
class Exchange:
    conn: str  # "clientport->serverport" as captured
    request: RemotingCommand
    response: RemotingCommand | None  # None for oneway requests
    response_complete: bool  # False when the capture cut the response body

    @property
    def server_port(self) -> int:
        return int(self.conn.rpartition("->")[2])


@functools.cache
def decoded() -> tuple[tuple[dict, RemotingCommand], ...]:
    return tuple((row, decode_frame(frame_bytes(row)[4:])) for row in captured())


@functools.cache
def exchanges() -> tuple[Exchange, ...]:
    rows = decoded()
    out: list[Exchange] = []
    for i, (row, cmd) in enumerate(rows):
        if row["dir"] != "req" or cmd.is_response:
            continue
        match = None
        if not cmd.is_oneway:
            match = next(((r, c) for r, c in rows[i + 1:]
                          if r["conn"] == row["conn"] and c.is_response and c.opaque == cmd.opaque), None)
        out.append(Exchange(row["conn"], cmd, match[1] if match else None, complete(match[0]) if match else True))
    return tuple(out)


@functools.cache
def broker_requests() -> tuple[RemotingCommand, ...]:
    """Requests the broker sent on client connections (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED)."""
    return tuple(cmd for row, cmd in decoded() if row["dir"] == "srv_req" and not cmd.is_response)


def check_body(ext: dict[str, str]) -> bytes:
    """A whole body for the first captured CHECK_TRANSACTION_STATE (the capture kept 160 of its 316 bytes).

    The record is rebuilt from the scenario that sent it (RealScenarios (c): tags "unknown", keys
    "tx-unknown", body "txn unknown") and the broker's check properties; test_client_ops checks that its
    first 160 bytes are the captured ones. The order of the properties after the first two is a guess
    (Java HashMap order); only their total length is known to be right.
    """
    props = {"REAL_TOPIC": "RS_TXN_931679", "TRANSACTION_CHECK_TIMES": "1", "TRAN_MSG": "true",
             "UNIQ_KEY": ext["msgId"], "CLUSTER": "DefaultCluster", "PGROUP": "PG_TXN_931679", "WAIT": "false",
             "REAL_QID": "0", "KEYS": "tx-unknown", "TAGS": "unknown"}
    rec = MessageRecord(topic="RS_TXN_931679", queue_id=0, body=b"txn unknown", properties=props,
                        born_ts=1795344960781, store_ts=1795344960784, born_host=("127.0.0.1", 48546))
    return encode_record(rec, queue_offset=int(ext["tranStateTableOffset"]),
                         physical_offset=int(ext["commitLogOffset"]))
