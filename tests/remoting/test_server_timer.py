"""rmqspec serve and 5.x timer messages: the put hook over the wire, refusals, batches, the tick, wire events.

The served broker is the model (``rmqspec.model:factory``) under the rocketmq-5.2 profile with
``timerPrecisionMs=100`` and ``timerMaxDelaySec=60``, on the wall clock; the facts asserted are the ones
measured on real 5.3.3 (``interop/timer_probe.py``, ``tests/interop/test_timer_real.py``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import attrs

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import Clock
from rmqspec.model.config import BrokerConfig, default_config
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.remoting.bodies import decode_messages
from rmqspec.remoting.records import BatchItem, encode_batch
from rmqspec.remoting.server import tick_period_ms
from rmqspec.remoting.wire_events import timer_deliver_ts
from tests.remoting.conftest import SHORT_DELAYS, create_topic_ext, props, pull_ext, send_ext, uniq_key

V5 = attrs.evolve(default_config("rocketmq-5.2"), message_delay_level=SHORT_DELAYS, timer_precision_ms=100,
                  timer_max_delay_sec=60)
V49 = attrs.evolve(default_config("rocketmq-4.9"), message_delay_level=SHORT_DELAYS)
ILLEGAL = ("timer message illegal, the delay time should not be bigger than the max delay 60000ms; "
           "or if set del msg, the delay time should be bigger than the current time")
NOT_ENABLED = "accurate timer message is not enabled, timerWheelEnable is false"
TIMER_TOPIC = "rmq_sys_wheel_timer"


def _now() -> int:
    return time.time_ns() // 1_000_000


def _pull(b, topic: str, queue: int, offset: int = 0) -> list:
    r = b.call(11, pull_ext("GT", topic, queue, offset, sys_flag=4, suspend_ms=0, subscription="*"))
    return decode_messages(r.body) if r.code == 0 else []


def _wait_pull(b, topic: str, queue: int, deadline_s: float) -> list:
    end = time.monotonic() + deadline_s
    while True:
        got = _pull(b, topic, queue)
        if got or time.monotonic() >= end:
            return got
        time.sleep(0.02)


def _served(serve, config: BrokerConfig = V5, **kw):
    s = serve(config=config, factory=model_factory, **kw)
    b = s.client()
    b.call(17, create_topic_ext("T", 4))
    return s, b


def test_a_timer_send_is_answered_with_the_timer_copy_and_fires_at_its_slot(serve) -> None:
    _s, b = _served(serve)
    key, at = uniq_key(), _now() + 400
    r = b.call(310, send_ext("T", 2, properties=props(UNIQ_KEY=key, TIMER_DELIVER_MS=str(at))), b"x")
    assert r.code == 0 and (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == ("2", "0")
    (timer,) = _pull(b, TIMER_TOPIC, 0)
    assert timer.uniq_key == key and r.ext_fields["msgId"].endswith(f"{timer.commitlog_offset:016X}")
    out = at // 100 * 100 if at % 100 else at - 100  # the largest multiple of 100 strictly below
    assert (timer.properties["TIMER_OUT_MS"], timer.properties["REAL_TOPIC"], timer.properties["REAL_QID"]) == (
        str(out), "T", "2")
    assert _pull(b, "T", 2) == []
    (fired,) = _wait_pull(b, "T", 2, 3.0)
    assert fired.uniq_key == key and fired.store_ts >= out + 100 >= at  # never before its slot's end
    assert fired.store_ts - (out + 100) < 1000
    assert {"TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "REAL_TOPIC", "REAL_QID",
            "TIMER_DELIVER_MS"} <= set(fired.properties)


def test_refusals_carry_rocketmq_code_and_remark(serve) -> None:
    _s, b = _served(serve)
    for bad in (props(TIMER_DELAY_SEC="70"), props(TIMER_DELAY_MS="abc"), props(TIMER_DELIVER_MS="1.5")):
        r = b.call(310, send_ext("T", 0, properties=bad), b"x")
        assert (r.code, r.remark) == (13, ILLEGAL), bad
    r = b.call(310, send_ext("T", 0, properties=props(DELAY="1", TIMER_DELAY_MS="abc")), b"x")
    assert r.code == 0  # the delay level wins: the timer property is dropped, not parsed
    _s, off = _served(serve, attrs.evolve(V5, timer_wheel_enable=False))
    r = off.call(310, send_ext("T", 0, properties=props(TIMER_DELAY_MS="1000")), b"x")
    assert (r.code, r.remark) == (1, NOT_ENABLED)


def test_a_batch_is_timed_by_its_own_properties_never_by_an_item_s(serve) -> None:
    _s, b = _served(serve)
    item = encode_batch([BatchItem(0, b"i", {"UNIQ_KEY": uniq_key(), "TIMER_DELAY_MS": "5000"})])
    r = b.call(320, send_ext("T", 1, properties="", m="true"), item)
    assert r.code == 0
    (stored,) = _pull(b, "T", 1)  # stored at once in its topic (5.3.3 keeps the item's property; we drop it)
    assert "TIMER_OUT_MS" not in stored.properties and "TIMER_DELAY_MS" not in stored.properties
    plain = encode_batch([BatchItem(0, b"h", {"UNIQ_KEY": uniq_key()})])
    r = b.call(320, send_ext("T", 3, properties=props(TIMER_DELAY_MS="5000"), m="true"), plain)
    assert r.code == 0 and _pull(b, "T", 3) == []
    (timer,) = _pull(b, TIMER_TOPIC, 0)
    assert (timer.properties["REAL_TOPIC"], timer.properties["REAL_QID"]) == ("T", "3")
    _s, old = _served(serve, V49)  # 4.9: no hook; the item's timer property is an ordinary user property
    r = old.call(320, send_ext("T", 1, properties="", m="true"), item)
    (kept,) = _pull(old, "T", 1)
    assert r.code == 0 and kept.properties["TIMER_DELAY_MS"] == "5000"


def test_get_broker_config_lists_the_timer_keys_of_a_5x_profile(serve) -> None:
    _s, b = _served(serve)
    text = b.call(26).body.decode()
    assert {"timerWheelEnable=true", "timerPrecisionMs=100", "timerMaxDelaySec=60",
            "timerFlushIntervalMs=1000"} <= set(text.splitlines())
    _s, old = _served(serve, V49)
    assert "timer" not in old.call(26).body.decode()


def test_the_tick_follows_a_fine_timer_wheel() -> None:
    assert tick_period_ms(100, V5) == 10  # TimerDequeueGetService: 100 × precision / 1000 ms
    assert tick_period_ms(100, attrs.evolve(V5, timer_precision_ms=1000)) == 100
    assert tick_period_ms(5, V5) == 5
    assert tick_period_ms(100, attrs.evolve(V5, timer_wheel_enable=False)) == 100
    assert tick_period_ms(100, attrs.evolve(V49, timer_precision_ms=100)) == 100


def test_timer_deliver_ts_is_the_requested_time_after_now() -> None:
    now = 1_000_000
    assert timer_deliver_ts(V5, "T", {"TIMER_DELIVER_MS": "1000500"}, now) == 1_000_500
    assert timer_deliver_ts(V5, "T", {"TIMER_DELAY_SEC": "2"}, now) == 1_002_000
    assert timer_deliver_ts(V5, "T", {"TIMER_DELAY_MS": "300"}, now) == 1_000_300
    for props_ in ({"TIMER_DELAY_MS": "0"}, {"TIMER_DELAY_MS": "x"}, {"TIMER_DELAY_MS": "300", "DELAY": "2"},
                   {"TIMER_DELAY_MS": "300", "TIMER_OUT_MS": "5"}, {"KEYS": "k"}):
        assert timer_deliver_ts(V5, "T", props_, now) is None, props_
    assert timer_deliver_ts(V49, "T", {"TIMER_DELAY_MS": "300"}, now) is None
    assert timer_deliver_ts(attrs.evolve(V5, timer_wheel_enable=False), "T", {"TIMER_DELAY_MS": "300"}, now) is None


def _plain_model(clock: Clock, config: BrokerConfig, workdir: str) -> ModelBroker:
    """A factory without ``recorder``: the server records the wire events itself."""
    return ModelBroker(clock, config)


def _rows(trace_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (trace_dir / "serve-000.jsonl").read_text().splitlines()]


def test_wire_events_of_a_timer_message(serve, tmp_path) -> None:
    s = serve(config=V5, factory=_plain_model, trace=True)
    b = s.client()
    b.call(17, create_topic_ext("T", 4))
    key, plain_key = uniq_key(), uniq_key()
    t0 = _now()
    assert b.call(310, send_ext("T", 2, properties=props(UNIQ_KEY=key, TIMER_DELAY_MS="300")), b"x").code == 0
    t1 = _now()
    assert b.call(310, send_ext("T", 1, properties=props(UNIQ_KEY=plain_key, TIMER_DELAY_MS="-5")), b"x").code == 0
    assert len(_wait_pull(b, "T", 2, 3.0)) == 1 and len(_pull(b, "T", 1)) == 1
    time.sleep(0.1)  # the trace is flushed at every tick
    rows = _rows(tmp_path / "trace0")
    sends = {r["msg_key"]: r for r in rows if r["event"] == "send"}
    assert t0 + 300 <= sends[key]["deliver_ts"] <= t1 + 300  # a lower bound of the broker's due time
    assert (sends[key]["topic"], sends[key]["queue_id"], sends[key]["queue_offset"]) == ("T", 2, 0)
    assert "deliver_ts" not in sends[plain_key]  # due at once: an ordinary send
    delivers = {r["msg_key"]: r for r in rows if r["event"] == "deliver"}
    fired = delivers[key]["detail"]
    assert set(fired) == {"timer_out_ms", "timer_dequeue_ms"} and fired["timer_dequeue_ms"] >= fired["timer_out_ms"]
    assert delivers[key]["ts"] >= sends[key]["deliver_ts"]
    assert "detail" not in delivers[plain_key]
