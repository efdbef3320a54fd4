"""Seed E6 end to end: the 4.9.8 Java client's CONSUME_FROM_TIMESTAMP against real RocketMQ 4.9.8, as the model
predicts it.

Inside the fixture's namespace, ``tests/interop/timestamp_scenario.py`` sends 12 messages to two queues 250 ms
apart, mirrors them into a ``ModelBroker`` at the broker's store times, and picks ``consumeTimestamp`` (the
second after the fifth message); then ``interop/java/v4/TimestampConsumer.java`` (a broadcasting
``DefaultMQPushConsumer`` of the 4.9.8 client, CONSUME_FROM_TIMESTAMP, a UTC JVM) consumes the topic. The
offsets it consumes per queue must be the model's: from where the model's ``search_offset`` puts the
timestamp (``model/timesearch.py``: the nearer unit, so a queue may start one message before the timestamp)
to the end. ``test_the_java_client_starts_on_serve_where_the_model_says`` runs the same against ``rmqspec
serve`` (its mmap broker on the wall clock) in a namespace of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.interop.realrmq import RealRocketMQ
from tests.interop.served import served_in_namespace

REPO = Path(__file__).resolve().parents[2]


def _run(in_netns: Callable[..., list[str]], topic: str) -> None:
    """``topic`` (and its group ``topic_G``) must be new to this machine: see the serve test."""
    sent = subprocess.run(in_netns(sys.executable, "-m", "tests.interop.timestamp_scenario", topic),
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert sent.returncode == 0, sent.stderr[-3000:]
    plan = json.loads(sent.stdout.strip().splitlines()[-1])
    java = RealRocketMQ("4.9.8").java("TimestampConsumer", "127.0.0.1:9876", f"{topic}_G", topic,
                                      plan["consume_timestamp"], "10000")
    done = subprocess.run(in_netns(*java), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    consumed = json.loads(done.stdout.strip().splitlines()[-1])
    expect = {q: offsets for q, offsets in plan["expect"].items() if offsets}
    assert consumed == expect, f"{plan}: the 4.9.8 client consumed {consumed}"
    assert any(offsets[0] > 0 for offsets in expect.values()), plan  # the timestamp skipped messages


def test_the_java_client_starts_where_the_model_says(realrmq: RealRocketMQ,
                                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    storedir = tmp_path_factory.mktemp("rmq-consume-timestamp")
    try:
        started = realrmq.start(storedir)
        _run(started.in_netns, f"TS{int(time.time()) % 100000}")
    finally:
        realrmq.stop(storedir)


def test_the_java_client_starts_on_serve_where_the_model_says(realrmq: RealRocketMQ,
                                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    netns = f"rmqspec-ts-{os.getpid()}"
    with served_in_namespace(tmp_path_factory.mktemp("serve-consume-timestamp"), netns):
        # a name of its own: a broadcasting client keeps its offsets in a local file under the home directory
        # (LocalFileOffsetStore), which a later run of the same group would start from
        _run(lambda *cmd: ["ip", "netns", "exec", netns, *cmd], f"TSS{int(time.time()) % 100000}")
