"""Theorems about 5.x pop consumption, proved with z3 over the ``pop`` lifecycle table.

Theory of operation
-------------------
The pop table (``model/lifecycle.py`` ``POP``: one message popped by one consumer group,
concurrently) is encoded like the other tables (``z3_encode.POP_ENC``: one disjunct per row, each
guard and effect with a z3 twin), and the theorems are the same kinds as ``theorems.py``'s:
``always`` (inductive, with the auxiliary conjuncts that make them so), ``sometimes`` (a witness
within a bound, so the encoding is not vacuous) and ``wellformed``. They apply to the profiles that
pop (``applies``); ``prover.theorems_for`` adds them there.

Ghosts (``POP_ENC``): ``t`` the time of the last action, ``dl`` the deadline of the last hand-out
(pop time + invisible time of the last pop or change), ``early`` a pop handed the message out before
``dl``, ``nrev`` the revives, ``acked`` an ack met the live checkpoint, ``rev_acked`` a revive after
that, ``pops`` the hand-outs. The violation codes are the lifecycle's (``POP_*``) once the pop trace
events and their audit exist (issue 40); until then the theorems carry none.
"""

from __future__ import annotations

import z3

from rmqspec.model.versions import Version
from rmqspec.properties.theorems import ALWAYS, SOMETIMES, WELLFORMED, Conjunct, Theorem


def _imp(a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef:
    return z3.Implies(a, b)


_DEADLINE = Conjunct(
    name="deadline_of_the_live_checkpoint",
    doc="a popped message's last hand-out deadline is its live checkpoint's pop time + invisible time; "
    "a ready one's has passed",
    formula=lambda s: z3.And(_imp(s.at("POPPED"), s.g["dl"] == s.v["pop_ts"] + s.v["inv"]),
                     _imp(s.at("READY"), s.g["dl"] <= s.g["t"])),
)
_ACKED_STAYS = Conjunct(
    name="acked_is_terminal",
    doc="once an ack met the live checkpoint the message is ACKED",
    formula=lambda s: _imp(s.g["acked"], s.at("ACKED")),
)
_COUNTS = Conjunct(
    name="counts_nonneg",
    doc="revive and hand-out counts are non-negative",
    formula=lambda s: z3.And(s.g["nrev"] >= 0, s.g["pops"] >= 0),
)

SOURCE = "B/processor/PopMessageProcessor, AckMessageProcessor, ChangeInvisibleTimeProcessor, PopReviveService"

POP_THEOREMS: tuple[Theorem, ...] = (
    Theorem(
        name="PopInvisibleUntilDeadlineProperty",
        code=None,
        lifecycle="pop",
        kind=ALWAYS,
        statement=(
            "A popped message is not handed to the group again before its invisible time ends "
            "(counted from its last pop or change of the invisible time)."
        ),
        source=SOURCE + ".reviveRetry (reviveTime = popTime + invisibleTime)",
        prop=lambda s: z3.Not(s.g["early"]),
        aux=(_DEADLINE,),
    ),
    Theorem(
        name="PopAckedNeverRevivedProperty",
        code=None,
        lifecycle="pop",
        kind=ALWAYS,
        statement="A message whose ack met its live checkpoint is never revived.",
        source="B/processor/AckMessageProcessor; PopReviveService.mergeAndRevive (acked bits skipped)",
        prop=lambda s: z3.Not(s.g["rev_acked"]),
        aux=(_ACKED_STAYS,),
    ),
    Theorem(
        name="PopReconsumeTimesCountRevivesProperty",
        code=None,
        lifecycle="pop",
        kind=ALWAYS,
        statement="The copy the group pops carries as many reconsume times as the message was revived.",
        source="B/processor/PopReviveService.reviveRetry (reconsumeTimes + 1)",
        prop=lambda s: s.v["r"] == s.g["nrev"],
        aux=(_COUNTS,),
    ),
    Theorem(
        name="PopRevivedAndPoppedAgainReachable",
        code=None,
        lifecycle="pop",
        kind=SOMETIMES,
        statement="An un-acked message is revived after its invisible time and popped again with reconsume "
        "times 1.",
        source=SOURCE,
        goal=lambda s: z3.And(s.at("POPPED"), s.v["r"] == 1, s.g["pops"] == 2),
        depth=3,
    ),
    Theorem(
        name="PopAckAfterChangeReachable",
        code=None,
        lifecycle="pop",
        kind=SOMETIMES,
        statement="A message whose invisible time was changed is acked with the new handle and never revived.",
        source="B/processor/ChangeInvisibleTimeProcessor; AckMessageProcessor",
        goal=lambda s: z3.And(s.at("ACKED"), s.v["h"] == 2, s.g["nrev"] == 0),
        depth=3,
    ),
    Theorem(
        name="PopOrderlyOneBatchInFlightProperty",
        code=None,
        lifecycle="pop_order",
        kind=ALWAYS,
        statement=(
            "An orderly pop never hands a queue's messages to another attempt while a batch of that queue "
            "is in flight (neither acked nor past its invisible time)."
        ),
        source="B/offset/ConsumerOrderInfoManager.checkBlock (OrderInfo.needBlock); PopMessageProcessor",
        prop=lambda s: z3.Not(s.g["overlap"]),
    ),
    Theorem(
        name="PopOrderlyNoSkipProperty",
        code=None,
        lifecycle="pop_order",
        kind=ALWAYS,
        statement=(
            "Every orderly batch starts at the first message not acked: an expired batch is handed again, "
            "never skipped."
        ),
        source="B/offset/ConsumerOrderInfoManager.commitAndNext; PopMessageProcessor (reads from the consume "
        "offset)",
        prop=lambda s: z3.Not(s.g["skip"]),
        aux=(Conjunct(name="offset_is_acked_to", doc="the consume offset is where the acks reached",
                      formula=lambda s: s.v["off"] == s.g["acked_to"]),),
    ),
    Theorem(
        name="PopOrderlyTakenOverAfterExpiryReachable",
        code=None,
        lifecycle="pop_order",
        kind=SOMETIMES,
        statement="A batch not acked by its invisible time is handed again from the same offset to another "
        "attempt.",
        source="B/offset/ConsumerOrderInfoManager.OrderInfo.needBlock",
        goal=lambda s: z3.And(s.at("INFLIGHT"), s.g["takeovers"] == 1, s.v["off"] == 0),
        depth=2,
    ),
    Theorem(
        name="PopOrderlyNextBatchAfterAckReachable",
        code=None,
        lifecycle="pop_order",
        kind=SOMETIMES,
        statement="After a batch's first message is acked, the next pop hands the messages after it.",
        source="B/offset/ConsumerOrderInfoManager.commitAndNext",
        goal=lambda s: z3.And(s.at("INFLIGHT"), s.v["off"] >= 1),
        depth=3,
    ),
    Theorem(
        name="PopOrderTableDeterministic",
        code=None,
        lifecycle="pop_order",
        kind=WELLFORMED,
        statement="In the orderly pop table, rows with one source and action have exclusive guards.",
        source="rmqspec.model.lifecycle.Lifecycle.enabled",
    ),
    Theorem(
        name="PopTableDeterministic",
        code=None,
        lifecycle="pop",
        kind=WELLFORMED,
        statement="In the pop table, rows with one source and action have exclusive guards.",
        source="rmqspec.model.lifecycle.Lifecycle.enabled",
    ),
)


def applies(version: Version) -> bool:
    """The profiles that pop: RocketMQ 5.x."""
    return version.pop
