"""Errors of the Spark audit that the CLI reports as one line with exit 2 (kept free of pyspark)."""

from __future__ import annotations


class StateError(ValueError):
    """A STATE_DIR (``--since`` / ``--state-out``) that cannot be used: names the file and the reason."""
