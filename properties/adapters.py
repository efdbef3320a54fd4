"""Broker factories by name: ``package.module:factory`` (or the dotted form).

A factory has the signature ``(clock, config, workdir) -> Broker``. Built-in
names: ``rmqspec.model:factory`` (the ModelBroker) and ``rmqspec.impl:factory``
(the MmapBroker). The current directory is importable, so an adapter file next
to the caller works (``rmqspec conform --broker my_adapter:factory``).

``rocketmq://HOST:PORT`` names a running RocketMQ 4.9 name server (or
``rmqspec serve``): the factory makes a ``rmqspec.remoting.adapter.RemoteBroker``
per call; the name server is asked for the broker at once, so an unreachable
address is a ``FactoryError``. ``crash_cmd`` / ``restart_cmd`` (shell commands)
give it the kill-crash capability; they are refused for other factories.
``rmqspec.remoting`` is imported only then.

``without_capabilities(factory, names)`` makes the factory's brokers stop declaring some capabilities
(``rmqspec conform --without pop``): the machine then leaves out what they gate, e.g. a 5.x broker judged
without its pop consumption when that is missing or known broken.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any


class FactoryError(Exception):
    """The factory cannot be imported or is not callable (one-line reason)."""


def _model_factory() -> Callable[..., Any]:
    from rmqspec.model.model_factory import factory

    return factory


def _impl_factory() -> Callable[..., Any]:
    impl = importlib.import_module("rmqspec.impl")
    factory = getattr(impl, "factory", None)
    if factory is None:
        raise FactoryError("rmqspec.impl has no factory: the installed package is incomplete")
    return factory


BUILTIN: dict[str, Callable[[], Callable[..., Any]]] = {
    "rmqspec.model:factory": _model_factory,
    "rmqspec.impl:factory": _impl_factory,
}


def builtin_names() -> list[str]:
    return sorted(BUILTIN)


REMOTE_SCHEME = "rocketmq://"


def _remote_factory(spec: str, crash_cmd: str | None, restart_cmd: str | None,
                    broker_name: str | None) -> Callable[..., Any]:
    from rmqspec.remoting.adapter import RemoteSetupError, parse_url, remote_factory

    try:
        address = parse_url(spec)
    except ValueError as exc:
        raise FactoryError(f"broker {spec!r} must look like rocketmq://HOST:PORT ({exc})") from None
    try:
        # The machine's consumers pull with their subscription in every request and never register
        # as consumers: %RETRY% topics then appear at the first send-back, as in the model (a
        # consumer heartbeat would make the broker create them at once).
        return remote_factory(address, crash_cmd=crash_cmd, restart_cmd=restart_cmd, heartbeat_consumers=False,
                              broker_name=broker_name)
    except RemoteSetupError as exc:
        raise FactoryError(f"cannot use {spec}: {exc}") from None


def load_factory(spec: str, crash_cmd: str | None = None, restart_cmd: str | None = None,
                 broker_name: str | None = None) -> Callable[..., Any]:
    """Resolve ``package.module:attr``, ``package.module.attr`` or ``rocketmq://HOST:PORT`` to a factory.
    ``broker_name``: which broker of the remote cluster (the ``brokerName`` of ``--config``); without it,
    ``broker-a`` or the only broker registered."""
    spec = spec.strip()
    if spec.startswith(REMOTE_SCHEME):
        return _remote_factory(spec, crash_cmd, restart_cmd, broker_name)
    if crash_cmd or restart_cmd:
        raise FactoryError(f"crash and restart commands apply to a rocketmq://HOST:PORT broker, not {spec!r}")
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
    elif "." in spec:
        module_name, _, attr = spec.rpartition(".")
    else:
        raise FactoryError(f"broker factory {spec!r} must look like package.module:factory")
    if not module_name or not attr:
        raise FactoryError(f"broker factory {spec!r} must look like package.module:factory")
    canonical = f"{module_name}:{attr}"
    if canonical in BUILTIN:
        return BUILTIN[canonical]()
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise FactoryError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise FactoryError(f"module {module_name!r} has no attribute {attr!r}")
    if not callable(factory):
        raise FactoryError(f"{canonical} is not callable")
    return factory


def without_capabilities(factory: Callable[..., Any], names: Iterable[str]) -> Callable[..., Any]:
    """``factory`` whose brokers no longer declare the capabilities named (``Capability`` values)."""
    from rmqspec.model.protocol import Capability

    dropped: set[Capability] = set()
    for name in names:
        try:
            dropped.add(Capability(name.strip()))
        except ValueError:
            known = ", ".join(sorted(c.value for c in Capability))
            raise FactoryError(f"unknown capability {name.strip()!r}: the capabilities are {known}") from None
    if not dropped:
        return factory

    def make(*args: Any, **kwargs: Any) -> Any:
        broker = factory(*args, **kwargs)
        broker.capabilities = frozenset(getattr(broker, "capabilities", frozenset())) - dropped
        return broker

    return make
