"""The scenario programs' figures, ``rmqspec serve`` against a real broker (``make interop``).

Both scenario programs — the Java one (``interop/java/v4/RealScenarios.java``, the 4.9.8 client) and the Go
one (``interop/goclient``, ``rocketmq-client-go/v2``) — print one JSON line per scenario: retry ladder and
DLQ (``a_retry_dlq``), delayed delivery (``b_delay``), transaction checks (``c_transaction``), queue locks
(``d_lock``). Each timing they measure becomes a ``Measure``: serve's figure must fall in the rule's window
``[lo, hi + TOL_MS]`` (the broker's configured timing, late by at most the tolerance) and, when the same
program ran against a real broker, within ``near`` (``TOL_MS`` unless the rule leaves a phase free) of the
real figure. ``java_measures`` / ``go_measures`` list them per program; ``comparison_table`` renders them.

The timing is the one both brokers run with (``tests/interop/realrmq.py``): delay levels of 1 s steps,
transactionTimeOut 2000, transactionCheckInterval 3000, transactionCheckMax 3, broker lock lifetime 5000.
"""

from __future__ import annotations

from typing import Any

import attrs

from tests.interop.realrmq import LOCK_MS, TXN_INTERVAL_MS, TXN_TIMEOUT_MS

TOL_MS = 500  # every timing: within the rule's window + TOL_MS, and within TOL_MS of the real broker
# 5.x's check round sleeps SLEEP_WHILE_NO_OP (1000 ms) before checking an eligible half when the op queue
# held op messages at the round's start (TransactionalMessageServiceImpl.check; 4.9.8 re-pulls at once):
# the first check may come up to that much later than 4.9.8's window (docs/fidelity.md V8).
V5_CHECK_SLEEP_MS = 1000


def check_sleep_ms(version: str) -> int:
    """How much later than 4.9.8's window the first check may come on a broker of ``version``."""
    return V5_CHECK_SLEEP_MS if version.startswith("5.") else 0

# The Go orderly push consumer locks its queue at the rebalance right after its start and renews it 1 s
# later (its lock ticker starts after a 1 s sleep), then only every RebalanceLockInterval (20 s): the broker
# lock lapses LOCK_MS after that first renewal. The foreign client polls every 200 ms (a rebalance each).
GO_FIRST_RENEWAL_MS, GO_FOREIGN_POLL_MS = 1000, 200


@attrs.frozen
class Measure:
    """One timing: serve must fall in the rule's window [lo, hi + TOL_MS] and, when the real broker's figure
    is known, within ``near`` of it."""

    what: str
    real: int | None
    serve: int
    lo: int
    hi: int
    near: int = TOL_MS  # allowed distance from the real broker's figure

    @property
    def in_window(self) -> bool:
        return self.lo <= self.serve <= self.hi + TOL_MS

    @property
    def near_real(self) -> bool:
        return self.real is not None and abs(self.serve - self.real) <= self.near

    @property
    def ok(self) -> bool:
        return self.in_window and (self.real is None or self.near_real)

    def row(self) -> str:
        real = "–" if self.real is None else self.real
        return (f"| {self.what} | {real} | {self.serve} | [{self.lo}, {self.hi}+{TOL_MS}], "
                f"|Δ| ≤ {self.near} | {'ok' if self.ok else 'OUT'} |")


def _real(real: dict[str, Any] | None, *path: Any) -> Any:
    """``real[path...]``, or None when there is no real run."""
    if real is None:
        return None
    node: Any = real
    for key in path:
        node = node[key]
    return node


def _get(row: dict[str, Any] | None, key: str) -> Any:
    return None if row is None else row[key]


def java_measures(ours: dict[str, Any], real: dict[str, Any], check_sleep_ms: int = 0,
                  locks: bool = True) -> list[Measure]:
    """Every timing of RealScenarios.java's four scenarios, serve (or another broker) against the real broker.

    ``check_sleep_ms`` widens the first check's window for a broker whose check round may wait that long
    before its first check (5.x's SLEEP_WHILE_NO_OP, docs/fidelity.md V8); ``locks=False`` leaves out scenario
    (d), for a broker where it could not run."""
    out = []
    for a, r in list(zip(ours["a_retry_dlq"]["attempts"], real["a_retry_dlq"]["attempts"], strict=True))[1:]:
        level_ms = a["level_delay_ms"]
        out.append(Measure(f"(a) retry r={a['reconsume_times']}: failure → redelivery ms (level {level_ms // 1000} s)",
                           r["recv_gap_ms"], a["recv_gap_ms"], level_ms, level_ms))
    for a, r in zip(ours["b_delay"]["messages"], real["b_delay"]["messages"], strict=True):
        out.append(Measure(f"(b) {a['key']} delay level {a['level']}: store → receive ms", r["recv_minus_stored_ms"],
                           a["recv_minus_stored_ms"], a["level_delay_ms"], a["level_delay_ms"]))
    checks, real_checks = ours["c_transaction"]["checks_of_unknown"], real["c_transaction"]["checks_of_unknown"]
    out.append(Measure("(c) half store → first check ms (first 3 s round after 2 s)",
                       real_checks[0]["since_half_store_ms"], checks[0]["since_half_store_ms"], TXN_TIMEOUT_MS,
                       TXN_TIMEOUT_MS + TXN_INTERVAL_MS + check_sleep_ms, near=TXN_INTERVAL_MS + check_sleep_ms))
    for i in (1, 2):
        out.append(Measure(f"(c) check {i} → check {i + 1} ms",
                           real_checks[i]["since_half_store_ms"] - real_checks[i - 1]["since_half_store_ms"],
                           checks[i]["since_half_store_ms"] - checks[i - 1]["since_half_store_ms"],
                           TXN_INTERVAL_MS - TOL_MS, TXN_INTERVAL_MS))
    if not locks:
        return out
    out.append(Measure("(d) lock taken over after A's last renewal ms",
                       real["d_lock"]["events"][3]["ms_since_A_last_lock"],
                       ours["d_lock"]["events"][3]["ms_since_A_last_lock"], LOCK_MS, LOCK_MS))
    real_lapse = real["d_lock"]["orderly_consumer"]["foreign_lock_got_after_ms_since_consumer_start"]
    out.append(Measure("(d) orderly consumer's lock lapses, ms after its start (rebalance ~1 s + 5 s)", real_lapse,
                       ours["d_lock"]["orderly_consumer"]["foreign_lock_got_after_ms_since_consumer_start"],
                       LOCK_MS, LOCK_MS + 1500, near=1000))
    return out


def go_event(d_lock: dict[str, Any], op: str) -> dict[str, Any]:
    """The Go program's (d) event with this ``op``."""
    (event,) = [e for e in d_lock["events"] if e.get("op") == op]
    return event


GO_TAKEOVER_OP = "lock (poll 100ms)"


def go_measures(ours: dict[str, Any], real: dict[str, Any] | None = None, check_sleep_ms: int = 0) -> list[Measure]:
    """Every timing of the Go program's four scenarios: serve in the rule's windows and, given the same
    program's figures against a real broker, near them.

    The Go client cannot see a delayed message's or a half's store time without reading a system topic, so
    (b) and (c) are measured from the message's born time, which the client sets just before the send (the
    store follows within milliseconds): receive − born is at least the level's delay, a check's arrival −
    born at least ``transactionTimeOut``. ``check_sleep_ms``: as for ``java_measures``.
    """
    out = []
    attempts = ours["a_retry_dlq"]["attempts"]
    real_attempts = _real(real, "a_retry_dlq", "attempts") or [None] * len(attempts)
    for a, r in list(zip(attempts, real_attempts, strict=True))[1:]:
        level_ms = a["level_delay_ms"]
        out.append(Measure(f"(a) retry r={a['reconsume_times']}: failure → redelivery ms (level {level_ms // 1000} s)",
                           _get(r, "recv_gap_ms"), a["recv_gap_ms"], level_ms, level_ms))
        out.append(Measure(f"(a) retry r={a['reconsume_times']}: failure → %RETRY% copy stored ms",
                           _get(r, "store_minus_prev_recv_ms"), a["store_minus_prev_recv_ms"], level_ms, level_ms))
    messages = ours["b_delay"]["messages"]
    real_messages = _real(real, "b_delay", "messages") or [None] * len(messages)
    for a, r in zip(messages, real_messages, strict=True):
        level_ms = a["level_delay_ms"]
        out.append(Measure(f"(b) {a['key']} delay level {a['level']}: born → receive ms",
                           _get(r, "recv_minus_born_ms"), a["recv_minus_born_ms"], level_ms, level_ms))
    checks = ours["c_transaction"]["checks_of_unknown"]
    real_checks = _real(real, "c_transaction", "checks_of_unknown")
    out.append(Measure("(c) half born → first check ms (first 3 s round after 2 s)",
                       None if real_checks is None else real_checks[0]["since_half_born_ms"],
                       checks[0]["since_half_born_ms"], TXN_TIMEOUT_MS,
                       TXN_TIMEOUT_MS + TXN_INTERVAL_MS + check_sleep_ms, near=TXN_INTERVAL_MS + check_sleep_ms))
    for i in (1, 2):
        gap = checks[i]["recv_ts"] - checks[i - 1]["recv_ts"]
        real_gap = None if real_checks is None else real_checks[i]["recv_ts"] - real_checks[i - 1]["recv_ts"]
        out.append(Measure(f"(c) check {i} → check {i + 1} ms", real_gap, gap, TXN_INTERVAL_MS - TOL_MS,
                           TXN_INTERVAL_MS))
    takeover = go_event(ours["d_lock"], GO_TAKEOVER_OP)["ms_since_A_last_lock"]
    real_takeover = None if real is None else go_event(real["d_lock"], GO_TAKEOVER_OP)["ms_since_A_last_lock"]
    out.append(Measure("(d) lock taken over after A's last renewal ms (B polls every 100 ms)", real_takeover,
                       takeover, LOCK_MS, LOCK_MS))
    lapse_lo = LOCK_MS + GO_FIRST_RENEWAL_MS
    out.append(Measure("(d) orderly consumer's lock lapses, ms after its start (renewal at 1 s + 5 s)",
                       _real(real, "d_lock", "orderly_consumer", "foreign_lock_got_after_ms_since_consumer_start"),
                       ours["d_lock"]["orderly_consumer"]["foreign_lock_got_after_ms_since_consumer_start"],
                       lapse_lo, lapse_lo + GO_FOREIGN_POLL_MS, near=1000))
    return out


def comparison_table(measures: list[Measure], real_name: str, *extra_rows: str,
                     subject: str = "rmqspec serve") -> str:
    """A Markdown table of the measures (and any extra rows), as ``make interop`` prints it; ``subject``
    names the broker judged (the ``serve`` column of a ``Measure``)."""
    lines = [f"| measure | {real_name} | {subject} | window | |", "|---|---|---|---|---|"]
    lines += [m.row() for m in measures]
    lines += extra_rows
    return "\n".join(lines)
