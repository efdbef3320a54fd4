"""Plot series extracted from hand-built trace rows, and their SVG rendering."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

from rmqspec.cli.report_model import PlotData, TxnCounts
from rmqspec.cli.report_plots import (
    SCHEDULE_TOPIC,
    extract_delays,
    extract_locks,
    extract_plot_data,
    extract_retries,
    extract_txn_counts,
    fmt_duration,
    log_time_ticks,
    nice_ticks,
    render_plots,
    retry_table_ms,
)
from rmqspec.model.config import DEFAULT_DELAY_LEVELS, parse_delay_levels

LEVELS = parse_delay_levels(DEFAULT_DELAY_LEVELS)
SVG = "{http://www.w3.org/2000/svg}"


class Rows:
    """A tiny trace builder: ``add(event, ts, **fields)`` assigns seq 0, 1, 2, …"""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, event: str, ts: int, **fields: Any) -> dict[str, Any]:
        row = {"seq": len(self.rows), "ts": ts, "event": event, **fields}
        self.rows.append(row)
        return row


def test_retry_series_pairs_each_send_back_with_the_delivery_of_its_copy() -> None:
    t = Rows()
    t.add("deliver", 0, group="G", msg_key="K1", reconsume_times=0)
    t.add("send_back", 1_000, group="G", msg_key="K1", reconsume_times=1, delay_level=3, status="RETRY",
          deliver_ts=11_000)
    t.add("send_back", 1_500, group="G", msg_key="K2", reconsume_times=1, delay_level=3, status="RETRY")
    t.add("deliver", 11_400, group="OTHER", msg_key="K1", reconsume_times=1)  # another group: not its copy
    t.add("deliver", 11_500, group="G", msg_key="K1", reconsume_times=1)
    t.add("send_back", 12_000, group="G", msg_key="K1", reconsume_times=2, delay_level=4, status="RETRY")
    t.add("send_back", 13_000, group="G", msg_key="K3", reconsume_times=5, status="DLQ", delay_level=-1)
    t.add("deliver", 20_000, group="G", msg_key="K1", reconsume_times=2)  # 8 s after a 30 s level: early
    t.add("deliver", 40_000, group="G", msg_key="K2", reconsume_times=1)
    points, unmatched = extract_retries(t.rows)
    assert unmatched == 0
    got = [(p.msg_key, p.attempt, p.level, p.observed_ms, p.level_ms, p.table_ms, p.early, p.seqs) for p in points]
    assert got == [
        ("K1", 1, 3, 10_500, 10_000, 10_000, False, (1, 4)),
        ("K1", 2, 4, 8_000, 30_000, 30_000, True, (5, 7)),
        ("K2", 1, 3, 38_500, 10_000, 10_000, False, (2, 8)),
    ]


def test_retry_send_back_without_a_delivery_is_counted_unmatched() -> None:
    t = Rows()
    t.add("send_back", 0, group="G", msg_key="K", reconsume_times=1, delay_level=3, status="RETRY")
    points, unmatched = extract_retries(t.rows)
    assert points == [] and unmatched == 1


def test_retry_table_is_level_three_plus_r() -> None:
    assert [retry_table_ms(LEVELS, a) for a in (1, 2, 3, 16)] == [10_000, 30_000, 60_000, 7_200_000]
    assert retry_table_ms(LEVELS, 40) == 7_200_000  # clamped to the last level


def test_delay_series_follows_store_fire_and_first_delivery() -> None:
    t = Rows()
    t.add("store", 1_000, topic=SCHEDULE_TOPIC, queue_id=2, commitlog_offset=500, msg_key="D",
          reconsume_times=0, delay_level=3, deliver_ts=11_000)
    t.add("store", 2_000, topic=SCHEDULE_TOPIC, queue_id=3, commitlog_offset=600, msg_key="R",
          reconsume_times=1, deliver_ts=32_000)  # no delay_level column: level = queue_id + 1
    t.add("store", 3_000, topic=SCHEDULE_TOPIC, queue_id=0, commitlog_offset=700, msg_key="P",
          reconsume_times=0, delay_level=1, deliver_ts=4_000)  # never fires in this trace
    t.add("schedule_fire", 11_200, topic="T", commitlog_offset=800, msg_key="D", reconsume_times=0,
          detail=json.dumps({"from_commitlog_offset": 500}))  # Parquet: detail is JSON text
    t.add("deliver", 11_300, group="G", commitlog_offset=999, msg_key="X")
    t.add("deliver", 11_900, group="G", commitlog_offset=800, msg_key="D")
    t.add("deliver", 12_500, group="H", commitlog_offset=800, msg_key="D")  # second group: not the first
    t.add("schedule_fire", 32_100, topic="%RETRY%G", commitlog_offset=900, msg_key="R", reconsume_times=1)
    points = extract_delays(t.rows)
    got = [(p.msg_key, p.kind, p.level, p.level_ms, p.fire_latency_ms, p.deliver_latency_ms) for p in points]
    assert got == [
        ("D", "delayed", 3, 10_000, 10_200, 10_900),
        ("R", "retry", 4, 30_000, 30_100, None),
        ("P", "delayed", 1, 1_000, None, None),
    ]
    assert points[0].seqs == (0, 3, 5)


def test_lock_segments_end_at_takeover_unlock_expiry_and_trace_end() -> None:
    t = Rows()
    q = {"group": "G", "topic": "T", "queue_id": 0}
    t.add("lock", 0, client_id="a", status="GRANTED", **q)
    t.add("lock", 20_000, client_id="a", status="GRANTED", **q)  # renewal
    t.add("lock", 25_000, client_id="b", status="DENIED", **q)
    t.add("lock", 30_000, client_id="b", status="GRANTED", **q)  # takeover while a's lock is live
    t.add("unlock", 35_000, client_id="a", **q)  # not the holder: ignored
    t.add("unlock", 40_000, client_id="b", **q)
    t.add("lock", 50_000, client_id="a", status="GRANTED", **q)
    t.add("lock", 200_000, client_id="c", status="GRANTED", **q)  # a expired at 110 000
    t.add("lock", 210_000, client_id="c", status="GRANTED", group="G", topic="T", queue_id=1)
    t.add("drain", 230_000)
    segments, denials, t0, t_end = extract_locks(t.rows)
    got = [(s.queue_id, s.client_id, s.start, s.last_grant, s.end, s.end_reason, s.grants) for s in segments]
    assert got == [
        (0, "a", 0, 20_000, 30_000, "takeover", 2),
        (0, "b", 30_000, 30_000, 40_000, "unlock", 1),
        (0, "a", 50_000, 50_000, 110_000, "expired", 1),
        (0, "c", 200_000, 200_000, 230_000, "trace end", 1),
        (1, "c", 210_000, 210_000, 230_000, "trace end", 1),
    ]
    assert [(d.client_id, d.ts, d.seq) for d in denials] == [("b", 25_000, 2)]
    assert (t0, t_end) == (0, 230_000)


def test_lock_segments_end_at_a_crash_and_a_late_regrant_starts_a_new_one() -> None:
    t = Rows()
    q = {"group": "G", "topic": "T", "queue_id": 0}
    t.add("lock", 1_000, client_id="a", status="GRANTED", **q)
    t.add("crash", 5_000, status="kill")
    t.add("recover", 6_000)
    t.add("lock", 7_000, client_id="a", status="GRANTED", **q)
    t.add("lock", 100_000, client_id="a", status="GRANTED", **q)  # own lock expired at 67 000
    segments, _, _, _ = extract_locks(t.rows)
    assert [(s.start, s.end, s.end_reason) for s in segments] == [
        (1_000, 5_000, "crash"), (7_000, 67_000, "expired"), (100_000, 100_000, "trace end"),
    ]


def test_txn_counts_per_transaction() -> None:
    t = Rows()
    for key in ("A", "B", "C", "D", "E"):
        t.add("txn_half", 0, txn_id=key, msg_key=key)
    t.add("txn_end", 1, txn_id="A", status="COMMIT")
    t.add("txn_end", 2, txn_id="A", status="COMMIT")  # duplicate commit
    t.add("txn_end", 3, txn_id="B", status="ROLLBACK")
    t.add("txn_end", 4, txn_id="C", status="UNKNOWN")
    for i in range(3):
        t.add("txn_check", 60_000 * (i + 1), txn_id="C")
    t.add("txn_check", 60_000, msg_key="D")  # no txn_id column: msg_key identifies it
    t.add("txn_end", 60_001, msg_key="D", status="COMMIT")
    t.add("txn_discard", 900_000, txn_id="C")
    assert extract_txn_counts(t.rows) == TxnCounts(
        halves=5, committed=2, rolled_back=1, checks=4, checked_txns=2, discarded=1, duplicate_commits=1,
        unresolved=1,
    )


def test_extract_plot_data_sorts_by_seq_and_keeps_parameters() -> None:
    t = Rows()
    t.add("send_back", 0, group="G", msg_key="K", reconsume_times=1, delay_level=3, status="RETRY")
    t.add("deliver", 10_000, group="G", msg_key="K", reconsume_times=1)
    data = extract_plot_data(list(reversed(t.rows)), broker_lock_ms=1234)
    assert len(data.retries) == 1 and data.retries[0].observed_ms == 10_000
    assert data.broker_lock_ms == 1234 and data.delay_levels_ms == LEVELS
    assert (data.t0, data.t_end) == (0, 10_000)


def test_scales_and_formatting() -> None:
    assert nice_ticks(0, 17, 5) == [0, 5, 10, 15, 20]  # the top tick covers the largest value
    assert nice_ticks(0, 4, 4) == [0, 1, 2, 3, 4]
    assert log_time_ticks(5_000, 200_000) == [5_000, 10_000, 30_000, 60_000, 120_000]
    assert [fmt_duration(v) for v in (250, 1_500, 10_000, 90_000, 3_600_000, 5_400_000)] == [
        "250 ms", "1.5 s", "10 s", "1 min 30 s", "1 h", "1 h 30 min",
    ]


def _svgs(data: PlotData) -> dict[str, ET.Element]:
    return {p.plot_id: ET.fromstring(p.svg) for p in render_plots(data)}


def test_empty_data_renders_five_no_data_panels() -> None:
    plots = render_plots(PlotData())
    assert [p.plot_id for p in plots] == ["plot-retry", "plot-delay", "plot-locks", "plot-txn", "plot-timer",
                                          "plot-pop"]
    for p in plots:
        root = ET.fromstring(p.svg)  # well-formed XML
        assert root.get("class") == "plot empty"
        assert root.get("data-marks") == "0" and p.marks == 0
        assert "no data" in "".join(root.itertext())
        assert p.caption


def test_plots_draw_one_mark_per_datum_with_escaped_tooltips() -> None:
    t = Rows()
    g = "G<&>\"x\""
    t.add("send_back", 0, group=g, msg_key="K", reconsume_times=1, delay_level=3, status="RETRY")
    t.add("store", 0, topic=SCHEDULE_TOPIC, queue_id=2, commitlog_offset=5, msg_key="K", reconsume_times=1,
          delay_level=3, deliver_ts=10_000)
    t.add("schedule_fire", 10_000, topic=f"%RETRY%{g}", commitlog_offset=6, msg_key="K", reconsume_times=1,
          detail={"from_commitlog_offset": 5})
    t.add("deliver", 10_100, group=g, msg_key="K", reconsume_times=1, commitlog_offset=6)
    q = {"group": g, "topic": "T", "queue_id": 0}
    t.add("lock", 10_200, client_id="c1", status="GRANTED", **q)
    t.add("lock", 10_300, client_id="c2", status="DENIED", **q)
    t.add("txn_half", 10_400, txn_id="X")
    t.add("txn_end", 10_500, txn_id="X", status="COMMIT")
    t.add("store", 10_600, topic="rmq_sys_wheel_timer", queue_id=0, commitlog_offset=7, msg_key=g,
          reconsume_times=0, deliver_ts=12_000)
    t.add("timer_fire", 12_000, topic="T", commitlog_offset=8, msg_key=g, reconsume_times=0,
          deliver_ts=12_000, detail={"from_commitlog_offset": 7})
    t.add("deliver", 12_050, group=g, topic="T", msg_key=g, reconsume_times=0, commitlog_offset=8)
    t.add("pop", 13_000, group=g, topic="T", msg_key=g, status="CONCURRENT", deliver_ts=14_000,
          detail={"handle": "0 13000 1000 0 0 b 0 0"})
    t.add("revive", 16_000, group=g, topic="%RETRY%G_T", msg_key=g, reconsume_times=1)
    data = extract_plot_data(t.rows)
    plots = {p.plot_id: p for p in render_plots(data)}
    svgs = _svgs(data)
    marks = {pid: len([e for e in root.iter() if e.get("class") == "mark"]) for pid, root in svgs.items()}
    assert marks == {"plot-retry": 1, "plot-delay": 2, "plot-locks": 2, "plot-txn": 2,  # halves + committed
                     "plot-timer": 2, "plot-pop": 1}  # fire + first deliver; a revive
    for pid, root in svgs.items():
        assert root.get("class") == "plot" and root.get("data-marks") == str(marks[pid])
        assert plots[pid].marks == marks[pid]
        assert root.find(f"{SVG}title") is not None
    tooltip = svgs["plot-retry"].find(f".//{SVG}circle[@class='mark']/{SVG}title")
    assert tooltip is not None and tooltip.text is not None and tooltip.text.startswith(g)
    assert "G&lt;&amp;&gt;&quot;x&quot;" in plots["plot-retry"].svg
    assert not re.search(r"<[^>]*G<&>", plots["plot-locks"].svg)
    assert "G<&>" not in plots["plot-timer"].svg  # the timer tooltips name the msg_key, escaped
    assert "timer message G&lt;&amp;&gt;&quot;x&quot; → T" in plots["plot-timer"].svg
    # axes, ticks and a legend on a plot with data
    texts = "".join(svgs["plot-retry"].itertext())
    assert "Legend" in texts and "10 s" in texts and "retry attempt" in texts
