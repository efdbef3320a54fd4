"""One local[2] SparkSession for all Spark tests, and ONE audit run over a batch of traces.

Spark start-up and job planning dominate the cost of a small audit, so the
hand-written cases (``traces.checker_cases``), the generator's injected and
clean traces and a few hundred Hypothesis-drawn random traces are put into
one Parquet file, told apart by a ``trace_id`` column, and audited once by
``run_audit`` with the SQL rules (``plan="small"``). The reference checker audits the same rows; tests compare
per trace.
"""

from __future__ import annotations

import json
import os
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import attrs
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rmqspec.properties.codes import VIOLATION_CODES
from rmqspec.spark.config import load_config
from rmqspec.spark.job import AuditSummary, run_audit
from rmqspec.spark.session import audit_session
from rmqspec.traces.checker import CheckReport, check
from rmqspec.traces.checker_cases import CASES, CONFIG_JSON, PARAMS
from rmqspec.traces.generator import GenConfig, generate_rows
from rmqspec.traces.io import rows_to_table
from rmqspec.traces.notation import parse

# Budgets follow the Hypothesis profile (``ci``: 60 examples, ``thorough``: 1,000): ``make test``'s
# batch is sized to its time budget, a ``thorough`` run audits several times more.
RANDOM_TRACES = max(300, settings.default.max_examples)
GEN_EVENTS = 2500
CONFORMANCE_BUDGET = (max(6, settings.default.max_examples // 25), 30)  # examples, steps per broker
RECORDED_BROKERS = ("model", "mmap")
TIMER_TRACES = 12  # model traces of 5.x timer messages (``tests/traces/timer_runs.py``)
RESTART_TRACES = 3  # and of timer messages across a power loss and a crash close behind it, per flush mode
HA_TRACES = 4  # runs of a master/slave pair per pair kind, honest and broken (``tests/traces/ha_runs.py``)


def recorded_traces(tmp: Path) -> dict[str, list[dict[str, Any]]]:
    """Traces recorded from real runs of both brokers: every conformance example, and the
    reference client's workload (``rmqspec check`` records the same two kinds)."""
    from rmqspec.cli.workload import T0, run_workload
    from rmqspec.impl import factory as mmap_factory
    from rmqspec.model import BrokerConfig, ListRecorder, ManualClock
    from rmqspec.model import factory as model_factory
    from rmqspec.properties.runner import budget_settings, check_conformance

    factories = {"model": model_factory, "mmap": mmap_factory}
    out: dict[str, list[dict[str, Any]]] = {}
    for name in RECORDED_BROKERS:
        recorders: list[ListRecorder] = []

        def make(recorders: list[ListRecorder] = recorders) -> ListRecorder:
            recorders.append(ListRecorder())
            return recorders[-1]

        result = check_conformance(factories[name], settings=budget_settings(*CONFORMANCE_BUDGET),
                                   recorder_factory=make)
        assert result.passed, result.render()
        for i, rec in enumerate(recorders):
            out[f"conf:{name}:{i:03d}"] = [e.as_row() for e in rec.events]
        clock, rec = ManualClock(T0), ListRecorder()
        workdir = tmp / f"workload-{name}"
        workdir.mkdir()
        broker = factories[name](clock, BrokerConfig(), workdir, recorder=rec)
        run_workload(broker, clock, rec)
        broker.close()
        out[f"workload:{name}"] = [e.as_row() for e in rec.events]
    return out

# ------------------------------------------------------------ random traces

_TS_STEPS = (0, 1, 999, 1000, 5999, 6000, 10_000, 29_999, 30_000, 30_001, 59_999, 60_000, 60_001)
_STATUS = {
    "send": ("SEND_OK", None, "FAILED", "SUCCESS", "OK"),
    "consume": ("SUCCESS", "SUCCESS", "RECONSUME_LATER"),
    "send_back": ("RETRY", "RETRY", "DLQ"),
    "lock": ("GRANTED", "GRANTED", "DENIED", "EXPIRED"),
    "txn_end": ("COMMIT", "ROLLBACK", "UNKNOWN"),
    "crash": ("kill",),
}
_EVENTS = (
    "send", "store", "store", "deliver", "deliver", "consume", "consume", "send_back",
    "schedule_fire", "commit_offset", "lock", "lock", "unlock", "orderly_start", "orderly_start",
    "orderly_end", "txn_half", "txn_end", "txn_check", "txn_discard", "crash", "recover", "timer_fire",
)  # fmt: skip


@st.composite
def _row(draw: Any) -> dict[str, Any]:
    event = draw(st.sampled_from(_EVENTS))
    due = draw(st.sampled_from((None, 0, 999, 1000, 10_000, 60_000)))
    return {
        "event": event,
        "dt": draw(st.sampled_from(_TS_STEPS)),
        "due": due,
        "group": draw(st.sampled_from(("G", "G", "GSMALL", None))),
        "topic": draw(st.sampled_from(("T", "T", "%RETRY%G", "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", None))),
        "queue_id": draw(st.sampled_from((0, 1))),
        "queue_offset": draw(st.integers(0, 4)),
        "msg_key": draw(st.sampled_from(("K1", "K2", "K3", None))),
        "reconsume_times": draw(st.sampled_from((0, 0, 1, 2, 3, 16, 17, None))),
        "delay_level": draw(st.sampled_from((-1, 0, 1, 3, 18, None))),
        "status": draw(st.sampled_from(_STATUS.get(event, (None,)))),
        "client_id": draw(st.sampled_from(("C1", "C2", "C3"))),
        "txn_id": draw(st.sampled_from(("K1", "K2", None))),
        "detail": {"from_commitlog_offset": draw(st.sampled_from((0, 1)))} if event == "timer_fire" else None,
    }


@st.composite
def random_trace(draw: Any) -> list[dict[str, Any]]:
    """Plausible-enough event sequences over tiny key domains, so rules collide often."""
    drafts = draw(st.lists(_row(), min_size=1, max_size=28))
    rows: list[dict[str, Any]] = []
    ts = draw(st.sampled_from((0, 1000)))
    for seq, d in enumerate(drafts):
        ts += d.pop("dt")
        due = d.pop("due")
        rows.append({"seq": seq, "ts": ts, **d, "deliver_ts": None if due is None else ts + due})
    if draw(st.booleans()):
        rows.append({"seq": len(rows), "ts": ts + 1, "event": "drain"})
    return rows


def draw_random_traces(n: int) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(random_trace())
    def collect(rows: list[dict[str, Any]]) -> None:
        out.append(rows)

    collect()
    return out


# ------------------------------------------------------------- dropped fields

DROPPED_TRACES = 40


def dropped_traces(rows: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """``DROPPED_TRACES`` hand-written and generated traces with 2-4 optional fields dropped
    (``tests/traces/monotone.py``): what rows lacking fields leave unjudged (``spark/unjudged.py``)
    must be withheld as the checker withholds it."""
    from tests.traces.monotone import dropped, units

    rnd = random.Random(41)
    sources = sorted(t for t in rows if t.startswith(("case", "gen:")))
    out: dict[str, list[dict[str, Any]]] = {}
    for i in range(DROPPED_TRACES):
        tid = sources[i * len(sources) // DROPPED_TRACES]
        every = units(rows[tid])
        chosen = rnd.sample(every, min(len(every), rnd.randint(2, 4)))
        out[f"drop{i:02d}:{tid}"] = dropped(rows[tid], chosen)
    return out


# ------------------------------------------------------------------ batch


@attrs.frozen
class Batch:
    """The audited batch: rows and expectations per trace_id, and both results."""

    rows: dict[str, list[dict[str, Any]]]
    truth: dict[str, list[tuple[str, tuple[int, ...]]]]
    spark: dict[str, list[tuple[str, tuple[int, ...]]]]
    checker: dict[str, list[tuple[str, tuple[int, ...]]]]
    report: CheckReport
    summary: AuditSummary
    out: Path


def findings_by_trace(items: list[tuple[str, str, tuple[int, ...]]]) -> dict[str, list]:
    by: dict[str, list] = defaultdict(list)
    for trace_id, code, seqs in items:
        by[trace_id].append((code, tuple(seqs)))
    return {k: sorted(v) for k, v in by.items()}


@pytest.fixture(autouse=True)
def _cache_emptied_after_each_test():
    """A test leaves nothing in the session's cache: the frames it persisted (``carry`` returns persisted
    ones, which the audit's own callers drop: ``spark/incremental.py`` clears the cache) are dropped, so
    the tests of one session do not share its memory (twice a test's sorter found none left:
    UNABLE_TO_ACQUIRE_MEMORY in ``test_incremental.py``). Tests without a session start none."""
    yield
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.catalog.clearCache()


# The tests' session: one 2 GiB driver JVM (at 1g G1 marked 66 s of CPU in a run) runs every audit
# and job of its pytest-xdist group (tests/conftest.py). Its memory page is set small: Spark's default is
# nextPowerOf2(execution pool / cores / 16), at most 64 MB (``MemoryManager.defaultPageSizeBytes``), so
# 32 MB here, and every hash relation and sort buffer takes at least one page however few its rows. A
# broadcast relation read back from disk takes its page outside Spark's accounting
# (``UnsafeHashedRelation.read``: a TaskMemoryManager of its own, bounded by the heap), so the session's
# heap filled with 32 MB arrays: tests/spark/test_audit.py and test_incremental.py alone had 23 full
# GCs, up to 1,553 of the 2,048 heap regions humongous and 1.3 GB live after a full GC, and in a CI run
# reading a broadcast back failed ("Could not allocate memory to grow BytesToBytesMap": the JVM could
# not allocate the page). With 256 KiB pages (smaller than half a G1 region, so not humongous): no full
# GC, at most 887 MB after a young GC, GC CPU 41 s -> 22 s, the two files 299 s -> 256 s. The audit
# itself (its plans, findings) does not depend on the page size; production sessions keep Spark's.
TEST_SESSION_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "2g",
    "spark.buffer.pageSize": "256k",
}


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return audit_session("local[2]", TEST_SESSION_CONF, app_name="rmqspec-tests")


def _recorded(rows: dict[str, list[dict[str, Any]]], tmp: Path) -> None:
    """The recorded traces (``recorded_traces``); 5.x timer messages through the model broker, with
    crashes, drained late and early (their sends carry detail.timer: the TIMER table's replay judges
    them too); and through a power loss with a second crash close behind it, under SYNC and ASYNC
    flushing; retention deleting expired files, and deleting young ones, and taking halves and timer copies
    (``tests/traces/retention_runs.py``); pop consumption, honest and by each broken pop broker
    (``tests/traces/pop_runs.py``); a master/slave pair's runs, honest and broken (``tests/traces/ha_runs.py``)."""
    from tests.traces.timer_runs import model_restart_timer_trace, model_timer_trace

    rows.update(recorded_traces(tmp))
    for seed in range(TIMER_TRACES):
        rows[f"timer:model:{seed}"] = model_timer_trace(seed, drain_early=seed % 2 == 1, requests=True)
    for flush in ("SYNC", "ASYNC"):
        for seed in range(RESTART_TRACES):
            rows[f"restart:{flush}:{seed}"] = model_restart_timer_trace(seed, flush)
    from tests.traces.retention_runs import retention_trace, txn_timer_retention_trace

    for name, broken in (("lawful", False), ("early", True)):  # retention (issue 42)
        rows[f"retention:{name}"] = retention_trace(broken)
    for name, broken in (("halves", False), ("wheel_lost", True)):  # its halves and timer copies
        rows[f"retention:{name}"] = txn_timer_retention_trace(broken)
    from tests.pop_brokers import POP_BROKEN
    from tests.traces.pop_runs import model_pop_trace

    for seed in range(4):  # 5.x pop (issue 40): the model's own pop rows, and each broken pop broker's
        rows[f"pop:model:{seed}"] = model_pop_trace(seed)
        for name in POP_BROKEN:  # four seeds: each broken broker's rule is broken in one of them at least
            rows[f"pop:{name}:{seed}"] = model_pop_trace(seed, name)
    from tests.ha_brokers import BROKEN_PAIRS
    from tests.traces.ha_runs import ha_pair_trace, seeded_program

    for seed in range(HA_TRACES):  # a master/slave pair (issue 43): honest, and each broken pair
        rows[f"ha:model:{seed}"] = ha_pair_trace(seeded_program(seed))
        for name in BROKEN_PAIRS:
            rows[f"ha:{name}:{seed}"] = ha_pair_trace(seeded_program(seed), name)


@pytest.fixture(scope="session")
def batch(spark, tmp_path_factory) -> Batch:
    """The differential batch (``_batch``), built untraced: a budget run of the generator, the brokers,
    the reference checker and the SQL rules, whose lines the suite covers elsewhere."""
    from tests.untraced import untraced

    with untraced():
        return _batch(spark, tmp_path_factory.mktemp("audit_batch"))


def _batch(spark, tmp: Path) -> Batch:
    rows: dict[str, list[dict[str, Any]]] = {}
    truth: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for i, case in enumerate(CASES):
        rows[f"case{i:02d}"] = parse(case.text)
        truth[f"case{i:02d}"] = sorted(case.expected)
    for code in VIOLATION_CODES:
        gen_rows, gen_truth = generate_rows(GenConfig(events=GEN_EVENTS, seed=7, inject=(code,)))
        rows[f"gen:{code}"] = gen_rows
        truth[f"gen:{code}"] = sorted((t["code"], tuple(t["seqs"])) for t in gen_truth)
    for seed, crashes, p_timer in ((11, 0, 0.0), (12, 2, 0.0), (13, 2, 0.2)):
        gen_rows, _ = generate_rows(GenConfig(events=GEN_EVENTS, seed=seed, crashes=crashes, p_timer=p_timer))
        rows[f"clean:{seed}"] = gen_rows
    for i, trace in enumerate(draw_random_traces(RANDOM_TRACES)):
        rows[f"hyp{i:03d}"] = trace
    rows.update(dropped_traces(rows))
    _recorded(rows, tmp)  # conformance and timer runs of the model and the mmap broker
    # UNIQ_KEYs in every client's format as msg_key / txn_id (docs/fidelity.md B14)
    from rmqspec.model import factory as model_factory
    from tests.uniq_keys import record_trace

    rows["uniq:model"] = record_trace(model_factory, tmp / "uniq")
    flat = [{**r, "trace_id": tid} for tid, trace in rows.items() for r in trace]
    # The notation keeps ``detail`` as its JSON text; trace files hold the mapping's JSON.
    stored = [{**r, "detail": json.loads(r["detail"])} if isinstance(r.get("detail"), str) else r for r in flat]
    pq.write_table(rows_to_table(stored), tmp / "batch.parquet")
    config_file = tmp / "audit.json"
    config_file.write_text(json.dumps(CONFIG_JSON))
    config = load_config(config_file)
    assert config.params == PARAMS
    out = tmp / "out"
    # The SQL rules (plan "small"), not the reference plan (the checker itself): this batch is
    # the differential test of the SQL rules against the reference checker.
    summary = run_audit(spark, [str(tmp / "batch.parquet")], str(out), config, plan="small")
    got = []
    for name in ("violations", "observations"):
        table = pq.read_table(out / name)
        for r in table.to_pylist():
            got.append((r["trace_id"], r["code"], tuple(r["seqs"])))
    report = check(flat, PARAMS)
    ref = [(f.trace_id, f.code, f.seqs) for f in (*report.violations, *report.observations)]
    return Batch(
        rows=rows,
        truth=truth,
        spark=findings_by_trace(got),
        checker=findings_by_trace(ref),
        report=report,
        summary=summary,
        out=out,
    )
