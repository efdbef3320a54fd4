"""``RemoteBroker``'s pop (RocketMQ 5.x): the ``PopBroker`` methods over the wire (a mixin of ``adapter.py``).

Theory of operation
-------------------
Declared (``Capability.POP``) when the configuration's profile pops (``Version.pop``: the 5.x profiles);
a 4.9 profile's broker is still asked, and 4.9.8 answers REQUEST_CODE_NOT_SUPPORTED " request type N
not supported" as the model does. Each method is one request built and parsed by ``pop_ops`` (the facts:
``docs/pop-facts.md``) and returns what the model's method returns (``model/broker_pop.py``):

- ``pop`` → POP_MESSAGE 200050 with pollTime 0 (never held: the broker answers at once, as the model,
  which does not long-poll), bornTime from the injected clock. FOUND (0) → ``PopResult`` FOUND with one
  ``PoppedMessage`` per record: the record as the broker wrote it (a retry copy under its original topic,
  the broker's POP_CK in its properties), the handle the 5.x client builds (``pop_ops.parse_pop``; the
  model's ``PopHandle``) and, for an orderly pop, the order count (orderCountInfo; 0 when it names none).
  210 POLLING_TIMEOUT / 19 → POLLING_NOT_FOUND, 209 → POLLING_FULL, with the header's popTime,
  invisibleTime and reviveQid. Any other code is a refusal: ``BrokerError`` with the broker's code and
  remark (``client_ops.refusal``).
- ``ack`` → ACK_MESSAGE 200051 (the topic the handle's message lies in, its queue and offset): the
  answer's code as a ``ResponseCode`` (the remark is not part of the protocol's answer).
- ``batch_ack`` → BATCH_ACK_MESSAGE 200151 (one BatchAck per checkpoint run): the code. No handles: the
  request is still sent (5.3.3 answers NO_MESSAGE 208, as the model).
- ``change_invisible_time`` → CHANGE_MESSAGE_INVISIBLETIME 200053: the new handle as the 5.x client
  builds it (ck offset = the message's offset; the answer's popTime, invisibleTime, reviveQid); a refusal
  raises ``BrokerError``. ``suspend`` is sent only when true (5.5.x's header field; 5.3.3 ignores it).
- SYSTEM_BUSY is sent again (``RemoteBroker._ask``), like every request of the adapter.

``force_pop_random(v)``: a real broker draws its own ``randomQ`` (``random.nextInt(100)``) and nothing on
the wire sets it. The wish is recorded (``pop_random_wishes``, the value per pop that followed it) and
nothing else happens: a lockstep driver must not rely on it (which queue a ``queue_id`` −1 pop starts at,
and whether it reads the retry topic first, are the broker's; judge them as sets, not sequences).

Trace (SPEC §8, when a ``recorder`` is given; the rows ``model/broker_pop.py`` writes, from what the wire
shows, through ``wire_events.WireEvents``): ``pop`` per message handed out (the copy's real topic —
the retry topic for a revived one —, queue, offset; ``deliver_ts`` = the handle's revive time; ``detail``
the handle, the attempt id, the order count), ``ack`` per handle (``status`` the answer's code name: the
wire does not say whether the ack met its checkpoint — the model's ACKED / LATE / UNMATCHED / COMMITTED /
STALE), ``change_invisible`` (``deliver_ts`` the new revive time), and ``revive`` the first time a retry
copy (a handle with the retry flag) is popped: inferred at the pop's time, an upper bound of when the
broker revived it, as ``properties/conform_pop.py`` infers it. Not recordable from the wire: the revive's
own time, the revived original's queue and offsets (only its UNIQ_KEY, topic and the copy's place), a
revive never popped, the pop offset's moves, checkpoints and acks in the revive log, and ``restNum``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from rmqspec.model.pop import INIT_MIN, NORMAL, PopHandle, PoppedMessage, PopResult, real_topic
from rmqspec.model.results import ResponseCode
from rmqspec.remoting import pop_ops as po
from rmqspec.remoting.client_ops import refusal, response_code
from rmqspec.remoting.command import RemotingCommand
from rmqspec.remoting.wire_events import WireEvents


class RemotePop:
    """Mixin of ``RemoteBroker``: pop, ack, batch ack, change invisible time (module docstring)."""

    # provided by RemoteBroker
    broker_name: str
    clock: Any
    wire: WireEvents
    _invoke: Callable[[RemotingCommand], RemotingCommand]

    def _pop_init(self) -> None:
        self.pop_random_wishes: list[int | None] = []  # force_pop_random's values, never applied
        self._revives_seen: set[tuple[str, int, int]] = set()  # retry copies popped: (topic, queue, offset)

    def force_pop_random(self, value: int | None) -> None:
        """Recorded, not applied: a real broker draws its own ``randomQ`` (module docstring)."""
        if value is not None and not 0 <= value < 100:
            raise ValueError(f"randomQ must be in [0, 100), got {value}")
        self.pop_random_wishes.append(value)

    def pop(self, group: str, topic: str, queue_id: int, max_nums: int, invisible_ms: int, order: bool = False,
            attempt_id: str | None = None, expression: str = "*", expression_type: str = "TAG",
            init_mode: int = INIT_MIN) -> PopResult:
        """POP_MESSAGE, answered at once (pollTime 0); a refusal raises ``BrokerError``."""
        cmd = po.pop_request(group, topic, queue_id=queue_id, max_nums=max_nums, invisible_ms=invisible_ms,
                             poll_ms=0, born_ms=self.clock.now(), init_mode=init_mode, exp_type=expression_type,
                             exp=expression, order=order, attempt_id=attempt_id)
        answer = po.parse_pop(self._invoke(cmd), self.broker_name)
        popped = []
        for p in answer.popped:
            handle = p.handle.handle()
            count = (p.order_count or 0) if handle.order else None
            popped.append(PoppedMessage(p.record if p.record is not None else p.message, handle, count))
        result = PopResult(answer.status, tuple(popped), answer.pop_time, answer.invisible_time, answer.revive_qid)
        self._pop_rows(group, topic, result, attempt_id)
        return result

    def _pop_rows(self, group: str, topic: str, result: PopResult, attempt_id: str | None) -> None:
        if not self.wire.enabled:
            return
        for p in result.messages:
            h = p.handle
            where = (real_topic(topic, group, h.retry), h.queue_id, h.queue_offset)
            if h.retry != NORMAL and not h.order and where not in self._revives_seen:
                self._revives_seen.add(where)
                self.wire.revive_seen(result.pop_time, group, p, where[0])
            self.wire.pop(result.pop_time, group, p, where[0], attempt_id)

    def ack(self, group: str, topic: str, handle: PopHandle) -> ResponseCode:
        """ACK_MESSAGE: the answer's code (``topic``: the topic popped)."""
        code = response_code(self._invoke(po.ack_request(group, topic, handle)))
        self.wire.ack(self.clock.now(), group, real_topic(topic, group, handle.retry), handle, code.name, False)
        return code

    def batch_ack(self, group: str, topic: str, handles: Iterable[PopHandle]) -> ResponseCode:
        """BATCH_ACK_MESSAGE: one answer for all the handles."""
        handles = tuple(handles)
        code = response_code(self._invoke(po.batch_ack_request(group, topic, handles)))
        now = self.clock.now()
        for h in handles:
            self.wire.ack(now, group, real_topic(topic, group, h.retry), h, code.name, True)
        return code

    def change_invisible_time(self, group: str, topic: str, handle: PopHandle, invisible_ms: int,
                              suspend: bool = False) -> PopHandle:
        """CHANGE_MESSAGE_INVISIBLETIME: the new handle; a refusal raises ``BrokerError``."""
        cmd = po.change_invisible_request(group, topic, handle, invisible_ms)
        if suspend:  # ChangeInvisibleTimeRequestHeader.suspend (5.5.x)
            cmd = attrs.evolve(cmd, ext_fields={**cmd.ext_fields, "suspend": "true"})
        resp = self._invoke(cmd)
        if resp.code != ResponseCode.SUCCESS:
            raise refusal(resp, "CHANGE_MESSAGE_INVISIBLETIME")
        answer = po.parse_change_invisible(resp, handle)
        assert answer.handle is not None
        new = answer.handle.handle()
        self.wire.change_invisible(self.clock.now(), group, real_topic(topic, group, handle.retry), handle, new)
        return new


__all__ = ["RemotePop"]
