"""The conformance machine's inconsistent group (properties/filters.py) under 4.9.8's heartbeat semantics.

Driven rule by rule on the ModelBroker (lockstep against itself): both clients of GF heartbeat, the
acting one pulls without the subscription flag and is filtered by the *newer* subscription; its tag
re-check drops what it does not want; it commits past the rest. Its rows, fed to the reference trace
checker, show what the audit reports for such a group: SUBSCRIPTION_INCONSISTENT and FILTER_SKIPPED.
"""

from __future__ import annotations

from rmqspec.model.model_factory import factory as model_factory
from rmqspec.properties.codes import Code, ObservationCode
from rmqspec.properties.conformance import conformance_machine
from rmqspec.properties.filters import FILTER_GROUP
from rmqspec.traces.checker import check


def _machine():
    machine = conformance_machine(model_factory)()
    machine.init(queues=2, retry_max=1, orderly_max=1, flush="SYNC")
    return machine


def test_the_newer_subscription_filters_both_clients_and_the_audit_sees_the_skipped_message() -> None:
    m = _machine()
    t0 = sorted(m.topics).index(m.t0)
    m.send_with_properties(t0, 0, "logistics", {"region": "HZ"})  # client-1's own subscription selects it
    m.send_with_properties(t0, 0, "food", {"region": "SH"})
    m.send_with_properties(t0, 1, "food", {"region": "SH"})
    style = ("logistics", None, 1)  # client-1: TAG logistics (older); client-2: SQL92, built later
    m.inconsistent_group("region = 'HZ'", "region = 'SH'", 0, 8, style)  # both clients pull, client-1 first
    m.inconsistent_group("region = 'HZ'", "region = 'SH'", 1, 8, style)  # nothing new: committed
    group = FILTER_GROUP + m.ns
    rows = [e for e in m.history.events if e.group == group]
    delivered = [(e.client_id.rsplit("-", 1)[-1], e.queue_id, e.detail["tags"]) for e in rows if e.event == "deliver"]
    assert delivered == [("1", 0, "food"), ("2", 1, "food")]  # region = 'SH' on both clients' queues
    consumed = [(e.client_id.rsplit("-", 1)[-1], e.queue_id) for e in rows if e.event == "consume"]
    assert consumed == [("2", 1)]  # client-1's tag re-check dropped "food"
    commits = [(e.queue_id, e.queue_offset) for e in rows if e.event == "commit_offset"]
    assert commits == [(0, 2), (1, 1)]  # client-1 committed past its "logistics" message
    assert m.coverage["inconsistent_group:filtered_by_other"] >= 1
    assert m.coverage["inconsistent_group:client_dropped"] >= 1
    report = check([e.as_row() for e in m.history.events])
    assert ObservationCode.SUBSCRIPTION_INCONSISTENT.value in {f.code for f in report.observations}
    skipped = [f for f in report.violations if f.code == Code.FILTER_SKIPPED.value]
    # both queue-0 messages: "logistics" (client-1's own subscription selects it, the broker filtered it
    # out) and "food"/SH (client-2's selects it, but only client-1 got it and dropped it)
    queue0 = {e.msg_key for e in m.history.events if e.event == "send" and e.queue_id == 0 and e.topic == m.t0}
    assert {f.keys["msg_key"] for f in skipped} == queue0 and {f.keys["group"] for f in skipped} == {group}
    m.teardown()  # the broker did nothing wrong: the machine's own verdict passes


def test_a_client_whose_sql92_does_not_compile_never_starts() -> None:
    """DefaultMQPushConsumer.start's CHECK_CLIENT_CONFIG refuses it: it neither heartbeats nor pulls, so
    the other client's subscription alone filters (its own queues deliver what it asked for)."""
    m = _machine()
    t0 = sorted(m.topics).index(m.t0)
    m.send_with_properties(t0, 1, "food", {"region": "SH"})
    m.send_with_properties(t0, 1, "food", {"region": "HZ"})
    m.inconsistent_group("a >", "region = 'SH'", 0, 8, (None, None, 0))  # client-1 does not start
    assert m.coverage["inconsistent_group:start_refused"] >= 1
    assert m.coverage["sql92:refused:SUBSCRIPTION_PARSE_FAILED"] >= 1
    group = FILTER_GROUP + m.ns
    rows = [e for e in m.history.events if e.group == group]
    assert [(e.client_id.rsplit("-", 1)[-1], e.detail["properties"]["region"]) for e in rows
            if e.event == "consume"] == [("2", "SH")]
    m.teardown()
