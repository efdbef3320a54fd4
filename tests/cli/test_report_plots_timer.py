"""The timer lateness plot (cli/report_plots_timer.py): extraction from hand-built rows, the
summary line, the SVG, and a model run of 5.x timer messages end to end."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.cli.report_model import PlotData, TimerFire, TimerPoint
from rmqspec.cli.report_plots import (
    SCHEDULE_TOPIC,
    extract_plot_data,
    extract_timers,
    render_plots,
    render_timer_plot,
)
from rmqspec.cli.report_plots_timer import summarize
from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import default_config
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.timer import TIMER_TOPIC

SVG = "{http://www.w3.org/2000/svg}"


class Rows:
    """``add(event, ts, **fields)`` assigns seq 0, 1, 2, …"""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, event: str, ts: int | None, **fields: Any) -> dict[str, Any]:
        row = {"seq": len(self.rows), "ts": ts, "event": event, **fields}
        self.rows.append(row)
        return row

    def timer(self, ts: int, key: str, offset: int, due: int, topic: str = "T") -> None:
        """The broker's two rows of one timer send: the timer copy's store, then the send."""
        self.add("store", ts, topic=TIMER_TOPIC, queue_id=0, commitlog_offset=offset, msg_key=key,
                 reconsume_times=0, deliver_ts=due)
        self.add("send", ts, topic=topic, queue_id=1, commitlog_offset=offset, msg_key=key, reconsume_times=0,
                 delay_level=None, deliver_ts=due, status="SEND_OK")

    def fire(self, ts: int, key: str, source: int | None, offset: int, due: int | None, topic: str = "T") -> None:
        detail = None if source is None else json.dumps({"from_commitlog_offset": source})  # Parquet: JSON text
        self.add("timer_fire", ts, topic=topic, queue_id=1, commitlog_offset=offset, msg_key=key,
                 reconsume_times=0, deliver_ts=due, detail=detail)


def _by_key(points: list[TimerPoint]) -> dict[str | None, TimerPoint]:
    return {p.msg_key: p for p in points}


# ---------------------------------------------------------------------------
# extraction


def test_an_on_time_timer_message_merges_send_and_store_and_measures_fire_and_delivery() -> None:
    t = Rows()
    t.timer(1_000, "K1", offset=100, due=4_000)
    t.add("deliver", 3_500, group="G", topic="T", msg_key="OTHER", reconsume_times=0, commitlog_offset=150)
    t.fire(4_040, "K1", source=100, offset=200, due=4_000)
    t.add("deliver", 4_100, group="G", topic="T", msg_key="K1", reconsume_times=0, commitlog_offset=200)
    t.add("deliver", 4_300, group="H", topic="T", msg_key="K1", reconsume_times=0, commitlog_offset=200)
    (p,) = extract_timers(t.rows)
    assert (p.msg_key, p.topic, p.sent_ts, p.due_ts, p.requested_ms) == ("K1", "T", 1_000, 4_000, 3_000)
    assert p.fires == (TimerFire(4_040, 3),)
    assert (p.fire_lateness_ms, p.deliver_lateness_ms, p.early) == (40, 100, False)
    assert p.seqs == (0, 1, 3, 4)  # the second group's delivery is not the first


def test_early_fire_and_early_delivery_are_timer_early() -> None:
    t = Rows()
    t.timer(0, "K2", offset=10, due=5_000)
    t.timer(0, "K3", offset=11, due=5_000)
    t.fire(4_800, "K2", source=10, offset=20, due=5_000)
    # no commitlog offset on the delivery: found by msg_key (reconsume_times 0, the real topic)
    t.add("deliver", 4_900, group="G", topic="T", msg_key="K2", reconsume_times=0)
    t.add("deliver", 4_950, group="G", topic="T", msg_key="K3", reconsume_times=0)  # delivered, never fired
    points = _by_key(extract_timers(t.rows))
    k2, k3 = points["K2"], points["K3"]
    assert (k2.fire_lateness_ms, k2.deliver_lateness_ms, k2.early) == (-200, -100, True)
    assert (k3.fires, k3.deliver_lateness_ms, k3.early) == ((), -50, True)


def test_a_refire_after_a_crash_notes_the_crash_and_one_without_a_crash_does_not() -> None:
    t = Rows()
    t.timer(0, "A", offset=1, due=2_000)
    t.timer(0, "B", offset=2, due=6_000)
    t.fire(2_000, "A", source=1, offset=3, due=2_000)
    t.add("crash", 2_500, status="kill")
    t.add("recover", 3_000, status="kill")
    t.fire(3_100, "A", source=1, offset=4, due=2_000)  # fired again: the checkpoint was older
    t.fire(6_000, "B", source=2, offset=5, due=6_000)  # first fire after the crash
    t.fire(6_200, "B", source=2, offset=6, due=6_000)  # a second fire with no crash between
    points = _by_key(extract_timers(t.rows))
    assert points["A"].fires == (TimerFire(2_000, 4), TimerFire(3_100, 7, refire=True, crash_ts=2_500))
    assert points["B"].fires == (TimerFire(6_000, 8, crash_ts=2_500), TimerFire(6_200, 9, refire=True))
    assert points["A"].fire_lateness_ms == 0  # lateness is the first fire's


def test_rows_missing_what_they_need_are_skipped_never_a_crash() -> None:
    t = Rows()
    t.add("store", 0, topic=TIMER_TOPIC, commitlog_offset=1, msg_key="NO_DUE")  # no deliver_ts
    t.add("send", 0, topic="T", commitlog_offset=2, msg_key="BAD_DUE", deliver_ts="soon")
    t.add("send", 0, topic="T", deliver_ts=3_000)  # neither commitlog offset nor msg_key
    t.add("store", None, topic=TIMER_TOPIC, commitlog_offset=3, msg_key="NO_TS", deliver_ts=3_000)
    t.rows.append({"ts": 0, "event": "send", "topic": "T", "msg_key": "NO_SEQ", "deliver_ts": 3_000})
    t.add("send", True, topic="T", msg_key="BOOL_TS", deliver_ts=3_000)
    t.timer(0, "OK", offset=4, due=3_000)
    t.add("timer_fire", 3_000, topic="T", commitlog_offset=9)  # no source, no msg_key, no deliver_ts
    t.add("timer_fire", 3_000, topic="T", msg_key="GHOST")  # unknown copy and no deliver_ts
    t.add("timer_fire", 3_010, topic="T", msg_key="OK", detail="{not json")  # found by msg_key
    t.add("deliver", 3_020, group="G", topic="T", msg_key="OK")  # reconsume_times unknown: not judged
    t.add("deliver", 3_030, group="G", topic="T", msg_key="OK", reconsume_times="x")
    t.add("crash", None)
    (p,) = extract_timers(t.rows)
    assert (p.msg_key, p.fire_lateness_ms, p.delivered_ts) == ("OK", 10, None)


_DETAIL = st.dictionaries(st.just("from_commitlog_offset"),
                          st.one_of(st.none(), st.text(max_size=2), st.integers(-5, 5)))
_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), _DETAIL,
                    st.sampled_from(["", "x", "T", TIMER_TOPIC, "3", "{}", "[1]"]))
_ROW = st.fixed_dictionaries(
    {"event": st.sampled_from(["send", "store", "timer_fire", "deliver", "crash", "recover", None])},
    optional={name: _VALUES for name in ("seq", "ts", "topic", "commitlog_offset", "msg_key", "reconsume_times",
                                         "delay_level", "deliver_ts", "detail")},
)


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(_ROW, max_size=12))
def test_any_rows_extract_and_render_without_a_crash(rows: list[dict[str, Any]]) -> None:
    points = extract_timers(rows)
    for p in points:
        assert isinstance(p.due_ts, int) and all(isinstance(f.ts, int) for f in p.fires)
    summary = summarize(points)
    assert summary.count <= len(points)
    plot = render_timer_plot(PlotData(timers=points))
    assert ET.fromstring(plot.svg).get("id") == "plot-timer"


def test_delayed_sends_are_not_timer_messages_and_a_lone_fire_is_still_a_point() -> None:
    t = Rows()
    t.add("store", 0, topic=SCHEDULE_TOPIC, queue_id=2, commitlog_offset=1, msg_key="D", deliver_ts=10_000,
          delay_level=3)
    t.add("send", 0, topic="T", commitlog_offset=1, msg_key="D", delay_level=3, deliver_ts=10_000)
    t.add("send", 0, topic="T", commitlog_offset=1, msg_key="D", deliver_ts=10_000)  # level missing
    t.fire(5_300, "LONE", source=77, offset=2, due=5_000)  # its store is before the trace began
    t.add("deliver", 5_400, group="G", topic="T", msg_key="LONE", reconsume_times=0, commitlog_offset=2)
    (p,) = extract_timers(t.rows)
    assert (p.msg_key, p.topic, p.sent_ts, p.requested_ms, p.due_ts) == ("LONE", "T", None, None, 5_000)
    assert (p.fire_lateness_ms, p.deliver_lateness_ms) == (300, 400)


def test_a_client_side_trace_measures_the_delivery_from_the_send() -> None:
    t = Rows()  # a wire trace: sends with send start + requested delay, deliveries; no broker events
    t.add("send", 0, topic="T", msg_key="W1", deliver_ts=2_500, status="SEND_OK")
    t.add("send", 10, topic="T", msg_key="W2", deliver_ts=1_010, status="SEND_OK")
    t.add("send", 20, topic="T", msg_key="W3", deliver_ts=9_020, status="SEND_OK")
    t.add("deliver", 1_900, group="G", topic="U", msg_key="W2", reconsume_times=0)  # another topic
    t.add("deliver", 2_000, group="G", topic="T", msg_key="W2", reconsume_times=0)
    t.add("deliver", 3_100, group="G", topic="T", msg_key="W1", reconsume_times=0)
    points = extract_timers(t.rows)
    assert [(p.msg_key, p.deliver_lateness_ms) for p in points] == [("W1", 600), ("W2", 990), ("W3", None)]
    s = summarize(points)
    assert (s.count, s.basis, s.median_ms, s.max_ms, s.early, s.refires, s.pending) == (2, "deliver", 795, 990,
                                                                                       0, 0, 1)
    assert s.text == "2 timer message(s) delivered · lateness median 795 ms, max 990 ms · 0 early (TIMER_EARLY) · " \
                     "1 pending at the trace end"


def _mixed_trace() -> Rows:
    """On time, early (fire and delivery), a re-fire after a crash, one never fired."""
    t = Rows()
    t.add("send", 0, topic="T", msg_key="START")
    t.timer(0, "ON-TIME", offset=1, due=3_000)
    t.timer(0, "EARLY<1>", offset=2, due=4_000)
    t.timer(0, "LATE", offset=3, due=5_000)
    t.timer(100, "NEVER", offset=4, due=90_000)
    t.fire(3_020, "ON-TIME", source=1, offset=11, due=3_000)
    t.add("deliver", 3_060, group="G", topic="T", msg_key="ON-TIME", reconsume_times=0, commitlog_offset=11)
    t.fire(3_700, "EARLY<1>", source=2, offset=12, due=4_000)
    t.add("deliver", 3_750, group="G", topic="T", msg_key="EARLY<1>", reconsume_times=0, commitlog_offset=12)
    t.add("crash", 3_800, status="kill")
    t.add("recover", 6_000, status="kill")
    t.fire(6_050, "ON-TIME", source=1, offset=13, due=3_000)
    t.fire(6_060, "LATE", source=3, offset=14, due=5_000)
    return t


def test_summary_counts_median_max_early_refires_and_pending() -> None:
    points = extract_timers(_mixed_trace().rows)
    s = summarize(points)
    assert (s.count, s.basis, s.median_ms, s.max_ms, s.early, s.refires, s.pending) == (3, "fire", 20, 1_060,
                                                                                       1, 1, 1)
    assert s.text == ("3 timer message(s) fired · lateness median 20 ms, max 1.1 s · 1 early (TIMER_EARLY) · "
                      "1 re-fire(s) · 1 pending at the trace end")


# ---------------------------------------------------------------------------
# rendering


def _marks(root: ET.Element) -> list[ET.Element]:
    return [e for e in root.iter() if e.get("class") == "mark"]


def test_the_plot_names_the_early_points_and_draws_refires_and_crashes_apart() -> None:
    data = extract_plot_data(_mixed_trace().rows)
    plot = render_timer_plot(data)
    root = ET.fromstring(plot.svg)
    assert (root.get("id"), root.get("class")) == ("plot-timer", "plot")
    marks = _marks(root)
    # fires: ON-TIME twice, EARLY once, LATE once; deliveries: ON-TIME, EARLY
    assert len(marks) == 6 == plot.marks == int(root.get("data-marks") or 0)
    tips = [m.findtext(f"{SVG}title") or "" for m in marks]
    early_tips = [tip for tip in tips if "TIMER_EARLY" in tip]
    assert len(early_tips) == 2 and all(tip.startswith("timer message EARLY<1> → T") for tip in early_tips)
    assert "fired 300 ms BEFORE deliver_ts — TIMER_EARLY" in early_tips[0]
    labels = [e.text for e in root.iter(f"{SVG}text") if e.get("class") == "early-label"]
    assert labels == ["EARLY<1>"]  # once per message, beside its first early mark
    assert "EARLY&lt;1&gt;" in plot.svg and "EARLY<1>" not in plot.svg
    early_marks = [m for m, tip in zip(marks, tips) if "TIMER_EARLY" in tip]
    assert {m.get("stroke") or m.get("fill") for m in early_marks} == {"#D7191C"}
    (refire,) = [m for m in marks if m.tag == f"{SVG}path"]  # the diamond
    assert "re-fire #1 after the crash at 3.8 s" in (refire.findtext(f"{SVG}title") or "")
    assert [e.get("class") for e in root.iter(f"{SVG}line") if e.get("class") == "crash-line"] == ["crash-line"]
    assert any(e.get("class") == "early-zone" for e in root.iter(f"{SVG}rect"))
    (summary,) = [e.text for e in root.iter(f"{SVG}text") if e.get("class") == "summary"]
    assert summary is not None and summary.startswith("3 timer message(s) fired") and "1 early" in summary
    assert "1 timer message(s) had not fired when the trace ended." in plot.caption
    legend = "".join(next(g for g in root.iter(f"{SVG}g") if g.get("class") == "legend").itertext())
    assert "re-fire after a crash" in legend and "broker crash" in legend and "early (TIMER_EARLY)" in legend


def test_no_timer_message_renders_the_no_data_panel() -> None:
    t = Rows()
    t.timer(0, "PENDING", offset=1, due=60_000)  # stored, not yet due when the trace ends
    plot = render_timer_plot(extract_plot_data(t.rows))
    root = ET.fromstring(plot.svg)
    assert (root.get("class"), root.get("data-marks"), plot.marks) == ("plot empty", "0", 0)
    assert "no data" in "".join(root.itertext())


def test_timer_events_leave_the_other_four_plots_byte_identical() -> None:
    t = Rows()
    t.add("send_back", 0, group="G", msg_key="K", reconsume_times=1, delay_level=3, status="RETRY")
    t.add("store", 0, topic=SCHEDULE_TOPIC, queue_id=2, commitlog_offset=5, msg_key="K", reconsume_times=1,
          delay_level=3, deliver_ts=10_000)
    t.add("schedule_fire", 10_000, topic="%RETRY%G", commitlog_offset=6, msg_key="K", reconsume_times=1,
          detail={"from_commitlog_offset": 5})
    t.add("deliver", 10_100, group="G", msg_key="K", reconsume_times=1, commitlog_offset=6)
    t.add("lock", 10_200, group="G", topic="T", queue_id=0, client_id="c1", status="GRANTED")
    t.add("txn_half", 10_400, txn_id="X")
    t.add("drain", 20_000)
    before = render_plots(extract_plot_data(t.rows))
    with_timers = Rows()
    with_timers.rows = [dict(r) for r in t.rows[:-1]]
    with_timers.timer(11_000, "TM", offset=50, due=13_000)
    with_timers.fire(13_000, "TM", source=50, offset=51, due=13_000)
    with_timers.add("deliver", 13_010, group="G", topic="T", msg_key="TM", reconsume_times=0, commitlog_offset=51)
    with_timers.add("drain", 20_000)
    after = render_plots(extract_plot_data(with_timers.rows))
    assert [p.svg for p in after[:4]] == [p.svg for p in before[:4]]
    assert [p.caption for p in after[:4]] == [p.caption for p in before[:4]]
    assert (before[4].marks, after[4].marks) == (0, 2)


def test_plot_data_json_carries_the_timer_series() -> None:
    data = extract_plot_data(_mixed_trace().rows)
    body = json.loads(json.dumps(data.to_json()))
    assert body["crashes"] == [3_800]
    on_time = next(p for p in body["timers"] if p["msg_key"] == "ON-TIME")
    assert (on_time["requested_ms"], on_time["fire_lateness_ms"], on_time["deliver_lateness_ms"]) == (3_000, 20, 60)
    assert on_time["fires"][1] == {"ts": 6_050, "seq": 15, "refire": True, "crash_ts": 3_800}
    assert on_time["early"] is False


# ---------------------------------------------------------------------------
# end to end: the model's timer wheel


T0 = 1_700_000_000_000  # a multiple of every timer precision


def _model_trace(delays_ms: list[int], step_ms: int = 70) -> tuple[list[dict[str, Any]], int]:
    """5.2 broker: timer sends spread over time, ticks every ``step_ms`` with a consumer pulling."""
    clock = ManualClock(T0)
    rec = ListRecorder()
    config = default_config("rocketmq-5.2")
    broker = ModelBroker(clock, config, rec)
    broker.create_topic("T", 2)
    broker.create_group("G")
    offsets = [0, 0]

    def step() -> None:
        clock.advance(step_ms)
        broker.tick()
        for q in (0, 1):
            offsets[q] += len(broker.pull("G", MessageQueue("T", q), offsets[q]).messages)

    for i, delay in enumerate(delays_ms):
        broker.send(Message("T", b"x", properties={"TIMER_DELAY_MS": str(delay)}), i % 2)
        for _ in range(i % 5 + 1):
            step()
    end = T0 + max(delays_ms) + 60 * step_ms * len(delays_ms)
    while clock.now() < end:
        step()
    return [e.as_row() for e in rec.events], config.timer_precision_ms


def test_a_model_run_plots_every_timer_message_within_one_precision_of_its_due_time() -> None:
    delays = [2500, 700, 4000, 1500, 9000, 333, 6500, 1000, 12_345, 2001]
    rows, precision = _model_trace(delays)
    assert precision == 1000
    data = extract_plot_data(rows)
    assert len(data.timers) == len(delays)
    for p in data.timers:
        assert p.msg_key is not None and p.topic == "T" and p.sent_ts is not None
        assert p.due_ts % precision == 0 and p.requested_ms is not None
        assert len(p.fires) == 1 and not p.fires[0].refire
        assert p.fire_lateness_ms is not None and 0 <= p.fire_lateness_ms <= precision
        assert p.deliver_lateness_ms is not None and p.fire_lateness_ms <= p.deliver_lateness_ms <= precision
    # deliver_ts − send ts: the delay asked for, its end rounded up to the precision (points in send order)
    assert all(d <= (p.requested_ms or 0) < d + precision for p, d in zip(data.timers, delays))
    assert len({p.fire_lateness_ms for p in data.timers}) > 1  # the ticks do not fall on the due times
    plot = render_timer_plot(data)
    root = ET.fromstring(plot.svg)
    assert root.get("class") == "plot" and plot.marks == 2 * len(delays)
    assert not [e for e in root.iter(f"{SVG}text") if e.get("class") == "early-label"]
    (summary,) = [e.text for e in root.iter(f"{SVG}text") if e.get("class") == "summary"]
    assert summary is not None and summary.startswith(f"{len(delays)} timer message(s) fired")
    assert "0 early (TIMER_EARLY)" in summary and "re-fire" not in summary


def test_a_model_crash_before_the_checkpoint_shows_re_fires() -> None:
    clock = ManualClock(T0)
    rec = ListRecorder()
    config = attrs.evolve(default_config("rocketmq-5.2"), timer_flush_interval_ms=60_000)
    broker = ModelBroker(clock, config, rec)
    broker.create_topic("T", 1)
    broker.send(Message("T", b"a", properties={"TIMER_DELAY_MS": "500"}), 0)
    while clock.now() < T0 + 1500:
        clock.advance(100)
        broker.tick()
    broker.crash("kill")
    broker.recover()
    while clock.now() < T0 + 2500:
        clock.advance(100)
        broker.tick()
    data = extract_plot_data([e.as_row() for e in rec.events])
    (p,) = data.timers
    assert [(f.refire, f.crash_ts) for f in p.fires] == [(False, None), (True, T0 + 1500)]
    assert data.crashes == (T0 + 1500,)
    root = ET.fromstring(render_timer_plot(data).svg)
    assert [m.tag for m in _marks(root)] == [f"{SVG}circle", f"{SVG}path"]  # the re-fire is a diamond
