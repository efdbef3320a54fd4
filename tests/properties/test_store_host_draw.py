"""The broker's store host of an in-process conformance example (properties/composite.py
``STORE_HOSTS``): drawn from the swarm integer's bits above the file geometry, recorded as ``init``'s
``host``; an IPv6 host gives records with the STOREHOST_V6 bit and 56-digit msgIds, in lockstep with
the model and judged without it (``oracles.judge_identity``)."""

from __future__ import annotations

from rmqspec.impl import factory as impl_factory
from rmqspec.model.config import BrokerConfig
from rmqspec.model.message import STOREHOST_V6_FLAG, MessageQueue
from rmqspec.properties.composite import (
    STORE_HOSTS,
    _swarm_mask,
    _swarm_value,
    split_swarm,
    swarm_store_host,
)
from rmqspec.properties.conformance import conformance_machine
from rmqspec.properties.program import Op


def _seed_for_v6() -> int:
    return next(s for s in range(10_000) if swarm_store_host(_swarm_value(s)) == "::1")


def test_the_store_host_rides_on_the_swarm_draw_without_changing_mask_or_files() -> None:
    seen = set()
    for seed in range(0, 2**32, 2**32 // 997):
        value = _swarm_value(seed)
        assert split_swarm(value)[0] == _swarm_mask(seed)
        seen.add(swarm_store_host(value))
    assert seen == set(STORE_HOSTS)
    assert swarm_store_host(86) is None, "a recorded mask (below 256) means the configuration's host"


def test_an_ipv6_store_host_is_recorded_and_its_records_carry_the_v6_bit() -> None:
    m = conformance_machine(impl_factory)()
    try:
        m.init(queues=1, retry_max=0, orderly_max=0, swarm=_swarm_value(_seed_for_v6()))
        assert m.program[0].kwargs()["host"] == "::1" and m.config.store_host == "::1"
        for op in [Op.of("send_plain", topic=0, queue=0, tags="TagA", keys=(), props=True)] * 3:
            getattr(m, op.rule)(**op.kwargs())
            m.check_always()
        res = m._call("pull [test]", lambda b: b.pull(m.obs, MessageQueue(m.t0, 0), 0, 32)).value
        assert res.messages, "the sends were stored"
        for msg in res.messages:
            assert msg.sys_flag & STOREHOST_V6_FLAG and len(msg.msg_id) == 56  # 16-byte host, port, offset
        assert not m.failed
    finally:
        m.teardown()


def test_a_users_store_host_stands() -> None:
    """--config's brokerIP1 is the user's choice: no drawn host replaces it."""
    machine = conformance_machine(impl_factory, config=BrokerConfig(store_host="10.0.0.7"))()
    try:
        machine.init(queues=1, retry_max=0, orderly_max=0, swarm=_swarm_value(_seed_for_v6()))
        assert machine.config.store_host == "10.0.0.7"
        assert "host" not in machine.program[0].kwargs()
    finally:
        machine.teardown()
