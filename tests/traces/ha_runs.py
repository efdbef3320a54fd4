"""Recorded traces of a master/slave pair (issue 43): ``model/ha_pair.HaPair``'s own rows, honest and broken.

``ha_program()`` is a Hypothesis strategy of programs (the role, slave reads, then a list of operations:
sends to the master or the slave, pulls from either, transfers, link cuts and heals, time, metadata syncs,
master kills and disk losses with restarts, slave kills with restarts — the operations of
``tests/model/test_ha.py``'s machine);
``seeded_program(seed)`` draws one from a seeded ``random.Random`` (the Spark batch is built once, outside
Hypothesis); ``ha_pair_trace(program, broken)`` runs it on ``HaPair`` or one of ``tests/ha_brokers.py``'s
broken pairs and returns the rows as checker rows. A refused operation (the slave's put, a pull from a
stopped master) is part of the run. An honest run breaks no HA rule; a broken pair's run may break its rule
(``ha_brokers.CAUGHT_BY``) — the reference checker, the pair's invariants and the Spark audit report alike.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any

from hypothesis import strategies as st

from rmqspec.model.crash import BrokerState
from rmqspec.model.ha import MASTER_ID, SLAVE_ID, BrokerRole, HaConfig
from rmqspec.model.ha_pair import HaPair
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.results import BrokerError

T, G = "TH", "GH"
OPS = ("send", "send", "send", "send", "send_slave", "pull", "pull_slave", "pull_slave", "replicate", "cut", "heal",
       "advance", "partition", "sync", "crash", "crash", "crash_slave", "crash_slave", "crash_slave")
Op = tuple[str, int, Any]
Program = tuple[BrokerRole, bool, list[Op]]


def _arg(op: str, pick: Any) -> Any:
    """The operation's argument from ``pick(choices)``."""
    if op in ("send", "send_slave"):
        return pick(("true", "true", "false"))
    if op in ("pull", "pull_slave"):
        return pick((0, 0, 1, 2, 4))
    if op == "replicate":
        return pick((None, 1, 2))
    if op in ("advance", "partition"):
        return pick((1000, 5000, 20_001))
    if op == "crash":
        return pick((False, True))
    return None


@st.composite
def ha_program(draw: st.DrawFn, max_ops: int = 40) -> Program:
    role = draw(st.sampled_from([BrokerRole.SYNC_MASTER, BrokerRole.ASYNC_MASTER]))
    read = draw(st.booleans())
    ops: list[Op] = []
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(OPS))
        ops.append((op, draw(st.integers(0, 1)), _arg(op, lambda c: draw(st.sampled_from(c)))))
    return role, read, ops


def seeded_program(seed: int, n: int = 40) -> Program:
    rnd = random.Random(seed)
    role = rnd.choice([BrokerRole.SYNC_MASTER, BrokerRole.ASYNC_MASTER])
    ops: list[Op] = []
    for _ in range(n):
        op = rnd.choice(OPS)
        ops.append((op, rnd.randrange(2), _arg(op, rnd.choice)))
    return role, rnd.random() < 0.5, ops


def ha_pair_trace(program: Program, broken: str | None = None) -> list[dict[str, Any]]:
    """The rows the run of ``program`` recorded (``broken``: a name of ``tests/ha_brokers.BROKEN_PAIRS``)."""
    role, read, ops = program
    cfg = HaConfig(broker_role=role, slave_read_enable=read)
    if broken is None:
        pair = HaPair(cfg)
    else:
        from tests.ha_brokers import BROKEN_PAIRS

        pair = BROKEN_PAIRS[broken](cfg)
    pair.create_topic(T, 2)
    pair.create_group(G)
    pair.sync_metadata()
    for op, q, arg in ops:
        with contextlib.suppress(BrokerError):
            _step(pair, op, q, arg)
    return [e.as_row() for e in pair.recorder.events]  # type: ignore[attr-defined]


def _step(p: HaPair, op: str, q: int, arg: Any) -> None:
    if op in ("send", "send_slave"):
        p.send(Message(T, b"m", wait=arg), q, MASTER_ID if op == "send" else SLAVE_ID)
    elif op in ("pull", "pull_slave"):
        p.pull(MASTER_ID if op == "pull" else SLAVE_ID, G, MessageQueue(T, q), arg)
    elif op == "replicate":
        p.replicate(arg)
    elif op == "cut":
        p.cut()
    elif op == "heal":
        p.heal()
    elif op in ("advance", "partition"):
        if op == "partition":
            p.cut()
        p.advance(arg)
    elif op == "sync":
        p.sync_metadata()
    elif op == "crash_slave":
        if p.slave.state is BrokerState.RUNNING:
            p.crash_slave()
        else:
            p.restart_slave()
    elif p.master.state is BrokerState.RUNNING:
        p.crash_master(arg)
    else:
        p.restart_master()
        if p.diverged:
            p.create_topic(T, 2)
