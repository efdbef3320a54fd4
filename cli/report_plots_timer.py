"""The timer plot of the check report (RocketMQ 5.x timer messages): how late the wheel fired.

Theory of operation
-------------------
A 5.x producer asks for any delay with ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS`` /
``TIMER_DELIVER_MS``. The broker's put hook (B/util/HookUtils.handleScheduleMessage)
rounds the requested time down to ``timerPrecisionMs`` (``TIMER_OUT_MS``) and stores the
message in ``rmq_sys_wheel_timer``; the wheel (S/timer/TimerMessageStore) re-puts it into
its real topic at ``TIMER_OUT_MS + precision`` or later — never before the requested
time. The trace (SPEC §8) records the timer copy's ``store`` in ``rmq_sys_wheel_timer``
and the producer's ``send`` (``delay_level`` null) with ``deliver_ts`` = that due time
(a client-side trace: send start + requested delay, a lower bound), and each re-put as
``timer_fire`` (``detail.from_commitlog_offset`` = the timer copy). After a crash the
wheel restarts from its checkpoint (``config/timercheck``, TimerCheckpoint, flushed every
``timerFlushIntervalMs``) and fires again what it fired since: at-least-once.

**Extraction** (``extract_timers``, rows in ``seq`` order): one ``TimerPoint`` per
timer copy — a ``store`` in ``rmq_sys_wheel_timer`` or a ``send`` with ``deliver_ts``
and no ``delay_level`` (not a ``SCHEDULE_TOPIC_XXXX`` copy), the two rows of one copy
merged by commitlog offset (else msg_key); ``due_ts`` is the store's ``deliver_ts``
(the broker's), else the send's. Each ``timer_fire`` joins its copy by
``detail.from_commitlog_offset``, else msg_key (a fire with no known copy makes a point
of its own, without send ts); a copy's second fire is a re-fire, and every fire notes
the last ``crash`` since the copy's previous event. The first ``deliver`` of the
fired copy — its commitlog offset, else msg_key with reconsume_times 0 outside the
timer topic — gives the delivery lateness. A row missing what it needs (ts, seq,
deliver_ts, any identity) is skipped, never guessed and never a crash: removing
information from a trace only removes points.

**The plot** (``render_timer_plot``): lateness = ``timer_fire`` ts − ``deliver_ts``
(rings) and first ``deliver`` ts − ``deliver_ts`` (dots), against the due time
(``deliver_ts``) since the trace started. Why time and not the requested delay: a
wheel's lateness does not grow with the delay — every copy waits in a slot of
``timerPrecisionMs`` and leaves when the read pointer passes that slot — it depends on
what the broker was doing when the slot came due: the dequeue cadence, a crash, the
downtime before the restart. On a time axis the crashes are drawn too (dashed
verticals), so a late burst after a restart and the re-fires line up with the crash
that caused them; the requested delay (ms to 3 days, ``timerMaxDelaySec``) would
scatter such a burst over a log axis, so it is in every tooltip instead. Re-fires (a
copy's second and later fires) are purple diamonds; a tooltip names the crash before a
fire, or says there was none (TIMER_DUPLICATED). Below zero lies TIMER_EARLY: that
region is shaded red, early marks are red and named by msg_key. The summary line
above the frame gives the count, the median and max lateness of the first fires
(of the first deliveries when the trace has no ``timer_fire``: a client-side
trace), the early count, the re-fires and the copies not fired by the trace end. No
timer message fired or delivered → the "no data" panel.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from rmqspec.cli.report_model import PlotData, TimerFire, TimerPoint
from rmqspec.cli.report_plots_extract import SCHEDULE_TOPIC, Row, detail_of, int_value
from rmqspec.cli.report_plots_svg import (
    EARLY_COLOR,
    LEGEND_W,
    PALETTE,
    TABLE_COLOR,
    LegendItem,
    PlotSvg,
    Scale,
    Svg,
    W,
    diamond_path,
    draw_legend,
    fmt_duration,
    frame,
    jitter,
    nice_ticks,
    no_data,
    num,
    sample,
    time_ticks,
    x_axis,
    y_axis,
)
from rmqspec.model.timer import TIMER_TOPIC

MAX_EARLY_LABELS = 12  # early messages named in the plot (all are named in their tooltips)
FIRE_COLOR = PALETTE[0]
DELIVER_COLOR = PALETTE[2]
REFIRE_COLOR = PALETTE[3]


def _str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


@attrs.define
class _Copy:
    """A timer copy being followed through the trace."""

    msg_key: str | None
    topic: str | None
    due_ts: int
    sent_ts: int | None
    stored: bool  # its store in rmq_sys_wheel_timer was seen (its deliver_ts wins)
    sent: bool
    last_seq: int  # its latest event (a crash after it is "since its previous event")
    fires: list[TimerFire] = attrs.field(factory=list)
    delivered_ts: int | None = None
    seqs: list[int] = attrs.field(factory=list)

    def freeze(self) -> TimerPoint:
        return TimerPoint(self.msg_key, self.topic, self.due_ts, self.sent_ts, self.fires, self.delivered_ts,
                          self.seqs)


class _Follower:
    """The state of ``extract_timers``: copies and the indexes that find them again."""

    def __init__(self) -> None:
        self.copies: list[_Copy] = []
        self.by_offset: dict[int, _Copy] = {}  # timer copy commitlog offset
        self.by_key: dict[str, list[_Copy]] = {}
        self.fired_offset: dict[int, _Copy] = {}  # fired copy commitlog offset
        self.scheduled: set[int] = set()  # SCHEDULE_TOPIC_XXXX copies: delayed sends, not timers
        self.crash: tuple[int, int] | None = None  # (ts, seq) of the last crash

    def new_copy(self, key: str | None, due: int, seq: int) -> _Copy:
        copy = _Copy(key, None, due, None, False, False, seq)
        self.copies.append(copy)
        if key is not None:
            self.by_key.setdefault(key, []).append(copy)
        return copy

    def copy_row(self, row: Row, ts: int, seq: int, due: int, is_store: bool) -> None:
        offset = int_value(row.get("commitlog_offset"))
        key = _str(row.get("msg_key"))
        if offset is None and key is None:
            return  # nothing would find its fire again
        found = self.by_offset.get(offset) if offset is not None else None
        if found is None and key is not None:
            found = next((c for c in self.by_key.get(key, ())
                          if not c.fires and not (c.stored if is_store else c.sent)), None)
        if found is None:
            found = self.new_copy(key, due, seq)
        if offset is not None:
            self.by_offset[offset] = found
        if is_store:
            found.stored, found.due_ts = True, due
            found.sent_ts = ts if found.sent_ts is None else found.sent_ts
        else:
            found.sent, found.sent_ts = True, ts
            found.topic = _str(row.get("topic"))
            found.due_ts = found.due_ts if found.stored else due
        found.last_seq = seq
        found.seqs.append(seq)

    def fire(self, row: Row, ts: int, seq: int) -> None:
        source = int_value(detail_of(row).get("from_commitlog_offset"))
        key = _str(row.get("msg_key"))
        found = self.by_offset.get(source) if source is not None else None
        if found is None and key is not None:
            candidates = self.by_key.get(key, [])
            found = next((c for c in candidates if not c.fires), candidates[-1] if candidates else None)
        if found is None:
            due = int_value(row.get("deliver_ts"))
            if due is None or (key is None and source is None):
                return
            found = self.new_copy(key, due, seq)
            if source is not None:
                self.by_offset[source] = found
        crash = self.crash[0] if self.crash is not None and self.crash[1] > found.last_seq else None
        found.fires.append(TimerFire(ts, seq, refire=bool(found.fires), crash_ts=crash))
        found.topic = found.topic or _str(row.get("topic"))
        found.last_seq = seq
        found.seqs.append(seq)
        offset = int_value(row.get("commitlog_offset"))
        if offset is not None:
            self.fired_offset[offset] = found

    def deliver(self, row: Row, ts: int, seq: int) -> None:
        offset = int_value(row.get("commitlog_offset"))
        found = self.fired_offset.get(offset) if offset is not None else None
        key = _str(row.get("msg_key"))
        topic = _str(row.get("topic"))
        if found is None:
            if key is None or int_value(row.get("reconsume_times")) != 0 or topic == TIMER_TOPIC:
                return
            found = next((c for c in self.by_key.get(key, ()) if c.delivered_ts is None
                          and (c.topic is None or topic is None or c.topic == topic)), None)
        if found is None or found.delivered_ts is not None:
            return
        found.delivered_ts = ts
        found.seqs.append(seq)


def extract_timers(rows: Iterable[Row]) -> list[TimerPoint]:
    """Timer copies with their fires and first delivery (rows in ``seq`` order; module docstring)."""
    follow = _Follower()
    for row in rows:
        ts, seq, event = int_value(row.get("ts")), int_value(row.get("seq")), row.get("event")
        if ts is None or seq is None:
            continue
        if event == "crash":
            follow.crash = (ts, seq)
        elif event == "store" and row.get("topic") == SCHEDULE_TOPIC:
            offset = int_value(row.get("commitlog_offset"))
            if offset is not None:
                follow.scheduled.add(offset)
        elif event in ("store", "send"):
            due = int_value(row.get("deliver_ts"))
            if due is None:
                continue
            if event == "store" and row.get("topic") == TIMER_TOPIC:
                follow.copy_row(row, ts, seq, due, is_store=True)
            elif (event == "send" and row.get("delay_level") is None
                  and int_value(row.get("commitlog_offset")) not in follow.scheduled):
                follow.copy_row(row, ts, seq, due, is_store=False)
        elif event == "timer_fire":
            follow.fire(row, ts, seq)
        elif event == "deliver":
            follow.deliver(row, ts, seq)
    return [c.freeze() for c in follow.copies]


def crash_times(rows: Iterable[Row]) -> list[int]:
    """The ts of every ``crash`` row (drawn on the timer plot's time axis)."""
    return [ts for row in rows if row.get("event") == "crash" and (ts := int_value(row.get("ts"))) is not None]


# ---------------------------------------------------------------------------
# summary


@attrs.frozen
class TimerSummary:
    """The summary line: ``basis`` is ``fire`` (timer_fire − deliver_ts) or ``deliver`` (first
    deliver − deliver_ts, for traces without timer_fire); median / max over the messages' first."""

    count: int
    basis: str
    median_ms: float | None
    max_ms: int | None
    early: int
    refires: int
    pending: int

    @property
    def text(self) -> str:
        what = "fired" if self.basis == "fire" else "delivered"
        line = f"{self.count} timer message(s) {what}"
        if self.median_ms is not None and self.max_ms is not None:
            line += f" · lateness median {fmt_duration(self.median_ms)}, max {fmt_duration(self.max_ms)}"
        line += f" · {self.early} early (TIMER_EARLY)"
        if self.refires:
            line += f" · {self.refires} re-fire(s)"
        if self.pending:
            line += f" · {self.pending} pending at the trace end"
        return line


def summarize(points: Sequence[TimerPoint]) -> TimerSummary:
    """Count, median and max lateness, early count, re-fires, copies never fired."""
    basis = "fire" if any(p.fires for p in points) else "deliver"
    values = [v for p in points if (v := p.fire_lateness_ms if basis == "fire" else p.deliver_lateness_ms)
              is not None]
    return TimerSummary(
        count=len(values),
        basis=basis,
        median_ms=statistics.median(values) if values else None,
        max_ms=max(values) if values else None,
        early=sum(1 for p in points if p.early),
        refires=sum(1 for p in points for f in p.fires if f.refire),
        pending=sum(1 for p in points if not p.fires and p.delivered_ts is None),
    )


# ---------------------------------------------------------------------------
# the plot


def _tooltip(p: TimerPoint, t0: int, what: str, ts: int, fire: TimerFire | None = None) -> str:
    lateness = ts - p.due_ts
    head = f"timer message {p.msg_key or '?'}" + (f" → {p.topic}" if p.topic else "")
    asked = f"requested delay {fmt_duration(p.requested_ms)}" if p.requested_ms is not None else "send not in trace"
    when = (f"{what} {fmt_duration(lateness)} after deliver_ts" if lateness >= 0
            else f"{what} {fmt_duration(-lateness)} BEFORE deliver_ts — TIMER_EARLY")
    lines = [head, f"{asked}; due at {fmt_duration(p.due_ts - t0)}", when]
    if fire is not None and fire.refire:
        lines.append(f"re-fire #{p.fires.index(fire)}"
                     + (f" after the crash at {fmt_duration(fire.crash_ts - t0)}" if fire.crash_ts is not None
                        else ", no crash since the previous fire (TIMER_DUPLICATED)"))
    elif fire is not None and fire.crash_ts is not None:
        lines.append(f"first fire, after the crash at {fmt_duration(fire.crash_ts - t0)}")
    lines.append(f"seqs {', '.join(map(str, p.seqs))}")
    return "\n".join(lines)


def render_timer_plot(data: PlotData) -> PlotSvg:
    """(v) lateness of timer messages (timer_fire and first deliver − deliver_ts) over time."""
    pid, title = "plot-timer", "Timer message lateness"
    caption = (
        "Each timer message (RocketMQ 5.x: TIMER_DELAY_SEC / TIMER_DELAY_MS / TIMER_DELIVER_MS; its send, "
        "or its store in rmq_sys_wheel_timer, carries deliver_ts, the requested time rounded up to "
        "timerPrecisionMs) at its due time: rings show how long after deliver_ts the timer wheel fired it "
        "(timer_fire), dots its first delivery to a consumer. Purple diamonds are re-fires after a broker "
        "crash (dashed verticals): the wheel fires again what it fired since its last checkpoint "
        "(at-least-once); a copy due while the broker was down fires late, just after its restart. Nothing "
        "may lie below the zero line (TIMER_EARLY: red, named by msg_key)."
    )
    points = sample(data.timers)
    shown = [p for p in points if p.fires or p.delivered_ts is not None]
    if not shown:
        return PlotSvg(pid, title, caption, no_data(pid, title, "no timer message (5.x, rmq_sys_wheel_timer) "
                                                    "fired or was delivered in this trace"), 0)
    summary = summarize(data.timers)
    t0 = data.t0
    values = [f.ts - p.due_ts for p in shown for f in p.fires]
    values += [v for p in shown if (v := p.deliver_lateness_ms) is not None]
    ticks = nice_ticks(min(0, *values), max(1, *values), 6)
    dues = [p.due_ts - t0 for p in shown]
    crashes = [c - t0 for c in data.crashes]
    x_lo, x_hi = min(0, *dues), max(1, *dues, *crashes)  # a due before the trace began: left of 0
    height = 440
    left, top, right, bottom = 78, 44, W - LEGEND_W - 10, height - 56
    svg = Svg(pid, title, height)
    x = Scale(x_lo, x_hi, left, right)
    y = Scale(ticks[0], ticks[-1], bottom, top)
    svg.text(16, 24, summary.text, size=12, weight="bold", cls="summary")
    frame(svg, left, top, right, bottom)
    if ticks[0] < 0:
        svg.add(f'<rect class="early-zone" x="{num(left)}" y="{num(y(0))}" width="{num(right - left)}" '
                f'height="{num(bottom - y(0))}" fill="{EARLY_COLOR}" fill-opacity="0.08">'
                "<title>before deliver_ts: TIMER_EARLY</title></rect>")
        svg.text(right - 6, bottom - 6, "early (TIMER_EARLY)", anchor="end", size=11, fill=EARLY_COLOR)
    y_axis(svg, y, ticks, lambda v: fmt_duration(v) if v else "0", left, right, "lateness after deliver_ts")
    x_axis(svg, x, time_ticks(x_lo, x_hi), lambda v: fmt_duration(v) if v else "0", top, bottom,
           "due time (deliver_ts) since the trace started")
    svg.add(f'<line class="zero-line" x1="{num(left)}" y1="{num(y(0))}" x2="{num(right)}" y2="{num(y(0))}" '
            'stroke="#111" stroke-width="1.5"><title>deliver_ts: nothing may fire or be delivered before it'
            "</title></line>")
    for c in crashes:
        svg.add(f'<line class="crash-line" x1="{num(x(c))}" y1="{num(top)}" x2="{num(x(c))}" y2="{num(bottom)}" '
                f'stroke="{TABLE_COLOR}" stroke-width="1.5" stroke-dasharray="6 4">'
                f"<title>broker crash at {fmt_duration(c)}</title></line>")
    labels: list[tuple[float, float, str]] = []  # one per early message, at its first early mark
    for i, p in enumerate(shown):
        cx = x(p.due_ts - t0) + jitter(i, 4.0)
        early_at: float | None = None
        for f in p.fires:
            cy = y(f.ts - p.due_ts)
            early = f.ts < p.due_ts
            tip = _tooltip(p, t0, "re-fired" if f.refire else "fired", f.ts, f)
            if f.refire:
                svg.mark("path", tip, d=diamond_path(cx, cy, 6.5), fill=EARLY_COLOR if early else REFIRE_COLOR,
                         fill_opacity="0.85", stroke="#7f0000" if early else "white", stroke_width=1)
            else:
                svg.mark("circle", tip, cx=num(cx), cy=num(cy), r=6, fill="white", fill_opacity="0",
                         stroke=EARLY_COLOR if early else FIRE_COLOR, stroke_width=2)
            if early and early_at is None:
                early_at = cy
        if p.delivered_ts is not None:
            cy = y(p.delivered_ts - p.due_ts)
            early = p.delivered_ts < p.due_ts
            svg.mark("circle", _tooltip(p, t0, "delivered", p.delivered_ts), cx=num(cx), cy=num(cy), r=3.5,
                     fill=EARLY_COLOR if early else DELIVER_COLOR, fill_opacity="0.9")
            if early and early_at is None:
                early_at = cy
        if early_at is not None:
            labels.append((cx, early_at, p.msg_key or "?"))
    for cx, cy, key in labels[:MAX_EARLY_LABELS]:
        svg.text(cx + 9, cy + 4, key, size=10, weight="bold", fill=EARLY_COLOR, cls="early-label")
    legend = [
        LegendItem("timer_fire", "ring", FIRE_COLOR),
        LegendItem("first deliver", "dot", DELIVER_COLOR),
        LegendItem("re-fire after a crash", "diamond", REFIRE_COLOR),
        LegendItem("deliver_ts (zero)", "line", "#111111"),
    ]
    if crashes:
        legend.append(LegendItem("broker crash", "step", TABLE_COLOR))
    if labels:
        legend.append(LegendItem("early (TIMER_EARLY)", "dot", EARLY_COLOR))
    draw_legend(svg, legend, right + 20, top + 12)
    pending = len(points) - len(shown)
    if pending:
        caption += f" {pending} timer message(s) had not fired when the trace ended."
    if len(labels) > MAX_EARLY_LABELS:
        caption += f" {len(labels) - MAX_EARLY_LABELS} early message(s) are named only in their tooltips."
    if len(points) < len(data.timers):
        caption += f" Showing {len(points)} of {len(data.timers)} timer messages (evenly sampled)."
    return PlotSvg(pid, title, caption, svg.render(), svg.marks)
