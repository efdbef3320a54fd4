"""Hand-written traces of subscriptions and filters, part of ``checker_cases.CASES``.

A group whose clients subscribe one topic with different expressions (SUBSCRIPTION_INCONSISTENT; what one
client's filter skipped and the other's commit passed over: FILTER_SKIPPED), and a SUCCESS consume that the
client's own tag or SQL92 subscription does not select (FILTER_MISMATCH; a FAILED one is not judged).
Each case: (name, trace, expected findings).
"""

from __future__ import annotations

FILTER_CASES: tuple[tuple[str, str, tuple[tuple[str, tuple[int, ...]], ...]], ...] = (
    (
        "SUBSCRIPTION_INCONSISTENT and FILTER_SKIPPED: two clients of G filter T differently",
        """
        0 send t=1 topic=T q=0 off=0 key=A st=SEND_OK detail={"tags":"x","properties":{"r":"HZ"}}
        1 send topic=T q=0 off=1 key=B st=SEND_OK detail={"tags":"x","properties":{"r":"SH"}}
        2 send topic=T q=0 off=2 key=C st=SEND_OK detail={"tags":"x","properties":{}}
        3 deliver t=10 g=G topic=T q=0 off=0 key=A c=C1 detail={"subscription":"r='HZ'","expression_type":"SQL92"}
        4 consume g=G topic=T q=0 off=0 key=A c=C1 st=SUCCESS detail={"subscription":"r='HZ'","expression_type":"SQL92"}
        5 commit_offset g=G topic=T q=0 off=3 c=C1
        6 send topic=T q=1 off=0 key=D st=SEND_OK detail={"tags":"x","properties":{"r":"SH"}}
        7 deliver g=G topic=T q=1 off=0 key=D c=C2 detail={"subscription":"r='SH'","expression_type":"SQL92"}
        8 consume g=G topic=T q=1 off=0 key=D c=C2 st=SUCCESS detail={"subscription":"r='SH'","expression_type":"SQL92"}
        9 commit_offset g=G topic=T q=1 off=1 c=C2
        10 drain t=9000
        """,
        (("SUBSCRIPTION_INCONSISTENT", (3, 7)), ("FILTER_SKIPPED", (1, 5))),
    ),
    (
        "FILTER_MISMATCH: a SUCCESS consume the client's tag or SQL92 subscription does not select",
        """
        0 send t=1 topic=T q=0 off=0 key=A st=SEND_OK detail={"tags":"TagB","properties":{"a":"5"}}
        1 deliver g=G topic=T q=0 off=0 key=A c=C1 detail={"subscription":"TagA"}
        2 consume g=G topic=T q=0 off=0 key=A c=C1 st=SUCCESS detail={"subscription":"TagA"}
        3 send topic=T q=1 off=0 key=B st=SEND_OK detail={"tags":"x","properties":{"a":"5"}}
        4 consume g=G2 topic=T q=1 off=0 key=B c=C9 st=SUCCESS detail={"subscription":"a>9","expression_type":"SQL92"}
        5 send topic=T q=1 off=1 key=E st=SEND_OK detail={"tags":"x","properties":{"a":"50"}}
        6 consume g=G2 topic=T q=1 off=1 key=E c=C9 st=SUCCESS detail={"subscription":"a>9","expression_type":"SQL92"}
        7 consume g=G2 topic=T q=1 off=1 key=E c=C9 st=FAILED detail={"subscription":"z>1","expression_type":"SQL92"}
        """,
        (("FILTER_MISMATCH", (2,)), ("FILTER_MISMATCH", (4,))),
    ),
)
