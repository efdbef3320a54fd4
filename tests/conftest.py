"""Shared test set-up: Hypothesis profiles.

- ``ci`` (default, used by ``make test``): fixed budgets, derandomized, no deadline.
- ``thorough``: many more examples and steps, for local and nightly runs
  (``HYPOTHESIS_PROFILE=thorough make test``).
- ``dev``: quick randomized runs while editing.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    stateful_step_count=80,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", max_examples=20, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
