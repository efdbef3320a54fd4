"""``rmqspec conform --replay FILE`` and ``--programs-out DIR``: a failure kept as a file replays.

A broken broker's failures are written by a real ``--programs-out`` run and replayed from the files
(exit 1 with the same violation; the model passes the same program); a hand-written program passes on
the model and, over the wire, twice against one ``rmqspec serve`` (fresh names, rebased offsets); a file
the machine cannot run is exit 2 naming the file and the line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqspec.cli.main import main
from rmqspec.properties.program import Op, parse, parse_lines, render
from tests.remoting.conftest import SHORT_DELAYS
from tests.remoting.serve_process import ServeProcess

ROOT = Path(__file__).resolve().parents[2]
# the broker's shortened timing, as the wire tests run it (the machine follows the file)
CONF = f"""messageDelayLevel = {SHORT_DELAYS}
transactionTimeOut = 2000
transactionCheckInterval = 3000
transactionCheckMax = 3
flushDiskType = SYNC_FLUSH
rocketmq.broker.rebalance.lockMaxLiveTime = 5000
"""

# create the topic and groups, send one message, pull it
SHORT = [
    Op.of("init", flush="SYNC", orderly_max=0, queues=1, retry_max=0, swarm=0),
    Op.of("send_plain", keys=(), props=False, queue=0, tags="TagA", topic=0),
    Op.of("pull", beyond=False, group=0, max_nums=32, mq=0),
]


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_program_that_passes_on_the_model_exits_0(tmp_path: Path, capsys) -> None:
    file = _write(tmp_path / "short.prog", "# a short program\n# written by hand\n" + render(SHORT) + "\n")
    assert main(["conform", "--replay", file, "--broker", "rmqspec.model:factory"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PASS: replayed 3 ops in "), out


def test_trace_out_keeps_the_replays_trace(tmp_path: Path, capsys) -> None:
    file = _write(tmp_path / "short.prog", render(SHORT))
    assert main(["conform", "--replay", file, "--broker", "rmqspec.impl:factory",
                 "--trace-out", str(tmp_path / "t")]) == 0, capsys.readouterr()
    events = [json.loads(row)["event"] for row in (tmp_path / "t" / "example-0001.jsonl").read_text().splitlines()]
    assert "send" in events and "deliver" in events and events[-1] == "drain", events


def test_programs_out_writes_failures_that_replay(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT / "tests")
    out_dir = tmp_path / "progs"
    code = main(["conform", "--broker", "broken_brokers:QueueOffsetSkips", "--examples", "100", "--steps", "30",
                 "--programs-out", str(out_dir)])
    run_out = capsys.readouterr().out
    assert code == 1, run_out
    files = sorted(out_dir.glob("failure-*.prog"))
    assert files and files[0].name == "failure-1.prog", run_out
    assert f"programs: {files[0]}" in run_out
    text = files[0].read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert header[0].startswith("# rmqspec conform: failure 1 of ") and "lockstep:send" in header[0]
    assert "# broker broken_brokers:QueueOffsetSkips; profile rocketmq-4.9;" in header[1]
    assert header[2] == (f"# replay: rmqspec conform --replay {files[0]} --broker broken_brokers:QueueOffsetSkips "
                         "--profile rocketmq-4.9")
    assert any("lockstep mismatch in send(" in line for line in header)
    program = parse(text)  # the comments are skipped
    assert program[0].rule == "init" and render(program) in run_out

    # the replay line, run: the same violation, exit 1
    argv = header[2].removeprefix("# replay: rmqspec ").split()
    assert main(argv) == 1
    replayed = capsys.readouterr().out
    assert replayed.startswith(f"FAIL: replayed {len(program)} ops in ") and "failed: lockstep:send" in replayed
    last_line = parse_lines(text)[-1][0]
    assert f"op {len(program)} ({program[-1].rule}, line {last_line})" in replayed
    assert "lockstep mismatch in send(" in replayed and "queue_offset: expected" in replayed
    # the program is the broker's fault, not the program's: the model passes it
    assert main(["conform", "--replay", str(files[0]), "--broker", "rmqspec.model:factory"]) == 0
    assert capsys.readouterr().out.startswith("PASS: ")


def test_programs_out_of_a_passing_run_writes_nothing(tmp_path: Path, capsys) -> None:
    out_dir = tmp_path / "progs"
    assert main(["conform", "--broker", "rmqspec.model:factory", "--examples", "2", "--steps", "5",
                 "--programs-out", str(out_dir)]) == 0, capsys.readouterr()
    assert out_dir.is_dir() and not list(out_dir.iterdir())
    assert "programs:" not in capsys.readouterr().out


def test_programs_out_that_cannot_be_a_directory_exits_2_before_the_run(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["conform", "--broker", "rmqspec.model:factory", "--programs-out", str(blocker / "progs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{blocker / 'progs'}: cannot create the programs directory" in err[0]


INIT = "    Op.of('init', flush='SYNC', orderly_max=0, queues=1, retry_max=0, swarm=0),\n"
BAD_FILES = {
    "empty.prog": ("# only a comment\n", "no ops"),
    "rule.prog": (f"PROGRAM = [\n{INIT}    Op.of('no_such_rule', n=1),\n]\n",
                  ":3: the conformance machine has no rule 'no_such_rule'"),
    "machinery.prog": (f"PROGRAM = [\n{INIT}    Op.of('teardown'),\n]\n", ":3: the conformance machine has no rule"),
    "args.prog": (f"PROGRAM = [\n{INIT}    Op.of('flush', now=True),\n]\n",
                  ":3: rule 'flush' does not take these arguments"),
    "first.prog": ("PROGRAM = [\n    Op.of('flush'),\n]\n", ":2: the first op must be init"),
    "syntax.prog": ("PROGRAM = [\n    Op.of('init', queues=1\n", ":2: not Python source"),
    "literal.prog": (f"PROGRAM = [\n{INIT}    Op.of('flush', n=len('x')),\n]\n", ":3: an op's rule and arguments"),
    "binary.prog": ("\udcff", "not UTF-8 text"),
    # runs, but the machine itself fails (n=0 messages to consume: it divides by it), not the broker
    "machine.prog": (f"PROGRAM = [\n{INIT}    Op.of('consume', ack_index=0, level=0, max_choice='none', n=0, "
                     "result='SUCCESS', which=0),\n]\n",
                     ":3: op 2 (consume) failed inside the conformance machine, not in the broker"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_a_program_the_machine_cannot_run_exits_2_naming_the_file(tmp_path: Path, capsys, name: str) -> None:
    text, reason = BAD_FILES[name]
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    assert main(["conform", "--replay", str(path), "--broker", "rmqspec.model:factory"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"rmqspec conform: error: {path}") and reason in err[0], err


@pytest.mark.parametrize("path", ["missing.prog", "."])
def test_a_missing_or_unreadable_file_exits_2(tmp_path: Path, capsys, path: str) -> None:
    target = str(tmp_path / path)
    assert main(["conform", "--replay", target, "--broker", "rmqspec.model:factory"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{target}: " in err[0] and ("no such file" in err[0] or "directory" in err[0])


@pytest.mark.parametrize("extra", [["--examples", "3"], ["--steps", "3"], ["--seed", "1"], ["--shrink-budget", "0"],
                                   ["--programs-out", "d"]])
def test_campaign_options_with_replay_are_a_usage_error(tmp_path: Path, capsys, extra: list[str]) -> None:
    file = _write(tmp_path / "short.prog", render(SHORT))
    assert main(["conform", "--replay", file, "--broker", "rmqspec.model:factory", *extra]) == 2
    err = capsys.readouterr().err
    assert "--replay runs one program" in err and extra[0] in err


def test_a_program_replays_over_the_wire_twice_against_one_serve(tmp_path: Path, capsys) -> None:
    """On the wall clock each replay uses fresh names and sees the long-running broker's queues rebased to
    zero (``properties/session.py``): the same program passes again."""
    conf = _write(tmp_path / "broker.conf", CONF)
    file = _write(tmp_path / "short.prog", "# send one message, pull it\n" + render(SHORT))
    proc = ServeProcess(tmp_path / "store", "--config", conf).start()
    try:
        for _ in range(2):
            code = main(["conform", "--replay", file, "--broker", f"rocketmq://{proc.namesrv}", "--config", conf])
            out = capsys.readouterr().out
            assert code == 0, out
            assert out.startswith("PASS: replayed 3 ops in ") and "\nwall clock: tolerance 500 ms" in out
    finally:
        proc.kill()
