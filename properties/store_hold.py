"""What a broker holds of its store directory: RocketMQ's lock while it runs, nothing once it stopped.

Theory of operation
-------------------
``DefaultMessageStore.start`` (4.9.8, 5.3.3) takes ``lockFile.getChannel().tryLock(0, 1, false)`` on
``{storePathRootDir}/lock`` and refuses to start without it ("Lock failed,MQ already started"): two
brokers on one store would interleave their writes. On Linux that is a POSIX record lock (fcntl
``F_SETLK``) on byte 0. ``shutdown`` releases it and every mapped file; a process that died holds
nothing. A candidate can get both wrong without any answer showing it: a store opened without the
lock serves every request, and a file left mapped after a shutdown (a mapping never unmapped, a
descriptor never closed) is only a leak until a restart in the same process writes beside it.

Two judgements, for a candidate that declares a RocketMQ store (the conformance machine asks):

- ``lock_held(root)``: whether some process holds a write lock over byte 0 of ``root/lock`` that
  excludes RocketMQ's — a POSIX or an open-file-description record lock (``flock`` does not: it
  and ``F_SETLK`` ignore each other on Linux). Read from the kernel's table, ``/proc/locks``
  (matched by device and inode): nothing is opened, because closing any descriptor of the file
  would release a classic POSIX lock the probing process itself holds. No ``lock`` file is no
  lock. ``None``: not judged (no store there — no ``commitlog`` directory — or ``/proc/locks``
  unreadable).
- ``held_under(root)``: the files under ``root`` this process still has open or mapped
  (``/proc/self/fd``, ``/proc/self/maps``), for a candidate that runs in this process (the
  in-process brokers; one in another process is never seen here, so never judged wrong).
  ``None``: not judged (no ``/proc``).

Hand-written: the standard library reads ``/proc``; psutil lists open files but not a lock's
byte range, and no library parses ``/proc/locks``.
"""

from __future__ import annotations

import os
from pathlib import Path

# /proc/locks kinds that exclude RocketMQ's F_SETLK lock (FLOCK and leases do not)
_RECORD_LOCKS = frozenset({"POSIX", "OFDLCK"})


def lock_held(root: str | Path) -> bool | None:
    """Whether a write record lock covers byte 0 of ``root/lock`` (see the module docstring)."""
    if not (Path(root) / "commitlog").is_dir():
        return None
    try:
        with open("/proc/locks", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    try:
        st = os.stat(Path(root) / "lock")
    except FileNotFoundError:
        return False
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        # "1: POSIX ADVISORY WRITE pid maj:min:inode start end"; a waiter's line has "->" second
        if len(fields) < 8 or fields[1] == "->":
            continue
        kind, access, where, start, end = fields[1], fields[3], fields[5], fields[6], fields[7]
        if kind in _RECORD_LOCKS and access == "WRITE" and where == inode and start == "0":
            return end == "EOF" or int(end) >= 0
    return False


def held_under(root: str | Path) -> list[str] | None:
    """The paths under ``root`` this process has open (a descriptor) or mapped, sorted; None: no /proc."""
    base = os.path.realpath(root) + os.sep
    held: set[str] = set()
    try:
        fds = os.listdir("/proc/self/fd")
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            maps = f.read().splitlines()
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing (the listing's own descriptor among them)
            continue
        if target.startswith(base):
            held.add(f"{target} (open)")
    for line in maps:
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith(base):
            held.add(f"{parts[5]} (mapped)")
    return sorted(held)
