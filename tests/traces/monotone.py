"""What the monotonicity tests share: the fields a trace may lose, losing them, comparing findings.

Droppable units of a row: every non-null column but ``seq``, ``ts``, ``event`` (SPEC §8's only
required ones) and the extra ``trace_id``, every key of a structured ``detail``, and the whole
``detail``. Left out (``KEPT``) are the few absent values SPEC §8 and ``traces/README.md`` give a
meaning, so that dropping them changes what the trace says rather than hiding it
(``traces/unjudged.py`` lists them too):

- a ``send``'s status that does not acknowledge (SPEC §8.1: a send without status is acknowledged);
- a ``crash``'s ``detail.at_risk`` (absent: no key at risk);
- a ``send_back``'s ``detail.max`` (absent: the request carried none, the group's max applies);
- a ``deliver`` / ``consume``'s ``detail.subscription`` (absent: the row shows none; a group's
  subscriptions are those its rows show) and ``detail.expression_type`` (absent: TAG);
- a message's ``detail.tags`` or ``detail.properties`` alone (absent: it has none) — dropping both
  (the whole detail) is a unit: then no row states the message's attributes, which is unknown;
- a ``send``'s ``delay_level`` (absent: not delayed) and ``deliver_ts`` (absent: not a timer message,
  stored in its topic at once — a store of its msg_key in rmq_sys_wheel_timer still says it is one); a
  ``txn_end``'s topic (absent: a COMMIT commits to its half's topic, as LOST reads it — the broker's own
  traces never carry it);
- a consumer's row's ``detail.message_model`` (absent: clustering; a broadcasting client's rows say
  BROADCASTING, and LOST, DUPLICATED, OFFSET_OVERRUN and the orderly rules read them per client), and a
  ``commit_offset``'s ``detail.from_where`` (absent: a commit, not where a broadcasting client's run began);
- a routed producer's ``send``'s ``detail.latency_max`` and ``detail.not_available_duration`` (both absent:
  4.9.8's fault tables, which the producer writes no row of; one without the other is not judged).

Comparing findings (``added``): a finding after the drop is *already there* when a finding before it
has the same code and the same subject, and names every key the later one names with the same value
(a key the drop made unknown may be missing). The subject of a per-event code is the offending row
(the last seq): the proving rows before it may differ, since a drop can make the first proof
unreadable while a later one still proves the same claim. The subject of a per-key code — one
finding per key by definition (traces/README.md) — is that key: LOST (group, msg_key, topic),
RECOVERED (msg_key, proven at its first deliver), TXN_UNRESOLVED (txn_id), SUBSCRIPTION_INCONSISTENT
(group, topic), FILTER_SKIPPED (group, msg_key), TIMER_UNFIRED (msg_key). This is sound: it never calls a
claim old unless the same claim about the same row or key was made before; it is strict enough that the drops of
issue 41 (a schedule_fire's reconsume_times read as 0, a consume's offset skipped) all show up as
added findings (``tests/traces/test_monotonic.py`` pins that).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rmqspec.properties.codes import AuditParams
from rmqspec.traces.checker import CheckReport, check
from rmqspec.traces.checks_common import ACKED_SEND_STATUSES, detail_of

REQUIRED = ("seq", "ts", "event", "trace_id")
# The rows a broadcasting client marks (``checks_common.broadcasting_row``).
BROADCAST_EVENTS = ("deliver", "consume", "commit_offset", "orderly_start", "orderly_end")
KEPT: frozenset[tuple[str, str]] = frozenset(
    {
        ("crash", "detail"),
        ("crash", "detail.at_risk"),
        ("send_back", "detail"),
        ("send_back", "detail.max"),
        ("deliver", "detail.expression_type"),
        ("consume", "detail.expression_type"),
        ("send", "delay_level"),
        ("send", "deliver_ts"),
        ("txn_end", "topic"),
        ("deliver", "detail.subscription"),
        ("consume", "detail.subscription"),
        *((event, f"detail.{key}") for event in ("send", "store", "deliver", "consume")
          for key in ("tags", "properties")),
        *((event, "detail.message_model") for event in BROADCAST_EVENTS),
        ("commit_offset", "detail.from_where"),
        ("orderly_end", "status"),  # absent: not a ROLLBACK (ORDER_KEY_REORDERED compares on)
        ("send", "detail.latency_max"),  # absent with the other: 4.9.8's fault tables (PRODUCER_FAULT_WINDOW)
        ("send", "detail.not_available_duration"),
    }
)
# A message's attributes may go together (the whole detail): its rows then state none, which the
# filter rules read as unknown.
_ATTRIBUTES = ("tags", "properties")
PER_KEY: dict[str, tuple[str, ...]] = {
    "LOST": ("group", "msg_key", "topic"),
    "RECOVERED": ("msg_key",),
    "TXN_UNRESOLVED": ("txn_id",),
    "SUBSCRIPTION_INCONSISTENT": ("group", "topic"),
    "FILTER_SKIPPED": ("group", "msg_key"),
    "TIMER_UNFIRED": ("msg_key",),
}

Unit = tuple[int, str]  # (row index, column name | "detail" | "detail.<key>")
Claim = tuple[str, tuple[int, ...], tuple[tuple[str, Any], ...]]  # code, seqs, the keys it names


def units(rows: Sequence[Mapping[str, Any]]) -> list[Unit]:
    """Every droppable unit of ``rows`` (see the module docstring)."""
    out: list[Unit] = []
    for i, row in enumerate(rows):
        event = row["event"]
        for name, value in row.items():
            if name in REQUIRED or value is None:
                continue
            if name == "detail":
                keys = list(detail_of(row))
                out.extend((i, f"detail.{key}") for key in keys if (event, f"detail.{key}") not in KEPT)
                whole = all((event, f"detail.{k}") not in KEPT or k in _ATTRIBUTES for k in keys)
                if whole and (event, "detail") not in KEPT:
                    out.append((i, "detail"))
            elif (event, name) in KEPT or (event == "send" and name == "status" and value not in ACKED_SEND_STATUSES):
                continue
            else:
                out.append((i, name))
    return out


def dropped(rows: Sequence[Mapping[str, Any]], chosen: Iterable[Unit]) -> list[dict[str, Any]]:
    """A copy of ``rows`` without the ``chosen`` units."""
    out = [dict(r) for r in rows]
    for i, name in chosen:
        if name.startswith("detail."):
            rest = {k: v for k, v in detail_of(out[i]).items() if k != name[len("detail."):]}
            out[i]["detail"] = rest or None
        else:
            out[i][name] = None
    return out


def claims(report: CheckReport) -> list[Claim]:
    return [
        (f.code, f.seqs, tuple(sorted((k, v) for k, v in f.keys.items() if v is not None)))
        for f in (*report.violations, *report.observations)
    ]


def _same(after: Claim, before: Claim) -> bool:
    code, seqs, keys = after
    if before[0] != code:
        return False
    if code in PER_KEY:
        return {kv for kv in keys if kv[0] in PER_KEY[code]} <= set(before[2])
    return before[1][-1] == seqs[-1] and set(keys) <= set(before[2])


def added(before: Sequence[Claim], after: Sequence[Claim]) -> list[Claim]:
    """The claims of ``after`` that no claim of ``before`` already makes."""
    return [a for a in after if not any(_same(a, b) for b in before)]


def added_by(rows: Sequence[Mapping[str, Any]], chosen: Sequence[Unit], params: AuditParams,
             before: Sequence[Claim] | None = None) -> list[Claim]:
    """The findings dropping ``chosen`` from ``rows`` adds (``before``: ``rows``' claims, if known)."""
    if before is None:
        before = claims(check(rows, params))
    return added(before, claims(check(dropped(rows, chosen), params)))
