"""``rmqspec serve`` as the client scenario tests run it: in a network namespace of their own, or on the host.

Both scenario tests (the Java 4.9.8 client, the Go client v2) serve with the scenario timing
(``realrmq.SCENARIO_TIMING``, the broker lock lifetime as ``rocketmq.broker.rebalance.lockMaxLiveTime``)
and write ``rmq.env`` beside the store, so ``scripts/real-rocketmq scenarios --dir`` finds the namespace
and the name server as it does for a real broker. Against a 5.x broker they serve ``--profile
SERVE_PROFILE[version]`` with the 5.x scenario lines (``realrmq.SCENARIO_5X``) added to broker.conf.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.interop.realrmq import DELAYS, LOCK_MS, SCENARIO_5X

REPO = Path(__file__).resolve().parents[2]
BROKER_CONF = f"""brokerClusterName=DefaultCluster
brokerName=broker-a
listenPort=10911
brokerIP1=127.0.0.1
messageDelayLevel={DELAYS}
transactionTimeOut=2000
transactionCheckInterval=3000
transactionCheckMax=3
flushDiskType=SYNC_FLUSH
rocketmq.broker.rebalance.lockMaxLiveTime={LOCK_MS}
mappedFileSizeCommitLog=67108864
"""
# the profile serve runs as when its figures are compared with a real broker of that version
SERVE_PROFILE = {"4.9.8": "rocketmq-4.9", "5.3.3": "rocketmq-5.2", "5.5.1": "rocketmq-5.5"}


def serve_conf(version: str) -> str:
    """serve's broker.conf for the comparison with a real broker of ``version``."""
    return BROKER_CONF + "".join(f"{line}\n" for line in (SCENARIO_5X if version.startswith("5.") else []))


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Served:
    def __init__(self, root: Path, netns: str, version: str = "4.9.8") -> None:
        self.root, self.netns, self.version = root, netns, version
        self.profile = SERVE_PROFILE[version]
        self.proc: subprocess.Popen[str] | None = None
        self.ready = ""
        self.spawn_to_ready_s = 0.0
        self.exit_code: int | None = None

    def start(self) -> None:
        """serve in the namespace on the fixed ports, or (netns "host") on the host network on free ports."""
        (self.root / "broker.conf").write_text(serve_conf(self.version))
        self.stderr = (self.root / "serve.stderr").open("w")
        on_host = self.netns == "host"
        cmd = [*([] if on_host else ["ip", "netns", "exec", self.netns]), sys.executable, "-m", "rmqspec.cli",
               "serve", "--store", str(self.root / "store"), "--config", str(self.root / "broker.conf"),
               "--trace-out", str(self.root / "trace"), "--profile", self.profile,
               *(["--namesrv-port", "0", "--port", "0"] if on_host else [])]
        started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr, text=True, cwd=REPO)
        assert self.proc.stdout is not None
        self.ready = self.proc.stdout.readline().strip()
        self.spawn_to_ready_s = time.monotonic() - started
        if not on_host:
            assert "ready namesrv=127.0.0.1:9876 broker=127.0.0.1:10911" in self.ready, self.ready
        namesrv = self.ready.split("namesrv=", 1)[1].split()[0]
        (self.root / "rmq.env").write_text(f"RMQ_NETNS={self.netns}\nRMQ_NAMESRV={namesrv}\n")

    def stop(self) -> int:
        if self.proc is not None and self.exit_code is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate(timeout=30)
            self.exit_code = self.proc.returncode
            self.stderr.close()
        return self.exit_code if self.exit_code is not None else -1


@contextmanager
def served_in_namespace(root: Path, netns: str, ipv6: str | None = None, version: str = "4.9.8"
                        ) -> Iterator[Served]:
    """serve in a new namespace ``netns`` with ``lo`` up (and, given ``ipv6``, an interface holding only
    that address: the clients then build their ids from it), as the profile compared with a real broker of
    ``version``; the namespace is deleted afterwards."""
    _ip("netns", "add", netns)
    s = Served(root, netns, version)
    try:
        _ip("netns", "exec", netns, "ip", "link", "set", "lo", "up")
        if ipv6:
            # a veth pair with both ends inside (this kernel has no dummy links); only one end has an address
            _ip("netns", "exec", netns, "ip", "link", "add", "v6a", "type", "veth", "peer", "name", "v6b")
            _ip("netns", "exec", netns, "ip", "-6", "addr", "add", ipv6, "dev", "v6a", "nodad")
            for link in ("v6a", "v6b"):
                _ip("netns", "exec", netns, "ip", "link", "set", link, "up")
        s.start()
        yield s
    finally:
        s.stop()
        subprocess.run(["ip", "netns", "del", netns], capture_output=True, timeout=30)


@contextmanager
def served_on_host(root: Path) -> Iterator[Served]:
    """serve on the host network, on free ports of 127.0.0.1."""
    s = Served(root, "host")
    try:
        s.start()
        yield s
    finally:
        s.stop()


def assert_stopped_cleanly_and_store_verifies(s: Served) -> None:
    """SIGTERM: serve exits 0 without a traceback, leaves no abort file, and ``rmqspec store verify``
    accepts its store."""
    assert s.stop() == 0
    assert not (s.root / "store" / "abort").exists()
    assert "Traceback" not in (s.root / "serve.stderr").read_text()
    r = subprocess.run([sys.executable, "-m", "rmqspec.cli", "store", "verify", str(s.root / "store"),
                        "--delay-levels", DELAYS], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def audit_served(s: Served) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]], dict[str, Any]]:
    """Stop serve and ``rmqspec audit`` its trace with its ``_audit.json`` under its profile: (the
    violations, the trace's rows by seq, summary.json)."""
    import pyarrow.parquet as pq

    assert s.stop() == 0
    out, trace = s.root / "audit", s.root / "trace"
    r = subprocess.run([sys.executable, "-m", "rmqspec.cli", "audit", str(trace), "--out", str(out), "--config",
                        str(trace / "_audit.json"), "--profile", s.profile, "--quiet"], capture_output=True,
                       text=True, cwd=REPO, timeout=900)
    assert r.returncode in (0, 1), r.stderr
    rows = {row["seq"]: row for line in (trace / "serve-000.jsonl").read_text().splitlines()
            for row in [json.loads(line)]}
    return pq.read_table(out / "violations").to_pylist(), rows, json.loads((out / "summary.json").read_text())
