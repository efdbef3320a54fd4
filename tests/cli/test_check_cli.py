"""``rmqspec check`` end to end: a broken broker fails it and the report shows why.

The full campaign (z3, conformance machine, Spark audit, report) runs once here
against a deliberately broken broker (``tests/broken_brokers.py``: END_TRANSACTION
COMMIT is ignored) with the quick budget; the clean run of the bundled
MmapBroker is what ``make check`` does. Usage mistakes exit 2 without a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqspec.cli import cmd_check
from rmqspec.cli.main import build_parser, main
from rmqspec.model.versions import VERSIONS

TESTS = Path(__file__).resolve().parents[1]
# One pytest-xdist worker for the module: its tests share one `rmqspec check` run (``broken_run``).
pytestmark = pytest.mark.xdist_group("check-cli")


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    out = tmp_path_factory.mktemp("check-broken")
    mp = pytest.MonkeyPatch()
    mp.chdir(TESTS)  # the adapter module sits beside the tests, as a user's would beside them
    try:
        code = main(["check", "--broker", "broken_brokers:commit_ignored", "--budget", "quick",
                     "--out", str(out), "--master", "local[2]", "--quiet"])
    finally:
        mp.undo()
    return code, out


def test_a_broken_broker_makes_check_exit_1(broken_run: tuple[int, Path]) -> None:
    code, out = broken_run
    assert code == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_code"] == 1
    assert summary["conformance"]["status"] == "FAIL"


def test_the_report_shows_the_counterexample(broken_run: tuple[int, Path]) -> None:
    _, out = broken_run
    html = (out / "report.html").read_text()
    assert 'id="conformance"' in html
    assert "lockstep mismatch" in html
    assert "Op.of(&#x27;txn_send_half&#x27;" in html or "Op.of('txn_send_half'" in html
    assert "PROGRAM = [" in html


def test_the_traces_of_the_run_are_kept_for_rerunning_the_audit(broken_run: tuple[int, Path]) -> None:
    _, out = broken_run
    assert sorted((out / "traces").glob("example-*.jsonl")), "one trace per conformance example"
    assert (out / "audit" / "summary.json").exists()


def test_an_unknown_broker_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--broker", "no_such_module:factory", "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err
    assert "no_such_module" in err and "Traceback" not in err


def test_a_malformed_broker_conf_is_reported_with_its_line(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-a\ntransactionCheckMax=fifteen\n")
    code = main(["check", "--config", str(conf), "--out", str(tmp_path / "o"), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "broker.conf:2" in err and "Traceback" not in err


def test_a_malformed_audit_config_is_refused_before_any_work(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "audit.json"
    conf.write_text('{"maxReconsumeTimes": "many"}')
    assert main(["check", "--audit-config", str(conf), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "maxReconsumeTimes" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_out_must_be_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["check", "--out", str(target)]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_every_conformance_profile_is_offered_and_an_unknown_one_exits_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rmqspec.properties.conformance import PROFILES

    assert {build_parser().parse_args(["check", "--profile", name]).profile for name in PROFILES} == set(PROFILES)
    assert {*VERSIONS, "strict"} <= set(PROFILES)
    with pytest.raises(SystemExit) as exc:
        main(["check", "--profile", "rocketmq-9", "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --profile: invalid choice: 'rocketmq-9'" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def _inputs(tmp_path: Path, profile: str, *extra: str) -> tuple[object, object]:
    """What ``rmqspec check`` reads before any work: the broker config and the audit's configuration."""
    args = build_parser().parse_args(["check", "--profile", profile, "--out", str(tmp_path / "o"), *extra])
    broker = cmd_check._broker_config(args)
    return broker, cmd_check._audit_config(args, broker)


def test_a_5x_profile_reads_broker_conf_and_audits_with_its_op_batching(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("transactionOpBatchInterval=700\n")
    latest = sorted(VERSIONS)[-1]  # a 5.x line after 5.1: it batches op messages too
    broker, audit = _inputs(tmp_path, latest, "--config", str(conf))
    assert broker.version == latest and broker.transaction_check_interval_ms == 30_000
    assert audit.params.op_batch_ms == 700  # the broker's own period reaches the audit
    _, audit = _inputs(tmp_path, "rocketmq-5.1")
    assert audit.params.op_batch_ms == 3000  # RocketMQ's default without --config
    plain = tmp_path / "audit.json"
    plain.write_text('{"transactionCheckMax": 5}')
    _, audit = _inputs(tmp_path, "rocketmq-5.1", "--config", str(conf), "--audit-config", str(plain))
    assert audit.params.op_batch_ms == 700 and audit.params.transaction_check_max == 5
    for profile in ("rocketmq-4.9", "strict", "rocketmq-5.0"):
        broker, audit = _inputs(tmp_path, profile, "--config", str(conf))
        assert audit.params.op_batch_ms == 0, profile  # ops written at the END
        assert broker.transaction_check_interval_ms == 60_000


def test_an_op_batch_key_under_a_4_9_profile_is_refused_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "audit.json"
    conf.write_text('{"transactionOpBatchInterval": 700}')
    assert main(["check", "--audit-config", str(conf), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "transactionOpBatchInterval applies to a profile that batches op messages" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()
