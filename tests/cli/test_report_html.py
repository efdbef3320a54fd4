"""The check report's data model, HTML page (escaping, sections) and terminal table."""

from __future__ import annotations

import html.parser
import json

import attrs
import pytest

from rmqspec.cli.report_html import SECTIONS, esc, render_html, render_text
from rmqspec.cli.report_model import (
    FAIL,
    NOT_RUN,
    PASS,
    AuditExample,
    AuditSection,
    CheckRun,
    ConformanceSection,
    PlotData,
    ProofRow,
    RunMeta,
    collect_versions,
)
from rmqspec.properties.codes import OBSERVATION_CODES, VIOLATION_CODES
from rmqspec.properties.prover import prove
from rmqspec.properties.runner import ConformanceResult
from rmqspec.properties.theorems import THEOREMS

EVIL = "<script>alert('x')</script>"
META = RunMeta(broker="model", profile="rocketmq-4.9", budget="ci", seeds=(7,),
               versions={"python": "3.11"}, started_at="2024-01-01T00:00:00Z",
               phase_seconds={"proofs": 0.5, "conformance": 2.0, "audit": 3.0})


def zero_counts(codes: tuple[str, ...], **hits: int) -> dict[str, int]:
    out = dict.fromkeys(codes, 0)
    out.update(hits)
    return out


def audit(violations: dict[str, int] | None = None, observations: dict[str, int] | None = None,
          **kw: object) -> AuditSection:
    return AuditSection(zero_counts(VIOLATION_CODES, **(violations or {})),
                        zero_counts(OBSERVATION_CODES, **(observations or {})), events_read=100, **kw)


def proof(status: str = "PROVED", name: str = "LockExclusiveProperty", **kw: object) -> ProofRow:
    return ProofRow(name=name, code="LOCK_OVERLAP", status=status, seconds=0.01, **kw)


def conformance(status: str = PASS, **kw: object) -> ConformanceSection:
    return ConformanceSection(status=status, examples=40, steps=30, seconds=4.0, **kw)


class Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.sections: list[str] = []
        self.attrs_seen: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs_seen.extend(attrs)
        if tag == "section":
            self.sections.append(dict(attrs).get("id") or "")


# ---------------------------------------------------------------------------
# exit code and verdicts


@pytest.mark.parametrize(
    ("run", "code"),
    [
        (CheckRun(META, [proof()], conformance(), audit()), 0),
        (CheckRun(META, [proof(), proof("FAILED")], conformance(), audit()), 1),
        (CheckRun(META, [proof("UNKNOWN")], conformance(), audit()), 1),  # as `rmqspec prove`
        (CheckRun(META, [proof("INFO"), proof("WARNING")], conformance(), audit()), 0),
        (CheckRun(META, [proof()], conformance(FAIL, violated="X"), audit()), 1),
        (CheckRun(META, [proof()], conformance(), audit({"LOST": 1})), 1),
        (CheckRun(META, [proof()], conformance(), audit(observations={"DUPLICATED": 9})), 0),
        (CheckRun(META), 0),  # nothing ran: nothing failed
    ],
)
def test_exit_code(run: CheckRun, code: int) -> None:
    assert run.exit_code == code
    assert run.verdict == (FAIL if code else PASS)
    assert run.to_json()["exit_code"] == code


def test_phases_not_run_are_reported_as_such() -> None:
    verdicts = CheckRun(META).verdicts()
    assert [(v.phase, v.status) for v in verdicts] == [
        ("proofs", NOT_RUN), ("conformance", NOT_RUN), ("audit", NOT_RUN),
    ]
    page = render_html(CheckRun(META))
    assert "The z3 proofs did not run." in page and "The trace audit did not run." in page


def test_conformance_status_is_validated() -> None:
    with pytest.raises(ValueError, match="PASS or FAIL"):
        conformance("MAYBE")


# ---------------------------------------------------------------------------
# from the other phases' data


def test_proof_row_from_a_real_prover_result() -> None:
    theorem = next(t for t in THEOREMS if t.name == "LockExclusiveProperty")
    row = ProofRow.from_result(prove(theorem))
    assert (row.name, row.code, row.status, row.kind) == ("LockExclusiveProperty", "LOCK_OVERLAP", "PROVED", "always")
    assert row.statement and row.counterexample == () and not row.failing


def test_conformance_section_parses_the_failure_message() -> None:
    result = ConformanceResult(
        passed=False, examples=12, seconds=3.0,
        failure="invariant RetryNotEarlyProperty violated: RETRY_EARLY at step 4 (event 17): retry "
                "delivered early; expected deliver_ts >= 1010000, actual 1005000",
        coverage={"send_plain": 3},
        observations={"DuplicatedObservation": 1},
    )
    section = ConformanceSection.from_result(result, steps=30)
    assert section.status == FAIL
    assert section.violated == "RetryNotEarlyProperty"
    assert (section.expected, section.actual) == ("deliver_ts >= 1010000", "1005000")
    assert section.counterexample_program is None  # no program in this result
    assert section.examples_per_s == 4.0
    passed = ConformanceSection.from_result(attrs.evolve(result, passed=True, failure=None), steps=30)
    assert (passed.status, passed.violated, passed.expected) == (PASS, None, None)


def test_audit_section_keeps_a_few_examples_per_code_with_their_events() -> None:
    summary = {"violations": zero_counts(VIOLATION_CODES, LOST=5), "observations": zero_counts(OBSERVATION_CODES),
               "events_read": 40, "rows_rejected": 1, "not_judged": {"TXN_UNRESOLVED": "no drain event"},
               "wall_time_s": 2.0, "events_per_s": 20.0}
    rows = [{"code": "LOST", "seqs": [i, 39], "group": "G", "msg_key": f"K{i}", "topic": None,
             "reason": f"K{i} lost"} for i in range(5)]
    events = [{"seq": i, "ts": i * 10, "event": "send" if i < 39 else "drain"} for i in range(40)]
    section = AuditSection.from_summary(summary, rows, iter(events), per_code=2)
    assert [e.seqs for e in section.examples["LOST"]] == [(0, 39), (1, 39)]
    first = section.examples["LOST"][0]
    assert first.keys == {"group": "G", "msg_key": "K0"}
    assert [e["event"] for e in first.events] == ["send", "drain"]
    assert (section.events_read, section.rows_rejected, section.violation_total) == (40, 1, 5)
    plain = AuditSection(summary["violations"], summary["observations"],
                         examples={"LOST": [{"seqs": [3], "reason": "r", "events": [{"seq": 3}]}]})
    assert plain.examples["LOST"][0] == AuditExample("LOST", (3,), "r", {}, ({"seq": 3},))


def test_summary_json_is_json() -> None:
    run = CheckRun(META, [proof()], conformance(), audit(), PlotData())
    body = json.loads(json.dumps(run.to_json()))
    assert body["verdict"] == PASS and body["meta"]["seeds"] == [7]
    assert [p["phase"] for p in body["phases"]] == ["proofs", "conformance", "audit"]
    assert body["meta"]["wall_seconds"] == 5.5
    assert set(collect_versions()) == {"rmqspec", "python", "pyspark", "z3", "hypothesis"}


# ---------------------------------------------------------------------------
# HTML


def evil_run() -> CheckRun:
    meta = attrs.evolve(META, broker=EVIL, profile="p&q")
    return CheckRun(
        meta,
        [proof("FAILED", name=EVIL, detail="a < b & c", statement='say "hi"',
               counterexample=("  1. </pre><script>bad()</script>", "  2. ok"))],
        conformance(FAIL, violated=EVIL, expected="<1>", actual="<2>", failure=f"invariant {EVIL} violated",
                    counterexample_program="state.send(Message('T', b'</pre>'))\n<img src=x onerror=alert(1)>",
                    rule_counts={"<rule>": 1}),
        audit({"LOST": 1}, not_judged={"LOST": "<no drain>"},
              examples={"LOST": (AuditExample("LOST", (1, 2), "lost <b>", {"msg_key": "<k>"},
                                              ({"seq": 1, "event": "send", "msg_key": "<k>"},)),)}),
    )


def test_everything_from_data_is_escaped() -> None:
    page = render_html(evil_run())
    parser = Tags()
    parser.feed(page)
    assert "script" not in parser.tags and "img" not in parser.tags
    assert not any(name.startswith("on") for name, _ in parser.attrs_seen)
    assert "<script>" not in page and "<img" not in page and "</pre><script>" not in page
    assert esc(EVIL) in page
    assert "a &lt; b &amp; c" in page and "&lt;no drain&gt;" in page and "lost &lt;b&gt;" in page
    assert "p&amp;q" in page and "&lt;rule&gt;" in page


def test_esc() -> None:
    assert esc(None) == ""
    assert esc("<a href=\"x\">'&'") == "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;&#x27;"
    assert esc(3) == "3"


def test_page_is_self_contained_with_every_section_and_the_verdict_first() -> None:
    page = render_html(evil_run())
    parser = Tags()
    parser.feed(page)
    assert parser.sections == [sid for sid, _ in SECTIONS]
    assert "link" not in parser.tags and "script" not in parser.tags
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    assert page.index('class="verdict fail"') < page.index('id="summary"')
    assert "exit code 1" in page
    for sid, title in SECTIONS:
        assert f'<a href="#{sid}">{title}</a>' in page
    assert page.count('class="plot empty"') == 6  # no trace data → six "no data" panels


def test_render_text_aligns_and_colors_only_when_asked() -> None:
    run = CheckRun(META, [proof(), proof("FAILED", name="Broken", detail="why")], conformance(),
                   audit({"LOST": 2}, examples={"LOST": [{"seqs": [4, 9], "reason": "K lost"}]}))
    text = render_text(run)
    lines = text.splitlines()
    assert lines[0] == "rmqspec check: FAIL (exit code 1)"
    assert "\033[" not in text
    start = lines.index(next(line for line in lines if line.startswith("phase ")))
    table = lines[start : start + 4]
    assert [line.split()[0] for line in table] == ["phase", "proofs", "conformance", "audit"]
    assert len({line.index(line.split()[1]) for line in table}) == 1  # the verdict column lines up
    assert "  Broken  FAILED   why" in text
    assert "LOST" in text and "e.g. seqs [4, 9]: K lost" in text
    colored = render_text(run, color=True)
    assert "\033[1;31m" in colored and "\033[1;32m" in colored


def test_conformance_coverage_and_every_failure_reach_the_report() -> None:
    """issue 14: the lifecycle coverage (every row, zeros marked), generation and shrinking times
    and every distinct failure with its own program are in summary.json, the HTML and the table."""
    from rmqspec.properties.coverage import ALL_TRANSITIONS, CoverageReport
    from rmqspec.properties.program import Op
    from rmqspec.properties.runner import FailureReport

    report = CoverageReport.of({t: 2 for t in ALL_TRANSITIONS[1:]}, {"init": 1, "pull:FOUND": 4}, {"init"})
    first = FailureReport("lockstep:send", "lockstep mismatch in send(T0/0): queue_offset", (Op.of("init"),),
                          replays=9, seconds=0.5, shrunk=True)
    second = FailureReport("raised:TypeError", "candidate raised TypeError in flush()", (Op.of("flush"),))
    result = ConformanceResult(passed=False, examples=3, seconds=2.0, failure=first.message, program=first.program,
                               failures=(first, second), generate_seconds=1.5, shrink_seconds=0.5,
                               coverage_report=report)
    section = ConformanceSection.from_result(result, steps=30)
    body = json.loads(json.dumps(CheckRun(META, [proof()], section, audit(), PlotData()).to_json()))
    conf = body["conformance"]
    assert conf["coverage"]["reached"] == len(ALL_TRANSITIONS) - 1 and conf["coverage"]["results"] == {"pull:FOUND": 4}
    assert [t["count"] for t in conf["coverage"]["transitions"]][:2] == [0, 2]
    assert (conf["generate_seconds"], conf["shrink_seconds"]) == (1.5, 0.5)
    assert [f["signature"] for f in conf["failures"]] == ["lockstep:send", "raised:TypeError"]
    page = render_html(CheckRun(META, [proof()], section, audit(), PlotData()))
    assert "Lifecycle coverage" in page and esc(ALL_TRANSITIONS[0]) in page and 'class="miss"' in page
    assert "Failure 2 of 2" in page and "candidate raised TypeError" in page
    text = render_text(CheckRun(META, [proof()], section, audit(), PlotData()))
    assert f"{len(ALL_TRANSITIONS) - 1}/{len(ALL_TRANSITIONS)} lifecycle transitions" in text
