"""The theorems proved over the lifecycle encodings (``z3_encode``).

Each theorem is data: a name ending in ``Property`` (``always``), ``Reachable``
(``sometimes``) or ``Deterministic`` (table well-formedness), the SPEC §8
violation code it protects, a one-sentence statement, the RocketMQ source it
follows and z3 formulas over one symbolic state (``Sym``).

- ``always``: ``prop`` is proved *inductive* together with its documented
  auxiliary conjuncts ``aux``: ``init ⇒ Inv`` and ``Inv ∧ Step ⇒ Inv′`` with
  ``Inv = domain ∧ prop ∧ aux``, for all parameter values in the domain.
- ``sometimes``: ``goal`` is reachable from ``init`` within ``depth`` steps
  (bounded unrolling) under ``assume`` (concrete small parameters), to show
  the encoding is not vacuous.
- ``wellformed``: for every (source, action) the rows' guards are pairwise
  exclusive, so ``Lifecycle.enabled`` never finds two rows.

Ghost names (``Sym.g``): ``t`` time of the last action; message: ``d``
deliveries, ``lr`` local re-consumptions (send_back failed), ``neg`` the DLQ
send-back had a negative level, ``retried`` a RETRY send-back happened,
``sb_ts``/``sb_lvl`` time and routed level of the last RETRY send-back,
``fire_ts`` last schedule fire, ``dl_ts`` last delivery, ``dlq_late`` a copy routed to the DLQ
did not become DEAD at once (or a fire made one DEAD); lock: ``o`` an
arbitrary observer client, ``live_o`` o holds a grant it has not unlocked,
``lg_o`` time of o's last grant; transaction: ``fc``/``lc`` first/last check
time, ``committed``/``rolled``/``discarded`` ever happened, ``late`` a
resolution was accepted after the discard, ``cres`` a check after the commit or
rollback, ``dts`` the time of the discard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs
import z3

from rmqspec.model import lifecycle as lc
from rmqspec.properties.codes import Code
from rmqspec.properties.z3_encode import Sym

Formula = Callable[[Sym], z3.BoolRef]

ALWAYS = "always"
SOMETIMES = "sometimes"
WELLFORMED = "wellformed"


@attrs.frozen
class Conjunct:
    name: str
    formula: Formula
    doc: str


@attrs.frozen
class Theorem:
    name: str
    code: str | None
    lifecycle: str
    kind: str
    statement: str
    source: str
    prop: Formula | None = None  # always
    aux: tuple[Conjunct, ...] = ()  # always: auxiliary conjuncts that make prop inductive
    goal: Formula | None = None  # sometimes
    assume: Formula | None = None  # sometimes: restriction of the initial parameters
    depth: int = 0  # sometimes: unrolling bound


def _c(name: str, doc: str, formula: Formula) -> Conjunct:
    return Conjunct(name, formula, doc)


def _imp(a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef:
    return z3.Implies(a, b)


def _delay_of_sb(s: Sym) -> z3.ArithRef:
    return s.fn["D"](s.g["sb_lvl"])


# -- message ----------------------------------------------------------------

_R_NONNEG = _c(
    "r_nonneg",
    "reconsume times and ghost counters are non-negative",
    lambda s: z3.And(s.v["r"] >= 0, s.g["lr"] >= 0, s.g["d"] >= 0),
)
_STORED_LE_M = _c(
    "stored_r_le_m",
    "a stored or scheduled copy has r ≤ m",
    lambda s: _imp(s.at("STORED", "SCHEDULED"), s.v["r"] <= s.v["m"]),
)
_DELIVERED_LE_M = _c(
    "delivered_r_le_m",
    "a delivered copy has r ≤ m (local re-consumption leaves the stored count alone)",
    lambda s: _imp(s.at("DELIVERED"), s.v["r"] <= s.v["m"]),
)
_CLOCK = _c(
    "ghost_times_le_t",
    "recorded times are not after the last action",
    lambda s: z3.And(
        s.g["fire_ts"] <= s.g["t"], s.g["dl_ts"] <= s.g["t"], s.g["sb_ts"] <= s.g["t"]
    ),
)
_SCHED_RETRIED = _c(
    "scheduled_implies_retried",
    "only a RETRY send-back schedules a copy",
    lambda s: _imp(s.at("SCHEDULED"), s.g["retried"]),
)

MESSAGE_THEOREMS: tuple[Theorem, ...] = (
    Theorem(
        name="DlqExactlyAtThresholdProperty",
        code=Code.DLQ_EARLY,
        lifecycle="message",
        kind=ALWAYS,
        statement=(
            "With a non-negative level a message is DEAD exactly after its (m+1)-th failure: "
            "DEAD ⇒ r = m+1 (the broker routes on the stored reconsume_times)."
        ),
        source="B/processor/SendMessageProcessor.consumerSendMsgBack (reconsumeTimes >= max)",
        prop=lambda s: _imp(z3.And(s.at("DEAD"), z3.Not(s.g["neg"])), s.v["r"] == s.v["m"] + 1),
        aux=(_R_NONNEG, _STORED_LE_M, _DELIVERED_LE_M),
    ),
    Theorem(
        name="NoRetryPastMaxProperty",
        code=Code.DLQ_MISSED,
        lifecycle="message",
        kind=ALWAYS,
        statement=(
            "A retry copy is never scheduled or stored with reconsume_times > max "
            "(SCHEDULED ∨ STORED ⇒ r ≤ m)."
        ),
        source="B/processor/SendMessageProcessor.consumerSendMsgBack",
        prop=_STORED_LE_M.formula,
        aux=(_R_NONNEG,),
    ),
    Theorem(
        name="DeliveriesBoundedProperty",
        code=Code.DLQ_MISSED,
        lifecycle="message",
        kind=ALWAYS,
        statement="A message is delivered at most m + 1 times (ghost d ≤ m + 1).",
        source="B/processor/SendMessageProcessor.consumerSendMsgBack; SPEC §4.2 (1 + 16)",
        prop=lambda s: s.g["d"] <= s.v["m"] + 1,
        aux=(
            _R_NONNEG,
            _STORED_LE_M,
            _c(
                "stored_d_le_r",
                "before a delivery, deliveries so far ≤ r",
                lambda s: _imp(s.at("STORED", "SCHEDULED"), s.g["d"] <= s.v["r"]),
            ),
            _c(
                "delivered_d_le_r1",
                "after a delivery, deliveries ≤ r + 1",
                lambda s: _imp(z3.Not(s.at("STORED", "SCHEDULED")), s.g["d"] <= s.v["r"] + 1),
            ),
        ),
    ),
    Theorem(
        name="RetryNotBeforeLevelDelayProperty",
        code=Code.RETRY_EARLY,
        lifecycle="message",
        kind=ALWAYS,
        statement=(
            "A retry copy is due exactly delay(level) after its send-back and is fired and "
            "delivered no earlier."
        ),
        source="B/processor/SendMessageProcessor.consumerSendMsgBack "
        "(delayLevel = 3 + reconsumeTimes); "
        "S/schedule/ScheduleMessageService",
        prop=lambda s: z3.And(
            _imp(
                s.at("SCHEDULED"),
                z3.And(
                    s.v["deliver_ts"] == s.g["sb_ts"] + _delay_of_sb(s),
                    s.g["sb_lvl"] >= 1,
                    s.g["sb_lvl"] <= s.v["max_level"],
                ),
            ),
            _imp(
                z3.And(s.g["retried"], z3.Not(s.at("SCHEDULED"))),
                s.g["fire_ts"] >= s.g["sb_ts"] + _delay_of_sb(s),
            ),
            _imp(
                z3.And(s.g["retried"], s.at("DELIVERED", "CONSUMED", "DEAD")),
                s.g["dl_ts"] >= s.g["fire_ts"],
            ),
        ),
        aux=(_R_NONNEG, _CLOCK, _SCHED_RETRIED),
    ),
    Theorem(
        name="ScheduledNotFiredEarlyProperty",
        code=Code.DELAY_EARLY,
        lifecycle="message",
        kind=ALWAYS,
        statement="A scheduled copy is fired, and then delivered, never before its deliver_ts.",
        source="S/schedule/ScheduleMessageService.DeliverDelayedMessageTimerTask "
        "(deliverTimestamp <= now)",
        prop=lambda s: z3.And(
            _imp(
                z3.And(s.g["retried"], z3.Not(s.at("SCHEDULED"))),
                s.g["fire_ts"] >= s.v["deliver_ts"],
            ),
            _imp(
                z3.And(s.g["retried"], s.at("DELIVERED", "CONSUMED", "DEAD")),
                s.g["dl_ts"] >= s.v["deliver_ts"],
            ),
        ),
        aux=(_CLOCK, _SCHED_RETRIED),
    ),
    Theorem(
        name="DlqNeverScheduledProperty",
        code=Code.DLQ_DELAYED,
        lifecycle="message",
        kind=ALWAYS,
        statement=(
            "A send-back the routing sends to the DLQ makes the copy DEAD in the same step; "
            "no schedule fire ever makes a copy DEAD (a DLQ copy is never scheduled or delayed)."
        ),
        source="B/processor/SendMessageProcessor.consumerSendMsgBack (DLQ: delayLevel 0, no schedule)",
        prop=lambda s: z3.Not(s.g["dlq_late"]),
    ),
    Theorem(
        name="DeadAfterMaxPlusOneDeliveriesReachable",
        code=Code.DLQ_MISSED,
        lifecycle="message",
        kind=SOMETIMES,
        statement="With m = 2 a message that always fails reaches DEAD after exactly 3 deliveries.",
        source="SPEC §4.4",
        goal=lambda s: z3.And(s.at("DEAD"), s.g["d"] == 3, z3.Not(s.g["neg"]), s.g["lr"] == 0),
        assume=lambda s: s.v["m"] == 2,
        depth=8,
    ),
    Theorem(
        name="ConsumedAfterRetryReachable",
        code=Code.RETRY_EARLY,
        lifecycle="message",
        kind=SOMETIMES,
        statement="A message that failed once is retried, fired when due and consumed.",
        source="SPEC §4.2",
        goal=lambda s: z3.And(s.at("CONSUMED"), s.g["retried"], s.g["d"] == 2),
        depth=5,
    ),
)

# -- lock -------------------------------------------------------------------

_LOCK_EXCL = _c(
    "others_expired_at_grant",
    "when the holder's grant was made, o (another client) had no live grant younger than max_live",
    lambda s: _imp(
        z3.And(s.at("HELD"), s.v["holder"] != s.g["o"]),
        z3.Or(z3.Not(s.g["live_o"]), s.g["lg_o"] + s.v["max_live"] < s.v["last_update"]),
    ),
)

LOCK_THEOREMS: tuple[Theorem, ...] = (
    Theorem(
        name="LockExclusiveProperty",
        code=Code.LOCK_OVERLAP,
        lifecycle="lock",
        kind=ALWAYS,
        statement=(
            "The broker never grants a queue to a client while another client's last grant "
            "is at most max_live old and not unlocked."
        ),
        source="B/client/rebalance/RebalanceLockManager.tryLock / LockEntry.isExpired",
        prop=_LOCK_EXCL.formula,
        aux=(
            _c(
                "holder_is_observer_live",
                "if o holds the entry, its grant is live and is the entry's",
                lambda s: _imp(
                    z3.And(s.at("HELD"), s.v["holder"] == s.g["o"]),
                    z3.And(s.g["live_o"], s.g["lg_o"] == s.v["last_update"]),
                ),
            ),
            _c(
                "free_means_expired",
                "a free entry: o's grant is unlocked or expired before t",
                lambda s: _imp(
                    s.at("FREE"),
                    z3.Or(z3.Not(s.g["live_o"]), s.g["lg_o"] + s.v["max_live"] < s.g["t"]),
                ),
            ),
            _c(
                "last_update_le_t",
                "the entry's last update is not after the last action",
                lambda s: s.v["last_update"] <= s.g["t"],
            ),
            _c(
                "held_by_client",
                "a held entry belongs to a client number ≥ 0",
                lambda s: _imp(s.at("HELD"), s.v["holder"] >= 0),
            ),
        ),
    ),
    Theorem(
        name="LockTakeoverAfterExpiryReachable",
        code=Code.LOCK_OVERLAP,
        lifecycle="lock",
        kind=SOMETIMES,
        statement=(
            "Another client takes the queue over after the holder's grant expired, "
            "without an unlock."
        ),
        source="B/client/rebalance/RebalanceLockManager.tryLockBatch",
        goal=lambda s: z3.And(s.at("HELD"), s.v["holder"] != s.g["o"], s.g["live_o"]),
        depth=2,
    ),
)

# -- transaction ------------------------------------------------------------

_TXN_CLOCK = _c(
    "born_le_t",
    "the half's born time and recorded check times are not after t",
    lambda s: z3.And(s.v["born"] <= s.g["t"], s.g["lc"] <= s.g["t"]),
)
_TXN_STATES = _c(
    "ghosts_match_state",
    "committed/rolled/discarded ghosts are set only in their state",
    lambda s: z3.And(
        _imp(s.g["committed"], s.at("COMMITTED")),
        _imp(s.g["rolled"], s.at("ROLLED_BACK")),
        _imp(s.g["discarded"], s.at("DISCARDED")),
    ),
)

TRANSACTION_THEOREMS: tuple[Theorem, ...] = (
    Theorem(
        name="TxnCheckNotBeforeTimeoutProperty",
        code=Code.TXN_CHECK_EARLY,
        lifecycle="transaction",
        kind=ALWAYS,
        statement="Every check of a half happens at least transactionTimeOut after its born time.",
        source="B/transaction/queue/TransactionalMessageServiceImpl.check "
        "(valueOfCurrentMinusBorn < checkImmunityTime)",
        prop=lambda s: _imp(
            s.v["checks"] >= 1,
            z3.And(s.g["fc"] >= s.v["born"] + s.v["immunity"], s.g["lc"] >= s.g["fc"]),
        ),
        aux=(_TXN_CLOCK,),
    ),
    Theorem(
        name="TxnChecksBoundedProperty",
        code=Code.TXN_CHECK_EXCEEDED,
        lifecycle="transaction",
        kind=ALWAYS,
        statement="A half is checked at most transactionCheckMax times (checks ≤ check_max).",
        source="B/transaction/queue/TransactionalMessageServiceImpl.needDiscard",
        prop=lambda s: z3.And(s.v["checks"] >= 0, s.v["checks"] <= s.v["check_max"]),
    ),
    Theorem(
        name="TxnResolvedOnceProperty",
        code=Code.TXN_DOUBLE_RESOLVED,
        lifecycle="transaction",
        kind=ALWAYS,
        statement=(
            "A transaction is never both committed and rolled back, "
            "and nothing resolves it after a discard."
        ),
        source="B/processor/EndTransactionProcessor; TransactionalMessageServiceImpl.check",
        prop=lambda s: z3.And(z3.Not(z3.And(s.g["committed"], s.g["rolled"])), z3.Not(s.g["late"])),
        aux=(_TXN_STATES,),
    ),
    Theorem(
        name="TxnNoCheckAfterResolutionProperty",
        code=Code.TXN_CHECK_AFTER_RESOLVED,
        lifecycle="transaction",
        kind=ALWAYS,
        statement="A committed or rolled-back half is never checked again.",
        source="B/transaction/queue/TransactionalMessageServiceImpl.check (removeMap from fillOpRemoveMap)",
        prop=lambda s: z3.Not(s.g["cres"]),
    ),
    Theorem(
        name="TxnDiscardOnlyAfterCheckMaxProperty",
        code=Code.TXN_DISCARD_EARLY,
        lifecycle="transaction",
        kind=ALWAYS,
        statement=(
            "A half is discarded only after transactionCheckMax checks, or when it was older than "
            "fileReservedTime at the discard."
        ),
        source="B/transaction/queue/TransactionalMessageServiceImpl.needDiscard / needSkip",
        prop=lambda s: _imp(
            s.at("DISCARDED"),
            z3.Or(s.v["checks"] >= s.v["check_max"], s.g["dts"] - s.v["born"] > s.v["reserved"]),
        ),
    ),
    Theorem(
        name="TxnDiscardAfterCheckMaxReachable",
        code=Code.TXN_CHECK_EXCEEDED,
        lifecycle="transaction",
        kind=SOMETIMES,
        statement=(
            "With check_max = 3 (other parameters RocketMQ's defaults) an unanswered half is "
            "checked 3 times and then discarded."
        ),
        source="B/transaction/queue/TransactionalMessageServiceImpl.needDiscard",
        goal=lambda s: z3.And(
            s.at("DISCARDED"),
            s.v["checks"] == 3,
            s.g["t"] - s.v["born"] <= s.v["reserved"],  # discarded for the count, not the age
        ),
        assume=lambda s: z3.And(
            s.v["check_max"] == 3,
            s.v["immunity"] == lc.TxnVars().immunity,
            s.v["reserved"] == lc.TxnVars().reserved,
        ),
        depth=4,
    ),
    Theorem(
        name="TxnCommitAfterCheckReachable",
        code=Code.TXN_UNRESOLVED,
        lifecycle="transaction",
        kind=SOMETIMES,
        statement="A half that was checked is then committed by the producer's answer.",
        source="B/transaction/queue/TransactionalMessageServiceImpl.check; EndTransactionProcessor",
        goal=lambda s: z3.And(s.at("COMMITTED"), s.v["checks"] >= 1),
        depth=2,
    ),
)

# -- well-formedness --------------------------------------------------------

WELLFORMED_THEOREMS: tuple[Theorem, ...] = tuple(
    Theorem(
        name=f"{name.capitalize()}TableDeterministic",
        code=None,
        lifecycle=name,
        kind=WELLFORMED,
        statement=f"In the {name} table, rows with one source and action have exclusive guards.",
        source="rmqspec.model.lifecycle.Lifecycle.enabled",
    )
    for name in ("message", "lock", "transaction")
)

THEOREMS: tuple[Theorem, ...] = (
    MESSAGE_THEOREMS + LOCK_THEOREMS + TRANSACTION_THEOREMS + WELLFORMED_THEOREMS
)

BY_NAME: Mapping[str, Theorem] = {t.name: t for t in THEOREMS}
