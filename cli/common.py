"""Errors and exit codes shared by every command.

Exit codes (everywhere): 0 ok, 1 violations or failed proofs found,
2 usage or unreadable input. Commands raise ``UsageError`` / ``InputError``
for user mistakes; ``main`` prints them as one line, never a traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """The command line is wrong (unknown option value, missing argument, …)."""


class InputError(Exception):
    """An input cannot be read: names the file / byte offset / field and the reason."""
