"""What the broker's send path stores for a client's properties (RocketMQ 4.9.8).

Theory of operation
-------------------
A client sends its properties as one string; the broker never stores that string
as it came. B/processor/SendMessageProcessor.asyncSendMessage decodes it
(``MessageDecoder.string2messageProperties``: a pair with an empty value is
dropped), puts ``CLUSTER=<brokerClusterName>`` into the map, and builds the string
to store from the map *without* ``WAIT`` (removed, serialized, put back into the
map: "there is no need to store WAIT=true"). Two later steps re-serialize the map
and so bring ``WAIT`` back:

- CommitLog.asyncPutMessage for a delayed message (DELAY > 0, transaction type
  NOT/COMMIT) adds REAL_TOPIC/REAL_QID and rebuilds the string from the map;
- TransactionalMessageBridge.parseHalfMessageInner (a half message) does the same.

``send_properties`` returns both the map and the string; ``plain_send_properties``
and ``half_send_properties`` pick what each path stores. Every other writer of
the broker (send-back, schedule fire, commit, check re-put, discard) starts from a
message it read back from the store, so it inherits CLUSTER and never sees an
empty value. Verified against the running 4.9.8 broker
(``../shared/rocketmq-notes/results/scenarios.jsonl``: plain copies carry CLUSTER and no
WAIT, delayed copies and halves carry WAIT=true).

The 5.x profiles (``model/versions.py``) differ in three ways, verified against the
5.3.3 source and broker (docs/fidelity.md V1, V4, R5-1): SendMessageProcessor calls
``buildMsgContext`` on every send, which puts ``MSG_REGION=<regionId>`` and
``TRACE_ON=<traceOn>`` into the client's string before it is decoded; the map is
stored with ``WAIT`` (the block that removed it is gone); and a half with a
``UNIQ_KEY`` also gets ``__transactionId__`` (parseHalfMessageInner).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from rmqspec.model.config import BrokerConfig
from rmqspec.model.message import (
    MAX_BODY_BYTES,
    PROPERTY_CLUSTER,
    PROPERTY_MSG_REGION,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    decode_properties,
    encode_properties,
)
from rmqspec.model.results import BrokerError, ResponseCode

# 5.x (model/versions.py): parseHalfMessageInner's TransactionalMessageUtil.TRANSACTION_ID
PROPERTY_TRANSACTION_ID = "__transactionId__"


def received_properties(wire: Mapping[str, str]) -> dict[str, str]:
    """The map the broker decodes from the client's properties string (empty values dropped)."""
    return decode_properties(encode_properties(wire))


def send_properties(wire: Mapping[str, str], config: BrokerConfig) -> tuple[dict[str, str], dict[str, str]]:
    """(map, string) of SendMessageProcessor: CLUSTER added to both, WAIT kept out of the string
    (4.9); 5.x first adds MSG_REGION and TRACE_ON to the client's string and keeps WAIT."""
    behaviour = config.behaviour
    wire = dict(wire)
    if behaviour.region_properties:
        wire[PROPERTY_MSG_REGION] = config.region_id
        wire[PROPERTY_TRACE_SWITCH] = "true" if config.trace_on else "false"
    props = received_properties(wire)
    props[PROPERTY_CLUSTER] = config.broker_cluster_name
    if behaviour.store_wait:
        return props, dict(props)
    string = {k: v for k, v in props.items() if k != PROPERTY_WAIT_STORE_MSG_OK}
    return props, string


def plain_send_properties(wire: Mapping[str, str], config: BrokerConfig, *, delayed: bool) -> dict[str, str]:
    """What a plain send stores: the string, or the map (WAIT back) when CommitLog re-serializes it."""
    props, string = send_properties(wire, config)
    return props if delayed else string


def half_send_properties(wire: Mapping[str, str], config: BrokerConfig) -> dict[str, str]:
    """What a half stores before REAL_TOPIC/REAL_QID: parseHalfMessageInner re-serializes the map
    (5.x first puts ``__transactionId__`` = the UNIQ_KEY, when there is one)."""
    props, _string = send_properties(wire, config)
    uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if config.behaviour.half_transaction_id and uniq:
        props[PROPERTY_TRANSACTION_ID] = uniq
    return props


def batch_item_properties(
    wire: Mapping[str, str], config: BrokerConfig, wait: str | None = "true"
) -> tuple[tuple[str, str], ...]:
    """What a batch item stores (SEND_BATCH_MESSAGE, measured on real 4.9.8): the item's own string as
    the client encoded it — not decoded, so nothing is dropped and WAIT stays — then, after a separator,
    the batch's properties: the Java 4.9.8 client's MessageBatch carries WAIT only, the broker adds
    CLUSTER, and CommitLog.MessageExtBatchEncoder appends the map (``CLUSTER``, ``WAIT`` in its HashMap
    order) to every item. So WAIT appears twice (``KEYS…UNIQ_KEY…WAIT true…TAGS…CLUSTER…WAIT true``);
    readers keep the last value. ``wait``: the batch's WAIT, its first message's (``Message.wait``; None,
    a client that sends none, fidelity B15). The 5.x profiles store the same here (not measured on a 5.x
    broker: docs/fidelity.md B18)."""
    batch = ((PROPERTY_CLUSTER, config.broker_cluster_name),
             *(((PROPERTY_WAIT_STORE_MSG_OK, wait),) if wait is not None else ()))
    return (*wire.items(), *batch)


def batch_items(
    msgs: Sequence[Message], wire_props: Callable[[Message], tuple[dict[str, str], str]], config: BrokerConfig
) -> list[tuple[tuple[tuple[str, str], ...], str]]:
    """Each item of a batch: the properties it stores (``batch_item_properties``, the batch's WAIT its first
    message's) and its UNIQ_KEY (``wire_props``: the broker's, which assigns one to a message without).
    Raises ``BrokerError`` (MESSAGE_ILLEGAL) when the batch body — the client's encoding
    (MessageDecoder.encodeMessages: 22 bytes, the body and the properties string per item) — passes 4 MiB
    (DefaultMessageStore.putMessages)."""
    out, body = [], 0
    for msg in msgs:
        wire, uniq = wire_props(msg)
        out.append((batch_item_properties(wire, config, msgs[0].wait), uniq))
        body += 22 + len(msg.body) + len(encode_properties(wire).encode())
    if body > MAX_BODY_BYTES:
        raise BrokerError(ResponseCode.MESSAGE_ILLEGAL, f"batch body of {body} bytes exceeds {MAX_BODY_BYTES}")
    return out
