"""The short trace of odd rows the audit differentials share (``test_reference_plan.py``, the cluster
tier ``tests/interop/test_spark_cluster.py``): a send with an unknown status (``st=OK``), a lock
answered EXPIRED, a power loss with at-risk keys; ``ODD`` ends with a drain, ``UNDRAINED`` does not."""

UNDRAINED = """
0 send t=1000 topic=T q=0 key=K1 st=OK
1 store t=1000 topic=T q=0 off=0 key=K1
2 send t=1001 topic=T q=0 key=K2 st=SEND_OK
3 store t=1001 topic=T q=0 off=1 key=K2
4 deliver t=1010 g=G topic=T off=0 key=K1 c=C1 rt=0
5 lock t=1020 g=G topic=T q=0 c=C1 st=EXPIRED
6 crash t=1030 st=power detail={"at_risk":["K2",7]}
7 recover t=1040
"""
ODD = UNDRAINED + "8 drain t=9000\n"
