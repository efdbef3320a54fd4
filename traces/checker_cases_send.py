"""Hand-written traces of sends, part of ``checker_cases.CASES``: levels below 1, and the send modes.

A level ≤ 0 (a client's ``DELAY=-1``, or a Java int's smallest) is stored as sent and never scheduled
(RocketMQ schedules only ``getDelayTimeLevel() > 0``): the send is a plain one, at its own queue offset,
delivered at once, and no rule may judge it as delayed. A send of status ONEWAY (sendOneway) is never
acknowledged: never LOST, and its delivery is no RECOVERED; one of status NO_RESPONSE (a sync or async
attempt whose answer was lost) may have been stored, and the producer's retry stores it again (issue 42). One of
status FLUSH_DISK_TIMEOUT (a SYNC_FLUSH put whose flush outlived syncFlushTimeout) is stored and acknowledged:
LOST unless a power loss's ``at_risk`` lists it.
Each case: (name, trace, expected findings).
"""

from __future__ import annotations

SEND_CASES: tuple[tuple[str, str, tuple[tuple[str, tuple[int, ...]], ...]], ...] = (
    (
        "a send with a DELAY level below 1 is not delayed",
        """
        0 send t=1000 topic=T q=0 off=0 key=K1 lvl=-1 st=SEND_OK
        1 store t=1000 topic=T q=0 off=0 key=K1
        2 send t=1001 topic=T q=0 off=1 key=K2 lvl=-2147483648 st=SEND_OK
        3 store t=1001 topic=T q=0 off=1 key=K2
        4 deliver t=1010 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
        5 deliver t=1010 g=G topic=T q=0 off=1 key=K2 c=C1 rt=0
        6 consume t=1020 g=G topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS
        7 consume t=1020 g=G topic=T q=0 off=1 key=K2 c=C1 st=SUCCESS
        8 commit_offset t=1030 g=G topic=T q=0 off=2
        9 drain t=9000
        """,
        (),
    ),
    (
        "oneway sends are never LOST nor RECOVERED; a lost answer's retry duplicates, an unanswered copy is RECOVERED",
        """
        0 send t=1000 topic=T q=0 key=K1 st=ONEWAY
        1 store t=1000 topic=T q=0 off=0 key=K1
        2 send t=1001 topic=T q=1 key=K2 st=NO_RESPONSE
        3 store t=1001 topic=T q=1 off=0 key=K2
        4 send t=1002 topic=T q=2 off=0 key=K2 st=SEND_OK
        5 store t=1002 topic=T q=2 off=0 key=K2
        6 send t=1003 topic=T q=3 key=K3 st=NO_RESPONSE
        7 store t=1003 topic=T q=3 off=0 key=K3
        8 send t=1004 topic=T q=0 key=K4 st=ONEWAY
        9 deliver t=1010 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
        10 deliver t=1010 g=G topic=T q=1 off=0 key=K2 c=C1 rt=0
        11 deliver t=1010 g=G topic=T q=2 off=0 key=K2 c=C1 rt=0
        12 deliver t=1010 g=G topic=T q=3 off=0 key=K3 c=C1 rt=0
        13 consume t=1020 g=G topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS
        14 consume t=1020 g=G topic=T q=1 off=0 key=K2 c=C1 st=SUCCESS
        15 consume t=1020 g=G topic=T q=2 off=0 key=K2 c=C1 st=SUCCESS
        16 consume t=1020 g=G topic=T q=3 off=0 key=K3 c=C1 st=SUCCESS
        17 drain t=9000
        """,
        (("DUPLICATED", (14, 15)), ("RECOVERED", (12,))),
    ),
    (
        "an imported message trace's unrecorded sends: a key consumed but never published is not UNEXPECTED",
        """
        0 send t=1000 st=NO_RESPONSE detail={"unrecorded":true}
        1 send t=1000 topic=T key=K1 st=SEND_OK
        2 deliver t=1010 g=G topic=T key=K1 rt=0
        3 consume t=1020 g=G topic=T key=K1 st=SUCCESS
        4 deliver t=1030 g=G key=K9 rt=0
        5 consume t=1040 g=G key=K9 st=SUCCESS
        6 drain t=9000
        """,
        (),
    ),
    (
        "a sharding key sent to two queues of one route is ORDER_KEY_SPLIT; another route, group or no route is not",
        """
        0 send t=1000 g=PG topic=T q=1 off=0 key=K1 sk=order-1 st=SEND_OK detail={"route_queues":4}
        1 send t=1001 g=PG topic=T q=1 off=1 key=K2 sk=order-1 st=SEND_OK detail={"route_queues":4}
        2 send t=1002 g=PG topic=T q=2 off=0 key=K3 sk=order-1 st=SEND_OK detail={"route_queues":4}
        3 send t=1003 g=PG topic=T q=3 off=0 key=K4 sk=order-1 st=SEND_OK detail={"route_queues":6}
        4 send t=1004 g=PG2 topic=T q=0 off=0 key=K5 sk=order-1 st=SEND_OK detail={"route_queues":4}
        5 send t=1005 g=PG topic=T q=0 off=1 key=K6 sk=order-1 st=SEND_OK
        6 send t=1006 g=PG topic=T q=1 off=2 key=K7 sk=order-2 st=SEND_OK detail={"route_queues":4}
        7 send t=1007 g=PG topic=T q=1 off=3 key=K8 sk=order-1 st=SEND_OK detail={"route_queues":4}
        """,
        (("ORDER_KEY_SPLIT", (0, 2)), ("ORDER_KEY_SPLIT", (2, 7))),
    ),
    (
        "FLUSH_DISK_TIMEOUT acknowledges a stored send: lost, LOST unless a power loss's at_risk lists it",
        """
        0 send t=900 topic=T q=1 key=K0 st=SEND_OK
        1 store t=900 topic=T q=1 off=0 key=K0
        2 deliver t=910 g=G topic=T q=1 off=0 key=K0 c=C1 rt=0
        3 consume t=920 g=G topic=T q=1 off=0 key=K0 c=C1 st=SUCCESS
        4 send t=1000 topic=T q=0 key=K1 st=FLUSH_DISK_TIMEOUT
        5 store t=1000 topic=T q=0 off=0 key=K1
        6 send t=1001 topic=T q=0 key=K2 st=FLUSH_DISK_TIMEOUT
        7 store t=1001 topic=T q=0 off=1 key=K2
        8 crash t=1002 st=power detail={"at_risk":["K2"]}
        9 recover t=1003
        10 send t=7000 topic=T q=0 key=K3 st=FLUSH_DISK_TIMEOUT
        11 store t=7000 topic=T q=0 off=1 key=K3
        12 crash t=8000 st=power detail={"at_risk":[]}
        13 recover t=8001
        14 drain t=9000
        """,
        (("LOST", (4, 14)), ("LOST", (10, 14))),
    ),
)
