"""``rmqspec serve``: a RocketMQ 4.9 name server + broker on 127.0.0.1, for integration tests.

``rmqspec serve --store DIR [--config broker.conf] [--namesrv-port 9876] [--port 10911]
[--host 127.0.0.1] [--trace-out TDIR] [--broker MODULE:FACTORY]`` serves the ``Broker``
the factory builds (default: the mmap broker in DIR) on the wall clock
(``rmqspec.remoting.server``). It prints one line when it serves::

    rmqspec serve: ready namesrv=127.0.0.1:9876 broker=127.0.0.1:10911 store=DIR (0.41 s)

(the seconds since the command started)

and runs until SIGTERM or SIGINT, then stops accepting, closes the broker
(records flushed, consumer offsets and delay progress persisted, ``abort``
removed: ``rmqspec store verify DIR`` accepts the store) and exits 0. Port 0
picks a free port (the ready line names it). Exit 2: unusable arguments, a
port in use, a store that cannot be opened, an unreadable ``--config``.

``--ha-role SYNC_MASTER|ASYNC_MASTER [--slave-port PORT]`` serves a master and its slave instead
(``impl/ha_pair.MmapHaPair``, stores DIR/master and DIR/slave, replicating over a real TCP connection;
``remoting/pair_views.py``): the master on ``--port``, the slave on ``--slave-port`` (default 0, a free
port), both in the route (brokerId 0 and 1); the ready line ends with ``slave=HOST:PORT role=ROLE``;
stop closes both stores. ``--slave-port`` without ``--ha-role``, and ``--ha-role`` with ``--broker`` or
``--trace-out``, are usage errors.

``--config`` is a Java-properties ``broker.conf``, read as a broker of
``--profile`` reads it (``properties.brokerconf``: the keys serve uses, the
rest listed as ignored); ``_serve_config`` below adds the listen address.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from pathlib import Path

import attrs

from rmqspec.cli.common import EXIT_OK, InputError, UsageError
from rmqspec.model.config import BrokerConfig, default_config
from rmqspec.model.ha import BrokerRole
from rmqspec.model.versions import DEFAULT_VERSION, VERSIONS
from rmqspec.properties.adapters import FactoryError, load_factory

NAME = "serve"
HELP = "serve a broker over RocketMQ 4.9's wire protocol (name server + broker on 127.0.0.1)"
DEFAULT_BROKER = "rmqspec.impl:factory"
MASTER_ROLES = tuple(role.value for role in BrokerRole if role.is_master)
_LOADED = time.monotonic()  # cli.main imports every command module first thing: ~ process start


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", required=True, metavar="DIR", help="store directory (created if absent)")
    parser.add_argument("--config", metavar="FILE", default=None, help="broker.conf (Java properties)")
    parser.add_argument("--namesrv-port", type=int, default=9876, metavar="PORT",
                        help="name server port (default 9876; 0 = any free port)")
    parser.add_argument("--port", type=int, default=None, metavar="PORT",
                        help="broker port (default: listenPort of --config, else 10911; 0 = any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--trace-out", default=None, metavar="DIR",
                        help="write the SPEC §8 trace as DIR/serve-NNN.jsonl (audit with rmqspec audit DIR)")
    parser.add_argument("--broker", default=DEFAULT_BROKER, metavar="MODULE:FACTORY",
                        help=f"factory (clock, config, workdir) -> Broker (default {DEFAULT_BROKER})")
    parser.add_argument("--tick-ms", type=int, default=100, metavar="MS",
                        help="period of the background services (default 100)")
    parser.add_argument("--verbose", action="store_true", help="log connections and dropped checks")
    parser.add_argument("--profile", default=DEFAULT_VERSION, choices=sorted(VERSIONS),
                        help="the RocketMQ version to behave as (default rocketmq-4.9; model/versions.py)")
    parser.add_argument("--ha-role", default=None, choices=MASTER_ROLES, metavar="ROLE",
                        help="serve a master (ASYNC_MASTER or SYNC_MASTER) and its slave, replicating: stores "
                             "DIR/master and DIR/slave (default: one broker, no slave)")
    parser.add_argument("--slave-port", type=int, default=None, metavar="PORT",
                        help="the slave's broker port with --ha-role (default 0 = any free port)")


# ----------------------------------------------------------------------------------------------
# broker.conf → BrokerConfig + server settings


@attrs.frozen
class _ServeConf:
    config: BrokerConfig
    broker_name: str = "broker-a"
    cluster: str = "DefaultCluster"
    listen_port: int | None = None
    broker_ip: str | None = None
    others: tuple[tuple[str, str], ...] = ()


def _serve_config(path: str | None, version: str = DEFAULT_VERSION) -> _ServeConf:
    """The broker.conf as a broker of ``version`` reads it (``broker_config_from_file``'s rules);
    InputError names file:line and the reason."""
    if path is None:
        return _ServeConf(default_config(version))
    from rmqspec.properties.brokerconf import ConfigError, broker_config_from_conf, load_broker_conf

    try:
        conf = load_broker_conf(path)
        config = broker_config_from_conf(conf, version)
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    return _ServeConf(
        config=config,
        broker_name=config.broker_name,
        cluster=config.broker_cluster_name,
        listen_port=config.store_port if "listenPort" in conf.sources else None,
        broker_ip=config.store_host if "brokerIP1" in conf.sources else None,
        others=tuple((p.key, p.value) for p in conf.ignored),
    )


# ----------------------------------------------------------------------------------------------


def _ha_role(args: argparse.Namespace) -> BrokerRole | None:
    """``--ha-role`` (None: no pair); the flags a pair cannot take are usage errors."""
    if args.ha_role is None:
        if args.slave_port is not None:
            raise UsageError("--slave-port needs --ha-role (ASYNC_MASTER or SYNC_MASTER)")
        return None
    if args.broker != DEFAULT_BROKER:
        raise UsageError(f"--ha-role serves the mmap pair (impl/ha_pair.py); it cannot serve --broker {args.broker}")
    if args.trace_out is not None:
        raise UsageError("--ha-role: --trace-out is not supported for a served pair yet")
    return BrokerRole(args.ha_role)


def run(args: argparse.Namespace) -> int:
    started = _LOADED
    from rmqspec.remoting.context import ServeSettings
    from rmqspec.remoting.server import RmqServer

    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING,
                        format="rmqspec serve: %(message)s")
    for name in ("namesrv_port", "port", "slave_port"):
        value = getattr(args, name)
        if value is not None and not 0 <= value <= 65535:
            raise UsageError(f"--{name.replace('_', '-')} must be a port number (0-65535), got {value}")
    if args.tick_ms <= 0:
        raise UsageError(f"--tick-ms must be positive, got {args.tick_ms}")
    ha_role = _ha_role(args)
    conf = _serve_config(args.config, args.profile)
    try:
        factory = load_factory(args.broker)
    except FactoryError as exc:
        raise UsageError(str(exc)) from None
    store = Path(args.store)
    if store.exists() and not store.is_dir():
        raise UsageError(f"--store {store}: not a directory")
    port = args.port if args.port is not None else (conf.listen_port if conf.listen_port is not None else 10911)
    broker_ip = conf.broker_ip or (args.host if args.host not in ("0.0.0.0", "::", "") else "127.0.0.1")
    settings = ServeSettings(host=args.host, namesrv_port=args.namesrv_port, port=port, broker_ip=broker_ip,
                             broker_name=conf.broker_name, cluster=conf.cluster, tick_ms=args.tick_ms,
                             store_dir=str(store.resolve()), extra_properties=conf.others,
                             slave_port=None if ha_role is None else args.slave_port or 0)
    server = RmqServer(factory, conf.config, settings, store, trace_dir=args.trace_out, ha_role=ha_role)
    return asyncio.run(_serve(server, started))


async def _serve(server: object, started: float) -> int:
    from rmqspec.impl.configfiles import ConfigFileError
    from rmqspec.impl.mappedfile import StoreError
    from rmqspec.remoting.server import RmqServer

    assert isinstance(server, RmqServer)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start()
    except OSError as exc:
        await server.stop()
        raise UsageError(f"cannot listen on {server.settings.host}: {exc.strerror or exc}") from None
    except (StoreError, ConfigFileError) as exc:
        await server.stop()
        raise InputError(str(exc)) from None
    except Exception as exc:  # a user-supplied factory that fails: one line, no traceback
        await server.stop()
        raise UsageError(f"the broker factory failed: {type(exc).__name__}: {exc}") from None
    where = os.fspath(server.workdir)
    pair = "" if server.ha_role is None else f" slave={server.slave_addr} role={server.ha_role.value}"
    print(f"rmqspec serve: ready namesrv={server.namesrv_addr} broker={server.broker_addr} store={where} "
          f"({time.monotonic() - started:.2f} s){pair}", flush=True)
    await stop.wait()
    await server.stop()
    print("rmqspec serve: stopped (broker closed, offsets persisted)", flush=True)
    return EXIT_OK
