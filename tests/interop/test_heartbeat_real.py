"""Subscription consistency on real RocketMQ 4.9.8 (``enablePropertyFilter=true``) against the model.

Two clients of one consumer group heartbeat different subscriptions for a topic (TAG/TAG, TAG/SQL92,
SQL92/SQL92, SQL92/TAG, and a SQL92 that does not compile) and pull their queues WITHOUT the subscription
flag, as a 4.9.8 push consumer does by default (``tests/heartbeat_groups.py``; run through the wire
adapter inside the fixture's namespace, one connection per client). The real broker's answers — which
subscription filtered each client's queues (delivered offsets, next offset), what each client keeps after
its own tag re-check, and the refusals (SUBSCRIPTION_NOT_LATEST, SUBSCRIPTION_NOT_EXIST, FILTER_DATA_NOT_EXIST,
with remarks) — must equal ``ModelBroker``'s and ``MmapBroker``'s, step for step. A last scenario pulls the
two broker tables apart (``run_stale_filter``): a dead filter data still filters.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmqspec.impl.broker import MmapBroker
from rmqspec.model import BrokerConfig, ManualClock, ModelBroker
from tests.heartbeat_groups import CASES, STALE_FILTER, run, run_stale_filter
from tests.interop.realrmq import RealRocketMQ

REPO = Path(__file__).resolve().parents[2]
CONFIG = BrokerConfig(enable_property_filter=True)


@pytest.fixture(scope="module")
def real_observations(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    storedir = tmp_path_factory.mktemp("rmq-heartbeat")
    try:
        started = realrmq.start(storedir, "enablePropertyFilter=true")
        args = {"cases": [*sorted(CASES), STALE_FILTER], "prefix": f"HB{int(time.time()) % 100000}"}
        cmd = started.in_netns(sys.executable, "-m", "tests.heartbeat_groups", json.dumps(args))
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
        lines = done.stdout.strip().splitlines()
        assert done.returncode == 0 and lines, f"scenario failed ({done.returncode}): {done.stderr[-3000:]}"
        obs = json.loads(lines[-1])
        assert "crashed" not in obs, obs["crashed"]
        yield {"prefix": args["prefix"], "cases": obs}
    finally:
        realrmq.stop(storedir)


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_broker_filters_a_group_as_the_model_does(real_observations: dict, name: str,
                                                        tmp_path: Path) -> None:
    real = real_observations["cases"][name]
    suffix = name.replace("-", "_")
    topic, group = f"{real_observations['prefix']}_{suffix}", f"{real_observations['prefix']}_G_{suffix}"
    model = run(ModelBroker(ManualClock(1_700_000_000_000), CONFIG), name, topic, group)
    mmap = run(MmapBroker.open(tmp_path, ManualClock(1_700_000_000_000), CONFIG), name, topic, group)
    assert real == model, json.dumps({"real": real, "model": model}, indent=1)
    assert mmap == model


def test_real_broker_filters_with_its_filter_data_not_the_subscription_string(real_observations: dict) -> None:
    """ConsumerFilterManager apart from ConsumerGroupInfo: a dead, newer filter data outlives the topic's
    removal and still filters after an older SQL92 subscription re-adds the topic (model/subscriptions.py)."""
    real = real_observations["cases"][STALE_FILTER]
    prefix = real_observations["prefix"]
    model = run_stale_filter(ModelBroker(ManualClock(1_700_000_000_000), CONFIG), f"{prefix}_stale_filter",
                             f"{prefix}_G_stale_filter")
    assert real == model, json.dumps({"real": real, "model": model}, indent=1)
    assert real[2]["offsets"] == real[0]["offsets"]  # still the first (BJ) expression
