"""Where scratch stores go: memory when the machine has it, unless the user chose a directory.

A conformance example, a crash state and a mutant's run each write a store, read it back and delete
it. On a tmpfs (``/dev/shm``) that costs the checker's and the broker's time, not the disk's: every
SYNC put msyncs and every persisted config file fsyncs, and the code paths are the same on any file
system. Measured: the default ``rmqspec conform --broker rmqspec.impl:factory`` took 66 s with its
stores under ``/tmp`` on this project's CI disk and 45 s under ``/dev/shm``
(``bench/results/conformance.md``). ``TMPDIR`` set by the user wins, as for ``tempfile``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

SHM = Path("/dev/shm")


def scratch_base() -> Path:
    """``$TMPDIR`` when set, else a writable ``/dev/shm``, else the temp directory."""
    if os.environ.get("TMPDIR"):
        return Path(tempfile.gettempdir())
    return SHM if SHM.is_dir() and os.access(SHM, os.W_OK) else Path(tempfile.gettempdir())


def scratch_dir(prefix: str) -> Path:
    """A fresh directory under ``scratch_base()``; the caller removes it."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_base()))
