"""The audit on a real Spark standalone cluster (issue 46): the same findings as a local run.

``scripts/spark-standalone start`` runs a master and two workers of one core each from the venv's PySpark,
bound to 127.0.0.1 only, every file under this module's tmp directory; ``stop`` ends them at teardown (a
failed test included). On that cluster, with the commands the cluster guide shows
(``docs/guide-audit.md``, "On a cluster": ``test_the_guide_shows_the_commands_this_tier_runs`` holds
them equal):

- ``python -m rmqspec.spark.submit --run`` (the zip built as a user builds it, ``spark-submit --master
  spark://…``) with Python workers and a driver that see rmqspec only through the zip
  (``tests/spark/bare_python.py``), on the reference plan, and on an incremental day (``--state-out`` on
  the reference plan, then ``--since`` on the small SQL plan, whose carry runs beside the audit);
- ``rmqspec audit --master spark://…`` on the small SQL plan (rmqspec installed where the executors run:
  the venv's Python);
- ``rmqspec check --master spark://…``, whose audit of its own traces is compared with a local audit of
  the same traces.

The scale plan (dozens of stages: minutes on a small input on 2 cores) is compared on 1 M events by
``python -m bench audit -- --master spark://…`` (``bench/audit_cluster.py``), run once per change of the
cluster path with its output in ``bench/results/``.

Each output is compared with ``rmqspec audit --master local[2]`` of the same input in this process:
violations, observations and rejected rows (every column of every row), ``summary.json`` (counts, rows
read and rejected, rules not judged and why, the incremental state's counts) but the wall time, the
master and the output paths. The inputs are generated traces with every violation and observation
code injected (``GenConfig(inject=…)``), a crash, rows Spark rejects and rows the driver rejects (JSONL),
a trace without drain, rows lacking fields and statuses the rules do not know. No RocketMQ is needed:
the tier runs under ``make interop INTEROP=quick`` (not in 5x).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmqspec.cli.main import main as rmqspec
from rmqspec.properties.codes import VIOLATION_CODES
from rmqspec.traces.generator import GenConfig, generate_rows
from rmqspec.traces.io import rows_to_table
from rmqspec.traces.notation import parse
from rmqspec.traces.scenarios import SCENARIOS
from tests.spark.bare_python import bare_python
from tests.spark.odd_trace import UNDRAINED

# make interop runs it after the wall-clock modules, never beside them (the Makefile)
pytestmark = pytest.mark.cpu_heavy

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "guide-audit.md"
INJECTED = tuple(SCENARIOS)  # every violation code and the observations the generator can plant
assert set(VIOLATION_CODES) <= set(INJECTED)
EVENTS = 4000  # per generated trace: every code injected, a crash
# summary.json keys that differ between any two runs, or name the master and the output
VOLATILE = ("wall_time_s", "events_per_s", "out", "master", "rejected_sample")


@attrs.frozen
class Commands:
    """The commands of the cluster guide, with its paths (``bin`` ``.venv/bin``, ``scripts`` ``scripts``)
    or this run's."""

    bin: str
    scripts: str

    def start(self, root: str) -> list[str]:
        return [f"{self.scripts}/spark-standalone", "start", "--dir", root]

    def stop(self, root: str) -> list[str]:
        return [f"{self.scripts}/spark-standalone", "stop", "--dir", root]

    def submit(self, zip_path: str, master: str, job_args: Sequence[str]) -> list[str]:
        return [f"{self.bin}/python", "-m", "rmqspec.spark.submit", "--zip", zip_path, "--master", master, "--run",
                "--", *job_args]  # fmt: skip

    def audit(self, master: str, args: Sequence[str]) -> list[str]:
        return [f"{self.bin}/rmqspec", "audit", *args, "--master", master]

    def check(self, master: str, out: str) -> list[str]:
        return [f"{self.bin}/rmqspec", "check", "--budget", "quick", "--out", out, "--master", master]


AS_DOCUMENTED = Commands(bin=".venv/bin", scripts="scripts")
HERE = Commands(bin=str(Path(sys.executable).parent), scripts=str(REPO / "scripts"))


@attrs.frozen
class Cluster:
    master: str
    root: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A master and two 1-core workers on 127.0.0.1, stopped at teardown whatever happened."""
    root = tmp_path_factory.mktemp("spark-cluster")
    try:
        done = subprocess.run(HERE.start(str(root)), capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        yield Cluster(done.stdout.strip(), root)
    finally:
        stopped = subprocess.run(HERE.stop(str(root)), capture_output=True, text=True, timeout=120, check=False)
        assert stopped.returncode == 0, stopped.stderr


@attrs.frozen
class Inputs:
    root: Path
    traces: tuple[str, ...]  # Parquet with rows Spark rejects, JSONL with rows the driver rejects
    config: str
    day1: str
    day2: str
    truth_codes: frozenset[str]  # what the generated traces hold, by injection


def _stored(rows: list[dict[str, Any]], trace_id: str) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        r = {**r, "detail": json.loads(r["detail"])} if isinstance(r.get("detail"), str) else dict(r)
        out.append({**r, "trace_id": trace_id})
    return out


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    root = tmp_path_factory.mktemp("spark-cluster-inputs")
    gen, truth = generate_rows(GenConfig(events=EVENTS, seed=46, inject=INJECTED, crashes=1))
    flat = _stored(gen, "gen") + _stored(parse(UNDRAINED), "odd")  # odd: no drain, an unknown status, at-risk keys
    table = rows_to_table(flat)
    events = table.column("event").to_pylist()
    events[5], events[700] = "warp", "teleport"  # rejected by Spark, by file#row
    table = table.set_column(table.schema.get_field_index("event"), "event", pa.array(events))
    pq.write_table(table, root / "traces.parquet")
    good = [json.dumps({k: v for k, v in r.items() if v is not None}) for r in _stored(parse(UNDRAINED), "jsonl")]
    lines = [*good[:3], "{not json", json.dumps({"seq": 99, "ts": "x", "event": "send", "trace_id": "jsonl"}),
             *good[3:], json.dumps({"seq": 20, "ts": 2000, "event": "deliver", "trace_id": "jsonl"})]
    (root / "more.jsonl").write_text("\n".join(lines) + "\n")  # rejected on the driver, by file:line
    topic = next(r["topic"] for r in gen if r["event"] == "send")
    config = root / "audit.json"
    config.write_text(json.dumps({"groupMaxReconsumeTimes": {"GSMALL": 2}, "subscriptions": {"GNOBODY": [topic]}}))

    whole, day_truth = generate_rows(GenConfig(events=EVENTS, seed=47, inject=INJECTED, crashes=1))
    cut = rows_to_table(whole).sort_by("seq")
    half = cut.num_rows // 2
    for name, part in (("day1", cut.slice(0, half)), ("day2", cut.slice(half))):
        (root / name).mkdir()
        pq.write_table(part, root / name / "part-00000.parquet")
    return Inputs(root, (str(root / "traces.parquet"), str(root / "more.jsonl")), str(config),
                  str(root / "day1"), str(root / "day2"),
                  frozenset(t["code"] for t in truth) | frozenset(t["code"] for t in day_truth))


# ------------------------------------------------------------------ runs


@attrs.frozen
class Audit:
    """What an audit wrote to ``out`` and its exit code."""

    code: int
    out: Path

    def table(self, name: str) -> pa.Table:
        return pq.read_table(self.out / name)

    @property
    def summary(self) -> dict[str, Any]:
        return json.loads((self.out / "summary.json").read_text())


def local(args: Sequence[str], out: Path) -> Audit:
    """``rmqspec audit ARGS --out OUT --master local[2]`` in this process (one local session for all)."""
    code = rmqspec(["audit", *args, "--out", str(out), "--master", "local[2]", "--quiet", "--json"])
    return Audit(code, out)


@pytest.fixture(scope="module")
def local_spark() -> Iterator[None]:
    """The local session ``local`` starts, stopped when the module is done."""
    yield
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


def _env(python: Path | str, root: Path) -> dict[str, str]:
    """A driver's environment: the executors' Python, loopback, scratch under ``root``."""
    scratch = root / "driver-local"
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYSPARK_PYTHON": str(python), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOCAL_DIRS": str(scratch), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for inherited in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME"):
        env.pop(inherited, None)
    return env


def _spawned(argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``argv`` in a process group of its own, killed whole (spark-submit's driver JVM and Python too)
    when the test stops waiting: a timeout, an interrupt."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          start_new_session=True) as proc:  # fmt: skip
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _run(argv: list[str], env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    done = _spawned(argv, env, timeout)
    assert done.returncode in (0, 1), f"{shlex.join(argv)} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done


def submitted(cluster: Cluster, job_args: Sequence[str], out: Path, bare: Path) -> Audit:
    """``python -m rmqspec.spark.submit --zip … --master spark://… --run -- ARGS --out OUT``."""
    zip_path = out.parent / "dist" / "rmqspec.zip"
    done = _run(HERE.submit(str(zip_path), cluster.master, [*job_args, "--out", str(out), "--quiet"]),
                _env(bare, out.parent))
    assert done.stderr.startswith(f"{Path(sys.executable).parent / 'spark-submit'} --master {cluster.master} "
                                  f"--py-files {zip_path} "), done.stderr[-2000:]
    return Audit(done.returncode, out)


def audited(cluster: Cluster, args: Sequence[str], out: Path) -> Audit:
    """``rmqspec audit ARGS --out OUT --master spark://…`` (the executors' Python: the venv's)."""
    done = _run(HERE.audit(cluster.master, [*args, "--out", str(out), "--quiet"]), _env(sys.executable, out.parent))
    return Audit(done.returncode, out)


# ------------------------------------------------------------------ comparison


def _rows(table: pa.Table) -> list[str]:
    return sorted(map(repr, table.to_pylist()))


def assert_same(got: Audit, want: Audit) -> None:
    """Every output row and every summary figure but the volatile ones are the local run's."""
    assert got.code == want.code
    for name in ("violations", "observations", "rejected"):
        mine, theirs = got.table(name), want.table(name)
        assert mine.schema.equals(theirs.schema), name
        assert _rows(mine) == _rows(theirs), name
    for name in ("violations", "observations"):
        order = [(r.get("trace_id") or "", r["seqs"][-1], r["code"], r["seqs"]) for r in got.table(name).to_pylist()]
        assert order == sorted(order), f"{name}: not in the audit's order"
    mine, theirs = got.summary, want.summary
    assert sorted(mine["rejected_sample"]) == sorted(theirs["rejected_sample"])
    for summary in (mine, theirs):
        for key in VOLATILE:
            summary.pop(key)
        for key in ("since", "state_out"):
            summary.get("incremental", {}).pop(key, None)
    assert mine == theirs


def _on_cluster(audit: Audit, cluster: Cluster) -> None:
    assert audit.summary["master"] == cluster.master


def _found(audit: Audit) -> set[str]:
    return {r["code"] for name in ("violations", "observations") for r in audit.table(name).to_pylist()}


def _executors(cluster: Cluster) -> dict[str, int]:
    """Per worker, the applications it ran executors for (``work/worker-N/app-…``)."""
    work = cluster.root / "work"
    return {w.name: len(list(w.glob("app-*"))) for w in sorted(work.iterdir())}


# ------------------------------------------------------------------ the tier


def _listening(pid: int) -> set[str]:
    """The local addresses process ``pid`` listens on (TCP, from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                address = fields[1].split(":")[0]
                out.add({"0100007F": "127.0.0.1", "0000000000000000FFFF00000100007F": "127.0.0.1"}.get(address,
                                                                                                        address))
    return out


def test_the_cluster_is_a_master_and_two_one_core_workers_on_loopback_only(cluster: Cluster) -> None:
    assert re.fullmatch(r"spark://127\.0\.0\.1:\d+", cluster.master)
    master_log = (cluster.root / "logs" / "master.log").read_text()
    workers = set(re.findall(r"Registering worker (127\.0\.0\.1:\d+) with 1 cores", master_log))
    assert len(workers) == 2, master_log[-3000:]
    pids = dict(line.split() for line in (cluster.root / "pids").read_text().splitlines())
    assert sorted(pids) == ["master", "worker-1", "worker-2"]
    for name, pid in pids.items():
        addresses = _listening(int(pid))
        assert addresses == {"127.0.0.1"}, f"{name} listens on {addresses}"


def _assert_full_input(want: Audit, inputs: Inputs) -> None:
    """The local run of the full input found what the tier is about (not a vacuous comparison)."""
    summary = want.summary
    assert want.code == 1 and summary["rows_rejected"] == 4  # 2 by Spark, 2 on the driver
    assert {"LOST", "OFFSET_OVERRUN", "LOCK_OVERLAP"} <= set(summary["not_judged"])
    assert inputs.truth_codes <= _found(want)  # every injection is found


def test_spark_submit_on_the_cluster_gives_the_local_findings(cluster, inputs, local_spark, tmp_path):
    """The reference plan (its Python judges on the executors); the SQL plan's full audit is
    ``rmqspec audit``'s below, its incremental day the next test's day 2."""
    args = [*inputs.traces, "--config", inputs.config, "--plan", "reference"]
    before = _executors(cluster)
    got = submitted(cluster, args, tmp_path / "cluster", bare_python(tmp_path))
    after = _executors(cluster)
    assert len(after) == 2 and all(after[w] == before.get(w, 0) + 1 for w in after)  # both workers ran executors
    want = local(args, tmp_path / "local")
    _on_cluster(got, cluster)
    assert_same(got, want)
    _assert_full_input(want, inputs)


def test_an_incremental_day_on_the_cluster_gives_the_local_findings(cluster, inputs, local_spark, tmp_path):
    """Day 1 on the reference plan (its job computes the state), day 2 on the small SQL plan (the carry
    runs beside the audit, on the driver)."""
    bare = bare_python(tmp_path)
    runs: dict[str, list[Audit]] = {}
    for where in ("cluster", "local"):
        (tmp_path / where).mkdir()
        state1, state2 = str(tmp_path / where / "state1"), str(tmp_path / where / "state2")
        days = ([inputs.day1, "--plan", "reference", "--state-out", state1],
                [inputs.day2, "--plan", "small", "--since", state1, "--state-out", state2])
        outs = (tmp_path / where / "day1", tmp_path / where / "day2")
        if where == "cluster":
            runs[where] = [submitted(cluster, args, out, bare) for args, out in zip(days, outs, strict=True)]
        else:
            runs[where] = [local(args, out) for args, out in zip(days, outs, strict=True)]
    for got, want in zip(runs["cluster"], runs["local"], strict=True):
        _on_cluster(got, cluster)
        assert_same(got, want)
    day2 = runs["local"][1]
    assert day2.summary["incremental"]["rows_carried_in"] > 0 and day2.code == 1
    assert inputs.truth_codes <= _found(runs["local"][0]) | _found(day2)


def test_rmqspec_audit_on_the_cluster_gives_the_local_findings(cluster, inputs, local_spark, tmp_path):
    """rmqspec installed where the executors run (the venv's Python), on the SQL plan (``small``)."""
    args = [*inputs.traces, "--config", inputs.config, "--plan", "small"]
    got = audited(cluster, args, tmp_path / "cluster")
    want = local(args, tmp_path / "local")
    _on_cluster(got, cluster)
    assert_same(got, want)
    _assert_full_input(want, inputs)


def test_rmqspec_check_on_the_cluster_audits_as_a_local_audit_does(cluster, local_spark, tmp_path):
    out = tmp_path / "check"
    done = _spawned(HERE.check(cluster.master, str(out)), _env(sys.executable, tmp_path), timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]  # the bundled broker conforms, its traces are clean
    checked = Audit(done.returncode, out / "audit")
    _on_cluster(checked, cluster)
    assert json.loads((out / "summary.json").read_text())["audit"]["events_read"] > 0
    want = local([str(out / "traces")], tmp_path / "local")
    assert_same(checked, want)


# ------------------------------------------------------------------ the guide


def _shown(doc: Path, heading: str) -> list[list[str]]:
    """The fenced command lines of ``doc``'s section ``heading``, as words (``MASTER=$(…)``: the command
    inside)."""
    text = doc.read_text(encoding="utf-8")
    section = text[text.index(heading):]
    section = section[: section.index("\n## ", 3)]
    out, fenced = [], False
    joined = ""
    for line in section.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            continue
        if line.rstrip().endswith("\\"):
            joined += line.rstrip()[:-1] + " "
            continue
        line, joined = joined + line, ""
        line = re.sub(r"^\w+=\$\((.*)\)\s*(#.*)?$", r"\1", line.strip())
        out.append(shlex.split(line, comments=True))
    return out


ENV = ["export", "SPARK_LOCAL_IP=127.0.0.1", "PYSPARK_PYTHON=$PWD/.venv/bin/python"]
SHOWN_CLUSTER = "build/spark-cluster"
SHOWN_AUDIT = AS_DOCUMENTED.audit("$MASTER", ["rmqspec-out/gen", "--out", "rmqspec-out/cluster-audit"])


def test_the_guide_shows_the_commands_this_tier_runs() -> None:
    shown = _shown(GUIDE, "## On a cluster")
    for argv in (
        ENV,
        AS_DOCUMENTED.start(SHOWN_CLUSTER),
        SHOWN_AUDIT,
        AS_DOCUMENTED.submit("dist/rmqspec.zip", "$MASTER", ["rmqspec-out/gen", "--out", "rmqspec-out/cluster-submit"]),
        AS_DOCUMENTED.check("$MASTER", "rmqspec-out/cluster-check"),
        AS_DOCUMENTED.stop(SHOWN_CLUSTER),
    ):
        assert argv in shown, f"{shlex.join(argv)} is not in {GUIDE}'s \"On a cluster\" section"


def test_the_readme_shows_the_commands_this_tier_runs() -> None:
    shown = _shown(REPO / "README.md", "## Use 3")
    for argv in (ENV, AS_DOCUMENTED.start(SHOWN_CLUSTER), SHOWN_AUDIT, AS_DOCUMENTED.stop(SHOWN_CLUSTER)):
        assert argv in shown, f"{shlex.join(argv)} is not in README.md's \"Use 3\" section"
