"""An independent, minimal reading of SPEC §8.1 used only by these tests.

It reports (code, seqs) per violation with the seqs convention of
traces/README.md, so a clean generated trace must give nothing and an injected
one exactly its ground truth. Observations are not reported.
"""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import pairwise
from typing import Any

from structural_ha import audit_ha

from rmqspec.model.config import DEFAULT_DELAY_LEVELS, parse_delay_levels
from rmqspec.model.pullfilter import subscription_matches

DELAYS = parse_delay_levels(DEFAULT_DELAY_LEVELS)
RETRY_MAX = 16
BROKER_LOCK = 60_000
CLIENT_LOCK = 30_000
TXN_TIMEOUT = 6000
CHECK_MAX = 15
FILE_RESERVED = 72 * 3_600_000


def _detail(r: dict[str, Any]) -> dict[str, Any]:
    d = r.get("detail")
    return json.loads(d) if isinstance(d, str) else (d or {})


def _window(latency: int) -> int:
    """MQFaultStrategy's computeNotAvailableDuration under 4.9.8's tables."""
    steps = ((15000, 600000), (3000, 180000), (2000, 120000), (1000, 60000), (550, 30000))
    return next((d for at, d in steps if latency >= at), 0)


def audit(rows: list[dict[str, Any]]) -> list[tuple[str, tuple[int, ...]]]:
    out: list[tuple[str, tuple[int, ...]]] = []

    def v(code: str, *seqs: int) -> None:
        out.append((code, tuple(seqs)))

    last_store: dict[tuple, tuple[int, int]] = {}
    known: set[str] = set()
    sends: list[dict] = []
    routed: dict[tuple, dict[int, int]] = {}
    sched: dict[str, dict] = {}
    sb_retry: dict[tuple, dict] = {}
    success: set[tuple] = set()
    dlq: set[tuple] = set()
    consumers: dict[str, set] = defaultdict(set)
    unacked: dict[tuple, dict[int, int]] = defaultdict(dict)
    grants: dict[tuple, dict[str, tuple[int, int]]] = defaultdict(dict)
    latest: dict[tuple, tuple[str, int]] = {}
    windows: dict[tuple, dict[str, int]] = defaultdict(dict)
    last_success: dict[tuple, tuple[str, int, int]] = {}
    txn: dict[str, dict[str, Any]] = {}
    early_visible: dict[str, list[tuple[int, int]]] = defaultdict(list)
    last_back: dict[tuple, dict] = {}  # (group, key) -> latest DLQ send-back
    dlq_counts: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])  # (group, key) -> [send-backs, stores]
    fires: dict[tuple, list] = {}  # (key, rt) -> [scheduled, fired, first fire seq, crashes then]
    crashes = 0
    commits: dict[tuple, dict] = {}
    # filters (issue 15): message attributes, client subscriptions, stored positions, deliveries
    attrs: dict[str, tuple] = {}
    subs: dict[tuple, dict[str, tuple[str, str]]] = defaultdict(dict)  # (group, topic) -> client -> sub
    placed: dict[tuple, list[tuple[int, str, int]]] = defaultdict(list)  # (topic, q) -> [(off, key, seq)]
    got: dict[tuple, set[str]] = defaultdict(set)  # (group, key) -> clients delivered to
    skipped: set[tuple] = set()
    # issue 41, the lifecycle tables: the latest RETRY send-back per (group, key); the lock entry per
    # queue: (holder, grant seq, grant ts), ("", freeing seq, 0) or None (unknown after a finding)
    retry_back: dict[tuple, dict] = {}
    entry: dict[tuple, tuple[str, int | None, int] | None] = {}
    restart: int | None = None
    # 5.x timer messages: key -> (first timer send seq, its deliver_ts); keys with a timer copy stored,
    # fired, or a copy stored in their topic; copy -> (latest fire seq, crashes then)
    timer_sends: dict[str, tuple[int, int]] = {}
    timer_stored: set[str] = set()
    timer_fired: set[str] = set()
    real_stored: set[str] = set()
    timer_fires: dict[tuple, tuple[int, int]] = {}
    fault_until: dict[str, dict[str, int]] = {}  # producer -> broker -> out of its window from

    def wants(g: str, topic: str, key: str) -> set[str]:
        a = attrs[key]
        return {c for c, s in subs[(g, topic)].items() if subscription_matches(s[0], s[1], a[0], a[1]) is True}

    def filtering(g: str, topic: str) -> bool:
        return any(s[1] == "SQL92" or s[0] not in ("", "*") for s in subs[(g, topic)].values())

    for r in rows:
        d = _detail(r) if r.get("detail") else {}
        if r["event"] == "store" and "properties" in d:
            attrs.setdefault(r["msg_key"], (d.get("tags"), d["properties"]))
            placed[(r["topic"], r["queue_id"])].append((r["queue_offset"], r["msg_key"], r["seq"]))
        if r["event"] in ("deliver", "consume") and "subscription" in d:
            subs[(r["group"], r["topic"])].setdefault(r["client_id"], (d["subscription"],
                                                                      d.get("expression_type") or "TAG"))
            if r["event"] == "deliver":
                got[(r["group"], r["msg_key"])].add(r["client_id"])
            elif r["status"] == "SUCCESS" and r["msg_key"] in attrs:
                a = attrs[r["msg_key"]]
                if subscription_matches(d["subscription"], d.get("expression_type"), a[0], a[1]) is False:
                    out.append(("FILTER_MISMATCH", (r["seq"],)))
        if r["event"] == "commit_offset" and r.get("status") != "RESTORED" and filtering(r["group"], r["topic"]):
            for off, mkey, mseq in placed[(r["topic"], r["queue_id"])]:
                want = wants(r["group"], r["topic"], mkey)
                if off < r["queue_offset"] and want and not (got[(r["group"], mkey)] & want) \
                        and (r["group"], mkey) not in skipped:
                    skipped.add((r["group"], mkey))
                    out.append(("FILTER_SKIPPED", (mseq, r["seq"])))
        ev, seq, ts = r["event"], r["seq"], r["ts"]
        g, key = r.get("group"), r.get("msg_key")
        k = (g, r.get("topic"), r.get("queue_id"))
        if ev == "crash":
            crashes += 1
            commits.clear()
        if ev == "store" and r["topic"] == "rmq_sys_wheel_timer":
            timer_stored.add(key)
        elif ev == "store":
            real_stored.add(key)
        elif ev == "send" and r.get("deliver_ts") is not None and not r.get("delay_level"):
            timer_sends.setdefault(key, (seq, r["deliver_ts"]))
        elif ev == "timer_fire":
            timer_fired.add(key)
            if ts < r["deliver_ts"]:
                v("TIMER_EARLY", seq)
            copy = (key, _detail(r)["from_commitlog_offset"])
            if copy in timer_fires and timer_fires[copy][1] == crashes:
                v("TIMER_DUPLICATED", timer_fires[copy][0], seq)
            timer_fires[copy] = (seq, crashes)
        elif ev == "deliver" and key in timer_sends and key not in timer_fired | real_stored \
                and r.get("reconsume_times") == 0 and ts < timer_sends[key][1]:
            v("TIMER_EARLY", timer_sends[key][0], seq)
        if ev in ("store", "schedule_fire") and key is not None:
            f = fires.setdefault((key, r.get("reconsume_times") or 0), [0, 0, None, 0])
            if ev == "store" and r["topic"] == "SCHEDULE_TOPIC_XXXX":
                f[0] += 1
            elif ev == "schedule_fire":
                f[1] += 1
                if f[2] is None:
                    f[2], f[3] = seq, crashes
                if f[1] > f[0] and f[3] == crashes:
                    v("SCHEDULE_DUPLICATED", f[2], seq)
        if ev == "store" and r["topic"].startswith("%DLQ%"):
            n = dlq_counts[(r["topic"][5:], key)]
            n[1] += 1
            sb = last_back.get((r["topic"][5:], key))
            if sb is not None and n[1] <= n[0] and ts - sb["ts"] >= DELAYS[0]:
                v("DLQ_DELAYED", sb["seq"], seq)
        if ev == "commit_offset":
            before = commits.get(k)
            if r.get("status") == "RESTORED" and before is not None and before["queue_offset"] != r["queue_offset"]:
                v("OFFSET_LOST", before["seq"], seq)
            commits[k] = r
            if r.get("status") == "RESTORED":
                continue
        if ev in ("crash", "recover"):
            last_store.clear()
            entry.clear()
            grants.clear()  # the broker's lock table is lost at a restart (LOCK_OVERLAP is per epoch)
            restart = seq
        elif ev == "store":
            q = (r["topic"], r["queue_id"])
            prev = last_store.get(q)
            if prev is not None and r["queue_offset"] != prev[0] + 1:
                v("ORDER_QUEUE_GAP", prev[1], seq)
            last_store[q] = (r["queue_offset"], seq)
            known.add(key)
            if r["topic"] == "SCHEDULE_TOPIC_XXXX":
                sched[r["msg_id"]] = r
                b = retry_back.get((g, key))
                rt = r.get("reconsume_times") or 0
                if rt >= 1 and b is not None and (b["reconsume_times"], b["delay_level"]) != (rt, r["delay_level"]):
                    v("MESSAGE_LIFECYCLE", b["seq"], seq)
        elif ev == "send":
            known.add(key)
            sends.append(r)
            route = _detail(r).get("route_queues")
            if r.get("sharding_key") is not None and route is not None:  # one queue per key and route
                seen = routed.setdefault((g, r["topic"], r["sharding_key"], route), {})
                split = [s for q, s in seen.items() if q != r["queue_id"]]
                if split:
                    v("ORDER_KEY_SPLIT", min(split), seq)
                seen.setdefault(r["queue_id"], seq)
            d = _detail(r)  # a routed producer's attempts (issue 43; 4.9.8's default fault tables)
            tries = d.get("tries") or []
            if d.get("fault") is False:  # a retry to the broker that failed while the route has another
                for a, b in pairwise(tries):
                    if b["attempt"] == a["attempt"] + 1 and b["broker"] == a["broker"] and len(set(b["brokers"])) > 1:
                        v("PRODUCER_RETRY_SAME_BROKER", seq)
            elif d.get("fault") is True:  # an attempt into a window while another broker is out of every window
                out_until = fault_until.setdefault(r["actor"], {})
                for a in tries:
                    free = [x for x in a["brokers"] if out_until.get(x, 0) <= a["start"]]
                    if out_until.get(a["broker"], 0) > a["start"] and free:
                        v("PRODUCER_FAULT_WINDOW", seq)
                    window = 600_000 if a["error"] else _window(a["latency"])
                    out_until[a["broker"]] = a["start"] + a["latency"] + window
        elif ev == "txn_half":
            known.add(key)
            txn[key] = {"half": r, "checks": 0, "times": set(), "copies": defaultdict(set), "ops": {},
                        "last": (0, seq, crashes)}
            if r.get("queue_offset") is not None:
                txn[key]["copies"][0].add(r["queue_offset"])
        elif ev in ("deliver", "consume"):
            if key not in known:
                v("UNEXPECTED", seq)
                continue
            rt = r.get("reconsume_times") or 0
            if ev == "deliver":
                consumers[r["topic"]].add(g)
                unacked[k][r["queue_offset"]] = seq
                if rt > RETRY_MAX:
                    v("DLQ_MISSED", seq)
                sb = sb_retry.get((g, key, rt))
                if rt >= 1 and sb is not None and ts < sb["deliver_ts"]:
                    v("RETRY_EARLY", sb["seq"], seq)
                t = txn.get(key)
                if t is not None and "commit" not in t:
                    if "rollback" in t:
                        v("TXN_ROLLBACK_VISIBLE", t["rollback"], seq)
                    else:
                        early_visible[key].append((t["half"]["seq"], seq))
            elif r["status"] == "SUCCESS":
                success.add((g, key))
                unacked[k].pop(r["queue_offset"], None)
                cid = r["client_id"]
                if cid in windows[k]:
                    prev = last_success.get(k)
                    if prev and prev[0] == cid and r["queue_offset"] <= prev[1]:
                        v("ORDER_KEY_REORDERED", prev[2], seq)
                    last_success[k] = (cid, r["queue_offset"], seq)
        elif ev == "send_back":
            if r["status"] == "DLQ":
                last_back[(g, key)] = r
                dlq_counts[(g, key)][0] += 1
            unacked[k].pop(r["queue_offset"], None)
            rt = r["reconsume_times"]
            if r["status"] == "RETRY":
                if rt > RETRY_MAX:
                    v("DLQ_MISSED", seq)
                if r["deliver_ts"] - ts < DELAYS[min(r["delay_level"], len(DELAYS)) - 1]:
                    v("RETRY_EARLY", seq)
                sb_retry[(g, key, rt)] = r
                retry_back[(g, key)] = r
            else:
                if r["delay_level"] >= 0 and rt <= RETRY_MAX:
                    v("DLQ_EARLY", seq)
                dlq.add((g, key))
        elif ev == "schedule_fire":
            s = sched.get(r["msg_id"])
            if s is not None and ts < s["deliver_ts"]:
                v("DELAY_EARLY", s["seq"], seq)
        elif ev == "commit_offset":
            pending = unacked[k]
            if pending:
                low = min(pending)
                if r["queue_offset"] > low:
                    v("OFFSET_OVERRUN", pending[low], seq)
        elif ev == "lock" and r["status"] == "DENIED":
            e = entry.get(k, ("", restart, 0))
            if e is not None and (e[0] in ("", r["client_id"]) or ts - e[2] > BROKER_LOCK):
                v("LOCK_LIFECYCLE", *(s for s in (e[1], seq) if s is not None))
                entry[k] = None
        elif ev == "lock" and r["status"] == "GRANTED":
            cid = r["client_id"]
            entry[k] = (cid, seq, ts)
            others = [
                (s, t) for c, (s, t) in grants[k].items() if c != cid and ts - t <= BROKER_LOCK
            ]
            if others:
                v("LOCK_OVERLAP", max(others)[0], seq)
            grants[k][cid] = (seq, ts)
            latest[k] = (cid, seq)
        elif ev == "unlock":
            grants[k].pop(r["client_id"], None)
            if entry.get(k) is not None and entry[k][0] == r["client_id"]:
                entry[k] = ("", seq, 0)
        elif ev == "orderly_start":
            cid = r["client_id"]
            own = grants[k].get(cid)
            lat = latest.get(k)
            if lat is not None and lat[0] != cid:
                v("ORDERLY_WITHOUT_LOCK", lat[1], seq)
            elif own is None:
                v("ORDERLY_WITHOUT_LOCK", seq)
            elif ts - own[1] > CLIENT_LOCK:
                v("ORDERLY_WITHOUT_LOCK", own[0], seq)
            others = [(s, c) for c, s in windows[k].items() if c != cid]
            # the newest other window only; none when the broker granted cid the queue after it opened
            # (a listener outlived its lock: the observation ORDERLY_LOCK_OUTLIVED)
            if others and not (lat is not None and lat[0] == cid and lat[1] > max(others)[0]):
                v("ORDERLY_CONCURRENT", max(others)[0], seq)
            if cid in windows[k]:  # a second batch of one client (MessageQueueLock)
                v("ORDERLY_CONCURRENT", windows[k][cid], seq)
            windows[k].setdefault(cid, seq)
            loop = _detail(r)  # the loop's age past the client's MAX_TIME_CONSUME_CONTINUOUSLY, both stated
            age, limit = loop.get("loop_age_ms"), loop.get("loop_max_ms")
            if type(age) is int and type(limit) is int and limit > 0 and age > limit:
                v("ORDERLY_LOOP_OVERRUN", seq)
        elif ev == "orderly_end":
            windows[k].pop(r["client_id"], None)
        elif ev == "txn_end":
            t = txn[key]
            first = t.get("commit") or t.get("rollback") or t.get("discard")
            if r["status"] == "COMMIT":
                if "rollback" in t or "discard" in t:
                    v("TXN_DOUBLE_RESOLVED", first, seq)
                if "commit" not in t:
                    t["commit"] = seq
                    t["topic"] = r["topic"]
                    for half, deliver in early_visible.pop(key, []):
                        v("TXN_VISIBLE_BEFORE_COMMIT", half, deliver)
            elif r["status"] == "ROLLBACK":
                if "commit" in t or "discard" in t:
                    v("TXN_DOUBLE_RESOLVED", first, seq)
                t.setdefault("rollback", seq)
            if r["status"] in ("COMMIT", "ROLLBACK") and r.get("queue_offset") is not None:
                t["ops"].setdefault(r["queue_offset"], seq)
        elif ev == "txn_check":
            t = txn[key]
            times = _detail(r).get("check_times")
            t["times"].add(str(times))
            if isinstance(times, int) and r.get("queue_offset") is not None:
                cands = t["copies"][times - 1]
                if cands and all(p in t["ops"] for p in cands):
                    v("TXN_CHECK_AFTER_RESOLVED", max(t["ops"][p] for p in cands), seq)
                t["copies"][times].add(r["queue_offset"])
            last = t["last"]  # no restart since the half: the count grows with every check
            if isinstance(times, int) and last[2] == crashes and times <= last[0]:
                v("TXN_LIFECYCLE", last[1], seq)
            t["last"] = (times if isinstance(times, int) else 0, seq, last[2])
            t["checks"] += 1
            if ts < t["half"]["ts"] + TXN_TIMEOUT:
                v("TXN_CHECK_EARLY", t["half"]["seq"], seq)
            if t["checks"] > CHECK_MAX:
                v("TXN_CHECK_EXCEEDED", t["half"]["seq"], seq)
        elif ev == "txn_discard":
            t = txn[key]
            if len(t["times"]) < CHECK_MAX and ts - t["half"]["ts"] <= FILE_RESERVED:
                v("TXN_DISCARD_EARLY", t["half"]["seq"], seq)
            if "commit" in t or "rollback" in t:
                v("TXN_DOUBLE_RESOLVED", t.get("commit") or t["rollback"], seq)
            t["discard"] = seq
        elif ev == "drain":
            for s in sends:
                for grp in consumers[s["topic"]]:
                    if (grp, s["msg_key"]) in skipped or (s["msg_key"] in attrs and filtering(grp, s["topic"])
                                                         and not wants(grp, s["topic"], s["msg_key"])):
                        continue
                    if (grp, s["msg_key"]) not in success and (grp, s["msg_key"]) not in dlq:
                        v("LOST", s["seq"], seq)
            for tkey, t in txn.items():
                if "commit" in t:
                    for grp in consumers[t["topic"]]:
                        if (grp, tkey) not in success and (grp, tkey) not in dlq:
                            v("LOST", t["commit"], seq)
                elif "rollback" not in t and "discard" not in t:
                    v("TXN_UNRESOLVED", t["half"]["seq"], seq)
            for tkey, (sseq, due) in timer_sends.items():
                if due <= ts and tkey in timer_stored and tkey not in timer_fired:
                    v("TIMER_UNFIRED", sseq, seq)
    return sorted(out + audit_ha(rows), key=lambda c: (c[1][-1], c[0]))
