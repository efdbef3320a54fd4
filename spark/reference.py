"""The reference plan: the reference checker run inside Spark, for small inputs.

Theory of operation
-------------------
On a small input the SQL rules cost Spark's fixed costs, not the data: seconds of
Python plan building and Catalyst planning, and some 60 stages. This plan runs the
whole audit as one Spark job of one stage (``coalesce(1)``; inputs too large for one
task are repartitioned by trace instead): the rows of ``inputs.load`` — validated by
the same column expressions as the SQL plans, so the same rows are rejected with the
same positions and values are typed the same way — go through the DataFrame's RDD
(``mapPartitions``: pickled rows, no pandas needed, unlike ``mapInArrow`` in PySpark
4) to Spark's Python workers, where ``audit_rows`` groups them by trace, sorts each
trace by ``seq`` and runs the reference checker on it (``traces.checker.judged_trace``: the
detectors of ``traces/checks_*.py``, which ``tests/spark/test_audit.py`` holds equal
to the SQL rules finding for finding, less what rows lacking fields leave unjudged,
``traces.unjudged``). A row reaches the detectors as the dict the
checker gets from a trace reader (SPEC §8's columns, ``detail`` decoded from its
JSON text; text that is not JSON stays text, which the detectors read as no detail,
as the SQL rules do).

The worker returns dicts tagged by ``kind``: ``violation`` / ``observation`` (the
columns of ``rules.all_findings``), ``rejected`` (``position``, ``seq``, ``reason``)
and one ``facts`` dict per trace with valid rows (the valid row count, whether it has
a drain, the rows whose missing fields leave a rule partly unjudged and the rows with a status their rules
do not know — what the SQL plans' facts pass computes). For an incremental run that
writes a state (``rmqspec audit --state-out``) the same task also runs
``traces.carry.carry_trace`` on the trace it has just audited and returns the rows to
carry and the closed keys' tombstones (``keep`` / ``tomb``: Arrow IPC streams of the
trace schema, ``detail`` as its original text) and the open msg_keys (``open``): the
state costs no second read of the history (``Carried``). ``collect_audit`` collects
them (the input is small) into ``Collected``; ``spark/job.py`` writes the outputs and
``summary.json`` from it on the driver. Nothing here is specific to local mode:
the function and its arguments are pickled to the workers, which import
``rmqspec.traces`` (shipped in the ``--py-files`` zip on a cluster).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import pyarrow as pa
from pyspark.sql import DataFrame

from rmqspec.properties.codes import VIOLATION_CODES, AuditParams
from rmqspec.spark.inputs import AUDIT_COLUMNS
from rmqspec.spark.rules import FINDING_SCHEMA
from rmqspec.traces.carry import carry_trace
from rmqspec.traces.checker import judged_trace
from rmqspec.traces.checks_common import KEY_COLUMNS, unknown_statuses
from rmqspec.traces.schema import COLUMNS, SCHEMA
from rmqspec.traces.unjudged import Withheld

__all__ = ["FINDING_SCHEMA", "Carried", "Collected", "audit_rows", "carried_from_streams", "collect_audit",
           "decoded_rows", "ipc_stream"]

# The finding columns of ``rules.all_findings`` (``trace`` is written as ``trace_id``): ``FINDING_SCHEMA``.
INPUT_COLUMNS: tuple[str, ...] = ("trace", *AUDIT_COLUMNS, "detail", "position", "problem")


def _decoded(text: Any) -> Any:
    """``detail`` as the trace readers give it (a mapping); text that is not JSON stays text."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _trace_findings(
    trace: str, rows: list[dict[str, Any]], params: AuditParams, subscriptions: Mapping[str, Sequence[str]] | None
) -> Iterator[dict[str, Any]]:
    built, findings, lacking, withheld = judged_trace(rows, params, subscriptions)
    for f in findings:
        out: dict[str, Any] = {
            "kind": "violation" if f.code in VIOLATION_CODES else "observation",
            "code": f.code,
            "seqs": list(f.seqs),
            "trace": trace,
        }
        out.update({k: f.keys.get(k) for k in KEY_COLUMNS})
        out["reason"] = f.reason
        yield out
    yield {
        "kind": "facts",
        "trace": trace,
        "good": len(rows),
        "drain": built.drain_seq is not None,
        "lacking": lacking,
        "unknown": unknown_statuses(rows),
        "lasting": withheld.lasting(),
    }


def _trace_carry(
    trace: str, rows: list[dict[str, Any]], texts: Mapping[int, Any], subscriptions: Mapping[str, Sequence[str]] | None
) -> Iterator[dict[str, Any]]:
    """The trace's new state (``rows`` in seq order, as ``check_trace`` left them; ``texts``:
    each row's ``detail`` text by ``id(row)``): the rows to carry and the tombstones as Arrow IPC
    streams of the trace schema (a few bytes per row to pickle, where row tuples cost seconds
    for a day of rows), and the open msg_keys."""
    keep, tomb, open_keys = carry_trace(rows, subscriptions)
    for part, seqs in (("keep", keep), ("tomb", tomb)):
        chosen = [row for row in rows if row["seq"] in seqs]
        columns = [[texts[id(r)] for r in chosen] if c == "detail" else [r[c] for r in chosen] for c in COLUMNS]
        table = pa.Table.from_arrays([pa.array(col, f.type) for col, f in zip(columns, SCHEMA, strict=True)],
                                     schema=SCHEMA)
        yield {"kind": part, "trace": trace, "arrow": ipc_stream(table)}
    yield {"kind": "open", "trace": trace, "msg_keys": sorted(open_keys)}


def ipc_stream(table: pa.Table) -> bytes:
    """``table`` as the bytes of an Arrow IPC stream, its buffers compressed with zstd (the reader
    needs no option): a trace's carried rows, 1.06 M rows of every column, are 31 MB instead of
    194 MB, and written in 0.2 s instead of 1.1 s; the executor, the JVM and the driver move a
    sixth of the bytes."""
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table, max_chunksize=65_536)
    return sink.getvalue().to_pybytes()


def decoded_rows(records: Iterable[Mapping[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(trace, row) for valid records: the row as the checker gets it from a trace reader."""
    for rec in records:
        row = {c: rec[c] for c in COLUMNS}
        row["detail"] = _decoded(row["detail"])
        yield rec["trace"] or "", row


def audit_rows(
    records: Iterable[Mapping[str, Any]],
    params: AuditParams,
    subscriptions: Mapping[str, Sequence[str]] | None = None,
    carry: bool = False,
) -> Iterator[dict[str, Any]]:
    """Audit every trace of ``records`` (``INPUT_COLUMNS``; whole traces only): rejected rows,
    then per trace its findings and its facts (and with ``carry`` its new state)."""
    traces: dict[str, list[dict[str, Any]]] = {}
    good = []
    for rec in records:
        if rec["problem"] is not None:
            yield {"kind": "rejected", "position": rec["position"], "seq": rec["seq"], "reason": rec["problem"]}
        else:
            good.append(rec)
    texts: dict[int, Any] = {}
    for rec, (trace, row) in zip(good, decoded_rows(good), strict=True):
        traces.setdefault(trace, []).append(row)
        if carry:
            texts[id(row)] = rec["detail"]
    for trace, rows in traces.items():
        yield from _trace_findings(trace, rows, params, subscriptions)
        if carry:
            yield from _trace_carry(trace, rows, texts, subscriptions)


def _partition_function(
    params: AuditParams, subscriptions: Mapping[str, Sequence[str]] | None, carry: bool
) -> Callable[[Iterable[Any]], Iterator[dict[str, Any]]]:
    """What each Spark task runs: its partition's rows (pyspark ``Row``s) → ``audit_rows``."""

    def run(rows: Iterable[Any]) -> Iterator[dict[str, Any]]:
        # The checker allocates millions of small objects and frees almost none until the
        # task ends: the cyclic collector's passes over them cost ~25 % of the task; the
        # worker is reused, so it is switched back on afterwards.
        gc.disable()
        try:
            yield from audit_rows((r.asDict() for r in rows), params, subscriptions, carry)
        finally:
            gc.enable()

    return run


@attrs.frozen
class Carried:
    """An incremental run's new state from the audit's own job: the rows to carry and the
    closed keys' tombstones (Arrow tables of the trace schema plus ``trace``) and the open
    msg_keys of each trace."""

    rows: pa.Table
    tombstones: pa.Table
    open_keys: Mapping[str, frozenset[str]]


def carried_from_streams(
    parts: Mapping[str, list[tuple[str, bytes]]], open_keys: Mapping[str, frozenset[str]]
) -> Carried:
    """``Carried`` from the workers' Arrow IPC streams of the trace schema (``keep`` / ``tomb``:
    (trace, stream) each) and the open msg_keys of each trace."""

    def table(part: str) -> pa.Table:
        schema = SCHEMA.append(pa.field("trace", pa.string()))
        tables = []
        for trace, blob in parts[part]:
            got = pa.ipc.open_stream(blob).read_all()
            tables.append(got.append_column("trace", pa.array([trace] * got.num_rows, pa.string())))
        return pa.concat_tables(tables) if tables else schema.empty_table()

    return Carried(table("keep"), table("tomb"), open_keys)


@attrs.frozen
class Collected:
    """What the driver gets back: findings (dicts of ``FINDING_SCHEMA``), rejected rows
    (position, seq, reason) and the facts the summary needs."""

    findings: tuple[dict[str, Any], ...]
    rejected: tuple[tuple[str, int | None, str], ...]
    good: int
    has_drain: bool
    lacking: dict[tuple[str, str], int]
    unknown: dict[tuple[str, str], int]
    carried: Carried | None = None
    # per trace, what its rows lacking fields withhold beyond themselves (``Withheld.lasting``)
    withheld: Mapping[str, Withheld] = attrs.field(factory=dict)


def collect_audit(
    rows: DataFrame,
    params: AuditParams,
    subscriptions: Mapping[str, Sequence[str]] | None,
    partitions: int = 1,
    carry: bool = False,
) -> Collected:
    """Run the plan over ``rows`` (``inputs.load``'s frame) and collect it: one Spark job
    (with ``carry``, the new state of an incremental run too)."""
    frame = rows.select(*INPUT_COLUMNS)
    frame = frame.coalesce(1) if partitions <= 1 else frame.repartition(partitions, "trace")
    got = frame.rdd.mapPartitions(_partition_function(params, subscriptions, carry)).collect()
    findings: list[dict[str, Any]] = []
    rejected: list[tuple[str, int | None, str]] = []
    good, traces, drained = 0, 0, 0
    lacking: dict[tuple[str, str], int] = {}
    unknown: dict[tuple[str, str], int] = {}
    withheld: dict[str, Withheld] = {}
    state: dict[str, list[tuple[str, bytes]]] = {"keep": [], "tomb": []}
    open_keys: dict[str, frozenset[str]] = {}
    for r in got:
        kind = r["kind"]
        if kind in state:
            state[kind].append((r["trace"], r["arrow"]))
        elif kind == "open":
            open_keys[r["trace"]] = frozenset(r["msg_keys"])
        elif kind == "facts":
            if r["lasting"]:
                withheld[r["trace"]] = r["lasting"]
            good += r["good"]
            traces += 1
            drained += bool(r["drain"])
            for key, n in r["lacking"].items():
                lacking[key] = lacking.get(key, 0) + n
            for key, n in r["unknown"].items():
                unknown[key] = unknown.get(key, 0) + n
        elif kind == "rejected":
            rejected.append((r["position"], r["seq"], r["reason"]))
        else:
            findings.append(r)
    return Collected(
        findings=tuple(findings),
        rejected=tuple(sorted(rejected, key=_position_order)),
        good=good,
        has_drain=traces > 0 and drained == traces,
        lacking=lacking,
        unknown=unknown,
        carried=carried_from_streams(state, open_keys) if carry else None,
        withheld=withheld,
    )


def _position_order(rejected: tuple[str, int | None, str]) -> tuple[str, int]:
    """``file#row`` by file, then row number."""
    path, _, row = rejected[0].rpartition("#")
    return (path, int(row)) if row.isdigit() else (rejected[0], -1)
