"""Configuration verification: a concrete ``BrokerConf``'s guarantees, or counterexamples.

Theory of operation
-------------------
The lifecycle theorems (``theorems``) hold for every parameter value, so they
hold for any configuration. What depends on the concrete numbers — and on the
clocks and the network, which the lifecycles do not model — is checked here.

Time model (``OrderlyConsumptionExclusive``, ``LockRenewedBeforeClientExpiry``):
the broker's clock is the reference timeline (integer ms). Each client reads
its own integer-ms clock whose rate may differ from the broker's by at most
``clockDriftPpm``: for any two events ``e ≤ f`` of one client,
``(1 − ρ)(f − e) ≤ c(f) − c(e) ≤ (1 + ρ)(f − e)`` with ``ρ = ppm / 10⁶``
(the rate may vary within the bound; offsets are irrelevant because a
client only compares its own readings, so each client's clock is shown
starting at the broker time of its first event). A request reaches the
broker at most ``maxRequestLatencyMs`` after it was sent and the response
reaches the client at most ``maxRequestLatencyMs`` after the broker acted
(``≥ 0`` each way). Facts from RocketMQ 4.9:

- broker: another client may take the queue when
  ``now − last_update > rocketmq.broker.rebalance.lockMaxLiveTime``
  (RebalanceLockManager; the z3 twin of ``lock_expired``);
- client: ``lastLockTimestamp`` is the client time when the LOCK_BATCH_MQ
  response was received (RebalanceImpl.lock/lockAll); a ConsumeRequest runs a
  batch only while ``now − lastLockTimestamp ≤
  rocketmq.client.rebalance.lockMaxLiveTime`` (ProcessQueue.isLockExpired,
  ConsumeMessageOrderlyService.ConsumeRequest);
- client: ``lockAll`` runs every ``rocketmq.client.rebalance.lockInterval``
  on the client's clock (ConsumeMessageOrderlyService.start).

A batch starts at the lock check and runs up to ``maxOrderlyListenerMs``
(``max_orderly_listener_ms``, rmqspec's own key; 0, the default, makes a batch
an instant): RocketMQ bounds neither an orderly listener nor the pauses (GC,
a stalled disk) it suffers — ConsumeMessageOrderlyService checks the lock only
before a batch, and consumeTimeout does not apply to orderly consumption — so a
listener that outruns the broker's lifetime consumes beside the next owner, as
4.9 permits (issue 42). Renewal requests that are lost (a partition)
are not drawn: the worst case for exclusivity is that A's last grant is its
last successful one.

Results are ``ProofResult`` rows (kind ``config``); failures carry a
``Timeline``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import z3

from rmqspec.model.lifecycle import RETRY, route_send_back
from rmqspec.properties.brokerconf import KEYS, BrokerConf
from rmqspec.properties.codes import Code
from rmqspec.properties.prover import FAILED, INFO, PROVED, UNKNOWN, WARNING, ProofResult
from rmqspec.properties.z3_encode import z_lock_expired

SOLVER_TIMEOUT_MS = 20_000
PPM = 1_000_000


@attrs.frozen
class TimelineEvent:
    broker_ms: int
    clocks: Mapping[str, int]  # client name -> that client's clock reading
    actor: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "broker_ms": self.broker_ms,
            "clocks": dict(self.clocks),
            "actor": self.actor,
            "text": self.text,
        }


@attrs.frozen
class Timeline:
    """A concrete counterexample: numbered events on the broker's timeline."""

    title: str
    clients: tuple[str, ...]
    events: tuple[TimelineEvent, ...]
    facts: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "clients": list(self.clients),
            "events": [e.to_dict() for e in self.events],
            "facts": list(self.facts),
        }

    def render(self) -> list[str]:
        head = f"  {'#':>3}  {'broker ms':>10}" + "".join(
            f"  {c + ' ms':>10}" for c in self.clients
        )
        lines = [self.title, head + "  event"]
        for i, e in enumerate(self.events, start=1):
            cols = "".join(
                f"  {e.clocks[c]:>10}" if c in e.clocks else f"  {'-':>10}" for c in self.clients
            )
            lines.append(f"  {i:>2}.  {e.broker_ms:>10}{cols}  {e.actor}: {e.text}")
        lines.extend(f"  {fact}" for fact in self.facts)
        return lines


# ---------------------------------------------------------------------------
# Clock and network constraints


def _drift(events: Sequence[tuple[z3.ArithRef, z3.ArithRef]], ppm: int) -> list[z3.BoolRef]:
    """Pairwise rate bounds for one client's (broker time, client reading) events."""
    out = []
    for i, (bi, ci) in enumerate(events):
        for bj, cj in events[i + 1 :]:
            for (b1, c1), (b2, c2) in (((bi, ci), (bj, cj)), ((bj, cj), (bi, ci))):
                out.append(
                    z3.Implies(
                        b1 <= b2,
                        z3.And(
                            PPM * (c2 - c1) >= (PPM - ppm) * (b2 - b1),
                            PPM * (c2 - c1) <= (PPM + ppm) * (b2 - b1),
                        ),
                    )
                )
    return out


def _within(lo: z3.ArithRef, x: z3.ArithRef, latency: int) -> z3.BoolRef:
    return z3.And(lo <= x, x <= lo + latency)


def _int(model: z3.ModelRef, x: z3.ArithRef) -> int:
    return model.eval(x, model_completion=True).as_long()


def _optimize(
    constraints: Sequence[z3.BoolRef],
    minimize: z3.ArithRef | None = None,
    maximize: z3.ArithRef | None = None,
    then_minimize: z3.ArithRef | None = None,
) -> tuple[z3.CheckSatResult, z3.ModelRef | None]:
    """Solve with objectives (lexicographic, in this order) to get a readable extreme timeline."""
    opt = z3.Optimize()
    opt.set("timeout", SOLVER_TIMEOUT_MS)
    opt.add(*constraints)
    for goal, lower in ((minimize, True), (maximize, False), (then_minimize, True)):
        if goal is not None:
            if lower:
                opt.minimize(goal)
            else:
                opt.maximize(goal)
    answer = opt.check()
    return answer, (opt.model() if answer == z3.sat else None)


def _result(
    name: str,
    code: str | None,
    status: str,
    start: float,
    statement: str,
    detail: str,
    timeline: Timeline | None = None,
    data: Mapping[str, Any] | None = None,
) -> ProofResult:
    return ProofResult(
        name=name,
        code=code,
        status=status,
        seconds=time.perf_counter() - start,
        counterexample=timeline,
        kind="config",
        statement=statement,
        detail=detail,
        data=dict(data or {}),
    )


# ---------------------------------------------------------------------------
# Orderly consumption is exclusive


def check_orderly_exclusive(conf: BrokerConf) -> ProofResult:
    """Two clients never consume the same queue concurrently in orderly mode.

    Searches a timeline: A is granted the queue (broker time ``g_a``) and
    receives the grant; its renewals then stop succeeding; B's lock request
    reaches the broker at ``g_b`` with ``g_b − g_a > broker lifetime`` and is
    granted; A starts a batch at ``t_c`` while its client clock still says
    ``now − lastLockTimestamp ≤ client lifetime``, and that batch still runs at ``g_b``
    (``t_c + run ≥ g_b`` with ``0 ≤ run ≤ maxOrderlyListenerMs``)."""
    start = time.perf_counter()
    lat, ppm = conf.max_request_latency_ms, conf.clock_drift_ppm
    name, code = "OrderlyConsumptionExclusive", str(Code.ORDERLY_CONCURRENT)
    statement = (
        "Two clients never consume one queue concurrently: once the broker grants the queue to B, "
        "A no longer considers its lock valid and no batch of A still runs."
    )
    a_req, g_a, a_resp, t_c, run = z3.Ints("a_req g_a a_resp t_c run")
    listener = conf.max_orderly_listener_ms
    ca_req, ca_resp, ca_c = z3.Ints("ca_req ca_resp ca_c")
    b_req, g_b, b_resp = z3.Ints("b_req g_b b_resp")
    cb_req, cb_resp = z3.Ints("cb_req cb_resp")
    life_c, life_b = z3.IntVal(conf.client_lock_ms), z3.IntVal(conf.broker_lock_ms)
    client_a = [
        a_req == 0,
        ca_req == 0,
        _within(a_req, g_a, lat),  # request reaches the broker, which grants at g_a
        _within(g_a, a_resp, lat),  # the response reaches A
        t_c >= a_resp,
        *_drift([(a_req, ca_req), (a_resp, ca_resp), (t_c, ca_c)], ppm),
        z3.Not(z_lock_expired(ca_resp, ca_c, life_c)),  # A's ProcessQueue lock still valid at t_c
    ]
    client_a += [run >= 0, run <= listener]  # the batch started at t_c runs until t_c + run
    # How late after its grant can A still be in a batch?
    answer, model = _optimize(client_a, maximize=t_c + run - g_a)
    if answer != z3.sat or model is None:
        return _result(name, code, UNKNOWN, start, statement, f"solver: {answer}")
    window = _int(model, t_c + run - g_a)
    other = [
        _within(b_req, g_b, lat),
        z_lock_expired(g_a, g_b, life_b),  # broker: A's entry expired, B takes the queue
        _within(g_b, b_resp, lat),
        cb_req == b_req,
        *_drift([(b_req, cb_req), (b_resp, cb_resp)], ppm),
        t_c + run >= g_b,  # A's batch still runs when the broker hands the queue to B
    ]
    data = {
        "a_window_ms": window,
        "broker_lock_ms": conf.broker_lock_ms,
        "client_lock_ms": conf.client_lock_ms,
        "clock_drift_ppm": ppm,
        "max_request_latency_ms": lat,
        "max_orderly_listener_ms": listener,
    }
    answer, model = _optimize(client_a + other, minimize=t_c, then_minimize=b_resp - b_req)
    if answer == z3.unsat:
        return _result(
            name,
            code,
            PROVED,
            start,
            statement,
            f"A can be in a batch at most {window} ms after the broker's grant; the broker "
            f"hands the queue over only > {conf.broker_lock_ms} ms after it "
            f"(margin {conf.broker_lock_ms - window} ms; "
            f"client lifetime {conf.client_lock_ms} ms, listener ≤ {listener} ms, drift {ppm} ppm, "
            f"latency ≤ {lat} ms)",
            data=data,
        )
    if answer != z3.sat or model is None:
        return _result(name, code, UNKNOWN, start, statement, f"solver: {answer}", data=data)
    v = {
        str(x): _int(model, x)
        for x in (
            a_req,
            g_a,
            a_resp,
            t_c,
            ca_req,
            ca_resp,
            ca_c,
            b_req,
            g_b,
            b_resp,
            cb_req,
            cb_resp,
        )
    }
    events = [
        TimelineEvent(v["a_req"], {"A": v["ca_req"]}, "A", "sends LOCK_BATCH_MQ for the queue"),
        TimelineEvent(v["g_a"], {}, "broker", f"grants the queue to A (last_update = {v['g_a']})"),
        TimelineEvent(
            v["a_resp"],
            {"A": v["ca_resp"]},
            "A",
            f"receives the grant: lastLockTimestamp = {v['ca_resp']}; its later renewals are lost",
        ),
        TimelineEvent(v["b_req"], {"B": v["cb_req"]}, "B", "sends LOCK_BATCH_MQ for the queue"),
        TimelineEvent(
            v["g_b"],
            {},
            "broker",
            f"{v['g_b']} − {v['g_a']} = {v['g_b'] - v['g_a']} > {conf.broker_lock_ms}: "
            "A's entry expired, grants the queue to B",
        ),
        TimelineEvent(
            v["b_resp"], {"B": v["cb_resp"]}, "B", "receives the grant and starts consuming"
        ),
    ]
    running = max(0, v["g_b"] - v["t_c"])  # the least run time that keeps A's batch going at g_b
    v["run"] = running
    lock_ok = f"{v['ca_c']} − {v['ca_resp']} = {v['ca_c'] - v['ca_resp']} ≤ {conf.client_lock_ms}, lock still valid"
    if running == 0:
        events.append(TimelineEvent(v["t_c"], {"A": v["ca_c"]}, "A",
                                    f"starts a batch: {lock_ok} → A and B consume concurrently"))
    else:
        events += [
            TimelineEvent(v["t_c"], {"A": v["ca_c"]}, "A", f"starts a batch: {lock_ok}"),
            TimelineEvent(v["g_b"], {}, "A",
                          f"its listener still runs ({running} ms so far, ≤ maxOrderlyListenerMs {listener}) "
                          "→ A and B consume concurrently"),
        ]
    events.sort(key=lambda e: e.broker_ms)  # stable: same-instant events keep causal order
    timeline = Timeline(
        title=f"counterexample: client lifetime {conf.client_lock_ms} ms + listener ≤ {listener} ms + "
        f"latency/drift outlasts the broker lifetime {conf.broker_lock_ms} ms",
        clients=("A", "B"),
        events=tuple(events),
        facts=(f"assumed: clock drift ≤ {ppm} ppm, request/response latency ≤ {lat} ms each way, "
               f"an orderly listener runs ≤ {listener} ms",),
    )
    return _result(
        name,
        code,
        FAILED,
        start,
        statement,
        f"A can still be in a batch {window} ms after its last grant, but the broker gives "
        "the queue "
        f"away {conf.broker_lock_ms + 1} ms after it",
        timeline,
        {**data, "values": v},
    )


# ---------------------------------------------------------------------------
# The client renews its lock before its own lifetime ends


def check_lock_renewal(conf: BrokerConf) -> ProofResult:
    """With every renewal granted, the client's lock never lapses between two renewals."""
    start = time.perf_counter()
    lat, ppm = conf.max_request_latency_ms, conf.clock_drift_ppm
    name = "LockRenewedBeforeClientExpiry"
    statement = (
        "A client whose renewals are all granted never sees its own lock expire: the next grant "
        "arrives within the client lifetime (lockInterval + round trip)."
    )
    r1, g1, s1, r2, g2, s2, x = z3.Ints("r1 g1 s1 r2 g2 s2 x")
    c_r1, c_s1, c_r2, c_s2, c_x = z3.Ints("c_r1 c_s1 c_r2 c_s2 c_x")
    life = z3.IntVal(conf.client_lock_ms)
    constraints = [
        r1 == 0,
        c_r1 == 0,
        _within(r1, g1, lat),
        _within(g1, s1, lat),
        c_r2 == c_r1 + conf.lock_interval_ms,  # lockAll at a fixed rate on the client's clock
        _within(r2, g2, lat),
        _within(g2, s2, lat),
        s1 <= x,
        x <= s2,  # in the ms the renewal arrives, the ConsumeRequest may run first
        *_drift([(r1, c_r1), (s1, c_s1), (r2, c_r2), (s2, c_s2), (x, c_x)], ppm),
        z_lock_expired(c_s1, c_x, life),  # ProcessQueue.isLockExpired at x
    ]
    answer, model = _optimize(constraints, minimize=x)
    data = {
        "lock_interval_ms": conf.lock_interval_ms,
        "client_lock_ms": conf.client_lock_ms,
        "clock_drift_ppm": ppm,
        "max_request_latency_ms": lat,
    }
    if answer == z3.unsat:
        return _result(
            name,
            None,
            PROVED,
            start,
            statement,
            f"lockInterval {conf.lock_interval_ms} ms + round trip ≤ {2 * lat} ms stays within the "
            f"client lifetime {conf.client_lock_ms} ms (drift {ppm} ppm)",
            data=data,
        )
    if answer != z3.sat or model is None:
        return _result(name, None, UNKNOWN, start, statement, f"solver: {answer}", data=data)
    v = {str(k): _int(model, k) for k in (r1, g1, s1, r2, g2, s2, x, c_r1, c_s1, c_r2, c_s2, c_x)}
    events = [
        TimelineEvent(v["r1"], {"A": v["c_r1"]}, "A", "lockAll: sends LOCK_BATCH_MQ"),
        TimelineEvent(v["g1"], {}, "broker", "grants the queue to A"),
        TimelineEvent(
            v["s1"], {"A": v["c_s1"]}, "A", f"receives the grant: lastLockTimestamp = {v['c_s1']}"
        ),
        TimelineEvent(
            v["r2"],
            {"A": v["c_r2"]},
            "A",
            f"next lockAll {conf.lock_interval_ms} ms later (client clock): sends LOCK_BATCH_MQ",
        ),
        TimelineEvent(v["g2"], {}, "broker", "renews A's lock"),
        TimelineEvent(
            v["x"],
            {"A": v["c_x"]},
            "A",
            f"ConsumeRequest: {v['c_x']} − {v['c_s1']} = {v['c_x'] - v['c_s1']} > "
            f"{conf.client_lock_ms}: lock expired, consumption pauses",
        ),
        TimelineEvent(
            v["s2"], {"A": v["c_s2"]}, "A", f"receives the renewal: lastLockTimestamp = {v['c_s2']}"
        ),
    ]
    events.sort(key=lambda e: e.broker_ms)
    timeline = Timeline(
        title="counterexample: lock renewal gap — the client's own lock lapses between renewals",
        clients=("A",),
        events=tuple(events),
        facts=(f"assumed: clock drift ≤ {ppm} ppm, request/response latency ≤ {lat} ms each way",),
    )
    return _result(
        name,
        None,
        FAILED,
        start,
        statement,
        f"lock renewal gap: lockInterval {conf.lock_interval_ms} ms + round trip up to "
        f"{2 * lat} ms "
        f"exceeds the client lifetime {conf.client_lock_ms} ms",
        timeline,
        {**data, "values": v},
    )


# ---------------------------------------------------------------------------
# Table and transaction facts


_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000))


def _fmt_ms(ms: int) -> str:
    """``7200000`` → ``2h``; ``17140000`` → ``4h45m40s``; sub-second remainders in ms."""
    if ms <= 0:
        return f"{ms}ms"
    parts = []
    for unit, size in _UNITS:
        if ms >= size:
            parts.append(f"{ms // size}{unit}")
            ms %= size
    if ms:
        parts.append(f"{ms}ms")
    return "".join(parts)


def check_delay_table(conf: BrokerConf) -> ProofResult:
    start = time.perf_counter()
    table = conf.delay_levels_ms
    drops = [i + 1 for i in range(1, len(table)) if table[i] < table[i - 1]]
    statement = "The messageDelayLevel table is non-decreasing (RocketMQ does not require it)."
    desc = f"{len(table)} levels: " + " ".join(_fmt_ms(d) for d in table)
    if drops:
        return _result(
            "DelayTableNonDecreasing",
            None,
            WARNING,
            start,
            statement,
            f"{desc}; level(s) {', '.join(map(str, drops))} are shorter than the level before: "
            "a later retry can be due sooner than an earlier one",
            data={"decreasing_levels": drops},
        )
    return _result("DelayTableNonDecreasing", None, PROVED, start, statement, desc)


def check_retry_levels(conf: BrokerConf) -> ProofResult:
    """Every retry r < retryMaxTimes uses level 3 + r, clamped to the table's last level."""
    start = time.perf_counter()
    table, m = conf.delay_levels_ms, conf.retry_max_times
    top = len(table)
    statement = (
        "Every retry level 3 + r (r < retryMaxTimes) is in the delay table "
        "or clamped to its last level."
    )
    first_clamped = max(0, top - 2)  # 3 + r > top  ⇔  r ≥ top − 2
    unclamped = min(m, first_clamped)
    clamped = m - unclamped
    # The model's own routing decides the levels; checked at the boundaries.
    for r in sorted({0, unclamped - 1, unclamped, m - 1} & set(range(m))):
        routed = route_send_back(r, m, 0, top)
        if routed != (RETRY, min(3 + r, top)):
            return _result(
                "RetryLevelsWithinTable",
                str(Code.RETRY_EARLY),
                FAILED,
                start,
                statement,
                f"the model routes retry r = {r} to {routed}, not level {min(3 + r, top)}",
            )
    total = sum(table[min(3 + r, top) - 1] for r in range(unclamped)) + clamped * table[-1]
    data = {
        "retry_max_times": m,
        "max_level": top,
        "clamped_retries": clamped,
        "min_time_to_dlq_ms": total,
    }
    tail = (
        f"a message failing every time is delivered {m + 1} times and reaches the DLQ "
        f"at the earliest {_fmt_ms(total)} after its first delivery"
    )
    if clamped:
        return _result(
            "RetryLevelsWithinTable",
            str(Code.RETRY_EARLY),
            INFO,
            start,
            statement,
            f"retries r = {first_clamped}..{m - 1} ({clamped}) want levels "
            f"{3 + first_clamped}..{m + 2} "
            f"> {top} and are clamped to level {top} ({_fmt_ms(table[-1])}); {tail}",
            data=data,
        )
    return _result(
        "RetryLevelsWithinTable",
        str(Code.RETRY_EARLY),
        PROVED,
        start,
        statement,
        f"retry levels 3..{m + 2} are within the {top}-level table; {tail}"
        if m
        else f"retryMaxTimes = 0: the first failure goes to the DLQ; {tail}",
        data=data,
    )


def check_transaction_max(conf: BrokerConf) -> ProofResult:
    start = time.perf_counter()
    statement = (
        "transactionCheckMax ≥ 1: an unresolved half is asked at least once before it is discarded."
    )
    n = conf.transaction_check_max
    if n >= 1:
        return _result(
            "TransactionCheckMaxPositive",
            str(Code.TXN_CHECK_EXCEEDED),
            PROVED,
            start,
            statement,
            f"transactionCheckMax = {n} ({conf.source_of('transactionCheckMax')})",
        )
    return _result(
        "TransactionCheckMaxPositive",
        str(Code.TXN_CHECK_EXCEEDED),
        FAILED,
        start,
        statement,
        f"transactionCheckMax = {n} ({conf.source_of('transactionCheckMax')}): "
        "needDiscard is true at "
        "the first check, so every half without END_TRANSACTION is discarded unasked",
    )


def check_transaction_timing(conf: BrokerConf) -> ProofResult:
    start = time.perf_counter()
    timeout, interval = conf.transaction_timeout_ms, conf.transaction_check_interval_ms
    statement = "transactionTimeOut < transactionCheckInterval (informational)."
    if timeout < interval:
        detail = (
            f"transactionTimeOut {timeout} ms < transactionCheckInterval {interval} ms: a half is "
            f"first checked at the first check round after it is {timeout} ms old "
            f"(at most {timeout + interval} ms after it was sent)"
        )
    else:
        rounds = -(-timeout // interval)
        detail = (
            f"transactionTimeOut {timeout} ms ≥ transactionCheckInterval {interval} ms: "
            "check rounds "
            f"skip a young half for up to {rounds} round(s); the first check comes at most "
            f"{timeout + interval} ms after it was sent"
        )
    return _result(
        "TransactionTimeoutBelowCheckInterval",
        str(Code.TXN_CHECK_EARLY),
        INFO,
        start,
        statement,
        detail,
    )


def check_ignored(conf: BrokerConf) -> ProofResult:
    start = time.perf_counter()
    keys = [p.key for p in conf.ignored]
    statement = "Keys of the file that rmqspec does not use are listed, not rejected."
    detail = (
        f"{len(keys)} ignored: " + ", ".join(f"{p.key} (line {p.line})" for p in conf.ignored)
        if keys
        else "no ignored keys"
    )
    return _result(
        "IgnoredKeys",
        None,
        INFO,
        start,
        statement,
        detail,
        data={"ignored": [{"key": p.key, "line": p.line} for p in conf.ignored]},
    )


def check_values(conf: BrokerConf) -> ProofResult:
    start = time.perf_counter()
    values = {key: getattr(conf, field) for key, (field, _) in KEYS.items()}
    shown = {
        k: (" ".join(_fmt_ms(d) for d in v) if isinstance(v, tuple) else v)
        for k, v in values.items()
    }
    detail = "; ".join(f"{k} = {shown[k]} ({conf.source_of(k)})" for k in KEYS)
    return _result(
        "ConfigurationValues",
        None,
        INFO,
        start,
        "The values verified and where each came from (a line of the file, or the default).",
        detail,
        data={
            "file": conf.path,
            "values": {k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items()},
            "sources": {k: conf.source_of(k) for k in KEYS},
        },
    )


CHECKS: tuple[Callable[[BrokerConf], ProofResult], ...] = (
    check_values,
    check_orderly_exclusive,
    check_lock_renewal,
    check_delay_table,
    check_retry_levels,
    check_transaction_max,
    check_transaction_timing,
    check_ignored,
)


def verify_config(
    conf: BrokerConf, *, on_progress: Callable[[int, int], None] | None = None
) -> list[ProofResult]:
    results = []
    for i, check in enumerate(CHECKS):
        results.append(check(conf))
        if on_progress is not None:
            on_progress(i + 1, len(CHECKS))
    return results
