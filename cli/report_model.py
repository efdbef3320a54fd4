"""The report of ``rmqspec check`` as data: what was checked and what was found.

Theory of operation
-------------------
``rmqspec check`` runs four phases — z3 proofs, the conformance machine (with
trace recording), the Spark audit of those traces, and this report. Each phase
hands over plain data; this module turns it into frozen attrs values:

- ``RunMeta`` — what was checked (broker, profile, budget, seeds, versions,
  start time, wall time per phase);
- ``ProofRow`` — one theorem or configuration check (from ``ProofResult``);
- ``ConformanceSection`` — the conformance result, with the shrunk program;
- ``AuditSection`` — the audit's ``summary.json`` counts plus a few example
  violation rows per code with the events they point at;
- ``PlotData`` — the series the six plots draw (extracted from trace rows by
  ``cli.report_plots``; the timer series, ``TimerPoint`` / ``TimerFire``, by
  ``cli.report_plots_timer``).

``CheckRun`` holds them all. Its verdict per phase and its exit code are
computed here, once, so the terminal table (``report_html.render_text``), the
HTML page (``report_html.render_html``) and ``summary.json`` (``to_json``)
cannot disagree (STYLE lesson 8: findings are data, rendered separately).

Exit code: 0 ok; 1 when a proof is FAILED or UNKNOWN (as ``rmqspec prove``),
the conformance run failed, or the audit counted any violation. Observations
never fail a run. A phase that did not run is reported as such, and fails
nothing.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from rmqspec.cli.common import EXIT_FINDINGS, EXIT_OK

PASS = "PASS"
FAIL = "FAIL"
NOT_RUN = "NOT RUN"

# Proof statuses (rmqspec.properties.prover): these fail a run.
PROOF_FAILING = frozenset({"FAILED", "UNKNOWN"})

PHASES: tuple[str, ...] = ("proofs", "conformance", "audit")

EXAMPLES_PER_CODE = 3  # example rows kept per violation / observation code


def _frozen_dict(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value or {})


def _int_dict(value: Mapping[str, Any] | None) -> dict[str, int]:
    return {str(k): int(v) for k, v in (value or {}).items()}


def collect_versions() -> dict[str, str]:
    """Versions of rmqspec, Python, pyspark, z3 and Hypothesis ("not installed" when absent)."""
    out = {"python": platform.python_version()}
    for key, dist in (("rmqspec", "rmqspec"), ("pyspark", "pyspark"), ("z3", "z3-solver"),
                      ("hypothesis", "hypothesis")):
        try:
            out[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[key] = "not installed"
    return out


# ---------------------------------------------------------------------------
# meta


@attrs.frozen
class RunMeta:
    """What was checked: broker under test, profile, budget, seeds, versions, timings.

    ``budget`` is free text (e.g. ``"ci: 40 examples × 30 steps"``);
    ``started_at`` an ISO 8601 timestamp; ``phase_seconds`` maps a phase name
    (``proofs``, ``conformance``, ``audit``, ``report``) to its wall time.
    """

    broker: str
    profile: str
    budget: str = ""
    seeds: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    versions: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_dict)
    started_at: str = ""
    phase_seconds: Mapping[str, float] = attrs.field(factory=dict, converter=_frozen_dict)

    @property
    def wall_seconds(self) -> float:
        return float(sum(self.phase_seconds.values()))

    def to_json(self) -> dict[str, Any]:
        return {
            "broker": self.broker,
            "profile": self.profile,
            "budget": self.budget,
            "seeds": list(self.seeds),
            "versions": dict(self.versions),
            "started_at": self.started_at,
            "phase_seconds": {k: round(v, 3) for k, v in self.phase_seconds.items()},
            "wall_seconds": round(self.wall_seconds, 3),
        }


# ---------------------------------------------------------------------------
# proofs


@attrs.frozen
class ProofRow:
    """One theorem or configuration check; ``counterexample`` is its timeline, one line each."""

    name: str
    code: str | None
    status: str
    seconds: float
    detail: str = ""
    kind: str = ""
    statement: str = ""
    counterexample: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    @property
    def failing(self) -> bool:
        return self.status in PROOF_FAILING

    @classmethod
    def from_result(cls, result: Any) -> ProofRow:
        """From a ``properties.prover.ProofResult`` (its counterexample rendered to lines)."""
        cex = getattr(result, "counterexample", None)
        lines: tuple[str, ...] = ()
        if cex is not None:
            render = getattr(cex, "render", None)
            lines = tuple(render()) if callable(render) else tuple(str(cex).splitlines())
        return cls(
            name=result.name,
            code=result.code,
            status=result.status,
            seconds=float(result.seconds),
            detail=getattr(result, "detail", "") or "",
            kind=getattr(result, "kind", "") or "",
            statement=getattr(result, "statement", "") or "",
            counterexample=lines,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "code": self.code,
            "status": self.status,
            "seconds": round(self.seconds, 4),
            "detail": self.detail,
            "kind": self.kind,
            "statement": self.statement,
            "counterexample": list(self.counterexample),
        }


# ---------------------------------------------------------------------------
# conformance

_VIOLATED = re.compile(r"invariant (\S+) violated")
_EXPECTED_ACTUAL = re.compile(r"expected (?P<expected>.*?), actual (?P<actual>.*)$", re.MULTILINE)


@attrs.frozen
class ConformanceSection:
    """The conformance machine's result.

    ``status`` is PASS or FAIL; ``steps`` the stateful step budget per
    example; ``rule_counts`` how often each rule (and each "sometimes"
    witness) ran; ``observations`` the observation codes counted. A failure
    keeps its message (``failure``), the violated invariant (or the lockstep
    comparison that broke), expected versus actual, and the shrunk replayable
    program.
    """

    status: str
    examples: int
    steps: int
    seconds: float
    rule_counts: Mapping[str, int] = attrs.field(factory=dict, converter=_int_dict)
    observations: Mapping[str, int] = attrs.field(factory=dict, converter=_int_dict)
    failure: str | None = None
    violated: str | None = None
    expected: str | None = None
    actual: str | None = None
    counterexample_program: str | None = None
    # generation and shrinking timed apart; every distinct failure with its own program
    generate_seconds: float = 0.0
    shrink_seconds: float = 0.0
    failures: tuple[Mapping[str, Any], ...] = attrs.field(default=(), converter=tuple)
    # properties.coverage.CoverageReport.as_dict(): transitions (every lifecycle row, counts), rules, results
    coverage: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_dict)

    def __attrs_post_init__(self) -> None:
        if self.status not in (PASS, FAIL):
            raise ValueError(f"conformance status must be PASS or FAIL, got {self.status!r}")

    @property
    def examples_per_s(self) -> float:
        return self.examples / self.seconds if self.seconds > 0 else 0.0

    @classmethod
    def from_result(cls, result: Any, *, steps: int) -> ConformanceSection:
        """From a ``properties.runner.ConformanceResult``; parses the failure message."""
        failure = result.failure
        violated = expected = actual = None
        if failure:
            first = failure.strip().splitlines()[0] if failure.strip() else failure
            m = _VIOLATED.search(failure)
            violated = m.group(1) if m else first
            ea = _EXPECTED_ACTUAL.search(failure)
            if ea:
                expected, actual = ea.group("expected"), ea.group("actual")
        program = result.program_text if not result.passed and result.program else None
        return cls(
            status=PASS if result.passed else FAIL,
            examples=int(result.examples),
            steps=steps,
            seconds=float(result.seconds),
            rule_counts=result.coverage,
            observations=result.observations,
            failure=failure,
            violated=violated,
            expected=expected,
            actual=actual,
            counterexample_program=program,
            generate_seconds=float(getattr(result, "generate_seconds", 0.0)),
            shrink_seconds=float(getattr(result, "shrink_seconds", 0.0)),
            failures=tuple(f.as_dict() for f in getattr(result, "failures", ())),
            coverage=result.coverage_report.as_dict() if getattr(result, "coverage_report", None) else {},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "examples": self.examples,
            "steps": self.steps,
            "seconds": round(self.seconds, 3),
            "examples_per_s": round(self.examples_per_s, 2),
            "rule_counts": dict(self.rule_counts),
            "observations": dict(self.observations),
            "failure": self.failure,
            "violated": self.violated,
            "expected": self.expected,
            "actual": self.actual,
            "counterexample_program": self.counterexample_program,
            "generate_seconds": round(self.generate_seconds, 3),
            "shrink_seconds": round(self.shrink_seconds, 3),
            "failures": [dict(f) for f in self.failures],
            "coverage": dict(self.coverage),
        }


# ---------------------------------------------------------------------------
# audit


@attrs.frozen
class AuditExample:
    """One violation / observation row: its seqs (offending last), keys, reason, and the
    trace events those seqs point at (plain dicts with SPEC §8 columns, in seq order)."""

    code: str
    seqs: tuple[int, ...] = attrs.field(converter=tuple)
    reason: str = ""
    keys: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_dict)
    events: tuple[Mapping[str, Any], ...] = attrs.field(default=(), converter=tuple)

    @classmethod
    def from_row(
        cls, row: Mapping[str, Any], events_by_seq: Mapping[int, Mapping[str, Any]] | None = None
    ) -> AuditExample:
        """From a violation row (``code, seqs, keys…, reason``) of the audit's output."""
        seqs = tuple(int(s) for s in (row.get("seqs") or ()))
        keys = {
            k: v for k, v in row.items() if k not in ("code", "seqs", "reason", "events") and v is not None
        }
        if row.get("events"):
            events = tuple(dict(e) for e in row["events"])
        else:
            events = tuple(dict(events_by_seq[s]) for s in seqs if events_by_seq and s in events_by_seq)
        return cls(str(row["code"]), seqs, str(row.get("reason") or ""), keys, events)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "seqs": list(self.seqs),
            "reason": self.reason,
            "keys": dict(self.keys),
            "events": [_jsonable(e) for e in self.events],
        }


def _jsonable(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in row.items() if v is not None}


def _examples(value: Mapping[str, Iterable[AuditExample | Mapping[str, Any]]] | None) -> dict:
    """Accept ``AuditExample`` values or plain violation-row dicts (``seqs``, ``reason``, …)."""
    out: dict[str, tuple[AuditExample, ...]] = {}
    for code, items in (value or {}).items():
        out[str(code)] = tuple(
            item if isinstance(item, AuditExample) else AuditExample.from_row({"code": code, **item})
            for item in items
        )
    return out


@attrs.frozen
class AuditSection:
    """The audit's ``summary.json`` (counts per code, rejected rows, not-judged rules with
    their reasons, throughput) and a few example rows per code."""

    violations: Mapping[str, int] = attrs.field(converter=_int_dict)
    observations: Mapping[str, int] = attrs.field(converter=_int_dict)
    events_read: int = 0
    rows_rejected: int = 0
    not_judged: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_dict)
    examples: Mapping[str, tuple[AuditExample, ...]] = attrs.field(factory=dict, converter=_examples)
    wall_time_s: float = 0.0
    events_per_s: float = 0.0

    @property
    def violation_total(self) -> int:
        return sum(self.violations.values())

    @property
    def observation_total(self) -> int:
        return sum(self.observations.values())

    @classmethod
    def from_summary(
        cls,
        summary: Mapping[str, Any],
        rows: Iterable[Mapping[str, Any]] = (),
        events: Iterable[Mapping[str, Any]] = (),
        *,
        per_code: int = EXAMPLES_PER_CODE,
    ) -> AuditSection:
        """From ``DIR/summary.json`` and violation / observation rows (``code, seqs, …``).

        Keeps the first ``per_code`` rows of each code; ``events`` (trace rows)
        supply the events each example's seqs point at — only the needed ones
        are kept, so a large trace can be streamed through.
        """
        kept: dict[str, list[Mapping[str, Any]]] = {}
        for row in rows:
            bucket = kept.setdefault(str(row["code"]), [])
            if len(bucket) < per_code:
                bucket.append(row)
        wanted = {int(s) for bucket in kept.values() for row in bucket for s in (row.get("seqs") or ())}
        by_seq: dict[int, Mapping[str, Any]] = {}
        if wanted:
            for event in events:
                seq = event.get("seq")
                if seq in wanted:
                    by_seq[int(seq)] = event
        examples = {
            code: tuple(AuditExample.from_row(r, by_seq) for r in bucket) for code, bucket in kept.items()
        }
        return cls(
            violations=summary.get("violations") or {},
            observations=summary.get("observations") or {},
            events_read=int(summary.get("events_read") or 0),
            rows_rejected=int(summary.get("rows_rejected") or 0),
            not_judged=summary.get("not_judged") or {},
            examples=examples,
            wall_time_s=float(summary.get("wall_time_s") or 0.0),
            events_per_s=float(summary.get("events_per_s") or 0.0),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "violations": dict(self.violations),
            "observations": dict(self.observations),
            "events_read": self.events_read,
            "rows_rejected": self.rows_rejected,
            "not_judged": dict(self.not_judged),
            "wall_time_s": round(self.wall_time_s, 3),
            "events_per_s": round(self.events_per_s, 1),
            "examples": {code: [e.to_json() for e in exs] for code, exs in self.examples.items()},
        }


# ---------------------------------------------------------------------------
# plot series (extracted by cli.report_plots and cli.report_plots_timer)


@attrs.frozen
class RetryPoint:
    """A ``send_back`` RETRY and the ``deliver`` of the retry copy it created.

    ``attempt`` = the copy's reconsume_times (1 = first retry); ``level`` the
    send-back's delay level; ``observed_ms`` = deliver ts − send_back ts;
    ``level_ms`` the table's delay of ``level``; ``table_ms`` the delay of the
    default level 3 + (attempt − 1)."""

    group: str
    msg_key: str
    attempt: int
    level: int | None
    sent_back_ts: int
    delivered_ts: int
    observed_ms: int
    level_ms: int | None
    table_ms: int
    seqs: tuple[int, int] = attrs.field(converter=tuple)

    @property
    def early(self) -> bool:
        """Delivered before its level's delay elapsed (the RETRY_EARLY deliver case)."""
        return self.level_ms is not None and self.observed_ms < self.level_ms


@attrs.frozen
class DelayPoint:
    """A copy stored in ``SCHEDULE_TOPIC_XXXX`` and when it fired / was first delivered.

    ``kind`` is ``delayed`` (a delayed send or commit) or ``retry`` (a retry
    copy, reconsume_times ≥ 1). Latencies are from the store ts; None when
    the trace ends first."""

    msg_key: str | None
    kind: str
    level: int
    stored_ts: int
    due_ts: int
    level_ms: int
    fired_ts: int | None = None
    delivered_ts: int | None = None
    seqs: tuple[int, ...] = attrs.field(default=(), converter=tuple)

    @property
    def fire_latency_ms(self) -> int | None:
        return None if self.fired_ts is None else self.fired_ts - self.stored_ts

    @property
    def deliver_latency_ms(self) -> int | None:
        return None if self.delivered_ts is None else self.delivered_ts - self.stored_ts


@attrs.frozen
class LockSegment:
    """One client's ownership of a broker lock on (group, topic, queue_id).

    From its first GRANTED (``start``) over renewals (``last_grant``) to
    ``end``; ``end_reason`` is ``unlock``, ``takeover`` (another client's
    GRANTED while not expired), ``expired`` (``last_grant`` + broker lifetime
    passed), ``crash`` (the broker lost its lock table) or ``trace end``."""

    group: str
    topic: str
    queue_id: int
    client_id: str
    start: int
    last_grant: int
    end: int
    end_reason: str
    grants: int
    seqs: tuple[int, ...] = attrs.field(converter=tuple)


@attrs.frozen
class LockDenial:
    group: str
    topic: str
    queue_id: int
    client_id: str
    ts: int
    seq: int


@attrs.frozen
class TxnCounts:
    """Transaction lifecycle totals over a trace (transactions counted by txn_id)."""

    halves: int = 0
    committed: int = 0
    rolled_back: int = 0
    checks: int = 0
    checked_txns: int = 0
    discarded: int = 0
    duplicate_commits: int = 0
    unresolved: int = 0

    @property
    def empty(self) -> bool:
        return not any(attrs.astuple(self))


@attrs.frozen
class TimerFire:
    """One ``timer_fire`` of a timer copy (5.x). ``refire``: the copy had fired before (after a
    crash the wheel delivers again what it fired since its last checkpoint); ``crash_ts``: the
    last ``crash`` since the copy's previous event (its store, or its previous fire), else None."""

    ts: int
    seq: int
    refire: bool = False
    crash_ts: int | None = None


@attrs.frozen
class TimerPoint:
    """A timer message (5.x): its ``send`` / ``store`` in ``rmq_sys_wheel_timer`` carrying
    ``deliver_ts`` (``due_ts``), its ``timer_fire`` s and the first ``deliver`` of its fired copy.

    ``sent_ts`` is the send's (else the store's) ts, None when the trace only has the fire;
    lateness is measured from ``due_ts``, negative = early (TIMER_EARLY)."""

    msg_key: str | None
    topic: str | None  # the real topic: the send's target, else the fired copy's topic
    due_ts: int
    sent_ts: int | None = None
    fires: tuple[TimerFire, ...] = attrs.field(default=(), converter=tuple)
    delivered_ts: int | None = None
    seqs: tuple[int, ...] = attrs.field(default=(), converter=tuple)

    @property
    def requested_ms(self) -> int | None:
        """deliver_ts − send ts: the delay asked for, rounded up to the timer precision."""
        return None if self.sent_ts is None else self.due_ts - self.sent_ts

    @property
    def fired_ts(self) -> int | None:
        return self.fires[0].ts if self.fires else None

    @property
    def fire_lateness_ms(self) -> int | None:
        return None if not self.fires else self.fires[0].ts - self.due_ts

    @property
    def deliver_lateness_ms(self) -> int | None:
        return None if self.delivered_ts is None else self.delivered_ts - self.due_ts

    @property
    def early(self) -> bool:
        """A fire (re-fires included) or the first delivery before ``due_ts`` (TIMER_EARLY)."""
        return any(f.ts < self.due_ts for f in self.fires) or (
            self.delivered_ts is not None and self.delivered_ts < self.due_ts)


@attrs.frozen
class PopRevive:
    """A popped message (5.x) revived: the live hand-out's end of invisible time (``due_ts``: pop time +
    invisible time, or a change's), its pop ts, the revive's ts; ``observed``: the revive row is the
    conformance machine's, seen through the revived copy (its ts an upper bound)."""

    msg_key: str
    group: str
    topic: str | None
    due_ts: int
    popped_ts: int
    revived_ts: int
    observed: bool = False
    seqs: tuple[int, ...] = attrs.field(default=(), converter=tuple)

    @property
    def lateness_ms(self) -> int:
        return self.revived_ts - self.due_ts

    @property
    def early(self) -> bool:
        return self.revived_ts < self.due_ts


@attrs.frozen
class PlotData:
    """What the six plots draw; ``t0`` is the trace's first ts (lock, timer and pop times are shown
    from it); ``crashes`` the ts of every ``crash`` (drawn on the timer and pop plots)."""

    retries: tuple[RetryPoint, ...] = attrs.field(default=(), converter=tuple)
    retries_unmatched: int = 0
    delays: tuple[DelayPoint, ...] = attrs.field(default=(), converter=tuple)
    locks: tuple[LockSegment, ...] = attrs.field(default=(), converter=tuple)
    denials: tuple[LockDenial, ...] = attrs.field(default=(), converter=tuple)
    txn: TxnCounts = attrs.field(factory=TxnCounts)
    delay_levels_ms: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    broker_lock_ms: int = 60_000
    t0: int = 0
    t_end: int = 0
    timers: tuple[TimerPoint, ...] = attrs.field(default=(), converter=tuple)
    crashes: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    pop_revives: tuple[PopRevive, ...] = attrs.field(default=(), converter=tuple)
    pops_acked: int = 0  # hand-outs acked before their invisible time ended
    pops_pending: int = 0  # hand-outs neither acked nor revived when the trace ended

    def to_json(self) -> dict[str, Any]:
        def rows(items: Sequence[Any], *extra: str) -> list[dict[str, Any]]:
            out = []
            for item in items:
                d = attrs.asdict(item)
                for name in extra:
                    d[name] = getattr(item, name)
                out.append(d)
            return out

        return {
            "retries": rows(self.retries, "early"),
            "retries_unmatched": self.retries_unmatched,
            "delays": rows(self.delays, "fire_latency_ms", "deliver_latency_ms"),
            "locks": rows(self.locks),
            "denials": rows(self.denials),
            "txn": attrs.asdict(self.txn),
            "delay_levels_ms": list(self.delay_levels_ms),
            "broker_lock_ms": self.broker_lock_ms,
            "t0": self.t0,
            "t_end": self.t_end,
            "timers": rows(self.timers, "requested_ms", "fire_lateness_ms", "deliver_lateness_ms", "early"),
            "crashes": list(self.crashes),
            "pop_revives": rows(self.pop_revives, "lateness_ms", "early"),
            "pops_acked": self.pops_acked,
            "pops_pending": self.pops_pending,
        }


# ---------------------------------------------------------------------------
# the run


@attrs.frozen
class PhaseVerdict:
    """One row of the verdict table: phase, PASS / FAIL / NOT RUN, a one-line summary, time."""

    phase: str
    status: str
    summary: str
    seconds: float | None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


@attrs.frozen
class CheckRun:
    """Everything one ``rmqspec check`` found. ``conformance``/``audit`` are None when not run;
    an empty ``proofs`` list means the proofs did not run."""

    meta: RunMeta
    proofs: tuple[ProofRow, ...] = attrs.field(default=(), converter=tuple)
    conformance: ConformanceSection | None = None
    audit: AuditSection | None = None
    plots: PlotData = attrs.field(factory=PlotData)

    # -- verdicts -----------------------------------------------------------
    def proof_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for p in self.proofs:
            counts[p.status] = counts.get(p.status, 0) + 1
        return counts

    def verdicts(self) -> tuple[PhaseVerdict, ...]:
        secs = self.meta.phase_seconds
        out = []
        if self.proofs:
            counts = self.proof_counts()
            failing = [p for p in self.proofs if p.failing]
            summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
            out.append(PhaseVerdict("proofs", FAIL if failing else PASS, summary, secs.get("proofs")))
        else:
            out.append(PhaseVerdict("proofs", NOT_RUN, "no theorems were run", secs.get("proofs")))
        c = self.conformance
        if c is None:
            out.append(PhaseVerdict("conformance", NOT_RUN, "the conformance machine did not run",
                                    secs.get("conformance")))
        else:
            summary = f"{_plural(c.examples, 'example')} × {c.steps} steps, {c.examples_per_s:.1f} examples/s"
            if c.coverage:
                summary += f", {c.coverage.get('reached')}/{c.coverage.get('total')} lifecycle transitions"
            if c.status == FAIL:
                summary = f"{c.violated or 'failed'}; " + summary
            out.append(PhaseVerdict("conformance", c.status, summary, secs.get("conformance")))
        a = self.audit
        if a is None:
            out.append(PhaseVerdict("audit", NOT_RUN, "the trace audit did not run", secs.get("audit")))
        else:
            found = [f"{code} {n}" for code, n in a.violations.items() if n]
            summary = f"{_plural(a.violation_total, 'violation')}"
            if found:
                summary += " (" + ", ".join(found) + ")"
            summary += f", {_plural(a.observation_total, 'observation')} in {a.events_read:,} events"
            out.append(PhaseVerdict("audit", FAIL if a.violation_total else PASS, summary, secs.get("audit")))
        return tuple(out)

    @property
    def exit_code(self) -> int:
        """0 ok; 1 any failed / unknown proof, conformance failure or audit violation."""
        return EXIT_FINDINGS if any(v.status == FAIL for v in self.verdicts()) else EXIT_OK

    @property
    def verdict(self) -> str:
        return FAIL if self.exit_code else PASS

    def to_json(self) -> dict[str, Any]:
        """The body of ``summary.json``."""
        return {
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "meta": self.meta.to_json(),
            "phases": [attrs.asdict(v) for v in self.verdicts()],
            "proofs": [p.to_json() for p in self.proofs],
            "conformance": None if self.conformance is None else self.conformance.to_json(),
            "audit": None if self.audit is None else self.audit.to_json(),
            "plots": self.plots.to_json(),
        }
