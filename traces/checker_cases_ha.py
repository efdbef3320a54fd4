"""Hand-written traces of a master/slave pair, part of ``checker_cases.CASES`` (issue 43).

A pair's rows name their broker in ``detail.broker`` and ``detail.broker_id`` (0 master, 1 slave;
docs/trace-schema.md): the master's ``store`` and ``send`` (``detail.role``, ``wait``, ``end``), the
``replicate`` rows (``commitlog_offset`` the slave's new end, ``detail.from``, ``detail.records``), the
slave's ``deliver`` rows and ``ha_link`` DISK_LOST (``commitlog_offset`` the slave's end then). Each case
shows findings beside rows that are not judged (no broker id, no ``wait``, no status); dropping any value
never adds a finding (``tests/traces/test_monotonic.py``). Each case: (name, trace, expected findings).
"""

from __future__ import annotations

_M = '"broker":"b","broker_id":0'
_S = '"broker":"b","broker_id":1'

HA_CASES: tuple[tuple[str, str, tuple[tuple[str, tuple[int, ...]], ...]], ...] = (
    (
        "a SYNC_MASTER SEND_OK past the slave's end is HA_SYNC_ACK_UNREPLICATED; one the slave's end at the "
        "master's disk loss is before is HA_SYNC_ACK_LOST; a send not waiting or without a broker id is not judged",
        f"""
        0 store t=0 topic=T q=0 off=0 clo=0 key=A detail={{{_M}}}
        1 send t=1 topic=T q=0 off=0 clo=0 key=A st=SEND_OK detail={{{_M},"role":"SYNC_MASTER","wait":true,"end":100}}
        2 replicate t=2 clo=100 detail={{{_S},"from":0,"records":[[0,"A"]]}}
        3 store t=3 topic=T q=0 off=1 clo=100 key=B detail={{{_M}}}
        4 replicate t=4 clo=200 detail={{{_S},"from":100,"records":[[100,"B"]]}}
        5 send t=5 topic=T q=0 off=1 clo=100 key=B st=SEND_OK detail={{{_M},"role":"SYNC_MASTER","wait":true,"end":200}}
        6 store t=6 topic=T q=0 off=2 clo=200 key=C detail={{{_M}}}
        7 send t=7 topic=T q=0 clo=200 key=C st=SEND_OK detail={{{_M},"role":"SYNC_MASTER","wait":false,"end":300}}
        8 send t=8 topic=T q=0 off=2 clo=200 key=C st=SEND_OK detail={{"broker":"b","role":"SYNC_MASTER","end":300}}
        9 ha_link t=9 st=DISK_LOST clo=100 detail={{{_M},"role":"SYNC_MASTER"}}
        """,
        (("HA_SYNC_ACK_UNREPLICATED", (1,)), ("HA_SYNC_ACK_LOST", (5, 9))),
    ),
    (
        "the slave serving past its end or another key than it received, a transfer not continuing its log or "
        "moving a record the master did not store, a slave's store or send: each its code",
        f"""
        0 store t=0 topic=T q=0 off=0 clo=0 key=A detail={{{_M}}}
        1 send t=1 topic=T q=0 off=0 clo=0 key=A st=SEND_OK detail={{{_M},"role":"ASYNC_MASTER","end":100}}
        2 store t=2 topic=T q=0 off=1 clo=100 key=B detail={{{_M}}}
        3 send t=3 topic=T q=0 off=1 clo=100 key=B st=SEND_OK detail={{{_M},"role":"ASYNC_MASTER","end":200}}
        4 replicate t=4 clo=100 detail={{{_S},"from":0,"records":[[0,"A"]]}}
        5 deliver t=5 g=G topic=T q=0 off=0 clo=0 key=A rt=0 c=C1 detail={{{_S}}}
        6 deliver t=6 g=G topic=T q=0 off=1 clo=100 key=B rt=0 c=C1 detail={{{_S}}}
        7 deliver t=7 g=H topic=T q=0 off=0 clo=0 key=B rt=0 c=C2 detail={{{_S}}}
        8 deliver t=8 g=I topic=T q=0 off=0 clo=0 key=B rt=0 c=C3 detail={{"broker":"b"}}
        9 replicate t=9 clo=300 detail={{{_S},"from":200,"records":[[100,"B"],[200,"Z"]]}}
        10 store t=10 topic=T q=1 off=0 clo=300 key=X detail={{{_S}}}
        11 send t=11 topic=T q=1 off=0 clo=300 key=X st=SEND_OK detail={{{_S}}}
        """,
        (("HA_SLAVE_BEYOND_REPLICATED", (4, 6)), ("HA_SLAVE_SERVED_UNSTORED", (4, 7)),
         ("HA_SLAVE_NOT_PREFIX", (4, 9)), ("HA_SLAVE_NOT_PREFIX", (9,)), ("HA_SLAVE_WROTE", (10,)),
         ("HA_SLAVE_WROTE", (11,))),
    ),
    (
        "an ASYNC_MASTER's disk loss takes its unreplicated tail (HA_ASYNC_TAIL_LOST, an observation); after an "
        "ha_link without status (it may be a disk loss) the acks before it are not judged",
        f"""
        0 store t=0 topic=T q=0 off=0 clo=0 key=A detail={{{_M}}}
        1 send t=1 topic=T q=0 off=0 clo=0 key=A st=SEND_OK detail={{{_M},"role":"ASYNC_MASTER","end":100}}
        2 store t=2 topic=T q=0 off=1 clo=100 key=B detail={{{_M}}}
        3 send t=3 topic=T q=0 off=1 clo=100 key=B st=SEND_OK detail={{{_M},"role":"ASYNC_MASTER","end":200}}
        4 replicate t=4 clo=100 detail={{{_S},"from":0,"records":[[0,"A"]]}}
        5 ha_link t=5 st=DISK_LOST clo=100 detail={{{_M},"role":"ASYNC_MASTER"}}
        6 store t=6 topic=T q=1 off=0 clo=0 key=C detail={{{_M}}}
        7 send t=7 topic=T q=1 off=0 clo=0 key=C st=SEND_OK detail={{{_M},"role":"ASYNC_MASTER","end":100}}
        8 ha_link t=8 detail={{{_M}}}
        9 ha_link t=9 st=DISK_LOST clo=100 detail={{{_M},"role":"ASYNC_MASTER"}}
        """,
        (("HA_ASYNC_TAIL_LOST", (3, 5)),),
    ),
)
