"""``rmqspec serve``: an empty POP_MESSAGE with ``pollTime`` is held (5.3.3's PopLongPollingService) until a
message can be popped or ``bornTime + pollTime`` passes, against the mmap broker and the model broker.

The 5.x Java push consumer pops with pollTime 15000 and pops again at once after an empty answer: a server
answering every empty pop at once would be asked again and again. Here: a held pop is answered FOUND when a
message is sent to its topic, at its deadline otherwise (then FOUND if a revive made a message poppable
meanwhile: a revive into the v1 retry topic does not wake it under rocketmq-5.2, as in 5.3.3, and wakes it
under rocketmq-5.5, as in 5.5.1; else 210 POLLING_TIMEOUT "NO_MESSAGE_IN_QUEUE"), never at once; pollTime 0
is answered at once; a closed connection's held pop is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from rmqspec.impl import factory as mmap_factory
from rmqspec.model.config import default_config
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.remoting.bodies import decode_messages
from rmqspec.remoting.command import request
from rmqspec.remoting.frame import encode_frame
from tests.remoting.conftest import SHORT_DELAYS, create_topic_ext, send_ext

V5 = attrs.evolve(default_config("rocketmq-5.2"), message_delay_level=SHORT_DELAYS, commitlog_file_size=1 << 20)
V55 = attrs.evolve(default_config("rocketmq-5.5"), message_delay_level=SHORT_DELAYS, commitlog_file_size=1 << 20)
FACTORIES = {"mmap": mmap_factory, "model": model_factory}


@pytest.fixture(params=sorted(FACTORIES))
def factory(request: pytest.FixtureRequest) -> Callable[..., Any]:
    return FACTORIES[request.param]


def _pop_ext(poll_ms: int, invisible_ms: int = 60_000) -> dict[str, str]:
    return {"consumerGroup": "G", "topic": "T", "queueId": "-1", "maxMsgNums": "32",
            "invisibleTime": str(invisible_ms), "pollTime": str(poll_ms), "bornTime": str(int(time.time() * 1000)),
            "initMode": "0"}


def _send_pop(c: Any, poll_ms: int, invisible_ms: int = 60_000) -> int:
    opaque = next(c.opaque)
    c.send_raw(encode_frame(request(200050, _pop_ext(poll_ms, invisible_ms), opaque=opaque)))
    return opaque


def _setup(serve: Any, factory: Callable[..., Any], config: Any = V5) -> tuple[Any, Any]:
    s = serve(config, factory)
    admin = s.client()
    admin.call(17, create_topic_ext("T", 2))
    return s, admin


def test_a_held_pop_is_answered_when_a_message_arrives(serve, factory) -> None:
    s, producer = _setup(serve, factory)
    c = s.client()
    started = time.monotonic()
    opaque = _send_pop(c, 10_000)
    with pytest.raises(TimeoutError):
        c.wait_response(opaque, timeout=0.5)
    producer.call(310, send_ext("T"), b"late")
    r = c.wait_response(opaque, timeout=5)
    assert (r.code, r.remark) == (0, "FOUND") and [m.body for m in decode_messages(r.body)] == [b"late"]
    assert 0.5 < time.monotonic() - started < 5


def test_a_held_pop_expires_with_polling_timeout(serve, factory) -> None:
    s, _ = _setup(serve, factory)
    c = s.client()
    started = time.monotonic()
    r = c.wait_response(_send_pop(c, 600), timeout=5)
    waited = time.monotonic() - started
    assert (r.code, r.remark) == (210, "NO_MESSAGE_IN_QUEUE")
    assert 0.5 < waited < 3
    started = time.monotonic()
    r = c.wait_response(_send_pop(c, 0), timeout=5)
    assert (r.code, r.remark) == (210, "NO_MESSAGE_IN_QUEUE") and time.monotonic() - started < 0.5


@pytest.mark.parametrize(("profile", "lo", "hi"), [("rocketmq-5.2", 4.8, 7), ("rocketmq-5.5", 2.5, 4.5)])
def test_a_revive_wakes_a_held_pop_on_5_5_only(serve, factory, profile: str, lo: float, hi: float) -> None:
    s, producer = _setup(serve, factory, V5 if profile == "rocketmq-5.2" else V55)
    producer.call(310, send_ext("T"), b"again")
    c = s.client()
    r = c.wait_response(_send_pop(c, 0, invisible_ms=1000), timeout=5)
    assert r.code == 0
    started = time.monotonic()
    opaque = _send_pop(c, 5000, invisible_ms=1000)  # held: the message is invisible for 1 s, revived 2 s later
    r = c.wait_response(opaque, timeout=12)
    (m,) = decode_messages(r.body)
    assert r.code == 0 and m.body == b"again" and m.reconsume_times == 1
    # 5.3.3: the revive (into %RETRY%G_T) does not wake the pop of T, re-run at its expiry (5 s);
    # 5.5.1: it does (ORIGIN_GROUP), right after the revive (1 s + 2 s)
    assert lo < time.monotonic() - started < hi


def test_a_closed_connection_s_held_pop_is_dropped(serve, factory) -> None:
    s, producer = _setup(serve, factory)
    c = s.client()
    _send_pop(c, 10_000)
    time.sleep(0.3)
    c.close()
    time.sleep(0.3)
    assert s.on_loop(lambda: len(s.server.ctx.held_pops)) == 0
    producer.call(310, send_ext("T"), b"kept")
    d = s.client()
    r = d.wait_response(_send_pop(d, 0), timeout=5)
    assert r.code == 0 and [m.body for m in decode_messages(r.body)] == [b"kept"]
