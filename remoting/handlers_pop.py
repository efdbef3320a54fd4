"""``rmqspec serve``'s pop (RocketMQ 5.x): POP_MESSAGE 200050, ACK_MESSAGE 200051, BATCH_ACK_MESSAGE 200151,
CHANGE_MESSAGE_INVISIBLETIME 200053, answered through the served broker's ``PopBroker`` methods.

Theory of operation
-------------------
Served only when the configuration's profile pops (``Version.pop``) and the broker has the methods
(``Capability.POP``); otherwise every code is answered REQUEST_CODE_NOT_SUPPORTED " request type N not
supported", as 4.9.8 does (and as a broker without pop, e.g. the mmap broker today, must). The ext fields
are read as 5.3.3's headers decode them (``fields.py``: a missing @CFNotNull field or a bad number is
SYSTEM_ERROR naming it); the extra info with ``pop_ops.ExtraInfo.split`` (ExtraInfoUtil's format; a
malformed one is SYSTEM_ERROR naming the field). The answers are what real 5.3.3 wrote
(``docs/pop-facts.md``, ``tests/interop/test_pop_real.py``, ``test_pop_adapter_real.py``), so
``pop_ops.parse_pop`` / ``parse_change_invisible`` (the 5.x client's reading) give back the broker's own
handles:

- POP_MESSAGE: the group auto-created as for a pull (``autoCreateSubscriptionGroup``; 5.3.3's
  ``findSubscriptionGroupConfig``); FOUND → 0, remark "FOUND", the header of ``pop_ops.pop_answer_ext``
  (popTime, invisibleTime, reviveQid, restNum 0, startOffsetInfo, msgOffsetInfo, orderCountInfo for an
  orderly pop) and the messages in commitlog format (a retry copy under its original topic with its
  POP_CK, as the served broker returns it). Nothing, with ``pollTime`` > 0 and ``bornTime + pollTime``
  still ahead: the request is held (``HeldPop``; 5.3.3's PopLongPollingService.polling, expiry
  ``bornTime + pollTime``) and re-run (``rerun_pops``, by the server after every store and at every
  tick) when a message arrived in the topic it pops (a queue's max offset grew: the queue it names, or
  any queue for queue id −1) or its expiry passed; a re-run that finds nothing before the expiry is held
  again. A revive wakes it only under a profile whose revives carry ORIGIN_GROUP (rocketmq-5.5): 5.3.3
  notifies the polls of the topic a message arrives in, mapping only a v2 retry topic (``%RETRY%G+T``) to
  its normal topic, so a copy revived into the v1 retry topic ``%RETRY%G_T`` waits for the held pop's
  expiry; 5.5.1 maps any retry topic's arrival to (normal topic, ORIGIN_GROUP) and wakes it (read in
  5.5.1's bytecode; measured with the Java client: the redelivery at the 15 s poll's end on 5.3.3, right
  after the revive on 5.5.1, ``tests/interop/test_serve_java_pop.py``). Nothing otherwise (``pollTime`` 0, or
  expired) → 210 POLLING_TIMEOUT, remark NO_MESSAGE_IN_QUEUE, the same header with empty
  offset infos. A refusal: the broker's code and remark.
- ACK_MESSAGE: the handle = the extra info's checkpoint fields with the header's queueId and offset (the
  fields 5.3.3 acks by); the header's topic is the message's real topic, so the broker is asked with the
  topic it stands for (``normal_topic``) when the handle's retry flag says retry. The answer: the broker's
  code; no remark on SUCCESS (5.3.3: none); NO_MESSAGE with 5.3.3's "offset is illegal, key:T@Q,
  commit:O, store:MIN~MAX" from the served queue's range; other refusals without a remark (the ``Broker``
  protocol returns the code alone).
- BATCH_ACK_MESSAGE: the JSON body (``pop_ops.parse_batch_ack_body``); one ``batch_ack`` per (group,
  topic) with one handle per acked bit; the answer is the first non-SUCCESS code, else SUCCESS; no acks →
  208 NO_MESSAGE (5.3.3 and the model); no remark (5.3.3: none). The answers' codes, remarks and ext field
  names are held to what 5.3.3 wrote (``tests/remoting/fixtures/pop_answers_5.3.3.json``).
- CHANGE_MESSAGE_INVISIBLETIME: the new handle's popTime, invisibleTime and reviveQid, remark "not set any
  response code" (5.3.3's); ``suspend`` (5.5.x) passed on.

Trace: when the served broker records nothing itself, ``ctx.wire`` writes the pop rows (``wire_events``):
``pop``, ``ack`` (status: the answer's code name), ``change_invisible``, and an inferred ``revive`` the
first time a retry copy is handed out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from rmqspec.model.pop import NORMAL, PopHandle, PopStatus, normal_topic, pop_retry_topic, real_topic
from rmqspec.model.protocol import Capability
from rmqspec.model.results import ResponseCode
from rmqspec.remoting import pop_ops as po
from rmqspec.remoting.bodies import BodyError
from rmqspec.remoting.codes import RequestCode, unsupported_remark
from rmqspec.remoting.command import CommandError, RemotingCommand, response_to
from rmqspec.remoting.context import NOT_SET, Ctx, ok, refuse
from rmqspec.remoting.fields import get_bool, get_int, get_long, get_str
from rmqspec.remoting.records import encode_many

POP_CODES = frozenset({RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE, RequestCode.BATCH_ACK_MESSAGE,
                       RequestCode.CHANGE_MESSAGE_INVISIBLETIME})


def pops(ctx: Ctx) -> bool:
    """Whether the server answers pop: a 5.x profile and a broker with ``Capability.POP``. The dispatcher
    asks before it checks the ext fields (4.9.8 answers 3 whatever the request holds)."""
    broker = ctx.broker
    return bool(ctx.config.behaviour.pop and callable(getattr(broker, "pop", None))
                and Capability.POP in getattr(broker, "capabilities", frozenset()))


def _gate(ctx: Ctx, req: RemotingCommand) -> RemotingCommand | None:
    """The REQUEST_CODE_NOT_SUPPORTED answer of a server whose broker does not pop, else None."""
    if pops(ctx):
        return None
    return response_to(req, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, unsupported_remark(req.code))


def _handle(req: RemotingCommand) -> PopHandle:
    """The handle an ACK / CHANGE request names: the extra info's fields, the header's queue and offset."""
    try:
        info = po.ExtraInfo.split(get_str(req, "extraInfo"))
    except po.ExtraInfoError as exc:
        raise CommandError("extraInfo", f"{exc.field}: {exc.reason}") from None
    return attrs.evolve(info.handle(), queue_id=get_int(req, "queueId"), queue_offset=get_long(req, "offset"))


def _topic_popped(topic: str, group: str, handle: PopHandle) -> str:
    """The topic the client popped (the broker's ``topic`` argument) for a request naming the real one."""
    return topic if handle.retry == NORMAL else normal_topic(topic, group)


@attrs.define(eq=False)
class HeldPop:
    """An empty pop held until ``deadline`` (the client's bornTime + pollTime) or a message's arrival in
    its queues (``tops``: their max offsets when it was held)."""

    conn: Any
    request: RemotingCommand
    deadline: int
    tops: tuple[int, ...]


def _queue_tops(ctx: Ctx, topic: str, queue_id: int) -> tuple[int, ...]:
    if queue_id >= 0:
        return (ctx.served.queue_range(topic, queue_id)[1],)
    return tuple(ctx.served.queue_range(topic, q)[1] for q in range(ctx.served.queue_nums(topic) or 0))


def _tops(ctx: Ctx, req: RemotingCommand) -> tuple[int, ...]:
    """The max offsets of the queues whose growth wakes a held pop: those it reads (queue id −1: every
    queue of the topic), its group's v2 retry topic (5.3.3 maps a ``%RETRY%G+T`` arrival to T) and, on a
    profile whose revives carry ORIGIN_GROUP (5.5), its v1 retry topic too (5.5.1 notifies the polls of
    (normal topic, ORIGIN_GROUP) for a message arriving in any retry topic)."""
    topic, queue_id = req.ext("topic") or "", int(req.ext("queueId") or 0)
    group = req.ext("consumerGroup") or ""
    tops = _queue_tops(ctx, topic, queue_id) + _queue_tops(ctx, pop_retry_topic(topic, group, True), -1)
    if ctx.config.behaviour.pop_origin_group:
        tops += _queue_tops(ctx, pop_retry_topic(topic, group, False), -1)
    return tops


def pop_message(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand | None:
    return process_pop(ctx, conn, req, allow_hold=True)


def rerun_pops(ctx: Ctx, now: int, guarded: Callable[..., RemotingCommand | None]) -> None:
    """Re-run every held pop (``guarded(call, conn, request)``: the server's mapping of failures to
    answers): answer those that found messages or expired, keep the others."""
    held, ctx.held_pops = ctx.held_pops, []
    for h in held:
        if getattr(h.conn, "closed", False):
            continue
        if now < h.deadline and _tops(ctx, h.request) == h.tops:
            ctx.held_pops.append(h)  # nothing arrived in its queues: held on
            continue
        response = guarded(lambda h=h: process_pop(ctx, h.conn, h.request, allow_hold=False), h.conn, h.request)
        if response is None:
            continue
        if response.code == po.POLLING_TIMEOUT and now < h.deadline:
            h.tops = _tops(ctx, h.request)
            ctx.held_pops.append(h)
        else:
            h.conn.send(response)


def process_pop(ctx: Ctx, conn: Any, req: RemotingCommand, allow_hold: bool) -> RemotingCommand | None:
    if (refused := _gate(ctx, req)) is not None:
        return refused
    group, topic = get_str(req, "consumerGroup"), get_str(req, "topic")
    queue_id, max_nums = get_int(req, "queueId"), get_int(req, "maxMsgNums")
    invisible = get_long(req, "invisibleTime")
    poll_ms = get_long(req, "pollTime")
    born = get_long(req, "bornTime")
    init_mode = get_int(req, "initMode")
    attempt = req.ext("attemptId")
    order = get_bool(req, "order")
    ctx.served.ensure_group(group)
    result = ctx.broker.pop(group, topic, queue_id, max_nums, invisible, order=order, attempt_id=attempt,
                            expression=req.ext("exp") or "*", expression_type=req.ext("expType") or "TAG",
                            init_mode=init_mode)
    ext = po.pop_answer_ext(result)
    if result.status is not PopStatus.FOUND:
        if allow_hold and poll_ms > 0 and ctx.now() < born + poll_ms:
            ctx.held_pops.append(HeldPop(conn, req, born + poll_ms, _tops(ctx, req)))
            return None
        return refuse(req, po.POLLING_TIMEOUT, po.NOT_FOUND_REMARK, ext)
    seen: set[tuple[str, int, int]] = ctx.pop_revives_seen
    for p in result.messages:
        h = p.handle
        where = (real_topic(topic, group, h.retry), h.queue_id, h.queue_offset)
        if h.retry != NORMAL and not h.order and where not in seen:
            seen.add(where)
            ctx.wire.revive_seen(result.pop_time, group, p, where[0])
        ctx.wire.pop(result.pop_time, group, p, where[0], attempt)
    body = encode_many([p.message for p in result.messages], ctx.store_host, ctx.born_host)
    return ok(req, ext, body, po.FOUND_REMARK)


def ack_message(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    if (refused := _gate(ctx, req)) is not None:
        return refused
    group, topic = get_str(req, "consumerGroup"), get_str(req, "topic")
    handle = _handle(req)
    code = ctx.broker.ack(group, _topic_popped(topic, group, handle), handle)
    ctx.wire.ack(ctx.now(), group, topic, handle, code.name, False)
    remark = None
    if code is ResponseCode.NO_MESSAGE:  # AckMessageProcessor's, as 5.3.3 words it (measured)
        low, high = ctx.served.queue_range(topic, handle.queue_id)
        remark = f"offset is illegal, key:{topic}@{handle.queue_id}, commit:{handle.queue_offset}, store:{low}~{high}"
    return response_to(req, code, remark)


def batch_ack_message(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    if (refused := _gate(ctx, req)) is not None:
        return refused
    try:
        broker_name, items = po.parse_batch_ack_body(req.body)
    except po.ExtraInfoError as exc:
        raise BodyError(0, f"BATCH_ACK_MESSAGE {exc.field}: {exc.reason}") from None
    if not items:
        return response_to(req, ResponseCode.NO_MESSAGE, None)
    name = broker_name or ctx.settings.broker_name
    batches: dict[tuple[str, str], list[PopHandle]] = {}
    for a in items:
        handles = batches.setdefault((a.group, a.topic), [])
        handles += [PopHandle(a.start_offset, a.pop_time, a.invisible_time, a.revive_qid, a.retry, name, a.queue_id,
                              offset) for offset in a.offsets]
    code = ResponseCode.SUCCESS
    now = ctx.now()
    for (group, topic), handles in batches.items():
        got = ctx.broker.batch_ack(group, topic, handles)
        if code is ResponseCode.SUCCESS:
            code = got
        for h in handles:
            ctx.wire.ack(now, group, real_topic(topic, group, h.retry), h, got.name, True)
    return response_to(req, code, None)


def change_invisible_time(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    if (refused := _gate(ctx, req)) is not None:
        return refused
    group, topic = get_str(req, "consumerGroup"), get_str(req, "topic")
    handle = _handle(req)
    invisible = get_long(req, "invisibleTime")
    new = ctx.broker.change_invisible_time(group, _topic_popped(topic, group, handle), handle, invisible,
                                           suspend=get_bool(req, "suspend"))  # a refusal: its code and remark
    ctx.wire.change_invisible(ctx.now(), group, topic, handle, new)
    return ok(req, {"popTime": str(new.pop_time), "invisibleTime": str(new.invisible_time),
                    "reviveQid": str(new.revive_qid)}, remark=NOT_SET)
