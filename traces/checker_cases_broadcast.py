"""Hand-written traces of broadcasting consumers, part of ``checker_cases.CASES`` (issue 42).

Every client of a broadcasting group consumes every message from where it started: the queue's max
offset when it has no offsets file (RocketMQ 4.9's LocalFileOffsetStore and CONSUME_FROM_LAST_OFFSET),
so what was sent before a client started is not its to consume. Its rows say
``detail.message_model: BROADCASTING``; LOST is judged per client (a client that delivered at or before
a message's offset and committed past it without consuming it, within one run: a ``commit_offset`` with
``detail.from_where`` starts a new one), DUPLICATED per client, and an orderly
broadcasting client needs no lock and shares its queues. Each case: (name, trace, expected findings).
"""

from __future__ import annotations

_B = 'detail={"message_model":"BROADCASTING"}'
# where a client without an offsets file began pulling a queue (the reference client writes it)
_START = 'detail={"message_model":"BROADCASTING","from_where":"CONSUME_FROM_LAST_OFFSET"}'

BROADCAST_CASES: tuple[tuple[str, str, tuple[tuple[str, tuple[int, ...]], ...]], ...] = (
    (
        "broadcasting: a client that started after a send owes it nothing; each client consumes once",
        f"""
        0 send t=1000 topic=T q=0 off=0 key=K1 st=SEND_OK
        1 deliver t=1010 g=B topic=T q=0 off=0 key=K1 c=C1 rt=0 {_B}
        2 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS {_B}
        3 commit_offset t=1030 g=B topic=T q=0 off=1 c=C1 {_B}
        4 send t=2000 topic=T q=0 off=1 key=K2 st=SEND_OK
        5 deliver t=2010 g=B topic=T q=0 off=1 key=K2 c=C1 rt=0 {_B}
        6 deliver t=2010 g=B topic=T q=0 off=1 key=K2 c=C2 rt=0 {_B}
        7 consume t=2020 g=B topic=T q=0 off=1 key=K2 c=C1 st=SUCCESS {_B}
        8 consume t=2020 g=B topic=T q=0 off=1 key=K2 c=C2 st=SUCCESS {_B}
        9 commit_offset t=2030 g=B topic=T q=0 off=2 c=C1 {_B}
        10 commit_offset t=2030 g=B topic=T q=0 off=2 c=C2 {_B}
        11 drain t=9000
        """,
        (),
    ),
    (
        "broadcasting LOST: a client went past a message it never consumed; a failed consume is dropped, not lost",
        f"""
        0 send t=1000 topic=T q=0 off=0 key=K1 st=SEND_OK
        1 send t=1001 topic=T q=0 off=1 key=K2 st=SEND_OK
        2 send t=1002 topic=T q=0 off=2 key=K3 st=SEND_OK
        3 deliver t=1010 g=B topic=T q=0 off=0 key=K1 c=C1 rt=0 {_B}
        4 deliver t=1010 g=B topic=T q=0 off=2 key=K3 c=C1 rt=0 {_B}
        5 deliver t=1010 g=B topic=T q=0 off=0 key=K1 c=C2 rt=0 {_B}
        6 deliver t=1010 g=B topic=T q=0 off=1 key=K2 c=C2 rt=0 {_B}
        7 deliver t=1010 g=B topic=T q=0 off=2 key=K3 c=C2 rt=0 {_B}
        8 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS {_B}
        9 consume t=1020 g=B topic=T q=0 off=2 key=K3 c=C1 st=SUCCESS {_B}
        10 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C2 st=SUCCESS {_B}
        11 consume t=1020 g=B topic=T q=0 off=1 key=K2 c=C2 st=RECONSUME_LATER {_B}
        12 consume t=1020 g=B topic=T q=0 off=2 key=K3 c=C2 st=SUCCESS {_B}
        13 commit_offset t=1030 g=B topic=T q=0 off=3 c=C1 {_B}
        14 commit_offset t=1030 g=B topic=T q=0 off=3 c=C2 {_B}
        15 drain t=9000
        """,
        (("LOST", (1, 13)),),
    ),
    (
        "broadcasting LOST needs the client past the message: a client behind at the drain is not judged",
        f"""
        0 send t=1000 topic=T q=0 off=0 key=K1 st=SEND_OK
        1 send t=1001 topic=T q=0 off=1 key=K2 st=SEND_OK
        2 deliver t=1010 g=B topic=T q=0 off=0 key=K1 c=C1 rt=0 {_B}
        3 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS {_B}
        4 commit_offset t=1030 g=B topic=T q=0 off=1 c=C1 {_B}
        5 drain t=9000
        """,
        (),
    ),
    (
        "broadcasting: a client restarted without its offsets file skips to the max offset; a skip in a run is LOST",
        f"""
        0 send t=1000 topic=T q=0 off=0 key=K1 st=SEND_OK
        1 send t=1001 topic=T q=0 off=1 key=K2 st=SEND_OK
        2 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS {_B}
        3 commit_offset t=1030 g=B topic=T q=0 off=1 c=C1 {_B}
        4 send t=2000 topic=T q=0 off=2 key=K3 st=SEND_OK
        5 commit_offset t=3000 g=B topic=T q=0 off=3 c=C1 {_START}
        6 send t=3001 topic=T q=0 off=3 key=K4 st=SEND_OK
        7 send t=3002 topic=T q=0 off=4 key=K5 st=SEND_OK
        8 consume t=3020 g=B topic=T q=0 off=4 key=K5 c=C1 st=SUCCESS {_B}
        9 commit_offset t=3030 g=B topic=T q=0 off=5 c=C1 {_B}
        10 drain t=9000
        """,
        (("LOST", (6, 9)),),
    ),
    (
        "broadcasting DUPLICATED is per client; clustering rows of the same key stay per group",
        f"""
        0 send t=1000 topic=T q=0 off=0 key=K1 st=SEND_OK
        1 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS {_B}
        2 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C2 st=SUCCESS {_B}
        3 consume t=1030 g=B topic=T q=0 off=0 key=K1 c=C2 st=SUCCESS {_B}
        4 consume t=1040 g=G topic=T q=0 off=0 key=K1 c=C3 st=SUCCESS
        5 consume t=1050 g=G topic=T q=0 off=0 key=K1 c=C4 st=SUCCESS
        """,
        (("DUPLICATED", (2, 3)), ("DUPLICATED", (4, 5))),
    ),
    (
        "broadcasting orderly clients consume a queue each, at once, without locks",
        f"""
        0 send t=1000 topic=T q=0 off=0 key=K1 st=SEND_OK
        1 orderly_start t=1010 g=B topic=T q=0 off=0 c=C1 {_B}
        2 orderly_start t=1010 g=B topic=T q=0 off=0 c=C2 {_B}
        3 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS {_B}
        4 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C2 st=SUCCESS {_B}
        5 orderly_end t=1030 g=B topic=T q=0 c=C1 {_B}
        6 orderly_end t=1030 g=B topic=T q=0 c=C2 {_B}
        7 orderly_start t=1040 g=G topic=T q=0 off=0 c=C3
        """,
        (("ORDERLY_WITHOUT_LOCK", (7,)),),
    ),
)
