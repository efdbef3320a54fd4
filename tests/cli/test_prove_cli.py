"""``rmqspec prove``: the table, --json, --config, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqspec.cli.main import main
from rmqspec.model.versions import VERSIONS
from rmqspec.properties.theorems import THEOREMS

REAL_BROKER_CONF = """\
# a typical broker.conf with keys rmqspec does not use
brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
deleteWhen = 04
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = ASYNC_FLUSH
namesrvAddr=127.0.0.1:9876
listenPort: 10911
messageDelayLevel=1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
transactionTimeOut=6000
transactionCheckMax=15
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "broker.conf"
    path.write_text(text, encoding="latin-1")
    return str(path)


def test_prove_all_theorems(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--quiet"]) == 0
    out = capsys.readouterr().out
    for t in THEOREMS:
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(t.name + " "))
        assert "PROVED" in line and line.rstrip().endswith("s"), line
    assert "LOCK_OVERLAP" in out and f"{len(THEOREMS)} theorems in" in out


def test_prove_json_is_a_list_of_results(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, list) and len(data) == len(THEOREMS)
    assert {d["status"] for d in data} == {"PROVED"}
    assert all({"name", "code", "status", "seconds", "counterexample"} <= set(d) for d in data)


def test_prove_one_theorem_verbose_shows_witness(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--quiet", "-v", "--theorem", "TxnDiscardAfterCheckMaxReachable"]) == 0
    out = capsys.readouterr().out
    assert "run over transaction" in out and "DISCARDED" in out


def test_unknown_theorem_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--theorem", "NoSuchProperty"]) == 2
    assert "unknown theorem NoSuchProperty" in capsys.readouterr().err


def test_a_5x_theorem_asked_of_4_9_names_what_4_9_lacks(capsys: pytest.CaptureFixture[str]) -> None:
    pop, timer = "PopInvisibleUntilDeadlineProperty", "TimerNeverEarlyProperty"
    assert main(["prove", "--theorem", pop, "--theorem", timer]) == 2
    err = capsys.readouterr().err
    assert "which has no pop consumption" in err and "which has no timer messages" in err
    assert main(["prove", "--quiet", "--profile", "rocketmq-5.2", "--theorem", pop]) == 0
    assert pop in capsys.readouterr().out


def test_real_broker_conf_lists_ignored_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, REAL_BROKER_CONF)
    assert main(["prove", "--quiet", "--config", path]) == 0
    out = capsys.readouterr().out
    assert f"configuration {path}:" in out
    ignored = next(ln for ln in out.splitlines() if "ignored:" in ln)
    for key in ("brokerClusterName (line 2)", "namesrvAddr (line 9)", "listenPort (line 10)"):
        assert key in ignored
    assert "OrderlyConsumptionExclusive" in out and "FAILED" not in out


def test_client_lifetime_longer_than_broker_fails_with_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, REAL_BROKER_CONF + "rocketmq.client.rebalance.lockMaxLiveTime=90000\n")
    assert main(["prove", "--quiet", "--config", path]) == 1
    out = capsys.readouterr().out
    row = next(
        ln for ln in out.splitlines() if ln.strip().startswith("OrderlyConsumptionExclusive ")
    )
    assert "FAILED" in row and "ORDERLY_CONCURRENT" in row
    assert "counterexample:" in out and "broker ms" in out
    assert "grants the queue to B" in out and "A and B consume concurrently" in out
    assert "  1." in out and "  7." in out


def test_config_json_carries_the_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "rocketmq.client.rebalance.lockMaxLiveTime=90000\nbrokerName=x\n")
    assert main(["prove", "--json", "--config", path]) == 1
    data = json.loads(capsys.readouterr().out)
    by_name = {d["name"]: d for d in data}
    failed = by_name["OrderlyConsumptionExclusive"]
    assert failed["status"] == "FAILED" and failed["kind"] == "config"
    assert len(failed["counterexample"]["events"]) == 7
    assert by_name["IgnoredKeys"]["data"]["ignored"] == [{"key": "brokerName", "line": 2}]


def test_malformed_config_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "brokerName=a\n\ntransactionCheckInterval=sixty\n")
    assert main(["prove", "--config", path]) == 2
    err = capsys.readouterr().err
    assert f"{path}:3: transactionCheckInterval" in err and "not an integer" in err
    assert "Traceback" not in err


def test_line_that_is_not_a_property(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "brokerName=a\n[broker]\n")
    assert main(["prove", "--config", path]) == 2
    assert f"{path}:2: not a property" in capsys.readouterr().err


def test_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--config", str(tmp_path / "nope.conf")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_renewal_gap_and_check_max_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "rocketmq.client.rebalance.lockInterval=40000\ntransactionCheckMax=0\n")
    assert main(["prove", "--quiet", "--config", path]) == 1
    out = capsys.readouterr().out
    assert "lock renewal gap" in out and "discarded unasked" in out


def test_a_5x_profile_fills_the_check_interval_and_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--profile rocketmq-5.1: a broker.conf without transactionCheckInterval gets 5.1's 30 s; the
    output names the profile and that the theorems are the 4.9 lifecycle's."""
    path = write(tmp_path, "transactionTimeOut=45000\n")
    args = ["prove", "--quiet", "--theorem", "TxnResolvedOnceProperty", "--config", path]
    assert main([*args, "--profile", "rocketmq-5.1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("profile rocketmq-5.1 (RocketMQ 5.1.1 – 5.1.4); the theorems are stated for the 4.9")
    assert "transactionTimeOut 45000 ms ≥ transactionCheckInterval 30000 ms" in out
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("profile rocketmq-4.9 (RocketMQ 4.9.8)\n")
    assert "transactionTimeOut 45000 ms < transactionCheckInterval 60000 ms" in out
    latest = sorted(VERSIONS)[-1]
    assert main([*args, "--profile", latest, "--json"]) == 0
    assert {d["profile"] for d in json.loads(capsys.readouterr().out)} == {latest}
    explicit = write(tmp_path, "transactionCheckInterval=10000\n")
    assert main(["prove", "--quiet", "--theorem", "TxnResolvedOnceProperty", "--config", explicit,
                 "--profile", "rocketmq-5.1"]) == 0
    assert "transactionCheckInterval 10000 ms" in capsys.readouterr().out  # the file's value wins


def test_an_unknown_profile_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["prove", "--profile", "strict"])  # a conformance profile, not a RocketMQ version
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --profile: invalid choice: 'strict'" in err and "Traceback" not in err
