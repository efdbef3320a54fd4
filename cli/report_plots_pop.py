"""The pop plot of the check report (RocketMQ 5.x pop consumption): how late the broker revived.

Theory of operation
-------------------
A 5.x pop hands a message out with an invisible time; unless it is acked, PopReviveService puts a
copy into the group's pop retry topic (reconsume times + 1) once pop time + invisible time has passed
— never before it (MESSAGE_LIFECYCLE, ``model/lifecycle.py`` POP), and on a real broker 2–3.3 s after
it (docs/pop-facts.md: the revive scan's margin). The trace (SPEC §8; docs/trace-schema.md) records
each hand-out as ``pop`` (``deliver_ts`` = pop time + invisible time, ``detail.handle``), a change of
the invisible time as ``change_invisible`` (the new ``deliver_ts``, ``detail.new_handle``), an ack as
``ack`` (``detail.handle``; the broker's row says whether it met its checkpoint: ACKED, LATE, …) and
each revive as ``revive`` — the broker's own row, or the conformance machine's when it first sees a
revived copy (``detail.observed``: at that pop's or that read's time, an upper bound of the revive's).

**Extraction** (``extract_pops``, rows in ``seq`` order): per group and msg_key, the live hand-out's
deadline — its ``pop`` (concurrent only: orderly queues are not revived), moved by a change of its
handle. A broker's ``revive`` row names the checkpoint it revived (``detail.pop_time`` and
``detail.invisible_time``: after a kill it may be one handed out before it) and is measured from it; a
row without them (the conformance machine's) from the live hand-out. An ``ack`` whose handle is the live
one before the deadline settles it (no revive expected); a ``revive`` makes one ``PopRevive`` point
(lateness = revive ts − deadline), and the message waits for its next hand-out. A crash ends what was
live (the broker may hand out and revive again: its pop offsets are older than the crash), and so does a
change of invisible time that cannot be placed (for every live hand-out of its group it may have been).
A row missing what it needs (ts, seq, group, msg_key, a handle, ``deliver_ts``) is skipped, never
guessed: removing information from a trace only removes points.

**The plot** (``render_pop_plot``): lateness after the deadline against the deadline since the trace
started, dots for the broker's revive rows, rings for revives seen through a revived copy; crashes as
dashed verticals (a revive after a restart is late by the downtime). Below zero lies a revive before
pop time + invisible time (MESSAGE_LIFECYCLE): shaded red, early marks red and named by msg_key. The
summary line gives the count, the median and max lateness, the early count, the hand-outs acked in
time, and those neither acked nor revived when the trace ended. No revive → the "no data" panel.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

import attrs

from rmqspec.cli.report_model import PlotData, PopRevive
from rmqspec.cli.report_plots_extract import Row, detail_of, int_value
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

MAX_EARLY_LABELS = 12
REVIVE_COLOR = PALETTE[0]
OBSERVED_COLOR = PALETTE[1]
ACK_OK = ("SUCCESS", "ACKED")


@attrs.define
class _Live:
    """A message's live hand-out: its handle, deadline, pop ts and seqs so far."""

    handle: str
    due: int
    popped_ts: int
    seqs: list[int]


def _forget(live: dict[tuple[str, str], _Live], group: Any, key: Any) -> None:
    """Drop the live hand-outs of ``group`` (any group when None) and ``key`` (any key when None)."""
    for name in [n for n in live if group is None or (n[0] == group and key in (None, n[1]))]:
        del live[name]


@attrs.frozen
class PopExtract:
    """The revives, and what became of the other hand-outs (acked in time; pending at the end)."""

    revives: tuple[PopRevive, ...]
    acked: int
    pending: int


def extract_pops(rows: Iterable[Row]) -> PopExtract:
    """Revives with their lateness after the live hand-out's deadline (rows in ``seq`` order; module
    docstring)."""
    live: dict[tuple[str, str], _Live] = {}
    owner: dict[tuple[str, str], str] = {}  # (group, handle) -> msg_key
    revives: list[PopRevive] = []
    acked = 0
    for row in rows:
        ts, seq, event, group = int_value(row.get("ts")), int_value(row.get("seq")), row.get("event"), row.get("group")
        if ts is None or seq is None:
            if event == "change_invisible":
                _forget(live, group, None)
            continue
        if event == "crash":
            live.clear()
            continue
        if event not in ("pop", "change_invisible", "ack", "revive"):
            continue
        detail = detail_of(row)
        handle = detail.get("handle")
        key = None if group is None else row.get("msg_key") or (
            owner.get((group, handle)) if isinstance(handle, str) else None)
        if event == "change_invisible" and (key is None or not isinstance(detail.get("new_handle"), str)
                                            or int_value(row.get("deliver_ts")) is None):
            _forget(live, group, key)  # a change not placed may have moved any of them
            continue
        if group is None or key is None:
            continue
        name = (group, str(key))
        due = int_value(row.get("deliver_ts"))
        if event == "pop" and row.get("status") != "ORDERLY" and isinstance(handle, str) and due is not None:
            live[name] = _Live(handle, due, ts, [seq])
            owner[(group, handle)] = str(key)
        elif event == "change_invisible" and name in live and live[name].handle == handle and due is not None:
            new = str(detail.get("new_handle"))
            live[name].handle, live[name].due = new, due
            live[name].seqs.append(seq)
            owner[(group, new)] = str(key)
        elif event == "ack" and name in live and live[name].handle == handle and row.get("status") in ACK_OK \
                and ts < live[name].due:
            del live[name]
            acked += 1
        elif event == "revive":
            pop_time, invisible = int_value(detail.get("pop_time")), int_value(detail.get("invisible_time"))
            if pop_time is not None and invisible is not None:  # the broker's row names its checkpoint
                was = live.get(name)
                if was is not None and was.due == pop_time + invisible:
                    del live[name]
                seqs = (*was.seqs, seq) if was is not None and was.due == pop_time + invisible else (seq,)
                revives.append(PopRevive(str(key), group, row.get("topic"), pop_time + invisible, pop_time, ts,
                                         bool(detail.get("observed")), seqs))
            elif name in live:
                was = live.pop(name)
                revives.append(PopRevive(str(key), group, row.get("topic"), was.due, was.popped_ts, ts,
                                         bool(detail.get("observed")), (*was.seqs, seq)))
    return PopExtract(tuple(revives), acked, len(live))


@attrs.frozen
class PopSummary:
    count: int
    median_ms: float | None
    max_ms: int | None
    early: int
    acked: int
    pending: int

    @property
    def text(self) -> str:
        line = f"{self.count} pop revive(s)"
        if self.median_ms is not None and self.max_ms is not None:
            line += f" · lateness median {fmt_duration(self.median_ms)}, max {fmt_duration(self.max_ms)}"
        line += f" · {self.early} early (MESSAGE_LIFECYCLE) · {self.acked} acked in time"
        if self.pending:
            line += f" · {self.pending} neither acked nor revived at the trace end"
        return line


def summarize(data: PlotData) -> PopSummary:
    values = [r.lateness_ms for r in data.pop_revives]
    return PopSummary(len(values), statistics.median(values) if values else None, max(values) if values else None,
                      sum(1 for r in data.pop_revives if r.early), data.pops_acked, data.pops_pending)


def _tooltip(r: PopRevive, t0: int) -> str:
    how = "seen through its revived copy (an upper bound)" if r.observed else "the broker's revive"
    late = r.lateness_ms
    when = (f"revived {fmt_duration(late)} after pop time + invisible time" if late >= 0
            else f"revived {fmt_duration(-late)} BEFORE pop time + invisible time — MESSAGE_LIFECYCLE")
    return "\n".join([f"popped message {r.msg_key} (group {r.group})",
                      f"popped at {fmt_duration(r.popped_ts - t0)}, invisible until {fmt_duration(r.due_ts - t0)}",
                      when, how, f"seqs {', '.join(map(str, r.seqs))}"])


def render_pop_plot(data: PlotData) -> PlotSvg:
    """(vi) lateness of pop revives (revive − pop time − invisible time) over time."""
    pid, title = "plot-pop", "Pop revive lateness"
    caption = (
        "Each message a 5.x pop handed out and nobody acked in time, at the end of its invisible time "
        "(pop time + invisible time, or the time a change of invisible time set): how long after it the "
        "broker revived it into the pop retry topic (dots: the broker's revive rows; rings: a revive seen "
        "when its revived copy was first read, an upper bound). Real brokers revive 2–3.3 s late (the revive "
        "scan's margin); a crash (dashed verticals) delays what was due while the broker was down. Nothing "
        "may lie below the zero line (a revive before the invisible time ends: red, named by msg_key)."
    )
    shown = sample(data.pop_revives)
    if not shown:
        return PlotSvg(pid, title, caption, no_data(pid, title, "no popped message (5.x) was revived in this "
                                                    "trace"), 0)
    summary = summarize(data)
    t0 = data.t0
    values = [r.lateness_ms for r in shown]
    ticks = nice_ticks(min(0, *values), max(1, *values), 6)
    dues = [r.due_ts - t0 for r in shown]
    crashes = [c - t0 for c in data.crashes]
    x_lo, x_hi = min(0, *dues), max(1, *dues, *crashes)
    height = 420
    left, top, right, bottom = 78, 44, W - LEGEND_W - 10, height - 56
    svg = Svg(pid, title, height)
    x, y = Scale(x_lo, x_hi, left, right), Scale(ticks[0], ticks[-1], bottom, top)
    svg.text(16, 24, summary.text, size=12, weight="bold", cls="summary")
    frame(svg, left, top, right, bottom)
    if ticks[0] < 0:
        svg.add(f'<rect class="early-zone" x="{num(left)}" y="{num(y(0))}" width="{num(right - left)}" '
                f'height="{num(bottom - y(0))}" fill="{EARLY_COLOR}" fill-opacity="0.08">'
                "<title>before the invisible time ends: MESSAGE_LIFECYCLE</title></rect>")
    y_axis(svg, y, ticks, lambda v: fmt_duration(v) if v else "0", left, right, "lateness after invisible time")
    x_axis(svg, x, time_ticks(x_lo, x_hi), lambda v: fmt_duration(v) if v else "0", top, bottom,
           "end of the invisible time since the trace started")
    svg.add(f'<line class="zero-line" x1="{num(left)}" y1="{num(y(0))}" x2="{num(right)}" y2="{num(y(0))}" '
            'stroke="#111" stroke-width="1.5"><title>pop time + invisible time: no revive before it</title></line>')
    for c in crashes:
        svg.add(f'<line class="crash-line" x1="{num(x(c))}" y1="{num(top)}" x2="{num(x(c))}" y2="{num(bottom)}" '
                f'stroke="{TABLE_COLOR}" stroke-width="1.5" stroke-dasharray="6 4">'
                f"<title>broker crash at {fmt_duration(c)}</title></line>")
    labels: list[tuple[float, float, str]] = []
    for i, r in enumerate(shown):
        cx, cy = x(r.due_ts - t0) + jitter(i, 4.0), y(r.lateness_ms)
        color = EARLY_COLOR if r.early else OBSERVED_COLOR if r.observed else REVIVE_COLOR
        if r.observed:
            svg.mark("circle", _tooltip(r, t0), cx=num(cx), cy=num(cy), r=5.5, fill="white", fill_opacity="0",
                     stroke=color, stroke_width=2)
        else:
            svg.mark("circle", _tooltip(r, t0), cx=num(cx), cy=num(cy), r=4, fill=color, fill_opacity="0.9")
        if r.early:
            labels.append((cx, cy, r.msg_key))
    for cx, cy, key in labels[:MAX_EARLY_LABELS]:
        svg.text(cx + 9, cy + 4, key, size=10, weight="bold", fill=EARLY_COLOR, cls="early-label")
    legend = [LegendItem("revive (broker row)", "dot", REVIVE_COLOR),
              LegendItem("revive seen via its copy", "ring", OBSERVED_COLOR),
              LegendItem("invisible time ends (zero)", "line", "#111111")]
    if crashes:
        legend.append(LegendItem("broker crash", "step", TABLE_COLOR))
    if labels:
        legend.append(LegendItem("early (MESSAGE_LIFECYCLE)", "dot", EARLY_COLOR))
    draw_legend(svg, legend, right + 20, top + 12)
    if len(labels) > MAX_EARLY_LABELS:
        caption += f" {len(labels) - MAX_EARLY_LABELS} early revive(s) are named only in their tooltips."
    if len(shown) < len(data.pop_revives):
        caption += f" Showing {len(shown)} of {len(data.pop_revives)} revives (evenly sampled)."
    return PlotSvg(pid, title, caption, svg.render(), svg.marks)


__all__ = ["PopExtract", "PopSummary", "extract_pops", "render_pop_plot", "summarize"]
