"""serve's ``_audit.json``: the audit parameters of the served broker, per version profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqspec.model.config import BrokerConfig
from rmqspec.remoting.trace_out import AUDIT_CONFIG, TraceWriter
from rmqspec.spark.config import ConfigError, load_config


def _written(tmp_path: Path, config: BrokerConfig) -> Path:
    out = TraceWriter(tmp_path / "trace", config)
    out.close()
    return tmp_path / "trace" / AUDIT_CONFIG


def test_a_4_9_broker_writes_no_op_batch_period(tmp_path: Path) -> None:
    path = _written(tmp_path, BrokerConfig(transaction_timeout_ms=2000))
    assert "transactionOpBatchInterval" not in json.loads(path.read_text())
    params = load_config(path).params
    assert (params.transaction_timeout_ms, params.op_batch_ms) == (2000, 0)


def test_a_5_2_broker_writes_its_op_batch_period_which_the_audit_takes_under_that_profile(tmp_path: Path) -> None:
    path = _written(tmp_path, BrokerConfig(version="rocketmq-5.2", transaction_op_batch_interval_ms=1000))
    assert json.loads(path.read_text())["transactionOpBatchInterval"] == 1000
    assert load_config(path, "rocketmq-5.2").params.op_batch_ms == 1000
    with pytest.raises(ConfigError, match="transactionOpBatchInterval applies to a profile that batches"):
        load_config(path)  # audited as 4.9: refused with the reason, never judged with the wrong rules
