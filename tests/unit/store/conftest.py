"""Fixtures for the run event store suites.

The Postgres suite needs a real server: it skips with a reason on a machine
without one and fails instead when JOURNAL_BRIDGE_REQUIRE_ALL=1 (CI).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests.harness.suites import require_or_skip

# The conformance suite lives in the package (outside backends run it too): its
# asserts are explained like those of the test modules.
pytest.register_assert_rewrite("journal_bridge.store.conformance")

POSTGRES_URL_ENV = "JOURNAL_BRIDGE_TEST_POSTGRES_URL"
SKIP_REASON = f"set {POSTGRES_URL_ENV} to run the Postgres conformance suite"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    url = os.environ.get(POSTGRES_URL_ENV)
    if not url:
        require_or_skip(SKIP_REASON)
    return url


@pytest.fixture
def postgres_schema(postgres_url: str) -> Iterator[str]:
    """A schema of its own for one test, dropped afterwards."""
    import psycopg

    schema = f"journal_test_{uuid.uuid4().hex[:12]}"
    yield schema
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
