"""Hand-written traces of RocketMQ 5.x timer messages, with the findings they must give.

Like ``checker_cases.CASES`` (which includes these: every test iterating over it runs them on the
reference checker and the Spark audit, and drops each field of each row in turn), under the same
``PARAMS``: the timer rules read the precision nowhere, every due time is in the trace
(``deliver_ts``). ``TIMER_CASES`` are ``(name, notation text, expected findings)``; the timer copy
of a message is its ``store`` in rmq_sys_wheel_timer, its re-put a ``store`` in its topic then a
``timer_fire`` (``traces/checks_timer.py``). A request carrying ``detail.timer`` (what the conformance
machine writes) is also judged by the TIMER table's replay (``properties/inv_replay_timer.py``:
MESSAGE_LIFECYCLE).
"""

from __future__ import annotations


def _timer(seq: int, ts: int, off: int, key: str, due: int, q: int = 0, topic: str = "T",
           status: str = "SEND_OK") -> str:
    """The timer copy's store and the acknowledged send (rows ``seq``, ``seq + 1``)."""
    return (f"{seq} store t={ts} topic=rmq_sys_wheel_timer q=0 off={off} clo={100 * off} key={key} rt=0 due={due}\n"
            f"{seq + 1} send t={ts} topic={topic} q={q} off={off} clo={100 * off} key={key} st={status} due={due}\n")


def _fire(seq: int, ts: int, q: int, off: int, key: str, due: int | None, timer_off: int | None) -> str:
    """The re-put copy's store and its ``timer_fire`` (rows ``seq``, ``seq + 1``); ``None``: left out."""
    detail = "" if timer_off is None else (
        f' detail={{"from_queue_offset":{timer_off},"from_commitlog_offset":{100 * timer_off}}}')
    d = "" if due is None else f" due={due}"
    return (f"{seq} store t={ts} topic=T q={q} off={off} key={key} rt=0\n"
            f"{seq + 1} timer_fire t={ts} topic=T q={q} off={off} key={key} rt=0{d}{detail}\n")


def _request(requested: int, max_delay_ms: int = 10_000, **more: str) -> str:
    """A timer request's ``detail`` (``inv_replay_timer.timer_vars``: precision 1000)."""
    timer = (f'{{"requested":{requested},"parsed":true,"precision":1000,"max_delay_ms":{max_delay_ms}}}')
    extra = "".join(f',"{k}":"{v}"' for k, v in more.items())
    return f' detail={{"timer":{timer}{extra}}}'


def _consumed(seq: int, ts: int, q: int, off: int, key: str) -> str:
    return (f"{seq} deliver t={ts} g=G topic=T q={q} off={off} key={key} c=C1 rt=0\n"
            f"{seq + 1} consume t={ts} g=G topic=T q={q} off={off} key={key} c=C1 rt=0 st=SUCCESS\n")


TIMER_CASES: tuple[tuple[str, str, tuple[tuple[str, tuple[int, ...]], ...]], ...] = (
    (
        "TIMER_EARLY fire clause: a fire 1 ms before its deliver_ts is early, one at it on time",
        _timer(0, 0, 0, "K1", 2000) + _timer(2, 0, 1, "K2", 2000, q=1)
        + _fire(4, 1999, 0, 0, "K1", 2000, 0) + _fire(6, 2000, 1, 0, "K2", 2000, 1)
        + _consumed(8, 2001, 0, 0, "K1") + _consumed(10, 2001, 1, 0, "K2") + "12 drain t=9000\n",
        (("TIMER_EARLY", (5,)),),
    ),
    (
        "TIMER_EARLY deliver clause (a client-side trace: sends with deliver_ts, no broker rows): 1 ms "
        "early; on time; a resend stored as it is drops the bound; the lowest of two timer sends bounds",
        """
        0 send t=1000 topic=T q=0 key=K1 st=SEND_OK due=4000
        1 send t=1000 topic=T q=0 key=K2 st=SEND_OK due=4000
        2 deliver t=3999 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
        3 consume t=3999 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0 st=SUCCESS
        4 deliver t=4000 g=G topic=T q=0 off=1 key=K2 c=C1 rt=0
        5 consume t=4000 g=G topic=T q=0 off=1 key=K2 c=C1 rt=0 st=SUCCESS
        6 send t=5000 topic=T q=0 key=K3 st=SEND_OK due=8000
        7 send t=5100 topic=T q=0 key=K3 st=SEND_OK
        8 deliver t=5200 g=G topic=T q=0 off=2 key=K3 c=C1 rt=0
        9 consume t=5200 g=G topic=T q=0 off=2 key=K3 c=C1 rt=0 st=SUCCESS
        10 send t=5300 topic=T q=0 key=K4 st=TIMEOUT due=8000
        11 send t=5400 topic=T q=0 key=K4 st=SEND_OK due=8100
        12 deliver t=8000 g=G topic=T q=0 off=3 key=K4 c=C1 rt=0
        13 consume t=8000 g=G topic=T q=0 off=3 key=K4 c=C1 rt=0 st=SUCCESS
        14 drain t=9000
        """,
        (("TIMER_EARLY", (0, 2)),),
    ),
    (
        "TIMER_DUPLICATED: a copy fired twice without a crash; again after one, not; twice again after it; "
        "two copies of one key fired once each",
        _timer(0, 0, 0, "K1", 1000) + _timer(2, 0, 1, "K2", 1000) + _timer(4, 0, 2, "K3", 1000)
        + _fire(6, 1000, 0, 0, "K1", 1000, 0) + _fire(8, 1000, 0, 1, "K2", 1000, 1)
        + _fire(10, 1000, 0, 2, "K3", 1000, 2) + _fire(12, 1500, 0, 3, "K1", 1000, 0)
        + "14 crash t=1600 st=kill\n15 recover t=2000\n"
        + _fire(16, 2000, 0, 4, "K2", 1000, 1) + _fire(18, 2001, 0, 5, "K2", 1000, 1)
        + _timer(20, 2100, 3, "K3", 3000) + _fire(22, 3000, 0, 6, "K3", 3000, 3)
        + "24 drain t=9000\n",
        (("TIMER_DUPLICATED", (7, 13)), ("TIMER_DUPLICATED", (17, 19))),
    ),
    (
        "TIMER_UNFIRED at the drain: due before it or at its ts; not one due after it (nor LOST: not judged), "
        "a fired one, an unacknowledged one, an at-risk one",
        _timer(0, 0, 0, "K1", 5000) + _timer(2, 0, 1, "K2", 9000) + _timer(4, 0, 2, "K3", 9001)
        + _timer(6, 0, 3, "K4", 3000) + _fire(8, 3000, 0, 0, "K4", 3000, 3) + _consumed(10, 3001, 0, 0, "K4")
        + _timer(12, 3100, 4, "K5", 5000, status="FLUSH_SLAVE_TIMEOUT")
        + _timer(14, 3100, 5, "K6", 5000, status="FAILED") + _timer(16, 3100, 6, "K7", 5000)
        + """
        18 crash t=3200 st=power detail={"at_risk":["K7"]}
        19 recover t=3300
        20 drain t=9000
        """,
        (("TIMER_UNFIRED", (1, 20)), ("TIMER_UNFIRED", (3, 20)), ("TIMER_UNFIRED", (13, 20)),
         ("LOST", (1, 20)), ("LOST", (3, 20)), ("LOST", (13, 20))),
    ),
    (
        "timer rows lacking what the rules read are not judged: an early fire without deliver_ts, a second "
        "fire without its timer copy, a fire without msg_key (no TIMER_UNFIRED), a deliver without rt",
        _timer(0, 0, 0, "K1", 2000) + _timer(2, 0, 1, "K2", 2000)
        + _fire(4, 1000, 0, 0, "K1", None, 0) + _fire(6, 2000, 0, 1, "K1", 2000, None)
        + """
        8 store t=2000 topic=T q=0 off=2 key=K2 rt=0
        9 timer_fire t=2000 topic=T q=0 off=2 rt=0 due=2000 detail={"from_queue_offset":1,"from_commitlog_offset":100}
        10 send t=2000 topic=U q=0 key=K3 st=SEND_OK due=6000
        11 deliver t=3000 g=G topic=U q=0 off=0 key=K3 c=C1
        12 consume t=3000 g=G topic=U q=0 off=0 key=K3 c=C1 st=SUCCESS
        13 drain t=9000
        """,
        (),
    ),
    (
        "the TIMER table replayed (MESSAGE_LIFECYCLE): a timer copy due a precision after its slot; a legal "
        "request refused MESSAGE_ILLEGAL; one past the max delay acknowledged; a copy fired again after a crash "
        "into another queue (REFIRABLE); a fire into its request's queue and one whose request lacks "
        "detail.timer are the table's",
        "0 send t=1000 topic=T q=0 off=0 clo=0 key=K1 st=SEND_OK due=3000" + _request(2500) + "\n"
        "1 store t=1000 topic=rmq_sys_wheel_timer q=0 off=0 clo=0 key=K1 rt=0 due=4000\n"
        "2 send t=1000 topic=T q=0 off=1 clo=100 key=K2 st=SEND_OK due=3000" + _request(2500) + "\n"
        "3 store t=1000 topic=rmq_sys_wheel_timer q=0 off=1 clo=100 key=K2 rt=0 due=3000\n"
        "4 send t=1000 topic=T q=0 key=K3 st=FAILED" + _request(5000, error="MESSAGE_ILLEGAL") + "\n"
        "5 send t=1000 topic=T q=0 key=K4 st=SEND_OK" + _request(20_000) + "\n"
        "6 send t=1000 topic=T q=1 off=2 clo=200 key=K5 st=SEND_OK due=3000\n"
        "7 store t=1000 topic=rmq_sys_wheel_timer q=0 off=2 clo=200 key=K5 rt=0 due=3000\n"
        + _fire(8, 3000, 0, 0, "K2", 3000, 1)
        + "10 crash t=3100 st=kill\n11 recover t=3200\n"
        + _fire(12, 3300, 1, 0, "K2", 3000, 1).replace("topic=T q=0", "topic=T q=1")
        + _fire(14, 3300, 0, 1, "K1", 3000, 0) + _fire(16, 3300, 1, 1, "K5", 3000, 2),
        (("MESSAGE_LIFECYCLE", (0, 1)), ("MESSAGE_LIFECYCLE", (4,)), ("MESSAGE_LIFECYCLE", (5,)),
         ("MESSAGE_LIFECYCLE", (2, 13))),
    ),
    (
        "TIMER_UNFIRED after a power loss and a kill close behind it: a copy stored at a timer-queue position "
        "the loss freed, then the kill before the next checkpoint, still fires (the restart rebuilds the wheel "
        "from the whole queue below the old pointer), so unfired at the drain it is a finding, with LOST; the "
        "copy the loss took (at risk) is neither; one stored past the freed positions fired",
        _timer(0, 0, 0, "K1", 20_000)
        + """
        2 crash t=2500 st=power detail={"at_risk":["K1"]}
        3 recover t=2510 st=power
        """
        + _timer(4, 2510, 0, "K2", 6000) + _timer(6, 2600, 1, "K3", 6000)
        + "8 crash t=2800 st=kill\n9 recover t=2810 st=kill\n"
        + _fire(10, 6000, 0, 0, "K3", 6000, 1) + _consumed(12, 6001, 0, 0, "K3") + "14 drain t=30000\n",
        (("TIMER_UNFIRED", (5, 14)), ("LOST", (5, 14))),
    ),
)
