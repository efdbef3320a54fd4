"""``rmqspec serve``'s broker-side assignment (RocketMQ 5.x): QUERY_ASSIGNMENT 400 and
SET_MESSAGE_REQUEST_MODE 401, as 5.3.3's ``QueryAssignmentProcessor`` answers them.

Theory of operation
-------------------
The 5.x remoting push consumer with ``setClientRebalance(false)`` (and neither orderly nor broadcasting:
5.3.3's ``RebalancePushImpl.clientRebalance``) does not allocate queues itself: each rebalance sends
QUERY_ASSIGNMENT (a JSON ``QueryAssignmentRequestBody``: topic, consumerGroup, clientId, strategyName,
messageModel) and consumes what the broker assigns, by pull or by pop as each assignment's ``mode`` says.
The mode is kept per (topic, group) by SET_MESSAGE_REQUEST_MODE (the admin's
``DefaultMQAdminExt.setMessageRequestMode``; a JSON ``SetMessageRequestModeRequestBody``: topic,
consumerGroup, mode, popShareQueueNum) and persisted, as 5.3.3's ``MessageRequestModeManager`` does, in
``<store>/config/messageRequestMode.json`` (``{"messageRequestModeMap": {topic: {group: body}}}``),
read back when the server starts on that store.

- SET_MESSAGE_REQUEST_MODE: a retry topic (``%RETRY%``) → NO_PERMISSION "retry topic is not allowed to set
  mode"; an unknown topic → TOPIC_NOT_EXIST "topic[T] not exist"; the group looked up as
  ``findSubscriptionGroupConfig`` does (auto-created: ``ServedBroker.ensure_group``); else SUCCESS, no
  remark, the mode stored and the file rewritten.
- QUERY_ASSIGNMENT: the stored mode, else PULL for a retry topic and the broker's
  ``defaultMessageRequestMode`` (PULL) otherwise (a POP default takes ``defaultPopShareQueueNum``, −1).
  BROADCASTING: every queue of the topic. CLUSTERING: the topic's queues (unknown topic: no
  assignments, the body ``{}``, which the client reads as "no answer"), the group's client ids
  (``ClientRegistry``; none: ``{}``), then, in POP mode, ``allocate4Pop``: with popShareQueueNum ≤ 0 or
  ≥ clients − 1, every queue as queue id −1 (the client pops every queue of the broker in one request);
  otherwise the strategy's own queues plus those of the popShareQueueNum clients after it (more clients
  than queues: the one queue at the client's index modulo the queue count); in PULL mode the strategy's
  allocation (``model/allocate.py``: AVG, AVG_BY_CIRCLE; another name: ``{}``). Each assignment carries
  the mode; SUCCESS, no remark.

Both codes are answered only under a 5.x profile (``Version.pop``); 4.9.8 has neither, so the server then
answers REQUEST_CODE_NOT_SUPPORTED as for any unknown code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs

from rmqspec.model.allocate import STRATEGIES
from rmqspec.model.message import MessageQueue
from rmqspec.model.results import ResponseCode
from rmqspec.remoting import bodies
from rmqspec.remoting.bodies import BodyError
from rmqspec.remoting.codes import RequestCode, unsupported_remark
from rmqspec.remoting.command import RemotingCommand, response_to
from rmqspec.remoting.context import Ctx, ok, refuse

ASSIGN_CODES = frozenset({RequestCode.QUERY_ASSIGNMENT, RequestCode.SET_MESSAGE_REQUEST_MODE})
RETRY_PREFIX = "%RETRY%"
PULL, POP = "PULL", "POP"
DEFAULT_MODE = PULL  # BrokerConfig.defaultMessageRequestMode
DEFAULT_POP_SHARE_QUEUE_NUM = -1  # BrokerConfig.defaultPopShareQueueNum
MODE_FILE = Path("config") / "messageRequestMode.json"  # BrokerPathConfigHelper.getMessageRequestModePath


@attrs.frozen
class RequestMode:
    """One ``SetMessageRequestModeRequestBody``."""

    topic: str
    group: str
    mode: str = PULL
    pop_share_queue_num: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"consumerGroup": self.group, "mode": self.mode, "popShareQueueNum": self.pop_share_queue_num,
                "topic": self.topic}


@attrs.define
class RequestModes:
    """The request modes by (topic, group), persisted under ``store_dir`` when there is one."""

    store_dir: str
    modes: dict[tuple[str, str], RequestMode] = attrs.field(factory=dict)

    @classmethod
    def load(cls, store_dir: str) -> RequestModes:
        got = cls(store_dir)
        path = got.path
        if path is not None and path.is_file():
            doc = json.loads(path.read_text(encoding="utf-8") or "{}")
            for topic, groups in (doc.get("messageRequestModeMap") or {}).items():
                for group, body in groups.items():
                    got.modes[(topic, group)] = RequestMode(topic, group, str(body.get("mode", PULL)),
                                                            int(body.get("popShareQueueNum", 0)))
        return got

    @property
    def path(self) -> Path | None:
        return Path(self.store_dir) / MODE_FILE if self.store_dir else None

    def set(self, mode: RequestMode) -> None:
        self.modes[(mode.topic, mode.group)] = mode
        path = self.path
        if path is None:
            return
        doc: dict[str, dict[str, Any]] = {}
        for (topic, group), m in sorted(self.modes.items()):
            doc.setdefault(topic, {})[group] = m.as_json()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps({"messageRequestModeMap": doc}, indent=4), encoding="utf-8")
        os.replace(tmp, path)

    def get(self, topic: str, group: str) -> RequestMode:
        """The stored mode, else the broker's default (QueryAssignmentProcessor.queryAssignment)."""
        found = self.modes.get((topic, group))
        if found is not None:
            return found
        if topic.startswith(RETRY_PREFIX):
            return RequestMode(topic, group, PULL)
        share = DEFAULT_POP_SHARE_QUEUE_NUM if DEFAULT_MODE == POP else 0
        return RequestMode(topic, group, DEFAULT_MODE, share)


def request_modes(ctx: Ctx) -> RequestModes:
    """The server's request modes, read from its store on first use."""
    modes = getattr(ctx, "request_modes", None)
    if modes is None:
        modes = RequestModes.load(ctx.settings.store_dir)
        ctx.request_modes = modes
    return modes


def _gate(ctx: Ctx, req: RemotingCommand) -> RemotingCommand | None:
    if ctx.config.behaviour.pop:
        return None
    return response_to(req, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, unsupported_remark(req.code))


def _str(doc: dict[str, Any], key: str, what: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str):
        raise BodyError(0, f"{what} {key}: expected a string")
    return value


def set_message_request_mode(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    if (refused := _gate(ctx, req)) is not None:
        return refused
    doc = bodies.loads_object(req.body, "SetMessageRequestModeRequestBody")
    topic = _str(doc, "topic", "SetMessageRequestModeRequestBody")
    if topic.startswith(RETRY_PREFIX):
        return refuse(req, ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
    if ctx.served.queue_nums(topic) is None:
        return refuse(req, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    group = _str(doc, "consumerGroup", "SetMessageRequestModeRequestBody")
    ctx.served.ensure_group(group)
    mode = doc.get("mode", PULL)
    if mode not in (PULL, POP):
        raise BodyError(0, f"SetMessageRequestModeRequestBody mode: {mode!r} is not PULL or POP")
    share = doc.get("popShareQueueNum", 0)
    if type(share) is not int:
        raise BodyError(0, "SetMessageRequestModeRequestBody popShareQueueNum: expected an integer")
    request_modes(ctx).set(RequestMode(topic, group, mode, share))
    return response_to(req, ResponseCode.SUCCESS, None)


def allocate_for_pop(strategy_name: str, client_id: str, mq_all: list[MessageQueue], cid_all: list[str],
                     share: int) -> list[MessageQueue]:
    """QueryAssignmentProcessor.allocate4Pop over the sorted queues and client ids."""
    if share <= 0 or share >= len(cid_all) - 1:
        return [MessageQueue(mq.topic, -1, mq.broker_name) for mq in mq_all]
    strategy = STRATEGIES[strategy_name]
    if len(cid_all) > len(mq_all):
        if client_id not in cid_all:
            return []
        return [mq_all[cid_all.index(client_id) % len(mq_all)]]
    got = list(strategy(client_id, mq_all, cid_all))
    if client_id in cid_all:
        index = cid_all.index(client_id)
        for _ in range(share):
            index = (index + 1) % len(cid_all)
            got += strategy(cid_all[index], mq_all, cid_all)
    return got


def _java_sorted_ids(ids: list[str]) -> list[str]:
    return sorted(ids, key=lambda s: [ord(c) for c in s])  # String.compareTo: UTF-16 code units


def query_assignment(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    if (refused := _gate(ctx, req)) is not None:
        return refused
    what = "QueryAssignmentRequestBody"
    doc = bodies.loads_object(req.body, what)
    topic, group = _str(doc, "topic", what), _str(doc, "consumerGroup", what)
    client_id, strategy = str(doc.get("clientId") or ""), str(doc.get("strategyName") or "")
    model = doc.get("messageModel") or "CLUSTERING"
    mode = request_modes(ctx).get(topic, group)
    queues = _assigned(ctx, topic, group, client_id, strategy, str(model), mode)
    if queues is None:
        return ok(req, body=b"{}")
    assignments = [{"messageQueue": {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic},
                    "mode": mode.mode} for mq in sorted(set(queues), key=lambda q: (q.broker_name, q.queue_id))]
    return ok(req, body=bodies.dumps({"messageQueueAssignments": assignments}))


def _assigned(ctx: Ctx, topic: str, group: str, client_id: str, strategy: str, model: str,
              mode: RequestMode) -> list[MessageQueue] | None:
    """doLoadBalance: the queues assigned, or None (no answer)."""
    nums = ctx.served.queue_nums(topic)
    if nums is None:
        return None
    name = ctx.settings.broker_name
    mq_all = [MessageQueue(topic, q, name) for q in range(nums)]
    if model == "BROADCASTING":
        return mq_all
    cid_all = _java_sorted_ids(list(ctx.clients.consumer_ids(group) or []))
    if not cid_all or strategy not in STRATEGIES:
        return None
    try:
        if mode.mode == POP:
            return allocate_for_pop(strategy, client_id, mq_all, cid_all, mode.pop_share_queue_num)
        return list(STRATEGIES[strategy](client_id, mq_all, cid_all))
    except ValueError:  # an empty client id: the allocation throws, the processor answers no assignment
        return None
