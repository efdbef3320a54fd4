"""The pop revive lateness plot (cli/report_plots_pop.py): extraction from hand-built rows, the summary line,
the SVG, and the model broker's recorded pop traces end to end (honest: nothing early; a broker reviving
before the invisible time ends: red marks)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.cli.report_model import PlotData
from rmqspec.cli.report_plots import extract_plot_data, extract_pops, render_plots
from rmqspec.cli.report_plots_pop import render_pop_plot, summarize

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "traces"))
from pop_runs import model_pop_trace

SVG = "{http://www.w3.org/2000/svg}"


def _h(pop_ts: int, inv: int, off: int = 0) -> str:
    return f"0 {pop_ts} {inv} 0 0 broker-a 0 {off}"


def _rows() -> list[dict[str, Any]]:
    """K1: popped, changed to a later end, revived 2.5 s after it; K2: popped and acked in time; K3: popped,
    revived early (the broker's row); K4: popped, its revive seen through the copy; K5: popped, pending."""
    rows: list[dict[str, Any]] = []

    def add(event: str, ts: int, **fields: Any) -> None:
        rows.append({"seq": len(rows), "ts": ts, "event": event, "group": "G", "topic": "T", **fields})

    add("pop", 1000, msg_key="K1", status="CONCURRENT", deliver_ts=4000, detail={"handle": _h(1000, 3000)})
    add("change_invisible", 1500, deliver_ts=9500, detail={"handle": _h(1000, 3000), "new_handle": _h(1500, 8000)})
    add("pop", 1100, msg_key="K2", status="CONCURRENT", deliver_ts=4100, detail={"handle": _h(1100, 3000, 1)})
    add("ack", 1200, status="ACKED", detail={"handle": _h(1100, 3000, 1)})
    add("pop", 1300, msg_key="K3", status="CONCURRENT", deliver_ts=4300, detail={"handle": _h(1300, 3000, 2)})
    add("revive", 3800, msg_key="K3", reconsume_times=1)
    add("pop", 1400, msg_key="K4", status="CONCURRENT", deliver_ts=4400, detail={"handle": _h(1400, 3000, 3)})
    add("revive", 7400, msg_key="K4", reconsume_times=1, detail={"observed": True})
    add("revive", 12_000, msg_key="K1", reconsume_times=1)
    add("pop", 1500, msg_key="K5", status="CONCURRENT", deliver_ts=4500, detail={"handle": _h(1500, 3000, 4)})
    add("pop", 1600, msg_key="K6", status="ORDERLY", deliver_ts=4600, detail={"handle": _h(1600, 3000, 5)})
    return rows


def test_revives_are_measured_from_the_live_hand_outs_end_of_invisible_time():
    got = extract_pops(_rows())
    by_key = {r.msg_key: r for r in got.revives}
    assert set(by_key) == {"K1", "K3", "K4"}
    assert by_key["K1"].due_ts == 9500 and by_key["K1"].lateness_ms == 2500  # the change moved the end
    assert by_key["K3"].early and by_key["K3"].lateness_ms == -500
    assert by_key["K4"].observed and by_key["K4"].lateness_ms == 3000
    assert (got.acked, got.pending) == (1, 1)  # K2 acked in time; K5 pending (K6 is orderly: not revived)


def test_a_crash_ends_the_live_hand_outs_and_missing_values_only_remove_points():
    rows = _rows()
    crashed = [*rows[:8], {"seq": 99, "ts": 9000, "event": "crash", "status": "kill"}, *rows[8:]]
    assert {r.msg_key for r in extract_pops(crashed).revives} == {"K3", "K4"}  # K1 was live at the crash
    for i, row in enumerate(rows):
        for name in ("msg_key", "deliver_ts", "detail", "group", "ts"):
            fewer = [*rows[:i], {**row, name: None}, *rows[i + 1:]]
            before = {(r.msg_key, r.lateness_ms) for r in extract_pops(rows).revives}
            assert {(r.msg_key, r.lateness_ms) for r in extract_pops(fewer).revives} <= before, (i, name)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "seq": st.integers(0, 50), "ts": st.one_of(st.none(), st.integers(0, 10_000)),
    "event": st.sampled_from(("pop", "ack", "revive", "change_invisible", "crash", "send")),
    "group": st.sampled_from(("G", None)), "msg_key": st.sampled_from(("K", "L", None)),
    "deliver_ts": st.one_of(st.none(), st.integers(0, 10_000)), "status": st.sampled_from(("CONCURRENT", "ACKED")),
    "detail": st.one_of(st.none(), st.just({"handle": "h"}), st.just({"handle": "h", "new_handle": "i"}), st.text()),
}), max_size=20))
def test_any_rows_extract_and_render_without_a_crash(rows):
    got = extract_pops(rows)
    data = PlotData(pop_revives=got.revives, pops_acked=got.acked, pops_pending=got.pending)
    root = ET.fromstring(render_pop_plot(data).svg)
    assert root.get("id") == "plot-pop"


def test_the_plot_marks_each_revive_and_names_the_early_ones():
    data = extract_plot_data(_rows())
    plot = render_pop_plot(data)
    root = ET.fromstring(plot.svg)
    marks = [e for e in root.iter() if e.get("class") == "mark"]
    assert len(marks) == plot.marks == 3
    assert [e.text for e in root.iter() if e.get("class") == "early-label"] == ["K3"]
    assert "BEFORE pop time + invisible time" in plot.svg
    assert summarize(data).text.startswith("3 pop revive(s) · lateness median 2.5 s, max 3 s · 1 early")
    assert "1 acked in time · 1 neither acked nor revived" in summarize(data).text
    assert render_pop_plot(PlotData()).marks == 0  # the "no data" panel
    assert [p.plot_id for p in render_plots(data)][-1] == "plot-pop"


def test_the_models_pop_traces_plot_without_early_marks_and_a_broken_broker_with():
    honest = [r for seed in range(4) for r in extract_plot_data(model_pop_trace(seed)).pop_revives]
    assert len(honest) > 20 and not any(r.early for r in honest)
    assert min(r.lateness_ms for r in honest) >= 2000  # the model's revive margin (POP-3)
    early = extract_plot_data(model_pop_trace(0, "pop_revive_early"))
    assert any(r.early for r in early.pop_revives)
    assert ET.fromstring(render_pop_plot(early).svg).find(f".//{SVG}rect[@class='early-zone']") is not None
