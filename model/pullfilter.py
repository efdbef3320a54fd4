"""How PULL_MESSAGE turns (subscription, expressionType) into the broker's message filter (4.9.8).

Theory of operation
-------------------
``property_filter`` is the SQL92 half of ``PullMessageProcessor``: a tag-type expression
(``TAG``, empty or None) returns ``None`` and the caller keeps the consume-queue tag-hash filter;
otherwise, in the broker's order: an empty expression is ``SUBSCRIPTION_PARSE_FAILED``
(``FilterAPI.build`` throws), ``enablePropertyFilter=false`` is ``SYSTEM_ERROR`` "The broker does not
support consumer to filter message by SQL92", an unknown type or an expression that does not compile
is ``SUBSCRIPTION_PARSE_FAILED`` (the answer of CHECK_CLIENT_CONFIG, which a real consumer gets at
start; see docs/fidelity.md for the raw PULL_MESSAGE path). The returned predicate is evaluated on
every stored message's properties (``ExpressionMessageFilter.isMatchedByCommitLog``; no bloom filter:
a pull that carries its own subscription has no ``ConsumerFilterData`` bit map). With the default
``filterSupportRetry=false`` a retry topic is filtered by the expression of the pull itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rmqspec.model.filterapi import SubscriptionSplitError, build_subscription
from rmqspec.model.results import BrokerError, ResponseCode
from rmqspec.model.sql92 import SQL92, FilterParseError, compile_filter, is_tag_type, matches

# a judge's answer when the subscription itself does not compile
UNJUDGED = None

PARSE_FAILED_REMARK = "parse the consumer's subscription failed"


def disabled_remark(expression_type: str) -> str:
    return f"The broker does not support consumer to filter message by {expression_type}"


def property_filter(
    subscription: str | None, expression_type: str | None, enable_property_filter: bool
) -> Callable[[Mapping[str, str]], bool] | None:
    """The SQL92 predicate of a pull, ``None`` for a tag-type pull; ``BrokerError`` when refused."""
    if is_tag_type(expression_type):
        return None
    assert expression_type is not None
    if not subscription:
        raise BrokerError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, PARSE_FAILED_REMARK)
    if not enable_property_filter:
        raise BrokerError(ResponseCode.SYSTEM_ERROR, disabled_remark(expression_type))
    if expression_type != SQL92:
        raise BrokerError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"no filter registered for type {expression_type}")
    try:
        node = compile_filter(subscription)
    except FilterParseError as e:
        raise BrokerError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(e)) from None
    return lambda props: matches(node, props)


def subscription_matches(subscription: str | None, expression_type: str | None, tags: str | None,
                         properties: Mapping[str, str] | None) -> bool | None:
    """Does a message match a *client's* subscription (what a consumer should get)?

    TAG: ``*`` / empty match all, otherwise the exact tag string must be in the ``||`` set as FilterAPI
    parses it (``model/filterapi.py``; the client re-checks strings after the broker's hash filter:
    ``PullAPIWrapper.processPullResult``); an expression FilterAPI refuses is not judged. SQL92: the
    4.9.8 evaluation on the message's properties (TAGS added from ``tags`` when absent). ``None`` when the
    expression does not compile (nothing to judge against).
    """
    if is_tag_type(expression_type):  # the broker's code set, then the client's string check
        try:
            sub = build_subscription(subscription)
        except SubscriptionSplitError:  # the client could not have subscribed with it
            return UNJUDGED
        return sub.sub_all or (tags is not None and tags in sub.tags)
    if expression_type != SQL92 or not subscription:
        return UNJUDGED
    try:
        node = compile_filter(subscription)
    except FilterParseError:
        return UNJUDGED
    props = dict(properties or {})
    if tags is not None:
        props.setdefault("TAGS", tags)
    return matches(node, props)
