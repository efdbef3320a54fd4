"""The conformance state machine (SPEC §7): any ``Broker`` against the invariants.

Theory of operation
-------------------
``conformance_machine(broker_factory)`` returns a Hypothesis
``RuleBasedStateMachine`` class. Each example builds a fresh ``ManualClock``
(start 2023-11-14, so UNIQ_KEYs look real), the default ``BrokerConfig``
(delays are never shortened; large clock jumps make them reachable) and an
empty temporary ``workdir``, and calls ``broker_factory(clock, config,
workdir)``. In lockstep mode a ``ModelBroker`` on the same clock and config
runs beside it (``properties/lockstep.py``): every broker call goes to both and
every observable result is compared.

Who acts: the machine plays producers (``P0``, transactional ``PG``), the
reference concurrent consumer (groups ``G0``…, one ``ProcessQueue`` per
queue, RocketMQ's commit rule), a broadcasting group (``GB``, clients ``b1``
and ``b2``, each with its own offsets), the orderly consumer (group ``OG``, clients
``c1``–``c3`` with client-side lock lifetimes) and a private observer group
that *reveals* every known queue after each step so that where copies land,
and when they become visible, are observations (``properties/history.py``).

The machine is one class assembled from mixins, one concern each:

- ``conform_base.py`` — ``MachineCore``: state, bookkeeping (``Txn``, ``Window``,
  ``GroupState``), plumbing (``_record``, ``_call``, ``_fail``), set-up and ``init``;
- ``conform_messaging.py`` — ``MessagingRules``: producers, the concurrent consumer (pull,
  consume, send-back, commit), probes; the ``produce`` and ``consumer`` rules;
- ``conform_orderly.py`` — ``OrderlyRules``: the orderly consumer (locks, batches, SUSPEND,
  DLQ); the ``orderly`` rule;
- ``conform_txn.py`` — ``TxnRules``: halves, ends, duplicate commits, check answers;
- ``conform_time.py`` — ``TimeRules``: clock advances (the ``advance`` rule), deadlines, flush,
  crash and recovery;
- ``conform_wall.py`` — ``WallRules``: the wall-clock mode's synchronisation with a broker on
  its own clock;
- ``conform_observer.py`` — ``ObserverRules``: reveals, expected fires, the invariants, the
  drain, the teardown;
- ``conform_timer.py`` — ``TimerRules``: 5.x timer messages (sends on a precision's edges, the
  wheel's copies and fires observed, the timer ladder);
- ``conform_broadcast.py`` — ``BroadcastRules``: a broadcasting group's two clients, each pulling
  from its own offsets (the ``broadcast`` action);
- ``conform_timeout.py`` — ``TimeoutRules``: a listener that outlives consumeTimeout, the client's
  cleanExpiredMsg and its send-back (the ``consume_timeout`` action);
- ``edges.py`` — ``EdgeRules``: parameter probes, message families, lock probes, deadline walks
  (issue 41; the drawn parameter domains are ``domains.py``);
- ``composite.py`` — ``DeepRules``: clean restarts, ladders, the beat, the prelude, swarm
  families, depth targets;
- ``filters.py`` — ``FilterRules``: user properties, SQL92 pulls, an inconsistent group;
- ``conform_store.py`` — ``StoreProbeRules``: the candidate's store read back by the pristine
  RocketMQ reader after every clean shutdown, reopen and crash recovery (``store_probe.py``).

Hypothesis collects the rules of the assembled class by name (``inspect.getmembers``) and orders
them by number of arguments, then name: which mixin holds a rule does not change the draws.

Rules (SPEC §7): create topics/groups; send plain/keyed/delayed/batch/timer; pull
(incl. beyond the end: OFFSET_ILLEGAL) and consume with SUCCESS,
RECONSUME_LATER, exception or a partial ackIndex; send-back failures; the
observer's tag-filtered probe pull; orderly lock/renew/unlock/rebalance,
begin/finish (SUCCESS or SUSPEND, DLQ at the limit); half send, commit,
rollback, UNKNOWN, lost end-transaction, duplicate commit (not in ``strict``),
check replies; clock advance (small, large, and to a deadline ± 1 ms / 1 s)
+ tick; flush; crash (kill/power) + recover when the broker has
``Capability.CRASH`` (not in ``strict``); drain; the edge probes of ``edges.py``. The deep rules
of ``composite.py`` add to them. ``always`` invariants run after every step (``@invariant``),
``eventually`` ones after a drain; the teardown drains.

Deviations from a real deployment: clients and broker share one clock (no
drift); an orderly window outlives the client's broker lock only in the orderly
ladder's long listener (``composite._long_listener``: 4.9's lawful takeover inside a
running batch); elsewhere the machine clamps clock jumps while a window is open, which
is the SPEC §4.5 premise "client lifetime + latency < broker lifetime"; a broker crash
restarts the clients too (process queues and client locks are dropped).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs

from rmqspec.model.config import BrokerConfig
from rmqspec.model.selectors import Selector, by_hash
from rmqspec.model.versions import VERSIONS
from rmqspec.properties.composite import DeepRules
from rmqspec.properties.conform_base import PROFILES as PROFILES
from rmqspec.properties.conform_base import GroupState as GroupState
from rmqspec.properties.conform_base import MachineCore
from rmqspec.properties.conform_base import MachineFailure as MachineFailure
from rmqspec.properties.conform_base import Profile as Profile
from rmqspec.properties.conform_base import Txn as Txn
from rmqspec.properties.conform_base import Window as Window
from rmqspec.properties.conform_broadcast import BroadcastRules
from rmqspec.properties.conform_messaging import MessagingRules
from rmqspec.properties.conform_observer import ObserverRules
from rmqspec.properties.conform_orderly import CLIENT_4_9_8, OrderlyClient, OrderlyRules
from rmqspec.properties.conform_pop import PopRules
from rmqspec.properties.conform_retention import RetentionRules
from rmqspec.properties.conform_store import StoreProbeRules
from rmqspec.properties.conform_time import TimeRules
from rmqspec.properties.conform_timeout import TimeoutRules, clean_timeout_ms
from rmqspec.properties.conform_timer import TimerRules
from rmqspec.properties.conform_txn import TxnRules
from rmqspec.properties.conform_wall import WallRules
from rmqspec.properties.edges import EdgeRules
from rmqspec.properties.filters import FilterRules
from rmqspec.properties.oracles import OracleRules
from rmqspec.properties.wallclock import WallLateness, WallOptions


class ConformanceBase(DeepRules, FilterRules, EdgeRules, TimerRules, BroadcastRules, TimeoutRules, MessagingRules,
                      OrderlyRules, PopRules,
                      TxnRules, TimeRules, RetentionRules, WallRules, ObserverRules, StoreProbeRules, OracleRules,
                      MachineCore):
    """Rules and state; ``conformance_machine`` binds the factory, mode and profile."""


def conformance_machine(
    broker_factory: Callable[..., Any],
    *,
    lockstep: bool = True,
    profile: str = "rocketmq-4.9",
    recorder_factory: Callable[[], Any] | None = None,
    model_factory: Callable[..., Any] | None = None,
    config: BrokerConfig | None = None,
    wall: WallOptions | None = None,
    key_selector: Callable[[], Selector] = lambda: by_hash,
    orderly_client: OrderlyClient = CLIENT_4_9_8,
    clean_timeout: Callable[[int], int] = clean_timeout_ms,
) -> type[ConformanceBase]:
    """A ``RuleBasedStateMachine`` class driving ``broker_factory(clock, config, workdir)``.

    ``lockstep``: compare every result with a ``ModelBroker`` on the same clock.
    ``profile``: a RocketMQ version profile (``rocketmq-4.9``, ``rocketmq-5.0``,
    ``rocketmq-5.1``, ``rocketmq-5.2``, ``rocketmq-5.5``: the broker and the model behave as that
    version) or ``strict``
    (4.9, observations fail).
    ``recorder_factory``: called once per example; receives the SPEC §8 trace.
    ``config``: the broker configuration the model follows (default RocketMQ 4.9's).
    ``wall``: run on the wall clock against a broker with its own clock (``wallclock.py``).
    ``key_selector``: makes the ordered sends' MessageQueueSelector, once per example
    (``model/selectors.py``; SelectMessageQueueByHash by default: a test's broken client gives another).
    ``orderly_client``: the orderly consumer the machine plays (``conform_orderly.OrderlyClient``; 4.9.8's
    by default; ``OrderlyClient(local_queue_lock=False)``: a test's broken client without the
    MessageQueueLock, which starts a second batch inside its own long listener's window).
    ``clean_timeout``: the concurrent client's clean task's period and threshold in ms from consumeTimeout's
    minutes (``conform_timeout.py``; 4.9.8's ``minutes × 60 000`` by default: a test's broken client gives
    another, e.g. the minutes read as seconds).
    The class carries ``coverage`` (rule and outcome counts across examples),
    ``observations``, ``last_program`` and ``last_failure``.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {sorted(PROFILES)}")
    version = PROFILES[profile].version
    if config is not None and config.version != version:
        config = attrs.evolve(config, version=version)
    attrs_: dict[str, Any] = {
        "broker_factory": staticmethod(broker_factory),
        "model_factory": staticmethod(model_factory) if model_factory else None,
        "lockstep_mode": lockstep,
        "profile": PROFILES[profile],
        "recorder_factory": staticmethod(recorder_factory) if recorder_factory else None,
        "coverage": Counter(),
        "observations": Counter(),
        "examples": [],
        "last_program": [],
        "last_failure": [],
        "failed_program": [],
        "first_failure": [],
        "last_change": [0],
        "pop_applies": [False],
        "check_lag": [max(wall.check_lag_ms, VERSIONS[version].check_sleep_ms) if wall else 0],
        "failures": {},
        "lifecycle": Counter(),
        "rules_run": Counter(),
        "base_config": config,
        "wall": wall,
        "lateness": WallLateness(wall.tolerance_ms) if wall else None,
        "key_selector_factory": staticmethod(key_selector),
        "orderly_client": orderly_client,
        "clean_timeout_ms": staticmethod(clean_timeout),
    }
    return type("ConformanceMachine", (ConformanceBase,), attrs_)
