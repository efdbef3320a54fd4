"""Hand-written traces of retention's ``expire`` rows and the halves and timer copies they may take (issue 42).

Like ``checker_cases.CASES`` (which includes these: every test iterating over it runs them on the
reference checker and the Spark audit, and drops each field of each row in turn), under the same
``PARAMS``. TXN_UNRESOLVED does not judge a half whose copies (its ``txn_half`` and ``txn_check``
rows) an ``expire`` before the drain may have taken, TIMER_UNFIRED a timer message whose copy in
rmq_sys_wheel_timer (its store there, its timer send) one may have taken
(``traces/checks_retention.kept``): a commitlog row (null topic) keeps an offset at or above its
``commitlog_offset``, a queue row of the copies' own topic a position at or above its ``queue_offset``,
a queue row of another topic all of them. ``RETENTION_CASES`` are ``(name, notation text, expected
findings)``.
"""

from __future__ import annotations

RETENTION_CASES: tuple[tuple[str, str, tuple[tuple[str, tuple[int, ...]], ...]], ...] = (
    (
        "TXN_UNRESOLVED under retention: not judged of a half the commitlog's expire took (below its min) nor "
        "of one whose offset no row gives; judged of one it kept and of one sent after it",
        """
        0 txn_half t=0 topic=T q=0 off=0 clo=300 key=X1 txn=X1
        1 txn_half t=0 topic=T q=0 off=1 clo=5000 key=X2 txn=X2
        2 txn_half t=0 topic=T q=0 off=2 key=X3 txn=X3
        3 expire t=8000 clo=4096
        4 txn_half t=8100 topic=T q=0 off=3 clo=6000 key=X4 txn=X4
        5 drain t=9000
        """,
        (("TXN_UNRESOLVED", (1, 5)), ("TXN_UNRESOLVED", (4, 5))),
    ),
    (
        "TXN_UNRESOLVED under retention: the half queue's expire takes the halves below its min, another "
        "topic's none; a half with a copy taken is not judged though a re-put copy was kept (a check's row does "
        "not say which copy it re-put), nor one whose re-put copy no row places",
        """
        0 txn_half t=0 topic=T q=0 off=0 clo=300 key=X1 txn=X1
        1 txn_half t=0 topic=T q=0 off=1 clo=4900 key=X3 txn=X3
        2 txn_half t=0 topic=T q=0 off=2 clo=5000 key=X2 txn=X2
        3 txn_check t=6000 topic=T off=3 clo=5200 key=X3 txn=X3 detail={"check_times":1}
        4 expire t=8000 topic=RMQ_SYS_TRANS_HALF_TOPIC q=0 off=2
        5 expire t=8000 topic=T q=0 off=9
        6 txn_half t=8100 topic=T q=0 off=4 clo=6000 key=X4 txn=X4
        7 txn_check t=14100 topic=T off=5 key=X4 txn=X4 detail={"check_times":1}
        8 expire t=15000 clo=4096
        9 drain t=16000
        """,
        (("TXN_UNRESOLVED", (2, 9)),),
    ),
    (
        "TIMER_UNFIRED under retention: not judged of a timer copy the commitlog's expire took, of one below the "
        "wheel queue's min, nor of one whose offset no row gives; judged of a kept copy and of one sent after",
        """
        0 store t=0 topic=rmq_sys_wheel_timer q=0 off=0 clo=300 key=K1 rt=0 due=2000
        1 send t=0 topic=T q=0 off=0 clo=300 key=K1 st=SEND_OK due=2000
        2 store t=0 topic=rmq_sys_wheel_timer q=0 off=1 clo=5000 key=K2 rt=0 due=2000
        3 send t=0 topic=T q=0 off=1 clo=5000 key=K2 st=SEND_OK due=2000
        4 store t=0 topic=rmq_sys_wheel_timer q=0 off=2 clo=5100 key=K3 rt=0 due=2000
        5 send t=0 topic=T q=0 off=2 clo=5100 key=K3 st=SEND_OK due=2000
        6 store t=0 topic=rmq_sys_wheel_timer q=0 off=3 key=K4 rt=0 due=2000
        7 send t=0 topic=T q=0 off=3 key=K4 st=SEND_OK due=2000
        8 expire t=8000 clo=4096
        9 expire t=8000 topic=rmq_sys_wheel_timer q=0 off=2
        10 expire t=8000 topic=T q=0 off=9
        11 store t=8100 topic=rmq_sys_wheel_timer q=0 off=4 clo=7000 key=K5 rt=0 due=8500
        12 send t=8100 topic=T q=0 off=4 clo=7000 key=K5 st=SEND_OK due=8500
        13 drain t=9000
        """,
        (("TIMER_UNFIRED", (5, 13)), ("TIMER_UNFIRED", (12, 13))),
    ),
)
