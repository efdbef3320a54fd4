"""Interop tier: tests against real Apache RocketMQ 4.9.8 (``../shared/realrmq``), run by ``make interop``.

``make test`` never collects this folder (it passes ``--ignore=tests/interop``): a user's fresh
clone has no ``../shared``. Here a missing fixture is an error, never a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def realrmq_dir() -> Path:
    path = Path(os.environ.get("REALRMQ") or REPO.parent / "shared" / "realrmq")
    if not (path / "start-rmq.sh").is_file():
        pytest.exit(f"make interop needs the real RocketMQ fixture at {path} (set REALRMQ)", returncode=2)
    return path


@pytest.fixture(scope="session")
def realrmq() -> Path:
    return realrmq_dir()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.interop)
