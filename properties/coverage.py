"""What a conformance run reached: lifecycle transitions, rules and result kinds, with counts.

Theory of operation
-------------------
``classify(history)`` reads one example's ghost history (``properties/history.py``)
and names, for every observation that *is* a lifecycle step, the row of the
tables in ``model/lifecycle.py`` it took — so the coverage is of the same rows
the z3 theorems prove:

- message (per copy and group): a client ``deliver`` is STORED→DELIVERED, a
  SUCCESS ``consume`` DELIVERED→CONSUMED (a broadcasting client's too; the message it drops after
  a failed consume takes no row, no send-back: the result ``broadcast:dropped`` counts it,
  ``conform_broadcast.py``), a ``send_back`` RETRY / DLQ the
  ``retry`` / ``dlq`` row, a send-back that did not succeed (refused, or its
  request lost) ``send_back_failed``, a retry copy's ``schedule_fire`` the
  ``due`` fire;
- lock (per group and queue, the lock table replayed from grants and unlocks;
  a restart empties it): a GRANTED on a free queue is FREE→HELD, on a held
  one ``grant`` (renewal or takeover), DENIED ``deny``, and an unlock by the
  holder, by another client or of a free queue the three ``unlock`` rows;
- transaction (per half): COMMIT / ROLLBACK / UNKNOWN ``txn_end`` from PENDING,
  a second COMMIT from COMMITTED, ``txn_check`` the ``check`` row,
  ``txn_discard`` the ``discard`` row, and ``young`` when a check round (the
  checks seen at one instant) left a pending half younger than the timeout
  unchecked (the scan stops there);
- timer (5.x, per timer request: a ``send`` carrying ``detail.timer``): refused
  MESSAGE_ILLEGAL ``put[illegal]``, acknowledged with a delay level ``put[level]``,
  with a ``deliver_ts`` ``put[wheel]``, else ``put[at_once]``; a ``timer_fire`` of
  a key with a copy waiting in the wheel ``WHEEL --fire``, of a key fired before
  a crash since ``REFIRABLE --fire``; a ``crash`` takes the ``crash`` row of every
  request waiting, fired or refirable. Under a profile without the wheel no row
  of it is taken: ``CoverageReport.of(..., timer=False)`` lists them as not
  applicable, not as missing;
- pop and pop_order (5.x, per group and message / queue): the rows the pop
  replay itself takes on the history (``inv_pop.PopReplay.taken``: the replay
  the invariants run, so the coverage is of what was judged). Where nobody
  pops (4.9, a broker without ``Capability.POP``, the wall clock),
  ``CoverageReport.of(..., pop=False)`` lists them as not applicable.

``CoverageReport.of(transitions, coverage, rules)`` lays the counts out: every
row of every table (zero included), the rules run, the result kinds the machine
noted. ``render`` is the text ``rmqspec conform`` prints; ``as_dict`` goes into
``summary.json`` and the HTML report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from rmqspec.model.lifecycle import LIFECYCLES, Lifecycle, Transition
from rmqspec.properties.history import History, is_visible_topic
from rmqspec.properties.inv_pop import PopReplay
from rmqspec.properties.inv_tables import EventRow


def label(lifecycle: Lifecycle | str, t: Transition) -> str:
    name = lifecycle if isinstance(lifecycle, str) else lifecycle.name
    guard = f"[{t.guard}]" if t.guard else ""
    return f"{name}: {t.source} --{t.action}{guard}--> {t.target}"


ALL_TRANSITIONS: tuple[str, ...] = tuple(label(lc, t) for lc in LIFECYCLES for t in lc.transitions)


def _row(name: str, source: str, action: str, guard: str = "") -> str:
    for lc in LIFECYCLES:
        if lc.name == name:
            for t in lc.transitions:
                if (t.source, t.action, t.guard) == (source, action, guard):
                    return label(lc, t)
    raise KeyError(f"{name}: no row {source} --{action}[{guard}]")


def _detail(ev: Any, key: str, default: object = None) -> object:
    return (ev.detail or {}).get(key, default)


def _classify_timer(history: History, out: Counter[str]) -> None:
    """The TIMER rows (see the module docstring)."""
    waiting: Counter[str] = Counter()  # key -> copies in the wheel
    fired: set[str] = set()
    refirable: set[str] = set()
    for ev in history.events:
        e, key = ev.event, ev.msg_key
        if e == "crash":
            for _ in range(sum(waiting.values())):
                out[_row("timer", "WHEEL", "crash")] += 1
            for _ in refirable:
                out[_row("timer", "REFIRABLE", "crash")] += 1
            for _ in fired:
                out[_row("timer", "FIRED", "crash")] += 1
            refirable |= fired
            fired = set()
        elif e == "send" and key and isinstance(_detail(ev, "timer"), dict):
            if ev.status == "FAILED":
                if _detail(ev, "error") == "MESSAGE_ILLEGAL":
                    out[_row("timer", "SENT", "put", "illegal")] += 1
            elif ev.delay_level:
                out[_row("timer", "SENT", "put", "level")] += 1
            elif ev.deliver_ts is not None:
                out[_row("timer", "SENT", "put", "wheel")] += 1
                waiting[key] += 1
            else:
                out[_row("timer", "SENT", "put", "at_once")] += 1
        elif e == "timer_fire" and key:
            if waiting[key] > 0:
                waiting[key] -= 1
                out[_row("timer", "WHEEL", "fire", "due")] += 1
                fired.add(key)
            elif key in refirable:
                refirable.discard(key)
                out[_row("timer", "REFIRABLE", "fire", "due")] += 1
                fired.add(key)


def classify(history: History) -> Counter[str]:
    """The lifecycle rows one example's observations took, with counts (see the module docstring)."""
    out: Counter[str] = Counter()
    _classify_timer(history, out)
    pop = PopReplay()
    pop.feed(EventRow(ev) for ev in history.events)
    out.update(pop.taken)
    holder: dict[tuple, str] = {}
    txn: dict[str, str] = {}
    halves: dict[str, int] = {}
    rounds: set[int] = set()
    timeout = history.params.transaction_timeout_ms
    for ev in history.events:
        e = ev.event
        if e == "crash" or (e == "recover" and ev.status == "REOPEN"):
            holder.clear()
        elif e == "deliver" and _detail(ev, "client", True) and is_visible_topic(ev.topic):
            out[_row("message", "STORED", "deliver")] += 1
        elif e == "consume" and ev.status == "SUCCESS":
            out[_row("message", "DELIVERED", "consume_success")] += 1
        elif e == "send_back":
            if _detail(ev, "code", "SUCCESS") != "SUCCESS":
                out[_row("message", "DELIVERED", "send_back_failed")] += 1
            elif ev.status == "DLQ":
                out[_row("message", "DELIVERED", "send_back", "dlq")] += 1
            else:
                out[_row("message", "DELIVERED", "send_back", "retry")] += 1
        elif e == "schedule_fire" and (ev.reconsume_times or 0) >= 1:
            out[_row("message", "SCHEDULED", "fire", "due")] += 1
        elif e == "lock":
            key = (ev.group, ev.topic, ev.queue_id)
            if ev.status == "GRANTED":
                out[_row("lock", "HELD", "lock", "grant") if key in holder else _row("lock", "FREE", "lock")] += 1
                holder[key] = ev.client_id
            elif ev.status == "DENIED":
                out[_row("lock", "HELD", "lock", "deny")] += 1
        elif e == "unlock":
            key = (ev.group, ev.topic, ev.queue_id)
            if key not in holder:
                out[_row("lock", "FREE", "unlock")] += 1
            elif holder[key] == ev.client_id:
                out[_row("lock", "HELD", "unlock", "holder")] += 1
                del holder[key]
            else:
                out[_row("lock", "HELD", "unlock", "not_holder")] += 1
        elif e == "txn_half" and ev.msg_key:
            txn.setdefault(ev.msg_key, "PENDING")
            halves.setdefault(ev.msg_key, ev.ts)
        elif e == "txn_end" and ev.msg_key in txn:
            state = txn[ev.msg_key]
            if ev.status == "COMMIT" and state in ("PENDING", "COMMITTED"):
                out[_row("transaction", state, "commit")] += 1
                txn[ev.msg_key] = "COMMITTED"
            elif ev.status == "ROLLBACK" and state == "PENDING":
                out[_row("transaction", "PENDING", "rollback")] += 1
                txn[ev.msg_key] = "ROLLED_BACK"
            elif ev.status == "UNKNOWN" and state == "PENDING":
                out[_row("transaction", "PENDING", "unknown")] += 1
        elif e == "txn_check" and txn.get(ev.msg_key) == "PENDING":
            out[_row("transaction", "PENDING", "check", "check")] += 1
            if ev.ts not in rounds:  # a round: does it leave a young pending half behind?
                rounds.add(ev.ts)
                if any(txn.get(k) == "PENDING" and 0 <= ev.ts - born < timeout for k, born in halves.items()):
                    out[_row("transaction", "PENDING", "check", "young")] += 1
        elif e == "txn_discard" and txn.get(ev.msg_key) == "PENDING":
            out[_row("transaction", "PENDING", "check", "discard")] += 1
            txn[ev.msg_key] = "DISCARDED"
    return out


TIMER_TRANSITIONS: tuple[str, ...] = tuple(t for t in ALL_TRANSITIONS if t.startswith("timer: "))
POP_TRANSITIONS: tuple[str, ...] = tuple(t for t in ALL_TRANSITIONS if t.startswith(("pop: ", "pop_order: ")))


@attrs.frozen
class CoverageReport:
    """Counts of every lifecycle row, of the rules run and of the result kinds noted; ``not_applicable``:
    the rows the profile has no behaviour for (the TIMER table without the 5.x wheel, the pop tables
    where nobody pops)."""

    transitions: tuple[tuple[str, int], ...]
    rules: tuple[tuple[str, int], ...]
    results: tuple[tuple[str, int], ...]
    not_applicable: tuple[str, ...] = ()

    @classmethod
    def of(cls, transitions: Mapping[str, int], coverage: Mapping[str, int], rules: Iterable[str],
           timer: bool = True, pop: bool = True) -> CoverageReport:
        rule_names = set(rules)
        return cls(
            transitions=tuple((t, int(transitions.get(t, 0))) for t in ALL_TRANSITIONS),
            rules=tuple(sorted((k, int(v)) for k, v in coverage.items() if k in rule_names)),
            results=tuple(sorted((k, int(v)) for k, v in coverage.items() if k not in rule_names)),
            not_applicable=(() if timer else TIMER_TRANSITIONS) + (() if pop else POP_TRANSITIONS),
        )

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(t for t, n in self.transitions if n == 0 and t not in self.not_applicable)

    def render(self) -> str:
        applicable = len(self.transitions) - len(self.not_applicable)
        reached = applicable - len(self.missing)
        lines = [f"coverage: {reached}/{applicable} lifecycle transitions reached"
                 + (f" ({len(self.not_applicable)} not applicable to the profile)" if self.not_applicable else "")]
        width = max(len(t) for t, _ in self.transitions)
        for t, n in self.transitions:
            mark = "  (n/a)" if t in self.not_applicable else "  (never)" if n == 0 else ""
            lines.append(f"  {t:<{width}}  {n:>8,}" + mark)
        lines.append("rules: " + ", ".join(f"{k} {v:,}" for k, v in self.rules))
        lines.append("results: " + ", ".join(f"{k} {v:,}" for k, v in self.results))
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        applicable = len(self.transitions) - len(self.not_applicable)
        return {
            "transitions": [{"transition": t, "count": n} for t, n in self.transitions],
            "reached": applicable - len(self.missing),
            "total": applicable,
            "not_applicable": list(self.not_applicable),
            "rules": dict(self.rules),
            "results": dict(self.results),
        }
