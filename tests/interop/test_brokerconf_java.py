"""broker.conf: our reading against real RocketMQ 4.9.8's (java.util.Properties + MixAll.properties2Object).

``interop/java/v4/BrokerConfDump.java`` (``real-rocketmq java``: compiled against the release jars) loads each file
as ``BrokerStartup`` does and prints the properties and the config fields rmqspec maps.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from rmqspec.properties.brokerconf import ConfigError, broker_config_from_file, parse_properties
from tests.interop.realrmq import RealRocketMQ

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("brokerconf_cases", HERE.parent / "properties" / "test_brokerconf.py")
assert _spec is not None and _spec.loader is not None
_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cases)
JAVA_CASES: list[tuple[bytes, list[tuple[str, str, int]]]] = _cases.JAVA_CASES
REAL_FIXTURE_CONF: str = _cases.REAL_FIXTURE_CONF


def _unhex(text: str) -> str:
    return bytes.fromhex(text).decode("utf-16-be", errors="surrogatepass")


def _pairs(line: str) -> dict[str, str]:
    out = {}
    for item in line.split()[1:]:
        key, _, value = item.partition(":")
        out[_unhex(key)] = _unhex(value)
    return out


def java_read(realrmq: RealRocketMQ, files: list[Path]) -> list[tuple[dict[str, str], dict[str, str]] | str]:
    """Per file: (properties, config fields) as the real broker reads them, or the load error."""
    out = subprocess.run(
        realrmq.java("BrokerConfDump", *map(str, files)),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.splitlines()
    results: list[tuple[dict[str, str], dict[str, str]] | str] = []
    i = 0
    while i < len(out):
        if out[i].startswith("E"):
            results.append(_unhex(out[i].split()[1]) if len(out[i].split()) > 1 else "")
            i += 1
        else:
            results.append((_pairs(out[i]), _pairs(out[i + 1])))
            i += 2
    assert len(results) == len(files)
    return results


# Files whose meaning rmqspec must read exactly as the real broker does.
CONFIG_FILES = [
    REAL_FIXTURE_CONF.encode("latin-1"),
    b"brokerName=b\\u00e9\nbrokerIP1=::1\nbrokerClusterName=C1\nflushDiskType=ASYNC_FLUSH\n",
    b"messageDelayLevel=1s 90s \\\n   2m 1h 1d \ntransactionTimeOut : 7000\nlistenPort 10999\n",
    b"# only a comment\n",
]

# Files rmqspec refuses although the real broker starts: it silently keeps a default instead of
# the value the file seems to give (field, value the file seems to say).
SILENTLY_DROPPED = [
    (b"transactionCheckMax=5 \n", "transactionCheckMax", "5"),
    (b"listenPort=10999\\t\n", "listenPort", "10999"),
    (b"flushDiskType=SYNC_FLUSH \n", "flushDiskType", "SYNC_FLUSH"),
    (b"flushDiskType=sync_flush\n", "flushDiskType", "SYNC_FLUSH"),
    (b"mappedFileSizeCommitLog=1g\n", "mappedFileSizeCommitLog", "1g"),
]


def test_properties_load_agrees_with_java(realrmq: RealRocketMQ, tmp_path: Path) -> None:
    files = []
    for i, (data, _expected) in enumerate(JAVA_CASES):
        path = tmp_path / f"case{i}.conf"
        path.write_bytes(data)
        files.append(path)
    for path, java, (data, _expected) in zip(files, java_read(realrmq, files), JAVA_CASES):
        assert not isinstance(java, str), (data, java)
        ours = {p.key: p.value for p in parse_properties(data.decode("iso-8859-1"), str(path))}
        assert ours == java[0], data


def test_malformed_unicode_escape_is_refused_by_both(realrmq: RealRocketMQ, tmp_path: Path) -> None:
    path = tmp_path / "bad.conf"
    path.write_bytes(b"a=1\nb=\\u12\n")
    (java,) = java_read(realrmq, [path])
    assert isinstance(java, str) and "Malformed" in java
    with pytest.raises(ConfigError, match="malformed"):
        broker_config_from_file(path)


def test_broker_config_agrees_with_java(realrmq: RealRocketMQ, tmp_path: Path) -> None:
    files = []
    for i, data in enumerate(CONFIG_FILES):
        path = tmp_path / f"broker{i}.conf"
        path.write_bytes(data)
        files.append(path)
    for path, java in zip(files, java_read(realrmq, files)):
        assert not isinstance(java, str)
        fields = java[1]
        config = broker_config_from_file(path)
        assert config.broker_cluster_name == fields["brokerClusterName"]
        assert config.broker_name == fields["brokerName"]
        assert config.store_host == fields["brokerIP1"]
        assert config.store_port == int(fields["listenPort"])
        assert config.flush == fields["flushDiskType"].removesuffix("_FLUSH")
        assert config.commitlog_file_size == int(fields["mappedFileSizeCommitLog"])
        assert config.transaction_timeout_ms == int(fields["transactionTimeOut"])
        assert config.transaction_check_max == int(fields["transactionCheckMax"])
        assert config.transaction_check_interval_ms == int(fields["transactionCheckInterval"])
        java_delays = BrokerConfigDelays.parse(fields["messageDelayLevel"])
        assert config.delay_levels_ms == java_delays


def test_values_the_real_broker_drops_are_errors(realrmq: RealRocketMQ, tmp_path: Path) -> None:
    files = []
    for i, (data, _field, _seems) in enumerate(SILENTLY_DROPPED):
        path = tmp_path / f"dropped{i}.conf"
        path.write_bytes(data)
        files.append(path)
    for path, java, (data, field, seems) in zip(files, java_read(realrmq, files), SILENTLY_DROPPED):
        assert not isinstance(java, str)
        assert java[1][field] != seems, f"{data!r}: the real broker took the value, so rmqspec must too"
        with pytest.raises(ConfigError) as info:
            broker_config_from_file(path)
        assert info.value.line == 1


class BrokerConfigDelays:
    """The delays ScheduleMessageService.parseDelayLevel computes from Java's string."""

    @staticmethod
    def parse(text: str) -> tuple[int, ...]:
        units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        tokens = text.split(" ")
        while tokens and not tokens[-1]:
            tokens.pop()
        return tuple(int(t[:-1]) * units[t[-1]] for t in tokens)
