"""``rmqspec serve`` and the model on one manual clock: the ``Target`` of ``tests/wire_programs.py`` in-process.

``served_pair`` starts ``rmqspec serve`` (``RmqServer`` on ephemeral 127.0.0.1 ports, its loop in a
``ServerThread``) over an MmapBroker with a ``ManualClock`` the test moves, beside a ``ModelBroker`` on the same
clock and configuration, and yields a ``Target``: both brokers, a ``RemoteBroker`` (the project's wire adapter)
and one raw ``RemotingClient`` connection. The served loop's own ticker runs every ``TICK_MS`` of wall time but
reads the manual clock, so between the test's clock moves it changes nothing (a held pull whose deadline
passed is answered at its next round). ``Target.expire`` moves the clock ``EXPIRED_AFTER_MS`` ahead, past the
72 h fileReservedTime and into deleteWhen's hour (the pair starts at ``T0``, 03:00 UTC, an hour before "04"),
and runs one round of both brokers' services: the clean service deletes what it deletes on each.
"""

from __future__ import annotations

import contextlib
import datetime
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from rmqspec.impl import factory as mmap_factory
from rmqspec.model import ManualClock, ModelBroker
from rmqspec.model.config import BrokerConfig
from rmqspec.remoting.adapter import RemoteBroker
from rmqspec.remoting.client import RemotingClient
from rmqspec.remoting.context import ServeSettings
from rmqspec.remoting.server import RmqServer, ServerThread
from tests.wire_programs import TIMEOUT_MS, Target

HOUR = 3_600_000
T0 = int(datetime.datetime(2026, 1, 1, 3, 0, tzinfo=datetime.UTC).timestamp() * 1000)
EXPIRED_AFTER_MS = 72 * HOUR + HOUR + 30_000
TICK_MS = 10


@contextlib.contextmanager
def served_pair(config: BrokerConfig, mutate: Callable[[Any], None] | None = None) -> Iterator[Target]:
    """The pair; ``mutate(broker)``, when given, is applied to the served broker once it runs (a test's
    deliberately broken variant)."""
    clock = ManualClock(T0)
    with tempfile.TemporaryDirectory(prefix="rmqspec-pair-") as root:
        server = RmqServer(mmap_factory, config, ServeSettings(namesrv_port=0, port=0, tick_ms=TICK_MS), root,
                           clock=clock)
        thread = ServerThread(server).start()
        if mutate is not None:
            assert server.ctx is not None
            mutate(server.ctx.broker)
        remote = conn = None
        try:
            remote = RemoteBroker(server.namesrv_addr, clock, config, dispatch_wait_ms=0)
            conn = RemotingClient.connect(server.broker_addr, timeout_ms=TIMEOUT_MS)
            model = ModelBroker(clock, config)

            def expire() -> None:
                clock.advance(EXPIRED_AFTER_MS)
                model.tick()
                thread.call(server.tick)

            yield Target(model, remote, conn, expire)
        finally:
            if conn is not None:
                conn.close()
            if remote is not None:
                remote.close()
            thread.stop()
