"""Traces whose msg_key / txn_id are UNIQ_KEYs in any client's format (docs/fidelity.md B14).

The schema's ``msg_key`` is a string and nothing in trace validation or the audit reads a key's
layout: a trace recorded from the reference client on both brokers, with keys of the Java client on
an IPv6 host, lower-case, Go-client and 5.x-client keys and arbitrary characters, passes validation
in both file formats and audits without a finding. (The Spark audit gets the same trace in
tests/spark/conftest.py's batch: ``uniq:model``.)
"""

from __future__ import annotations

import pytest

from rmqspec.impl import factory as mmap_factory
from rmqspec.model import factory as model_factory
from rmqspec.traces.checker import check
from rmqspec.traces.io import open_writer, read_table, rows_to_table
from tests.uniq_keys import IPV6_JAVA, KEYS, record_trace

FACTORIES = {"model": model_factory, "mmap": mmap_factory}


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_a_trace_with_keys_in_every_client_format_validates_and_audits_clean(tmp_path, name, suffix):
    rows = record_trace(FACTORIES[name], tmp_path / "work")
    path = tmp_path / f"trace.{suffix}"
    with open_writer(path) as writer:
        writer.write_batch(rows_to_table(rows))
    table, rejected = read_table(path)
    assert rejected == [] and table.num_rows == len(rows)
    back = table.to_pylist()
    consumed = {r["msg_key"] for r in back if r["event"] == "consume" and r["status"] == "SUCCESS"}
    assert set(KEYS.values()) | {KEYS["go-client"] + "-d", KEYS["lower-case"] + "-t", IPV6_JAVA + "-t"} == consumed
    assert {r["txn_id"] for r in back if r["event"] == "txn_check"} == {IPV6_JAVA + "-t"}
    assert any(r["event"] == "send_back" and r["msg_key"] == IPV6_JAVA for r in back)
    report = check(back)
    assert report.violations == () and report.observations == ()
    assert report.rows_rejected == 0 and report.not_judged == {}
