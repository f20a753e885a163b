"""Policy for suites that need a service this machine may not have.

They skip with a reason on a developer machine, and fail instead when
JOURNAL_BRIDGE_REQUIRE_ALL=1 (CI), so a missing service never passes silently.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_ALL = os.environ.get("JOURNAL_BRIDGE_REQUIRE_ALL") == "1"


def require_or_skip(reason: str) -> None:
    """Skip with `reason` locally; fail with it when every suite is required."""
    if REQUIRE_ALL:
        pytest.fail(f"required suite cannot run: {reason}")
    pytest.skip(reason)


def sampled(values: list, sample: list) -> list:
    """`values` as test parameters: those in `sample` run in every pass; the others carry
    `full_matrix`, which the oldest-version pass in CI leaves out (the full matrix runs once)."""
    return [value if value in sample else pytest.param(value, marks=pytest.mark.full_matrix) for value in values]
