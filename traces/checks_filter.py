"""Filter detectors (issue 15, SPEC §8.1): subscriptions of a group's clients against what they got.

Theory of operation
-------------------
A client's subscription is read from the ``detail`` of its ``deliver`` / ``consume`` rows:
``subscription`` (the expression), ``expression_type`` (``TAG`` when absent, or ``SQL92``), and the
message's ``tags`` / ``properties`` (or those of any ``send`` / ``store`` / ``deliver`` row of the same
msg_key that carries them). Matching is ``model.pullfilter.subscription_matches``: the client's exact
tag check, or the 4.9.8 SQL92 evaluation. Rows without these details are not judged.

- SUBSCRIPTION_INCONSISTENT (observation): two clients of one group show different subscriptions
  for one topic (RocketMQ's broker keeps one subscription per group and topic, the heartbeated one
  with the greatest subVersion — ``model/subscriptions.py``: the group then filters with an
  expression some clients did not ask for, seeds "订阅关系一致");
- FILTER_MISMATCH: a SUCCESS ``consume`` of a message its client's subscription does not select;
- FILTER_SKIPPED: on a group that filters a topic (a SQL92 or a non-``*`` tag subscription), a message
  of that topic with known attributes that some client's subscription of the group selects, passed by
  a ``commit_offset`` of the group on its queue (offset > the message's queue offset) without having
  been delivered (a ``deliver`` naming the client, or its SUCCESS ``consume``) before that commit to a
  client of the group whose subscription selects it.

``filter_exempt`` names the (group, msg_key) that LOST must not judge: messages no subscription of a
filtering group selects (filtered, as asked), messages of a topic a group filters whose attributes no
row states (whether the group wants them is unknown), and the FILTER_SKIPPED ones (reported under that
code).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rmqspec.model.pullfilter import subscription_matches
from rmqspec.model.sql92 import is_tag_type
from rmqspec.properties.codes import Code, ObservationCode
from rmqspec.traces.checks_common import Finding, Trace, delayed_send, detail_of, has, observation, violation

Sub = tuple[str, str]  # (subscription, expression_type)


def _sub_of(row: Mapping[str, Any]) -> Sub | None:
    d = detail_of(row)
    sub = d.get("subscription")
    if not isinstance(sub, str):
        return None
    kind = d.get("expression_type")
    return sub, kind if isinstance(kind, str) and kind else "TAG"


def filtering(sub: Sub) -> bool:
    """A subscription that selects less than everything."""
    text, kind = sub
    return not is_tag_type(kind) or text.strip() not in ("", "*")


def _attrs(trace: Trace) -> dict[str, tuple[Any, Any]]:
    """msg_key -> (tags, properties) from the first row whose detail carries them."""
    out: dict[str, tuple[Any, Any]] = {}
    for _, row in trace.of("send", "store", "deliver", "consume"):
        key = row.get("msg_key")
        if key is None or key in out:
            continue
        d = detail_of(row)
        if "properties" in d or "tags" in d:
            props = d.get("properties")
            out[key] = (d.get("tags"), props if isinstance(props, Mapping) else {})
    return out


def client_subs(trace: Trace) -> dict[tuple[str, str], dict[str, tuple[Sub, int]]]:
    """(group, topic) -> client -> (its first subscription, the seq it was first seen)."""
    out: dict[tuple[str, str], dict[str, tuple[Sub, int]]] = {}
    for _, row in trace.of("deliver", "consume"):
        if not has(row, "group", "topic", "client_id"):
            continue
        sub = _sub_of(row)
        if sub is None:
            continue
        out.setdefault((row["group"], row["topic"]), {}).setdefault(row["client_id"], (sub, row["seq"]))
    return out


def _matches(sub: Sub, attrs: tuple[Any, Any]) -> bool | None:
    return subscription_matches(sub[0], sub[1], attrs[0], attrs[1])


def detect_subscription_inconsistent(trace: Trace) -> Iterator[Finding]:
    """SUBSCRIPTION_INCONSISTENT: one group, one topic, clients with different subscriptions.

    SPEC §8.1 (issue 15): the first client seen with a subscription, then the first row of a client
    whose subscription differs; one observation per (group, topic). seqs = [first, differing].
    """
    for (group, topic), clients in sorted(client_subs(trace).items()):
        seen = sorted(clients.values(), key=lambda v: v[1])
        first_sub, first_seq = seen[0]
        other = next(((s, q) for s, q in seen[1:] if s != first_sub), None)
        if other is not None:
            yield observation(
                ObservationCode.SUBSCRIPTION_INCONSISTENT,
                (first_seq, other[1]),
                {"group": group, "topic": topic},
                f"group {group} subscribes {topic} with {first_sub[0]!r} ({first_sub[1]}) and "
                f"{other[0][0]!r} ({other[0][1]})",
            )


def detect_filter_mismatch(trace: Trace) -> Iterator[Finding]:
    """FILTER_MISMATCH: a SUCCESS consume its client's subscription does not select.

    SPEC §8.1 (issue 15): a ``consume`` with status SUCCESS whose ``detail.subscription`` (and
    ``expression_type``) does not match the message's tags / properties (from the row or any row of
    the msg_key carrying them). seqs = [consume].
    """
    attrs = _attrs(trace)
    for _, row in trace.of("consume"):
        if row["status"] != "SUCCESS" or row.get("msg_key") not in attrs:
            continue
        sub = _sub_of(row)
        if sub is None:
            continue
        if _matches(sub, attrs[row["msg_key"]]) is False:
            yield violation(
                Code.FILTER_MISMATCH,
                (row["seq"],),
                {"group": row["group"], "topic": row["topic"], "msg_key": row["msg_key"]},
                f"{row['client_id']} consumed {row['msg_key']}, which its {sub[1]} subscription {sub[0]!r} "
                "does not select",
            )


def _skipped(trace: Trace) -> list[tuple[str, str, str, int, int]]:
    """(group, topic, msg_key, message seq, commit seq) of every FILTER_SKIPPED, in commit order."""
    attrs = _attrs(trace)
    subs = client_subs(trace)
    filtering_groups = {gt: c for gt, c in subs.items() if any(filtering(s) for s, _ in c.values())}
    if not filtering_groups:
        return []
    # messages by queue: (topic, queue) -> [(queue_offset, msg_key, seq)] (store rows, else sends neither
    # delayed nor timed)
    placed: dict[tuple[Any, Any], dict[str, tuple[int, int]]] = {}
    for _, row in trace.of("store", "send"):
        if not has(row, "topic", "queue_id", "queue_offset", "msg_key") or row["msg_key"] not in attrs:
            continue
        if delayed_send(row) or (row["event"] == "send" and row.get("deliver_ts") is not None):
            continue  # a delayed or timer send's position is its waiting copy's
        place = placed.setdefault((row["topic"], row["queue_id"]), {})
        place.setdefault(row["msg_key"], (row["queue_offset"], row["seq"]))
    # (group, key) -> [(seq, client)]: a deliver naming the client, or the client's SUCCESS consume (it had the
    # message: a trace whose deliver rows name only the group — a broker's — still shows who got it)
    delivered: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for _, row in trace.of("deliver", "consume"):
        if row["event"] == "consume" and row.get("status") != "SUCCESS":
            continue
        if has(row, "group", "msg_key", "client_id"):
            delivered.setdefault((row["group"], row["msg_key"]), []).append((row["seq"], row["client_id"]))
    out: list[tuple[str, str, str, int, int]] = []
    reported: set[tuple[str, str]] = set()
    for _, row in trace.of("commit_offset"):
        if not has(row, "group", "topic", "queue_id", "queue_offset"):
            continue
        clients = filtering_groups.get((row["group"], row["topic"]))
        if clients is None:
            continue
        for key, (offset, mseq) in sorted(placed.get((row["topic"], row["queue_id"]), {}).items(),
                                          key=lambda kv: kv[1]):
            if offset >= row["queue_offset"] or mseq > row["seq"] or (row["group"], key) in reported:
                continue
            wanted = {c for c, (s, _) in clients.items() if _matches(s, attrs[key]) is True}
            if not wanted:
                continue
            got = any(seq < row["seq"] and c in wanted for seq, c in delivered.get((row["group"], key), ()))
            if not got:
                reported.add((row["group"], key))
                out.append((row["group"], row["topic"], key, mseq, row["seq"]))
    return out


def detect_filter_skipped(trace: Trace) -> Iterator[Finding]:
    """FILTER_SKIPPED: a message some client of a filtering group wants, committed past undelivered.

    SPEC §8.1 (issue 15): on a group with a SQL92 or non-``*`` tag subscription for the topic, a
    message of the topic (``store``, else a ``send`` neither delayed nor timed, with known tags / properties) that
    some client's subscription of the group selects, passed by a ``commit_offset`` of the group on its
    queue before being delivered to any client of the group whose subscription selects it. One
    finding per (group, msg_key). seqs = [store/send, commit_offset].
    """
    for group, topic, key, mseq, cseq in _skipped(trace):
        yield violation(
            Code.FILTER_SKIPPED,
            (mseq, cseq),
            {"group": group, "topic": topic, "msg_key": key},
            f"{group} committed past {key}, which a client's subscription selects, without delivering it "
            "to such a client",
        )


def filter_exempt(trace: Trace) -> set[tuple[str, str]]:
    """(group, msg_key) LOST does not judge (see the module docstring), and those whose message
    attributes no row states on a topic the group filters (whether the group wants the message is
    unknown: not judged)."""
    attrs = _attrs(trace)
    out = {(g, k) for g, _t, k, _m, _c in _skipped(trace)}
    subs = client_subs(trace)
    filters: dict[Any, list[tuple[str, list[Sub]]]] = {}  # topic -> (filtering group, its clients' subs)
    for (group, t), clients in subs.items():
        if any(filtering(s) for s, _ in clients.values()):
            filters.setdefault(t, []).append((group, [s for s, _ in clients.values()]))
    if not filters:
        return out
    topic_of: dict[Any, Any] = {}  # msg_key with attributes -> the topic of its first send / store
    unknown: set[tuple[Any, Any]] = set()  # (msg_key, topic) of messages no row states attributes of
    for _, row in trace.of("send", "store", "txn_end"):
        key, topic = row.get("msg_key"), row.get("topic")
        if key is None or topic is None:
            continue
        if key not in attrs:
            if row["event"] != "txn_end" or row.get("status") == "COMMIT":
                unknown.add((key, topic))
        elif row["event"] != "txn_end":
            topic_of.setdefault(key, topic)
    for key, topic in topic_of.items():
        for group, wanted in filters.get(topic, ()):
            if not any(_matches(s, attrs[key]) is True for s in wanted):
                out.add((group, key))
    for key, topic in unknown:
        out.update((group, key) for group, _ in filters.get(topic, ()))
    return out
