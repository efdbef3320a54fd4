"""Java properties parsing and configuration verification."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.properties.brokerconf import (
    BrokerConf,
    ConfigError,
    broker_conf_from_text,
    load_broker_conf,
    parse_properties,
)
from rmqspec.properties.configcheck import (
    check_delay_table,
    check_lock_renewal,
    check_orderly_exclusive,
    check_retry_levels,
    check_transaction_max,
    check_transaction_timing,
    verify_config,
)
from rmqspec.properties.prover import FAILED, INFO, PROVED, WARNING

# -- java.util.Properties parsing ------------------------------------------


def test_separators_comments_blank_lines_and_trimming() -> None:
    text = (
        "# a comment\n"
        "   ! another comment\n"
        "\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d   =   spaced value  \n"
        "e=\n"
        "f=x=y:z\n"
    )
    props = parse_properties(text)
    assert [(p.key, p.value, p.line) for p in props] == [
        ("a", "1", 4),
        ("b", "2", 5),
        ("c", "3", 6),
        ("d", "spaced value  ", 7),  # Java keeps trailing blanks
        ("e", "", 8),
        ("f", "x=y:z", 9),
    ]


def test_continuation_lines_escapes_and_line_endings() -> None:
    text = "messageDelayLevel=1s 5s \\\n     10s\r\nkey\\:x=a\\tb\\u0041\rlast=\\\\\n"
    props = parse_properties(text)
    assert [(p.key, p.value, p.line) for p in props] == [
        ("messageDelayLevel", "1s 5s 10s", 1),
        ("key:x", "a\tbA", 3),
        ("last", "\\", 4),
    ]


def test_comment_lines_do_not_continue() -> None:
    props = parse_properties("# comment ending in a backslash \\\na=1\n")
    assert [(p.key, p.value) for p in props] == [("a", "1")]


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("a=1\n[broker]\n", 2, "not a property"),
        ("a=1\nb=2\n=orphan value\n", 3, "has no key"),
        ("a=1\nstray\n", 2, "no '=' and no value"),
        ("a=\\u00zz\n", 1, "malformed \\\\uxxxx"),
    ],
)
def test_lines_that_are_not_properties(text: str, line: int, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as info:
        parse_properties(text, "broker.conf")
    assert info.value.line == line
    assert str(info.value).startswith(f"broker.conf:{line}: ")


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("brokerName=a\ntransactionTimeOut=6s\n", 2, "transactionTimeOut: '6s' is not an integer"),
        ("messageDelayLevel=1s 5x\n", 1, "token 2 '5x'"),
        ("x=1\n\nrocketmq.broker.rebalance.lockMaxLiveTime=0\n", 3, "must be > 0 ms"),
        ("retryMaxTimes=-1\n", 1, "must be ≥ 0"),
        ("transactionCheckMax=99999999999\n", 1, "out of range for a Java int"),
        ("clockDriftPpm=1000000\n", 1, "below 1000000"),
        ("maxRequestLatencyMs=\n", 1, "empty value"),
        ("rocketmq.client.rebalance.lockInterval=1_000\n", 1, "not an integer"),
    ],
)
def test_malformed_values_name_the_line(text: str, line: int, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as info:
        broker_conf_from_text(text, "b.conf")
    assert info.value.line == line


def test_used_keys_are_typed_and_others_ignored() -> None:
    conf = broker_conf_from_text(
        "brokerClusterName=DefaultCluster\n"
        "brokerName = broker-a\n"
        "messageDelayLevel = 1s 2m 1h\n"
        "transactionCheckMax: 5\n"
        "listenPort 10911\n"
        "rocketmq.client.rebalance.lockMaxLiveTime=45000\n"
        "brokerName=broker-b\n"
    )
    assert conf.delay_levels_ms == (1000, 120_000, 3_600_000)
    assert conf.transaction_check_max == 5 and conf.client_lock_ms == 45_000
    assert conf.broker_lock_ms == 60_000 and conf.lock_interval_ms == 20_000  # defaults
    assert [(p.key, p.line) for p in conf.ignored] == [
        ("brokerClusterName", 1),
        ("listenPort", 5),
        ("brokerName", 7),
    ]
    assert conf.source_of("transactionCheckMax") == "line 4"
    assert conf.source_of("retryMaxTimes") == "default"


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_broker_conf(tmp_path / "absent.conf")
    with pytest.raises(ConfigError, match="is a directory"):
        load_broker_conf(tmp_path)
    path = tmp_path / "broker.conf"
    path.write_bytes("# caf\xe9\nretryMaxTimes=3\n".encode("latin-1"))
    assert load_broker_conf(path).retry_max_times == 3


# -- orderly exclusivity -----------------------------------------------------


def conf(**kw: int) -> BrokerConf:
    return BrokerConf(**kw)


def test_defaults_are_exclusive() -> None:
    result = check_orderly_exclusive(conf())
    assert result.status == PROVED and result.code == "ORDERLY_CONCURRENT"
    # 30000 ms of client time at -100 ppm is 30003 ms of broker time, plus 1000 ms response latency.
    assert result.data["a_window_ms"] == 31_003
    assert "margin 28997 ms" in result.detail


def test_client_lifetime_longer_than_broker_gives_a_timeline() -> None:
    c = conf(client_lock_ms=90_000)
    result = check_orderly_exclusive(c)
    assert result.status == FAILED
    v = result.data["values"]
    lat = c.max_request_latency_ms
    # The timeline satisfies every assumption and the violation, concretely.
    assert v["a_req"] <= v["g_a"] <= v["a_req"] + lat and v["g_a"] <= v["a_resp"] <= v["g_a"] + lat
    assert v["b_req"] <= v["g_b"] <= v["b_req"] + lat and v["g_b"] <= v["b_resp"] <= v["g_b"] + lat
    assert v["g_b"] - v["g_a"] > c.broker_lock_ms  # the broker may hand the queue to B
    assert v["ca_c"] - v["ca_resp"] <= c.client_lock_ms  # A still thinks it holds the lock
    assert v["t_c"] >= v["g_b"]
    span, reading = v["t_c"] - v["a_resp"], v["ca_c"] - v["ca_resp"]
    assert abs(reading - span) * 1_000_000 <= c.clock_drift_ppm * span
    timeline = result.counterexample
    assert [e.broker_ms for e in timeline.events] == sorted(e.broker_ms for e in timeline.events)
    text = "\n".join(timeline.render())
    assert " 1." in text and " 7." in text and "grants the queue to B" in text
    assert timeline.to_dict()["events"][0]["actor"] == "A"


def test_a_listener_that_outruns_the_margin_gives_a_timeline() -> None:
    """Issue 42: an orderly listener (or a pause inside it) is bounded by nothing in RocketMQ 4.9; with
    ``maxOrderlyListenerMs`` past the margin, A's batch still runs when the broker grants B."""
    proved = check_orderly_exclusive(conf(max_orderly_listener_ms=28_997))
    assert proved.status == PROVED and proved.data["a_window_ms"] == 31_003 + 28_997
    c = conf(max_orderly_listener_ms=28_998)  # one ms past the default margin
    result = check_orderly_exclusive(c)
    assert result.status == FAILED
    v = result.data["values"]
    assert v["g_b"] - v["g_a"] > c.broker_lock_ms and v["t_c"] < v["g_b"]  # started before B's grant ...
    assert 0 < v["run"] == v["g_b"] - v["t_c"] <= c.max_orderly_listener_ms  # ... and still running
    assert v["ca_c"] - v["ca_resp"] <= c.client_lock_ms
    text = "\n".join(result.counterexample.render())
    assert "its listener still runs" in text and "listener ≤ 28998 ms" in text
    assert broker_conf_from_text("maxOrderlyListenerMs = 5000\n").max_orderly_listener_ms == 5000
    with pytest.raises(ConfigError, match="maxOrderlyListenerMs"):
        broker_conf_from_text("maxOrderlyListenerMs = -1\n")


@pytest.mark.parametrize(
    ("client", "broker", "lat", "status"),
    [
        (60_000, 60_000, 0, PROVED),  # equal lifetimes, perfect clocks: '>' vs '≤' keeps it safe
        (60_001, 60_000, 0, FAILED),
        (30_000, 60_000, 30_000, PROVED),
        (30_000, 60_000, 30_001, FAILED),
    ],
)
def test_exclusivity_boundary_without_drift(
    client: int, broker: int, lat: int, status: str
) -> None:
    c = conf(
        client_lock_ms=client, broker_lock_ms=broker, max_request_latency_ms=lat, clock_drift_ppm=0
    )
    assert check_orderly_exclusive(c).status == status


@settings(max_examples=15)
@given(
    client=st.integers(1, 120_000),
    broker=st.integers(1, 120_000),
    lat=st.integers(0, 5000),
    ppm=st.integers(0, 50_000),
)
def test_exclusivity_matches_the_closed_form(client: int, broker: int, lat: int, ppm: int) -> None:
    """A's window after a grant is latency + floor(client · 10⁶ / (10⁶ − ppm)) broker ms."""
    c = conf(
        client_lock_ms=client,
        broker_lock_ms=broker,
        max_request_latency_ms=lat,
        clock_drift_ppm=ppm,
    )
    window = lat + client * 1_000_000 // (1_000_000 - ppm)
    result = check_orderly_exclusive(c)
    assert result.data["a_window_ms"] == window
    assert result.status == (FAILED if window > broker else PROVED)


# -- lock renewal --------------------------------------------------------------


@pytest.mark.parametrize(
    ("interval", "lat", "status"),
    [(30_000, 0, PROVED), (30_001, 0, FAILED), (20_000, 5_000, PROVED), (20_001, 5_000, FAILED)],
)
def test_renewal_gap_boundary(interval: int, lat: int, status: str) -> None:
    c = conf(lock_interval_ms=interval, max_request_latency_ms=lat, clock_drift_ppm=0)
    assert check_lock_renewal(c).status == status


def test_renewal_gap_timeline() -> None:
    c = conf(lock_interval_ms=30_000)
    result = check_lock_renewal(c)
    assert result.status == FAILED and "lock renewal gap" in result.detail
    v = result.data["values"]
    assert v["c_x"] - v["c_s1"] > c.client_lock_ms and v["s1"] <= v["x"] <= v["s2"]
    assert v["c_r2"] - v["c_r1"] == c.lock_interval_ms
    assert "lock expired" in "\n".join(result.counterexample.render())


# -- table and transaction facts -------------------------------------------------


def test_delay_table_decreasing_is_a_warning() -> None:
    assert check_delay_table(conf()).status == PROVED
    result = check_delay_table(conf(delay_levels_ms=(1000, 5000, 2000, 3000)))
    assert result.status == WARNING and result.data["decreasing_levels"] == [3]


def test_retry_levels_clamped_and_time_to_dlq() -> None:
    default = check_retry_levels(conf())
    assert default.status == PROVED and default.data["clamped_retries"] == 0
    # 10s+30s+1m+…+2h: the default path to the DLQ takes 4h45m40s at the earliest.
    assert default.data["min_time_to_dlq_ms"] == 17_140_000
    result = check_retry_levels(conf(delay_levels_ms=(1000, 2000, 3000, 4000), retry_max_times=5))
    assert result.status == INFO and result.data["clamped_retries"] == 3
    assert result.data["min_time_to_dlq_ms"] == 3000 + 4000 * 4
    assert "clamped to level 4" in result.detail
    assert check_retry_levels(conf(retry_max_times=0)).data["min_time_to_dlq_ms"] == 0


def test_transaction_facts() -> None:
    assert check_transaction_max(conf()).status == PROVED
    zero = check_transaction_max(conf(transaction_check_max=0))
    assert zero.status == FAILED and "discarded unasked" in zero.detail
    assert check_transaction_timing(conf()).status == INFO
    slow = check_transaction_timing(conf(transaction_timeout_ms=120_000))
    assert slow.status == INFO and "2 round(s)" in slow.detail


def test_verify_config_reports_every_check_and_ignored_keys() -> None:
    c = broker_conf_from_text("brokerName=a\nnamesrvAddr=127.0.0.1:9876\n")
    results = {r.name: r for r in verify_config(c)}
    assert results["IgnoredKeys"].data["ignored"] == [
        {"key": "brokerName", "line": 1},
        {"key": "namesrvAddr", "line": 2},
    ]
    assert all(r.kind == "config" for r in results.values())
    assert not any(r.status == FAILED for r in results.values())
    assert results["ConfigurationValues"].data["sources"]["messageDelayLevel"] == "default"
