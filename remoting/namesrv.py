"""The name server of ``rmqspec serve``: routes of the one served broker.

Theory of operation
-------------------
A real name server learns topics from broker registrations (every 30 s and
after each topic change); this one reads the served broker's topic table at
the moment it is asked, so a topic is routable as soon as the broker has it.
Answers follow RocketMQ 4.9.8's ``namesrv/processor/DefaultRequestProcessor``:

- GET_ROUTEINFO_BY_TOPIC 105: ``TopicRouteData`` with one broker (id 0 at
  ``brokerIP1:listenPort``) and one queue data (perm 6; ``TBW102`` perm 7 with 8
  queues, answered although the broker never stores it). fastjson writes the
  integer keys of ``brokerAddrs`` bare unless the request version is at least
  V4_9_4 (ordinal 401) or ``acceptStandardJsonOnly`` is true; keys are sorted
  as ``SerializerFeature.MapSortField`` does. An unknown topic: TOPIC_NOT_EXIST
  17 with "No topic route info in name server for the topic: X" + the FAQ line.
- GET_BROKER_CLUSTER_INFO 106: ``ClusterInfo``, integer keys always bare.

Any other code is REQUEST_CODE_NOT_SUPPORTED (3), answered by the server.
"""

from __future__ import annotations

from typing import Any

from rmqspec.model.results import BrokerError, ResponseCode
from rmqspec.remoting import bodies
from rmqspec.remoting.command import VERSION_STANDARD_JSON, RemotingCommand
from rmqspec.remoting.context import Ctx, ok
from rmqspec.remoting.fields import get_str
from rmqspec.remoting.served import AUTO_CREATE_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS

PERM_READ_WRITE = 6
PERM_INHERIT_READ_WRITE = 7


def route_data(ctx: Ctx, topic: str) -> dict[str, Any] | None:
    """The ``TopicRouteData`` of ``topic`` (integer keys as ints), or None when unknown."""
    if topic == AUTO_CREATE_TOPIC:
        nums, perm = DEFAULT_TOPIC_QUEUE_NUMS, PERM_INHERIT_READ_WRITE
    else:
        found = ctx.served.queue_nums(topic)
        if found is None:
            return None
        nums, perm = found, PERM_READ_WRITE
    s = ctx.settings
    return {
        "brokerDatas": [{"brokerAddrs": s.broker_addrs, "brokerName": s.broker_name, "cluster": s.cluster}],
        "filterServerTable": {},
        "queueDatas": [{"brokerName": s.broker_name, "perm": perm, "readQueueNums": nums, "topicSysFlag": 0,
                        "writeQueueNums": nums}],
    }


def route_info(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    topic = get_str(req, "topic")
    data = route_data(ctx, topic)
    if data is None:
        raise BrokerError(ResponseCode.TOPIC_NOT_EXIST,
                          f"No topic route info in name server for the topic: {topic}{ctx.faq}")
    standard = req.version >= VERSION_STANDARD_JSON or req.ext_bool("acceptStandardJsonOnly")
    return ok(req, body=bodies.dumps(data, bare_int_keys=not standard))


def cluster_info(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    s = ctx.settings
    doc = {
        "brokerAddrTable": {s.broker_name: {"brokerAddrs": s.broker_addrs, "brokerName": s.broker_name,
                                            "cluster": s.cluster}},
        "clusterAddrTable": {s.cluster: [s.broker_name]},
    }
    return ok(req, body=bodies.dumps(doc, bare_int_keys=True))
