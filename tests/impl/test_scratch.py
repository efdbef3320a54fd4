"""Scratch stores go to memory unless the user chose a directory (impl/scratch.py)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from rmqspec.impl import scratch


def test_tmpdir_set_by_the_user_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile caches its choice: read TMPDIR again
    made = scratch.scratch_dir("rmqspec-test-")
    assert made.parent == tmp_path and made.is_dir() and made.name.startswith("rmqspec-test-")


def test_without_tmpdir_memory_when_there_is_some(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    shm = scratch.SHM
    expected = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    assert scratch.scratch_base() == expected
    made = scratch.scratch_dir("rmqspec-test-")
    try:
        assert made.parent == expected
    finally:
        made.rmdir()
