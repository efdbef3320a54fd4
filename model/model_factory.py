"""``factory(clock, config, workdir) -> Broker``: the model broker for registries.

The conformance machine and the scenario tests build brokers through factories
of one signature; the model has no files, so ``workdir`` is ignored.
"""

from __future__ import annotations

from pathlib import Path

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import Clock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import Recorder


def factory(
    clock: Clock,
    config: BrokerConfig | None = None,
    workdir: str | Path | None = None,
    recorder: Recorder | None = None,
) -> ModelBroker:
    """A fresh ``ModelBroker`` (``workdir`` is accepted and ignored)."""
    return ModelBroker(clock, config if config is not None else BrokerConfig(), recorder)
