"""Days the incremental tests share (``traces/carry.py``): one that touches what an earlier day closed (its
tombstones pulled back, by the reference checker and by the Spark audit), and two where a closed key's row
still decides LOST's delay-progress exemption; transactions that close on day 1 (``transaction_days``), and
``own_keys`` for drawn transactional traces."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from rmqspec.traces.schema import COLUMNS


def own_keys(draw: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (drawn, with ``txn_id`` values ``x<n>``) where most ``txn_*`` rows with a txn_id name
    their transaction's own msg_key ``k<n>``, so that keys close often; changed in place."""
    for row in rows:
        if row["event"].startswith("txn_") and row["txn_id"] is not None and draw(st.integers(0, 19)):
            row["msg_key"] = "k" + row["txn_id"][1:]
    return rows


def touching_day(day1: list[dict[str, Any]], consume: dict[str, Any]) -> list[dict[str, Any]]:
    """Three rows after ``day1`` (rows in seq order): a deliver to a new consumer group CG_NEW of a topic
    ``day1`` sent to other than ``consume``'s (LOST for every closed message of it), ``consume`` again
    (a duplicate SUCCESS: DUPLICATED) and a second drain (LOST judged again)."""
    topic = next(r["topic"] for r in day1 if r["event"] == "send" and r["topic"] != consume["topic"])
    seq, ts = day1[-1]["seq"] + 1, day1[-1]["ts"] + 1000
    blank = dict.fromkeys(day1[0])
    return [
        {**blank, "seq": seq, "ts": ts, "event": "deliver", "group": "CG_NEW", "topic": topic, "queue_id": 0,
         "queue_offset": 0, "msg_key": "NEW", "client_id": "c-new", "reconsume_times": 0},
        {**consume, "seq": seq + 1, "ts": ts + 1},
        {**blank, "seq": seq + 2, "ts": ts + 2, "event": "drain"},
    ]  # fmt: skip


def schedule_reuse_days() -> tuple[list[dict], list[dict]]:
    """Two days where LOST's delay-progress exemption needs a closed key's row: on day 1 the highest
    SCHEDULE_TOPIC_XXXX position of queue 2 (k1's, 5) is not its last store (k3's, 2), then a power
    crash; on day 2 k2's copy is stored at the reused position 3 and a crash follows before its
    fire: k2 is exempt, which only k1's store shows (k1 itself is closed: sent, fired, consumed)."""
    blank = dict.fromkeys(COLUMNS)

    def row(seq: int, event: str, **kw: Any) -> dict:
        return {**blank, "seq": seq, "ts": 1000 * seq, "event": event, **kw}

    sched, t = "SCHEDULE_TOPIC_XXXX", {"topic": "T", "status": "SEND_OK"}
    consume = {"group": "G", "topic": "T", "queue_id": 0, "status": "SUCCESS", "client_id": "c"}
    day1 = [
        row(0, "send", msg_key="k0", **t),
        row(1, "store", topic="T", queue_id=0, queue_offset=0, msg_key="k0"),
        row(2, "consume", queue_offset=0, msg_key="k0", **consume),
        row(3, "send", msg_key="k1", **t),
        row(4, "send", msg_key="k3", **t),
        row(5, "store", topic=sched, queue_id=2, queue_offset=5, msg_key="k1"),
        row(6, "store", topic=sched, queue_id=2, queue_offset=2, msg_key="k3"),
        row(7, "schedule_fire", topic="T", msg_key="k1"),
        row(8, "schedule_fire", topic="T", msg_key="k3"),
        row(9, "store", topic="T", queue_id=0, queue_offset=1, msg_key="k1"),
        row(10, "store", topic="T", queue_id=0, queue_offset=2, msg_key="k3"),
        row(11, "consume", queue_offset=1, msg_key="k1", **consume),
        row(12, "consume", queue_offset=2, msg_key="k3", **consume),
        row(13, "crash", status="power"),
    ]
    day2 = [
        row(14, "send", msg_key="k2", **t),
        row(15, "store", topic=sched, queue_id=2, queue_offset=3, msg_key="k2"),
        row(16, "crash", status="kill"),
        row(17, "drain"),
    ]
    return day1, day2


def transaction_days(case: str) -> tuple[list[dict], list[dict], str]:
    """Two days where a transaction closed on day 1 (committed, its key consumed: its rows are
    tombstones) still decides a day-2 verdict; and the code whose findings show it. ``case``:

    - ``top``: x1's half held the highest half-queue position (2) before day 2's power crash; x2's
      half at the reused position 1 is then exempt from TXN_UNRESOLVED (``skipped_halves``);
    - ``txn_id``: a check of x1 that names no msg_key, early: TXN_CHECK_EARLY needs x1's half;
    - ``at_risk``: day 2's power crash lists k1, whose COMMIT (x1) was day 1's: the window counts
      it, so x2's COMMIT goes unread and x2's check after it is no TXN_CHECK_AFTER_RESOLVED;
    - ``window``: the same crash on day 1; the window took x2's COMMIT, so x4's was read and x4's
      check on day 2 is a TXN_CHECK_AFTER_RESOLVED (with x2's op gone, x4's would be the unread one).
    """
    blank = dict.fromkeys(COLUMNS)

    def row(seq: int, event: str, **kw: Any) -> dict:
        return {**blank, "seq": seq, "ts": 10_000 * seq, "event": event, **kw}

    consume = {"group": "G", "topic": "T", "queue_id": 0, "status": "SUCCESS", "client_id": "c"}

    def closed(seq: int, n: int, offset: int) -> list[dict]:  # x{n}: half, COMMIT, consumed
        key, txn = f"k{n}", f"x{n}"
        return [
            row(seq, "txn_half", topic="T", queue_offset=offset, msg_key=key, txn_id=txn),
            row(seq + 1, "txn_end", topic="T", queue_offset=offset, msg_key=key, txn_id=txn, status="COMMIT"),
            row(seq + 2, "consume", queue_offset=n, msg_key=key, **consume),
        ]

    first = [row(0, "consume", queue_offset=0, msg_key="k0", **consume)]  # the first consume of (T, G): kept

    def top(seq: int) -> dict:  # an open half at the highest half-queue position
        return row(seq, "txn_half", topic="T", queue_offset=9, msg_key="k9", txn_id="x9")

    if case == "top":
        day1 = [*first, *closed(1, 1, 2)]
        day2 = [row(4, "crash", status="power"), row(5, "txn_half", topic="T", queue_offset=1, msg_key="k2",
                                                       txn_id="x2"), row(6, "drain")]
        return day1, day2, "TXN_UNRESOLVED"
    if case == "txn_id":
        day1 = [*first, *closed(1, 1, 0), top(4)]
        day2 = [row(5, "txn_check", topic="T", queue_offset=1, txn_id="x1", ts=15_000)]  # half ts + 5 s
        return day1, day2, "TXN_CHECK_EARLY"
    after = {"status": "power", "detail": '{"at_risk": ["k1"]}'}
    checked = {"topic": "T", "detail": '{"check_times": 1}'}
    if case == "at_risk":
        day1 = [*first, *closed(1, 1, 0), top(4)]
        day2 = [row(5, "crash", **after), *closed(6, 2, 1),
                row(9, "txn_check", queue_offset=2, msg_key="k2", txn_id="x2", **checked)]
        return day1, day2, "TXN_CHECK_AFTER_RESOLVED"
    day1 = [*first, *closed(1, 1, 0), top(4), row(5, "crash", **after), *closed(6, 2, 1), *closed(9, 4, 2)]
    day2 = [row(12, "txn_check", queue_offset=3, msg_key="k4", txn_id="x4", **checked)]
    return day1, day2, "TXN_CHECK_AFTER_RESOLVED"


# Drawn master/slave pair rows (issue 43; ``traces/carry_ha.py``): two pairs (P, Q) and rows naming none, any
# detail on any event, so commitlog offsets, records and keys collide; sent and consumed often, so keys close
# and their rows become tombstones.
PAIR_EVENTS = ("store", "store", "send", "send", "send", "deliver", "deliver", "consume", "consume", "consume",
               "replicate", "replicate", "replicate", "ha_link", "ha_link")  # fmt: skip
PAIR_STATUS = {"send": ("SEND_OK", "SEND_OK", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"),
               "ha_link": ("DISK_LOST", None, "CUT"), "consume": ("SUCCESS",)}
_P0, _P1 = '"broker":"P","broker_id":0', '"broker":"P","broker_id":1'
PAIR_DETAILS = (None, f"{{{_P0}}}", f"{{{_P1}}}", '{"broker":"Q","broker_id":0}', '{"broker_id":0}',
                f'{{{_P0},"role":"SYNC_MASTER","wait":true,"end":256}}',
                f'{{{_P0},"role":"SYNC_MASTER","wait":true,"end":512}}', f'{{{_P0},"role":"ASYNC_MASTER","end":512}}',
                f'{{{_P1},"from":0,"records":[[0,"k1"]]}}', f'{{{_P1},"from":256,"records":[[256,"k2"],[0,"k3"]]}}',
                '{"broker":"P","records":"x"}', '{"broker":"Q","from":0,"records":[[0,"k2"]]}',
                f'{{{_P0},"role":"ASYNC_MASTER"}}', '{"role":"SYNC_MASTER"}')  # fmt: skip


def pair_fields(fields: dict[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
    """A drawn trace's ``fields`` (the first value of each) with a pair's: offsets, keys, details."""
    return {**{name: (values[0],) for name, values in fields.items()}, "queue_offset": (0, 1, 2, None),
            "msg_key": ("k1", "k2", "k3", "k4", "k5", None), "commitlog_offset": (0, 256, 512, None),
            "detail": PAIR_DETAILS}


def pair_message_rows(draw: Any) -> list[dict[str, Any]]:
    """Drawn rows of one pair whose messages close (each key stored by the master, sent, consumed at once: its
    rows become tombstones), with transfers of drawn records, the slave's deliveries of drawn offsets and keys,
    disk losses at drawn slave ends, and messages of a broker naming no pair between them."""
    rows: list[dict[str, Any]] = []
    blank = dict.fromkeys(COLUMNS)
    keys: list[str] = []

    def emit(event: str, **fields: Any) -> None:
        rows.append({**blank, "seq": len(rows), "ts": len(rows), "event": event, **fields})

    def message(key: str, detail: str | None, end: int) -> None:
        q = {"topic": "T", "queue_id": 0, "queue_offset": len(keys), "msg_key": key, "commitlog_offset": end - 256}
        emit("store", **q, detail=detail)
        role = draw(st.sampled_from(("SYNC_MASTER", "ASYNC_MASTER")))
        send = None if detail is None else draw(st.sampled_from((  # without an end: no ack the replay keeps
            f'{{{_P0},"role":"{role}","wait":true,"end":{end}}}', f'{{{_P0},"role":"{role}"}}')))
        emit("send", **q, status=draw(st.sampled_from(("SEND_OK", "FLUSH_SLAVE_TIMEOUT"))), detail=send)
        emit("consume", **q, group="G", client_id="C1", status="SUCCESS")
        keys.append(key)

    for _ in range(draw(st.integers(1, 25))):
        step = draw(st.sampled_from(("message", "message", "message", "plain", "replicate", "replicate", "deliver",
                                     "lost", "link")))
        offsets = [256 * i for i in range(len(keys))]
        if step in ("message", "plain"):
            message(f"m{len(keys)}", f"{{{_P0}}}" if step == "message" else None, 256 * (len(keys) + 1))
        elif step == "replicate" and keys:
            moved = draw(st.lists(st.sampled_from(offsets), max_size=3, unique=True))  # twice: the same finding twice
            records = ",".join(f'[{o},"{draw(st.sampled_from(keys))}"]' for o in moved)
            emit("replicate", commitlog_offset=draw(st.sampled_from([0, *offsets, 256 * len(keys)])),
                 detail=f'{{{_P1},"from":{draw(st.sampled_from([0, *offsets]))},"records":[{records}]}}')
        elif step == "deliver" and keys:
            emit("deliver", topic="T", queue_id=0, queue_offset=0, group="G", client_id="C1", commitlog_offset=draw(
                st.sampled_from(offsets)), msg_key=draw(st.sampled_from(keys)), detail=f"{{{_P1}}}")
        elif step == "lost":
            emit("ha_link", status="DISK_LOST", commitlog_offset=draw(st.sampled_from([0, *offsets])),
                 detail=f'{{{_P0},"role":"{draw(st.sampled_from(("SYNC_MASTER", "ASYNC_MASTER")))}"}}')
        elif step == "link":
            emit("ha_link", status=draw(st.sampled_from((None, "CUT"))), detail=draw(st.sampled_from(
                (f"{{{_P0}}}", None))))
    return rows
