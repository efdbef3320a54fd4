"""What a day's audit carries into the next day's (``rmqspec audit --since``): the rows of open keys.

Theory of operation
-------------------
An incremental audit audits ``R ++ D`` — the rows ``R`` a previous run carried plus the new day
``D`` — with the unchanged rules (the reference checker or the Spark audit), and must report
exactly what an audit of the whole history ``H ++ D`` reports. ``carry_trace(H)`` picks ``R``
from ``H`` (one trace, rows in seq order; ``H`` may itself be an earlier ``R`` plus a day) so
that every rule's state at the end of ``R`` equals its state at the end of ``H``. Rows are kept
per event kind, one reason per rule that reads that kind (``traces/checks_*.py``):

- all ``crash``, ``recover``, ``drain``, ``lock`` and ``unlock`` rows (epochs, at-risk keys, lock
  tables, read across keys: kept whole);
- the ``txn_*`` rows of every transaction (txn_id) but the **closed** ones, whose rows go with their
  msg_key's tombstones: every rule reading them keeps its state per txn_id (resolutions, checks,
  discards, the half copies an op named) or per msg_key (visibility, LOST's COMMIT), so a day that
  names the txn_id or the msg_key pulls them back. A transaction is closed when its rows all
  name one msg_key, a closed one, it was resolved (a COMMIT / ROLLBACK ``txn_end`` or a
  ``txn_discard``), TXN_UNRESOLVED does not report it now (no later drain can make it), and no
  rule reads it across transactions: not the one holding the highest half-queue position so far
  or before a power crash (the bound of ``skipped_halves``), not one of a key a crash lists as at
  risk (the ops a power crash's window counts, ``unseen_ops``) nor one with an op inside such a
  window. A ``txn_*`` row without a txn_id is kept;
- ``send_back``, ``schedule_fire``, ``timer_fire`` and the ``store``s in SCHEDULE_TOPIC_XXXX,
  rmq_sys_wheel_timer and ``%DLQ%`` (``PER_KEY``: retries, dead letters, fires; every rule reading
  them keeps its state per msg_key): with their msg_key (all of an open key's rows are kept; a closed key's are
  tombstones), or kept when they have none;
- ``store``: the last per (topic, queue) (ORDER_QUEUE_GAP) and, per (queue, crashes so far), the
  first SCHEDULE_TOPIC_XXXX store at the highest position (LOST's delay-progress exemption: the
  position a power crash truncates from, whoever's copy held it);
- ``send``: the first per (group, topic, sharding_key, ``detail.route_queues``, queue) (ORDER_KEY_SPLIT:
  a key's queues on a route), and every one with an ``actor`` and a ``detail.tries`` list (PRODUCER_FAULT_WINDOW
  replays a producer's attempts from its first: a routed producer's acknowledged sends are all carried);
- ``consume``: the first per (topic, group) (LOST's consumers) and the orderly owner's last
  SUCCESS of its ownership in each epoch, unless the owner rolled back after it (ORDER_KEY_REORDERED);
- ``deliver``: the pending ones (OFFSET_OVERRUN) and, for a (topic, group) never consumed, the first;
- ``commit_offset``: the last per (group, topic, queue) (OFFSET_LOST) and the highest per
  (group, topic, queue, crashes so far) (LOST's saved-offset exemption);
- ``orderly_start``: the start that opened each still-open window (ORDERLY_CONCURRENT);
- ``replicate`` / ``ha_link`` and a pair's ``store`` / ``send`` (``detail.broker``; issue 43, the pair replay
  ``properties/inv_replay_ha.py``; ``traces/carry_ha.py``): per (trace, broker) the replicate that set the slave's
  end (the last at the highest ``commitlog_offset``), the last replicate naming each commitlog offset (what
  reached the slave), the first replicate without an end or readable records, the last ``ha_link`` that may
  be a disk loss (the epoch), and since it the last master ``store`` per offset, the last store without an
  offset and the last acknowledged send (and SYNC SEND_OK of a waiting message) per msg_key; per trace the
  first ``replicate``, the last ``store`` and the last ``ha_link`` naming no pair (a pair seen later reads
  them). A slave's ``deliver`` only reads: not carried for it;
- every row lacking a field whose absence leaves findings beyond the row itself unjudged
  (``traces/unjudged.lasting_rows``: a key, queue or transaction from that row on, or a rule that
  looks ahead), carried for good, so every later day withholds what an audit of the whole history
  withholds; and the findings an earlier day stored are withheld when a row of the day leaves them
  unjudged (``withheld_out``);
- every row of an **open** msg_key: never sent, stored nor half-sent (UNEXPECTED may still be
  withdrawn), not acknowledged and not a half's (RECOVERED), a half with no COMMIT delivered after
  it (TXN_VISIBLE_BEFORE_COMMIT / TXN_ROLLBACK_VISIBLE: a later COMMIT changes the verdict),
  acknowledged on a topic one of whose consumer groups has neither consumed it nor dead-lettered
  it (LOST), or an acknowledged timer message not fired before the last drain (TIMER_UNFIRED).

A **closed** msg_key (not open) leaves **tombstones** — its ``send``s, ``store``s, ``send_back``s
and ``schedule_fire``s / ``timer_fire``s, its first SUCCESS ``consume`` per group and its closed transactions' rows
— in a second table that is not audited: a day that touches the key (any row with that msg_key:
DUPLICATED, UNEXPECTED, a retry's deliver, a second fire, …; a row naming the txn_id of one of
its transactions; a crash listing it as at risk, whose power-loss window counts its ops) or
gives its topic a new consumer group (LOST for that group, with the saved-offset exemption
judged on its stores) pulls them back (``pull``). A closed key with a row carried for another
rule keeps its tombstones with the rows.

Extra rows kept for one rule never change another's state: they are earlier than the row that
rule keeps, or they are a real consume (which only acknowledges), or they belong to an open key
(kept whole). A trace whose rows carry subscription or message-attribute details (the filter rules
of issue 15 read them across the whole trace), or a broadcasting client's rows (``broadcasting_row``:
LOST per client reads where each client started and how far it committed, issue 42), is carried whole
from the day such a row appears; a group that consumed as clustering on earlier days and turns
broadcasting later does not pull back its earlier closed keys (it is not a new group), so a broadcasting
client that starts below them (CONSUME_FROM_FIRST_OFFSET) is judged on the carried sends only.

Findings (``merge``): codes judged at the trace's end or over the whole trace (``RECOMPUTED``:
LOST, TXN_UNRESOLVED, TIMER_UNFIRED, UNEXPECTED, RECOVERED and the filter codes) are recomputed from ``R ++ D``
every time and never stored — a LOST judged at day 1's drain is provisional. The half-visibility
codes are stored once their msg_key is closed (its COMMIT fixed the verdict) and recomputed while
it is open. Every other code looks only backwards: its findings on ``D``'s rows come from
``R ++ D`` and are stored for good.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from rmqspec.properties.codes import Code, ObservationCode
from rmqspec.properties.inv_route import tries_of
from rmqspec.traces.carry_ha import carry_pairs
from rmqspec.traces.checks_common import (
    DLQ_PREFIX,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    acked_send,
    at_risk_keys,
    broadcasting_row,
    detail_of,
    has,
    route_queues,
    timer_send,
)
from rmqspec.traces.unjudged import Withheld, assess, lasting_rows

KEEP_ALL = frozenset({"crash", "recover", "drain", "lock", "unlock"})
TXN_EVENTS = frozenset({"txn_half", "txn_end", "txn_check", "txn_discard"})
# Kinds whose rules keep state per msg_key only (retries, dead letters, delay levels): kept
# with their key while it is open (or when it has none), else its tombstones.
PER_KEY = frozenset({"send_back", "schedule_fire", "timer_fire"})
# Stores in these topics are copies the per-key kinds' rules read (kept when they have no msg_key).
WAITING_TOPICS = frozenset({SCHEDULE_TOPIC, TIMER_TOPIC})
FILTER_DETAIL_KEYS = ("subscription", "tags", "properties")
# Judged at the trace's end or over all of it: recomputed from the carried rows every time.
RECOMPUTED: frozenset[str] = frozenset(
    {
        Code.LOST.value,
        Code.TXN_UNRESOLVED.value,
        Code.UNEXPECTED.value,
        ObservationCode.RECOVERED.value,
        Code.FILTER_MISMATCH.value,
        Code.FILTER_SKIPPED.value,
        ObservationCode.SUBSCRIPTION_INCONSISTENT.value,
        Code.TIMER_UNFIRED.value,
    }
)
# Final once the msg_key is closed (a COMMIT fixed the verdict); recomputed while it is open.
VISIBILITY: frozenset[str] = frozenset({Code.TXN_VISIBLE_BEFORE_COMMIT.value, Code.TXN_ROLLBACK_VISIBLE.value})


def carries_filters(row: Mapping[str, Any]) -> bool:
    """A row whose detail the filter rules read (then the whole trace is carried): a send, store,
    deliver or consume whose detail names a subscription or message attributes (the rows
    ``spark/inputs.filter_detail`` passes to the filter rules)."""
    if row.get("detail") is None or row["event"] not in ("send", "store", "deliver", "consume"):
        return False
    d = row["detail"]
    if isinstance(d, str):
        return any(f'"{k}"' in d for k in FILTER_DETAIL_KEYS)
    return any(k in detail_of(row) for k in FILTER_DETAIL_KEYS)


def carry_trace(
    rows: Sequence[Mapping[str, Any]],
    subscriptions: Mapping[str, Sequence[str]] | None = None,
) -> tuple[set[int], set[int], set[str]]:
    """(seqs of the rows to carry, seqs of closed keys' tombstones, open msg_keys) of one trace's
    valid rows in seq order (the rows of an earlier state, the tombstones pulled back, a day)."""
    if any(carries_filters(r) or broadcasting_row(r) for r in rows):
        return {r["seq"] for r in rows}, set(), {r["msg_key"] for r in rows if r["msg_key"] is not None}
    keep: set[int] = set()
    first: dict[tuple, int] = {}  # (reason, key...) -> seq of the first such row

    def first_of(*key: Any) -> None:
        first.setdefault(key, seq)

    last: dict[tuple, int] = {}
    top_commit: dict[tuple, tuple[int, int]] = {}
    top_schedule: dict[tuple, tuple[int, int]] = {}  # (queue_id, crashes) -> (highest offset, first seq)
    crashes = 0
    consumers: dict[str, set[str]] = {}
    for group, topics in (subscriptions or {}).items():
        for topic in topics:
            consumers.setdefault(topic, set()).add(group)
    consumed_pairs: set[tuple[str, str]] = set()
    known: set[str] = set()
    acked_topics: dict[str, set[str]] = {}
    half_topic: dict[str, str] = {}
    halves: set[str] = set()
    first_half: dict[str, int] = {}
    last_deliver: dict[str, int] = {}
    commit_topics: list[tuple[str, str | None]] = []
    committed: set[str] = set()
    done: dict[tuple[str, str], int] = {}  # (group, msg_key) -> first SUCCESS consume / DLQ seq
    timed: set[str] = set()  # msg_keys with an acknowledged timer send
    fired: dict[str, int] = {}  # msg_key -> its first timer_fire's seq
    drain: int | None = None
    owner: dict[tuple, str] = {}
    owner_last: dict[tuple, int] = {}
    windows: dict[tuple, dict[str, int]] = {}
    pending: dict[tuple, dict[int, int]] = {}
    # msg_key -> its sends, stores, send_backs, schedule_fires and first SUCCESS consume per group
    tombstones: dict[str, list[int]] = {}
    txns = _Transactions()
    for row in rows:
        seq, ev, key = row["seq"], row["event"], row["msg_key"]
        if not txns.add(row):
            keep.add(seq)
        if ev in ("crash", "recover"):
            crashes += ev == "crash"
            owner.clear()  # a new epoch: no owner (ORDER_KEY_REORDERED is per epoch); the old
            keep.update(owner_last.values())  # epoch's last consumes stay (harmless: a crash follows)
            owner_last.clear()
        if ev in KEEP_ALL:
            keep.add(seq)
        if ev == "drain":
            drain = seq
        if ev in PER_KEY:
            if key is None:
                keep.add(seq)
            else:
                tombstones.setdefault(key, []).append(seq)
        if ev == "store":
            topic = row["topic"]
            if key is None and (topic in WAITING_TOPICS or (topic is not None and topic.startswith(DLQ_PREFIX))):
                keep.add(seq)
            if topic == SCHEDULE_TOPIC and row["queue_offset"] is not None:
                best = top_schedule.get((row["queue_id"], crashes))
                if best is None or row["queue_offset"] > best[0]:
                    top_schedule[(row["queue_id"], crashes)] = (row["queue_offset"], seq)
            if has(row, "topic", "queue_id", "queue_offset"):
                last[("store", topic, row["queue_id"])] = seq
            if key is not None:
                known.add(key)
                tombstones.setdefault(key, []).append(seq)
        elif ev == "send":
            if row.get("actor") is not None and tries_of(detail_of(row)) is not None:
                keep.add(seq)  # PRODUCER_FAULT_WINDOW: a producer's attempts, replayed from its first
            route = route_queues(row)  # ORDER_KEY_SPLIT: the first send per key, route and queue
            if route is not None and has(row, "group", "topic", "queue_id", "sharding_key"):
                first_of("routed", row["group"], row["topic"], row["sharding_key"], route, row["queue_id"])
            if key is not None:
                known.add(key)
                tombstones.setdefault(key, []).append(seq)
                if acked_send(row) and row["topic"] is not None:
                    acked_topics.setdefault(key, set()).add(row["topic"])
                if acked_send(row) and timer_send(row):
                    timed.add(key)
        elif ev == "txn_half":
            if key is not None:
                known.add(key)
                halves.add(key)
                first_half.setdefault(key, seq)
                if row["topic"] is not None:
                    half_topic.setdefault(key, row["topic"])
        elif ev == "txn_end":
            if key is not None and row["status"] == "COMMIT":
                committed.add(key)
                commit_topics.append((key, row["topic"]))
        elif ev == "send_back":
            if row["status"] == "DLQ" and has(row, "group", "msg_key"):
                done.setdefault((row["group"], key), seq)
        elif ev == "timer_fire":
            if key is not None:
                fired.setdefault(key, seq)
        elif ev in ("deliver", "consume"):
            if ev == "deliver" and key is not None:
                last_deliver[key] = seq
            if has(row, "group", "topic"):
                consumers.setdefault(row["topic"], set()).add(row["group"])
                if ev == "consume":
                    first_of("consumer", row["topic"], row["group"])
                    consumed_pairs.add((row["topic"], row["group"]))
                else:
                    first_of("deliverer", row["topic"], row["group"])
            if ev == "consume" and row["status"] == "SUCCESS" and has(row, "group", "msg_key"):
                first_of("success", row["group"], key)
                done.setdefault((row["group"], key), seq)
        elif ev == "commit_offset" and has(row, "group", "topic", "queue_id", "queue_offset"):
            q = (row["group"], row["topic"], row["queue_id"])
            last[("commit", *q)] = seq
            best = top_commit.get((*q, crashes))
            if best is None or row["queue_offset"] > best[0]:
                top_commit[(*q, crashes)] = (row["queue_offset"], seq)
        # ORDER_KEY_REORDERED: ownership (all lock/unlock rows are kept) and the owner's last SUCCESS
        if ev in ("lock", "unlock", "consume", "orderly_end") and has(row, "group", "topic", "queue_id", "client_id"):
            q = (row["group"], row["topic"], row["queue_id"])
            client = row["client_id"]
            if ev == "lock":
                if row["status"] == "GRANTED" and owner.get(q) != client:
                    owner[q] = client
                    owner_last.pop(q, None)
            elif ev == "unlock":
                if owner.get(q) == client:
                    del owner[q]
                    owner_last.pop(q, None)
            elif ev == "orderly_end":  # the owner's ROLLBACK: no base left to compare with
                if row["status"] == "ROLLBACK" and owner.get(q) == client:
                    owner_last.pop(q, None)
            elif row["status"] == "SUCCESS" and row["queue_offset"] is not None and owner.get(q) == client:
                owner_last[q] = seq
        # ORDERLY_CONCURRENT: the opening start of every open window
        if ev in ("orderly_start", "orderly_end") and has(row, "group", "topic", "queue_id", "client_id"):
            w = windows.setdefault((row["group"], row["topic"], row["queue_id"]), {})
            if ev == "orderly_end":
                w.pop(row["client_id"], None)
            else:
                w.setdefault(row["client_id"], seq)
        # OFFSET_OVERRUN: the latest deliver of every pending offset
        if ev in ("deliver", "consume", "send_back") and has(row, "group", "topic", "queue_id", "queue_offset"):
            offsets = pending.setdefault((row["group"], row["topic"], row["queue_id"]), {})
            if ev == "deliver":
                offsets[row["queue_offset"]] = seq
            elif ev == "send_back" or row["status"] == "SUCCESS":
                offsets.pop(row["queue_offset"], None)

    for reason_key, seq in first.items():
        if reason_key[0] == "deliverer" and (reason_key[1], reason_key[2]) in consumed_pairs:
            continue
        if reason_key[0] == "success":
            tombstones.setdefault(reason_key[2], []).append(seq)
        else:
            keep.add(seq)
    keep.update(last.values())
    pairs = carry_pairs(rows)  # the master/slave pair replay's state (``traces/carry_ha.py``)
    keep.update(pairs.kept)
    if pairs.nameless_store is not None:
        keep.add(pairs.nameless_store)
    keep.update(seq for _, seq in top_commit.values())
    keep.update(seq for _, seq in top_schedule.values())
    keep.update(owner_last.values())
    for w in windows.values():
        keep.update(w.values())
    for offsets in pending.values():
        keep.update(offsets.values())

    for key, topic in commit_topics:  # a COMMIT without a topic takes the first half's (LOST)
        topic = topic if topic is not None else half_topic.get(key)
        if topic is not None:
            acked_topics.setdefault(key, set()).add(topic)
    open_keys: set[str] = set()
    all_keys = {r["msg_key"] for r in rows if r["msg_key"] is not None}
    for key in all_keys:
        topics = acked_topics.get(key)
        # unacknowledged: RECOVERED (recomputed) may name a deliver of it, unless it is a half's; a
        # half with no COMMIT: a later COMMIT changes the visibility verdict of its delivers
        if key not in known or (not topics and key not in halves) or (
                key in halves and key not in committed and last_deliver.get(key, -1) >= first_half[key]):
            open_keys.add(key)
            continue
        # LOST counts what came before the last drain: done after it may not count tomorrow
        if any(done.get((g, key), 1 << 62) > (drain if drain is not None else 1 << 61)
               for t in topics or () for g in consumers.get(t, ())):
            open_keys.add(key)
        # TIMER_UNFIRED likewise: a timer message not fired before the last drain
        if key in timed and fired.get(key, 1 << 62) > (drain if drain is not None else 1 << 61):
            open_keys.add(key)
    for key, seqs in txns.closed(open_keys, drain):
        tombstones.setdefault(key, []).extend(seqs)
    keep.update(txns.kept)
    if open_keys:
        keep.update(r["seq"] for r in rows if r["msg_key"] in open_keys)
    # a closed key with a row carried for another rule (a transaction's row that is not closed; a
    # consume or deliver kept for LOST's consumers, ordering or a pending offset) keeps its tombstones too,
    # so the carried rows of each key are self-consistent (UNEXPECTED, LOST)
    # a row lacking what a rule reads withholds findings beyond itself (``traces/unjudged.py``):
    # carried for good, so every later day withholds them as an audit of the whole history does
    keep.update(lasting_rows(rows))
    in_keep = {r["msg_key"] for r in rows if r["msg_key"] is not None and r["seq"] in keep}
    keep.update(seq for key, seqs in tombstones.items() if key in in_keep for seq in seqs)
    closed = {seq for key, seqs in tombstones.items() if key not in open_keys for seq in seqs} - keep
    return keep, closed, open_keys


@attrs.define
class _Txn:
    seqs: list[int] = attrs.Factory(list)
    keys: set[str | None] = attrs.Factory(set)
    half: int | None = None  # the first txn_half
    resolved: int | None = None  # the first COMMIT / ROLLBACK txn_end or txn_discard


@attrs.define
class _Transactions:
    """One trace's ``txn_*`` rows, fed in seq order (``add``), and which transactions are closed."""

    txns: dict[str, _Txn] = attrs.Factory(dict)
    top: tuple[int, str | None] | None = None  # the highest half-queue position so far, its txn_id
    forced: set[str] = attrs.Factory(set)  # txn_ids read across transactions
    risky: set[str] = attrs.Factory(set)  # every crash's at-risk keys
    op_keys: list[str] = attrs.Factory(list)  # the msg_key of every COMMIT / ROLLBACK op so far
    windows: list[tuple[int, int]] = attrs.Factory(list)  # (ops before a power crash, ops it may leave unread)
    kept: set[int] = attrs.Factory(set)

    def add(self, row: Mapping[str, Any]) -> bool:
        """Take a row; False for a txn_* row without a txn_id (kept), else True."""
        ev, seq, txn = row["event"], row["seq"], row["txn_id"]
        if ev == "crash":
            risky = set(at_risk_keys(row))
            self.risky |= risky
            if row["status"] == "power":
                if self.top is not None and self.top[1] is not None:
                    self.forced.add(self.top[1])
                # it leaves unread the next ``lost`` ops (``checks_lifecycle.unseen_ops``)
                lost = sum(1 for key in self.op_keys if key in risky)
                self.windows.append((len(self.op_keys), lost))
            return True
        if ev not in TXN_EVENTS:
            return True
        if ev in ("txn_half", "txn_check") and row["queue_offset"] is not None and (
                self.top is None or row["queue_offset"] > self.top[0]):
            self.top = (row["queue_offset"], txn)
        if ev == "txn_end" and row["status"] in ("COMMIT", "ROLLBACK") and row["msg_key"] is not None:
            if any(start <= len(self.op_keys) < start + n for start, n in self.windows) and txn is not None:
                self.forced.add(txn)  # an op a power crash's window may leave unread
            self.op_keys.append(row["msg_key"])
        if txn is None:
            return False
        t = self.txns.setdefault(txn, _Txn())
        t.seqs.append(seq)
        t.keys.add(row["msg_key"])
        if ev == "txn_half" and t.half is None:
            t.half = seq
        resolves = ev == "txn_discard" or (ev == "txn_end" and row["status"] in ("COMMIT", "ROLLBACK"))
        if t.resolved is None and resolves:
            t.resolved = seq
        return True

    def closed(self, open_keys: set[str], drain: int | None) -> Iterable[tuple[str, list[int]]]:
        """(msg_key, seqs) of every closed transaction; the others' seqs go to ``kept``."""
        if self.top is not None and self.top[1] is not None:
            self.forced.add(self.top[1])
        for txn, t in self.txns.items():
            key = next(iter(t.keys)) if len(t.keys) == 1 else None
            unresolved_now = drain is not None and t.half is not None and t.half < drain and not (
                t.resolved is not None and t.resolved < drain)
            if (key is None or key in open_keys or key in self.risky or t.resolved is None or unresolved_now
                    or txn in self.forced):
                self.kept.update(t.seqs)
            else:
                yield key, t.seqs


def finding_key(f: Mapping[str, Any]) -> tuple:
    """Identity of a finding row (as_dict form) for de-duplication."""
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(f.items()))


def merge(
    stored: Iterable[Mapping[str, Any]],
    audited: Iterable[Mapping[str, Any]],
    last_seq: Mapping[str | None, int],
) -> list[dict[str, Any]]:
    """The findings of the whole history: the ``stored`` ones plus those of auditing ``R ++ D``
    that are recomputed codes, visibility codes, or that name a row of ``D`` (a seq beyond the
    trace's ``last_seq`` in the state: no earlier run saw that row; usually the offending, last
    seq, but a rule may name a later row first, e.g. TXN_CHECK_EARLY's half after its check).
    Rows are ``Finding.as_dict`` mappings."""
    out: dict[tuple, dict[str, Any]] = {}
    for f in stored:
        out.setdefault(finding_key(f), dict(f))
    for f in audited:
        boundary = last_seq.get(f.get("trace_id"), -1)
        if f["code"] in RECOMPUTED or f["code"] in VISIBILITY or max(f["seqs"]) > boundary:
            out.setdefault(finding_key(f), dict(f))
    return sorted(out.values(), key=lambda f: (f.get("trace_id") or "", f["seqs"][-1], f["code"], f["seqs"]))


def to_store(findings: Iterable[Mapping[str, Any]], open_keys: Mapping[str | None, set[str]]) -> list[dict[str, Any]]:
    """The findings a state keeps: all but the recomputed codes and the visibility findings of open keys."""
    out = []
    for f in findings:
        if f["code"] in RECOMPUTED:
            continue
        if f["code"] in VISIBILITY and f.get("msg_key") in open_keys.get(f.get("trace_id"), set()):
            continue
        out.append(dict(f))
    return out


def trace_key(value: Any) -> str | None:
    """A row's trace as findings name it (``Finding.trace_id``: the value as text, or None)."""
    return None if value is None else str(value)


@attrs.frozen
class CarriedState:
    """What the reference checker carries from one day to the next (the Spark audit keeps the same
    three things as files: ``spark/incremental.py``)."""

    rows: tuple[Mapping[str, Any], ...] = ()
    closed: tuple[Mapping[str, Any], ...] = ()
    findings: tuple[Mapping[str, Any], ...] = ()
    last_seq: Mapping[str | None, int] = attrs.field(factory=dict)


def audit_since(
    state: CarriedState,
    rows: Iterable[Any],
    params: Any = None,
    *,
    subscriptions: Mapping[str, Sequence[str]] | None = None,
) -> tuple[list[dict[str, Any]], CarriedState]:
    """(the findings of the whole history, the state for the next day): the reference checker
    over ``state.rows ++ rows``. Raises ``ValueError`` when a row's seq is not beyond the state's
    last seq of its trace (the rows are not the next day of that history)."""
    from rmqspec.traces.checker import check, validate

    good, _ = validate(rows)
    for r in good:
        t = trace_key(r.get("trace_id"))
        if r["seq"] <= state.last_seq.get(t, -1):
            raise ValueError(f"seq {r['seq']} of trace {t!r} is not beyond the state's last seq {state.last_seq[t]}")
    pulled = pull(state.rows, state.closed, good)
    history = [*state.rows, *pulled, *good]
    report = check(history, params, subscriptions=subscriptions)
    audited = [f.as_dict() for f in (*report.violations, *report.observations)]
    traces: dict[str | None, list[Mapping[str, Any]]] = {}
    for r in history:
        traces.setdefault(trace_key(r.get("trace_id")), []).append(r)
    withheld = {t: assess(sorted(rows_, key=lambda r: r["seq"]))[0].lasting() for t, rows_ in traces.items()}
    merged = merge(withheld_out(state.findings, withheld), audited, state.last_seq)
    carried: list[Mapping[str, Any]] = []
    pulled_seqs = {(trace_key(r.get("trace_id")), r["seq"]) for r in pulled}
    closed = [r for r in state.closed if (trace_key(r.get("trace_id")), r["seq"]) not in pulled_seqs]
    open_keys: dict[str | None, set[str]] = {}
    last_seq = dict(state.last_seq)
    for t, trace_rows in traces.items():
        trace_rows.sort(key=lambda r: r["seq"])
        keep, tomb, open_keys[t] = carry_trace(trace_rows, subscriptions)
        carried.extend(r for r in trace_rows if r["seq"] in keep)
        closed.extend(r for r in trace_rows if r["seq"] in tomb)
        last_seq[t] = max(last_seq.get(t, -1), trace_rows[-1]["seq"])
    return merged, CarriedState(tuple(carried), tuple(closed), tuple(to_store(merged, open_keys)), last_seq)


def withheld_out(
    stored: Iterable[Mapping[str, Any]], withheld: Mapping[str | None, Withheld]
) -> list[Mapping[str, Any]]:
    """The ``stored`` findings (``Finding.as_dict`` rows) no entry of today's ``withheld`` (per trace,
    ``Withheld.lasting``) covers: a row of today lacking a field may leave an earlier finding
    unjudged (a rule that looks ahead, or a scope it may be any of), as it would in an audit of the
    whole history."""
    out = []
    for f in stored:
        w = withheld.get(f.get("trace_id"))
        if w is None or not w or not w.covers_row(f["code"], f["seqs"], f):
            out.append(f)
    return out


def consumer_pairs(rows: Iterable[Mapping[str, Any]]) -> set[tuple[str | None, str, str]]:
    """(trace, topic, group) of the deliver / consume rows (LOST's consumers of a topic)."""
    return {
        (trace_key(r.get("trace_id")), r["topic"], r["group"])
        for r in rows
        if r["event"] in ("deliver", "consume") and r["topic"] is not None and r["group"] is not None
    }


def pull(
    carried: Sequence[Mapping[str, Any]],
    closed: Sequence[Mapping[str, Any]],
    day: Sequence[Mapping[str, Any]],
) -> list[Mapping[str, Any]]:
    """The tombstones of closed keys the new ``day`` touches: its msg_keys, the keys its crashes list
    as at risk, the keys of its txn_ids' closed transactions, and every closed key of a topic that
    gains a consumer group (it may be LOST for that group)."""
    keys = {(trace_key(r.get("trace_id")), r["msg_key"]) for r in day if r["msg_key"] is not None}
    keys |= {(trace_key(r.get("trace_id")), k) for r in day for k in at_risk_keys(r)}
    txns = {(trace_key(r.get("trace_id")), r["txn_id"]) for r in day if r["txn_id"] is not None}
    keys |= {(trace_key(r.get("trace_id")), r["msg_key"]) for r in closed
             if r["msg_key"] is not None and (trace_key(r.get("trace_id")), r["txn_id"]) in txns}
    new_topics = {(t, topic) for t, topic, _ in consumer_pairs(day) - consumer_pairs(carried)}
    touched = {
        (trace_key(r.get("trace_id")), r["msg_key"])
        for r in closed
        if (trace_key(r.get("trace_id")), r["topic"]) in new_topics
    }
    keys |= touched
    return [r for r in closed if (trace_key(r.get("trace_id")), r["msg_key"]) in keys]
