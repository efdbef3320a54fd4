"""``rmqspec serve`` as a subprocess on ephemeral 127.0.0.1 ports (tests that need its stderr or signals)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
READY = re.compile(r"ready namesrv=(\S+) broker=(\S+) store=(\S+) \(([\d.]+) s\)")


class ServeProcess:
    """``python -m rmqspec.cli serve --namesrv-port 0 --port 0 ...``; ``start()`` waits for the ready line."""

    def __init__(self, store: Path, *args: str, stderr_path: Path | None = None) -> None:
        self.store = store
        self.args = args
        self.stderr_path = stderr_path or store.parent / f"{store.name}.stderr"
        self.proc: subprocess.Popen[str] | None = None
        self.namesrv = self.broker = ""
        self.ready_line = ""
        self.spawn_to_ready_s = 0.0

    def start(self, timeout: float = 30.0) -> ServeProcess:
        cmd = [sys.executable, "-m", "rmqspec.cli", "serve", "--store", str(self.store), "--namesrv-port", "0",
               "--port", "0", *self.args]
        self._stderr = self.stderr_path.open("w")
        started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, text=True, cwd=REPO,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.spawn_to_ready_s = time.monotonic() - started
        m = READY.search(line)
        if m is None:
            self.proc.kill()
            self.proc.wait(timeout)
            raise RuntimeError(f"rmqspec serve did not start: {line!r}; stderr: {self.stderr()}")
        self.ready_line = line.strip()
        self.namesrv, self.broker = m.group(1), m.group(2)
        return self

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text()

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> tuple[int, str]:
        """Send ``sig``, wait; (exit code, rest of stdout)."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        out, _ = self.proc.communicate(timeout=timeout)
        self._stderr.close()
        return self.proc.returncode, out

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        if not self._stderr.closed:
            self._stderr.close()
