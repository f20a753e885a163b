"""Headless Chromium for the browser tests, driven by Playwright; its path from JOURNAL_BRIDGE_CHROMIUM."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.harness.suites import require_or_skip

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = os.environ.get("JOURNAL_BRIDGE_CHROMIUM", "/usr/bin/chromium")
    if not Path(path).exists():
        require_or_skip(f"Chromium not found at {path} (set JOURNAL_BRIDGE_CHROMIUM)")
    return path


@pytest.fixture
def page(chromium_path):
    """A page in a headless Chromium of its own, started for the test (Playwright's sync
    API holds the thread's event loop while it runs, so it does not outlive the test)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require_or_skip("the playwright Python package is not installed")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 1400})
            page.dialogs = []
            page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
            page.console_errors = []
            page.on("console", lambda msg: page.console_errors.append(msg.text) if msg.type == "error" else None)
            yield page
        finally:
            browser.close()
