"""Incremental audits (``rmqspec audit DAY --since STATE_DIR --state-out STATE_DIR2``).

Theory of operation
-------------------
A state directory holds what one run carries into the next (``traces/carry.py`` says which rows
and why):

```
STATE_DIR/state.json   {"format": "rmqspec-audit-state", "version": 1, "params": {...},
                        "has_trace_id": bool, "last_seq": {trace: seq}, "rows": n, "closed": n,
                        "findings": n}
STATE_DIR/rows/        Parquet, the trace schema (+ trace_id): rows audited again with the next day
STATE_DIR/closed/      Parquet, same schema: closed keys' tombstones, read back only for the keys
                       the next day touches (its msg_keys, the topics that gain a consumer group);
                       a file per day (tombstones-*.parquet), the earlier days' files linked
                       from the state before; a file holding a tombstone the day pulled back
                       is written anew without it
STATE_DIR/closed_keys/ Parquet, a file per closed/ file: its distinct keys, what the pull reads
                       to find the tombstones a day touches (``spark/closed_keys.py``)
STATE_DIR/findings/    Parquet, the findings output's columns: findings that are final
```

``run(...)``: (1) the state is read and checked (format, version, the same audit parameters and
subscriptions, the files); (2) the day's valid rows must all lie beyond the state's last seq of
their trace; (3) the tombstones the day touches are pulled (2 and 3: ``spark/pull.py``, on the
driver with pyarrow when the files allow, else Spark jobs); (4) ``job.run_audit`` audits the
carried rows, the pulled ones and the day as one history; (5) its findings are merged with the
stored ones (``traces.carry.merge``) and the outputs are rewritten; (6) with ``--state-out``, the
carried rows of the new history are written with the tombstones and the final findings: on the
reference plan the audit's own job computed them (``traces.carry.carry_trace`` next to the checker,
``reference.Carried``: no second read of the history); on the SQL plans ``spark/carry.py`` reads
the history again and runs ``carry_trace``'s rules once per trace, in a thread of its own started
before the audit (``_Alongside``): on the driver when the history is local Parquet the driver can
validate and the whole history is within ``TRACE_CARRY_ROWS`` rows (``collect_local``: pyarrow,
no Spark job), else as a Spark task per trace that shares the cores with the audit's jobs
(``collect_per_trace``; the same ``Carried`` both ways), or, for a trace beyond
``TRACE_CARRY_ROWS`` rows (the day's rows per trace plus the carried rows bound it; counted when
the bound exceeds it), its aggregations after the audit. Any problem with STATE_DIR is an
``InputError`` naming the file and the reason.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rmqspec.properties.codes import OBSERVATION_CODES, VIOLATION_CODES
from rmqspec.spark import carry as carry_mod
from rmqspec.spark import closed_keys, pull
from rmqspec.spark import inputs as inputs_mod
from rmqspec.spark.config import AuditConfig
from rmqspec.spark.errors import StateError
from rmqspec.spark.reference import Carried
from rmqspec.traces.carry import merge, to_store, withheld_out
from rmqspec.traces.errors import TraceReadError
from rmqspec.traces.schema import COLUMNS

FORMAT = "rmqspec-audit-state"
VERSION = 1
OUTPUT_KEYS = ("group", "topic", "queue_id", "msg_key", "client_id", "txn_id")


@attrs.frozen
class State:
    path: str
    has_trace_id: bool
    last_seq: dict[str, int]
    params: dict[str, Any]


def fingerprint(config: AuditConfig) -> dict[str, Any]:
    """The audit parameters a state was made with (JSON-able); the next run must use the same."""
    params = attrs.asdict(config.params)
    params = {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}
    params["group_retry_max"] = [list(p) for p in config.params.group_retry_max]
    params["subscriptions"] = {g: sorted(ts) for g, ts in sorted(config.subscriptions.items())}
    if not params["op_batch_ms"]:  # ops written at the END (4.9, 5.0): as states from before op batching
        del params["op_batch_ms"]
    return params


def read_state(path: str, config: AuditConfig) -> State:
    """The state at ``path`` checked against ``config``; raises ``StateError``."""
    root = Path(path)
    meta = root / "state.json"
    if not root.is_dir():
        raise StateError(f"{root}: not a state directory (no such directory)")
    try:
        data = json.loads(meta.read_text())
    except FileNotFoundError:
        raise StateError(f"{meta}: missing (not a state written by --state-out)") from None
    except (OSError, ValueError) as exc:
        raise StateError(f"{meta}: unreadable: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StateError(f"{meta}: not an audit state (format is not {FORMAT!r})")
    if data.get("version") != VERSION:
        raise StateError(f"{meta}: version {data.get('version')!r}, this rmqspec reads version {VERSION}")
    last_seq = data.get("last_seq")
    if not isinstance(last_seq, dict) or not all(isinstance(v, int) for v in last_seq.values()):
        raise StateError(f"{meta}: 'last_seq' must map traces to integers")
    if data.get("params") != fingerprint(config):
        theirs, ours = data.get("params") or {}, fingerprint(config)
        differ = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
        raise StateError(
            f"{meta}: made with other audit parameters ({', '.join(differ)}): use the same --config and --profile")
    for name in ("rows", "closed", "findings"):
        part = root / name
        if not part.is_dir() or not any(part.glob("*.parquet")):
            raise StateError(f"{part}: missing or without Parquet files")
    return State(str(root), bool(data.get("has_trace_id")), {str(k): v for k, v in last_seq.items()},
                 data["params"])


def _typed(df: DataFrame) -> DataFrame:
    """Rows of the trace schema (+ trace as text) with the row validation's problem column."""
    cols, problem = inputs_mod._problem(df)
    trace = F.lit("")
    if "trace_id" in df.columns:
        raw = F.col("trace_id").cast("string")
        decoded = F.get_json_object(F.concat(F.lit('{"v":'), raw, F.lit("}")), "$.v")
        trace = F.coalesce(F.when(raw.rlike('^".*"$'), decoded).otherwise(raw), F.lit(""))
    detail = F.col("detail").cast("string") if "detail" in df.columns else F.lit(None).cast("string")
    return df.select(trace.alias("trace"), *cols, detail.alias("detail"), problem.alias("problem"))


def _read(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """The valid rows of ``files`` (the audit's row validation), typed, with ``trace``."""
    return _typed(_raw(spark, files)).filter(F.col("problem").isNull()).drop("problem")


def _raw(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    return spark.read.option("mergeSchema", "true").parquet(*files)


def _parquet_rows(path: str) -> int:
    return sum(pq.ParquetFile(f).metadata.num_rows for f in Path(path).glob("*.parquet"))


def _with_crashes(spark: SparkSession, rows: DataFrame) -> DataFrame:
    marks = rows.filter(F.col("event").isin("crash", "recover")).select("trace", "seq", "event").collect()
    by: dict[str, tuple[list[int], list[int]]] = {}
    for r in marks:
        b = by.setdefault(r["trace"], ([], []))
        b[0].append(r["seq"])
        if r["event"] == "crash":
            b[1].append(r["seq"])
    if not by:
        return rows.withColumn("epoch", F.lit(0)).withColumn("crashes", F.lit(0))
    table = spark.createDataFrame([(t, b, c) for t, (b, c) in by.items()],
                                  "trace string, bounds array<bigint>, crash_seqs array<bigint>")
    joined = rows.join(F.broadcast(table), "trace", "left")
    bounds = F.coalesce(F.col("bounds"), F.array().cast("array<bigint>"))
    crashes = F.coalesce(F.col("crash_seqs"), F.array().cast("array<bigint>"))
    return joined.withColumn("epoch", F.size(F.filter(bounds, lambda b: b < F.col("seq")))).withColumn(
        "crashes", F.size(F.filter(crashes, lambda b: b < F.col("seq")))).drop("bounds", "crash_seqs")


def _write_frame(rows: DataFrame, path: str, has_trace_id: bool) -> None:
    """``rows`` (a DataFrame) as one Parquet file of the trace schema under ``path``, written by Spark
    (``job.write_rows`` writes rows the driver holds)."""
    cols = [F.col(c) for c in COLUMNS]
    if has_trace_id:
        cols.append(F.col("trace").alias("trace_id"))
    rows.select(*cols).coalesce(1).write.mode("overwrite").parquet(path)


def _findings(path: str) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


@attrs.frozen
class OldClosed:
    """The earlier tombstones that go on into the new state: the files of the previous state's
    ``closed/`` (none without an earlier state), less the tombstones the day pulled back
    (``pulled``: their (``trace_id``,) ``seq``). A file without any of those is linked as it is; one
    with some is rewritten without them (pyarrow, on the driver: state directories are local)."""

    files: str | None = None
    pulled: pa.Table | None = None

    def write(self, closed_dir: Path) -> None:
        """Into ``closed_dir``, emptied first, with their key indexes (``closed_keys``)."""
        for d in (closed_dir, closed_keys.index_dir(closed_dir)):
            shutil.rmtree(d, ignore_errors=True)
        closed_dir.mkdir(parents=True)
        keys = self.pulled.column_names if self.pulled is not None and self.pulled.num_rows else None
        for f in sorted(Path(self.files).glob("*.parquet")) if self.files else ():
            if keys and pq.read_table(f, columns=keys).join(self.pulled, keys, join_type="left semi").num_rows:
                pq.write_table(pq.read_table(f).join(self.pulled, keys, join_type="left anti"), closed_dir / f.name)
                closed_keys.write(closed_dir / f.name)
                continue
            closed_keys.link_or_copy(f, closed_dir / f.name)
            closed_keys.link(f, closed_dir / f.name)


def _tombstones_file(closed_dir: Path) -> Path:
    """A new file of tombstones in ``closed_dir``: one per day, next to the earlier days' files."""
    return closed_dir / f"tombstones-{uuid.uuid4().hex[:16]}.parquet"


def _write_carried(
    carried: Carried, old_closed: OldClosed, state_out: str, has_trace_id: bool
) -> dict[str, frozenset[str]]:
    """A state computed as a ``reference.Carried`` (the reference plan's audit job, or
    ``carry.collect_per_trace``) written from the driver with pyarrow: ``rows/``, and ``closed/`` =
    the earlier tombstones not pulled back (``old_closed``) plus the new ones. Returns the open
    msg_keys per trace."""

    def write(table: pa.Table, path: Path) -> None:
        trace = table.column("trace")
        table = table.drop_columns(["trace"])
        pq.write_table(table.append_column("trace_id", trace) if has_trace_id else table, path)

    rows_dir, closed_dir = Path(state_out) / "rows", Path(state_out) / "closed"
    shutil.rmtree(rows_dir, ignore_errors=True)
    rows_dir.mkdir()
    write(carried.rows, rows_dir / "part-00000.parquet")
    old_closed.write(closed_dir)
    tombstones = _tombstones_file(closed_dir)
    write(carried.tombstones, tombstones)
    closed_keys.write(tombstones)
    return dict(carried.open_keys)


def _carry_by_spark(
    spark: SparkSession,
    day: DataFrame,
    carried_files: Sequence[str],
    old_closed: OldClosed,
    state_out: str,
    has_trace_id: bool,
    config: AuditConfig,
    plan: str,
    day_files: Sequence[str],
    vis_keys: set[str],
    work: Path,
) -> dict[str, frozenset[str]]:
    """The SQL plans' state for a history with a trace beyond ``TRACE_CARRY_ROWS`` rows: the
    aggregations of ``carry.carry`` over the history read again, tuned like the audit. Returns
    the open msg_keys among ``vis_keys`` (the caller needs no others)."""
    from rmqspec.spark import job

    inputs = [*day_files, *carried_files]
    tuning = dict(job.SMALL_INPUT_CONF) if job.is_small_plan(plan, inputs) else {
        "spark.sql.shuffle.partitions": str(job._shuffle_partitions(spark, day_files))}
    saved = {key: spark.conf.get(key, None) for key in tuning}
    for key, value in tuning.items():
        spark.conf.set(key, value)
    try:
        history = _with_crashes(spark, _history(spark, day, carried_files)).persist()
        keep, tomb, open_keys = carry_mod.carry(spark, history, config.subscriptions)
        _write_frame(history.join(keep, ["trace", "seq"], "left_semi"), f"{state_out}/rows", has_trace_id)
        new_closed = history.join(tomb, ["trace", "seq"], "left_semi").select(*day.columns)
        _write_frame(new_closed, str(work / "closed"), has_trace_id)
        closed_dir = Path(state_out) / "closed"
        old_closed.write(closed_dir)
        for f in (work / "closed").glob("*.parquet"):
            tombstones = _tombstones_file(closed_dir)
            shutil.move(f, tombstones)
            closed_keys.write(tombstones)
        opened: dict[str, set[str]] = {}
        if vis_keys:
            for r in open_keys.filter(F.col("msg_key").isin(*vis_keys)).collect():
                opened.setdefault(r["trace"], set()).add(r["msg_key"])
        history.unpersist()
        spark.catalog.clearCache()
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
    return {t: frozenset(keys) for t, keys in opened.items()}


def _history(spark: SparkSession, day: DataFrame, carried_files: Sequence[str]) -> DataFrame:
    """The valid rows of the day and of the carried files (the history audited this run)."""
    return day.unionByName(_read(spark, carried_files)) if carried_files else day


class _Alongside:
    """The new state in a thread of its own, started before the audit; it needs nothing the audit
    computes. With ``files`` (the history's, when the driver may hold it): ``carry.collect_local``
    on the driver (pyarrow and numpy release the GIL the audit's thread barely needs while it
    waits for its jobs); when that cannot answer, ``carry.collect_per_trace``: Spark runs the jobs
    of several threads at once, so its one task per trace (mostly Python) shares the cores with
    the audit's jobs instead of following them. ``write`` (the run's ``_write_carried``) writes
    the state's rows and tombstones in the same thread as soon as they are known, so that the
    audit's end waits for nothing (``run`` removed the target's ``state.json`` first: a failed run
    leaves no state that looks whole). ``result`` waits for it; ``cancel`` stops its Spark job (its
    job group) and waits."""

    GROUP = "rmqspec-incremental-carry"

    def __init__(
        self,
        spark: SparkSession,
        history: DataFrame,
        config: AuditConfig,
        partitions: int,
        files: Sequence[str] = (),
        write: Callable[[Carried], Any] | None = None,
    ) -> None:
        self._spark = spark
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rmqspec-carry")
        self._future = pool.submit(self._run, history, config, partitions, files, write)
        pool.shutdown(wait=False)

    def _run(
        self,
        history: DataFrame,
        config: AuditConfig,
        partitions: int,
        files: Sequence[str],
        write: Callable[[Carried], Any] | None,
    ) -> Any:
        carried = None
        if files:  # the history's files, when the driver may hold all of it: read here, no Spark job
            carried = carry_mod.collect_local(files, config.subscriptions)
        if carried is None:
            self._spark.sparkContext.setJobGroup(self.GROUP, "incremental audit: the carried state", True)
            carried = carry_mod.collect_per_trace(history, config.subscriptions, partitions)
        return carried if write is None else write(carried)

    def result(self) -> Any:
        """The ``Carried``, or what ``write`` returned for it."""
        return self._future.result()

    def cancel(self) -> None:
        self._spark.sparkContext.cancelJobGroup(self.GROUP)
        with contextlib.suppress(Exception):  # cancelled: the caller raises its own error
            self._future.result()


def state_rows(state: State) -> int:
    """Rows in the state's ``rows/`` (from the Parquet footers)."""
    return _parquet_rows(f"{state.path}/rows")


def run(
    spark: SparkSession,
    paths: Sequence[str],
    out: str,
    config: AuditConfig,
    since: str | None,
    state_out: str | None,
    *,
    on_stage: Callable[[str], None],
    plan: str = "auto",
) -> Any:
    """The incremental audit; returns the ``AuditSummary`` of the whole history's findings."""
    from rmqspec.spark.job import AuditSummary, _shuffle_partitions, choose_plan, run_audit, write_rows

    start = time.monotonic()
    state = read_state(since, config) if since else None
    if state_out and since and Path(state_out).resolve() == Path(since).resolve():
        raise StateError(f"{state_out}: --state-out must differ from --since (the state is read while writing)")
    work = Path(out) / "_incremental"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    on_stage("prepare inputs")
    prepared = inputs_mod.prepare(paths, out)
    if not prepared.parquet:
        raise TraceReadError(", ".join(paths), "no rows to audit")
    try:
        raw = _raw(spark, prepared.parquet)
        day = _typed(raw).filter(F.col("problem").isNull()).drop("problem")
    except Exception as exc:  # pyspark raises several unrelated types here
        raise TraceReadError(", ".join(paths), f"cannot read as Parquet: {str(exc).splitlines()[0]}") from None
    has_trace_id = "trace_id" in raw.columns
    on_stage("check the day against the state")
    if state is not None and state.has_trace_id != has_trace_id:
        raise StateError(f"{state.path}/state.json: the state's traces {'have' if state.has_trace_id else 'lack'}"
                         f" a trace_id column and the day's {'do' if has_trace_id else 'do not'}")
    if state is not None:
        on_stage("pull closed keys")
    since_state = state.path if state is not None else None
    found = pull.local(prepared.parquet, since_state, work / "pulled")
    if found is None:  # not local Parquet whose validation the driver can state: Spark jobs
        found = pull.by_spark(spark, day, since_state, work / "pulled", has_trace_id)
    bounds = {t: (first, last) for t, (first, last, _n) in found.bounds.items()}
    carried_files: list[str] = []
    pulled_n = found.pulled
    if state is not None:
        for trace, (first, _last) in sorted(bounds.items()):
            last = state.last_seq.get(trace)
            if last is not None and first <= last:
                name = f"trace {trace!r}" if has_trace_id else "the trace"
                raise StateError(
                    f"{state.path}/state.json: {name} ends at seq {last} but {', '.join(paths)} has seq "
                    f"{first}: not the day after this state")
        carried_files.append(f"{state.path}/rows")
        if pulled_n:
            carried_files.append(str(work / "pulled"))
    inputs = [*prepared.parquet, *carried_files]
    resolved = choose_plan(plan, inputs)
    carried_in = (state_rows(state) + pulled_n) if state else 0
    alongside = None
    old_closed = OldClosed()  # the earlier tombstones that go on into the new state
    if state_out:
        target = Path(state_out)
        target.mkdir(parents=True, exist_ok=True)
        (target / "state.json").unlink(missing_ok=True)  # not a state until this run has written all of it
        if state is not None:
            pulled_keys = ["trace_id", "seq"] if has_trace_id else ["seq"]
            old_closed = OldClosed(f"{state.path}/closed",
                                   pq.read_table(work / "pulled", columns=pulled_keys) if pulled_n else None)
    if state_out and resolved != "reference":
        history = _history(spark, day, carried_files)
        traces = len(set(bounds) | set(state.last_seq if state else ()))
        # a bound on the longest trace
        longest = max((n for _f, _l, n in found.bounds.values()), default=0) + carried_in
        if longest > carry_mod.TRACE_CARRY_ROWS:  # the bound does not settle it: count
            traces, longest = history.groupBy("trace").count().agg(F.count("*"), F.max("count")).first()
        if (longest or 0) <= carry_mod.TRACE_CARRY_ROWS:  # carry_trace's rules, a task per trace
            partitions = 1 if traces <= 1 else min(traces, _shuffle_partitions(spark, inputs))
            total = sum(n for _f, _l, n in found.bounds.values()) + carried_in  # every trace, on the driver
            local = inputs if total <= carry_mod.TRACE_CARRY_ROWS else []
            alongside = _Alongside(spark, history, config, partitions, local,  # written as soon as computed
                                   lambda c: _write_carried(c, old_closed, state_out, has_trace_id))
    on_stage("audit")
    try:
        summary = run_audit(spark, inputs, out, config, on_stage=on_stage, plan=resolved,
                            carry=state_out is not None, lasting=state is not None)
    except BaseException:
        if alongside is not None:
            alongside.cancel()
        raise

    on_stage("merge findings")
    trace_of = (lambda t: t) if has_trace_id else (lambda _t: None)
    last_seq = {trace_of(t): s for t, s in (state.last_seq.items() if state else ())}
    stored = _findings(f"{state.path}/findings") if state else []
    # a row of the day lacking a field may leave a stored finding unjudged (``traces/unjudged.py``)
    stored = withheld_out(stored, {trace_of(t): w for t, w in summary.withheld.items()})
    audited = _findings(f"{out}/violations") + _findings(f"{out}/observations")
    kinds = {c: "violations" for c in VIOLATION_CODES} | {c: "observations" for c in OBSERVATION_CODES}
    merged = merge(stored, audited, last_seq)
    schema = spark.read.parquet(f"{out}/violations").schema
    names = schema.fieldNames()
    for name in ("violations", "observations"):  # from the driver (the findings are in memory)
        write_rows(spark, [tuple(f.get(c) for c in names) for f in merged if kinds[f["code"]] == name], schema,
                   f"{out}/{name}")
    counts = {c: 0 for c in kinds}
    for f in merged:
        counts[f["code"]] += 1

    state_json: dict[str, Any] | None = None
    if state_out:
        on_stage("carry state")
        vis_keys = {f.get("msg_key") for f in merged if f["code"].startswith("TXN_") and "VISIBLE" in f["code"]}
        vis_keys.discard(None)
        if summary.carried is not None:  # the reference plan computed the state in the audit's job
            open_keys = _write_carried(summary.carried, old_closed, state_out, has_trace_id)
        elif alongside is not None:  # computed and written next to the audit
            open_keys = alongside.result()
        else:
            open_keys = _carry_by_spark(spark, day, carried_files, old_closed, state_out, has_trace_id,
                                        config, plan, prepared.parquet, vis_keys, work)
        opened: dict[str | None, set[str]] = {}
        for trace, keys in open_keys.items():
            if keys & vis_keys:
                opened.setdefault(trace_of(trace), set()).update(keys & vis_keys)
        final = to_store(merged, opened)
        write_rows(spark, [tuple(f.get(c) for c in names) for f in final], schema, f"{state_out}/findings")
        new_last = dict(state.last_seq) if state else {}
        for trace, (_first, last) in bounds.items():
            new_last[trace] = max(new_last.get(trace, -1), last)
        state_json = {
            "format": FORMAT,
            "version": VERSION,
            "params": fingerprint(config),
            "has_trace_id": has_trace_id,
            "last_seq": new_last,
            "rows": _parquet_rows(f"{state_out}/rows"),
            "closed": _parquet_rows(f"{state_out}/closed"),
            "findings": len(final),
        }
        (target / "state.json").write_text(json.dumps(state_json, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    result = AuditSummary(
        violations={c: counts[c] for c in VIOLATION_CODES},
        observations={c: counts[c] for c in OBSERVATION_CODES},
        events_read=summary.events_read - carried_in,
        rows_rejected=summary.rows_rejected,
        not_judged=summary.not_judged,
        wall_time_s=time.monotonic() - start,
        inputs=tuple(paths),
        master=summary.master,
        out=out,
        rejected_sample=summary.rejected_sample,
        samples=tuple((f["code"], tuple(f["seqs"]), f["reason"]) for f in merged if kinds[f["code"]] == "violations")[
            :10],
    )
    extra = {"incremental": {"since": since, "state_out": state_out, "rows_carried_in": carried_in,
                             "tombstones_pulled": pulled_n, "state": state_json}}
    (Path(out) / "summary.json").write_text(json.dumps(result.as_json() | extra, indent=2) + "\n")
    return result


__all__ = ["StateError", "read_state", "run"]
