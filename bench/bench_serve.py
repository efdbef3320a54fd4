"""``rmqspec serve`` throughput: over the wire vs in-process, and the real Java client vs the real broker.

Two figures, each a ratio against a baseline measured in the same run:

1. **send+pull round trips per second** through a ``rmqspec serve`` subprocess (ASYNC flush; a blocking
   client on a socket: SEND_MESSAGE_V2, then PULL_MESSAGE of that message), against the same calls on
   an in-process ``MmapBroker`` on the wall clock (``send`` then ``pull``). Also printed: how long
   ``rmqspec serve`` takes from spawn to its ready line.
2. **Java-client msgs/s** (when we are root with Java and Maven): our own program
   ``bench/java/ServeBench.java`` (compiled with javac against the fixture's classpath; one topic, 4
   queues, a push consumer, one producer sending N messages synchronously) against ``rmqspec serve`` and
   against the real 4.9.8 name server + broker (``scripts/real-rocketmq start`` / ``stop``), each in its own
   network namespace, both ASYNC_FLUSH: send msgs/s and end-to-end msgs/s, and the ratios serve / real.

``python -m bench serve -- [-n N] [--java-n N] [--body BYTES] [--no-java]``
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rmqspec.impl.broker import MmapBroker
from rmqspec.model import BrokerConfig, Message, MessageQueue, WallClock
from rmqspec.remoting.command import RemotingCommand, request
from rmqspec.remoting.frame import FrameDecoder, encode_frame

REPO = Path(__file__).resolve().parents[1]
REAL_ROCKETMQ = REPO / "scripts" / "real-rocketmq"  # the project's fixture: official release jars
JAVA_CLIENT = "4.9.8"
CLIENT_HEAP = ["-Xms64m", "-Xmx256m", "-XX:MaxDirectMemorySize=256m", "-XX:+UseSerialGC"]
JDK17_OPTS = ["--add-opens", "java.base/java.nio=ALL-UNNAMED", "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
              "--add-opens", "java.base/java.lang=ALL-UNNAMED", "--add-opens", "java.base/java.util=ALL-UNNAMED"]
ASYNC_CONF = "flushDiskType=ASYNC_FLUSH\nmappedFileSizeCommitLog=67108864\n"


class _Client:
    """A minimal blocking remoting client (one request in flight)."""

    def __init__(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.opaque = itertools.count(1)

    def call(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
        opaque = next(self.opaque)
        self.sock.sendall(encode_frame(request(code, ext, body, opaque=opaque)))
        while True:
            for cmd in self.decoder.feed(self.sock.recv(1 << 20)):
                if cmd.is_response and cmd.opaque == opaque:
                    return cmd

    def close(self) -> None:
        self.sock.close()


def _start_serve(store: Path, conf: Path) -> tuple[subprocess.Popen[str], str, float]:
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "rmqspec.cli", "serve", "--store", str(store), "--config",
                             str(conf), "--namesrv-port", "0", "--port", "0"], stdout=subprocess.PIPE, text=True,
                            cwd=REPO)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    ready = time.monotonic() - started
    broker = line.split("broker=")[1].split()[0]
    return proc, broker, ready


def _wire_round_trips(broker: str, n: int, body: bytes) -> float:
    c = _Client(broker)
    c.call(17, {"topic": "RT", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
                "topicFilterType": "SINGLE_TAG", "order": "false"})
    send = {"a": "PG", "b": "RT", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0", "j": "0",
            "k": "false", "m": "false"}
    pull = {"consumerGroup": "G", "topic": "RT", "queueId": "0", "maxMsgNums": "32", "sysFlag": "4",
            "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0", "subscription": "*"}
    started = time.perf_counter()
    for i in range(n):
        r = c.call(310, {**send, "i": f"UNIQ_KEY\x01{i:032X}\x02TAGS\x01A"}, body)
        assert r.code == 0, r.remark
        r = c.call(11, {**pull, "queueOffset": str(i)})
        assert r.code == 0 and r.body, r.remark
    elapsed = time.perf_counter() - started
    c.close()
    return n / elapsed


def _in_process_round_trips(root: str, n: int, body: bytes) -> float:
    broker = MmapBroker.open(root, WallClock(), BrokerConfig(flush="ASYNC", commitlog_file_size=64 << 20))
    broker.create_topic("RT", 1)
    mq = MessageQueue("RT", 0)
    started = time.perf_counter()
    for i in range(n):
        broker.send(Message("RT", body, tags="A", uniq_key=f"{i:032X}", properties={"CLUSTER": "DefaultCluster"}), 0)
        assert broker.pull("G", mq, i, 32).messages
    elapsed = time.perf_counter() - started
    broker.close()
    return n / elapsed


# ----------------------------------------------------------------------------------------------
# Java client: rmqspec serve vs the real 4.9.8 broker


def _classpath() -> str:
    out = subprocess.run([str(REAL_ROCKETMQ), "classpath", "--version", JAVA_CLIENT], capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def _compile(build: Path, cp: str) -> None:
    subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "--release", "8", "-cp", cp, "-d", str(build),
                    str(REPO / "bench" / "java" / "ServeBench.java")], check=True, capture_output=True)


def _run_java(netns: str, cp: str, build: Path, home: Path, n: int, size: int, tag: str, threads: int) -> dict:
    cmd = ["ip", "netns", "exec", netns, "java", *CLIENT_HEAP, *JDK17_OPTS,
           f"-Duser.home={home}", f"-Drocketmq.client.logRoot={home}/logs", "-Drocketmq.client.logLevel=WARN",
           "-cp", f"{cp}:{build}", "ServeBench", "127.0.0.1:9876", str(n), str(size), tag, str(threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:  # a hung JVM: its whole process group goes
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=60)
    lines = [x for x in out.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"ServeBench failed ({proc.returncode}): {out[-2000:]} {err[-2000:]}")
    return json.loads(lines[-1])


def _java_against_serve(tmp: Path, cp: str, build: Path, n: int, size: int, threads: list[int]) -> tuple[list[dict],
                                                                                                       float]:
    netns = f"rmqspec-bench-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", netns], check=True, capture_output=True)
    proc = None
    try:
        subprocess.run(["ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up"], check=True)
        conf = tmp / "serve.conf"
        conf.write_text(ASYNC_CONF)
        started = time.monotonic()
        proc = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-m", "rmqspec.cli", "serve",
                                 "--store", str(tmp / "serve-store"), "--config", str(conf)],
                                stdout=subprocess.PIPE, text=True, cwd=REPO)
        assert proc.stdout is not None
        proc.stdout.readline()
        ready = time.monotonic() - started
        return [_run_java(netns, cp, build, tmp / "home-serve", n, size, f"s{os.getpid()}t{t}", t)
                for t in threads], ready
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)


def _java_against_real(tmp: Path, cp: str, build: Path, n: int, size: int, threads: list[int]) -> tuple[list[dict],
                                                                                                      float]:
    sd = tmp / "real"
    started = time.monotonic()
    out = subprocess.run([str(REAL_ROCKETMQ), "start", "--version", JAVA_CLIENT, "--dir", str(sd)],
                         capture_output=True, text=True, timeout=300)
    try:
        if out.returncode != 0:
            raise RuntimeError(f"real-rocketmq start failed: {out.stdout[-2000:]} {out.stderr[-2000:]}")
        ready = time.monotonic() - started
        netns = out.stdout.split("NETNS=")[1].split()[0]
        return [_run_java(netns, cp, build, tmp / "home-real", n, size, f"r{os.getpid()}t{t}", t)
                for t in threads], ready
    finally:
        subprocess.run([str(REAL_ROCKETMQ), "stop", "--dir", str(sd)], capture_output=True, timeout=300)


def _java_available() -> str | None:
    if shutil.which("mvn") is None:
        return "needs Maven (the release jars come from Maven Central)"
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("javac") is None or shutil.which("ip") is None:
        return "needs javac and ip"
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench serve")
    parser.add_argument("-n", type=int, default=2000, help="send+pull round trips (default 2000)")
    parser.add_argument("--java-n", type=int, default=5000, help="messages the Java benchmark sends (default 5000)")
    parser.add_argument("--body", type=int, default=128, help="body bytes (default 128)")
    parser.add_argument("--java-threads", default="1,4", help="producer threads, comma separated (default 1,4)")
    parser.add_argument("--no-java", action="store_true", help="skip the Java-client part")
    args = parser.parse_args(argv)
    body = b"x" * args.body

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        conf = tmp / "serve.conf"
        conf.write_text(ASYNC_CONF)
        proc, broker, ready = _start_serve(tmp / "store", conf)
        try:
            wire = _wire_round_trips(broker, args.n, body)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        local = _in_process_round_trips(str(tmp / "local"), args.n, body)
    print(f"rmqspec serve: spawn → ready {ready:.2f} s")
    print(f"send+pull round trips, {args.n} x {args.body} B body, ASYNC flush:")
    print(f"  through rmqspec serve (socket)   {wire:9.0f} round trips/s")
    print(f"  in-process MmapBroker            {local:9.0f} round trips/s")
    print(f"  ratio serve / in-process         {wire / local:9.2f}")

    if args.no_java:
        return 0
    missing = _java_available()
    if missing is not None:
        print(f"Java client vs real broker: not run ({missing})")
        return 0
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        cp = _classpath()
        build = tmp / "classes"
        build.mkdir()
        _compile(build, cp)
        threads = [int(t) for t in args.java_threads.split(",")]
        serve, serve_ready = _java_against_serve(tmp, cp, build, args.java_n, args.body, threads)
        real, real_ready = _java_against_real(tmp, cp, build, args.java_n, args.body, threads)
    print(f"Java 4.9.8 client (bench/java/ServeBench.java), {args.java_n} x {args.body} B, 4 queues, ASYNC_FLUSH:")
    print(f"  start to serving: rmqspec serve {serve_ready:.1f} s, real namesrv+broker {real_ready:.1f} s")
    for s_run, r_run in zip(serve, real, strict=True):
        for key, label in (("send_msgs_per_s", "sync send"), ("e2e_msgs_per_s", "send → consumed")):
            print(f"  {s_run['threads']} thread(s) {label:16s} rmqspec serve {s_run[key]:8.0f} msg/s   "
                  f"real 4.9.8 {r_run[key]:8.0f} msg/s   ratio {s_run[key] / r_run[key]:.2f}")
    return 0
