"""The check report in a real headless Chromium, built from a real run.

A scenario drives the ModelBroker (recording with ``ListRecorder``) and the
reference client — concurrent consumers that fail and retry (one group with a
low retry max, so it dead-letters), delayed sends, two orderly consumers with
an unlock on rebalance and a lock takeover after one of them dies, and a
transactional producer with lost END_TRANSACTIONs answered by checks, an
UNKNOWN half that is checked until it is discarded, and a duplicate commit.
The proofs are real z3 runs (all theorems, plus a configuration whose client
lock lifetime outlasts the broker's, so one check FAILS with a timeline), the
conformance section a real (small) conformance run, the audit the reference
trace checker over the recorded trace. ``report.html`` is rendered, opened in
Chromium (``--dump-dom`` and ``--screenshot``), and the DOM and the PNG are
checked. The screenshot is copied to ``build/report-screenshot.png``.

Chromium missing is a failure pointing at ``scripts/ensure-chromium.sh``,
never a skip.
"""

from __future__ import annotations

import datetime
import html.parser
import os
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from rmqspec.cli.report_html import SECTIONS, render_html, render_text
from rmqspec.cli.report_model import (
    FAIL,
    PASS,
    AuditSection,
    CheckRun,
    ConformanceSection,
    ProofRow,
    RunMeta,
    collect_versions,
)
from rmqspec.cli.report_plots import extract_plot_data
from rmqspec.cli.workload import ANALYTICS_MAX, T0, run_workload
from rmqspec.model import ListRecorder, ManualClock, ModelBroker, factory
from rmqspec.properties.brokerconf import BrokerConf
from rmqspec.properties.codes import AuditParams
from rmqspec.properties.configcheck import verify_config
from rmqspec.properties.prover import prove_all
from rmqspec.properties.runner import budget_settings, check_conformance
from rmqspec.traces.checker import check, report_json

REPO = Path(__file__).resolve().parents[2]
ENSURE = "scripts/ensure-chromium.sh"
CONFORMANCE_BUDGET = (10, 30)  # examples, steps
CHROMIUM_TIMEOUT_S = 120
# One pytest-xdist worker for the module: its tests share one recorded check run (``check_run``).
pytestmark = pytest.mark.xdist_group("report-browser")


def run_scenario() -> list[dict[str, Any]]:
    """Drive the model broker with the reference client's workload; return the trace rows."""
    clock = ManualClock(T0)
    rec = ListRecorder()
    run_workload(ModelBroker(clock, recorder=rec), clock, rec)
    return [e.as_row() for e in rec.events]


def build_check_run(trace_dir: Path) -> CheckRun:
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    t = time.monotonic()
    proofs = [ProofRow.from_result(r) for r in prove_all()]
    proofs += [ProofRow.from_result(r) for r in verify_config(BrokerConf(client_lock_ms=70_000))]
    proof_s = time.monotonic() - t

    t = time.monotonic()
    examples, steps = CONFORMANCE_BUDGET
    result = check_conformance(factory, settings=budget_settings(examples, steps), trace_dir=trace_dir)
    conformance = ConformanceSection.from_result(result, steps=steps)
    conformance_s = time.monotonic() - t

    t = time.monotonic()
    rows = run_scenario()
    report = check(rows, AuditParams(group_retry_max=(("G-analytics", ANALYTICS_MAX),)))
    audit_s = time.monotonic() - t
    summary = report_json(report)
    summary.update(wall_time_s=audit_s, events_per_s=len(rows) / audit_s)
    audit = AuditSection.from_summary(summary, summary["violation_rows"] + summary["observation_rows"], rows)

    meta = RunMeta(
        broker="model (rmqspec.model.ModelBroker)",
        profile="rocketmq-4.9",
        budget=f"{examples} examples × {steps} steps; scenario trace of {len(rows):,} events",
        seeds=(),
        versions=collect_versions(),
        started_at=started,
        phase_seconds={"proofs": proof_s, "conformance": conformance_s, "audit": audit_s},
    )
    return CheckRun(meta, proofs, conformance, audit, extract_plot_data(rows))


# ---------------------------------------------------------------------------
# DOM and PNG inspection


class DomSummary(html.parser.HTMLParser):
    """Collects section ids, and per ``svg.plot`` its id and number of ``.mark`` elements."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.plots: dict[str, int] = {}
        self.empty_plots: list[str] = []
        self._plot: str | None = None
        self.title = ""
        self._in_title = False
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "section" and a.get("id"):
            self.sections.append(a["id"] or "")
        if tag == "svg" and "plot" in classes:
            self._plot = a.get("id") or f"anonymous-{len(self.plots)}"
            self.plots[self._plot] = 0
            if "empty" in classes:
                self.empty_plots.append(self._plot)
        elif self._plot is not None and "mark" in classes:
            self.plots[self._plot] += 1
        if tag == "title" and self._plot is None:
            self._in_title = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._plot = None
        if tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        self.text.append(data)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the IHDR chunk; raises if the file is not a PNG."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        f"Chromium is not installed: the report's browser test needs it. Run `{ENSURE}` "
        "(as root on Debian it installs the `chromium` package; otherwise it prints how to install it).",
        pytrace=False,
    )


def run_chromium(binary: str, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="rmqspec-chromium-") as profile:
        cmd = [
            binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", *args,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S, check=False)
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}"
    return proc


# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def check_run(tmp_path_factory: pytest.TempPathFactory) -> CheckRun:
    return build_check_run(tmp_path_factory.mktemp("conformance-traces"))


def test_scenario_feeds_every_plot(check_run: CheckRun) -> None:
    plots = check_run.plots
    groups = {p.group for p in plots.retries}
    assert groups == {"G-orders", "G-analytics", "G-payments"}  # G-payments: the consume-timeout send-back
    assert {p.attempt for p in plots.retries if p.group == "G-payments"} == {1}
    assert max(p.attempt for p in plots.retries) == 6  # flaky-6 failed six times
    assert all(not p.early and p.observed_ms >= p.table_ms for p in plots.retries)
    assert {p.kind for p in plots.delays} == {"delayed", "retry"}
    assert {p.level for p in plots.delays if p.kind == "delayed"} == {1, 2, 3, 4, 5, 6, 7, 9}
    assert all(p.fired_ts is not None and p.fired_ts >= p.due_ts for p in plots.delays)
    reasons = {(s.client_id, s.topic, s.queue_id, s.end_reason) for s in plots.locks}
    assert ("ledger-a", "Ledger", 1, "unlock") in reasons  # released on rebalance
    assert ("ledger-a", "Ledger", 0, "expired") in reasons  # died holding it
    takeover = [s for s in plots.locks if s.client_id == "ledger-b" and s.topic == "Ledger" and s.queue_id == 0]
    expired = next(s for s in plots.locks if s.client_id == "ledger-a" and s.topic == "Ledger" and s.queue_id == 0)
    assert takeover and takeover[0].start > expired.end  # granted only after the old lock expired
    assert any(d.client_id == "ledger-b" for d in plots.denials)
    txn = plots.txn
    assert (txn.halves, txn.committed, txn.rolled_back, txn.discarded) == (5, 2, 2, 1)
    assert txn.duplicate_commits == 1 and txn.unresolved == 0
    assert txn.checks >= 15 and txn.checked_txns == 3


def test_check_run_verdicts_come_from_the_real_phases(check_run: CheckRun) -> None:
    verdicts = {v.phase: v.status for v in check_run.verdicts()}
    assert verdicts == {"proofs": FAIL, "conformance": PASS, "audit": PASS}
    failed = [p.name for p in check_run.proofs if p.failing]
    assert failed == ["OrderlyConsumptionExclusive"]
    assert check_run.exit_code == 1
    assert check_run.audit is not None
    assert check_run.audit.observations["DUPLICATE_COMMIT"] == 1
    assert check_run.audit.examples["DUPLICATE_COMMIT"][0].events  # the events it points at
    text = render_text(check_run)
    assert text.splitlines()[0] == "rmqspec check: FAIL (exit code 1)"
    assert "OrderlyConsumptionExclusive" in text


def test_report_renders_in_headless_chromium(check_run: CheckRun, tmp_path: Path) -> None:
    binary = chromium_binary()
    report = tmp_path / "report.html"
    report.write_text(render_html(check_run), encoding="utf-8")
    url = report.resolve().as_uri()

    dom = run_chromium(binary, "--dump-dom", url).stdout
    parsed = DomSummary()
    parsed.feed(dom)
    assert parsed.title.strip() == "rmqspec check — FAIL"
    assert [sid for sid, _ in SECTIONS] == [s for s in parsed.sections if s in dict(SECTIONS)]
    with_marks = {pid: n for pid, n in parsed.plots.items() if n > 0}
    assert len(with_marks) >= 3, parsed.plots
    assert set(parsed.plots) == {"plot-retry", "plot-delay", "plot-locks", "plot-txn", "plot-timer", "plot-pop"}
    assert parsed.empty_plots == ["plot-timer", "plot-pop"]  # the 4.9 scenario has no timer nor pop (5.x)
    assert with_marks["plot-retry"] == len(check_run.plots.retries)
    assert "OrderlyConsumptionExclusive" in "".join(parsed.text)

    shot = tmp_path / "report-screenshot.png"
    run_chromium(binary, f"--screenshot={shot}", "--window-size=1280,4000", url)
    assert shot.exists()
    assert shot.stat().st_size > 100_000, f"screenshot is only {shot.stat().st_size} bytes"
    assert png_size(shot) == (1280, 4000)
    build = REPO / "build"
    build.mkdir(exist_ok=True)
    shutil.copyfile(shot, build / "report-screenshot.png")
    shutil.copyfile(report, build / "report.html")


def test_ensure_chromium_script_finds_the_installed_browser() -> None:
    chromium_binary()
    script = REPO / ENSURE
    assert os.access(script, os.X_OK), f"{ENSURE} is not executable"
    proc = subprocess.run([str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_ensure_chromium_script_explains_how_to_install_when_it_cannot(tmp_path: Path) -> None:
    """No chromium and no apt-get on PATH: the script prints instructions and exits 1."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("id", "cat"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    bash = shutil.which("bash") or "/bin/bash"
    proc = subprocess.run([bash, str(REPO / ENSURE)], capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": str(bin_dir)})
    assert proc.returncode == 1
    assert "needs Chromium" in proc.stderr
    assert "apt-get install chromium" in proc.stderr
