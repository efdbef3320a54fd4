"""broker.conf read as java.util.Properties.load reads it, and the BrokerConfig it gives a broker.

The expected values below are what ``Properties.load(InputStream)`` returns for the same bytes
(``tests/interop/test_brokerconf_java.py`` checks these files against the real JVM).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqspec.model.config import BrokerConfig
from rmqspec.properties.brokerconf import (
    ConfigError,
    broker_conf_from_text,
    broker_config_from_file,
    delay_levels_text,
    parse_properties,
)

# (file bytes, [(key, value, line)]) — each case is one java.util.Properties fact.
JAVA_CASES: list[tuple[bytes, list[tuple[str, str, int]]]] = [
    # a value keeps its trailing blanks; the blanks around the separator go
    (b"a =  x  \n", [("a", "x  ", 1)]),
    # continuation: the next line's leading blanks are dropped, the backslash-newline too
    (b"messageDelayLevel=1s 2s \\\n      3s\n", [("messageDelayLevel", "1s 2s 3s", 1)]),
    # an even number of trailing backslashes does not continue
    (b"a=x\\\\\nb=y\n", [("a", "x\\", 1), ("b", "y", 2)]),
    # a continuation ending the file: the value ends there
    (b"a=x\\", [("a", "x", 1)]),
    # escapes in keys and values; an unknown escape is the character itself
    (b"k\\:ey=v\\tw\\nx\\ry\\fz\\q\n", [("k:ey", "v\tw\nx\ry\fzq", 1)]),
    # \uXXXX, and a surrogate pair is one code point (Java strings are UTF-16)
    (b"name=caf\\u00e9 \\uD83D\\uDE00\n", [("name", "café \U0001f600", 1)]),
    # ISO-8859-1 bytes are characters, not UTF-8
    (b"name=caf\xe9\n", [("name", "café", 1)]),
    # \r, \r\n and \n end lines; line numbers count physical lines
    (b"a=1\r\nb=2\rc=3\n\n# x\n! y\nd=4", [("a", "1", 1), ("b", "2", 2), ("c", "3", 3), ("d", "4", 7)]),
    # a comment line does not continue, even ending in a backslash
    (b"# comment \\\na=1\n", [("a", "1", 2)]),
    # ':' and blanks separate too; a second separator belongs to the value
    (b"a:1\nb 2\nc = = 3\n", [("a", "1", 1), ("b", "2", 2), ("c", "= 3", 3)]),
    # an empty value with a separator
    (b"e=\n", [("e", "", 1)]),
    # leading blanks before the key (also form feeds) are skipped
    (b" \t\x0ca=1\n", [("a", "1", 1)]),
]


@pytest.mark.parametrize(("data", "expected"), JAVA_CASES)
def test_parse_properties_as_java_does(data: bytes, expected: list[tuple[str, str, int]]) -> None:
    props = parse_properties(data.decode("iso-8859-1"))
    assert [(p.key, p.value, p.line) for p in props] == expected


def test_malformed_unicode_escape_names_its_line() -> None:
    with pytest.raises(ConfigError, match=r"b\.conf:3: malformed \\uxxxx escape '\\\\u12'") as info:
        parse_properties("a=1\n\nb=\\u12\n", "b.conf")
    assert info.value.line == 3


def test_continuation_line_numbers() -> None:
    props = parse_properties("a=1 \\\n  2 \\\n  3\nb=4\n")
    assert [(p.key, p.value, p.line) for p in props] == [("a", "1 2 3", 1), ("b", "4", 4)]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("transactionCheckMax=5 \n", "trailing blanks"),
        ("rocketmq.broker.rebalance.lockMaxLiveTime=5000\\t\n", "trailing blanks"),
        ("messageDelayLevel=1s  2s\n", "token 2 is empty"),
        ("messageDelayLevel= \\ 1s\n", "token 1 is empty"),
        ("messageDelayLevel=1s\\t2s\n", "token 1"),
    ],
)
def test_values_the_real_broker_would_drop_are_errors(text: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as info:
        broker_conf_from_text(text, "broker.conf")
    assert info.value.line == 1


def test_delay_levels_keep_java_split() -> None:
    # a trailing blank is fine: String.split drops trailing empty strings
    conf = broker_conf_from_text("messageDelayLevel=1s 90s 2m 1h 1d \n")
    assert conf.delay_levels_ms == (1000, 90_000, 120_000, 3_600_000, 86_400_000)
    assert delay_levels_text(conf.delay_levels_ms) == "1s 90s 2m 1h 1d"


# -- broker_config_from_file ---------------------------------------------------------------

REAL_FIXTURE_CONF = """\
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
brokerIP1=127.0.0.1
listenPort=10911
mappedFileSizeCommitLog=67108864
messageDelayLevel=1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s
transactionTimeOut=2000
transactionCheckInterval=3000
transactionCheckMax=3
flushDiskType=SYNC_FLUSH
rocketmq.broker.rebalance.lockMaxLiveTime=5000
"""


def test_broker_config_from_file(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(REAL_FIXTURE_CONF, encoding="latin-1")
    config = broker_config_from_file(path)
    assert config == BrokerConfig(
        message_delay_level=" ".join(f"{i}s" for i in range(1, 19)),
        transaction_timeout_ms=2000,
        transaction_check_max=3,
        transaction_check_interval_ms=3000,
        broker_lock_max_live_ms=5000,
        flush="SYNC",
        store_host="127.0.0.1",
        store_port=10911,
        broker_name="broker-a",
        broker_cluster_name="DefaultCluster",
        commitlog_file_size=67_108_864,
    )


def test_broker_config_defaults_are_rocketmqs(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("brokerName=b\\u00e9\nbrokerIP1=::1\nbrokerClusterName=C1\n")
    config = broker_config_from_file(path)
    assert config.flush == "ASYNC"  # MessageStoreConfig.flushDiskType = ASYNC_FLUSH
    assert config.broker_name == "bé" and config.store_host == "::1" and config.broker_cluster_name == "C1"
    defaults = BrokerConfig()
    assert config.delay_levels_ms == defaults.delay_levels_ms
    assert config.transaction_check_max == 15 and config.transaction_timeout_ms == 6000
    assert config.commitlog_file_size == 1 << 30 and config.store_port == 10911
    assert config.consume_queue_file_size == 300_000 * 20  # MessageStoreConfig: 300,000 units


def test_the_pop_keys_configure_pop(tmp_path: Path) -> None:
    """5.x pop's BrokerConfig keys (model/pop.py): the revive queues, the retry-topic-first share and the v2
    retry topic, as a 5.3.3 broker.conf sets them; absent, 5.3.3's defaults."""
    path = tmp_path / "broker.conf"
    path.write_text("reviveQueueNum=2\npopFromRetryProbability=0\nenableRetryTopicV2=true\n"
                    "retrieveMessageFromPopRetryTopicV1=false\n")
    pop = broker_config_from_file(path).pop
    assert (pop.revive_queue_num, pop.pop_from_retry_probability, pop.enable_retry_topic_v2,
            pop.retrieve_from_retry_v1) == (2, 0, True, False)
    assert BrokerConfig().pop == type(pop)()  # 8, 20, false, true


def test_a_consume_queue_file_size_is_rounded_up_to_whole_units(tmp_path: Path) -> None:
    """MessageStoreConfig.getMappedFileSizeConsumeQueue: ceil(size / 20) units of 20 bytes; the mmap
    broker's consume-queue files take that size."""
    from rmqspec.impl.broker import store_config

    path = tmp_path / "broker.conf"
    for given, taken in (("200", 200), ("201", 220), ("1", 20)):
        path.write_text(f"mappedFileSizeConsumeQueue={given}\n")
        config = broker_config_from_file(path)
        assert config.consume_queue_file_size == taken
        assert store_config(config).cq_file_size == taken
    path.write_text("mappedFileSizeConsumeQueue=2147483647\n")
    with pytest.raises(ConfigError, match="past a Java int"):
        broker_config_from_file(path)


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("brokerName=a\nflushDiskType=SYNC\n", 2, "flushDiskType: 'SYNC' is not SYNC_FLUSH or ASYNC_FLUSH"),
        ("flushDiskType=SYNC_FLUSH \n", 1, "is not SYNC_FLUSH"),
        ("brokerIP1=localhost\n", 1, "brokerIP1: 'localhost' is not an IP address"),
        ("listenPort=70000\n", 1, "listenPort: 70000 is not a TCP port"),
        ("listenPort=0\n", 1, "listenPort: 0 must be a TCP port"),
        ("mappedFileSizeCommitLog=1g\n", 1, "mappedFileSizeCommitLog: '1g' is not an integer"),
        ("mappedFileSizeCommitLog=4294967296\n", 1, "out of range for a Java int"),
        ("mappedFileSizeConsumeQueue=0\n", 1, "mappedFileSizeConsumeQueue: 0 must be > 0 bytes"),
        ("brokerName=\n", 1, "brokerName: is empty"),
        ("a=1\ntransactionCheckMax=0\n", 2, "transactionCheckMax: 0 must be > 0"),
        ("transactionTimeOut=0\n", 1, "transactionTimeOut: 0 must be > 0"),
        ("messageDelayLevel=1x\n", 1, "token 1 '1x'"),
        ("reviveQueueNum=0\n", 1, "reviveQueueNum: 0 must be > 0 queues"),
        ("enableRetryTopicV2=yes\n", 1, "enableRetryTopicV2: 'yes'"),
    ],
)
def test_broker_config_errors_name_key_and_line(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(text)
    with pytest.raises(ConfigError, match=reason) as info:
        broker_config_from_file(path)
    assert info.value.line == line
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_broker_config_missing_file_and_empty_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        broker_config_from_file(tmp_path / "absent.conf")
    empty = tmp_path / "empty.conf"
    empty.write_text("# nothing set\n")
    assert broker_config_from_file(empty) == BrokerConfig(flush="ASYNC")
