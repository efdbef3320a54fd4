"""Render a ``CheckRun`` for people: one self-contained HTML page and a terminal table.

Theory of operation
-------------------
``render_html(run)`` returns a complete HTML document: inline CSS, inline SVG
plots (``cli.report_plots``), no scripts and no external resources, so the
file can be mailed, archived as a CI artifact or opened offline. Everything
that comes from data — theorem names, counterexamples, programs, reasons,
trace values — goes through ``esc`` (HTML escaping, quotes included). The
page has a header with the verdict and exit code, a table of contents, and
one ``<section id=…>`` per part: ``summary``, ``proofs``, ``conformance``,
``audit``, ``plots``.

``render_text(run, color=…)`` is the final table ``rmqspec check`` prints on
the terminal: aligned columns, ANSI colour only when asked (the CLI passes
``stream.isatty()``).

Both read only the ``CheckRun``; verdicts and the exit code come from
``report_model`` so the renderings and ``summary.json`` agree.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rmqspec.cli.report_model import (
    FAIL,
    NOT_RUN,
    PASS,
    AuditExample,
    AuditSection,
    CheckRun,
    ConformanceSection,
    PhaseVerdict,
    ProofRow,
)
from rmqspec.cli.report_plots import PlotSvg, render_plots

SECTIONS: tuple[tuple[str, str], ...] = (
    ("summary", "Summary"),
    ("proofs", "Proofs"),
    ("conformance", "Conformance"),
    ("audit", "Trace audit"),
    ("plots", "Plots"),
)

# Columns of an event shown under an audit example, in this order, when present.
EVENT_COLUMNS: tuple[str, ...] = (
    "seq", "ts", "event", "actor", "group", "topic", "queue_id", "queue_offset",
    "msg_key", "reconsume_times", "delay_level", "deliver_ts", "status", "client_id", "txn_id",
)

EVENT_HEADINGS = {"queue_id": "q", "queue_offset": "offset", "reconsume_times": "r",
                  "delay_level": "level", "deliver_ts": "due ts", "client_id": "client"}


def esc(value: Any) -> str:
    """HTML-escape ``value`` (``None`` → empty), quotes included: safe in text and attributes."""
    return "" if value is None else html.escape(str(value), quote=True)


def _secs(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:,.1f} s"


def _badge(status: str) -> str:
    cls = {"PASS": "pass", "PROVED": "pass", "FAIL": "fail", "FAILED": "fail", "UNKNOWN": "fail",
           "WARNING": "warn", "NOT RUN": "muted", "INFO": "muted"}.get(status, "muted")
    return f'<span class="badge {cls}">{esc(status)}</span>'


def _table(
    head: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "", row_classes: Sequence[str] = ()
) -> str:
    """A table from pre-escaped cell HTML; ``row_classes[i]`` classes row ``i``."""
    klass = f' class="{cls}"' if cls else ""
    out = [f"<table{klass}><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        rc = row_classes[i] if i < len(row_classes) and row_classes[i] else ""
        tr = f'<tr class="{rc}">' if rc else "<tr>"
        out.append(tr + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


CSS = """
:root { --fg:#1f2328; --muted:#656d76; --line:#d0d7de; --bg:#ffffff; --soft:#f6f8fa;
        --pass:#1a7f37; --pass-bg:#dafbe1; --fail:#cf222e; --fail-bg:#ffebe9;
        --warn:#9a6700; --warn-bg:#fff8c5; --accent:#0969da; }
* { box-sizing: border-box; }
html { font-size: 16px; }
body { margin: 0; color: var(--fg); background: var(--bg);
       font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; line-height: 1.5; }
header.verdict { padding: 22px 40px; display: flex; align-items: center; gap: 24px;
                 border-bottom: 4px solid var(--line); }
header.verdict.pass { background: var(--pass-bg); border-color: var(--pass); }
header.verdict.fail { background: var(--fail-bg); border-color: var(--fail); }
header .big { font-size: 2.2rem; font-weight: 800; letter-spacing: .04em; padding: 6px 22px;
              border-radius: 10px; color: white; }
header.pass .big { background: var(--pass); }
header.fail .big { background: var(--fail); }
header h1 { margin: 0; font-size: 1.6rem; }
header p { margin: 4px 0 0; color: var(--muted); }
.layout { display: grid; grid-template-columns: 210px minmax(0, 1fr); gap: 32px; max-width: 1280px;
          margin: 0 auto; padding: 24px 40px 60px; }
nav.toc { position: sticky; top: 16px; align-self: start; font-size: .95rem; }
nav.toc h2 { font-size: .8rem; text-transform: uppercase; letter-spacing: .08em; color: var(--muted);
             margin: 0 0 8px; }
nav.toc ol { margin: 0; padding-left: 20px; }
nav.toc li { margin: 4px 0; }
nav.toc a { color: var(--accent); text-decoration: none; }
main { min-width: 0; }
main section { margin-bottom: 44px; }
main h2 { font-size: 1.45rem; border-bottom: 1px solid var(--line); padding-bottom: 6px; margin: 0 0 14px; }
main h3 { font-size: 1.1rem; margin: 22px 0 8px; }
p.lead { color: var(--muted); margin-top: 0; }
table { border-collapse: collapse; width: 100%; margin: 8px 0 16px; font-size: .92rem; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
table.proofs td { padding: 4px 10px; }
table.proofs td:first-child code { white-space: nowrap; }
table.not-judged td { overflow-wrap: anywhere; }
div.scroll { overflow-x: auto; }
table.expected-actual td:first-child { width: 110px; color: var(--muted); }
table.events { font-size: .8rem; }
table.events td { white-space: nowrap; padding: 3px 8px;
                  font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; }
.grid-counts div.hit { color: var(--fail); font-weight: 700; background: var(--fail-bg); }
.grid-counts .tag { color: var(--muted); font-size: .75rem; font-style: italic; margin-left: auto; margin-right: 8px; }
.grid-counts.codes { columns: 3 240px; }
table.proofs span.kind { color: var(--muted); font-size: .78rem; }
table.proofs td:nth-child(3) { white-space: nowrap; text-align: right; font-variant-numeric: tabular-nums; }
span.detail { color: var(--muted); font-size: .85rem; overflow-wrap: anywhere; }
.failed-proof { border-left: 4px solid var(--fail); padding: 2px 16px; margin: 16px 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.hit td { background: #fff5f5; }
tr.miss td { background: #fff5f5; color: var(--fail); }
.badge { display: inline-block; white-space: nowrap; padding: 1px 9px; border-radius: 999px;
         font-size: .8rem; font-weight: 700; letter-spacing: .03em; }
.badge.pass { background: var(--pass-bg); color: var(--pass); }
.badge.fail { background: var(--fail-bg); color: var(--fail); }
.badge.warn { background: var(--warn-bg); color: var(--warn); }
.badge.muted { background: var(--soft); color: var(--muted); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 18px; margin: 0 0 16px; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; font-weight: 500; }
pre { background: #0d1117; color: #e6edf3; padding: 14px 16px; border-radius: 8px; overflow-x: auto;
      font-size: .8rem; line-height: 1.45; font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; }
code { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: .9em; }
.grid-counts { columns: 3 220px; column-gap: 28px; font-size: .9rem; margin-bottom: 16px; }
.grid-counts code { overflow-wrap: anywhere; }
.grid-counts div { display: flex; gap: 8px; justify-content: space-between; border-bottom: 1px dotted var(--line);
                   break-inside: avoid; padding: 2px 0; }
.example { border-left: 4px solid var(--fail); background: #fffafa; padding: 8px 14px; margin: 10px 0; }
.example.obs { border-color: var(--warn); background: #fffdf3; }
figure { margin: 0 0 34px; padding: 16px; border: 1px solid var(--line); border-radius: 10px; }
figure h3 { margin-top: 0; }
figcaption { color: var(--muted); font-size: .92rem; margin-top: 8px; max-width: 900px; }
svg.plot { display: block; max-width: 100%; height: auto; }
.note { color: var(--muted); font-style: italic; }
"""


# ---------------------------------------------------------------------------
# sections


def _summary(run: CheckRun) -> str:
    m = run.meta
    facts = [
        ("broker under test", m.broker), ("profile", m.profile), ("budget", m.budget or "—"),
        ("seeds", ", ".join(str(s) for s in m.seeds) or "derandomized"),
        ("started", m.started_at or "—"), ("wall time", _secs(m.wall_seconds)),
    ]
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
    verdict_rows = [
        (esc(v.phase), _badge(v.status), esc(v.summary), _secs(v.seconds))
        for v in run.verdicts()
    ]
    if "report" in m.phase_seconds:
        verdict_rows.append(("report", _badge("INFO"), "this page", _secs(m.phase_seconds["report"])))
    versions = ", ".join(f"{esc(k)} <code>{esc(v)}</code>" for k, v in m.versions.items()) or "—"
    return (
        '<section id="summary"><h2>Summary</h2>'
        '<p class="lead">What was checked, and the verdict of each phase. The run fails (exit code 1) '
        "when a proof fails or stays unknown, the conformance machine finds a counterexample, or the "
        "audit counts a violation; observations never fail a run.</p>"
        f'<dl class="facts">{dl}<dt>versions</dt><dd>{versions}</dd></dl>'
        "<h3>Verdict per phase</h3>"
        + _table(("phase", "verdict", "result", "time"), verdict_rows, "verdicts")
        + "</section>"
    )


def _short(text: str, limit: int = 150) -> str:
    """Escaped ``text`` cut to ``limit`` characters; the full text stays in a tooltip."""
    if len(text) <= limit:
        return esc(text)
    return f'<span title="{esc(text)}">{esc(text[: limit - 1])}…</span>'


def _proofs(proofs: Sequence[ProofRow]) -> str:
    if not proofs:
        return ('<section id="proofs"><h2>Proofs</h2><p class="note">The z3 proofs did not run.</p>'
                "</section>")
    counts: dict[str, int] = {}
    for p in proofs:
        counts[p.status] = counts.get(p.status, 0) + 1
    tally = ", ".join(f"{n} {esc(status)}" for status, n in sorted(counts.items()))
    rows, classes = [], []
    for p in proofs:
        title = f' title="{esc(p.statement)}"' if p.statement else ""
        kind = esc(p.kind or "—") + (f" · {esc(p.code)}" if p.code else "")
        rows.append((f'<code{title}>{esc(p.name)}</code><br><span class="kind">{kind}</span>', _badge(p.status),
                     f"{_secs(p.seconds)}", f'<span class="detail">{_short(p.detail, 120)}</span>'))
        classes.append("hit" if p.failing else "")
    out = ['<section id="proofs"><h2>Proofs</h2>',
           '<p class="lead">Each theorem is proved by z3 for all parameter values (inductive invariants, '
           "reachability witnesses, well-formed transition tables), and each configuration check for the "
           f"configuration given, or refuted with a counterexample. {tally}. Hover a name for its statement.</p>",
           _table(("theorem · kind · code", "status", "time", "detail"), rows, "proofs", classes)]
    for p in proofs:
        if not p.failing:
            continue
        out.append(f'<div class="failed-proof"><h3>{_badge(p.status)} <code>{esc(p.name)}</code></h3>')
        if p.statement:
            out.append(f"<p>{esc(p.statement)}</p>")
        if p.detail:
            out.append(f'<p class="note">{esc(p.detail)}</p>')
        if p.counterexample:
            out.append(f'<pre class="counterexample">{esc(chr(10).join(p.counterexample))}</pre>')
        out.append("</div>")
    out.append("</section>")
    return "\n".join(out)


def _counts_grid(
    counts: Mapping[str, int], *, ordered: bool = False, hits: bool = False,
    notes: Mapping[str, str] | None = None, cls: str = "",
) -> str:
    """Name → count cells in columns; ``hits`` marks non-zero cells, ``notes`` adds a muted tag."""
    items = list(counts.items()) if ordered else sorted(counts.items())
    cells = []
    for k, v in items:
        klass = ' class="hit"' if hits and v else ""
        note = f' <span class="tag">{esc(notes[k])}</span>' if notes and k in notes and not v else ""
        cells.append(f"<div{klass}><code>{esc(k)}</code>{note}<span>{v:,}</span></div>")
    extra = f" {cls}" if cls else ""
    return f'<div class="grid-counts{extra}">{"".join(cells)}</div>'


def _conformance(c: ConformanceSection | None) -> str:
    if c is None:
        return ('<section id="conformance"><h2>Conformance</h2>'
                '<p class="note">The conformance machine did not run.</p></section>')
    facts = [("result", _badge(c.status)), ("examples", f"{c.examples:,}"), ("steps per example", str(c.steps)),
             ("examples/s", f"{c.examples_per_s:,.1f}"), ("time", _secs(c.seconds)),
             ("generation", _secs(c.generate_seconds)), ("shrinking", _secs(c.shrink_seconds))]
    out = ['<section id="conformance"><h2>Conformance</h2>',
           '<p class="lead">The conformance state machine drives the broker under test and the model in '
           "lockstep, compares every observable result and checks every invariant on the ghost history.</p>",
           '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"]
    if c.status == FAIL:
        out.append(f"<h3>Violated: <code>{esc(c.violated or 'unknown')}</code></h3>")
        if c.expected is not None or c.actual is not None:
            out.append(_table(("", "value"), [("expected", f"<code>{esc(c.expected)}</code>"),
                                              ("actual", f"<code>{esc(c.actual)}</code>")], "expected-actual"))
        if c.failure:
            out.append(f'<pre class="failure">{esc(c.failure.strip())}</pre>')
        if c.counterexample_program:
            out.append("<h3>Shrunk counterexample (replayable program)</h3>")
            out.append('<p class="note">Replay with <code>rmqspec.properties.program.replay(PROGRAM, factory)'
                       "</code>.</p>")
            out.append(f'<pre class="program">{esc(c.counterexample_program)}</pre>')
        for i, f in enumerate(c.failures[1:], 2):
            out.append(f"<h3>Failure {i} of {len(c.failures)}: <code>{esc(f.get('signature'))}</code></h3>")
            out.append(f'<pre class="failure">{esc(str(f.get("message", "")).strip())}</pre>')
            out.append(f'<pre class="program">{esc(f.get("program"))}</pre>')
    if c.coverage:
        transitions = list(c.coverage.get("transitions", ()))
        out.append("<h3>Lifecycle coverage</h3>")
        out.append(f'<p class="note">{c.coverage.get("reached")} of {c.coverage.get("total")} transitions of the '
                   "lifecycle tables (<code>model/lifecycle.py</code>, the rows the z3 theorems prove) were taken "
                   "by the broker during the run.</p>")
        out.append(_table(("transition", "count"),
                          [(f"<code>{esc(t['transition'])}</code>", f"{int(t['count']):,}") for t in transitions],
                          "coverage", ["miss" if not t["count"] else "" for t in transitions]))
    if c.rule_counts:
        out.append("<h3>Rules run</h3>")
        out.append(_counts_grid(c.rule_counts))
    if c.observations:
        out.append("<h3>Observations</h3>")
        out.append(_counts_grid(c.observations))
    out.append("</section>")
    return "\n".join(out)


def _event_table(events: Sequence[Mapping[str, Any]]) -> str:
    if not events:
        return ""
    cols = [c for c in EVENT_COLUMNS if any(e.get(c) is not None for e in events)]
    if "txn_id" in cols and all(e.get("txn_id") in (None, e.get("msg_key")) for e in events):
        cols.remove("txn_id")  # txn_id is the half's msg_key (SPEC §8): say it once
    rows = [[esc(e.get(c)) for c in cols] for e in events]
    head = [f'<span title="{esc(c)}">{esc(EVENT_HEADINGS.get(c, c))}</span>' for c in cols]
    return '<div class="scroll">' + _table(head, rows, "events") + "</div>"


def _example(ex: AuditExample, observation: bool) -> str:
    keys = ", ".join(f"{esc(k)}=<code>{esc(v)}</code>" for k, v in ex.keys.items())
    cls = "example obs" if observation else "example"
    return (
        f'<div class="{cls}"><div><strong>{esc(ex.reason) or "(no reason given)"}</strong></div>'
        f'<div class="note">seqs {esc(", ".join(str(s) for s in ex.seqs))}'
        + (f" · {keys}" if keys else "")
        + "</div>"
        + _event_table(ex.events)
        + "</div>"
    )


def _audit(a: AuditSection | None) -> str:
    if a is None:
        return ('<section id="audit"><h2>Trace audit</h2>'
                '<p class="note">The trace audit did not run.</p></section>')
    facts = [("events read", f"{a.events_read:,}"), ("rows rejected", f"{a.rows_rejected:,}"),
             ("violations", f"{a.violation_total:,}"), ("observations", f"{a.observation_total:,}"),
             ("time", _secs(a.wall_time_s) if a.wall_time_s else "—"),
             ("events/s", f"{a.events_per_s:,.0f}" if a.events_per_s else "—")]
    out = ['<section id="audit"><h2>Trace audit</h2>',
           '<p class="lead">The recorded traces audited against every SPEC §8.1 rule: a count per '
           "violation code, a few example rows with the events they point at, the rules that could not be "
           "judged and why, and the observations (counted, never failures).</p>",
           '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{esc(v)}</dd>" for k, v in facts) + "</dl>"]
    out.append("<h3>Violations per code</h3>")
    out.append(_counts_grid(a.violations, ordered=True, hits=True,
                            notes=dict.fromkeys(a.not_judged, "not judged"), cls="codes violations"))
    out.append("<h3>Observations per code</h3>")
    out.append(_counts_grid(a.observations, ordered=True, cls="codes observations"))
    found = [(code, exs) for code, exs in a.examples.items() if exs]
    if found:
        out.append("<h3>Examples</h3>")
        for code, exs in found:
            observation = code in a.observations
            kind = "observation" if observation else "violation"
            total = (a.observations if observation else a.violations).get(code, len(exs))
            out.append(f"<h4><code>{esc(code)}</code> — {kind}, {len(exs)} of {total:,} shown</h4>")
            out.extend(_example(ex, observation) for ex in exs)
    if a.not_judged:
        out.append("<h3>Not judged</h3>")
        out.append(_table(("rule", "why"), [(f"<code>{esc(k)}</code>", esc(v)) for k, v in a.not_judged.items()],
                          "not-judged"))
    out.append("</section>")
    return "\n".join(out)


def _figure(plot: PlotSvg) -> str:
    fid = "fig-" + plot.plot_id.removeprefix("plot-")
    return (f'<figure id="{esc(fid)}"><h3>{esc(plot.title)}</h3>\n{plot.svg}\n'
            f"<figcaption>{esc(plot.caption)}</figcaption></figure>")


def _plots(run: CheckRun) -> str:
    plots = render_plots(run.plots)
    return (
        '<section id="plots"><h2>Plots</h2>'
        '<p class="lead">Drawn from the recorded trace events. Hover a mark for its details and the trace '
        "seqs it comes from.</p>\n" + "\n".join(_figure(p) for p in plots) + "</section>"
    )


def render_html(run: CheckRun) -> str:
    """One self-contained HTML page for ``run``."""
    verdict = run.verdict
    cls = "pass" if verdict == PASS else "fail"
    m = run.meta
    sub = (f"exit code {run.exit_code} · broker <strong>{esc(m.broker)}</strong> · profile {esc(m.profile)}"
           + (f" · started {esc(m.started_at)}" if m.started_at else ""))
    phases = " · ".join(f"{esc(v.phase)} {esc(v.status)}" for v in run.verdicts())
    toc = "".join(f'<li><a href="#{sid}">{esc(title)}</a></li>' for sid, title in SECTIONS)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>rmqspec check — {esc(verdict)}</title><style>{CSS}</style></head>\n<body>\n"
        f'<header class="verdict {cls}" id="verdict"><div class="big">{esc(verdict)}</div>'
        f"<div><h1>rmqspec check</h1><p>{sub}</p><p>{phases}</p></div></header>\n"
        '<div class="layout">'
        f'<nav class="toc" aria-label="Contents"><h2>Contents</h2><ol>{toc}</ol></nav>\n<main>\n'
        + _summary(run) + "\n" + _proofs(run.proofs) + "\n" + _conformance(run.conformance) + "\n"
        + _audit(run.audit) + "\n" + _plots(run) + "\n</main></div>\n</body></html>\n"
    )


# ---------------------------------------------------------------------------
# terminal

_ANSI = {PASS: "\033[1;32m", FAIL: "\033[1;31m", NOT_RUN: "\033[2m"}
_RESET = "\033[0m"


def _paint(text: str, status: str, color: bool) -> str:
    return f"{_ANSI[status]}{text}{_RESET}" if color and status in _ANSI else text


def render_text(run: CheckRun, *, color: bool = False) -> str:
    """The final table ``rmqspec check`` prints: verdict per phase, then what failed."""
    verdicts: tuple[PhaseVerdict, ...] = run.verdicts()
    m = run.meta
    lines = [
        _paint(f"rmqspec check: {run.verdict} (exit code {run.exit_code})", run.verdict, color),
        f"broker {m.broker}  profile {m.profile}"
        + (f"  budget {m.budget}" if m.budget else "")
        + (f"  seeds {','.join(map(str, m.seeds))}" if m.seeds else ""),
        "",
    ]
    w_phase = max(len("phase"), *(len(v.phase) for v in verdicts))
    w_status = max(len("verdict"), *(len(v.status) for v in verdicts))
    times = [_secs(v.seconds) for v in verdicts]
    w_time = max(len("time"), *(len(t) for t in times))
    lines.append(f"{'phase':<{w_phase}}  {'verdict':<{w_status}}  {'time':>{w_time}}  result")
    for v, t in zip(verdicts, times):
        status = _paint(f"{v.status:<{w_status}}", v.status, color)
        lines.append(f"{v.phase:<{w_phase}}  {status}  {t:>{w_time}}  {v.summary}")
    failing = [p for p in run.proofs if p.failing]
    if failing:
        lines.append("")
        lines.append("proofs not proved:")
        width = max(len(p.name) for p in failing)
        lines.extend(f"  {p.name:<{width}}  {p.status:<8} {p.detail}".rstrip() for p in failing)
    c = run.conformance
    if c is not None and c.status == FAIL:
        lines.append("")
        lines.append(f"conformance counterexample: {c.violated}")
        if c.expected is not None or c.actual is not None:
            lines.append(f"  expected {c.expected}")
            lines.append(f"  actual   {c.actual}")
        if c.counterexample_program:
            lines.extend("  " + line for line in c.counterexample_program.splitlines())
    a = run.audit
    if a is not None and a.violation_total:
        lines.append("")
        lines.append("audit violations:")
        found = [(code, n) for code, n in a.violations.items() if n]
        width = max(len(code) for code, _ in found)
        for code, n in found:
            lines.append(f"  {code:<{width}}  {n:>8,}")
            for ex in a.examples.get(code, ())[:1]:
                lines.append(f"  {'':<{width}}  e.g. seqs {list(ex.seqs)}: {ex.reason}")
    return "\n".join(lines)
