"""Hand-written traces of the lifecycle tables replayed (issue 41, ``properties/inv_replay_*.py``), part of
``checker_cases.CASES``: LOCK_LIFECYCLE, TXN_LIFECYCLE and MESSAGE_LIFECYCLE judge a trace's rows against the
tables of ``model/lifecycle.py`` (a lock DENIED although the table grants, a check count that does not grow, a
send-back's copy at another level or a delayed copy firing elsewhere); entries the trace cannot place are not
judged. Each case: (name, trace, expected findings).
"""

from __future__ import annotations

LIFECYCLE_CASES: tuple[tuple[str, str, tuple[tuple[str, tuple[int, ...]], ...]], ...] = (
    (
        "LOCK_LIFECYCLE: DENIED although the table grants (expired at 60001 ms, not at 60000; a free "
        "queue; a renewal; after the holder's unlock; after a restart); unknown entries not judged",
        """
        0 lock t=0 g=G topic=T q=0 c=C1 st=GRANTED
        1 lock t=60000 g=G topic=T q=0 c=C2 st=DENIED
        2 lock t=60001 g=G topic=T q=0 c=C2 st=DENIED
        3 lock t=70000 g=G topic=T q=1 c=C1 st=DENIED
        4 lock t=70001 g=G topic=T q=2 c=C1 st=GRANTED
        5 lock t=80000 g=G topic=T q=2 c=C1 st=DENIED
        6 lock t=90000 g=G topic=T q=3 c=C1 st=GRANTED
        7 unlock t=90001 g=G topic=T q=3 c=C2
        8 lock t=90002 g=G topic=T q=3 c=C2 st=DENIED
        9 unlock t=90003 g=G topic=T q=3 c=C1
        10 lock t=90004 g=G topic=T q=3 c=C2 st=DENIED
        11 lock t=100000 g=G topic=T q=4 c=C1 st=GRANTED
        12 crash t=100001 st=kill
        13 recover t=100002
        14 lock t=100003 g=G topic=T q=4 c=C2 st=DENIED
        15 lock t=100004 g=G topic=T q=4 c=C2 st=DENIED
        16 lock t=100005 g=G topic=T q=5 c=C1 st=GRANTED
        17 lock t=100006 g=G topic=T q=5 c=C2 st=EXPIRED
        18 lock t=200000 g=G topic=T q=5 c=C2 st=DENIED
        19 unlock t=200001 g=G topic=T c=C1
        20 lock t=200002 g=G topic=T q=6 c=C2 st=DENIED
        """,
        (
            ("LOCK_LIFECYCLE", (0, 2)),
            ("LOCK_LIFECYCLE", (3,)),
            ("LOCK_LIFECYCLE", (4, 5)),
            ("LOCK_LIFECYCLE", (9, 10)),
            ("LOCK_LIFECYCLE", (13, 14)),
        ),
    ),
    (
        "TXN_LIFECYCLE: a count that does not grow (a skip is fine; after a restart since the half a "
        "count may repeat, but not fall below 1), a check after the discard, a check past fileReservedTime",
        """
        0 txn_half t=0 key=A txn=A
        1 txn_check t=60000 key=A txn=A detail={"check_times":1}
        2 txn_end t=60001 key=A txn=A st=UNKNOWN
        3 txn_check t=120000 key=A txn=A detail={"check_times":3}
        4 txn_check t=180000 key=A txn=A detail={"check_times":3}
        5 txn_half t=180000 key=B txn=B
        6 txn_check t=240000 key=B txn=B detail={"check_times":1}
        7 txn_discard t=300000 key=B txn=B
        8 txn_check t=360000 key=B txn=B detail={"check_times":2}
        9 txn_half t=360000 key=C txn=C
        10 txn_half t=360000 key=D txn=D
        11 txn_check t=420000 key=D txn=D detail={"check_times":1}
        12 crash t=420001 st=kill
        13 recover t=420002
        14 txn_check t=480000 key=D txn=D detail={"check_times":1}
        15 txn_check t=540000 key=D txn=D detail={"check_times":1}
        16 txn_check t=600000 key=D txn=D detail={"check_times":0}
        17 txn_check t=259560001 key=C txn=C detail={"check_times":1}
        """,
        (
            ("TXN_LIFECYCLE", (3, 4)),
            ("TXN_DISCARD_EARLY", (5, 7)),
            ("TXN_LIFECYCLE", (7, 8)),
            ("TXN_LIFECYCLE", (15, 16)),
            ("TXN_LIFECYCLE", (9, 17)),
        ),
    ),
    (
        "MESSAGE_LIFECYCLE: a send-back's copy at another level, with another reconsume_times, in the "
        "other place; a fire that changes reconsume_times; a retry copy with 0; a copy recorded "
        "before its send-back or with no send-back at all is not judged",
        """
        0 send_back t=1000 g=G topic=T q=0 off=0 key=K1 rt=1 lvl=3 due=11000 st=RETRY
        1 store t=1000 topic=SCHEDULE_TOPIC_XXXX q=3 off=0 key=K1 rt=1 lvl=4 due=31000
        2 send_back t=2000 g=G topic=T q=0 off=1 key=K2 rt=1 lvl=3 due=12000 st=RETRY
        3 store t=2000 topic=SCHEDULE_TOPIC_XXXX q=2 off=0 key=K2 rt=2 lvl=3 due=12000
        4 send_back t=3000 g=G topic=T q=0 off=2 key=K3 rt=1 lvl=-1 st=DLQ
        5 store t=3000 topic=SCHEDULE_TOPIC_XXXX q=2 off=1 key=K3 rt=1 lvl=3 due=13000
        6 send_back t=4000 g=G topic=T q=0 off=3 key=K4 rt=1 lvl=3 due=14000 st=RETRY
        7 store t=4000 topic=SCHEDULE_TOPIC_XXXX q=2 off=2 key=K4 rt=1 lvl=3 due=14000
        8 send_back t=5000 g=G topic=T q=0 off=4 key=K6 rt=17 lvl=0 st=DLQ
        9 store t=5000 topic=%DLQ%G q=0 off=0 key=K6 rt=19
        10 store t=6000 topic=%DLQ%G q=0 off=1 key=K7 rt=17
        11 send_back t=6000 g=G topic=T q=0 off=5 key=K7 rt=17 lvl=0 st=DLQ
        12 store t=7000 topic=%DLQ%G q=0 off=2 key=K5 rt=1
        13 store t=14000 topic=%RETRY%G q=0 off=0 key=K4 rt=2
        14 store t=14001 topic=%RETRY%G q=0 off=1 key=K4 rt=0
        """,
        (
            ("MESSAGE_LIFECYCLE", (0, 1)),
            ("MESSAGE_LIFECYCLE", (2, 3)),
            ("MESSAGE_LIFECYCLE", (4, 5)),
            ("MESSAGE_LIFECYCLE", (8, 9)),
            ("MESSAGE_LIFECYCLE", (7, 13)),
            ("MESSAGE_LIFECYCLE", (14,)),
        ),
    ),
    (
        "MESSAGE_LIFECYCLE: a delayed copy fires into the queue it was sent to; one that fires into "
        "another queue is found; a send that is never delayed (lvl=0) does not count, and a delayable "
        "send naming no queue leaves the key's fires not judged",
        """
        0 store t=0 topic=SCHEDULE_TOPIC_XXXX q=1 off=0 key=F1 rt=0 lvl=2 due=5000
        1 send t=0 topic=T q=1 key=F1 lvl=2
        2 schedule_fire t=5000 topic=T q=1 key=F1 rt=0
        3 store t=0 topic=SCHEDULE_TOPIC_XXXX q=1 off=1 key=F2 rt=0 lvl=2 due=5000
        4 send t=0 topic=T q=0 key=F2 lvl=2
        5 send t=0 topic=T q=2 key=F2 lvl=0
        6 schedule_fire t=5000 topic=T q=2 key=F2 rt=0
        7 store t=0 topic=SCHEDULE_TOPIC_XXXX q=1 off=2 key=F3 rt=0 lvl=2 due=5000
        8 send t=0 topic=T key=F3 lvl=2
        9 store t=0 topic=SCHEDULE_TOPIC_XXXX q=1 off=3 key=F3 rt=0 lvl=2 due=5000
        10 send t=0 topic=T q=0 key=F3 lvl=2
        11 schedule_fire t=5000 topic=T q=3 key=F3 rt=0
        """,
        (("MESSAGE_LIFECYCLE", (6,)),),
    ),
)
