"""Drawing kit of the report plots: duration formatting, axis ticks, scales and SVG pieces.

Theory of operation
-------------------
The plots of ``rmqspec check``'s HTML report are hand-written SVG: no
scripts, no external resources, so the page can be mailed, archived as a CI
artifact or opened offline (``cli.report_html``). Every plot module
(``cli.report_plots``, ``cli.report_plots_timer``) draws with these pieces so
they look alike:

- ``fmt_duration`` and the tick makers (``nice_ticks`` for counts,
  ``time_ticks`` for a linear time axis at human steps, ``log_time_ticks``
  for a log time axis), ``Scale`` (data → pixels, linear or log10);
- ``Svg`` collects elements; ``Svg.mark`` adds one data mark with
  ``class="mark"`` and a ``<title>`` tooltip, and ``Svg.render`` writes the
  ``<svg class="plot">`` with its ``data-marks`` count;
- ``frame``, ``x_axis``, ``y_axis``, ``draw_legend`` (``LegendItem`` kinds:
  dot, ring, line, step, bar, faded, tick, diamond), ``diamond_path``,
  ``no_data`` (the "no data" panel an empty series renders), ``color_map``
  (a stable colour per name from the Okabe–Ito palette, readable by
  colour-blind readers), ``jitter`` (a deterministic spread so equal x
  values do not hide each other) and ``sample`` (at most ``MAX_MARKS``
  marks a plot, evenly taken; the caption says so).

Everything that comes from data is escaped (``html.escape``, quotes included).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from html import escape
from typing import Any

import attrs

MAX_MARKS = 4000

# Okabe–Ito palette: distinguishable for colour-blind readers.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
EARLY_COLOR = "#D7191C"
TABLE_COLOR = "#444444"


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


def num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def sample(items: Sequence[Any], limit: int = MAX_MARKS) -> list[Any]:
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


class Svg:
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
        transform = f' transform="rotate({num(rotate)} {num(x)} {num(y)})"' if rotate is not None else ""
        klass = f' class="{cls}"' if cls else ""
        self.add(
            f'<text x="{num(x)}" y="{num(y)}" text-anchor="{anchor}" font-size="{size}" '
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


def frame(svg: Svg, left: float, top: float, right: float, bottom: float) -> None:
    svg.add(f'<rect x="{num(left)}" y="{num(top)}" width="{num(right - left)}" height="{num(bottom - top)}" '
            'fill="#fcfcfd" stroke="#c9ced6"/>')


def y_axis(svg: Svg, scale: Scale, ticks: Sequence[float], fmt: Callable[[float], str],
            left: float, right: float, label: str) -> None:
    for t in ticks:
        y = scale(t)
        svg.add(f'<line x1="{num(left)}" y1="{num(y)}" x2="{num(right)}" y2="{num(y)}" stroke="#e3e6ea"/>')
        svg.add(f'<line x1="{num(left - 5)}" y1="{num(y)}" x2="{num(left)}" y2="{num(y)}" stroke="#555"/>')
        svg.text(left - 8, y + 4, fmt(t), anchor="end", size=11, cls="tick")
    mid = (scale.p0 + scale.p1) / 2
    svg.text(16, mid, label, anchor="middle", size=12, rotate=-90, cls="axis-label")


def x_axis(svg: Svg, scale: Scale, ticks: Sequence[float], fmt: Callable[[float], str],
            top: float, bottom: float, label: str, *, grid: bool = True, label_dy: float = 38) -> None:
    for t in ticks:
        x = scale(t)
        if grid:
            svg.add(f'<line x1="{num(x)}" y1="{num(top)}" x2="{num(x)}" y2="{num(bottom)}" stroke="#eef0f3"/>')
        svg.add(f'<line x1="{num(x)}" y1="{num(bottom)}" x2="{num(x)}" y2="{num(bottom + 5)}" stroke="#555"/>')
        svg.text(x, bottom + 18, fmt(t), anchor="middle", size=11, cls="tick")
    svg.text((scale.p0 + scale.p1) / 2, bottom + label_dy, label, anchor="middle", size=12, cls="axis-label")


@attrs.frozen
class LegendItem:
    label: str
    kind: str  # dot, ring, line, step, bar, faded, tick, diamond
    color: str


def diamond_path(cx: float, cy: float, r: float) -> str:
    """The ``d`` of a diamond (a square on its corner) of half-diagonal ``r`` around (cx, cy)."""
    return (f"M{num(cx)} {num(cy - r)} L{num(cx + r)} {num(cy)} L{num(cx)} {num(cy + r)} "
            f"L{num(cx - r)} {num(cy)} Z")


def draw_legend(svg: Svg, items: Sequence[LegendItem], x: float, y: float) -> None:
    svg.add(f'<g class="legend" transform="translate({num(x)} {num(y)})">')
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
        elif item.kind == "diamond":
            svg.add(f'<path d="{diamond_path(8, cy - 4, 6)}" fill="{c}" fill-opacity="0.85"/>')
        label = item.label if len(item.label) <= 26 else item.label[:25] + "…"
        svg.add(f'<text x="26" y="{cy}" font-size="12" fill="#222">{escape(label)}'
                f"<title>{escape(item.label)}</title></text>")
    svg.add("</g>")


def no_data(plot_id: str, title: str, message: str) -> str:
    svg = Svg(plot_id, title, 160)
    svg.add(f'<rect x="1" y="1" width="{W - 2}" height="158" rx="6" fill="#f6f7f9" stroke="#c9ced6" '
            'stroke-dasharray="6 4"/>')
    svg.text(W / 2, 72, "no data", anchor="middle", size=20, weight="bold", fill="#6b7280", cls="no-data")
    svg.text(W / 2, 100, message, anchor="middle", size=13, fill="#6b7280")
    return svg.render().replace('class="plot"', 'class="plot empty"', 1)


def color_map(names: Iterable[str]) -> dict[str, str]:
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


def jitter(index: int, spread: float = 0.28) -> float:
    """A deterministic offset in [−spread, spread] so equal x values do not hide each other."""
    return ((index * 0.618034) % 1.0 - 0.5) * 2 * spread

