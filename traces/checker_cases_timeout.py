"""Hand-written traces of the client's cleanExpiredMsg, part of ``checker_cases.CASES`` (issue 42).

A ``send_back`` whose ``detail.clean_expired`` is true was made by the client's clean while the message's
listener still ran: it must come more than ``detail.consume_timeout_min`` minutes after
``detail.consume_start`` (RETRY_EARLY's clean case, the client's fault); exactly consumeTimeout is too early,
a row without both numbers as JSON integers (or not stating the clean as JSON true) is not judged, and the
timed-out consume beside the retry copy's is a DUPLICATED observation.
Each case: (name, trace, expected findings).
"""

from __future__ import annotations

_CLEAN, _START, _MIN = '"clean_expired":true', '"consume_start":1', '"consume_timeout_min":15'


def _back(seq: int, ts: int, *detail: str) -> str:
    """A level-3 send-back of K1 (due 10 s later) with ``detail``'s fields."""
    return (f"{seq} send_back t={ts} g=G topic=T q=0 off=0 key=K1 rt=1 lvl=3 due={ts + 10_000} st=RETRY "
            f"detail={{{','.join(detail)}}}")


TIMEOUT_CASES: tuple[tuple[str, str, tuple[tuple[str, tuple[int, ...]], ...]], ...] = (
    (
        "a clean send-back at or before consumeTimeout after its consume start is RETRY_EARLY (the client's); "
        "past it, without a start or a timeout, or not the clean's it is not",
        "\n".join((
            "0 send t=0 topic=T q=0 off=0 key=K1",
            "1 store t=0 topic=T q=0 off=0 key=K1",
            "2 deliver t=1 g=G topic=T q=0 off=0 key=K1 c=C1",
            _back(3, 900_001, _CLEAN, _START, _MIN),  # exactly consumeTimeout: not yet expired
            _back(4, 900_002, _CLEAN, _START, _MIN),  # past it: the clean's
            _back(5, 16_001, _CLEAN, _START, _MIN),  # 16 s in: minutes read as seconds
            _back(6, 16_002, _CLEAN, _MIN),  # no start: not judged
            _back(7, 16_003, _CLEAN, '"consume_start":"1"', _MIN),  # not a number: not judged
            _back(8, 16_004, '"clean_expired":"true"', _START, _MIN),  # not JSON true: not judged
            _back(9, 16_005, _START, _MIN),  # not the clean's: not judged
            '10 consume t=920000 g=G topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS '
            'detail={"consume_start":1,"return_type":"TIME_OUT"}',
            "11 store t=926001 topic=%RETRY%G q=0 off=0 key=K1 rt=1",
            "12 deliver t=926002 g=G topic=%RETRY%G q=0 off=0 key=K1 rt=1 c=C1",
            "13 consume t=926003 g=G topic=%RETRY%G q=0 off=0 key=K1 rt=1 c=C1 st=SUCCESS",
            "14 drain t=930000",
        )),
        (("RETRY_EARLY", (3,)), ("RETRY_EARLY", (5,)), ("DUPLICATED", (10, 13))),
    ),
)
