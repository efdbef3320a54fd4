"""Pop consumption (RocketMQ 5.x, RIP-18) on the wire: request builders and answer parsers, no I/O.

Why: issue 40 holds the model's pop (``model/pop.py``) to what real 5.3.3 / 5.5.1 brokers do; this module
is how rmqspec speaks pop to them (``interop/pop_probe.py``, ``RemoteBroker``'s pop in ``adapter_pop.py``)
and how ``rmqspec serve`` reads and answers it (``handlers_pop.py``). Like ``client_ops.py`` every request
is a pure ``*_request(...) -> RemotingCommand`` and every answer a pure ``parse_*(response)``; a malformed
answer raises ``ResponseMalformed`` naming the request and field; ``pop_answer_ext`` is the broker's side.

One handle, one set of names: the request codes, ``POP_CK``, the retry-topic names, the retry flag and
``PopStatus`` are the model's (``model/pop.py``); ``ExtraInfo`` *is* the model's ``PopHandle`` (a subclass
adding the 7-field form and the strict ExtraInfoUtil parser ``split``), every builder takes any
``PopHandle``, and ``ExtraInfo.handle()`` gives back the plain model value.

Facts (5.3.3 source; docs/pop-facts.md has the measured side):

- request codes (``RequestCode``): POP_MESSAGE 200050, ACK_MESSAGE 200051, CHANGE_MESSAGE_INVISIBLETIME
  200053, BATCH_ACK_MESSAGE 200151;
- ``PopMessageRequestHeader``: consumerGroup, topic, queueId (−1: every queue), maxMsgNums (≤ 32),
  invisibleTime, pollTime, bornTime, initMode (0 MIN / 1 MAX, ``ConsumeInitMode``), expType, exp, order,
  attemptId; ``PopMessageResponseHeader``: popTime, invisibleTime, reviveQid, restNum, startOffsetInfo,
  msgOffsetInfo, orderCountInfo;
- the answer's code (the Java client's ``MQClientAPIImpl.processPopResponse``): 0 FOUND (body = the
  messages, commitlog format), 209 POLLING_FULL, 210 POLLING_TIMEOUT and 19 PULL_NOT_FOUND
  POLLING_NOT_FOUND; any other code is a refusal; the remark is the GetMessageStatus name;
- the extra info (``ExtraInfoUtil``, the "receipt handle"): fields joined by one space
  (``MessageConst.KEY_SEPARATOR``): ck queue offset (the start offset of the popped run), pop time,
  invisible time, revive qid, topic type ("0" normal, "1" retry v1 ``%RETRY%group_topic``, "2" retry v2
  ``%RETRY%group+topic``), broker name, queue id, and — 8th, optional in the format, always written by the
  5.x client — the message's queue offset. The broker does NOT write it into a normal message: the client
  builds it from the answer's header (startOffsetInfo by ``type@queueId``, popTime, invisibleTime,
  reviveQid) and puts it into property POP_CK; only a message popped from a retry topic and re-encoded
  under its original topic (``popResponseReturnActualRetryTopic`` false, the default) carries a broker-made
  POP_CK;
- startOffsetInfo: ``type queueId startOffset`` items joined by ``;``; msgOffsetInfo: ``type queueId
  o1,o2,...``; orderCountInfo: ``type queueId count`` or ``type qo<queueId>%<offset> count``;
- ACK_MESSAGE: consumerGroup, topic (the topic the message lies in: the retry topic for a revived one,
  ``ExtraInfoUtil.getRealTopic``), queueId, extraInfo, offset; BATCH_ACK_MESSAGE: no header, a JSON body
  ``{"acks":[{"c","t","r","so","q","rq","pt","it","b"}],"brokerName"}`` (``BatchAck``'s short names) where
  ``b`` is ``BitSet.toByteArray`` (little-endian bytes, bit i = offset so + i) written by fastjson as base64;
- CHANGE_MESSAGE_INVISIBLETIME: the ACK fields + invisibleTime; the answer's popTime / invisibleTime /
  reviveQid with the request's offset make the new handle (``changeInvisibleTimeAsync``).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

import attrs

from rmqspec.model.message import StoredMessage
from rmqspec.model.pop import (
    ACK_MESSAGE,
    BATCH_ACK_MESSAGE,
    CHANGE_MESSAGE_INVISIBLETIME,
    INIT_MAX,
    INIT_MIN,
    MAX_POP_NUMS,
    NORMAL,
    POP_MESSAGE,
    POP_ORDER_REVIVE_QUEUE,
    PROPERTY_POP_CK,
    RETRY_V1,
    RETRY_V2,
    PopHandle,
    PopResult,
    PopStatus,
    java_long,
    pop_retry_topic,
    retry_flag,
)
from rmqspec.model.pop import (
    PROPERTY_FIRST_POP_TIME as PROPERTY_FIRST_POP_TIME,  # re-exported: the probe reads it
)
from rmqspec.model.pop import (
    RETRY_PREFIX as RETRY_PREFIX,  # re-exported
)
from rmqspec.model.pop import real_topic as model_real_topic
from rmqspec.remoting import bodies
from rmqspec.remoting.client_ops import LANGUAGE, ResponseMalformed, messages_of, refusal
from rmqspec.remoting.command import RemotingCommand, request

KEY_SEPARATOR = " "
INIT_MODE_MIN, INIT_MODE_MAX = INIT_MIN, INIT_MAX  # ConsumeInitMode
MAX_MSG_NUMS = MAX_POP_NUMS  # PopMessageProcessor refuses more (INVALID_PARAMETER)

# response codes a pop may be answered with besides SUCCESS
PULL_NOT_FOUND, POLLING_FULL, POLLING_TIMEOUT, NO_MESSAGE = 19, 209, 210, 208
FOUND_REMARK, NOT_FOUND_REMARK = "FOUND", "NO_MESSAGE_IN_QUEUE"  # GetMessageStatus names


class TopicType(StrEnum):
    """ExtraInfoUtil's topic mark (the model's retry flag, ``model/pop.py``): which topic the popped message
    lies in."""

    NORMAL = NORMAL
    RETRY_V1 = RETRY_V1
    RETRY_V2 = RETRY_V2


# the model's PopStatus (FOUND, POLLING_FULL, POLLING_NOT_FOUND; NO_NEW_MSG is never answered on the wire)
POP_STATUS = {0: PopStatus.FOUND, POLLING_FULL: PopStatus.POLLING_FULL,
              POLLING_TIMEOUT: PopStatus.POLLING_NOT_FOUND, PULL_NOT_FOUND: PopStatus.POLLING_NOT_FOUND}


def retry_topic_v1(topic: str, group: str) -> str:
    """KeyBuilder.buildPopRetryTopicV1: ``%RETRY%group_topic``."""
    return pop_retry_topic(topic, group, v2=False)


def retry_topic_v2(topic: str, group: str) -> str:
    """KeyBuilder.buildPopRetryTopicV2: ``%RETRY%group+topic``."""
    return pop_retry_topic(topic, group, v2=True)


def topic_type(topic: str) -> TopicType:
    """ExtraInfoUtil.getRetry(topic): v2 when a retry topic contains '+', v1 for any other retry topic."""
    return TopicType(retry_flag(topic))


def real_topic(kind: TopicType | str, topic: str, group: str) -> str:
    """ExtraInfoUtil.getRealTopic: the topic a handle's message lies in (``model.pop.real_topic``)."""
    return model_real_topic(topic, group, str(kind))


class ExtraInfoError(ValueError):
    """An extra-info string that does not split as ExtraInfoUtil reads it: which field, why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


EXTRA_FIELDS = ("ck_queue_offset", "pop_time", "invisible_time", "revive_qid", "topic_type", "broker_name",
                "queue_id", "queue_offset")


def _java_long(text: str, field: str) -> int:
    """``model.pop.java_long`` (the one reading of a number the handle's parsers share), as ExtraInfoError."""
    try:
        return java_long(text, field)
    except ValueError:
        raise ExtraInfoError(field, f"not a number: {text!r}") from None


@attrs.frozen
class ExtraInfo(PopHandle):
    """The model's ``PopHandle`` as the wire spells it (ExtraInfoUtil): ``split`` is the strict parser of
    the text, ``join`` writes it; ``queue_offset`` None for the 7-field form (then the ck offset is the
    message's offset). ``handle()`` is the plain model value the ``Broker`` protocol speaks."""

    queue_offset: int | None = None  # type: ignore[assignment]

    @property
    def topic_type(self) -> TopicType:
        return TopicType(self.retry)

    @property
    def orderly(self) -> bool:
        """ExtraInfoUtil.isOrder: the revive qid of an orderly pop."""
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    @property
    def offset(self) -> int:
        """The message's queue offset (8th field), else the ck offset (the 7-field form's only offset)."""
        return self.ck_queue_offset if self.queue_offset is None else self.queue_offset

    def handle(self) -> PopHandle:
        """The model's handle (eight fields; the 7-field form's offset is its ck offset)."""
        return PopHandle(self.ck_queue_offset, self.pop_time, self.invisible_time, self.revive_qid,
                         str(self.retry), self.broker_name, self.queue_id, self.offset)

    @classmethod
    def of(cls, handle: PopHandle) -> ExtraInfo:
        """The wire form of a model handle (itself when it already is one)."""
        if isinstance(handle, ExtraInfo):
            return handle
        return cls(handle.ck_queue_offset, handle.pop_time, handle.invisible_time, handle.revive_qid,
                   TopicType(handle.retry), handle.broker_name, handle.queue_id, handle.queue_offset)

    def join(self) -> str:
        """ExtraInfoUtil.buildExtraInfo (the 8-field form when ``queue_offset`` is set)."""
        parts = [str(self.ck_queue_offset), str(self.pop_time), str(self.invisible_time), str(self.revive_qid),
                 str(self.retry), self.broker_name, str(self.queue_id)]
        if self.queue_offset is not None:
            parts.append(str(self.queue_offset))
        return KEY_SEPARATOR.join(parts)

    def extra_info(self) -> str:
        return self.join()

    @classmethod
    def split(cls, text: str) -> ExtraInfo:
        """ExtraInfoUtil.split and its getters: 7 or 8 space-separated fields (Java's String.split drops
        trailing empty strings; an empty field inside is malformed)."""
        parts = text.split(KEY_SEPARATOR)
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) not in (7, 8):
            raise ExtraInfoError("extraInfo", f"{len(parts)} fields, want 7 or 8: {text!r}")
        try:
            kind = TopicType(parts[4])
        except ValueError:
            raise ExtraInfoError("topic_type", f"not 0, 1 or 2: {parts[4]!r}") from None
        if not parts[5]:
            raise ExtraInfoError("broker_name", "empty")
        return cls(ck_queue_offset=_java_long(parts[0], "ck_queue_offset"),
                   pop_time=_java_long(parts[1], "pop_time"),
                   invisible_time=_java_long(parts[2], "invisible_time"),
                   revive_qid=_java_long(parts[3], "revive_qid"), retry=kind, broker_name=parts[5],
                   queue_id=_java_long(parts[6], "queue_id"),
                   queue_offset=_java_long(parts[7], "queue_offset") if len(parts) == 8 else None)


# ----------------------------------------------------------------------------------------------
# the answer's offset infos


def _items(text: str | None, what: str) -> list[tuple[str, str, str]]:
    if not text:
        return []
    out = []
    seen: set[str] = set()
    for one in text.split(";"):
        parts = one.split(KEY_SEPARATOR)
        if len(parts) != 3:
            raise ExtraInfoError(what, f"item {one!r} has {len(parts)} fields, want 3")
        key = f"{parts[0]}@{parts[1]}"
        if key in seen:
            raise ExtraInfoError(what, f"duplicate key {key}")
        seen.add(key)
        out.append((parts[0], parts[1], parts[2]))
    return out


def parse_start_offset_info(text: str | None) -> dict[str, int]:
    """ExtraInfoUtil.parseStartOffsetInfo: {``type@queueId``: start offset}."""
    return {f"{k}@{q}": _java_long(v, "startOffsetInfo") for k, q, v in _items(text, "startOffsetInfo")}


def parse_msg_offset_info(text: str | None) -> dict[str, list[int]]:
    """ExtraInfoUtil.parseMsgOffsetInfo: {``type@queueId``: [queue offsets]}."""
    return {f"{k}@{q}": [_java_long(o, "msgOffsetInfo") for o in v.split(",")]
            for k, q, v in _items(text, "msgOffsetInfo")}


def parse_order_count_info(text: str | None) -> dict[str, int]:
    """ExtraInfoUtil.parseOrderCountInfo: {``type@queueId`` or ``type@qo<queueId>%<offset>``: count}."""
    return {f"{k}@{q}": _java_long(v, "orderCountInfo") for k, q, v in _items(text, "orderCountInfo")}


def join_offset_info(items: Iterable[tuple[TopicType, int | str, Iterable[int] | int]]) -> str:
    """buildStartOffsetInfo / buildMsgOffsetInfo / buildQueueIdOrderCountInfo: ``type q value`` joined by ``;``
    (a list value joined by ``,``)."""
    out = []
    for kind, queue, value in items:
        text = str(value) if isinstance(value, int) else ",".join(str(v) for v in value)
        out.append(f"{kind.value}{KEY_SEPARATOR}{queue}{KEY_SEPARATOR}{text}")
    return ";".join(out)


# ----------------------------------------------------------------------------------------------
# requests


def pop_request(group: str, topic: str, *, queue_id: int = -1, max_nums: int = 32, invisible_ms: int = 60000,
                poll_ms: int = 0, born_ms: int = 0, init_mode: int = INIT_MODE_MIN, exp_type: str | None = "TAG",
                exp: str | None = "*", order: bool = False, attempt_id: str | None = None) -> RemotingCommand:
    """POP_MESSAGE with PopMessageRequestHeader's ext fields (None fields are left out)."""
    return request(POP_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": queue_id, "maxMsgNums": max_nums,
        "invisibleTime": invisible_ms, "pollTime": poll_ms, "bornTime": born_ms, "initMode": init_mode,
        "expType": exp_type, "exp": exp, "order": order, "attemptId": attempt_id,
    }, language=LANGUAGE)


def ack_request(group: str, topic: str, handle: PopHandle, extra_info: str | None = None) -> RemotingCommand:
    """ACK_MESSAGE as the 5.x client sends it: the topic the handle's message lies in, its queue and offset."""
    handle = ExtraInfo.of(handle)
    return request(ACK_MESSAGE, {
        "consumerGroup": group, "topic": real_topic(handle.topic_type, topic, group), "queueId": handle.queue_id,
        "extraInfo": extra_info if extra_info is not None else handle.join(), "offset": handle.offset,
    }, language=LANGUAGE)


def change_invisible_request(group: str, topic: str, handle: PopHandle, invisible_ms: int) -> RemotingCommand:
    """CHANGE_MESSAGE_INVISIBLETIME: the ACK fields and the new invisibleTime (from now)."""
    handle = ExtraInfo.of(handle)
    return request(CHANGE_MESSAGE_INVISIBLETIME, {
        "consumerGroup": group, "topic": real_topic(handle.topic_type, topic, group), "queueId": handle.queue_id,
        "extraInfo": handle.join(), "offset": handle.offset, "invisibleTime": invisible_ms,
    }, language=LANGUAGE)


def bitset_bytes(bits: Iterable[int]) -> bytes:
    """java.util.BitSet.toByteArray: little-endian, no trailing zero bytes."""
    value = 0
    for bit in bits:
        if bit < 0:
            raise ValueError(f"negative bit index {bit}")
        value |= 1 << bit
    return value.to_bytes((value.bit_length() + 7) // 8, "little")


def bitset_bits(data: bytes) -> list[int]:
    """java.util.BitSet.valueOf(bytes): the set bit indexes, ascending."""
    value = int.from_bytes(data, "little")
    return [i for i in range(value.bit_length()) if value >> i & 1]


def batch_ack_body(group: str, topic: str, handles: Iterable[PopHandle]) -> bytes:
    """The BatchAckMessageRequestBody the 5.x client builds (``batchAckMessageAsync``): one BatchAck per
    (type, queue id, ck offset, pop time), bit ``queue_offset − ck offset`` set per handle."""
    acks: dict[tuple[str, int, int, int], tuple[ExtraInfo, set[int]]] = {}
    broker_name = None
    for h in map(ExtraInfo.of, handles):
        broker_name = broker_name or h.broker_name
        entry = acks.setdefault((h.topic_type.value, h.queue_id, h.ck_queue_offset, h.pop_time), (h, set()))
        entry[1].add(h.offset - h.ck_queue_offset)
    return bodies.dumps({"acks": [{
        "b": base64.b64encode(bitset_bytes(bits)).decode("ascii"), "c": group, "it": h.invisible_time,
        "pt": h.pop_time, "q": h.queue_id, "r": h.topic_type.value, "rq": h.revive_qid, "so": h.ck_queue_offset,
        "t": topic,
    } for h, bits in acks.values()], "brokerName": broker_name})


def batch_ack_request(group: str, topic: str, handles: Iterable[PopHandle]) -> RemotingCommand:
    """BATCH_ACK_MESSAGE: no ext fields, the JSON body."""
    return request(BATCH_ACK_MESSAGE, None, batch_ack_body(group, topic, handles), language=LANGUAGE)


@attrs.frozen
class BatchAckItem:
    """One BatchAck of a BATCH_ACK_MESSAGE body as the broker decodes it (short or long names)."""

    group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_qid: int
    pop_time: int
    invisible_time: int
    offsets: tuple[int, ...]


def parse_batch_ack_body(body: bytes) -> tuple[str | None, tuple[BatchAckItem, ...]]:
    """A BATCH_ACK_MESSAGE body → (brokerName, its acks with the absolute offsets acked); BodyError-free:
    a malformed body raises ExtraInfoError naming the field."""
    try:
        value = bodies.loads_object(body, "BATCH_ACK_MESSAGE")
    except bodies.BodyError as exc:
        raise ExtraInfoError("body", str(exc)) from None
    out = []
    for i, ack in enumerate(value.get("acks") or []):
        if not isinstance(ack, dict):
            raise ExtraInfoError(f"acks[{i}]", "not an object")

        def field(short: str, long: str, ack: dict[str, Any] = ack, i: int = i) -> Any:
            if short in ack:
                return ack[short]
            if long in ack:
                return ack[long]
            raise ExtraInfoError(f"acks[{i}].{short}", "missing")

        try:
            raw = base64.b64decode(str(field("b", "bitSet")), validate=True)
        except ValueError:
            raise ExtraInfoError(f"acks[{i}].b", "not base64") from None
        so = int(field("so", "startOffset"))
        out.append(BatchAckItem(str(field("c", "consumerGroup")), str(field("t", "topic")), str(field("r", "retry")),
                                so, int(field("q", "queueId")), int(field("rq", "reviveQueueId")),
                                int(field("pt", "popTime")), int(field("it", "invisibleTime")),
                                tuple(so + b for b in bitset_bits(raw))))
    broker = value.get("brokerName")
    return (None if broker is None else str(broker)), tuple(out)


# ----------------------------------------------------------------------------------------------
# answers


@attrs.frozen
class Popped:
    """One popped message and its handle (the POP_CK the 5.x client gives it)."""

    message: StoredMessage  # as the 5.x client hands it out: an orderly message's order count as reconsume times
    handle: ExtraInfo
    broker_made_ck: bool  # POP_CK was in the record itself (a retry message re-encoded by the broker)
    order_count: int | None = None  # orderCountInfo's count for it (None: the answer has none for it)
    record: StoredMessage | None = None  # the record as the broker wrote it (reconsume times as stored)


@attrs.frozen
class PopAnswer:
    """A POP_MESSAGE answer."""

    code: int
    status: PopStatus
    remark: str | None
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int
    start_offset_info: str | None
    msg_offset_info: str | None
    order_count_info: str | None
    popped: tuple[Popped, ...]

    @property
    def messages(self) -> tuple[StoredMessage, ...]:
        return tuple(p.message for p in self.popped)


def _int(resp: RemotingCommand, what: str, name: str) -> int:
    value = resp.ext(name)
    if value is None:
        raise ResponseMalformed(what, name, "missing ext field")
    try:
        return _java_long(value, name)
    except ExtraInfoError:
        raise ResponseMalformed(what, name, f"not an integer: {value!r}") from None


def parse_pop(resp: RemotingCommand, broker_name: str) -> PopAnswer:
    """POP_MESSAGE's answer as ``processPopResponse`` reads it; every FOUND message gets its handle
    (its own POP_CK if the record carries one, else built from the header: the start offset of its
    ``type@queueId``, the header's popTime / invisibleTime / reviveQid, its queue offset)."""
    what = "POP_MESSAGE"
    status = POP_STATUS.get(resp.code)
    if status is None:
        raise refusal(resp, what)
    header = {n: _int(resp, what, n) for n in ("popTime", "invisibleTime", "reviveQid", "restNum")}
    infos = {n: resp.ext(n) for n in ("startOffsetInfo", "msgOffsetInfo", "orderCountInfo")}
    try:
        starts = parse_start_offset_info(infos["startOffsetInfo"])
        parse_msg_offset_info(infos["msgOffsetInfo"])
        counts = parse_order_count_info(infos["orderCountInfo"])
    except ExtraInfoError as exc:
        raise ResponseMalformed(what, exc.field, exc.reason) from None
    popped: list[Popped] = []
    if status is PopStatus.FOUND:
        for m in messages_of(resp.body, what):
            own = m.properties.get(PROPERTY_POP_CK)
            if own is not None:
                try:
                    handle = ExtraInfo.split(own)
                except ExtraInfoError as exc:
                    raise ResponseMalformed(what, f"{PROPERTY_POP_CK}.{exc.field}", exc.reason) from None
            else:
                key = f"{topic_type(m.topic).value}@{m.queue_id}"
                if key not in starts:
                    raise ResponseMalformed(what, "startOffsetInfo", f"no start offset for {key}")
                handle = ExtraInfo(starts[key], header["popTime"], header["invisibleTime"], header["reviveQid"],
                                   topic_type(m.topic), broker_name, m.queue_id, m.queue_offset)
            count = counts.get(f"{handle.topic_type.value}@qo{m.queue_id}%{m.queue_offset}",
                               counts.get(f"{handle.topic_type.value}@{m.queue_id}"))
            record = m
            if count:  # processPopResponse: an orderly message's reconsume times = its order count
                m = attrs.evolve(m, reconsume_times=count)
            popped.append(Popped(m, handle, own is not None, count, record))
    return PopAnswer(resp.code, status, resp.remark, header["popTime"], header["invisibleTime"],
                     header["reviveQid"], header["restNum"], infos["startOffsetInfo"], infos["msgOffsetInfo"],
                     infos["orderCountInfo"], tuple(popped))


def parse_ack(resp: RemotingCommand) -> tuple[int, str | None]:
    """ACK_MESSAGE / BATCH_ACK_MESSAGE: (code, remark); 0 is OK, any other code the client's NO_EXIST."""
    return resp.code, resp.remark


@attrs.frozen
class ChangeAnswer:
    code: int
    remark: str | None
    handle: ExtraInfo | None  # the new handle (SUCCESS only)


def parse_change_invisible(resp: RemotingCommand, old: PopHandle) -> ChangeAnswer:
    """CHANGE_MESSAGE_INVISIBLETIME's answer; on SUCCESS the new handle as ``changeInvisibleTimeAsync``
    builds it: ck offset = the message's offset, the answer's popTime / invisibleTime / reviveQid."""
    what = "CHANGE_MESSAGE_INVISIBLETIME"
    if resp.code != 0:
        return ChangeAnswer(resp.code, resp.remark, None)
    pop_time, invisible, revive = (_int(resp, what, n) for n in ("popTime", "invisibleTime", "reviveQid"))
    old = ExtraInfo.of(old)
    new = ExtraInfo(old.offset, pop_time, invisible, revive, old.topic_type, old.broker_name, old.queue_id,
                    old.offset)
    return ChangeAnswer(resp.code, resp.remark, new)



# ----------------------------------------------------------------------------------------------
# the broker's side (``rmqspec serve``): a pop answer's header from the model's result


def pop_answer_ext(result: PopResult) -> dict[str, str]:
    """PopMessageProcessor's response header for ``result``: popTime, invisibleTime, reviveQid, restNum
    (not modelled: 0), startOffsetInfo and msgOffsetInfo per ``type queueId`` read (in the order first
    read), and, for an orderly pop, orderCountInfo (empty when nothing was found, as 5.3.3):
    ``type qo<queueId>%<offset> count`` for each message handed out before, then ``type queueId <least
    count>`` (ConsumerOrderInfoManager.update's build; 5.3.3 wrote ``0 0 0`` and ``0 qo0%1 1;0 0 1``).
    ``parse_pop`` reads it back into the same handles. The codes, remarks and ext names are held to
    ``tests/remoting/fixtures/pop_answers_5.3.3.json`` (recorded from real 5.3.3)."""
    starts: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], list[int]] = {}
    counts: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for p in result.messages:
        h = p.handle
        key = (str(h.retry), h.queue_id)
        starts.setdefault(key, h.ck_queue_offset)
        offsets.setdefault(key, []).append(h.queue_offset)
        if h.order:
            counts.setdefault(key, []).append((h.queue_offset, p.order_count or 0))
    ext = {"popTime": str(result.pop_time), "invisibleTime": str(result.invisible_time),
           "reviveQid": str(result.revive_qid), "restNum": "0",
           "startOffsetInfo": join_offset_info((TopicType(k), q, v) for (k, q), v in starts.items()),
           "msgOffsetInfo": join_offset_info((TopicType(k), q, v) for (k, q), v in offsets.items())}
    if result.revive_qid == POP_ORDER_REVIVE_QUEUE:  # an orderly pop: always there, empty when nothing
        items: list[tuple[TopicType, int | str, int]] = []
        for (k, q), pairs in counts.items():
            items += [(TopicType(k), f"qo{q}%{o}", c) for o, c in pairs if c > 0]
            items.append((TopicType(k), q, min(c for _, c in pairs)))
        ext["orderCountInfo"] = join_offset_info(items)
    return ext
