"""Hand-written traces of a producer across several brokers, part of ``checker_cases.CASES`` (issue 43).

A routed producer's acknowledged ``send`` rows carry ``detail.fault`` (its sendLatencyFaultEnable) and
``detail.tries``, its attempts since its previous such row (``docs/trace-schema.md``, "Several brokers").
With the strategy off a retry goes to another broker when the route has one (PRODUCER_RETRY_SAME_BROKER);
with it on no attempt goes into a broker's not-available window while another broker is available
(PRODUCER_FAULT_WINDOW, replayed per producer from its attempt n 1 to its first gap). An attempt missing a
field, a row without ``fault`` or with one fault table but not the other is not judged.
Each case: (name, trace, expected findings).
"""

from __future__ import annotations

# ruff: noqa: E501 - a row of a trace is one line

ROUTE_CASES: tuple[tuple[str, str, tuple[tuple[str, tuple[int, ...]], ...]], ...] = (
    (
        "with the fault strategy off a retry to the broker that failed is PRODUCER_RETRY_SAME_BROKER when the "
        "route has another; not with one broker, an attempt missing a field, no fault flag or the strategy on",
        """
        0 send t=10 actor=P g=PG topic=T q=0 key=K1 st=SEND_OK detail={"broker":"a","fault":false,"tries":[{"n":1,"attempt":1,"broker":"a","queue_id":0,"start":0,"latency":5,"error":"RequestLost","brokers":["a","b"]},{"n":2,"attempt":2,"broker":"a","queue_id":0,"start":5,"latency":5,"error":null,"brokers":["a","b"]}]}
        1 send t=20 actor=P g=PG topic=T q=0 key=K2 st=SEND_OK detail={"broker":"b","fault":false,"tries":[{"n":3,"attempt":1,"broker":"a","queue_id":0,"start":12,"latency":5,"error":"BrokerError:14","brokers":["a","b"]},{"n":4,"attempt":2,"broker":"b","queue_id":0,"start":17,"latency":3,"error":null,"brokers":["a","b"]}]}
        2 send t=30 actor=P g=PG topic=T q=0 key=K3 st=SEND_OK detail={"broker":"a","fault":false,"tries":[{"n":5,"attempt":1,"broker":"a","queue_id":0,"start":22,"latency":5,"error":"RequestLost","brokers":["a"]},{"n":6,"attempt":2,"broker":"a","queue_id":0,"start":27,"latency":3,"error":null,"brokers":["a"]}]}
        3 send t=40 actor=P g=PG topic=T q=0 key=K4 st=SEND_OK detail={"broker":"a","fault":false,"tries":[{"n":7,"attempt":1,"broker":"a","queue_id":0,"start":32,"error":"RequestLost","brokers":["a","b"]},{"n":8,"attempt":2,"broker":"a","queue_id":0,"start":37,"latency":3,"error":null,"brokers":["a","b"]}]}
        4 send t=50 actor=P g=PG topic=T q=0 key=K5 st=SEND_OK detail={"broker":"a","tries":[{"n":9,"attempt":1,"broker":"a","queue_id":0,"start":42,"latency":5,"error":"RequestLost","brokers":["a","b"]},{"n":10,"attempt":2,"broker":"a","queue_id":0,"start":47,"latency":3,"error":null,"brokers":["a","b"]}]}
        5 send t=60 actor=P g=PG topic=T q=0 key=K6 st=SEND_OK detail={"broker":"a","fault":true,"tries":[{"n":11,"attempt":1,"broker":"a","queue_id":0,"start":52,"latency":5,"error":"RequestLost","brokers":["a","b"]},{"n":12,"attempt":2,"broker":"a","queue_id":0,"start":57,"latency":3,"error":null,"brokers":["a","b"]}]}
        """,
        (("PRODUCER_RETRY_SAME_BROKER", (0,)),),
    ),
    (
        "with the fault strategy on an attempt into a broker's not-available window (600 s after a failure) "
        "while another is available is PRODUCER_FAULT_WINDOW; not after a gap in n, with every broker out, "
        "with one table stated but not the other, or under tables without a window (a retry after the attempt's end)",
        """
        0 send t=1010 actor=Q g=QG topic=T q=0 key=K7 st=SEND_OK detail={"broker":"b","fault":true,"tries":[{"n":1,"attempt":1,"broker":"a","queue_id":0,"start":1000,"latency":5,"error":"RequestLost","brokers":["a","b"]},{"n":2,"attempt":2,"broker":"b","queue_id":0,"start":1005,"latency":5,"error":null,"brokers":["a","b"]}]}
        1 send t=2010 actor=Q g=QG topic=T q=0 key=K8 st=SEND_OK detail={"broker":"b","fault":true,"tries":[{"n":3,"attempt":1,"broker":"b","queue_id":0,"start":2000,"latency":5,"error":null,"brokers":["a","b"]}]}
        2 send t=3010 actor=Q g=QG topic=T q=0 key=K9 st=SEND_OK detail={"broker":"a","fault":true,"tries":[{"n":4,"attempt":1,"broker":"a","queue_id":0,"start":3000,"latency":5,"error":null,"brokers":["a","b"]}]}
        3 send t=3020 actor=R g=QG topic=T q=0 key=K10 st=SEND_OK detail={"broker":"a","fault":true,"tries":[{"n":2,"attempt":1,"broker":"a","queue_id":0,"start":3015,"latency":5,"error":"RequestLost","brokers":["a","b"]},{"n":3,"attempt":2,"broker":"a","queue_id":0,"start":3020,"latency":5,"error":null,"brokers":["a","b"]}]}
        4 send t=3030 actor=S g=QG topic=T q=0 key=K11 st=SEND_OK detail={"broker":"b","fault":true,"tries":[{"n":1,"attempt":1,"broker":"a","queue_id":0,"start":3025,"latency":5,"error":"RequestLost","brokers":["a","b"]},{"n":2,"attempt":2,"broker":"b","queue_id":0,"start":3030,"latency":5,"error":"RequestLost","brokers":["a","b"]}]}
        5 send t=3040 actor=S g=QG topic=T q=0 key=K12 st=SEND_OK detail={"broker":"a","fault":true,"tries":[{"n":3,"attempt":1,"broker":"a","queue_id":0,"start":3035,"latency":5,"error":null,"brokers":["a","b"]}]}
        6 send t=3050 actor=U g=QG topic=T q=0 key=K13 st=SEND_OK detail={"broker":"a","fault":true,"tries":[{"n":1,"attempt":1,"broker":"a","queue_id":0,"start":3045,"latency":5,"error":"RequestLost","brokers":["a","b"]},{"n":2,"attempt":2,"broker":"a","queue_id":0,"start":3046,"latency":5,"error":null,"brokers":["a","b"]}],"latency_max":[50,100]}
        7 send t=3060 actor=V g=QG topic=T q=0 key=K14 st=SEND_OK detail={"broker":"a","fault":true,"tries":[{"n":1,"attempt":1,"broker":"a","queue_id":0,"start":3055,"latency":5,"error":"RequestLost","brokers":["a","b"]},{"n":2,"attempt":2,"broker":"a","queue_id":0,"start":3056,"latency":5,"error":null,"brokers":["a","b"]}],"latency_max":[50,100,550,1000,2000,3000,15000],"not_available_duration":[0,0,30000,60000,120000,180000,600000]}
        8 send t=3070 actor=W g=QG topic=T q=0 key=K15 st=SEND_OK detail={"broker":"a","fault":true,"tries":[{"n":1,"attempt":1,"broker":"a","queue_id":0,"start":3065,"latency":5,"error":"RequestLost","brokers":["a","b"]},{"n":2,"attempt":2,"broker":"a","queue_id":0,"start":3070,"latency":5,"error":null,"brokers":["a","b"]}],"latency_max":[0],"not_available_duration":[0]}
        """,
        (("PRODUCER_FAULT_WINDOW", (2,)), ("PRODUCER_FAULT_WINDOW", (7,))),
    ),
)
