"""The carried rows of one trace over its columns: ``traces.carry.carry_trace``'s rules in numpy.

Theory of operation
-------------------
``carry_columns(table)`` answers what ``carry_trace(rows)`` answers — the rows to carry, the
closed keys' tombstones and the open msg_keys — for one trace's valid rows in seq order (one
row per seq), as a bool per row instead of a set of seqs. ``collect_per_trace``
(``spark/carry.py``) runs it on the executors in place of ``carry_trace``, which needs a dict
per row: on the incremental bench's fourth day with its carried rows (1.5 M rows) that was ~16 s
of one core and ~2.4 GB, longer than the audit it runs beside.

Every reason of ``carry_trace`` is a first, last, max or min per key, and a sort of the rows
by the key then seq gives it for all keys at once (``arrow_judge.Columns.sorted``, segments
reduced with ``numpy.maximum.reduceat``). The one stateful reason, the orderly owner's last
SUCCESS consume of its ownership per epoch, comes from the bounds of that ownership, as
``spark/carry.py``'s aggregations find it: the owner at the end of an (epoch, queue) is the
client ``c`` of its last GRANTED lock unless ``c`` unlocked after it; the ownership began at
the first GRANTED to ``c`` after the last GRANTED to another client or unlock by ``c``.

``tests/spark/test_carry_arrow.py`` holds this module to ``carry_trace`` on Hypothesis-drawn
traces whose keys, queues and clients collide often, and the audit batch's traces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmqspec.properties.inv_replay_ha import HA_EVENTS
from rmqspec.properties.inv_route import tries_of
from rmqspec.spark.arrow_judge import Columns, starts
from rmqspec.traces.carry import FILTER_DETAIL_KEYS, KEEP_ALL, PER_KEY, TXN_EVENTS, WAITING_TOPICS
from rmqspec.traces.carry_ha import PAIR_LINKS, carry_pairs
from rmqspec.traces.checks_common import (
    ACKED_SEND_STATUSES,
    BROADCASTING,
    DLQ_PREFIX,
    SCHEDULE_TOPIC,
    at_risk_keys,
    broadcasting_row,
    detail_of,
    route_queues,
)
from rmqspec.traces.unjudged import CANDIDATES, DETAIL_FIELDS, SET, TraceFacts, candidate, row_unjudged

__all__ = ["carry_columns"]

QUEUE = ("group", "topic", "queue_id")
_NONE = np.iinfo(np.int64).max
_NOT_DONE, _NO_DRAIN = 1 << 62, 1 << 61  # carry_trace's stand-ins: "never done", "no drain"

Key = str | np.ndarray


def carry_columns(
    table: pa.Table, subscriptions: Mapping[str, Sequence[str]] | None = None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(bool per row: carry it; bool per row: a closed key's tombstone; the open msg_keys) of one
    trace's valid rows in seq order, ``detail`` as its JSON text."""
    c = Columns(table)
    n, key = c.n, c.codes("msg_key")
    if _carried_whole(c):
        return np.ones(n, dtype=bool), np.zeros(n, dtype=bool), sorted(c.names("msg_key"))
    ev = lambda *names: c.is_("event", *names)  # noqa: E731
    keep = ev(*KEEP_ALL)
    send, store, success = ev("send"), ev("store"), ev("consume") & c.is_("status", "SUCCESS")
    topic, has_key = c.codes("topic"), key >= 0
    special = [t in WAITING_TOPICS or t.startswith(DLQ_PREFIX) for t in c.names("topic")]
    per_key = ev(*PER_KEY) | (store & np.array([*special, False])[topic])
    keep |= per_key & ~has_key
    crashes = np.cumsum(ev("crash"))
    # LOST's delay-progress exemption: per (queue, crashes so far), the first SCHEDULE store at
    # the highest position
    scheduled = store & np.array([*(t == SCHEDULE_TOPIC for t in c.names("topic")), False])[topic]
    top = _ends(c, scheduled & c.has("queue_offset"), ("queue_id", crashes), first=True,
                within=(-c.ints("queue_offset"),))
    keep[top] = True
    # ORDER_QUEUE_GAP: the last store per (topic, queue)
    keep[_ends(c, store & c.has("topic", "queue_id", "queue_offset"), ("topic", "queue_id"), first=False)] = True
    keep[_first_routed(c, send)] = True
    keep[_routed_producers(c, send)] = True
    keep[_pair_rows(c, store)] = True
    # LOST's consumers: the first consume per (topic, group), else the first deliver
    dc = ev("deliver", "consume") & c.has("group", "topic")
    consumed = _ends(c, dc & ev("consume"), ("topic", "group"), first=True)
    delivered = _ends(c, dc & ev("deliver"), ("topic", "group"), first=True)
    keep[consumed] = True
    group = c.codes("group")
    width = len(c.names("group")) + 1
    never = ~np.isin(topic[delivered] * width + group[delivered], topic[consumed] * width + group[consumed])
    keep[delivered[never]] = True
    # OFFSET_LOST: the last commit per queue; LOST's saved-offset exemption: per queue and
    # crashes so far, the first commit of the highest offset
    commits = ev("commit_offset") & c.has(*QUEUE, "queue_offset")
    keep[_ends(c, commits, QUEUE, first=False)] = True
    keep[_ends(c, commits, (*QUEUE, crashes), first=True, within=(-c.ints("queue_offset"),))] = True
    keep[_owned_last(c, np.cumsum(ev("crash", "recover")))] = True
    keep[_open_windows(c)] = True
    keep[_pending(c, success)] = True

    open_keys = _open(c, send, store, success, dc, subscriptions)
    txn_tomb = _closed_transactions(c, open_keys)
    keep |= ev(*TXN_EVENTS) & ~txn_tomb
    keep |= has_key & open_keys[key]
    keep |= _lasting(c)
    in_keep = np.zeros(len(open_keys), dtype=bool)
    in_keep[key[keep & has_key]] = True
    tomb = (send | store | per_key) & has_key | txn_tomb
    tomb[_ends(c, success & c.has("group") & has_key, ("group", "msg_key"), first=True)] = True
    keep |= tomb & in_keep[key]
    closed = tomb & ~open_keys[key] & ~keep
    names = c.names("msg_key")
    return keep, closed, [names[k] for k in np.flatnonzero(open_keys[:-1])]


def _first_routed(c: Columns, send: np.ndarray) -> list[int]:
    """ORDER_KEY_SPLIT: positions of the first send per (group, topic, sharding_key, route, queue), the
    route read from ``detail`` (``checks_common.route_queues``) on the sends with a sharding_key, a few."""
    first: dict[tuple, int] = {}
    for at in np.flatnonzero(send & c.has("group", "topic", "queue_id", "sharding_key")).tolist():
        route = route_queues({"detail": c.value("detail", at)})
        if route is not None:
            key = tuple(c.value(n, at) for n in ("group", "topic", "sharding_key", "queue_id"))
            first.setdefault((*key, route), at)
    return sorted(first.values())


def _routed_producers(c: Columns, send: np.ndarray) -> list[int]:
    """PRODUCER_FAULT_WINDOW: positions of the sends with an actor and a ``detail.tries`` list
    (``inv_route.tries_of``): a producer's attempts are replayed from its first, so all are carried."""
    if "actor" not in c.table.column_names:
        return []
    maybe = send & c.has("actor", "detail")
    return [at for at in np.flatnonzero(maybe).tolist()
            if tries_of(detail_of({"detail": c.value("detail", at)})) is not None]


def _pair_rows(c: Columns, store: np.ndarray) -> list[int]:
    """A master/slave pair's replay state (``traces/carry_ha.py``): ``carry_pairs`` on the rows it must see
    (``pair_candidate``: a replicate or ha_link, or a store, send or deliver whose detail names a broker — a few),
    and the last store naming no pair, of those rows or of the stores whose detail names no broker at all."""
    if "detail" in c.table.column_names:
        named = pc.fill_null(pc.match_substring(c.table["detail"], '"broker'), False).to_numpy(zero_copy_only=False)
    else:
        named = np.zeros(c.n, dtype=bool)
    candidate = c.is_("event", *HA_EVENTS) & (c.is_("event", *PAIR_LINKS) | named)
    at = np.flatnonzero(candidate).tolist()
    columns = ("seq", "event", "status", "commitlog_offset", "msg_key", "detail")
    pairs = carry_pairs({name: c.value(name, i) if name in c.table.column_names else None for name in columns}
                        for i in at)
    seq = c.ints("seq")
    position = {int(seq[i]): i for i in at}
    out = [position[s] for s in pairs.kept]
    nameless = np.flatnonzero(store & ~candidate)  # rows in seq order: the last is the latest
    last = [int(nameless[-1])] if len(nameless) else []
    if pairs.nameless_store is not None:
        last.append(position[pairs.nameless_store])
    if last:
        out.append(max(last, key=lambda i: int(seq[i])))
    return out


def _closed_transactions(c: Columns, open_keys: np.ndarray) -> np.ndarray:
    """Bool per row: a ``txn_*`` row of a closed transaction (``traces.carry._Transactions``)."""
    key, txn, seq = c.codes("msg_key"), c.codes("txn_id"), c.ints("seq")
    rows = np.flatnonzero(c.is_("event", *TXN_EVENTS) & (txn >= 0))
    out = np.zeros(c.n, dtype=bool)
    if not len(rows):
        return out
    width = int(txn.max()) + 1
    none = np.iinfo(np.int64).max
    # one msg_key, not null, on every row of the transaction
    low, high = np.full(width, none), np.full(width, -1)
    np.minimum.at(low, txn[rows], key[rows])
    np.maximum.at(high, txn[rows], key[rows])
    one_key = (low == high) & (low >= 0)
    the_key = np.where(one_key, low, len(open_keys) - 1)  # the last: "no key", never open
    half, resolved = np.full(width, none), np.full(width, none)
    halves = rows[c.is_("event", "txn_half")[rows]]
    np.minimum.at(half, txn[halves], seq[halves])
    resolving = c.is_("event", "txn_end") & c.is_("status", "COMMIT", "ROLLBACK") | c.is_("event", "txn_discard")
    ends = rows[resolving[rows]]
    np.minimum.at(resolved, txn[ends], seq[ends])
    drains = seq[c.is_("event", "drain")]
    unresolved_now = np.zeros(width, dtype=bool)
    if len(drains):
        drain = int(drains.max())
        unresolved_now = (half < drain) & ~(resolved < drain)
    forced = np.zeros(width, dtype=bool)
    risky = np.zeros(len(open_keys), dtype=bool)
    # the half-queue position of each txn_half / txn_check (-1: none)
    offset = np.where(c.is_("event", "txn_half", "txn_check") & c.has("queue_offset"), c.ints("queue_offset"), -1)
    crashes = np.flatnonzero(c.is_("event", "crash"))
    if len(crashes):
        forced_rows = _read_across(c, crashes, offset, risky)
        forced[txn[forced_rows][txn[forced_rows] >= 0]] = True
    # the highest half-queue position so far: its first row
    if offset.max() >= 0 and txn[int(np.argmax(offset))] >= 0:
        forced[txn[int(np.argmax(offset))]] = True
    closed = one_key & ~open_keys[the_key] & ~risky[the_key] & (resolved != none) & ~unresolved_now & ~forced
    out[rows[closed[txn[rows]]]] = True
    return out


def _read_across(c: Columns, crashes: np.ndarray, offset: np.ndarray, risky: np.ndarray) -> np.ndarray:
    """Positions of the transaction rows that a crash reads across transactions; sets ``risky``
    (per msg_key code) to every crash's at-risk keys. ``offset``: each row's half-queue position (-1:
    none). Per power crash: the first row at the
    highest half-queue position before it (``skipped_halves``'s bound), and the COMMIT / ROLLBACK
    ops its window may leave unread (``unseen_ops``: as many as the earlier ops of its at-risk keys)."""
    key, event = c.codes("msg_key"), c.table["event"]
    index = {k: i for i, k in enumerate(c.names("msg_key"))}
    running = np.maximum.accumulate(offset)
    ops = np.flatnonzero(c.is_("event", "txn_end") & c.is_("status", "COMMIT", "ROLLBACK") & (key >= 0))
    windows = np.zeros(len(ops) + 1, dtype=np.int64)
    out = []
    for at in crashes.tolist():
        row = {"event": event[at].as_py(), "detail": c.value("detail", at)}
        codes = np.array([index[k] for k in at_risk_keys(row) if k in index], dtype=np.int64)
        risky[codes] = True
        if c.value("status", at) != "power":
            continue
        if at and running[at - 1] >= 0:
            out.append(int(np.searchsorted(running, running[at - 1])))
        before = int(np.searchsorted(ops, at))
        lost = int(np.isin(key[ops[:before]], codes).sum())
        windows[before] += 1
        windows[min(before + lost, len(ops))] -= 1
    unread = ops[np.cumsum(windows)[:-1] > 0]
    return np.array([*out, *unread.tolist()], dtype=np.int64)


def _lasting(c: Columns) -> np.ndarray:
    """``traces.unjudged.lasting_rows`` as a bool per row: the candidates (``CANDIDATES``, every
    ``txn_check``: its check number is in ``detail``) as row dicts, the trace's ``TraceFacts`` from
    its crash rows and the anchors' seqs (a trace carried here has no filter detail)."""
    maybe = c.is_("event", "txn_check")  # its check number is in ``detail``
    for event, condition, fields in CANDIDATES:
        mask = c.is_("event", event)
        for name, values in condition:
            holds = np.zeros(c.n, dtype=bool)
            for v in values:
                if v is None:
                    holds |= c.null(name)
                elif v is SET:
                    holds |= ~c.null(name)
                elif isinstance(v, int):
                    holds |= ~c.null(name) & (c.ints(name) == v)
                else:
                    holds |= c.is_(name, v)
            mask &= holds
        columns = [f for f in fields if f not in DETAIL_FIELDS]
        if not fields:
            maybe |= mask
        elif columns:
            maybe |= mask & ~c.has(*columns)
    out = np.zeros(c.n, dtype=bool)
    if not maybe.any():
        return out
    seq, ev = c.ints("seq"), c.is_
    drains = np.flatnonzero(ev("event", "drain"))
    drain = max(((int(seq[i]), int(c.ints("ts")[i])) for i in drains.tolist()), default=None)
    crash = np.flatnonzero(ev("event", "crash"))
    crashes = tuple((int(seq[i]), c.value("status", i)) for i in crash.tolist())
    risky = any(at_risk_keys({"event": "crash", "detail": c.value("detail", i)}) for i in crash.tolist())
    marks = {
        "commit": ev("event", "commit_offset") & c.has("group", "topic", "queue_id", "queue_offset"),
        "half_position": ev("event", "txn_half", "txn_check") & c.has("queue_offset"),
        "schedule_position": ev("event", "store") & c.is_("topic", SCHEDULE_TOPIC) & c.has("queue_offset"),
        "expire": ev("event", "expire"),
    }
    anchors = {name: (int(seq[m].min()), int(seq[m].max())) for name, m in marks.items() if m.any()}
    facts = TraceFacts(crashes, risky, False, anchors, drain)
    at = np.flatnonzero(maybe)
    for i, row in zip(at.tolist(), c.table.take(pa.array(at)).to_pylist(), strict=True):
        out[i] = candidate(row) and any(u.until is None for u in row_unjudged(row, facts))
    return out


def _carried_whole(c: Columns) -> bool:
    """Whether ``carry_trace`` carries the trace whole: ``traces.carry.carries_filters`` or
    ``checks_common.broadcasting_row`` of any row (``detail`` as text; the latter parsed only where the
    text names BROADCASTING, as ``broadcasting_row`` does)."""
    detail = c.table["detail"]
    if not (pa.types.is_string(detail.type) or pa.types.is_large_string(detail.type)):
        raise TypeError(f"carry_columns: detail must be text, not {detail.type}")
    named = np.zeros(c.n, dtype=bool)
    for name in FILTER_DETAIL_KEYS:
        named |= pc.match_substring(detail, f'"{name}"').fill_null(False).to_numpy(zero_copy_only=False)
    if (named & c.is_("event", "send", "store", "deliver", "consume")).any():
        return True
    maybe = pc.match_substring(detail, BROADCASTING).fill_null(False).to_numpy(zero_copy_only=False)
    return any(broadcasting_row({"detail": c.value("detail", i)}) for i in np.flatnonzero(maybe).tolist())


def _ends(
    c: Columns, mask: np.ndarray, keys: tuple[Key, ...], *, first: bool, within: tuple[Key, ...] = ()
) -> np.ndarray:
    """Positions of the first (else last) row of ``mask`` per value of ``keys``, rows ordered by
    ``within`` then seq inside a key."""
    s = _Segments(c, mask, keys, within)
    return s.pos[s.firsts() if first else s.lasts()]


class _Segments:
    """The rows of ``mask`` sorted by ``keys``, then ``within``, then seq, in segments of equal
    ``keys``: ``pos`` (their positions), ``i`` (their rank in that order) and per-segment
    reductions of a value per sorted row."""

    def __init__(self, c: Columns, mask: np.ndarray, keys: tuple[Key, ...], within: tuple[Key, ...] = ()):
        self.pos, new = c.sorted(mask, (*keys, *within))
        if within and len(self.pos):
            new = starts(*((c.codes(k) if isinstance(k, str) else k)[self.pos] for k in keys))
        self.i = np.arange(len(self.pos))
        self.seg = np.cumsum(new) - 1
        self._at = np.flatnonzero(new)

    def firsts(self) -> np.ndarray:
        """The rank of each segment's first row."""
        return self._at

    def lasts(self) -> np.ndarray:
        """The rank of each segment's last row."""
        return np.append(self._at[1:], len(self.i)) - 1 if len(self.i) else self._at

    def max(self, ok: np.ndarray) -> np.ndarray:
        """Per segment, the greatest rank among the rows where ``ok`` (-1: none)."""
        return np.maximum.reduceat(np.where(ok, self.i, -1), self._at) if len(self.i) else self.i

    def min(self, ok: np.ndarray) -> np.ndarray:
        """Per segment, the least rank among the rows where ``ok`` (``_NONE``: none)."""
        return np.minimum.reduceat(np.where(ok, self.i, _NONE), self._at) if len(self.i) else self.i


def _owned_last(c: Columns, epoch: np.ndarray) -> np.ndarray:
    """ORDER_KEY_REORDERED: per (epoch, queue) with an owner at the epoch's end, its last SUCCESS
    consume (with an offset) since its ownership began, unless the owner rolled back after it."""
    s = _Segments(c, c.is_("event", "lock", "unlock", "consume", "orderly_end") & c.has(*QUEUE, "client_id"),
                  (epoch, *QUEUE))
    client = c.codes("client_id")[s.pos]
    granted = (c.is_("event", "lock") & c.is_("status", "GRANTED"))[s.pos]
    unlock = c.is_("event", "unlock")[s.pos]
    last_grant = s.max(granted)
    owner = np.where(last_grant >= 0, client[np.maximum(last_grant, 0)], -2)[s.seg]
    mine = client == owner
    # an unlock by the owner after its last grant leaves no grant to begin an ownership after it
    lost_it = s.max((granted & ~mine) | (unlock & mine))[s.seg]
    began = s.min(granted & mine & (s.i > lost_it))[s.seg]
    consumed = (c.is_("event", "consume") & c.is_("status", "SUCCESS") & c.has("queue_offset"))[s.pos]
    last = s.max(consumed & mine & (s.i > began))
    rolled = s.max((c.is_("event", "orderly_end") & c.is_("status", "ROLLBACK"))[s.pos] & mine & (s.i > began))
    return s.pos[last[(last >= 0) & (last > rolled)]]


def _open_windows(c: Columns) -> np.ndarray:
    """ORDERLY_CONCURRENT: per (queue, client), the start that opened a window still open."""
    s = _Segments(c, c.is_("event", "orderly_start", "orderly_end") & c.has(*QUEUE, "client_id"), (*QUEUE, "client_id"))
    end = c.is_("event", "orderly_end")[s.pos]
    opened = s.min(~end & (s.i > s.max(end)[s.seg]))
    return s.pos[opened[opened != _NONE]]


def _pending(c: Columns, success: np.ndarray) -> np.ndarray:
    """OFFSET_OVERRUN: per (queue, offset), the latest deliver when nothing acknowledged it since."""
    acks = c.is_("event", "send_back") | success
    s = _Segments(
        c, (c.is_("event", "deliver", "consume") | acks) & c.has(*QUEUE, "queue_offset"), (*QUEUE, "queue_offset")
    )
    delivered = s.max(c.is_("event", "deliver")[s.pos])
    acked = s.max(acks[s.pos])
    return s.pos[delivered[(delivered >= 0) & (acked < delivered)]]


def _open(
    c: Columns,
    send: np.ndarray,
    store: np.ndarray,
    success: np.ndarray,
    dc: np.ndarray,
    subscriptions: Mapping[str, Sequence[str]] | None,
) -> np.ndarray:
    """Bool per msg_key code, plus a last False for "no key": the key is open (``carry_trace``)."""
    key, topic, group, seq = c.codes("msg_key"), c.codes("topic"), c.codes("group"), c.ints("seq")
    keys = len(c.names("msg_key"))
    has_key = key >= 0

    def per_key(mask: np.ndarray) -> np.ndarray:
        out = np.zeros(keys + 1, dtype=bool)
        out[key[mask & has_key]] = True
        return out

    half = c.is_("event", "txn_half") & has_key
    commit = c.is_("event", "txn_end") & c.is_("status", "COMMIT") & has_key
    known, halves, committed = per_key(send | store | half), per_key(half), per_key(commit)
    # the topics a key was acknowledged on: its acked sends', its COMMITs' (else its first half's)
    half_topic = np.full(keys + 1, -1, dtype=np.int64)
    first_half = _ends(c, half & (topic >= 0), ("msg_key",), first=True)
    half_topic[key[first_half]] = topic[first_half]
    acked = send & has_key & (topic >= 0) & (c.null("status") | c.is_("status", *ACKED_SEND_STATUSES))
    commit_topic = np.where(topic[commit] >= 0, topic[commit], half_topic[key[commit]])
    pair_key = np.concatenate([key[acked], key[commit][commit_topic >= 0]])
    pair_topic = np.concatenate([topic[acked], commit_topic[commit_topic >= 0]])
    acked_on = np.zeros(keys + 1, dtype=bool)
    acked_on[pair_key] = True
    # a half with no COMMIT is open while delivered after its first half (``carry_trace``)
    first_half_seq, last_deliver = np.full(keys + 1, _NONE), np.full(keys + 1, -1)
    np.minimum.at(first_half_seq, key[half], seq[half])
    delivered = c.is_("event", "deliver") & has_key
    np.maximum.at(last_deliver, key[delivered], seq[delivered])
    open_keys = ~known | (~acked_on & ~halves) | (halves & ~committed & (last_deliver >= first_half_seq))
    # LOST: a consumer group of such a topic that has not consumed (nor dead-lettered) the key
    # before the last drain
    owed_key, owed_group, width = _owed(c, dc, pair_key, pair_topic, subscriptions)
    done_rows = (c.is_("event", "send_back") & c.is_("status", "DLQ")) | success
    done_at = _ends(c, done_rows & c.has("group") & has_key, ("group", "msg_key"), first=True)
    done_code = key[done_at] * width + group[done_at]
    order = np.argsort(done_code)
    done_code, done_seq = done_code[order], seq[done_at][order]
    wanted = owed_key * width + owed_group
    at = np.minimum(np.searchsorted(done_code, wanted), max(len(done_code) - 1, 0))
    found = (done_code[at] == wanted) if len(done_code) else np.zeros(len(wanted), dtype=bool)
    done = np.where(found, done_seq[at] if len(done_code) else 0, _NOT_DONE)
    drains = seq[c.is_("event", "drain")]
    last_drain = int(drains.max()) if len(drains) else _NO_DRAIN
    open_keys[owed_key[done > last_drain]] = True
    # TIMER_UNFIRED: an acknowledged timer send whose key no timer_fire fired before the last drain
    timed = send & has_key & (c.null("status") | c.is_("status", *ACKED_SEND_STATUSES)) & ~c.null("deliver_ts") & (
        c.null("delay_level") | (c.ints("delay_level") <= 0))
    first_fire = np.full(keys + 1, _NOT_DONE, dtype=np.int64)
    fires = c.is_("event", "timer_fire") & has_key
    np.minimum.at(first_fire, key[fires], seq[fires])
    open_keys[key[timed][first_fire[key[timed]] > last_drain]] = True
    open_keys[keys] = False
    return open_keys


def _owed(
    c: Columns,
    dc: np.ndarray,
    pair_key: np.ndarray,
    pair_topic: np.ndarray,
    subscriptions: Mapping[str, Sequence[str]] | None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """(msg_key code, group code) of every consumer group a key acknowledged on a topic owes a
    consume: the topic's (group, topic) pairs of ``dc`` rows and of ``subscriptions``, fanned out
    over the (key, topic) pairs; and the width that packs a (key, group) pair into one int."""
    topic, group = c.codes("topic"), c.codes("group")
    gnames, tnames = c.names("group"), c.names("topic")
    gindex = {g: i for i, g in enumerate(gnames)}
    tindex = {t: i for i, t in enumerate(tnames)}
    for g in subscriptions or {}:
        gindex.setdefault(g, len(gindex))
    width = len(gindex) + 1
    consumers = topic[dc] * width + group[dc]
    subscribed = [tindex[t] * width + gindex[g] for g, ts in (subscriptions or {}).items() for t in ts if t in tindex]
    consumers = np.unique(np.concatenate([consumers, np.array(subscribed, dtype=np.int64)]))
    by_topic = np.bincount(consumers // width, minlength=len(tnames) + 1)
    first_of_topic = np.concatenate([[0], np.cumsum(by_topic)[:-1]])
    pairs = np.unique(pair_key * (len(tnames) + 1) + pair_topic)
    pk, pt = pairs // (len(tnames) + 1), pairs % (len(tnames) + 1)
    fan = by_topic[pt]
    base = np.repeat(first_of_topic[pt] - (np.cumsum(fan) - fan), fan)
    return np.repeat(pk, fan), consumers[base + np.arange(int(fan.sum()))] % width, width
