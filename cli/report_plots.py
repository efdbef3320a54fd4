"""Plots of the check report: series extracted from trace rows, drawn as inline SVG.

Theory of operation
-------------------
Extraction reads trace rows — plain dicts with SPEC §8's columns, in ``seq``
order (``detail`` a mapping or its JSON text) — once per plot and returns
``report_model`` values; nothing here judges a rule (that is the audit's job),
it only shows what happened:

- ``extract_retries``: each ``send_back`` RETRY matched with the later
  ``deliver`` of the copy it created (same group, msg_key and the copy's
  reconsume_times) → observed delay vs the level's delay;
- ``extract_delays``: each ``store`` in ``SCHEDULE_TOPIC_XXXX`` (it carries
  ``deliver_ts``) matched with its ``schedule_fire`` (by
  ``detail.from_commitlog_offset``, else msg_key + reconsume_times) and the
  first ``deliver`` of the fired copy (its commitlog offset);
- ``extract_locks``: ``lock`` GRANTED / DENIED and ``unlock`` (plus ``crash``)
  → one ``LockSegment`` per ownership, ending at unlock, takeover, expiry
  (last grant + broker lifetime), crash or the trace end;
- ``extract_txn_counts``: ``txn_half``, ``txn_end``, ``txn_check``,
  ``txn_discard`` → lifecycle totals per transaction (``txn_id``).

Rendering is hand-written SVG (no scripts, no external resources): axes with
ticks and labels, a legend, a ``<title>`` tooltip on every mark. Every mark
carries ``class="mark"`` and each ``<svg class="plot">`` its ``data-marks``
count; empty data renders a "no data" panel. At most ``MAX_MARKS`` marks are
drawn per plot (evenly sampled; the caption says so).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from typing import Any

import attrs

from rmqspec.cli.report_model import (
    DelayPoint,
    LockDenial,
    LockSegment,
    PlotData,
    RetryPoint,
    TxnCounts,
)
from rmqspec.model.config import DEFAULT_DELAY_LEVELS, parse_delay_levels

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DEFAULT_LEVELS_MS: tuple[int, ...] = parse_delay_levels(DEFAULT_DELAY_LEVELS)
BROKER_LOCK_MS = 60_000  # rocketmq.broker.rebalance.lockMaxLiveTime
FIRST_RETRY_LEVEL = 3  # the r-th retry (r = 0, 1, …) waits level 3 + r
MAX_MARKS = 4000

Row = Mapping[str, Any]

# Okabe–Ito palette: distinguishable for colour-blind readers.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
EARLY_COLOR = "#D7191C"
TABLE_COLOR = "#444444"


def _detail(row: Row) -> Mapping[str, Any]:
    value = row.get("detail")
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str) and value:
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, Mapping) else {}
    return {}


def level_delay_ms(levels_ms: Sequence[int], level: int) -> int:
    """The delay of ``level`` clamped to ``[1, len(levels_ms)]`` (RocketMQ clamps at store time)."""
    return levels_ms[min(max(level, 1), len(levels_ms)) - 1]


def retry_table_ms(levels_ms: Sequence[int], attempt: int) -> int:
    """The default delay before retry copy ``attempt`` (its reconsume_times ≥ 1): level 3 + r."""
    return level_delay_ms(levels_ms, FIRST_RETRY_LEVEL + attempt - 1)


# ---------------------------------------------------------------------------
# extraction


def extract_retries(
    rows: Iterable[Row], levels_ms: Sequence[int] = DEFAULT_LEVELS_MS
) -> tuple[list[RetryPoint], int]:
    """(points, send-backs whose copy was never delivered) from ``send_back`` RETRY → ``deliver``.

    A send_back carries the new copy's reconsume_times; the copy's deliver is
    the first later ``deliver`` with the same group, msg_key and
    reconsume_times. Send-backs are matched first come, first served.
    """
    pending: dict[tuple[Any, Any, int], list[Row]] = {}
    points: list[RetryPoint] = []
    for row in rows:
        event = row.get("event")
        if event == "send_back" and row.get("status") == "RETRY":
            r = row.get("reconsume_times")
            if r is None or row.get("msg_key") is None:
                continue
            pending.setdefault((row.get("group"), row.get("msg_key"), int(r)), []).append(row)
        elif event == "deliver":
            r = row.get("reconsume_times")
            if not r:
                continue
            queue = pending.get((row.get("group"), row.get("msg_key"), int(r)))
            if not queue:
                continue
            back = queue.pop(0)
            level = back.get("delay_level")
            attempt = int(r)
            points.append(
                RetryPoint(
                    group=str(back.get("group")),
                    msg_key=str(back.get("msg_key")),
                    attempt=attempt,
                    level=None if level is None else int(level),
                    sent_back_ts=int(back["ts"]),
                    delivered_ts=int(row["ts"]),
                    observed_ms=int(row["ts"]) - int(back["ts"]),
                    level_ms=None if level is None or level <= 0 else level_delay_ms(levels_ms, int(level)),
                    table_ms=retry_table_ms(levels_ms, attempt),
                    seqs=(int(back["seq"]), int(row["seq"])),
                )
            )
    unmatched = sum(len(q) for q in pending.values())
    return points, unmatched


def extract_delays(rows: Iterable[Row], levels_ms: Sequence[int] = DEFAULT_LEVELS_MS) -> list[DelayPoint]:
    """Each ``store`` in SCHEDULE_TOPIC_XXXX with its ``schedule_fire`` and first ``deliver``."""
    points: list[DelayPoint] = []
    by_offset: dict[int, int] = {}  # SCHEDULE copy commitlog offset -> point index
    by_key: dict[tuple[Any, Any], list[int]] = {}  # (msg_key, reconsume_times) -> point indexes
    awaiting: dict[int, int] = {}  # fired copy commitlog offset -> point index
    for row in rows:
        event = row.get("event")
        if event == "store" and row.get("topic") == SCHEDULE_TOPIC and row.get("deliver_ts") is not None:
            level = row.get("delay_level")
            if level is None:
                level = int(row.get("queue_id") or 0) + 1  # SCHEDULE queue = level − 1
            r = int(row.get("reconsume_times") or 0)
            index = len(points)
            points.append(
                DelayPoint(
                    msg_key=row.get("msg_key"),
                    kind="retry" if r >= 1 else "delayed",
                    level=int(level),
                    stored_ts=int(row["ts"]),
                    due_ts=int(row["deliver_ts"]),
                    level_ms=level_delay_ms(levels_ms, int(level)),
                    seqs=(int(row["seq"]),),
                )
            )
            if row.get("commitlog_offset") is not None:
                by_offset[int(row["commitlog_offset"])] = index
            by_key.setdefault((row.get("msg_key"), r), []).append(index)
        elif event == "schedule_fire":
            source = _detail(row).get("from_commitlog_offset")
            index = by_offset.pop(int(source), None) if source is not None else None
            key = (row.get("msg_key"), int(row.get("reconsume_times") or 0))
            if index is None:
                queue = [i for i in by_key.get(key, ()) if points[i].fired_ts is None]
                index = queue[0] if queue else None
            if index is None or points[index].fired_ts is not None:
                continue
            if index in by_key.get(key, []):
                by_key[key].remove(index)
            p = points[index]
            points[index] = attrs.evolve(p, fired_ts=int(row["ts"]), seqs=(*p.seqs, int(row["seq"])))
            if row.get("commitlog_offset") is not None:
                awaiting[int(row["commitlog_offset"])] = index
        elif event == "deliver" and row.get("commitlog_offset") is not None:
            index = awaiting.pop(int(row["commitlog_offset"]), None)
            if index is None:
                continue
            p = points[index]
            points[index] = attrs.evolve(p, delivered_ts=int(row["ts"]), seqs=(*p.seqs, int(row["seq"])))
    return points


def extract_locks(
    rows: Iterable[Row], broker_lock_ms: int = BROKER_LOCK_MS
) -> tuple[list[LockSegment], list[LockDenial], int, int]:
    """(segments, denials, first ts, last ts) of the broker's lock table over the trace.

    GRANTED to the holder within the lifetime renews its segment; GRANTED to
    anyone after ``last_grant + broker_lock_ms`` ends the old segment at that
    expiry; GRANTED to another client before it ends it as a ``takeover``
    (the audit's LOCK_OVERLAP). ``unlock`` by the holder and ``crash`` end it
    at their ts; a segment still open ends at its expiry or the trace end.
    """
    open_: dict[tuple[str, str, int], dict[str, Any]] = {}
    segments: list[LockSegment] = []
    denials: list[LockDenial] = []
    first: int | None = None
    last = 0

    def close(key: tuple[str, str, int], end: int, reason: str, seq: int | None) -> None:
        seg = open_.pop(key)
        expiry = seg["last_grant"] + broker_lock_ms
        if end > expiry:
            end, reason, seq = expiry, "expired", None
        seqs = seg["seqs"] if seq is None else (*seg["seqs"], seq)
        segments.append(
            LockSegment(key[0], key[1], key[2], seg["client"], seg["start"], seg["last_grant"], end, reason,
                        seg["grants"], seqs)
        )

    for row in rows:
        ts = int(row["ts"])
        first = ts if first is None else first
        last = max(last, ts)
        event = row.get("event")
        if event == "crash":
            for key in list(open_):
                close(key, ts, "crash", int(row["seq"]))
            continue
        if event not in ("lock", "unlock") or row.get("queue_id") is None:
            continue
        key = (str(row.get("group")), str(row.get("topic")), int(row["queue_id"]))
        client = str(row.get("client_id") or row.get("actor"))
        seq = int(row["seq"])
        held = open_.get(key)
        if event == "unlock":
            if held is not None and held["client"] == client:
                close(key, ts, "unlock", seq)
            continue
        status = row.get("status")
        if status == "DENIED":
            denials.append(LockDenial(key[0], key[1], key[2], client, ts, seq))
            continue
        if status != "GRANTED":
            continue
        if held is not None:
            expired = ts - held["last_grant"] > broker_lock_ms
            if held["client"] == client and not expired:
                held["last_grant"] = ts
                held["grants"] += 1
                continue
            close(key, ts, "expired" if expired else "takeover", seq)
        open_[key] = {"client": client, "start": ts, "last_grant": ts, "grants": 1, "seqs": (seq,)}
    for key in list(open_):
        close(key, last, "trace end", None)
    segments.sort(key=lambda s: (s.group, s.topic, s.queue_id, s.start))
    return segments, denials, first or 0, last


def extract_txn_counts(rows: Iterable[Row]) -> TxnCounts:
    """Totals of the transaction lifecycle (each transaction by ``txn_id``, else msg_key)."""
    halves: set[Any] = set()
    commits: dict[Any, int] = {}
    rollbacks: set[Any] = set()
    discarded: set[Any] = set()
    checked: set[Any] = set()
    checks = 0
    for row in rows:
        event = row.get("event")
        if event not in ("txn_half", "txn_end", "txn_check", "txn_discard"):
            continue
        txn = row.get("txn_id") or row.get("msg_key")
        if txn is None:
            continue
        if event == "txn_half":
            halves.add(txn)
        elif event == "txn_end":
            if row.get("status") == "COMMIT":
                commits[txn] = commits.get(txn, 0) + 1
            elif row.get("status") == "ROLLBACK":
                rollbacks.add(txn)
        elif event == "txn_check":
            checks += 1
            checked.add(txn)
        else:
            discarded.add(txn)
    resolved = set(commits) | rollbacks | discarded
    return TxnCounts(
        halves=len(halves),
        committed=len(commits),
        rolled_back=len(rollbacks),
        checks=checks,
        checked_txns=len(checked),
        discarded=len(discarded),
        duplicate_commits=sum(1 for n in commits.values() if n > 1),
        unresolved=len(halves - resolved),
    )


def extract_plot_data(
    rows: Iterable[Row],
    *,
    delay_levels_ms: Sequence[int] = DEFAULT_LEVELS_MS,
    broker_lock_ms: int = BROKER_LOCK_MS,
) -> PlotData:
    """All four series from one trace (rows are sorted by ``seq`` first)."""
    ordered = sorted(rows, key=lambda r: r["seq"])
    retries, unmatched = extract_retries(ordered, delay_levels_ms)
    segments, denials, t0, t_end = extract_locks(ordered, broker_lock_ms)
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
    )


# ---------------------------------------------------------------------------
# formatting and scales


def fmt_duration(ms: float) -> str:
    """A short human duration: ``250 ms``, ``10 s``, ``1.5 s``, ``2 min``, ``1 h 30 min``."""
    ms = float(ms)
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    if ms < 1000:
        return f"{sign}{ms:.0f} ms"
    if ms < 60_000:
        s = ms / 1000
        return f"{sign}{s:.0f} s" if s == int(s) or s >= 10 else f"{sign}{s:.1f} s"
    if ms < 3_600_000:
        minutes, rest = divmod(ms, 60_000)
        secs = round(rest / 1000)
        return f"{sign}{minutes:.0f} min" + (f" {secs} s" if secs else "")
    hours, rest = divmod(ms, 3_600_000)
    minutes = round(rest / 60_000)
    return f"{sign}{hours:.0f} h" + (f" {minutes} min" if minutes else "")


def nice_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """Round tick values from ≤ lo to ≥ hi (steps of 1, 2, 2.5 or 5 × 10^k)."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    stop = math.ceil(hi / step) * step  # the last tick is ≥ hi, so the axis covers every value
    ticks = []
    value = start
    while value <= stop + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


_TIME_STEPS_MS = (
    1, 2, 5, 10, 20, 50, 100, 200, 500,
    1000, 2000, 5000, 10_000, 15_000, 30_000,
    60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000,
    3_600_000, 7_200_000, 14_400_000, 21_600_000, 43_200_000, 86_400_000,
)


def time_ticks(lo: float, hi: float, count: int = 7) -> list[float]:
    """Ticks on a linear time axis (ms) at human steps: 1 s, 5 s, 30 s, 1 min, …"""
    span = max(hi - lo, 1)
    step = next((s for s in _TIME_STEPS_MS if span / s <= count), _TIME_STEPS_MS[-1])
    start = math.floor(lo / step) * step
    out = []
    value = start
    while value <= hi:
        if value >= lo:
            out.append(float(value))
        value += step
    return out


_LOG_TICKS_MS = (
    1, 10, 100, 1000, 5000, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000,
    1_200_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 86_400_000, 604_800_000,
)


def log_time_ticks(lo: float, hi: float, count: int = 9) -> list[float]:
    """Ticks for a log time axis (ms): s / min / h values inside [lo, hi], thinned to ≤ count."""
    ticks = [float(t) for t in _LOG_TICKS_MS if lo <= t <= hi]
    while len(ticks) > count:
        ticks = ticks[::2] if ticks[-1] == ticks[::2][-1] else [*ticks[::2], ticks[-1]]
    return ticks


@attrs.frozen
class Scale:
    """Maps a data interval to a pixel interval (``log`` for log10)."""

    d0: float
    d1: float
    p0: float
    p1: float
    log: bool = False

    def __call__(self, value: float) -> float:
        if self.log:
            v, a, b = math.log10(max(value, 1e-9)), math.log10(self.d0), math.log10(self.d1)
        else:
            v, a, b = value, self.d0, self.d1
        frac = 0.5 if b == a else (v - a) / (b - a)
        return self.p0 + frac * (self.p1 - self.p0)


def _n(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _sample(items: Sequence[Any], limit: int = MAX_MARKS) -> list[Any]:
    if len(items) <= limit:
        return list(items)
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


# ---------------------------------------------------------------------------
# SVG building blocks


@attrs.frozen
class PlotSvg:
    """One rendered plot: its element id, title, caption (plain text) and SVG markup."""

    plot_id: str
    title: str
    caption: str
    svg: str
    marks: int


W = 900  # viewBox width of every plot
LEGEND_W = 190  # right column for the legend


class _Svg:
    """Collects SVG elements; ``mark`` adds a data mark with a tooltip."""

    def __init__(self, plot_id: str, title: str, height: int) -> None:
        self.plot_id = plot_id
        self.title = title
        self.height = height
        self.parts: list[str] = []
        self.marks = 0

    def add(self, text: str) -> None:
        self.parts.append(text)

    def text(self, x: float, y: float, text: str, *, anchor: str = "start", size: int = 12,
             cls: str = "", weight: str = "normal", rotate: float | None = None, fill: str = "#222") -> None:
        transform = f' transform="rotate({_n(rotate)} {_n(x)} {_n(y)})"' if rotate is not None else ""
        klass = f' class="{cls}"' if cls else ""
        self.add(
            f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}" font-size="{size}" '
            f'font-weight="{weight}" fill="{fill}"{klass}{transform}>{escape(text)}</text>'
        )

    def mark(self, shape: str, tooltip: str, **attrs_: Any) -> None:
        self.marks += 1
        attributes = " ".join(
            f'{k.rstrip("_").replace("_", "-")}="{escape(str(v))}"' for k, v in attrs_.items()
        )
        self.add(f'<{shape} class="mark" {attributes}><title>{escape(tooltip)}</title></{shape}>')

    def render(self) -> str:
        body = "\n".join(self.parts)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" id="{escape(self.plot_id)}" '
            f'viewBox="0 0 {W} {self.height}" width="100%" role="img" '
            f'aria-label="{escape(self.title)}" data-marks="{self.marks}" '
            f'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif">\n'
            f"<title>{escape(self.title)}</title>\n{body}\n</svg>"
        )


def _frame(svg: _Svg, left: float, top: float, right: float, bottom: float) -> None:
    svg.add(f'<rect x="{_n(left)}" y="{_n(top)}" width="{_n(right - left)}" height="{_n(bottom - top)}" '
            'fill="#fcfcfd" stroke="#c9ced6"/>')


def _y_axis(svg: _Svg, scale: Scale, ticks: Sequence[float], fmt: Callable[[float], str],
            left: float, right: float, label: str) -> None:
    for t in ticks:
        y = scale(t)
        svg.add(f'<line x1="{_n(left)}" y1="{_n(y)}" x2="{_n(right)}" y2="{_n(y)}" stroke="#e3e6ea"/>')
        svg.add(f'<line x1="{_n(left - 5)}" y1="{_n(y)}" x2="{_n(left)}" y2="{_n(y)}" stroke="#555"/>')
        svg.text(left - 8, y + 4, fmt(t), anchor="end", size=11, cls="tick")
    mid = (scale.p0 + scale.p1) / 2
    svg.text(16, mid, label, anchor="middle", size=12, rotate=-90, cls="axis-label")


def _x_axis(svg: _Svg, scale: Scale, ticks: Sequence[float], fmt: Callable[[float], str],
            top: float, bottom: float, label: str, *, grid: bool = True, label_dy: float = 38) -> None:
    for t in ticks:
        x = scale(t)
        if grid:
            svg.add(f'<line x1="{_n(x)}" y1="{_n(top)}" x2="{_n(x)}" y2="{_n(bottom)}" stroke="#eef0f3"/>')
        svg.add(f'<line x1="{_n(x)}" y1="{_n(bottom)}" x2="{_n(x)}" y2="{_n(bottom + 5)}" stroke="#555"/>')
        svg.text(x, bottom + 18, fmt(t), anchor="middle", size=11, cls="tick")
    svg.text((scale.p0 + scale.p1) / 2, bottom + label_dy, label, anchor="middle", size=12, cls="axis-label")


@attrs.frozen
class _LegendItem:
    label: str
    kind: str  # dot, ring, line, step, bar, faded, tick
    color: str


def _legend(svg: _Svg, items: Sequence[_LegendItem], x: float, y: float) -> None:
    svg.add(f'<g class="legend" transform="translate({_n(x)} {_n(y)})">')
    svg.text(0, 0, "Legend", size=12, weight="bold")
    for i, item in enumerate(items):
        cy = 20 + i * 20
        c = escape(item.color)
        if item.kind == "dot":
            svg.add(f'<circle cx="8" cy="{cy - 4}" r="5" fill="{c}" fill-opacity="0.85"/>')
        elif item.kind == "ring":
            svg.add(f'<circle cx="8" cy="{cy - 4}" r="5" fill="white" stroke="{c}" stroke-width="2"/>')
        elif item.kind in ("line", "step"):
            dash = ' stroke-dasharray="5 3"' if item.kind == "step" else ""
            svg.add(f'<line x1="0" y1="{cy - 4}" x2="18" y2="{cy - 4}" stroke="{c}" stroke-width="2"{dash}/>')
        elif item.kind == "bar":
            svg.add(f'<rect x="0" y="{cy - 10}" width="18" height="12" fill="{c}"/>')
        elif item.kind == "faded":
            svg.add(f'<rect x="0" y="{cy - 10}" width="18" height="12" fill="{c}" fill-opacity="0.3" '
                    f'stroke="{c}" stroke-dasharray="2 2"/>')
        elif item.kind == "tick":
            svg.add(f'<path d="M4 {cy - 11} L14 {cy - 11} L9 {cy - 2} Z" fill="{c}"/>')
        label = item.label if len(item.label) <= 26 else item.label[:25] + "…"
        svg.add(f'<text x="26" y="{cy}" font-size="12" fill="#222">{escape(label)}'
                f"<title>{escape(item.label)}</title></text>")
    svg.add("</g>")


def _no_data(plot_id: str, title: str, message: str) -> str:
    svg = _Svg(plot_id, title, 160)
    svg.add(f'<rect x="1" y="1" width="{W - 2}" height="158" rx="6" fill="#f6f7f9" stroke="#c9ced6" '
            'stroke-dasharray="6 4"/>')
    svg.text(W / 2, 72, "no data", anchor="middle", size=20, weight="bold", fill="#6b7280", cls="no-data")
    svg.text(W / 2, 100, message, anchor="middle", size=13, fill="#6b7280")
    return svg.render().replace('class="plot"', 'class="plot empty"', 1)


def _colors(names: Iterable[str]) -> dict[str, str]:
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


def _jitter(index: int, spread: float = 0.28) -> float:
    """A deterministic offset in [−spread, spread] so equal x values do not hide each other."""
    return ((index * 0.618034) % 1.0 - 0.5) * 2 * spread


# ---------------------------------------------------------------------------
# the four plots


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
    points = _sample(data.retries)
    if not points:
        return PlotSvg(pid, title, caption, _no_data(pid, title, "no send_back RETRY was followed by a "
                                                     "delivery of its retry copy in this trace"), 0)
    max_attempt = max(4, max(p.attempt for p in points))
    max_attempt = min(max_attempt, max(len(levels) - FIRST_RETRY_LEVEL + 1, max(p.attempt for p in points)))
    table = [(a, retry_table_ms(levels, a)) for a in range(1, max_attempt + 1)]
    values = [p.observed_ms for p in points] + [t for _, t in table]
    lo, hi = max(min(values) / 1.6, 1.0), max(values) * 1.6
    height = 420
    left, top, right, bottom = 78, 20, W - LEGEND_W - 10, height - 56
    svg = _Svg(pid, title, height)
    x = Scale(0.5, max_attempt + 0.5, left, right)
    y = Scale(lo, hi, bottom, top, log=True)
    _frame(svg, left, top, right, bottom)
    _y_axis(svg, y, log_time_ticks(lo, hi), fmt_duration, left, right, "delay until the retry's delivery (log)")
    step = 1 if max_attempt <= 20 else math.ceil(max_attempt / 16)
    _x_axis(svg, x, list(range(1, max_attempt + 1, step)), lambda v: f"{v:.0f}", top, bottom,
            "retry attempt (reconsume_times of the copy)", grid=False)
    path = []
    for a, t in table:
        path.append(f"{'M' if not path else 'L'}{_n(x(a - 0.5))} {_n(y(t))} L{_n(x(a + 0.5))} {_n(y(t))}")
    svg.add(f'<path class="table-line" d="{" ".join(path)}" fill="none" stroke="{TABLE_COLOR}" '
            f'stroke-width="2" stroke-dasharray="6 4"><title>level table: attempt r waits level 2 + r'
            f"</title></path>")
    colors = _colors(p.group for p in points)
    for i, p in enumerate(points):
        early = p.early
        fill = EARLY_COLOR if early else colors[p.group]
        tip = (
            f"{p.group} {p.msg_key}\nattempt {p.attempt}, level {p.level} "
            f"({fmt_duration(p.level_ms) if p.level_ms is not None else 'unknown'})\n"
            f"observed {fmt_duration(p.observed_ms)} (table {fmt_duration(p.table_ms)})"
            f"{' — EARLY' if early else ''}\nseqs {p.seqs[0]} → {p.seqs[1]}"
        )
        svg.mark("circle", tip, cx=_n(x(p.attempt + _jitter(i))), cy=_n(y(max(p.observed_ms, lo))), r=5,
                 fill=fill, fill_opacity="0.8", stroke="white" if not early else "#7f0000", stroke_width=1)
    legend = [_LegendItem(f"group {g}", "dot", c) for g, c in colors.items()]
    legend.append(_LegendItem("level table delay", "step", TABLE_COLOR))
    if any(p.early for p in points):
        legend.append(_LegendItem("delivered early", "dot", EARLY_COLOR))
    _legend(svg, legend, right + 20, top + 12)
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
    points = _sample(data.delays)
    shown = [p for p in points if p.fire_latency_ms is not None or p.deliver_latency_ms is not None]
    pending = len(points) - len(shown)
    if pending:
        caption += f" {pending} delayed cop(ies) had not fired when the trace ended."
    if not shown:
        return PlotSvg(pid, title, caption, _no_data(pid, title, "no message passed through "
                                                     "SCHEDULE_TOPIC_XXXX and fired in this trace"), 0)
    max_level = max(p.level for p in shown)
    min_level = min(p.level for p in shown)
    lv0, lv1 = max(1, min_level - 1), min(len(levels), max_level + 1)
    values = [v for p in shown for v in (p.fire_latency_ms, p.deliver_latency_ms) if v is not None]
    values += [level_delay_ms(levels, lv) for lv in range(lv0, lv1 + 1)]
    lo, hi = max(min(v for v in values if v > 0) / 1.6 if any(v > 0 for v in values) else 1, 1.0), max(values) * 1.6
    height = 430
    left, top, right, bottom = 78, 20, W - LEGEND_W - 10, height - 64
    svg = _Svg(pid, title, height)
    x = Scale(lv0 - 0.5, lv1 + 0.5, left, right)
    y = Scale(lo, hi, bottom, top, log=True)
    _frame(svg, left, top, right, bottom)
    _y_axis(svg, y, log_time_ticks(lo, hi), fmt_duration, left, right, "latency from store (log)")
    _x_axis(svg, x, list(range(lv0, lv1 + 1)),
            lambda v: f"{v:.0f}", top, bottom, "delay level (messageDelayLevel index; its delay below)", grid=False,
            label_dy=48)
    for lv in range(lv0, lv1 + 1):  # level delay under each tick label, small
        svg.text(x(lv), bottom + 29, fmt_duration(level_delay_ms(levels, lv)), anchor="middle", size=9,
                 fill="#6b7280")
    path = []
    for lv in range(lv0, lv1 + 1):
        t = level_delay_ms(levels, lv)
        path.append(f"{'M' if not path else 'L'}{_n(x(lv - 0.5))} {_n(y(t))} L{_n(x(lv + 0.5))} {_n(y(t))}")
    svg.add(f'<path class="table-line" d="{" ".join(path)}" fill="none" stroke="{TABLE_COLOR}" '
            'stroke-width="2" stroke-dasharray="6 4"><title>configured delay of each level</title></path>')
    kind_color = {"delayed": PALETTE[0], "retry": PALETTE[1]}
    for i, p in enumerate(shown):
        cx = _n(x(p.level + _jitter(i)))
        color = kind_color.get(p.kind, PALETTE[2])
        head = f"{p.kind} copy {p.msg_key}\nlevel {p.level} ({fmt_duration(p.level_ms)})\n"
        if p.fire_latency_ms is not None:
            early = p.fired_ts is not None and p.fired_ts < p.due_ts
            svg.mark("circle", head + f"fired after {fmt_duration(p.fire_latency_ms)}"
                     f"{' — EARLY' if early else ''}\nseqs {', '.join(map(str, p.seqs))}",
                     cx=cx, cy=_n(y(max(p.fire_latency_ms, lo))), r=6, fill="white", fill_opacity="0",
                     stroke=EARLY_COLOR if early else color, stroke_width=2)
        if p.deliver_latency_ms is not None:
            early = p.delivered_ts is not None and p.delivered_ts < p.due_ts
            svg.mark("circle", head + f"delivered after {fmt_duration(p.deliver_latency_ms)}"
                     f"{' — EARLY' if early else ''}\nseqs {', '.join(map(str, p.seqs))}",
                     cx=cx, cy=_n(y(max(p.deliver_latency_ms, lo))), r=3.5,
                     fill=EARLY_COLOR if early else color, fill_opacity="0.9")
    legend = [
        _LegendItem("delayed send / commit", "dot", kind_color["delayed"]),
        _LegendItem("retry copy", "dot", kind_color["retry"]),
        _LegendItem("store → schedule_fire", "ring", "#555555"),
        _LegendItem("store → first deliver", "dot", "#555555"),
        _LegendItem("configured level delay", "step", TABLE_COLOR),
    ]
    _legend(svg, legend, right + 20, top + 12)
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
    segments = _sample(data.locks)
    denials = _sample(data.denials)
    if not segments and not denials:
        return PlotSvg(pid, title, caption, _no_data(pid, title, "no lock events (orderly consumers) in this "
                                                     "trace"), 0)
    keys = sorted({(s.group, s.topic, s.queue_id) for s in segments}
                  | {(d.group, d.topic, d.queue_id) for d in denials})
    row_h = 32
    left, top = 250, 20
    right = W - LEGEND_W - 10
    bottom = top + row_h * len(keys) + 8
    height = int(bottom + 56)
    clients = _colors([s.client_id for s in segments] + [d.client_id for d in denials])
    legend_h = 20 * (len(clients) + 3) + 20
    height = max(height, top + legend_h + 10)
    svg = _Svg(pid, title, height)
    t0 = data.t0
    t1 = max([data.t_end, *(s.end for s in segments), *(d.ts for d in denials)])
    x = Scale(0, max(t1 - t0, 1), left, right)
    _frame(svg, left, top, right, bottom)
    _x_axis(svg, x, time_ticks(0, t1 - t0), lambda v: fmt_duration(v) if v else "0", top, bottom,
            "time since the trace started")
    for i, key in enumerate(keys):
        cy = top + 4 + row_h * i + row_h / 2
        if i % 2:
            svg.add(f'<rect x="{left}" y="{_n(cy - row_h / 2)}" width="{_n(right - left)}" height="{row_h}" '
                    'fill="#f1f3f6"/>')
        label = f"{key[0]} · {key[1]} · q{key[2]}"
        short = label if len(label) <= 36 else label[:35] + "…"
        svg.add(f'<text x="{left - 8}" y="{_n(cy + 4)}" text-anchor="end" font-size="12" fill="#222">'
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
        svg.mark("rect", tip, x=_n(x0), y=_n(cy - 8), width=_n(solid_w), height=16, fill=color, rx=2)
        if x1 > x0 + solid_w:
            svg.add(f'<rect x="{_n(x0 + solid_w)}" y="{_n(cy - 8)}" width="{_n(x1 - x0 - solid_w)}" height="16" '
                    f'fill="{color}" fill-opacity="0.3" stroke="{color}" stroke-dasharray="2 2">'
                    f"<title>{escape(tip)}</title></rect>")
        if s.end_reason in ("takeover", "crash"):
            svg.add(f'<line x1="{_n(x1)}" y1="{_n(cy - 11)}" x2="{_n(x1)}" y2="{_n(cy + 11)}" stroke="#111" '
                    'stroke-width="2"/>')
    for d in denials:
        cy = top + 4 + row_h * row_of[(d.group, d.topic, d.queue_id)] + row_h / 2
        cx = x(d.ts - t0)
        svg.mark("path", f"DENIED to {d.client_id} at {fmt_duration(d.ts - t0)} (seq {d.seq})",
                 d=f"M{_n(cx - 5)} {_n(cy - 14)} L{_n(cx + 5)} {_n(cy - 14)} L{_n(cx)} {_n(cy - 5)} Z",
                 fill=clients[d.client_id], stroke=EARLY_COLOR, stroke_width=1)
    legend = [_LegendItem(f"client {c}", "bar", col) for c, col in clients.items()]
    legend.append(_LegendItem("after last renewal", "faded", "#555555"))
    legend.append(_LegendItem("DENIED request", "tick", "#555555"))
    _legend(svg, legend, right + 20, top + 12)
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
        return PlotSvg(pid, title, caption, _no_data(pid, title, "no transaction events in this trace"), 0)
    height = 380
    left, top, right, bottom = 78, 20, W - LEGEND_W - 10, height - 70
    svg = _Svg(pid, title, height)
    values = [getattr(c, name) for name, _, _ in _TXN_BARS]
    ticks = nice_ticks(0, max(max(values), 1), 5)
    y = Scale(0, ticks[-1], bottom, top)
    _frame(svg, left, top, right, bottom)
    _y_axis(svg, y, ticks, lambda v: f"{v:g}", left, right, "count")
    slot = (right - left) / len(_TXN_BARS)
    for i, (name, label, color) in enumerate(_TXN_BARS):
        value = getattr(c, name)
        cx = left + slot * (i + 0.5)
        bw = slot * 0.6
        if value:
            svg.mark("rect", f"{label}: {value}", x=_n(cx - bw / 2), y=_n(y(value)), width=_n(bw),
                     height=_n(bottom - y(value)), fill=color, rx=2)
        svg.text(cx, y(value) - 6, str(value), anchor="middle", size=12, weight="bold")
        svg.add(f'<line x1="{_n(cx)}" y1="{_n(bottom)}" x2="{_n(cx)}" y2="{_n(bottom + 5)}" stroke="#555"/>')
        words = label.split(" ", 1)
        svg.text(cx, bottom + 20, words[0], anchor="middle", size=11, cls="tick")
        if len(words) > 1:
            svg.text(cx, bottom + 34, words[1], anchor="middle", size=11, cls="tick")
    svg.text((left + right) / 2, bottom + 56, "outcome", anchor="middle", size=12, cls="axis-label")
    legend = [_LegendItem(label, "bar", color) for _, label, color in _TXN_BARS]
    _legend(svg, legend, right + 20, top + 12)
    return PlotSvg(pid, title, caption, svg.render(), svg.marks)


def render_plots(data: PlotData) -> list[PlotSvg]:
    """The four plots in report order."""
    return [render_retry_plot(data), render_delay_plot(data), render_lock_plot(data), render_txn_plot(data)]
