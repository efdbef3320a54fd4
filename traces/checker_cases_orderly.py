"""Hand-written traces of the orderly consume loop, part of ``checker_cases.CASES`` (issue 42, seed 001, B10).

An ``orderly_start`` may state ``detail.loop_age_ms``, how long its consume request's loop had run when it
checked MAX_TIME_CONSUME_CONTINUOUSLY before this batch, and ``detail.loop_max_ms``, the client's limit:
above the limit the request resubmits itself instead of taking the batch (ORDERLY_LOOP_OVERRUN); exactly
the limit still takes one, and a start without both numbers is not judged.
Each case: (name, trace, expected findings).
"""

from __future__ import annotations

ORDERLY_CASES: tuple[tuple[str, str, tuple[tuple[str, tuple[int, ...]], ...]], ...] = (
    (
        "an orderly batch taken past MAX_TIME_CONSUME_CONTINUOUSLY is ORDERLY_LOOP_OVERRUN; at the limit, "
        "under a client's own limit or without the age or the limit it is not",
        """
        0 lock t=0 g=G topic=T q=0 c=C1 st=GRANTED
        1 orderly_start t=1 g=G topic=T q=0 c=C1 detail={"loop_age_ms":0,"loop_max_ms":60000}
        2 orderly_end t=2 g=G topic=T q=0 c=C1
        3 lock t=20000 g=G topic=T q=0 c=C1 st=GRANTED
        4 orderly_start t=20001 g=G topic=T q=0 c=C1 detail={"loop_age_ms":60000,"loop_max_ms":60000}
        5 orderly_end t=20002 g=G topic=T q=0 c=C1
        6 orderly_start t=20003 g=G topic=T q=0 c=C1 detail={"loop_age_ms":60001,"loop_max_ms":60000}
        7 orderly_end t=20004 g=G topic=T q=0 c=C1
        8 orderly_start t=20005 g=G topic=T q=0 c=C1 detail={"loop_age_ms":90000,"loop_max_ms":120000}
        9 orderly_end t=20006 g=G topic=T q=0 c=C1
        10 orderly_start t=20007 g=G topic=T q=0 c=C1 detail={"loop_age_ms":1001,"loop_max_ms":1000}
        11 orderly_end t=20008 g=G topic=T q=0 c=C1
        12 orderly_start t=20009 g=G topic=T q=0 c=C1 detail={"loop_age_ms":70000}
        13 orderly_end t=20010 g=G topic=T q=0 c=C1
        14 orderly_start t=20011 g=G topic=T q=0 c=C1 detail={"loop_age_ms":"99999","loop_max_ms":60000}
        15 orderly_end t=20012 g=G topic=T q=0 c=C1
        """,
        (("ORDERLY_LOOP_OVERRUN", (6,)), ("ORDERLY_LOOP_OVERRUN", (10,))),
    ),
)
