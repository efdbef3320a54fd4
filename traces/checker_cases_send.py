"""Hand-written traces of sends whose DELAY level is below 1, part of ``checker_cases.CASES``.

A level ≤ 0 (a client's ``DELAY=-1``, or a Java int's smallest) is stored as sent and never scheduled
(RocketMQ schedules only ``getDelayTimeLevel() > 0``): the send is a plain one, at its own queue offset,
delivered at once, and no rule may judge it as delayed. Each case: (name, trace, expected findings).
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
)
