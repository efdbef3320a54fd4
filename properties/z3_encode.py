"""The lifecycle tables of ``rmqspec.model.lifecycle`` as z3 transition relations.

Theory of operation
-------------------
A lifecycle's state is ``(pc, vars)``: ``pc`` is the index of the table state
(an ``Int`` in ``[0, len(states))``), ``vars`` one z3 ``Int`` per field of the
lifecycle's frozen variables record. The relation ``Step(pre, args, post)`` is
generated from the table: **one disjunct per ``Transition`` row**::

    pre.pc = source ∧ act = action ∧ guard(pre.vars, args)
      ∧ post.pc = target ∧ post.vars = effect(pre.vars, args)   (other vars framed)

Each named guard and effect has a **z3 twin** — written by hand next to the
decision function it mirrors (``z_route_send_back`` ↔ ``route_send_back``, …)
and kept in one ``Twins`` record per lifecycle (``MESSAGE_TWINS``,
``LOCK_TWINS``, ``TRANSACTION_TWINS``, ``POP_TWINS``). Building an ``Encoding`` whose table
names a guard or effect without a twin raises ``MissingTwin``: a new row cannot
be added to the Python table and silently ignored by the proofs. The
Hypothesis agreement test (``tests/properties/test_z3_agreement.py``) runs
``Lifecycle.step`` and ``successor`` on the same concrete states so twin and
original cannot drift.

On top of the table each ``Encoding`` declares what only the proofs read:

- **ghosts** (kafka-tlaplus style, fenced off in ``Sym.g``): the time of the
  last action ``t`` (every lifecycle) and per-lifecycle history such as the
  number of deliveries or an observer client's last grant. Ghost updates are
  per *action* and *observational* (they read pre/post state and arguments,
  never which row fired), so a mutated table row is judged by what it does;
- **parameters**: the variables no effect writes (``m``, ``max_level``,
  ``max_live``, ``check_max``, …) start *symbolic*, constrained only by their
  domain (``m ≥ 0``, ``max_level ≥ 1``, ``max_live > 0``, ``check_max ≥ 1``,
  timeouts ``≥ 0``), so every theorem holds for all configurations;
- **environment** assumptions on each step: the clock is monotone
  (``now ≥ t``), client numbers are ``≥ 0``, and the caller's contract for the
  message ``send_back`` argument ``delay = D(routed level)`` where ``D`` is
  the delay table, an uninterpreted function with ``D(i) > 0`` on ``1..L``.

Every action carries a ``now`` argument in z3 (the time it happens) even when
the Python guard ignores it; the Python side accepts and ignores it too.

Deviations: the state is a single lifecycle instance (one message × group, one
(group, mq) lock entry with one symbolic observer client, one half message, one message popped
by one group);
the model's simplifications (see ``lifecycle.py``) carry over.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import z3

from rmqspec.model import lifecycle as lc
from rmqspec.model.lifecycle import Lifecycle

ZVars = Mapping[str, z3.ArithRef]
GuardTwin = Callable[[ZVars, ZVars], z3.BoolRef]
EffectTwin = Callable[[ZVars, ZVars], Mapping[str, z3.ArithRef]]


class MissingTwin(Exception):
    """A table row names a guard or effect that has no z3 twin (or no Python function)."""


# ---------------------------------------------------------------------------
# z3 twins of the decision functions (one per function in lifecycle.py)


def z_route_send_back(
    r: z3.ArithRef, m: z3.ArithRef, level: z3.ArithRef, max_level: z3.ArithRef
) -> tuple[z3.BoolRef, z3.ArithRef]:
    """Twin of ``route_send_back``: (is DLQ, routed level after clamping)."""
    dlq = z3.Or(r >= m, level < 0)
    chosen = z3.If(level == 0, 3 + r, level)
    return dlq, z3.If(chosen < max_level, chosen, max_level)


def z_is_due(deliver_ts: z3.ArithRef, now: z3.ArithRef) -> z3.BoolRef:
    """Twin of ``is_due``: ``deliver_ts <= now``."""
    return deliver_ts <= now


def z_lock_expired(last_update: z3.ArithRef, now: z3.ArithRef, max_live: z3.ArithRef) -> z3.BoolRef:
    """Twin of ``lock_expired``: ``now - last_update > max_live``."""
    return now - last_update > max_live


def z_check_decision(
    check_times: z3.ArithRef,
    born: z3.ArithRef,
    now: z3.ArithRef,
    *,
    check_max: z3.ArithRef,
    immunity: z3.ArithRef,
    reserved: z3.ArithRef,
) -> dict[str, z3.BoolRef]:
    """Twin of ``check_decision``: one exclusive Bool per outcome (CHECK / SKIP_YOUNG / DISCARD)."""
    discard = z3.Or(check_times >= check_max, now - born > reserved)
    age = now - born
    young = z3.And(z3.Not(discard), age >= 0, age < immunity)
    return {
        lc.DISCARD: discard,
        lc.SKIP_YOUNG: young,
        lc.CHECK: z3.And(z3.Not(discard), z3.Not(young)),
    }


# ---------------------------------------------------------------------------
# Twins per lifecycle (keep each dict complete: a missing twin is an error)


@attrs.frozen
class Twins:
    guards: Mapping[str, GuardTwin]
    effects: Mapping[str, EffectTwin]


def _msg_dlq(v: ZVars, a: ZVars) -> z3.BoolRef:
    return z_route_send_back(v["r"], v["m"], a["level"], v["max_level"])[0]


MESSAGE_TWINS = Twins(
    guards={
        "retry": lambda v, a: z3.Not(_msg_dlq(v, a)),
        "dlq": _msg_dlq,
        "due": lambda v, a: z_is_due(v["deliver_ts"], a["now"]),
    },
    effects={
        "retry": lambda v, a: {"r": v["r"] + 1, "deliver_ts": a["now"] + a["delay"]},
        "dead": lambda v, a: {"r": v["r"] + 1},
    },
)


def _lock_grant(v: ZVars, a: ZVars) -> z3.BoolRef:
    return z3.Or(
        v["holder"] == a["client"], z_lock_expired(v["last_update"], a["now"], v["max_live"])
    )


LOCK_TWINS = Twins(
    guards={
        "grant": _lock_grant,
        "deny": lambda v, a: z3.Not(_lock_grant(v, a)),
        "holder": lambda v, a: v["holder"] == a["client"],
        "not_holder": lambda v, a: v["holder"] != a["client"],
    },
    effects={
        "take": lambda v, a: {"holder": a["client"], "last_update": a["now"]},
        "release": lambda v, a: {"holder": z3.IntVal(-1)},
    },
)


def _txn(v: ZVars, a: ZVars) -> dict[str, z3.BoolRef]:
    return z_check_decision(
        v["checks"],
        v["born"],
        a["now"],
        check_max=v["check_max"],
        immunity=v["immunity"],
        reserved=v["reserved"],
    )


TRANSACTION_TWINS = Twins(
    guards={
        "check": lambda v, a: _txn(v, a)[lc.CHECK],
        "young": lambda v, a: _txn(v, a)[lc.SKIP_YOUNG],
        "discard": lambda v, a: _txn(v, a)[lc.DISCARD],
    },
    effects={"checked": lambda v, a: {"checks": v["checks"] + 1}},
)


def z_pop_expired(pop_ts: z3.ArithRef, inv: z3.ArithRef, now: z3.ArithRef) -> z3.BoolRef:
    """Twin of ``pop_expired``: ``now >= pop_ts + inv``."""
    return now >= pop_ts + inv


POP_TWINS = Twins(
    guards={
        "current": lambda v, a: a["handle"] == v["h"],
        "stale": lambda v, a: a["handle"] != v["h"],
        "expired": lambda v, a: z_pop_expired(v["pop_ts"], v["inv"], a["now"]),
    },
    effects={
        "handle": lambda v, a: {"pop_ts": a["now"], "inv": a["invisible"], "h": v["h"] + 1},
        "revived": lambda v, a: {"r": v["r"] + 1},
    },
)


def z_pop_order_blocked(att: z3.ArithRef, pop_ts: z3.ArithRef, inv: z3.ArithRef, now: z3.ArithRef,
                        attempt: z3.ArithRef) -> z3.BoolRef:
    """Twin of ``pop_order_blocked``."""
    return z3.And(attempt != att, z3.Not(z_pop_expired(pop_ts, inv, now)))


POP_ORDER_TWINS = Twins(
    guards={
        "free": lambda v, a: z3.Not(z_pop_order_blocked(v["att"], v["pop_ts"], v["inv"], a["now"], a["attempt"])),
        "part": lambda v, a: z3.And(a["count"] >= 1, a["count"] < v["n"]),
        "whole": lambda v, a: a["count"] == v["n"],
    },
    effects={
        "batch": lambda v, a: {"n": a["batch"], "pop_ts": a["now"], "inv": a["invisible"], "att": a["attempt"]},
        "commit": lambda v, a: {"off": v["off"] + a["count"], "n": v["n"] - a["count"]},
    },
)


# ---------------------------------------------------------------------------
# Symbolic states


@attrs.frozen
class Sym:
    """One symbolic state: ``pc``, the table variables ``v`` and the ghosts ``g``."""

    states: tuple[str, ...]
    pc: z3.ArithRef
    v: Mapping[str, z3.ArithRef]
    g: Mapping[str, z3.ExprRef]
    fn: Mapping[str, z3.FuncDeclRef]

    def at(self, *names: str) -> z3.BoolRef:
        return z3.Or([self.pc == self.states.index(n) for n in names])


@attrs.frozen
class Act:
    """One symbolic action: its index ``act`` and its arguments."""

    actions: tuple[str, ...]
    act: z3.ArithRef
    a: Mapping[str, z3.ArithRef]

    def is_(self, *names: str) -> z3.BoolRef:
        return z3.Or([self.act == self.actions.index(n) for n in names if n in self.actions])


GhostUpdate = Callable[[Sym, Act, Sym], Mapping[str, z3.ExprRef]]


# The delay table: level -> ms, positive on 1..max_level (an uninterpreted function).
DELAY_OF_LEVEL = z3.Function("delay_of_level", z3.IntSort(), z3.IntSort())


@attrs.frozen
class Encoding:
    """A lifecycle table plus what the proofs need; validated on construction."""

    lifecycle: Lifecycle
    vars_cls: type
    args: tuple[str, ...]
    twins: Twins
    params: tuple[str, ...]  # vars that start symbolic (constrained by ``domain``)
    domain: Callable[[Sym], z3.BoolRef]  # parameter domain, holds in every reachable state
    ghost_sorts: Mapping[str, str]  # name -> "int" | "bool"
    ghost_init: Callable[[Sym], z3.BoolRef]
    ghost_update: GhostUpdate
    env: Callable[[Sym, Act], z3.BoolRef]  # assumptions on each step
    fn: Mapping[str, z3.FuncDeclRef] = attrs.field(factory=dict)
    # The arguments each action's Python guards/effects read (for display;
    # every action still carries all of ``args`` in z3).
    action_args: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        table = self.lifecycle
        for row in table.transitions:
            for kind, name, py, twins in (
                ("guard", row.guard, table.guards, self.twins.guards),
                ("effect", row.effect, table.effects, self.twins.effects),
            ):
                if not name:
                    continue
                if name not in twins:
                    raise MissingTwin(
                        f"{table.name}: {kind} {name!r} of row {row.source} --{row.action}--> "
                        f"{row.target} has no z3 twin"
                    )
                if name not in py:
                    raise MissingTwin(f"{table.name}: {kind} {name!r} has no Python function")
            for s in (row.source, row.target):
                if s not in table.states:
                    raise MissingTwin(f"{table.name}: row names unknown state {s!r}")
        clash = sorted(set(self.args) & set(self.var_names))
        if clash:  # z3 names an action's args and a state's vars alike: they would be one symbol
            raise MissingTwin(f"{table.name}: args {clash} share a name with the table's vars")
        if "t" not in self.ghost_sorts or "now" not in self.args:
            raise MissingTwin(f"{table.name}: every encoding needs the ghost clock t and arg now")

    @property
    def name(self) -> str:
        return self.lifecycle.name

    @property
    def var_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in attrs.fields(self.vars_cls))

    @property
    def actions(self) -> tuple[str, ...]:
        return self.lifecycle.actions()

    def args_of(self, action: str) -> tuple[str, ...]:
        """The arguments shown for ``action`` (``now`` unless declared otherwise)."""
        return self.action_args.get(action, ("now",))

    # -- symbols ------------------------------------------------------------

    def sym(self, tag: str) -> Sym:
        n = self.name
        ghosts: dict[str, z3.ExprRef] = {}
        for g, sort in self.ghost_sorts.items():
            ghosts[g] = z3.Bool(f"{n}.{g}@{tag}") if sort == "bool" else z3.Int(f"{n}.{g}@{tag}")
        return Sym(
            states=self.lifecycle.states,
            pc=z3.Int(f"{n}.pc@{tag}"),
            v={x: z3.Int(f"{n}.{x}@{tag}") for x in self.var_names},
            g=ghosts,
            fn=self.fn,
        )

    def act(self, tag: str) -> Act:
        n = self.name
        return Act(
            actions=self.actions,
            act=z3.Int(f"{n}.act@{tag}"),
            a={x: z3.Int(f"{n}.{x}@{tag}") for x in self.args},
        )

    # -- formulas -----------------------------------------------------------

    def well_sorted(self, s: Sym) -> z3.BoolRef:
        return z3.And(s.pc >= 0, s.pc < len(self.lifecycle.states), self.domain(s))

    def init(self, s: Sym) -> z3.BoolRef:
        """The initial state: the table's initial state, the vars record's defaults
        except the symbolic parameters, and the ghosts' initial values."""
        defaults = self.vars_cls()
        fixed = [s.v[x] == getattr(defaults, x) for x in self.var_names if x not in self.params]
        return z3.And(
            s.pc == self.lifecycle.states.index(self.lifecycle.initial),
            *fixed,
            self.well_sorted(s),
            self.ghost_init(s),
        )

    def row(self, index: int, pre: Sym, act: Act, post: Sym) -> z3.BoolRef:
        """The disjunct of table row ``index``."""
        t = self.lifecycle.transitions[index]
        states = self.lifecycle.states
        guard = self.twins.guards[t.guard](pre.v, act.a) if t.guard else z3.BoolVal(True)
        changed = dict(self.twins.effects[t.effect](pre.v, act.a)) if t.effect else {}
        unknown = set(changed) - set(self.var_names)
        if unknown:
            raise MissingTwin(
                f"{self.name}: effect {t.effect!r} writes unknown vars {sorted(unknown)}"
            )
        return z3.And(
            pre.pc == states.index(t.source),
            act.act == self.actions.index(t.action),
            guard,
            post.pc == states.index(t.target),
            *[post.v[x] == changed.get(x, pre.v[x]) for x in self.var_names],
        )

    def relation(self, pre: Sym, act: Act, post: Sym) -> z3.BoolRef:
        """The table's transition relation: one disjunct per row (no ghosts, no environment)."""
        rows = [self.row(i, pre, act, post) for i in range(len(self.lifecycle.transitions))]
        return z3.Or(rows)

    def step(self, pre: Sym, act: Act, post: Sym) -> z3.BoolRef:
        """Relation ∧ environment ∧ ghost updates: one step of a proof's system."""
        updates = dict(self.ghost_update(pre, act, post))
        updates.setdefault("t", act.a["now"])
        missing = set(self.ghost_sorts) - set(updates)
        if missing:
            raise MissingTwin(f"{self.name}: ghost update misses {sorted(missing)}")
        return z3.And(
            self.relation(pre, act, post),
            self.env(pre, act),
            *[post.g[g] == updates[g] for g in self.ghost_sorts],
        )

    # -- concrete evaluation ------------------------------------------------

    def successor(
        self, state: str, vars_: Any, action: str, args: Mapping[str, int]
    ) -> list[tuple[str, dict[str, int]]]:
        """All successors z3 allows for a concrete state and action (``[]`` = refused).

        Substitutes the concrete values into the relation and enumerates the
        models (the relation is deterministic when the guards are exclusive,
        so this normally returns at most one)."""
        pre, post, act = self.sym("c0"), self.sym("c1"), self.act("c")
        solver = z3.Solver()
        solver.add(pre.pc == self.lifecycle.states.index(state))
        solver.add(*[pre.v[x] == getattr(vars_, x) for x in self.var_names])
        if action not in self.actions:
            return []
        solver.add(act.act == self.actions.index(action))
        solver.add(*[act.a[x] == int(args.get(x, 0)) for x in self.args])
        solver.add(self.relation(pre, act, post))
        found: list[tuple[str, dict[str, int]]] = []
        while len(found) < 3 and solver.check() == z3.sat:
            model = solver.model()
            pc = model.eval(post.pc, model_completion=True).as_long()
            values = {
                x: model.eval(post.v[x], model_completion=True).as_long() for x in self.var_names
            }
            found.append((self.lifecycle.states[pc], values))
            solver.add(z3.Or(post.pc != pc, *[post.v[x] != values[x] for x in self.var_names]))
        return found


# ---------------------------------------------------------------------------
# The encodings


def _message_ghosts(pre: Sym, act: Act, post: Sym) -> dict[str, z3.ExprRef]:
    g, a, now = pre.g, act.a, act.a["now"]
    send_back = act.is_("send_back")
    retried_now = z3.And(send_back, post.at("SCHEDULED"))
    dead_now = z3.And(send_back, post.at("DEAD"))
    deliver = act.is_("deliver")
    fire = z3.And(act.is_("fire"), pre.at("SCHEDULED"), post.at("STORED"))
    dlq_routed, level = z_route_send_back(pre.v["r"], pre.v["m"], a["level"], pre.v["max_level"])
    # a copy the routing sends to the DLQ that is not dead at once, or a copy a fire makes dead
    late_dlq = z3.Or(z3.And(send_back, dlq_routed, z3.Not(post.at("DEAD"))), z3.And(act.is_("fire"), post.at("DEAD")))
    return {
        "dlq_late": z3.Or(g["dlq_late"], late_dlq),
        "d": z3.If(deliver, g["d"] + 1, g["d"]),
        "lr": z3.If(act.is_("send_back_failed"), g["lr"] + 1, g["lr"]),
        "neg": z3.If(dead_now, a["level"] < 0, g["neg"]),
        "retried": z3.Or(g["retried"], retried_now),
        "sb_ts": z3.If(retried_now, now, g["sb_ts"]),
        "sb_lvl": z3.If(retried_now, level, g["sb_lvl"]),
        "fire_ts": z3.If(fire, now, g["fire_ts"]),
        "dl_ts": z3.If(deliver, now, g["dl_ts"]),
    }


def _message_env(pre: Sym, act: Act) -> z3.BoolRef:
    d = pre.fn["D"]
    _, level = z_route_send_back(pre.v["r"], pre.v["m"], act.a["level"], pre.v["max_level"])
    return z3.And(
        act.a["now"] >= pre.g["t"],
        z3.Implies(act.is_("send_back"), act.a["delay"] == d(level)),
        z3.Implies(z3.And(level >= 1, level <= pre.v["max_level"]), d(level) > 0),
    )


MESSAGE_ENC = Encoding(
    lifecycle=lc.MESSAGE,
    vars_cls=lc.MessageVars,
    args=("level", "now", "delay"),
    twins=MESSAGE_TWINS,
    params=("m", "max_level"),
    domain=lambda s: z3.And(s.v["m"] >= 0, s.v["max_level"] >= 1),
    ghost_sorts={
        "t": "int",
        "d": "int",
        "lr": "int",
        "neg": "bool",
        "retried": "bool",
        "sb_ts": "int",
        "sb_lvl": "int",
        "fire_ts": "int",
        "dl_ts": "int",
        "dlq_late": "bool",
    },
    ghost_init=lambda s: z3.And(
        z3.Not(s.g["dlq_late"]),
        s.g["t"] >= 0,
        s.g["d"] == 0,
        s.g["lr"] == 0,
        z3.Not(s.g["neg"]),
        z3.Not(s.g["retried"]),
        s.g["sb_ts"] == 0,
        s.g["sb_lvl"] == 0,
        s.g["fire_ts"] == 0,
        s.g["dl_ts"] == 0,
    ),
    ghost_update=_message_ghosts,
    env=_message_env,
    fn={"D": DELAY_OF_LEVEL},
    action_args={"send_back": ("level", "now", "delay")},
)


def _lock_ghosts(pre: Sym, act: Act, post: Sym) -> dict[str, z3.ExprRef]:
    g, a = pre.g, act.a
    # Observational, as RocketMQ's tryLockBatch reports a grant: after the call
    # the entry belongs to the caller with last_update = now.
    granted = z3.And(
        act.is_("lock"),
        post.at("HELD"),
        post.v["holder"] == a["client"],
        post.v["last_update"] == a["now"],
    )
    released = z3.And(
        act.is_("unlock"), pre.at("HELD"), pre.v["holder"] == a["client"], post.at("FREE")
    )
    mine = a["client"] == g["o"]
    return {
        "o": g["o"],
        "live_o": z3.If(
            z3.And(granted, mine), True, z3.If(z3.And(released, mine), False, g["live_o"])
        ),
        "lg_o": z3.If(z3.And(granted, mine), a["now"], g["lg_o"]),
    }


LOCK_ENC = Encoding(
    lifecycle=lc.LOCK,
    vars_cls=lc.LockVars,
    args=("client", "now"),
    twins=LOCK_TWINS,
    params=("max_live",),
    domain=lambda s: z3.And(s.v["max_live"] > 0, s.g["o"] >= 0),
    ghost_sorts={"t": "int", "o": "int", "live_o": "bool", "lg_o": "int"},
    ghost_init=lambda s: z3.And(s.g["t"] >= 0, z3.Not(s.g["live_o"]), s.g["lg_o"] == 0),
    ghost_update=_lock_ghosts,
    env=lambda pre, act: z3.And(act.a["now"] >= pre.g["t"], act.a["client"] >= 0),
    action_args={"lock": ("client", "now"), "unlock": ("client", "now")},
)


def _txn_ghosts(pre: Sym, act: Act, post: Sym) -> dict[str, z3.ExprRef]:
    g, now = pre.g, act.a["now"]
    # A check request is observed as the re-put with TRANSACTION_CHECK_TIMES + 1.
    checked = z3.And(act.is_("check"), post.v["checks"] > pre.v["checks"])
    resolve = act.is_("commit", "rollback")
    discarded_now = z3.And(act.is_("check"), pre.at("PENDING"), post.at("DISCARDED"))
    return {
        "cres": z3.Or(g["cres"], z3.And(checked, pre.at("COMMITTED", "ROLLED_BACK"))),
        "dts": z3.If(discarded_now, now, g["dts"]),
        "fc": z3.If(z3.And(checked, pre.v["checks"] == 0), now, g["fc"]),
        "lc": z3.If(checked, now, g["lc"]),
        "committed": z3.Or(g["committed"], act.is_("commit")),
        "rolled": z3.Or(g["rolled"], act.is_("rollback")),
        "discarded": z3.Or(g["discarded"], z3.And(act.is_("check"), post.at("DISCARDED"))),
        "late": z3.Or(g["late"], z3.And(g["discarded"], resolve)),
    }


TRANSACTION_ENC = Encoding(
    lifecycle=lc.TRANSACTION,
    vars_cls=lc.TxnVars,
    args=("now",),
    twins=TRANSACTION_TWINS,
    params=("born", "check_max", "immunity", "reserved"),
    domain=lambda s: z3.And(
        s.v["check_max"] >= 1, s.v["immunity"] >= 0, s.v["reserved"] >= 0, s.v["born"] >= 0
    ),
    ghost_sorts={
        "t": "int",
        "fc": "int",
        "lc": "int",
        "committed": "bool",
        "rolled": "bool",
        "discarded": "bool",
        "late": "bool",
        "cres": "bool",
        "dts": "int",
    },
    ghost_init=lambda s: z3.And(
        z3.Not(s.g["cres"]),
        s.g["dts"] == 0,
        s.g["t"] == s.v["born"],
        s.g["fc"] == 0,
        s.g["lc"] == 0,
        z3.Not(s.g["committed"]),
        z3.Not(s.g["rolled"]),
        z3.Not(s.g["discarded"]),
        z3.Not(s.g["late"]),
    ),
    ghost_update=_txn_ghosts,
    env=lambda pre, act: act.a["now"] >= pre.g["t"],
)

def _pop_ghosts(pre: Sym, act: Act, post: Sym) -> dict[str, z3.ExprRef]:
    g, now = pre.g, act.a["now"]
    # Observational: a pop hands the message out when it leaves with a new handle; a revive is
    # the move from POPPED back to READY; an ack is accepted when the message ends ACKED.
    handed = z3.And(act.is_("pop"), post.at("POPPED"), post.v["h"] != pre.v["h"])
    new_deadline = z3.And(act.is_("pop", "change"), post.at("POPPED"), post.v["h"] != pre.v["h"])
    revived = z3.And(act.is_("revive"), pre.at("POPPED"), post.at("READY"))
    return {
        "dl": z3.If(new_deadline, post.v["pop_ts"] + post.v["inv"], g["dl"]),
        "early": z3.Or(g["early"], z3.And(handed, now < g["dl"])),
        "nrev": z3.If(revived, g["nrev"] + 1, g["nrev"]),
        "acked": z3.Or(g["acked"], z3.And(act.is_("ack"), post.at("ACKED"))),
        "rev_acked": z3.Or(g["rev_acked"], z3.And(g["acked"], act.is_("revive"),
                                                  z3.Or(post.v["r"] != pre.v["r"], post.pc != pre.pc))),
        "pops": z3.If(handed, g["pops"] + 1, g["pops"]),
    }


POP_ENC = Encoding(
    lifecycle=lc.POP,
    vars_cls=lc.PopVars,
    args=("handle", "invisible", "now"),  # not the vars' names: z3 names args and vars alike
    twins=POP_TWINS,
    params=(),
    domain=lambda s: z3.BoolVal(True),
    ghost_sorts={"t": "int", "dl": "int", "early": "bool", "nrev": "int", "acked": "bool",
                 "rev_acked": "bool", "pops": "int"},
    ghost_init=lambda s: z3.And(s.g["t"] >= 0, s.g["dl"] == 0, z3.Not(s.g["early"]), s.g["nrev"] == 0,
                                z3.Not(s.g["acked"]), z3.Not(s.g["rev_acked"]), s.g["pops"] == 0),
    ghost_update=_pop_ghosts,
    # the clock is monotone; an invisible time is positive (PopMessageRequestHeader.invisibleTime,
    # ChangeInvisibleTimeRequestHeader.invisibleTime: the clients refuse less); handles are numbered from 1
    env=lambda pre, act: z3.And(act.a["now"] >= pre.g["t"], act.a["invisible"] > 0, act.a["handle"] >= 0),
    action_args={"pop": ("invisible", "now"), "change": ("handle", "invisible", "now"), "ack": ("handle", "now")},
)

def _pop_order_ghosts(pre: Sym, act: Act, post: Sym) -> dict[str, z3.ExprRef]:
    g, a, now = pre.g, act.a, act.a["now"]
    # Observational: a pop hands a batch out when the queue ends in flight with the pop's time and
    # attempt; an ack commits when the queue ends idle.
    handed = z3.And(act.is_("pop"), post.at("INFLIGHT"), post.v["pop_ts"] == now, post.v["att"] == a["attempt"])
    live = z3.And(pre.at("INFLIGHT"), now < pre.v["pop_ts"] + pre.v["inv"])
    committed = z3.And(act.is_("commit"), pre.at("INFLIGHT"), post.v["off"] != pre.v["off"])
    return {
        "overlap": z3.Or(g["overlap"], z3.And(handed, live, a["attempt"] != pre.v["att"])),
        "acked_to": z3.If(committed, pre.v["off"] + a["count"], g["acked_to"]),
        "skip": z3.Or(g["skip"], z3.And(handed, post.v["off"] != g["acked_to"])),
        "takeovers": z3.If(z3.And(handed, pre.at("INFLIGHT"), a["attempt"] != pre.v["att"]),
                           g["takeovers"] + 1, g["takeovers"]),
    }


POP_ORDER_ENC = Encoding(
    lifecycle=lc.POP_ORDER,
    vars_cls=lc.PopOrderVars,
    args=("attempt", "batch", "count", "invisible", "now"),
    twins=POP_ORDER_TWINS,
    params=(),
    domain=lambda s: z3.BoolVal(True),
    ghost_sorts={"t": "int", "overlap": "bool", "acked_to": "int", "skip": "bool", "takeovers": "int"},
    ghost_init=lambda s: z3.And(s.g["t"] >= 0, z3.Not(s.g["overlap"]), s.g["acked_to"] == 0,
                                z3.Not(s.g["skip"]), s.g["takeovers"] == 0),
    ghost_update=_pop_order_ghosts,
    # a monotone clock; a batch holds at least one message (maxMsgNums ≥ 1); attempts are numbered from 1
    env=lambda pre, act: z3.And(act.a["now"] >= pre.g["t"], act.a["invisible"] > 0, act.a["batch"] >= 1,
                                act.a["attempt"] >= 1),
    action_args={"pop": ("attempt", "batch", "invisible", "now"), "commit": ("count", "now")},
)

ENCODINGS: Mapping[str, Encoding] = {
    e.name: e for e in (MESSAGE_ENC, LOCK_ENC, TRANSACTION_ENC, POP_ENC, POP_ORDER_ENC)}
