"""SEND_BATCH_MESSAGE for ``MmapBroker``: a batch stored as one append.

Theory of operation
-------------------
``BatchSends`` is a mixin of ``impl.broker.MmapBroker`` (its module holds everything else). It follows
``ModelBroker.send_batch``: the Java client's rules for a batch (``model.message.batch_topic``), the
send target checked as a send's, the batch body (the client's encoding) at most 4 MiB, then every item
planned with its own properties string and the batch's (``model.sendpath.batch_item_properties``, a
name may repeat) and written by ``BrokerLog.append_batch`` into one commitlog file — the next one when
the batch does not fit before the end marker (``MessageStore.put_batch``). The items share one born and
one store timestamp and take consecutive queue offsets; each is a ``store`` and a ``send`` event, in
the model's order. The answer names the first item's offsets and every item's msgId and UNIQ_KEY,
joined by commas, as 4.9.8 answers a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rmqspec.impl.broker_store import PutSpec
from rmqspec.model.message import Message, batch_topic
from rmqspec.model.results import SendResult
from rmqspec.model.sendpath import batch_items


class BatchSends:
    """Mixin: ``send_batch`` on the mmap store (module docstring)."""

    config: Any
    clock: Any
    log: Any
    events: Any

    def send_batch(self, msgs: Sequence[Message], queue_id: int) -> SendResult:
        """SEND_BATCH_MESSAGE: the messages stored as one append (module docstring)."""
        self._require_running()  # type: ignore[attr-defined]
        now = self.clock.now()
        self._reject_when_busy(now)  # type: ignore[attr-defined]
        topic = batch_topic(msgs)
        self._check_send_target(topic, queue_id)  # type: ignore[attr-defined]
        items = batch_items(msgs, lambda m: self._wire_props(m, now), self.config)  # type: ignore[attr-defined]
        wait = msgs[0].waits_for_flush  # MessageBatch.generateFromList takes the first message's WAIT
        specs = [PutSpec(topic=topic, queue_id=queue_id, body=msg.body, flag=msg.flag, born_ts=now, properties=props,
                         wait=wait) for msg, (props, _uniq) in zip(msgs, items, strict=True)]
        keys = [uniq for _props, uniq in items]
        entries = self.log.append_batch(self.log.prepare_batch(specs, now))
        status = self._put_status(wait, now)  # type: ignore[attr-defined]
        for i, (entry, uniq) in enumerate(zip(entries, keys, strict=True)):
            self._written(entry, now)  # type: ignore[attr-defined]
            self.events.send(entry, now, topic, queue_id, uniq, batch=(i, len(entries)), status=status)
        ids = ",".join(self._msg_id(e) for e in entries)  # type: ignore[attr-defined]
        return SendResult(status, ids, ",".join(keys), entries[0].queue_offset,
                          entries[0].commitlog_offset)
