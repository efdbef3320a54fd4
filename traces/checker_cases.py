"""Hand-written traces, one or more per SPEC §8.1 code, with the findings they must give.

Each ``Case`` is a small trace in the notation of ``traces.notation`` and the
exact findings (code, seqs) the reference checker and the Spark audit must
report — nothing more. They pin the boundaries of each rule (a lock exactly
60000 ms old still holds, a delivery exactly at ``deliver_ts`` is on time,
…) and show every rule reachable. ``PARAMS`` is the configuration they
assume: RocketMQ's defaults plus ``GSMALL`` with max reconsume times 2.
The cases of 5.1.0+'s batched op messages need other parameters: ``checker_cases_batch.py``.
"""

from __future__ import annotations

import attrs

from rmqspec.properties.codes import AuditParams

PARAMS = AuditParams(group_retry_max=(("GSMALL", 2),), expire_reserved_ms=72 * 3_600_000)
# The JSON config file equivalent of PARAMS (spark/config.py): fileReservedTime given (the default 72 h), so
# retention's deletions are judged.
CONFIG_JSON = {"groupMaxReconsumeTimes": {"GSMALL": 2}, "fileReservedTimeMs": 72 * 3_600_000}


@attrs.frozen
class Case:
    name: str
    text: str
    expected: tuple[tuple[str, tuple[int, ...]], ...]


_CONSUMED = """
0 send t=1000 topic=T q=0 key=K1 st=SEND_OK
1 store t=1000 topic=T q=0 off=0 key=K1
2 deliver t=1010 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
3 consume t=1020 g=G topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS
4 commit_offset t=1030 g=G topic=T q=0 off=1
"""

CASES: tuple[Case, ...] = (
    Case("clean consumed message", _CONSUMED + "5 drain t=9000\n", ()),
    Case(
        "ORDER_QUEUE_GAP skipped offset; a crash starts a new epoch",
        """
        0 store t=1 topic=T q=0 off=0 key=A
        1 store t=2 topic=T q=0 off=1 key=B
        2 store t=3 topic=T q=1 off=5 key=C
        3 store t=4 topic=T q=0 off=3 key=D
        4 crash t=5 st=kill
        5 recover t=6
        6 store t=7 topic=T q=0 off=2 key=E
        7 store t=8 topic=T q=0 off=3 key=F
        8 store t=9 topic=T q=0 off=3 key=G
        """,
        (("ORDER_QUEUE_GAP", (1, 3)), ("ORDER_QUEUE_GAP", (7, 8))),
    ),
    Case(
        "ORDER_KEY_REORDERED within one ownership, not across a takeover",
        """
        0 lock t=0 g=G topic=T q=0 c=C1 st=GRANTED
        1 consume t=10 g=G topic=T q=0 off=0 key=A c=C1 st=SUCCESS
        2 consume t=20 g=G topic=T q=0 off=1 key=B c=C1 st=SUCCESS
        3 consume t=30 g=G topic=T q=0 off=1 key=B c=C1 st=SUCCESS
        4 lock t=20000 g=G topic=T q=0 c=C1 st=GRANTED
        5 consume t=20010 g=G topic=T q=0 off=1 key=B c=C1 st=RECONSUME_LATER
        6 consume t=20020 g=G topic=T q=0 off=0 key=A c=C1 st=SUCCESS
        7 lock t=90000 g=G topic=T q=0 c=C2 st=GRANTED
        8 consume t=90010 g=G topic=T q=0 off=0 key=A c=C2 st=SUCCESS
        9 unlock t=90020 g=G topic=T q=0 c=C2
        10 lock t=90030 g=G topic=T q=0 c=C2 st=GRANTED
        11 consume t=90040 g=G topic=T q=0 off=0 key=A c=C2 st=SUCCESS
        """,
        (
            ("ORDER_KEY_REORDERED", (2, 3)),
            ("ORDER_KEY_REORDERED", (3, 6)),
            ("UNEXPECTED", (1,)),
            ("UNEXPECTED", (2,)),
            ("UNEXPECTED", (3,)),
            ("UNEXPECTED", (5,)),
            ("UNEXPECTED", (6,)),
            ("UNEXPECTED", (8,)),
            ("UNEXPECTED", (11,)),
            ("DUPLICATED", (1, 6)),
            ("DUPLICATED", (2, 3)),
            ("DUPLICATED", (1, 8)),
            ("DUPLICATED", (1, 11)),
        ),
    ),
    Case(
        "LOST: acknowledged, consumed by nobody in G; DLQ and other groups are fine",
        _CONSUMED
        + """
        5 send t=2000 topic=T q=0 key=K2 st=SEND_OK
        6 store t=2000 topic=T q=0 off=1 key=K2
        7 send t=2100 topic=T q=0 key=K3
        8 store t=2100 topic=T q=0 off=2 key=K3
        9 send_back t=2200 g=G topic=T q=0 off=2 key=K3 rt=1 lvl=-1 st=DLQ
        10 send t=2300 topic=U q=0 key=K4 st=SEND_OK
        11 send t=2400 topic=T q=0 key=K5 st=FAILED
        12 drain t=9000
        """,
        (("LOST", (5, 12)),),
    ),
    Case(
        "LOST: not judged of a key an expire took (its copy below the commitlog's new min, or of unknown offset); "
        "judged of one it kept and of one sent after it (issue 42; a row without detail.cause proves no early "
        "deletion)",
        _CONSUMED
        + """
        5 send t=2000 topic=T q=0 key=K2 st=SEND_OK clo=300
        6 store t=2000 topic=T q=0 off=1 clo=300 key=K2
        7 send t=2100 topic=T q=0 key=K3 st=SEND_OK clo=5000
        8 store t=2100 topic=T q=0 off=2 clo=5000 key=K3
        9 send t=2200 topic=T q=0 key=K4 st=SEND_OK
        10 store t=2200 topic=T q=0 off=3 key=K4
        11 expire t=8000 clo=4096
        12 send t=8100 topic=T q=0 key=K5 st=SEND_OK clo=6000
        13 drain t=9000
        """,
        (("LOST", (7, 13)), ("LOST", (12, 13))),
    ),
    Case(
        "LOST: a queue's expire row takes the keys placed below its min in that queue, not another queue's",
        _CONSUMED
        + """
        5 send t=2000 topic=T q=0 key=K2 st=SEND_OK
        6 store t=2000 topic=T q=0 off=1 key=K2
        7 send t=2100 topic=T q=1 key=K3 st=SEND_OK off=0
        8 store t=2100 topic=T q=1 off=0 key=K3
        9 expire t=8000 topic=T q=0 off=2
        10 drain t=9000
        """,
        (("LOST", (7, 10)),),
    ),
    Case(
        "LOST: judged of a copy an expire of cause reserved took less than fileReservedTime (72 h) after its "
        "store; not of one stored at the limit, nor of one only a send row places (its ts is no store time)",
        _CONSUMED
        + """
        5 send t=2000 topic=T q=0 key=K2 st=SEND_OK clo=300
        6 store t=2000 topic=T q=0 off=1 clo=300 key=K2
        7 send t=2501 topic=T q=0 key=K3 st=SEND_OK clo=3000
        8 store t=2501 topic=T q=0 off=2 clo=3000 key=K3
        9 send t=3000 topic=T q=0 key=K4 st=SEND_OK off=3 clo=3500
        10 expire t=259202500 clo=4096 detail={"cause":"reserved","files":1}
        11 drain t=259300000
        """,
        (("LOST", (7, 11)),),
    ),
    Case(
        "LOST: an expire of cause forcibly (the disk over 0.85) may take any copy",
        _CONSUMED
        + """
        5 send t=2501 topic=T q=0 key=K3 st=SEND_OK clo=3000
        6 store t=2501 topic=T q=0 off=1 clo=3000 key=K3
        7 expire t=8000 clo=4096 detail={"cause":"forcibly","files":1}
        8 drain t=9000
        """,
        (),
    ),
    Case(
        "LOST: a send answered with the response code SUCCESS is acknowledged; an unknown status is not",
        _CONSUMED
        + """
        5 send t=2000 topic=T q=0 key=K2 st=SUCCESS
        6 store t=2000 topic=T q=0 off=1 key=K2
        7 send t=2100 topic=T q=0 key=K3 st=OK
        8 store t=2100 topic=T q=0 off=2 key=K3
        9 send t=2200 topic=T q=0 key=K4 st=SYSTEM_BUSY
        10 drain t=9000
        """,
        (("LOST", (5, 10)),),
    ),
    Case(
        "LOST of a committed transaction (topic from the COMMIT)",
        _CONSUMED
        + """
        5 txn_half t=2000 topic=RMQ_SYS_TRANS_HALF_TOPIC key=TX1 txn=TX1
        6 txn_end t=2100 topic=T q=0 key=TX1 txn=TX1 st=COMMIT
        7 drain t=9000
        """,
        (("LOST", (6, 7)),),
    ),
    Case(
        "LOST is not judged without a drain",
        _CONSUMED + "5 send t=2000 topic=T q=0 key=K2 st=SEND_OK\n",
        (),
    ),
    Case(
        "UNEXPECTED deliver and consume of a key never sent",
        _CONSUMED
        + """
        5 deliver t=2000 g=G topic=T q=0 off=1 key=GHOST c=C1 rt=0
        6 consume t=2010 g=G topic=T q=0 off=1 key=GHOST c=C1 st=SUCCESS
        """,
        (("UNEXPECTED", (5,)), ("UNEXPECTED", (6,))),
    ),
    Case(
        "RETRY_EARLY: delivery exactly at deliver_ts is on time, 1 ms before is early",
        """
        0 send t=0 topic=T q=0 key=K1
        1 store t=0 topic=T q=0 off=0 key=K1
        2 deliver t=10 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
        3 consume t=20 g=G topic=T q=0 off=0 key=K1 c=C1 st=RECONSUME_LATER
        4 send_back t=30 g=G topic=T q=0 off=0 key=K1 rt=1 lvl=3 due=10030 st=RETRY
        5 deliver t=10030 g=G topic=%RETRY%G q=0 off=0 key=K1 c=C1 rt=1
        6 consume t=10040 g=G topic=%RETRY%G q=0 off=0 key=K1 c=C1 st=RECONSUME_LATER
        7 send_back t=10050 g=G topic=%RETRY%G q=0 off=0 key=K1 rt=2 lvl=4 due=40050 st=RETRY
        8 deliver t=40049 g=G topic=%RETRY%G q=0 off=1 key=K1 c=C1 rt=2
        9 send_back t=40060 g=G topic=%RETRY%G q=0 off=1 key=K1 rt=3 lvl=5 due=99999 st=RETRY
        """,
        (("RETRY_EARLY", (7, 8)), ("RETRY_EARLY", (9,))),
    ),
    Case(
        "RETRY_EARLY: two copies share a key (duplicate COMMIT): each retry is judged against the "
        "earliest-due send-back, never the latest",
        """
        0 txn_half t=0 topic=T key=K1 txn=K1
        1 txn_end t=10 topic=T key=K1 txn=K1 st=COMMIT
        2 txn_end t=20 topic=T key=K1 txn=K1 st=COMMIT
        3 deliver t=30 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
        4 deliver t=30 g=G topic=T q=0 off=1 key=K1 c=C1 rt=0
        5 send_back t=40 g=G topic=T q=0 off=0 key=K1 rt=1 lvl=1 due=1040 st=RETRY
        6 send_back t=40 g=G topic=T q=0 off=1 key=K1 rt=1 lvl=2 due=5040 st=RETRY
        7 deliver t=1040 g=G topic=%RETRY%G q=0 off=0 key=K1 c=C1 rt=1
        8 deliver t=5040 g=G topic=%RETRY%G q=0 off=1 key=K1 c=C1 rt=1
        9 send_back t=6000 g=G topic=%RETRY%G q=0 off=0 key=K1 rt=2 lvl=3 due=16000 st=RETRY
        10 send_back t=6000 g=G topic=%RETRY%G q=0 off=1 key=K1 rt=2 lvl=3 due=16000 st=RETRY
        11 deliver t=15999 g=G topic=%RETRY%G q=0 off=2 key=K1 c=C1 rt=2
        """,
        (("RETRY_EARLY", (9, 11)), ("DUPLICATE_COMMIT", (1, 2))),
    ),
    Case(
        "DLQ_EARLY / DLQ_MISSED at the default max 16 and a per-group max 2",
        """
        0 send t=0 topic=T q=0 key=K1
        1 send_back t=10 g=G topic=%RETRY%G q=0 off=0 key=K1 rt=16 lvl=0 st=DLQ
        2 send_back t=20 g=G topic=%RETRY%G q=0 off=1 key=K1 rt=17 lvl=0 st=DLQ
        3 send_back t=30 g=G topic=%RETRY%G q=0 off=2 key=K1 rt=16 lvl=18 due=7200030 st=RETRY
        4 send_back t=40 g=G topic=%RETRY%G q=0 off=3 key=K1 rt=17 lvl=18 due=7200040 st=RETRY
        5 deliver t=50 g=G topic=%DLQ%G q=0 off=0 key=K1 c=C1 rt=17
        6 send_back t=60 g=G topic=%RETRY%G q=0 off=4 key=K1 rt=1 lvl=-1 st=DLQ
        7 send_back t=70 g=GSMALL topic=%RETRY%GSMALL q=0 off=0 key=K1 rt=3 lvl=0 st=DLQ
        8 send_back t=80 g=GSMALL topic=%RETRY%GSMALL q=0 off=1 key=K1 rt=2 lvl=0 st=DLQ
        9 deliver t=90 g=GSMALL topic=%RETRY%GSMALL q=0 off=2 key=K1 c=C1 rt=3
        """,
        (
            ("DLQ_EARLY", (1,)),
            ("DLQ_MISSED", (4,)),
            ("DLQ_MISSED", (5,)),
            ("RETRY_EARLY", (4, 5)),
            ("DLQ_EARLY", (8,)),
            ("DLQ_MISSED", (9,)),
        ),
    ),
    Case(
        "DELAY_EARLY: a fire at deliver_ts is on time, 1 ms before is early",
        """
        0 store t=0 topic=SCHEDULE_TOPIC_XXXX q=2 off=0 key=K1 id=S1 rt=0 lvl=3 due=10000
        1 send t=0 topic=T q=0 key=K1 lvl=3
        2 schedule_fire t=10000 topic=T q=0 key=K1 id=S1 rt=0
        3 store t=10000 topic=T q=0 off=0 key=K1
        4 deliver t=10010 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
        5 store t=20000 topic=SCHEDULE_TOPIC_XXXX q=2 off=1 key=K2 id=S2 rt=0 lvl=3 due=30000
        6 send t=20000 topic=T q=0 key=K2 lvl=3
        7 schedule_fire t=29999 topic=T q=0 key=K2 id=S2 rt=0
        8 store t=29999 topic=T q=0 off=1 key=K2
        9 deliver t=29999 g=G topic=T q=0 off=1 key=K2 c=C1 rt=0
        10 store t=40000 topic=SCHEDULE_TOPIC_XXXX q=2 off=2 key=K3 id=S3 rt=0 lvl=3 due=50000
        11 send t=40000 topic=T q=0 key=K3 lvl=3
        12 deliver t=45000 g=G topic=T q=0 off=2 key=K3 c=C1 rt=0
        """,
        (("DELAY_EARLY", (5, 7)), ("DELAY_EARLY", (10, 12))),
    ),
    Case(
        "LOCK_OVERLAP at exactly 60000 ms; 60001 ms and after an unlock are fine",
        """
        0 lock t=0 g=G topic=T q=0 c=C1 st=GRANTED
        1 lock t=60000 g=G topic=T q=0 c=C2 st=GRANTED
        2 lock t=200000 g=G topic=T q=1 c=C1 st=GRANTED
        3 lock t=260001 g=G topic=T q=1 c=C2 st=GRANTED
        4 lock t=300000 g=G topic=T q=2 c=C1 st=GRANTED
        5 unlock t=300001 g=G topic=T q=2 c=C1
        6 lock t=300002 g=G topic=T q=2 c=C2 st=GRANTED
        7 lock t=300003 g=G topic=T q=2 c=C1 st=DENIED
        """,
        (("LOCK_OVERLAP", (0, 1)),),
    ),
    Case(
        "LOCK_OVERLAP renewals inside the other's lifetime, and across a crash none",
        """
        0 lock t=0 g=G topic=T q=0 c=C1 st=GRANTED
        1 lock t=1000 g=G topic=T q=0 c=C2 st=GRANTED
        2 lock t=21000 g=G topic=T q=0 c=C2 st=GRANTED
        3 lock t=70000 g=G topic=T q=0 c=C2 st=GRANTED
        4 lock t=80000 g=G topic=T q=3 c=C1 st=GRANTED
        5 crash t=80001 st=kill
        6 recover t=80002
        7 lock t=80003 g=G topic=T q=3 c=C2 st=GRANTED
        """,
        (("LOCK_OVERLAP", (0, 1)), ("LOCK_OVERLAP", (0, 2))),
    ),
    Case(
        "ORDERLY_WITHOUT_LOCK missing, superseded, expired (30001 ms) but not at 30000",
        """
        0 orderly_start t=0 g=G topic=T q=0 c=C1
        1 orderly_end t=1 g=G topic=T q=0 c=C1
        2 lock t=10 g=G topic=T q=0 c=C1 st=GRANTED
        3 orderly_start t=30010 g=G topic=T q=0 c=C1
        4 orderly_end t=30011 g=G topic=T q=0 c=C1
        5 orderly_start t=30011 g=G topic=T q=0 c=C1
        6 orderly_end t=30012 g=G topic=T q=0 c=C1
        7 lock t=100000 g=G topic=T q=0 c=C2 st=GRANTED
        8 orderly_start t=100001 g=G topic=T q=0 c=C1
        9 orderly_end t=100002 g=G topic=T q=0 c=C1
        """,
        (
            ("ORDERLY_WITHOUT_LOCK", (0,)),
            ("ORDERLY_WITHOUT_LOCK", (2, 5)),
            ("ORDERLY_WITHOUT_LOCK", (7, 8)),
        ),
    ),
    Case(
        "ORDERLY_LOCK_OUTLIVED: C2's listener outlived its lock, C1 was granted the queue; back-to-back is fine",
        """
        0 lock t=0 g=G topic=T q=0 c=C1 st=GRANTED
        1 orderly_start t=10 g=G topic=T q=0 c=C1
        2 orderly_end t=20 g=G topic=T q=0 c=C1
        3 lock t=70000 g=G topic=T q=0 c=C2 st=GRANTED
        4 orderly_start t=70010 g=G topic=T q=0 c=C2
        5 orderly_end t=70020 g=G topic=T q=0 c=C2
        6 orderly_start t=70030 g=G topic=T q=0 c=C2
        7 lock t=140000 g=G topic=T q=0 c=C1 st=GRANTED
        8 orderly_start t=140010 g=G topic=T q=0 c=C1
        9 orderly_end t=140020 g=G topic=T q=0 c=C1
        """,
        (("ORDERLY_LOCK_OUTLIVED", (6, 7, 8)),),
    ),
    Case(
        "ORDERLY_CONCURRENT: a start inside another's window under a lock granted before that window opened",
        """
        0 lock t=0 g=G topic=T q=0 c=C1 st=GRANTED
        1 orderly_start t=10 g=G topic=T q=0 c=C1
        2 lock t=60001 g=G topic=T q=0 c=C2 st=GRANTED
        3 orderly_start t=60002 g=G topic=T q=0 c=C2
        4 orderly_start t=60003 g=G topic=T q=0 c=C1
        """,
        (("ORDERLY_LOCK_OUTLIVED", (1, 2, 3)), ("ORDERLY_CONCURRENT", (3, 4)), ("ORDERLY_WITHOUT_LOCK", (2, 4)),
         ("ORDERLY_CONCURRENT", (1, 4))),
    ),
    Case(
        "ORDER_KEY_REORDERED: an owner's ROLLBACK (no autoCommit) consumes again from the start; another's does not",
        """
        0 lock t=0 g=G topic=T q=0 c=C1 st=GRANTED
        1 consume t=1 g=G topic=T q=0 off=0 c=C1 st=SUCCESS
        2 consume t=2 g=G topic=T q=0 off=1 c=C1 st=SUCCESS
        3 orderly_end t=3 g=G topic=T q=0 c=C1 st=ROLLBACK
        4 consume t=1003 g=G topic=T q=0 off=0 c=C1 st=SUCCESS
        5 consume t=1004 g=G topic=T q=0 off=1 c=C1 st=SUCCESS
        6 orderly_end t=1005 g=G topic=T q=0 c=C2 st=ROLLBACK
        7 consume t=1006 g=G topic=T q=0 off=0 c=C1 st=SUCCESS
        """,
        (("ORDER_KEY_REORDERED", (5, 7)),),
    ),
    Case(
        "ORDERLY_CONCURRENT: a client's second batch while its own window is open (MessageQueueLock)",
        """
        0 lock t=0 g=G topic=T q=0 c=C1 st=GRANTED
        1 orderly_start t=10 g=G topic=T q=0 c=C1
        2 orderly_start t=11 g=G topic=T q=0 c=C1
        3 orderly_start t=12 g=G topic=T q=0 c=C1
        4 orderly_end t=20 g=G topic=T q=0 c=C1
        5 orderly_start t=21 g=G topic=T q=1 c=C1
        6 orderly_start t=22 g=G topic=T q=0 c=C1
        7 orderly_end t=30 g=G topic=T q=0 c=C1
        8 orderly_start t=31 g=G topic=T q=0 c=C1
        """,
        (("ORDERLY_CONCURRENT", (1, 2)), ("ORDERLY_CONCURRENT", (1, 3)), ("ORDERLY_WITHOUT_LOCK", (5,))),
    ),
    Case(
        "OFFSET_OVERRUN past an unacknowledged offset; send_back acknowledges",
        """
        0 send t=0 topic=T q=0 key=A
        1 send t=0 topic=T q=0 key=B
        2 send t=0 topic=T q=0 key=C
        3 deliver t=10 g=G topic=T q=0 off=0 key=A c=C1 rt=0
        4 deliver t=10 g=G topic=T q=0 off=1 key=B c=C1 rt=0
        5 deliver t=10 g=G topic=T q=0 off=2 key=C c=C1 rt=0
        6 consume t=20 g=G topic=T q=0 off=1 key=B c=C1 st=SUCCESS
        7 commit_offset t=30 g=G topic=T q=0 off=0
        8 commit_offset t=31 g=G topic=T q=0 off=2
        9 send_back t=40 g=G topic=T q=0 off=0 key=A rt=1 lvl=3 due=10040 st=RETRY
        10 commit_offset t=50 g=G topic=T q=0 off=2
        11 commit_offset t=51 g=G topic=T q=0 off=3
        """,
        (("OFFSET_OVERRUN", (3, 8)), ("OFFSET_OVERRUN", (5, 11))),
    ),
    Case(
        "TXN_VISIBLE_BEFORE_COMMIT and TXN_ROLLBACK_VISIBLE",
        """
        0 txn_half t=0 topic=RMQ_SYS_TRANS_HALF_TOPIC key=X1 txn=X1
        1 deliver t=10 g=G topic=T q=0 off=0 key=X1 c=C1 rt=0
        2 txn_end t=20 topic=T q=0 key=X1 txn=X1 st=COMMIT
        3 deliver t=30 g=G topic=T q=0 off=1 key=X1 c=C1 rt=0
        4 txn_half t=40 topic=RMQ_SYS_TRANS_HALF_TOPIC key=X2 txn=X2
        5 deliver t=50 g=G topic=T q=0 off=2 key=X2 c=C1 rt=0
        6 txn_end t=60 key=X2 txn=X2 st=ROLLBACK
        7 deliver t=70 g=G topic=T q=0 off=3 key=X2 c=C1 rt=0
        """,
        (
            ("TXN_VISIBLE_BEFORE_COMMIT", (0, 1)),
            ("TXN_VISIBLE_BEFORE_COMMIT", (4, 5)),
            ("TXN_ROLLBACK_VISIBLE", (6, 7)),
        ),
    ),
    Case(
        "TXN_DOUBLE_RESOLVED and DUPLICATE_COMMIT; a discard after the COMMIT leaves it committed",
        """
        0 txn_half t=0 topic=H key=X1 txn=X1
        1 txn_end t=10 key=X1 txn=X1 st=COMMIT
        2 txn_end t=20 key=X1 txn=X1 st=COMMIT
        3 txn_end t=30 key=X1 txn=X1 st=ROLLBACK
        4 txn_half t=40 topic=H key=X2 txn=X2
        5 txn_discard t=259200050 key=X2 txn=X2
        6 txn_end t=259200060 key=X2 txn=X2 st=UNKNOWN
        7 txn_end t=259200070 key=X2 txn=X2 st=ROLLBACK
        8 txn_half t=259200080 topic=H key=X3 txn=X3
        9 txn_end t=259200090 key=X3 txn=X3 st=COMMIT
        10 txn_discard t=518400090 key=X3 txn=X3
        11 txn_end t=518400100 key=X3 txn=X3 st=COMMIT
        """,
        (
            ("DUPLICATE_COMMIT", (1, 2)),
            ("TXN_DOUBLE_RESOLVED", (1, 3)),
            ("TXN_DOUBLE_RESOLVED", (5, 7)),
            ("DUPLICATE_COMMIT", (9, 11)),
        ),
    ),
    Case(
        "TXN_CHECK_EARLY: a check at half + 6000 ms is on time, 5999 ms is early",
        """
        0 txn_half t=1000 topic=H key=X1 txn=X1
        1 txn_check t=7000 key=X1 txn=X1
        2 txn_half t=1000 topic=H key=X2 txn=X2
        3 txn_check t=6999 key=X2 txn=X2
        4 txn_end t=7000 key=X1 txn=X1 st=ROLLBACK
        5 txn_end t=7000 key=X2 txn=X2 st=ROLLBACK
        6 drain t=8000
        """,
        (("TXN_CHECK_EARLY", (2, 3)),),
    ),
    Case(
        "TXN_CHECK_EXCEEDED: the 16th check with check max 15",
        "0 txn_half t=0 topic=H key=X1 txn=X1\n"
        + "".join(f"{i} txn_check t={i * 60000} key=X1 txn=X1\n" for i in range(1, 17))
        + "17 txn_discard t=1000000 key=X1 txn=X1\n18 drain t=2000000\n",
        (("TXN_CHECK_EXCEEDED", (0, 16)),),
    ),
    Case(
        "TXN_UNRESOLVED at the drain; resolved and discarded halves are fine",
        """
        0 txn_half t=0 topic=H key=X1 txn=X1
        1 txn_half t=0 topic=H key=X2 txn=X2
        2 txn_half t=0 topic=H key=X3 txn=X3
        3 txn_end t=10 key=X1 txn=X1 st=UNKNOWN
        4 txn_end t=20 key=X2 txn=X2 st=ROLLBACK
        5 txn_discard t=259200001 key=X3 txn=X3
        6 drain t=259200100
        """,
        (("TXN_UNRESOLVED", (0, 6)),),
    ),
    Case(
        "LOST: after a power loss, a send at a reused queue position below the group's committed "
        "offset may be skipped; one at or above it, or of another group, may not",
        """
        0 send t=0 topic=T q=0 off=0 key=A1
        1 deliver t=10 g=G topic=T q=0 off=0 key=A1 c=C1 rt=0
        2 consume t=20 g=G topic=T q=0 off=0 key=A1 c=C1 st=SUCCESS
        3 commit_offset t=30 g=G topic=T q=0 off=1
        4 crash t=40 st=power
        5 recover t=50
        6 send t=60 topic=T q=0 off=0 key=A2
        7 send t=70 topic=T q=0 off=1 key=A3
        8 deliver t=80 g=H topic=T q=0 off=1 key=A3 c=C2 rt=0
        9 drain t=90
        """,
        (("LOST", (0, 9)), ("LOST", (6, 9)), ("LOST", (7, 9)), ("LOST", (7, 9))),
    ),
    Case(
        "LOST: after a kill, a send at a position below the group's committed offset is not exempt: a kill "
        "truncates nothing a group read (the page cache survives it; a TransientStorePool loses only "
        "uncommitted bytes, which reads never reach)",
        """
        0 send t=0 topic=T q=0 off=0 key=A1
        1 deliver t=10 g=G topic=T q=0 off=0 key=A1 c=C1 rt=0
        2 consume t=20 g=G topic=T q=0 off=0 key=A1 c=C1 st=SUCCESS
        3 commit_offset t=30 g=G topic=T q=0 off=1
        4 crash t=40 st=kill
        5 recover t=50
        6 send t=60 topic=T q=0 off=0 key=A2
        7 send t=70 topic=T q=0 off=1 key=A3
        8 deliver t=80 g=H topic=T q=0 off=1 key=A3 c=C2 rt=0
        9 drain t=90
        """,
        (("LOST", (0, 9)), ("LOST", (6, 9)), ("LOST", (6, 9)), ("LOST", (7, 9)), ("LOST", (7, 9))),
    ),
    Case(
        "LOST: after a power loss, a delayed copy at a reused schedule position that a crash finds "
        "unfired may be skipped (fidelity T4); one fired before it, one at a new position or level may not",
        """
        0 send t=0 topic=T q=0 off=0 key=D0 lvl=1
        1 store t=0 topic=SCHEDULE_TOPIC_XXXX q=0 off=0 key=D0 lvl=1 due=1000
        2 send t=0 topic=T q=0 off=1 key=D1 lvl=1
        3 store t=0 topic=SCHEDULE_TOPIC_XXXX q=0 off=1 key=D1 lvl=1 due=1000
        4 schedule_fire t=1000 topic=T q=0 key=D0
        5 store t=1000 topic=T q=0 off=0 key=D0
        6 schedule_fire t=1000 topic=T q=0 key=D1
        7 store t=1000 topic=T q=0 off=1 key=D1
        8 consume t=1010 g=G topic=T q=0 off=0 key=D0 c=C1 st=SUCCESS
        9 consume t=1010 g=G topic=T q=0 off=1 key=D1 c=C1 st=SUCCESS
        10 crash t=20000 st=power
        11 recover t=20001
        12 send t=20002 topic=T q=0 off=0 key=D2 lvl=1
        13 store t=20002 topic=SCHEDULE_TOPIC_XXXX q=0 off=0 key=D2 lvl=1 due=21002
        14 send t=20003 topic=T q=0 off=1 key=D5 lvl=1
        15 store t=20003 topic=SCHEDULE_TOPIC_XXXX q=0 off=1 key=D5 lvl=1 due=20003
        16 schedule_fire t=20004 topic=T q=0 key=D5
        17 store t=20004 topic=T q=0 off=2 key=D5
        18 send t=20005 topic=T q=0 off=2 key=D3 lvl=1
        19 store t=20005 topic=SCHEDULE_TOPIC_XXXX q=0 off=2 key=D3 lvl=1 due=21005
        20 send t=20006 topic=T q=0 off=0 key=D4 lvl=2
        21 store t=20006 topic=SCHEDULE_TOPIC_XXXX q=1 off=0 key=D4 lvl=2 due=25006
        22 crash t=20010 st=kill
        23 recover t=20011
        24 drain t=30000
        """,
        (("LOST", (14, 24)), ("LOST", (18, 24)), ("LOST", (20, 24))),
    ),
    Case(
        "TXN_UNRESOLVED: after a power loss, a half at a reused half-queue position below the saved "
        "check progress may be skipped; one above it, or after a kill, may not",
        """
        0 txn_half t=0 topic=H q=0 off=0 key=X1 txn=X1
        1 txn_half t=0 topic=H q=0 off=1 key=X2 txn=X2
        2 txn_check t=60000 topic=H off=2 key=X1 txn=X1
        3 txn_end t=60010 key=X1 txn=X1 st=COMMIT
        4 txn_end t=60020 key=X2 txn=X2 st=COMMIT
        5 crash t=70000 st=kill
        6 recover t=70001
        7 txn_half t=70002 topic=H q=0 off=3 key=X3 txn=X3
        8 crash t=80000 st=power
        9 recover t=80001
        10 txn_half t=80002 topic=H q=0 off=0 key=X4 txn=X4
        11 txn_half t=80003 topic=H q=0 off=3 key=X5 txn=X5
        12 txn_half t=80004 topic=H q=0 off=4 key=X6 txn=X6
        13 drain t=99000
        """,
        (("TXN_UNRESOLVED", (7, 13)), ("TXN_UNRESOLVED", (12, 13))),
    ),
    Case(
        "TXN_CHECK_AFTER_RESOLVED: the copy an op named is not checked again; a re-put copy the "
        "op did not name may be; a copy with no op may be checked after a crash repeats its number",
        """
        0 txn_half t=0 topic=T off=0 key=X1 txn=X1
        1 txn_half t=0 topic=T off=1 key=X2 txn=X2
        2 txn_end t=1000 key=X1 txn=X1 st=COMMIT off=0
        3 txn_check t=60000 key=X1 txn=X1 off=2 detail={"check_times":1}
        4 txn_check t=60000 key=X2 txn=X2 off=3 detail={"check_times":1}
        5 txn_end t=60010 key=X2 txn=X2 st=COMMIT off=1
        6 txn_check t=120000 key=X2 txn=X2 off=4 detail={"check_times":2}
        7 crash t=120001 st=kill
        8 recover t=120002
        9 txn_check t=180000 key=X2 txn=X2 off=5 detail={"check_times":2}
        10 txn_half t=180000 topic=T off=6 key=X3 txn=X3
        11 txn_end t=181000 key=X3 txn=X3 st=ROLLBACK off=6
        12 txn_check t=240000 key=X3 txn=X3 off=7 detail={"check_times":"1"}
        """,
        (("TXN_CHECK_AFTER_RESOLVED", (2, 3)), ("TXN_CHECK_AFTER_RESOLVED", (11, 12))),
    ),
    Case(
        "TXN_CHECK_AFTER_RESOLVED: after a power loss that may have lost L ops, the next L ops may "
        "land below the saved op progress and never be read; the op after them is",
        """
        0 txn_half t=0 topic=T off=0 key=X1 txn=X1
        1 txn_end t=100 key=X1 txn=X1 st=COMMIT off=0
        2 txn_half t=200 topic=T off=1 key=X2 txn=X2
        3 txn_end t=300 key=X2 txn=X2 st=COMMIT off=1
        4 crash t=400 st=power detail={"at_risk":["X2","K9"]}
        5 recover t=401
        6 txn_half t=500 topic=T off=1 key=X3 txn=X3
        7 txn_end t=600 key=X3 txn=X3 st=COMMIT off=1
        8 txn_half t=700 topic=T off=2 key=X4 txn=X4
        9 txn_end t=800 key=X4 txn=X4 st=ROLLBACK off=2
        10 txn_check t=60000 key=X3 txn=X3 off=3 detail={"check_times":1}
        11 txn_check t=60000 key=X4 txn=X4 off=4 detail={"check_times":1}
        """,
        (("TXN_CHECK_AFTER_RESOLVED", (9, 11)),),
    ),
    Case(
        "TXN_DISCARD_EARLY: a discard before checkMax checks; at checkMax (a repeated number "
        "counts once) or past fileReservedTime it is fine",
        """
        0 txn_half t=0 key=Y1 txn=Y1
        1 txn_half t=0 key=Y2 txn=Y2
        2 txn_half t=0 key=Y3 txn=Y3
        3 txn_check t=60000 key=Y1 txn=Y1 detail={"check_times":1}
        4 txn_check t=60000 key=Y1 txn=Y1 detail={"check_times":1}
        5 txn_discard t=120000 key=Y1 txn=Y1
        6 txn_discard t=259200000 key=Y2 txn=Y2
        7 txn_discard t=259200001 key=Y3 txn=Y3
        """,
        # the second check of Y1 repeats TRANSACTION_CHECK_TIMES 1 with no restart between: the
        # table's ``checked`` effect did not count it (TXN_LIFECYCLE)
        (("TXN_DISCARD_EARLY", (0, 5)), ("TXN_DISCARD_EARLY", (1, 6)), ("TXN_LIFECYCLE", (3, 4))),
    ),
    Case(
        "DLQ_DELAYED: a DLQ copy a delay level after its send-back; at once, 999 ms, in "
        "another group, or recorded before its own DLQ send-back (as brokers record it: not "
        "paired with an older RETRY or DLQ send-back) it is fine",
        """
        0 send_back t=1000 g=G topic=T q=0 off=0 key=K1 rt=1 lvl=-1 st=DLQ
        1 store t=1000 topic=%DLQ%G q=0 off=0 key=K1 rt=1
        2 send_back t=2000 g=G topic=T q=0 off=1 key=K2 rt=17 lvl=0 st=DLQ
        3 store t=2999 topic=%DLQ%G q=0 off=1 key=K2 rt=17
        4 send_back t=3000 g=G topic=T q=0 off=2 key=K3 rt=17 lvl=0 st=DLQ
        5 store t=4000 topic=%DLQ%G q=0 off=2 key=K3 rt=17
        6 store t=9000 topic=%DLQ%H q=0 off=0 key=K3 rt=17
        7 send_back t=10000 g=G topic=T q=0 off=3 key=K4 rt=3 lvl=3 st=RETRY
        8 store t=80000 topic=%DLQ%G q=0 off=3 key=K4 rt=17
        9 send_back t=80000 g=G topic=T q=0 off=4 key=K4 rt=17 lvl=0 st=DLQ
        10 store t=200000 topic=%DLQ%G q=0 off=4 key=K4 rt=17
        11 send_back t=200000 g=G topic=T q=0 off=5 key=K4 rt=17 lvl=0 st=DLQ
        """,
        (("DLQ_DELAYED", (4, 5)),),
    ),
    Case(
        "SCHEDULE_DUPLICATED: a second fire without a crash between; after a crash it is fine",
        """
        0 store t=0 topic=SCHEDULE_TOPIC_XXXX q=0 off=0 key=K1 rt=0 lvl=1 due=1000
        1 store t=0 topic=SCHEDULE_TOPIC_XXXX q=0 off=1 key=K2 rt=0 lvl=1 due=1000
        2 schedule_fire t=1000 topic=T q=0 key=K1 rt=0
        3 schedule_fire t=1000 topic=T q=0 key=K2 rt=0
        4 recover t=1500 st=REOPEN
        5 schedule_fire t=2000 topic=T q=0 key=K1 rt=0
        6 crash t=2500 st=kill
        7 recover t=2600
        8 schedule_fire t=3000 topic=T q=0 key=K2 rt=0
        9 store t=4000 topic=SCHEDULE_TOPIC_XXXX q=1 off=0 key=K1 rt=1 lvl=2 due=9000
        10 schedule_fire t=9000 topic=%RETRY%G q=0 key=K1 rt=1
        """,
        (("SCHEDULE_DUPLICATED", (2, 5)),),
    ),
    Case(
        "OFFSET_LOST: a clean restart loses a commit; after a crash, or when equal, it is fine",
        """
        0 commit_offset t=1000 g=G topic=T q=0 off=5
        1 commit_offset t=1000 g=G topic=T q=1 off=7
        2 recover t=2000 st=REOPEN
        3 commit_offset t=2001 g=G topic=T q=0 off=3 st=RESTORED
        4 commit_offset t=2001 g=G topic=T q=1 off=7 st=RESTORED
        5 commit_offset t=3000 g=G topic=T q=1 off=9
        6 crash t=4000 st=kill
        7 recover t=4001
        8 commit_offset t=4002 g=G topic=T q=1 off=8 st=RESTORED
        """,
        (("OFFSET_LOST", (0, 3)),),
    ),
    Case(
        "Observations: DUPLICATED and RECOVERED",
        _CONSUMED
        + """
        5 deliver t=2000 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
        6 consume t=2010 g=G topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS
        7 store t=3000 topic=T q=0 off=1 key=K2
        8 deliver t=3010 g=G topic=T q=0 off=1 key=K2 c=C1 rt=0
        9 consume t=3020 g=G topic=T q=0 off=1 key=K2 c=C1 st=SUCCESS
        10 send t=4000 topic=T q=0 key=K3 st=TIMEOUT
        11 store t=4000 topic=T q=0 off=2 key=K3
        12 deliver t=4010 g=G topic=T q=0 off=2 key=K3 c=C1 rt=0
        13 consume t=4020 g=G topic=T q=0 off=2 key=K3 c=C1 st=SUCCESS
        14 drain t=9000
        """,
        (("DUPLICATED", (3, 6)), ("RECOVERED", (8,)), ("RECOVERED", (12,))),
    ),
    Case(
        "crash detail.at_risk: no LOST, TXN_UNRESOLVED or RECOVERED for at-risk keys",
        """
        0 send t=1000 topic=T q=0 key=K1 st=SEND_OK
        1 store t=1000 topic=T q=0 off=0 key=K1
        2 send t=1001 topic=T q=0 key=K2 st=SEND_OK
        3 store t=1001 topic=T q=0 off=1 key=K2
        4 txn_half t=1002 topic=T off=0 key=K3 txn=X3
        5 store t=1003 topic=T q=0 off=2 key=K4
        6 send t=1004 topic=T q=0 key=7 st=SEND_OK
        7 crash t=1005 st=power detail={"at_risk":["K2","K3","K4",7,null]}
        8 recover t=1006
        9 crash t=1007 st=kill detail={"at_risk":"K6"}
        10 recover t=1008
        11 deliver t=1010 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
        12 consume t=1020 g=G topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS
        13 deliver t=1030 g=G topic=T q=0 off=2 key=K4 c=C1 rt=0
        14 consume t=1040 g=G topic=T q=0 off=2 key=K4 c=C1 st=SUCCESS
        15 txn_half t=1050 topic=T off=1 key=K5 txn=X5
        16 send t=1060 topic=T q=0 key=K6 st=SEND_OK
        17 store t=1061 topic=T q=0 off=3 key=K7
        18 deliver t=1070 g=G topic=T q=0 off=3 key=K7 c=C1 rt=0
        19 consume t=1080 g=G topic=T q=0 off=3 key=K7 c=C1 st=SUCCESS
        20 drain t=9000
        """,
        (
            ("LOST", (6, 20)),
            ("LOST", (16, 20)),
            ("RECOVERED", (18,)),
            ("TXN_UNRESOLVED", (15, 20)),
        ),
    ),
    Case(
        "DLQ rules judge against the send_back's detail.max (the request's max) when present",
        """
        0 send t=900 topic=T q=0 key=K1 st=SEND_OK
        1 store t=900 topic=T q=0 off=0 key=K1
        2 send t=901 topic=T q=0 key=K2 st=SEND_OK
        3 store t=901 topic=T q=0 off=1 key=K2
        4 send t=902 topic=T q=0 key=K3 st=SEND_OK
        5 store t=902 topic=T q=0 off=2 key=K3
        6 send_back t=1000 g=G topic=T q=0 off=0 key=K1 rt=2 lvl=0 st=DLQ detail={"max":1}
        7 send_back t=1000 g=G topic=T q=0 off=1 key=K2 rt=2 lvl=4 due=61000 st=RETRY detail={"max":1}
        8 deliver t=61000 g=G topic=%RETRY%G q=0 off=0 key=K2 c=C1 rt=2
        9 send_back t=2000 g=G topic=T q=0 off=2 key=K3 rt=1 lvl=3 due=12000 st=RETRY detail={"max":"x"}
        10 deliver t=12000 g=G topic=%RETRY%G q=0 off=1 key=K3 c=C1 rt=1
        """,
        (("DLQ_MISSED", (7,)), ("DLQ_MISSED", (8,))),
    ),
    Case(
        "DLQ_MISSED judges a redelivered retry copy by the max of the send-back that made it",
        """
        0 send t=0 topic=T q=0 key=K1 st=SEND_OK
        1 store t=0 topic=T q=0 off=0 key=K1
        2 deliver t=10 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
        3 send_back t=20 g=G topic=T q=0 off=0 key=K1 rt=1 lvl=3 due=10020 st=RETRY detail={"max":1}
        4 deliver t=10100 g=G topic=%RETRY%G q=0 off=0 key=K1 c=C1 rt=1
        5 send_back t=10200 g=G topic=%RETRY%G q=0 off=0 key=K1 rt=2 lvl=0 st=DLQ detail={"max":0}
        6 deliver t=10300 g=G topic=%RETRY%G q=0 off=0 key=K1 c=C1 rt=1
        7 deliver t=10400 g=G topic=%RETRY%G q=0 off=1 key=K1 c=C1 rt=2
        """,
        (("DLQ_MISSED", (7,)),),
    ),
    Case(
        "DLQ_MISSED: a duplicate dead-lettered under a lower max made no retry copy",
        """
        0 send t=0 topic=T q=0 key=K1 st=SEND_OK
        1 store t=0 topic=T q=0 off=0 key=K1
        2 store t=5 topic=T q=0 off=1 key=K1
        3 deliver t=10 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
        4 send_back t=20 g=G topic=T q=0 off=0 key=K1 rt=1 lvl=3 due=10020 st=RETRY detail={"max":1}
        5 deliver t=30 g=G topic=T q=0 off=1 key=K1 c=C1 rt=0
        6 send_back t=40 g=G topic=T q=0 off=1 key=K1 rt=1 lvl=0 st=DLQ detail={"max":0}
        7 deliver t=10100 g=G topic=%RETRY%G q=0 off=0 key=K1 c=C1 rt=1
        8 send_back t=10200 g=G topic=%RETRY%G q=0 off=0 key=K1 rt=2 lvl=4 due=40200 st=RETRY detail={"max":1}
        """,
        (("DLQ_MISSED", (8,)),),
    ),
    Case(
        "TXN_CHECK_EXCEEDED: a re-check repeating a check_times after a crash counts once",
        "0 txn_half t=0 key=X1 txn=X1\n"
        + "".join(f"{i} txn_check t={i * 60000} key=X1 txn=X1 detail={{\"check_times\":{i}}}\n" for i in range(1, 16))
        + "16 crash t=960000 st=kill\n17 recover t=960001\n"
        + "18 txn_check t=1020000 key=X1 txn=X1 detail={\"check_times\":15}\n"
        + "19 txn_check t=1080000 key=X1 txn=X1 detail={\"check_times\":\"16\"}\n",
        (("TXN_CHECK_EXCEEDED", (0, 19)),),
    ),
)

# 5.x timer messages (``checker_cases_timer.py``), sends of a DELAY level below 1 (``checker_cases_send.py``),
# broadcasting, retention, the orderly loop (``checker_cases_orderly.py``), a master/slave pair (``_ha.py``),
# subscriptions and filters (``checker_cases_filter.py``),
# the lifecycle tables replayed (``checker_cases_lifecycle.py``): part of CASES, so every test runs them
from rmqspec.traces.checker_cases_broadcast import BROADCAST_CASES  # noqa: E402 - after Case
from rmqspec.traces.checker_cases_filter import FILTER_CASES  # noqa: E402 - after Case
from rmqspec.traces.checker_cases_ha import HA_CASES  # noqa: E402 - after Case
from rmqspec.traces.checker_cases_lifecycle import LIFECYCLE_CASES  # noqa: E402 - after Case
from rmqspec.traces.checker_cases_orderly import ORDERLY_CASES  # noqa: E402 - after Case
from rmqspec.traces.checker_cases_retention import RETENTION_CASES  # noqa: E402 - after Case
from rmqspec.traces.checker_cases_route import ROUTE_CASES  # noqa: E402 - after Case
from rmqspec.traces.checker_cases_send import SEND_CASES  # noqa: E402 - after Case
from rmqspec.traces.checker_cases_timeout import TIMEOUT_CASES  # noqa: E402 - after Case
from rmqspec.traces.checker_cases_timer import TIMER_CASES  # noqa: E402 - after Case

_MORE = (*FILTER_CASES, *LIFECYCLE_CASES, *TIMER_CASES, *SEND_CASES, *BROADCAST_CASES, *RETENTION_CASES,
         *ORDERLY_CASES, *TIMEOUT_CASES, *ROUTE_CASES, *HA_CASES)
CASES = (*CASES, *(Case(name, text, expected) for name, text, expected in _MORE))
