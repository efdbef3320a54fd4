"""Plots of the check report: the series of a trace, drawn as inline SVG — the entry point.

Theory of operation
-------------------
``extract_plot_data(rows)`` sorts a trace's rows (plain dicts with SPEC §8's
columns) by ``seq`` and extracts every series once into a ``PlotData``
(``cli.report_model``); ``render_plots(data)`` draws the six plots in report
order. Nothing here judges a rule (that is the audit's job): the plots only
show what happened, and mark what the audit would flag in red.

The work is split by concern:

- ``cli.report_plots_extract``: the retry, delay, lock and transaction series
  (what each pairs with what is in its docstring);
- ``cli.report_plots_timer``: the 5.x timer series and its plot (lateness of
  ``timer_fire`` and first ``deliver`` after ``deliver_ts``, over time);
- ``cli.report_plots_pop``: the 5.x pop series and its plot (lateness of each
  ``revive`` after pop time + invisible time, over time);
- ``cli.report_plots_svg``: the drawing kit — hand-written SVG (no scripts,
  no external resources), axes with ticks and labels, a legend, a
  ``<title>`` tooltip on every mark; every mark carries ``class="mark"`` and
  each ``<svg class="plot">`` its ``data-marks`` count; empty data renders a
  "no data" panel; at most ``MAX_MARKS`` marks are drawn per plot (evenly
  sampled; the caption says so);
- this module: the four plots of the 4.x features — (i) retry delay per
  attempt against the level table (level 3 + r,
  SendMessageProcessor.consumerSendMsgBack), (ii) delayed-copy latency per
  delay level against ``messageDelayLevel`` (ScheduleMessageService), (iii)
  broker lock ownership per queue (RebalanceLockManager, lockMaxLiveTime),
  (iv) transaction lifecycle totals (TransactionalMessageCheckService) — and
  the two entry points.

Every name the rest of the project imported from here before the split is
importable from here still (``__all__``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape

from rmqspec.cli.report_model import PlotData
from rmqspec.cli.report_plots_extract import (
    BROKER_LOCK_MS,
    DEFAULT_LEVELS_MS,
    FIRST_RETRY_LEVEL,
    SCHEDULE_TOPIC,
    Row,
    extract_delays,
    extract_locks,
    extract_retries,
    extract_txn_counts,
    level_delay_ms,
    retry_table_ms,
)
from rmqspec.cli.report_plots_pop import extract_pops, render_pop_plot
from rmqspec.cli.report_plots_svg import (
    EARLY_COLOR,
    LEGEND_W,
    MAX_MARKS,
    PALETTE,
    TABLE_COLOR,
    LegendItem,
    PlotSvg,
    Scale,
    Svg,
    W,
    color_map,
    draw_legend,
    fmt_duration,
    frame,
    jitter,
    log_time_ticks,
    nice_ticks,
    no_data,
    num,
    sample,
    time_ticks,
    x_axis,
    y_axis,
)
from rmqspec.cli.report_plots_timer import crash_times, extract_timers, render_timer_plot

__all__ = [
    "BROKER_LOCK_MS",
    "DEFAULT_LEVELS_MS",
    "FIRST_RETRY_LEVEL",
    "MAX_MARKS",
    "SCHEDULE_TOPIC",
    "PlotSvg",
    "Row",
    "Scale",
    "extract_delays",
    "extract_locks",
    "extract_plot_data",
    "extract_pops",
    "extract_retries",
    "extract_timers",
    "extract_txn_counts",
    "fmt_duration",
    "level_delay_ms",
    "log_time_ticks",
    "nice_ticks",
    "render_delay_plot",
    "render_lock_plot",
    "render_plots",
    "render_pop_plot",
    "render_retry_plot",
    "render_timer_plot",
    "render_txn_plot",
    "retry_table_ms",
    "time_ticks",
]


def extract_plot_data(
    rows: Iterable[Row],
    *,
    delay_levels_ms: Sequence[int] = DEFAULT_LEVELS_MS,
    broker_lock_ms: int = BROKER_LOCK_MS,
) -> PlotData:
    """Every series from one trace (rows are sorted by ``seq`` first)."""
    ordered = sorted(rows, key=lambda r: r["seq"])
    retries, unmatched = extract_retries(ordered, delay_levels_ms)
    segments, denials, t0, t_end = extract_locks(ordered, broker_lock_ms)
    pops = extract_pops(ordered)
    return PlotData(
        retries=retries,
        retries_unmatched=unmatched,
        delays=extract_delays(ordered, delay_levels_ms),
        locks=segments,
        denials=denials,
        txn=extract_txn_counts(ordered),
        delay_levels_ms=tuple(delay_levels_ms),
        broker_lock_ms=broker_lock_ms,
        t0=t0,
        t_end=t_end,
        timers=extract_timers(ordered),
        crashes=crash_times(ordered),
        pop_revives=pops.revives,
        pops_acked=pops.acked,
        pops_pending=pops.pending,
    )


# ---------------------------------------------------------------------------
# the four plots of the 4.x features


def render_retry_plot(data: PlotData) -> PlotSvg:
    """(i) observed delay before each retry copy's delivery vs the level table."""
    pid, title = "plot-retry", "Retry delay per attempt"
    levels = data.delay_levels_ms or DEFAULT_LEVELS_MS
    caption = (
        "Each dot is one retry: the time from the consumer's send_back (RECONSUME_LATER) to the "
        "delivery of the retry copy, by attempt (the copy's reconsume_times). The dashed steps are "
        "the level table's delay for that attempt (level 3 + r: 10 s, 30 s, 1 min, 2 min, …). "
        "Dots should sit on or just above the steps; a red dot below its level's delay was "
        "delivered early (RETRY_EARLY)."
    )
    if data.retries_unmatched:
        caption += f" {data.retries_unmatched} retry cop(ies) were not delivered before the trace ended."
    points = sample(data.retries)
    if not points:
        return PlotSvg(pid, title, caption, no_data(pid, title, "no send_back RETRY was followed by a "
                                                     "delivery of its retry copy in this trace"), 0)
    max_attempt = max(4, max(p.attempt for p in points))
    max_attempt = min(max_attempt, max(len(levels) - FIRST_RETRY_LEVEL + 1, max(p.attempt for p in points)))
    table = [(a, retry_table_ms(levels, a)) for a in range(1, max_attempt + 1)]
    values = [p.observed_ms for p in points] + [t for _, t in table]
    lo, hi = max(min(values) / 1.6, 1.0), max(values) * 1.6
    height = 420
    left, top, right, bottom = 78, 20, W - LEGEND_W - 10, height - 56
    svg = Svg(pid, title, height)
    x = Scale(0.5, max_attempt + 0.5, left, right)
    y = Scale(lo, hi, bottom, top, log=True)
    frame(svg, left, top, right, bottom)
    y_axis(svg, y, log_time_ticks(lo, hi), fmt_duration, left, right, "delay until the retry's delivery (log)")
    step = 1 if max_attempt <= 20 else math.ceil(max_attempt / 16)
    x_axis(svg, x, list(range(1, max_attempt + 1, step)), lambda v: f"{v:.0f}", top, bottom,
            "retry attempt (reconsume_times of the copy)", grid=False)
    path = []
    for a, t in table:
        path.append(f"{'M' if not path else 'L'}{num(x(a - 0.5))} {num(y(t))} L{num(x(a + 0.5))} {num(y(t))}")
    svg.add(f'<path class="table-line" d="{" ".join(path)}" fill="none" stroke="{TABLE_COLOR}" '
            f'stroke-width="2" stroke-dasharray="6 4"><title>level table: attempt r waits level 2 + r'
            f"</title></path>")
    colors = color_map(p.group for p in points)
    for i, p in enumerate(points):
        early = p.early
        fill = EARLY_COLOR if early else colors[p.group]
        tip = (
            f"{p.group} {p.msg_key}\nattempt {p.attempt}, level {p.level} "
            f"({fmt_duration(p.level_ms) if p.level_ms is not None else 'unknown'})\n"
            f"observed {fmt_duration(p.observed_ms)} (table {fmt_duration(p.table_ms)})"
            f"{' — EARLY' if early else ''}\nseqs {p.seqs[0]} → {p.seqs[1]}"
        )
        svg.mark("circle", tip, cx=num(x(p.attempt + jitter(i))), cy=num(y(max(p.observed_ms, lo))), r=5,
                 fill=fill, fill_opacity="0.8", stroke="white" if not early else "#7f0000", stroke_width=1)
    legend = [LegendItem(f"group {g}", "dot", c) for g, c in colors.items()]
    legend.append(LegendItem("level table delay", "step", TABLE_COLOR))
    if any(p.early for p in points):
        legend.append(LegendItem("delivered early", "dot", EARLY_COLOR))
    draw_legend(svg, legend, right + 20, top + 12)
    if len(points) < len(data.retries):
        caption += f" Showing {len(points)} of {len(data.retries)} retries (evenly sampled)."
    return PlotSvg(pid, title, caption, svg.render(), svg.marks)


def render_delay_plot(data: PlotData) -> PlotSvg:
    """(ii) latency of delayed copies (store → fire, store → delivery) vs their level."""
    pid, title = "plot-delay", "Delayed delivery latency by delay level"
    levels = data.delay_levels_ms or DEFAULT_LEVELS_MS
    caption = (
        "Each copy stored in SCHEDULE_TOPIC_XXXX (delayed sends and retry copies), at its delay level: "
        "rings show the time from the store to the schedule service firing it, dots the time to its "
        "first delivery to a consumer. The dashed steps are the level's configured delay. Nothing may "
        "lie below the steps (DELAY_EARLY); the height above them is the schedule and pull latency."
    )
    points = sample(data.delays)
    shown = [p for p in points if p.fire_latency_ms is not None or p.deliver_latency_ms is not None]
    pending = len(points) - len(shown)
    if pending:
        caption += f" {pending} delayed cop(ies) had not fired when the trace ended."
    if not shown:
        return PlotSvg(pid, title, caption, no_data(pid, title, "no message passed through "
                                                     "SCHEDULE_TOPIC_XXXX and fired in this trace"), 0)
    max_level = max(p.level for p in shown)
    min_level = min(p.level for p in shown)
    lv0, lv1 = max(1, min_level - 1), min(len(levels), max_level + 1)
    values = [v for p in shown for v in (p.fire_latency_ms, p.deliver_latency_ms) if v is not None]
    values += [level_delay_ms(levels, lv) for lv in range(lv0, lv1 + 1)]
    lo, hi = max(min(v for v in values if v > 0) / 1.6 if any(v > 0 for v in values) else 1, 1.0), max(values) * 1.6
    height = 430
    left, top, right, bottom = 78, 20, W - LEGEND_W - 10, height - 64
    svg = Svg(pid, title, height)
    x = Scale(lv0 - 0.5, lv1 + 0.5, left, right)
    y = Scale(lo, hi, bottom, top, log=True)
    frame(svg, left, top, right, bottom)
    y_axis(svg, y, log_time_ticks(lo, hi), fmt_duration, left, right, "latency from store (log)")
    x_axis(svg, x, list(range(lv0, lv1 + 1)),
            lambda v: f"{v:.0f}", top, bottom, "delay level (messageDelayLevel index; its delay below)", grid=False,
            label_dy=48)
    for lv in range(lv0, lv1 + 1):  # level delay under each tick label, small
        svg.text(x(lv), bottom + 29, fmt_duration(level_delay_ms(levels, lv)), anchor="middle", size=9,
                 fill="#6b7280")
    path = []
    for lv in range(lv0, lv1 + 1):
        t = level_delay_ms(levels, lv)
        path.append(f"{'M' if not path else 'L'}{num(x(lv - 0.5))} {num(y(t))} L{num(x(lv + 0.5))} {num(y(t))}")
    svg.add(f'<path class="table-line" d="{" ".join(path)}" fill="none" stroke="{TABLE_COLOR}" '
            'stroke-width="2" stroke-dasharray="6 4"><title>configured delay of each level</title></path>')
    kind_color = {"delayed": PALETTE[0], "retry": PALETTE[1]}
    for i, p in enumerate(shown):
        cx = num(x(p.level + jitter(i)))
        color = kind_color.get(p.kind, PALETTE[2])
        head = f"{p.kind} copy {p.msg_key}\nlevel {p.level} ({fmt_duration(p.level_ms)})\n"
        if p.fire_latency_ms is not None:
            early = p.fired_ts is not None and p.fired_ts < p.due_ts
            svg.mark("circle", head + f"fired after {fmt_duration(p.fire_latency_ms)}"
                     f"{' — EARLY' if early else ''}\nseqs {', '.join(map(str, p.seqs))}",
                     cx=cx, cy=num(y(max(p.fire_latency_ms, lo))), r=6, fill="white", fill_opacity="0",
                     stroke=EARLY_COLOR if early else color, stroke_width=2)
        if p.deliver_latency_ms is not None:
            early = p.delivered_ts is not None and p.delivered_ts < p.due_ts
            svg.mark("circle", head + f"delivered after {fmt_duration(p.deliver_latency_ms)}"
                     f"{' — EARLY' if early else ''}\nseqs {', '.join(map(str, p.seqs))}",
                     cx=cx, cy=num(y(max(p.deliver_latency_ms, lo))), r=3.5,
                     fill=EARLY_COLOR if early else color, fill_opacity="0.9")
    legend = [
        LegendItem("delayed send / commit", "dot", kind_color["delayed"]),
        LegendItem("retry copy", "dot", kind_color["retry"]),
        LegendItem("store → schedule_fire", "ring", "#555555"),
        LegendItem("store → first deliver", "dot", "#555555"),
        LegendItem("configured level delay", "step", TABLE_COLOR),
    ]
    draw_legend(svg, legend, right + 20, top + 12)
    if len(points) < len(data.delays):
        caption += f" Showing {len(points)} of {len(data.delays)} delayed copies (evenly sampled)."
    return PlotSvg(pid, title, caption, svg.render(), svg.marks)


def render_lock_plot(data: PlotData) -> PlotSvg:
    """(iii) Gantt of broker lock ownership per (group, topic, queue)."""
    pid, title = "plot-locks", "Orderly lock ownership per queue"
    caption = (
        "One row per (consumer group, topic, queue). A bar is one client's ownership of the broker "
        "lock: solid from its first GRANTED to its last renewal, light from the last renewal until "
        f"the lock ends (unlock, another client's takeover, or expiry {fmt_duration(data.broker_lock_ms)} "
        "after the last renewal). Triangles are DENIED lock requests. Bars of different clients on one "
        "row should never overlap (LOCK_OVERLAP); after a client dies, the next owner appears only once "
        "the old lock expired."
    )
    segments = sample(data.locks)
    denials = sample(data.denials)
    if not segments and not denials:
        return PlotSvg(pid, title, caption, no_data(pid, title, "no lock events (orderly consumers) in this "
                                                     "trace"), 0)
    keys = sorted({(s.group, s.topic, s.queue_id) for s in segments}
                  | {(d.group, d.topic, d.queue_id) for d in denials})
    row_h = 32
    left, top = 250, 20
    right = W - LEGEND_W - 10
    bottom = top + row_h * len(keys) + 8
    height = int(bottom + 56)
    clients = color_map([s.client_id for s in segments] + [d.client_id for d in denials])
    legend_h = 20 * (len(clients) + 3) + 20
    height = max(height, top + legend_h + 10)
    svg = Svg(pid, title, height)
    t0 = data.t0
    t1 = max([data.t_end, *(s.end for s in segments), *(d.ts for d in denials)])
    x = Scale(0, max(t1 - t0, 1), left, right)
    frame(svg, left, top, right, bottom)
    x_axis(svg, x, time_ticks(0, t1 - t0), lambda v: fmt_duration(v) if v else "0", top, bottom,
            "time since the trace started")
    for i, key in enumerate(keys):
        cy = top + 4 + row_h * i + row_h / 2
        if i % 2:
            svg.add(f'<rect x="{left}" y="{num(cy - row_h / 2)}" width="{num(right - left)}" height="{row_h}" '
                    'fill="#f1f3f6"/>')
        label = f"{key[0]} · {key[1]} · q{key[2]}"
        short = label if len(label) <= 36 else label[:35] + "…"
        svg.add(f'<text x="{left - 8}" y="{num(cy + 4)}" text-anchor="end" font-size="12" fill="#222">'
                f"{escape(short)}<title>{escape(label)}</title></text>")
    row_of = {key: i for i, key in enumerate(keys)}
    for s in segments:
        cy = top + 4 + row_h * row_of[(s.group, s.topic, s.queue_id)] + row_h / 2
        color = clients[s.client_id]
        x0, x_renew, x1 = x(s.start - t0), x(s.last_grant - t0), x(s.end - t0)
        tip = (
            f"{s.client_id} holds {s.group} {s.topic} q{s.queue_id}\n"
            f"from {fmt_duration(s.start - t0)} to {fmt_duration(s.end - t0)} ({s.end_reason})\n"
            f"{s.grants} grant(s), last at {fmt_duration(s.last_grant - t0)}\nseqs {', '.join(map(str, s.seqs))}"
        )
        solid_w = max(x_renew - x0, 2.0)
        svg.mark("rect", tip, x=num(x0), y=num(cy - 8), width=num(solid_w), height=16, fill=color, rx=2)
        if x1 > x0 + solid_w:
            svg.add(f'<rect x="{num(x0 + solid_w)}" y="{num(cy - 8)}" width="{num(x1 - x0 - solid_w)}" height="16" '
                    f'fill="{color}" fill-opacity="0.3" stroke="{color}" stroke-dasharray="2 2">'
                    f"<title>{escape(tip)}</title></rect>")
        if s.end_reason in ("takeover", "crash"):
            svg.add(f'<line x1="{num(x1)}" y1="{num(cy - 11)}" x2="{num(x1)}" y2="{num(cy + 11)}" stroke="#111" '
                    'stroke-width="2"/>')
    for d in denials:
        cy = top + 4 + row_h * row_of[(d.group, d.topic, d.queue_id)] + row_h / 2
        cx = x(d.ts - t0)
        svg.mark("path", f"DENIED to {d.client_id} at {fmt_duration(d.ts - t0)} (seq {d.seq})",
                 d=f"M{num(cx - 5)} {num(cy - 14)} L{num(cx + 5)} {num(cy - 14)} L{num(cx)} {num(cy - 5)} Z",
                 fill=clients[d.client_id], stroke=EARLY_COLOR, stroke_width=1)
    legend = [LegendItem(f"client {c}", "bar", col) for c, col in clients.items()]
    legend.append(LegendItem("after last renewal", "faded", "#555555"))
    legend.append(LegendItem("DENIED request", "tick", "#555555"))
    draw_legend(svg, legend, right + 20, top + 12)
    if len(segments) < len(data.locks) or len(denials) < len(data.denials):
        caption += " Sampled: too many lock events to draw them all."
    return PlotSvg(pid, title, caption, svg.render(), svg.marks)


_TXN_BARS: tuple[tuple[str, str, str], ...] = (
    ("halves", "halves", PALETTE[4]),
    ("committed", "committed", PALETTE[2]),
    ("rolled_back", "rolled back", PALETTE[1]),
    ("checks", "checks (total)", PALETTE[0]),
    ("discarded", "discarded", PALETTE[3]),
    ("duplicate_commits", "duplicate commits", PALETTE[5]),
    ("unresolved", "unresolved", EARLY_COLOR),
)


def render_txn_plot(data: PlotData) -> PlotSvg:
    """(iv) transaction lifecycle totals as a bar chart."""
    pid, title = "plot-txn", "Transaction lifecycle"
    c = data.txn
    caption = (
        "Transactions by outcome: half messages sent, committed, rolled back, the total number of "
        f"broker checks ({c.checked_txns} transaction(s) were checked at least once), halves discarded "
        "after the check limit, transactions committed twice (an observation: RocketMQ 4.9 does not "
        "de-duplicate END_TRANSACTION), and halves left unresolved at the end of the trace "
        "(TXN_UNRESOLVED when the trace ends with a drain)."
    )
    if c.empty:
        return PlotSvg(pid, title, caption, no_data(pid, title, "no transaction events in this trace"), 0)
    height = 380
    left, top, right, bottom = 78, 20, W - LEGEND_W - 10, height - 70
    svg = Svg(pid, title, height)
    values = [getattr(c, name) for name, _, _ in _TXN_BARS]
    ticks = nice_ticks(0, max(max(values), 1), 5)
    y = Scale(0, ticks[-1], bottom, top)
    frame(svg, left, top, right, bottom)
    y_axis(svg, y, ticks, lambda v: f"{v:g}", left, right, "count")
    slot = (right - left) / len(_TXN_BARS)
    for i, (name, label, color) in enumerate(_TXN_BARS):
        value = getattr(c, name)
        cx = left + slot * (i + 0.5)
        bw = slot * 0.6
        if value:
            svg.mark("rect", f"{label}: {value}", x=num(cx - bw / 2), y=num(y(value)), width=num(bw),
                     height=num(bottom - y(value)), fill=color, rx=2)
        svg.text(cx, y(value) - 6, str(value), anchor="middle", size=12, weight="bold")
        svg.add(f'<line x1="{num(cx)}" y1="{num(bottom)}" x2="{num(cx)}" y2="{num(bottom + 5)}" stroke="#555"/>')
        words = label.split(" ", 1)
        svg.text(cx, bottom + 20, words[0], anchor="middle", size=11, cls="tick")
        if len(words) > 1:
            svg.text(cx, bottom + 34, words[1], anchor="middle", size=11, cls="tick")
    svg.text((left + right) / 2, bottom + 56, "outcome", anchor="middle", size=12, cls="axis-label")
    legend = [LegendItem(label, "bar", color) for _, label, color in _TXN_BARS]
    draw_legend(svg, legend, right + 20, top + 12)
    return PlotSvg(pid, title, caption, svg.render(), svg.marks)


def render_plots(data: PlotData) -> list[PlotSvg]:
    """The six plots in report order."""
    return [render_retry_plot(data), render_delay_plot(data), render_lock_plot(data), render_txn_plot(data),
            render_timer_plot(data), render_pop_plot(data)]
