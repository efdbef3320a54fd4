"""Seed E3 end to end: the 4.9.8 Java push consumer with ``MessageSelector.bySql`` and rmqspec's reference push
consumer with ``MessageSelector.by_sql`` consume the same messages from the same real RocketMQ 4.9.8 broker.

Inside the fixture's namespace (``enablePropertyFilter=true``, as ``test_sql92_real.py`` configures it),
``sql92_client_scenario.py send`` stores the messages of ``tests/model/test_sql92_consumer.py`` twice over two
queues; then ``interop/java/v4/SqlConsumer.java`` (clustering DefaultMQPushConsumers of the 4.9.8 client,
CONSUME_FROM_FIRST_OFFSET, one group per expression) and ``sql92_client_scenario.py model`` (the reference
``ConcurrentConsumer`` over ``RemoteBroker``, one group per expression) consume the topic. Per expression both
must have consumed exactly the stored messages the expression selects (``subscription_matches``, the hand-written
table of the model test), each once. ``test_without_property_filter`` starts a broker without
``enablePropertyFilter``: the Java client's ``start()`` throws (CHECK_CLIENT_CONFIG answers SYSTEM_ERROR) and
neither client consumes anything (the model's pulls are refused the same way).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rmqspec.model.pullfilter import subscription_matches
from tests.interop.realrmq import RealRocketMQ
from tests.model.test_sql92_consumer import MESSAGES, SELECTED

REPO = Path(__file__).resolve().parents[2]
WAIT_MS = 10_000
EXPRESSIONS = sorted(SELECTED)


def _scenario(in_netns: Callable[..., list[str]], verb: str, args: dict[str, Any]) -> Any:
    cmd = in_netns(sys.executable, "-m", "tests.interop.sql92_client_scenario", verb, json.dumps(args))
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"scenario {verb} failed ({done.returncode}): {done.stderr[-3000:]}"
    out = json.loads(lines[-1])
    assert "crashed" not in out, out["crashed"]
    return out


def _java(realrmq: RealRocketMQ, in_netns: Callable[..., list[str]], topic: str, groups: dict[str, str]) -> Any:
    pairs = [x for g, e in groups.items() for x in (g, e)]
    cmd = in_netns(*realrmq.java("SqlConsumer", "127.0.0.1:9876", topic, str(WAIT_MS), *pairs))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1])


def _run(realrmq: RealRocketMQ, in_netns: Callable[..., list[str]], topic: str) -> tuple[list[str], dict, dict]:
    messages = [{"tags": tags, "properties": props, "uniq_key": f"7F00000100003E30{k:04X}{i:012X}"}
                for k in range(2) for i, (tags, props) in enumerate(MESSAGES)]
    placed = _scenario(in_netns, "send", {"topic": topic, "messages": messages})["placed"]
    java = _java(realrmq, in_netns, topic, {f"{topic}_J{n}": e for n, e in enumerate(EXPRESSIONS)})
    model = _scenario(in_netns, "model", {"topic": topic, "wait_ms": WAIT_MS,
                                          "groups": {f"{topic}_M{n}": e for n, e in enumerate(EXPRESSIONS)}})
    return placed, java, model


def test_the_java_and_the_model_client_consume_what_the_expression_selects(
        realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> None:
    storedir = tmp_path_factory.mktemp("rmq-sql92-client")
    topic = f"SQLC{int(time.time()) % 100000}"
    try:
        started = realrmq.start(storedir, "enablePropertyFilter=true")
        placed, java, model = _run(realrmq, started.in_netns, topic)
    finally:
        realrmq.stop(storedir)
    n = len(MESSAGES)
    for k, expression in enumerate(EXPRESSIONS):
        expect = sorted(placed[i] for i in range(2 * n)
                        if subscription_matches(expression, "SQL92", MESSAGES[i % n][0], MESSAGES[i % n][1]))
        assert len(expect) == 2 * len(SELECTED[expression])
        got_java, got_model = java[f"{topic}_J{k}"], model[f"{topic}_M{k}"]
        assert got_java["start_error"] is None, got_java
        assert (sorted(got_java["consumed"]), got_model) == (expect, expect), expression


def test_without_property_filter(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> None:
    storedir = tmp_path_factory.mktemp("rmq-sql92-client-off")
    topic = f"SQLD{int(time.time()) % 100000}"
    try:
        started = realrmq.start(storedir)
        _, java, model = _run(realrmq, started.in_netns, topic)
    finally:
        realrmq.stop(storedir)
    for k, _expression in enumerate(EXPRESSIONS):
        got_java, got_model = java[f"{topic}_J{k}"], model[f"{topic}_M{k}"]
        assert got_java["start_error"] == \
            "1 The broker does not support consumer to filter message by SQL92", got_java
        assert (got_java["consumed"], got_model) == ([], [])
