"""rmqspec.model — the abstract executable model of RocketMQ 4.9 message semantics.

Pure Python + attrs: value types, the ``Broker`` protocol, the model broker,
the reference client and the finite lifecycles. No files, no bytes.
"""

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import Clock, ManualClock, WallClock
from rmqspec.model.config import BrokerConfig, parse_delay_levels
from rmqspec.model.events import ListRecorder, NullRecorder, Recorder, TraceEvent
from rmqspec.model.javahash import java_string_hash
from rmqspec.model.message import (
    SYSTEM_PROPERTY_NAMES,
    InvalidMessage,
    Message,
    MessageQueue,
    StoredMessage,
    decode_properties,
    encode_properties,
)
from rmqspec.model.model_factory import factory
from rmqspec.model.protocol import Broker, Capability
from rmqspec.model.results import (
    CheckRequest,
    PullResult,
    PullStatus,
    ResponseCode,
    SendResult,
    SendStatus,
    TxnAction,
)

__all__ = [
    "SYSTEM_PROPERTY_NAMES",
    "Broker",
    "BrokerConfig",
    "Capability",
    "CheckRequest",
    "Clock",
    "InvalidMessage",
    "ListRecorder",
    "ManualClock",
    "Message",
    "MessageQueue",
    "ModelBroker",
    "NullRecorder",
    "PullResult",
    "PullStatus",
    "Recorder",
    "ResponseCode",
    "SendResult",
    "SendStatus",
    "StoredMessage",
    "TraceEvent",
    "TxnAction",
    "WallClock",
    "decode_properties",
    "encode_properties",
    "factory",
    "java_string_hash",
    "parse_delay_levels",
]
