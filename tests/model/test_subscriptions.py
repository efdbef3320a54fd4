"""Heartbeated subscriptions (model/subscriptions.py) and pulls without the subscription flag, on ModelBroker
and MmapBroker: the 4.9.8 rules (ConsumerGroupInfo.updateSubscription, ConsumerFilterManager.register,
PullMessageProcessor's refusals) and the two-client scenario of tests/heartbeat_groups.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqspec.impl.broker import MmapBroker
from rmqspec.model import BrokerConfig, ManualClock, MessageQueue, ModelBroker
from rmqspec.model.pullfilter import subscription_matches
from rmqspec.model.results import BrokerError, ResponseCode
from rmqspec.model.subscriptions import ConsumerTable
from tests.heartbeat_groups import CASES, MESSAGES, QUEUES, message, run, run_stale_filter

SUGGEST = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."

CONFIG = BrokerConfig(enable_property_filter=True)


def _refusal(table: ConsumerTable, group: str, topic: str, version: int) -> ResponseCode:
    with pytest.raises(BrokerError) as info:
        table.resolve(group, topic, version, SUGGEST)
    return info.value.code


def test_the_greatest_sub_version_wins_not_the_last_heartbeat() -> None:
    t = ConsumerTable()
    assert t.heartbeat("G", "c2", {"T": ("b = 1", "SQL92", 20)})
    assert t.heartbeat("G", "c1", {"T": ("a = 1", "SQL92", 10)})  # a new client: changed
    assert t.resolve("G", "T", 10, SUGGEST) == ("b = 1", "SQL92")
    assert not t.heartbeat("G", "c1", {"T": ("a = 1", "SQL92", 10)})  # a repeat changes nothing
    t.heartbeat("G", "c1", {"T": ("a = 2", "SQL92", 30)})  # a re-built subscription (newer) wins
    assert t.resolve("G", "T", 30, SUGGEST) == ("a = 2", "SQL92")
    t.heartbeat("G", "c3", {"T": ("TagA", "TAG", 40)})
    assert t.resolve("G", "T", 0, SUGGEST) == ("TagA", "TAG")  # a tag subscription uses no filter data


def test_refusals_in_pull_message_processor_order() -> None:
    t = ConsumerTable()
    assert _refusal(t, "G", "T", 0) is ResponseCode.SUBSCRIPTION_NOT_EXIST
    t.heartbeat("G", "c1", {"T": ("a > 1", "SQL92", 5)})
    assert _refusal(t, "G", "U", 0) is ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert _refusal(t, "G", "T", 6) is ResponseCode.SUBSCRIPTION_NOT_LATEST
    t.heartbeat("G", "c2", {"T": ("a >", "SQL92", 9)})  # newer, does not compile: filter data removed
    assert _refusal(t, "G", "T", 9) is ResponseCode.FILTER_DATA_NOT_EXIST
    t2 = ConsumerTable()
    t2.heartbeat("G", "c1", {"T": ("a > 1", "SQL92", 5)})
    t2.filters[("T", "G")].client_version = 3  # filter data older than the subscription (4.9.8 keeps both)
    assert _refusal(t2, "G", "T", 5) is ResponseCode.FILTER_DATA_NOT_LATEST


def test_a_heartbeat_without_a_topic_removes_it_and_the_last_client_takes_the_group() -> None:
    t = ConsumerTable()
    t.heartbeat("G", "c1", {"T": ("*", "TAG", 1), "U": ("x = 1", "SQL92", 1)})
    assert t.heartbeat("G", "c2", {"T": ("*", "TAG", 1)})
    assert _refusal(t, "G", "U", 0) is ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert t.filters[("U", "G")].dead  # kept, marked dead; the same version revives it
    t.heartbeat("G", "c1", {"T": ("*", "TAG", 1), "U": ("x = 1", "SQL92", 1)})
    assert not t.filters[("U", "G")].dead and t.resolve("G", "U", 1, SUGGEST) == ("x = 1", "SQL92")
    t.heartbeat("G", "c1", {"T": ("*", "TAG", 1), "U": ("x = 1", "SQL92", 2)})  # same expression, newer
    assert t.filters[("U", "G")].client_version == 2 and t.resolve("G", "U", 2, SUGGEST) == ("x = 1", "SQL92")
    t.heartbeat("H", "c3", {"V": ("TAGS >", "SQL92", 1)})  # a first one that does not compile: not kept
    assert ("V", "H") not in t.filters
    t.heartbeat("H", "c3", {"V": ("x = 1", "SQL91", 2)})  # a type the broker has no filter for: not kept
    assert ("V", "H") not in t.filters
    assert t.unregister("G", "c1") and not t.unregister("G", "nobody")
    assert t.resolve("G", "T", 0, SUGGEST) == ("*", "TAG")
    t.unregister("G", "c2")
    assert _refusal(t, "G", "T", 0) is ResponseCode.SUBSCRIPTION_NOT_EXIST
    t.heartbeat("G", "c1", {"T": ("*", "TAG", 1)})
    t.clear()
    assert t.groups == {} and t.filters == {}


def _brokers(tmp_path: Path) -> dict[str, object]:
    return {"model": ModelBroker(ManualClock(1_700_000_000_000), CONFIG),
            "mmap": MmapBroker.open(tmp_path / "mmap", ManualClock(1_700_000_000_000), CONFIG)}


def _registered_filter(case: dict) -> tuple[str, str]:
    winner = max((case["c1"], case["c2"]), key=lambda s: s[2])
    return winner[0], winner[1]


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_clients_of_one_group_on_model_and_mmap(tmp_path: Path, name: str) -> None:
    seen = {kind: run(b, name, "HB", "G_HB") for kind, b in _brokers(tmp_path).items()}
    assert seen["model"] == seen["mmap"]
    obs, case = seen["model"], CASES[name]
    expression, kind = _registered_filter(case)
    sent = [message("HB", i) for i in range(MESSAGES)]
    pulls = [o for o in obs if o["step"] == "pull"]
    assert [(o["client"], o["queue"]) for o in pulls] == [("c1", 0), ("c1", 1), ("c2", 2), ("c2", 3)]
    for o in pulls:
        on_queue = [(i // QUEUES, m) for i, (m, q) in enumerate(sent) if q == o["queue"]]
        if name == "bad-sql":
            assert o["code"] == "FILTER_DATA_NOT_EXIST"
            continue
        # the broker filters every client's queues with the winner's subscription
        want = [off for off, m in on_queue if subscription_matches(expression, kind, m.tags, m.properties)]
        assert o["offsets"] == want and o["next"] == len(on_queue)
        own = case[o["client"]]
        kept = [off for off, m in on_queue if off in want and (
            own[1] != "TAG" or subscription_matches(own[0], "TAG", m.tags, m.properties))]
        assert o["consumed"] == kept
    steps = {o["step"]: o for o in obs}
    assert steps["newer-version"]["code"] == "SUBSCRIPTION_NOT_LATEST"
    assert steps["other-topic"]["remark"].startswith("the consumer's subscription not exist")
    assert steps["unknown-group"]["remark"].startswith("the consumer's group info not exist")
    # the winner left, the other re-heartbeated its older subscription: the group keeps the winner's
    winner_pull = next(o for o in pulls if o["queue"] == 0)
    assert {k: v for k, v in steps["winner-left"].items() if k not in ("step", "consumed")} == \
        {k: v for k, v in winner_pull.items() if k not in ("step", "client", "queue", "consumed")}
    assert steps["all-left"]["remark"].startswith("the consumer's group info not exist")


def test_a_restart_forgets_heartbeats(tmp_path: Path) -> None:
    for b in _brokers(tmp_path).values():
        b.create_topic("T", 1)  # type: ignore[attr-defined]
        b.heartbeat("G", "c1", {"T": ("*", "TAG", 1)})  # type: ignore[attr-defined]
        assert b.pull("G", MessageQueue("T", 0), 0, 32, None).status.name == "NO_NEW_MSG"  # type: ignore[attr-defined]
        b.close()  # type: ignore[attr-defined]
        b.reopen()  # type: ignore[attr-defined]
        with pytest.raises(BrokerError) as info:
            b.pull("G", MessageQueue("T", 0), 0, 32, None)  # type: ignore[attr-defined]
        assert info.value.code is ResponseCode.SUBSCRIPTION_NOT_EXIST


def test_sql92_heartbeat_on_a_broker_without_property_filter(tmp_path: Path) -> None:
    b = ModelBroker(ManualClock(1_700_000_000_000), BrokerConfig(enable_property_filter=False))
    b.create_topic("T", 1)
    b.heartbeat("G", "c1", {"T": ("a > 1", "SQL92", 1)})
    with pytest.raises(BrokerError) as info:
        b.pull("G", MessageQueue("T", 0), 0, 32, None, "SQL92", 1)
    assert (info.value.code, info.value.remark) == (
        ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")


def test_a_dead_filter_data_still_filters_on_model_and_mmap(tmp_path: Path) -> None:
    seen = [run_stale_filter(b, "HS", "G_HS") for b in _brokers(tmp_path).values()]
    assert seen[0] == seen[1]
    first, left, older, newer = seen[0]
    assert first["offsets"] == [2] and older["offsets"] == first["offsets"]  # region BJ, not HZ (offsets 0, 3)
    assert left["code"] == "SUBSCRIPTION_NOT_EXIST" and newer["code"] == "SUBSCRIPTION_NOT_LATEST"
