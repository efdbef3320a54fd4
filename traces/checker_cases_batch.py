"""Hand-written traces of RocketMQ 5.1.0+'s batched op messages, with the findings they must give.

Like ``checker_cases.CASES``, but under ``OP_BATCH_PARAMS``: ``PARAMS`` with
``op_batch_ms`` 700 (transactionOpBatchInterval), so an END's op is surely written
3 × 700 = 2100 ms after it unless a ``crash`` or ``recover`` comes first, or the first of
them after it is a ``recover`` (a clean restart: the trace does not show when the broker
stopped) (``checks_lifecycle.op_written_times``, as ``properties/inv_txn.py``'s ``op_written``).
The Spark audit reads the same parameters from ``OP_BATCH_CONFIG_JSON`` under
``OP_BATCH_PROFILE`` (``spark/config.py``). Under ``PARAMS`` (4.9: ops written at the END)
the same traces give ``expected_49``.
"""

from __future__ import annotations

import attrs

from rmqspec.traces.checker_cases import CONFIG_JSON, PARAMS

OP_BATCH_PARAMS = attrs.evolve(PARAMS, op_batch_ms=700)
OP_BATCH_PROFILE = "rocketmq-5.1"
OP_BATCH_CONFIG_JSON = {**CONFIG_JSON, "transactionOpBatchInterval": 700}


@attrs.frozen
class BatchCase:
    name: str
    text: str
    expected: tuple[tuple[str, tuple[int, ...]], ...]  # under OP_BATCH_PARAMS
    expected_49: tuple[tuple[str, tuple[int, ...]], ...]  # under PARAMS


# rows 0-3 of the first two cases: four halves X1..X4 at half-queue positions 0..3
_FOUR_HALVES = "".join(f"{i} txn_half t=0 topic=T off={i} key=X{i + 1} txn=X{i + 1}\n" for i in range(4))

OP_BATCH_CASES: tuple[BatchCase, ...] = (
    BatchCase(
        "TXN_CHECK_AFTER_RESOLVED with op batching: a check 1 s after the COMMIT or exactly 2100 ms "
        "after it may find no op yet; 1 ms later or 5 s after it may not",
        _FOUR_HALVES + """
        4 txn_end t=60000 key=X1 txn=X1 st=COMMIT off=0
        5 txn_end t=60000 key=X2 txn=X2 st=ROLLBACK off=1
        6 txn_end t=60000 key=X3 txn=X3 st=ROLLBACK off=2
        7 txn_end t=60000 key=X4 txn=X4 st=COMMIT off=3
        8 txn_check t=61000 key=X1 txn=X1 off=4 detail={"check_times":1}
        9 txn_check t=62100 key=X2 txn=X2 off=5 detail={"check_times":1}
        10 txn_check t=62101 key=X3 txn=X3 off=6 detail={"check_times":1}
        11 txn_check t=65000 key=X4 txn=X4 off=7 detail={"check_times":1}
        """,
        (("TXN_CHECK_AFTER_RESOLVED", (6, 10)), ("TXN_CHECK_AFTER_RESOLVED", (7, 11))),
        tuple(("TXN_CHECK_AFTER_RESOLVED", (end, check)) for end, check in ((4, 8), (5, 9), (6, 10), (7, 11))),
    ),
    BatchCase(
        "TXN_CHECK_AFTER_RESOLVED with op batching: a crash, or a clean restart, up to 2100 ms after an END "
        "loses its op (the batch is in memory), so a later check is no violation; one after that is written",
        _FOUR_HALVES + """
        4 txn_end t=60000 key=X1 txn=X1 st=COMMIT off=0
        5 txn_end t=61000 key=X2 txn=X2 st=ROLLBACK off=1
        6 crash t=62100 st=kill
        7 recover t=63000
        8 txn_end t=70000 key=X3 txn=X3 st=COMMIT off=2
        9 recover t=72100 st=REOPEN
        10 txn_end t=80000 key=X4 txn=X4 st=COMMIT off=3
        11 crash t=82101 st=kill
        12 recover t=83000
        13 txn_check t=120000 key=X1 txn=X1 off=4 detail={"check_times":1}
        14 txn_check t=120000 key=X2 txn=X2 off=5 detail={"check_times":1}
        15 txn_check t=120000 key=X3 txn=X3 off=6 detail={"check_times":1}
        16 txn_check t=120000 key=X4 txn=X4 off=7 detail={"check_times":1}
        """,
        (("TXN_CHECK_AFTER_RESOLVED", (10, 16)),),
        tuple(("TXN_CHECK_AFTER_RESOLVED", (end, check)) for end, check in ((4, 13), (5, 14), (8, 15), (10, 16))),
    ),
    BatchCase(
        "TXN_CHECK_AFTER_RESOLVED with op batching: an END whose op a crash lost does not resolve its half, "
        "a second END of the same copy after the restart does once its op is written",
        """
        0 txn_half t=0 topic=T off=0 key=X1 txn=X1
        1 txn_end t=60000 key=X1 txn=X1 st=COMMIT off=0
        2 crash t=61000 st=kill
        3 recover t=62000
        4 txn_check t=63000 key=X1 txn=X1 off=1 detail={"check_times":1}
        5 txn_end t=64000 key=X1 txn=X1 st=COMMIT off=0
        6 txn_check t=120000 key=X1 txn=X1 off=2 detail={"check_times":1}
        """,
        (("DUPLICATE_COMMIT", (1, 5)), ("TXN_CHECK_AFTER_RESOLVED", (5, 6))),
        (("DUPLICATE_COMMIT", (1, 5)), ("TXN_CHECK_AFTER_RESOLVED", (1, 4)), ("TXN_CHECK_AFTER_RESOLVED", (1, 6))),
    ),
    BatchCase(
        "TXN_CHECK_AFTER_RESOLVED with op batching and clean restarts: a REOPEN (no crash row: the shutdown may "
        "have come right after the END, and it writes only the ops pending a full period) after the END loses "
        "its op even 9 s later, a recover without status likewise; a restart after a crash that came once the "
        "op was written does not; an END after the REOPEN resolves (the model's 5.2 run of a txn_checked ladder "
        "and a close_reopen, then a check it would not make)",
        """
        0 txn_half t=0 topic=T off=0 key=X1 txn=X1
        1 txn_check t=30000 key=X1 txn=X1 off=1 detail={"check_times":1}
        2 txn_end t=30000 key=X1 txn=X1 st=COMMIT off=1
        3 recover t=39375 st=REOPEN
        4 txn_check t=69375 key=X1 txn=X1 off=2 detail={"check_times":2}
        5 txn_end t=69375 key=X1 txn=X1 st=COMMIT off=2
        6 txn_check t=99375 key=X1 txn=X1 off=3 detail={"check_times":3}
        7 txn_half t=100000 topic=T off=4 key=X2 txn=X2
        8 txn_end t=100000 key=X2 txn=X2 st=ROLLBACK off=4
        9 crash t=105000 st=kill
        10 recover t=105100 st=kill
        11 recover t=110000 st=REOPEN
        12 txn_check t=140000 key=X2 txn=X2 off=5 detail={"check_times":1}
        13 txn_half t=150000 topic=T off=6 key=X3 txn=X3
        14 txn_end t=150000 key=X3 txn=X3 st=COMMIT off=6
        15 recover t=200000
        16 txn_check t=230000 key=X3 txn=X3 off=7 detail={"check_times":1}
        """,
        (("DUPLICATE_COMMIT", (2, 5)), ("TXN_CHECK_AFTER_RESOLVED", (5, 6)), ("TXN_CHECK_AFTER_RESOLVED", (8, 12))),
        (("DUPLICATE_COMMIT", (2, 5)), *(("TXN_CHECK_AFTER_RESOLVED", (end, check))
                                        for end, check in ((2, 4), (5, 6), (8, 12), (14, 16)))),
    ),
)
