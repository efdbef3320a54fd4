"""The message family's rules, vectorised over Arrow batches (``mapInArrow``).

Rules: UNEXPECTED, RECOVERED, DUPLICATED, RETRY_EARLY (deliver clause),
TXN_VISIBLE_BEFORE_COMMIT, TXN_ROLLBACK_VISIBLE, DELAY_EARLY and LOST, with
the definitions of their reference detectors in ``rmqspec.traces.checks_*``
(the differential tests hold the two equal); and, on the same partitions,
the retry limits' rules (``rules_retry.py``: RETRY_EARLY's send_back clause,
DLQ_EARLY, DLQ_MISSED), which also read send_back and deliver rows without a
msg_key, DLQ_DELAYED and SCHEDULE_DUPLICATED (``rules_copies.py``), and the
timer rules (``rules_timer.py``: TIMER_EARLY, TIMER_DUPLICATED, TIMER_UNFIRED).

Why not SQL windows: the three per-key window passes these rules took
(sorted several ways, each its own shuffle) were 57 % of the audit's CPU at
10 M events. Here the message rows are shuffled once by (trace, msg_key),
and each partition is judged in numpy: rows are grouped by integer codes of
their keys (``pyarrow.compute.dictionary_encode``), sorted with
``arrow_judge.lexsort``, and every per-key fact is a segmented reduction or a
segmented running min/max (``_running``). Only the findings are built as
Python objects.

LOST needs two facts from outside the partition: the groups consuming each
topic (``consumers``, known on the driver: the facts pass counts them)
and the keys exempted by saved offsets and saved delay progress, which stay
SQL anti-joins on the (few) findings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rmqspec.properties.codes import AuditParams, Code, ObservationCode
from rmqspec.spark.arrow_judge import (
    NONE,
    Columns,
    finding,
    judge,
    keyed,
    lexsort,
    member,
    running,
    segment_min,
    shipped,
    starts,
)
from rmqspec.spark.rules import _MSG_EVENTS, EV, FINDING_SCHEMA
from rmqspec.spark.rules_copies import dlq_delayed, schedule_duplicated
from rmqspec.spark.rules_retry import retry_judged
from rmqspec.spark.rules_timer import timer_judged
from rmqspec.traces.checks_common import ACKED_SEND_STATUSES, ONEWAY, SCHEDULE_TOPIC
from rmqspec.traces.checks_delivery import TIMED_OUT_CAUSE

__all__ = ["message_findings"]

_COLUMNS = (
    "trace",
    "seq",
    "ts",
    "event",
    "group",
    "topic",
    "msg_key",
    "msg_id",
    "status",
    "reconsume_times",
    "deliver_ts",
    "drain",
    "delay_level",
    "sb_max",
    "crashes",
    "from_commitlog_offset",
    "client_id",
    "timed_out",
)


def _narrowed(name: str) -> Column:
    """A column as shuffled: null on the rows that do not need it (narrower rows to shuffle and
    hand to Python). A msg_id (32 characters) matters only on SCHEDULE_TOPIC_XXXX stores and
    fires (DELAY_EARLY), a client only on a broadcasting client's consumes (DUPLICATED per client: the
    judge reads a client as "broadcasting"); ``timed_out`` is true on a consume whose listener timed out,
    else null."""
    if name == "msg_id":
        sched = (EV() == "schedule_fire") | ((EV() == "store") & (F.col("topic") == SCHEDULE_TOPIC))
        return F.when(sched, F.col(name)).alias(name)
    if name == "client_id":
        return F.when((EV() == "consume") & F.col("broadcasting"), F.col(name)).alias(name)
    if name == "timed_out":  # DUPLICATED's reason: true on a consume that timed out, else null
        return F.when(F.col(name), F.lit(True)).alias(name)
    return F.col(name)


def message_findings(
    df: DataFrame,
    params: AuditParams,
    consumers: Mapping[tuple[str, str], list[str]],
    has_drain: bool,
    at_risk: DataFrame | None,
    has_crash: bool = True,
    has_power: bool = True,
    constants: Mapping[str, Any] | None = None,
    drain_ts: Mapping[str, int] | None = None,
    broadcasting: Mapping[str, Sequence[str]] | None = None,
    has_expire: bool = True,
) -> DataFrame:
    """The message family's findings (``FINDING_COLUMNS``) of the validated rows ``df``.
    ``constants``: columns the driver knows to hold one value (``arrow_judge.shipped``);
    ``drain_ts``: trace -> its last drain's ts (the timer rules, ``spark/rules_timer.py``);
    ``broadcasting``: trace -> its broadcasting groups, which LOST judges per client instead
    (``spark/rules_broadcast.py``; their LOST findings take the same exemptions below).

    ``has_crash`` False (no trace has a crash row): the two crash exemptions of LOST
    are empty, so their joins are left out; ``has_power`` False (no power-loss crash):
    the saved delay progress exemption is empty, so its join is left out; ``has_expire`` False (no
    ``expire`` row): retention took nothing (``spark/rules_retention.py``), its pass is left out."""
    from rmqspec.spark.rules_lifecycle import (  # it imports rules, which imports this module lazily
        skipped_by_saved_delay_progress,
        skipped_by_saved_offsets,
    )

    risky: dict[str, set[str]] = {}
    for row in at_risk.collect() if at_risk is not None else ():
        risky.setdefault(row["msg_key"], set()).add(row["trace"])
    broadcast = {trace: set(groups) for trace, groups in (broadcasting or {}).items() if groups} if has_drain else {}
    groups = {(trace, topic): [g for g in groups if g not in broadcast.get(trace, ())]
              for (trace, topic), groups in consumers.items()} if has_drain else {}
    rows, left_out = shipped(
        df.filter(EV().isin(*_MSG_EVENTS) & (F.col("msg_key").isNotNull() | EV().isin("send_back", "deliver"))),
        [_narrowed(c) for c in _COLUMNS],
        constants or {},
    )
    rows = keyed(rows, "trace", "msg_key")
    judged = _Judge(params, risky, groups, has_drain, drain_ts if has_drain else {})
    found = rows.mapInArrow(judge(judged, left_out), FINDING_SCHEMA)
    if broadcast:
        from rmqspec.spark.rules_broadcast import lost_per_client  # it imports rules, which imports this lazily

        found = found.unionByName(lost_per_client(df, at_risk))
    if has_drain and has_expire:
        from rmqspec.spark import rules_retention  # it imports rules, which imports this lazily

        verdicts = rules_retention.retention_verdicts(df, params)
        if verdicts is not None:
            found = rules_retention.apply(found, verdicts)
    if not (has_drain and has_crash):
        return found
    # The exemptions drop LOST findings only; one anti-join each on the whole output
    # (a split by code would run the judge twice).
    lost = F.col("code") == Code.LOST.value
    offsets = skipped_by_saved_offsets(df).select(
        F.col("trace").alias("_t"), F.col("group").alias("_g"), F.col("msg_key").alias("_k")
    )
    found = found.join(
        offsets,
        lost
        & (found["trace"] == offsets["_t"])
        & (found["group"] == offsets["_g"])
        & (found["msg_key"] == offsets["_k"]),
        "left_anti",
    )
    if not has_power:
        return found
    delays = skipped_by_saved_delay_progress(df).select(F.col("trace").alias("_t"), F.col("msg_key").alias("_k"))
    return found.join(delays, lost & (found["trace"] == delays["_t"]) & (found["msg_key"] == delays["_k"]), "left_anti")


class _Judge:
    """One partition's message rows in (a table), its findings out (for ``arrow_judge.judge``)."""

    def __init__(
        self,
        params: AuditParams,
        risky: Mapping[str, set[str]],
        groups: Mapping[tuple[str, str], list[str]],
        lost: bool,
        drain_ts: Mapping[str, int] | None = None,
    ):
        self.params = params
        self.risky = dict(risky)
        self.groups = dict(groups)
        self.lost = lost
        self.drain_ts = dict(drain_ts or {})

    def __call__(self, table: pa.Table) -> list[dict[str, Any]]:
        cols = Columns(table)
        found = retry_judged(cols, self.params)  # send_back and deliver rows, with or without a msg_key
        if cols.null("msg_key").all():
            return found
        copies = [*dlq_delayed(cols, self.params), *schedule_duplicated(cols)]
        timers = timer_judged(cols, self.params, self.risky, self.drain_ts)
        return [*found, *copies, *timers, *_Partition(cols, self).findings()]


class _Partition:
    """One partition's message rows with a msg_key, as positions sorted by (trace, msg_key, group,
    reconsume_times, seq) and their columns in that order."""

    def __init__(self, cols: Columns, rules: _Judge):
        self.judge = rules
        self.cols = cols
        at = np.flatnonzero(~cols.null("msg_key"))
        trace, key = cols.codes("trace")[at], cols.codes("msg_key")[at]
        key_id = trace * (int(key.max()) + 1) + key
        group = cols.codes("group")[at]
        rt_null, rt = cols.null("reconsume_times")[at], cols.ints("reconsume_times")[at]
        seq = cols.ints("seq")[at]
        order = lexsort((seq, rt, rt_null, group, key_id))
        self.at = at[order]  # the table's row of each sorted position
        self.n = len(order)
        self.key_id, self.group, self.rt, self.rt_null, self.seq = (
            key_id[order],
            group[order],
            rt[order],
            rt_null[order],
            seq[order],
        )
        self.ts = cols.ints("ts")[self.at]
        self.event = cols.codes("event")[self.at]
        self.event_names = cols.names("event")
        self.status = cols.codes("status")[self.at]
        self.status_names = cols.names("status")
        self.deliver_ts = cols.ints("deliver_ts")[self.at]
        self.deliver_ts_null = cols.null("deliver_ts")[self.at]
        self.new_key = starts(self.key_id)
        self.out: list[dict[str, Any]] = []

    # -- helpers
    def is_event(self, *names: str) -> np.ndarray:
        return member(self.event, self.event_names, names)

    def status_is(self, *names: str) -> np.ndarray:
        return member(self.status, self.status_names, names)

    @cached_property
    def acked_send(self) -> np.ndarray:
        """``send`` rows the broker acknowledged (no status, or an acknowledging one)."""
        return self.is_event("send") & ((self.status < 0) | self.status_is(*ACKED_SEND_STATUSES))

    def key_min(self, cond: np.ndarray, new: np.ndarray | None = None) -> np.ndarray:
        return segment_min(np.where(cond, self.seq, NONE), self.new_key if new is None else new)

    def key_any(self, cond: np.ndarray) -> np.ndarray:
        return self.key_min(cond) != NONE

    @cached_property
    def risky(self) -> np.ndarray:
        """Bool: the row's msg_key is at risk in its trace."""
        if not self.judge.risky:
            return np.zeros(self.n, dtype=bool)
        keys, traces = self.cols.names("msg_key"), self.cols.names("trace")
        key, trace = self.cols.codes("msg_key")[self.at], self.cols.codes("trace")[self.at]
        hit = member(key, keys, self.judge.risky)
        for i in np.flatnonzero(hit).tolist():
            hit[i] = traces[trace[i]] in self.judge.risky[keys[key[i]]]
        return hit

    def add(self, kind: str, code: str, i: int, seqs: Sequence[int], reason: str, *, group: bool = True,
            client: str | None = None) -> None:
        row, value = int(self.at[i]), self.cols.value
        keys = {"topic": value("topic", row), "msg_key": value("msg_key", row), "client_id": client}
        if group:
            keys["group"] = value("group", row)
        self.out.append(finding(kind, code, list(seqs), value("trace", row), reason, **keys))

    def first_success(self, success: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row, (the seq of the first SUCCESS consume of its (msg_key, group), of its (msg_key, group,
        client) for a broadcasting client's consume (``client_id`` is set only there: ``_narrowed``);
        whether that consume timed out), as one min of seq * 2 + timed out."""
        client = self.cols.codes("client_id")[self.at]
        code = self.seq * 2 + ~self.cols.null("timed_out")[self.at]
        if not (success & (client >= 0)).any():
            first = segment_min(np.where(success, code, NONE), starts(self.key_id, self.group))
        else:
            at = np.flatnonzero(success)
            at = at[lexsort((self.seq[at], client[at], self.group[at], self.key_id[at]))]
            first = np.full(self.n, NONE, dtype=np.int64)
            first[at] = segment_min(code[at], starts(self.key_id[at], self.group[at], client[at]))
        return np.where(first == NONE, NONE, first >> 1), (first != NONE) & (first & 1 == 1)

    def text(self, column: str, i: int) -> str:
        value = self.cols.value(column, self.at[i])
        return "null" if value is None else str(value)

    # -- the rules
    def findings(self) -> list[dict[str, Any]]:
        self.per_key_rules()
        self.delay_early()
        if self.judge.lost:
            self.lost()
        return self.out

    def per_key_rules(self) -> None:
        seq, n = self.seq, self.n
        send, deliver = self.is_event("send"), self.is_event("deliver")
        acked_send = self.acked_send
        txn_end = self.is_event("txn_end")
        commit, rollback = txn_end & self.status_is("COMMIT"), txn_end & self.status_is("ROLLBACK")
        half, store = self.is_event("txn_half"), self.is_event("store")
        success = self.is_event("consume") & self.status_is("SUCCESS") & (self.group >= 0)
        known = self.key_any(send | store | half)
        acked = self.key_any(acked_send | commit)
        halved = self.key_any(half)
        seen = self.key_any(store | (send & ~acked_send))
        oneway = self.key_any(send & self.status_is(ONEWAY))  # never acknowledged: not a recovery
        first_deliver = self.key_min(deliver)
        half_seq, c, r = self.key_min(half), self.key_min(commit), self.key_min(rollback)
        first_success, first_timed = self.first_success(success)
        timed = ~self.cols.null("timed_out")[self.at]
        # RETRY_EARLY: the earliest-due (then lowest-seq) earlier send_back RETRY of the
        # row's (msg_key, group, reconsume_times): a running min over ranks of (due, seq).
        is_back = (
            self.is_event("send_back")
            & self.status_is("RETRY")
            & ~self.deliver_ts_null
            & (self.group >= 0)
            & ~self.rt_null
        )
        backs = np.flatnonzero(is_back)
        by_due = backs[lexsort((seq[backs], self.deliver_ts[backs]))]
        rank = np.full(n, n, dtype=np.int64)
        rank[by_due] = np.arange(len(by_due))
        before = running(rank, starts(self.key_id, self.group, self.rt_null, self.rt), largest=False)
        has_back = before < n
        back_row = np.where(has_back, by_due[np.minimum(before, max(len(by_due) - 1, 0))] if len(by_due) else 0, 0)
        retry_early = (
            deliver
            & (self.group >= 0)
            & ~self.rt_null
            & (self.rt >= 1)
            & has_back
            & (self.ts < np.where(has_back, self.deliver_ts[back_row], 0))
        )
        risky = self.risky
        after_half = deliver & (half_seq != NONE) & (seq > half_seq)
        rb_visible = (c == NONE) & (r != NONE) & (seq > r)
        before_commit = ~rb_visible & (((c != NONE) & (seq < c)) | (c == NONE))
        unexpected = self.is_event("deliver", "consume") & ~known
        recovered = deliver & (seq == first_deliver) & seen & ~acked & ~halved & ~oneway & ~risky
        duplicated = success & (seq > first_success)
        visible_rb, visible_early = after_half & rb_visible, after_half & before_commit
        hits = unexpected | recovered | duplicated | retry_early | visible_rb | visible_early
        for i in np.flatnonzero(hits).tolist():
            key, s = self.text("msg_key", i), int(seq[i])
            if unexpected[i]:
                self.add(
                    "violation",
                    Code.UNEXPECTED.value,
                    i,
                    [s],
                    f"{self.text('event', i)} of {key}, which was never sent, stored or half-sent",
                )
            if recovered[i]:
                reason = f"{key} delivered although its send was never acknowledged"
                self.add("observation", ObservationCode.RECOVERED.value, i, [s], reason)
            if duplicated[i]:
                client = self.cols.value("client_id", self.at[i])  # a broadcasting client's consume: its own
                reason = f"{self.text('group', i)} consumed {key} with SUCCESS again"
                if client is not None:
                    reason = f"broadcasting client {client} of {reason}"
                if timed[i] or first_timed[i]:
                    reason += TIMED_OUT_CAUSE
                self.add("observation", ObservationCode.DUPLICATED.value, i, [first_success[i], s], reason,
                         client=client)
            if retry_early[i]:
                b = int(back_row[i])
                reason = f"retry {int(self.rt[i])} delivered at {int(self.ts[i])}, due at {int(self.deliver_ts[b])}"
                self.add("violation", Code.RETRY_EARLY.value, i, [seq[b], s], reason)
            if visible_rb[i]:
                reason = f"{key} delivered although its transaction was rolled back"
                self.add("violation", Code.TXN_ROLLBACK_VISIBLE.value, i, [r[i], s], reason)
            if visible_early[i]:
                reason = f"{key} delivered before its transaction committed"
                self.add("violation", Code.TXN_VISIBLE_BEFORE_COMMIT.value, i, [half_seq[i], s], reason)

    def delay_early(self) -> None:
        """DELAY_EARLY: fires matched by (msg_key, msg_id) or by msg_key; delivers by first generation."""
        gen0 = self.rt_null | (self.rt == 0)
        sched = (
            self.is_event("store")
            & self.cols.is_("topic", SCHEDULE_TOPIC)[self.at]
            & ~self.deliver_ts_null
        )
        fire, deliver = self.is_event("schedule_fire"), self.is_event("deliver") & gen0
        rows = np.flatnonzero(sched | fire | deliver)
        if not len(rows) or not sched.any():
            return
        m = len(rows)
        key, seq = self.key_id[rows], self.seq[rows]
        by_seq = rows[lexsort((seq, key))]  # the rows of each key, by seq
        k, s = self.key_id[by_seq], self.seq[by_seq]
        new = starts(k)
        pos = np.arange(m)
        st_key = running(np.where(sched[by_seq], pos, m), new, largest=True)
        st0 = running(np.where(sched[by_seq] & gen0[by_seq], pos, m), new, largest=True)
        lf = running(np.where(fire[by_seq] & gen0[by_seq], pos, m), new, largest=True)
        # by (msg_key, msg_id): the last earlier SCHEDULE store with the row's msg_id
        msg_id = self.cols.codes("msg_id")[self.at[by_seq]]
        by_id = lexsort((s, msg_id, k))
        st_id_sorted = running(np.where(sched[by_seq][by_id], by_id, m), starts(k[by_id], msg_id[by_id]), largest=True)
        st_id = np.full(m, m, dtype=np.int64)
        st_id[by_id] = st_id_sorted  # a position in by_seq order (the running max of positions by seq)
        st = np.where(msg_id >= 0, st_id, st_key)
        due = self.deliver_ts[by_seq]
        ts = self.ts[by_seq]

        def at(p: np.ndarray, values: np.ndarray, none: int) -> np.ndarray:
            return np.where(p < m, values[np.minimum(p, m - 1)], none)

        st_due, st0_due, st0_seq, lf_seq = at(st, due, 0), at(st0, due, 0), at(st0, s, 0), at(lf, s, NONE)
        no_fire = (lf == m) | (lf_seq < st0_seq)
        early_fire = fire[by_seq] & (st < m) & (ts < st_due)
        early_deliver = deliver[by_seq] & (st0 < m) & (ts < st0_due) & no_fire
        for j in np.flatnonzero(early_fire | early_deliver).tolist():
            i = int(by_seq[j])
            if early_fire[j]:
                reason = f"fired at {int(ts[j])}, due at {int(st_due[j])}"
                self.add("violation", Code.DELAY_EARLY.value, i, [s[st[j]], s[j]], reason, group=False)
            if early_deliver[j]:
                reason = f"delivered at {int(ts[j])}, due at {int(st0_due[j])}"
                self.add("violation", Code.DELAY_EARLY.value, i, [s[st0[j]], s[j]], reason)

    def lost(self) -> None:
        """LOST: first acknowledgement per (msg_key, topic) x consuming groups - done groups."""
        seq, cols = self.seq, self.cols
        drain = cols.ints("drain", -1)[self.at]
        in_drain = ~cols.null("drain")[self.at] & (seq <= drain)
        send = self.is_event("send")
        acked_send = self.acked_send
        commit = self.is_event("txn_end") & self.status_is("COMMIT")
        half = self.is_event("txn_half")
        done = (self.is_event("consume") & self.status_is("SUCCESS")) | (
            self.is_event("send_back") & self.status_is("DLQ")
        )
        topic, topic_names = cols.codes("topic")[self.at], cols.names("topic")
        # a commit without a topic takes the topic of its key's first half with one (by seq)
        with_topic = half & (topic >= 0)
        first_half = self.key_min(with_topic)
        key_ids = np.cumsum(self.new_key) - 1
        half_topic = np.full(int(key_ids[-1]) + 1, -1, dtype=np.int64)
        hits = np.flatnonzero(with_topic & (seq == first_half))
        half_topic[key_ids[hits]] = topic[hits]
        a_topic = np.where(send | (topic >= 0), topic, half_topic[key_ids])
        acked = np.flatnonzero((acked_send | commit) & in_drain & ~self.risky & (a_topic >= 0))
        if not len(acked):
            return
        acked = acked[lexsort((seq[acked], a_topic[acked], self.key_id[acked]))]
        firsts = acked[starts(self.key_id[acked], a_topic[acked])]
        # each first acknowledgement x the groups consuming its (trace, topic), as integer ids
        trace, trace_names = cols.codes("trace")[self.at], cols.names("trace")
        slots, slot_of = np.unique(trace[firsts] * len(topic_names) + a_topic[firsts], return_inverse=True)
        vocabulary: dict[str, int] = {}
        per_slot = []
        for code in slots.tolist():
            name = (trace_names[code // len(topic_names)], topic_names[code % len(topic_names)])
            per_slot.append([vocabulary.setdefault(g, len(vocabulary)) for g in self.judge.groups.get(name, ())])
        width = max(len(ids) for ids in per_slot)
        if not width:
            return
        table = np.full((len(slots), width), -1, dtype=np.int64)
        for row, ids in enumerate(per_slot):
            table[row, : len(ids)] = ids
        chosen = table[slot_of]  # (firsts, width)
        rows = np.repeat(firsts, width)[chosen.ravel() >= 0]
        chosen = chosen.ravel()[chosen.ravel() >= 0]
        size = len(vocabulary) + 1
        group_names = cols.names("group")
        finished = np.flatnonzero(done & in_drain & (self.group >= 0))
        by_code = np.array([vocabulary.get(g, size - 1) for g in group_names] + [size - 1], dtype=np.int64)
        done_ids = by_code[self.group[finished]]
        missing = ~np.isin(self.key_id[rows] * size + chosen, self.key_id[finished] * size + done_ids)
        names = {v: g for g, v in vocabulary.items()}
        for i, g in zip(rows[missing].tolist(), chosen[missing].tolist()):
            key = self.text("msg_key", i)
            reason = f"acknowledged {key} never consumed by {names[g]} nor sent to its DLQ"
            self.out.append(
                finding(
                    "violation",
                    Code.LOST.value,
                    [seq[i], drain[i]],
                    trace_names[trace[i]],
                    reason,
                    group=names[g],
                    topic=topic_names[a_topic[i]],
                    msg_key=key,
                )
            )
