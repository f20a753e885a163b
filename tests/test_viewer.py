"""The viewer page in headless Chromium, served by a real uvicorn over a seeded SQLite journal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from seed import (
    SCRIPT_TEXT,
    SUMMARY_TEXT,
    THREAD_ID,
    ServedApp,
    journal_app,
    seed_agent_file,
    seed_file,
)
from suites import require_or_skip

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
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


@pytest.fixture(scope="module")
def chromium_path() -> str:
    path = os.environ.get("JOURNAL_BRIDGE_CHROMIUM", "/usr/bin/chromium")
    if not Path(path).exists():
        require_or_skip(f"Chromium not found at {path} (set JOURNAL_BRIDGE_CHROMIUM)")
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('viewer') / 'journal.db'}"
    seed_file(url)
    with ServedApp(journal_app(url)) as app:
        yield app


@pytest.fixture
def page(chromium_path):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require_or_skip("the playwright Python package is not installed")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 1400})
            page.dialogs = []
            page.on(
                "dialog",
                lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()),
            )
            page.console_errors = []
            page.on(
                "console",
                lambda msg: (
                    page.console_errors.append(msg.text)
                    if msg.type == "error"
                    else None
                ),
            )
            yield page
        finally:
            browser.close()


def _seqs(page) -> list[int]:
    return [
        int(s)
        for s in page.locator("#conversation > li").evaluate_all(
            "nodes => nodes.map(n => n.dataset.seq)"
        )
    ]


def _open_thread(page, served, limit: int = 5) -> None:
    page.goto(f"{served.url}/journal/ui/threads/{THREAD_ID}?limit={limit}")
    page.wait_for_selector("#conversation > li")


def test_newest_page_first_and_older_pages_load_on_demand(page, served):
    _open_thread(page, served)
    assert _seqs(page) == [23, 26, 27, 28, 29]
    button = page.locator("#load-older")
    clicks = 0
    while button.is_visible():
        before = len(_seqs(page))
        button.click()
        page.locator("#conversation > li").nth(before).wait_for()
        clicks += 1
    seqs = _seqs(page)
    assert clicks == 3
    assert seqs == sorted(seqs) and len(seqs) == len(set(seqs)) == 19
    assert seqs[0] == 2


def test_marker_card_sits_where_the_compaction_happened(page, served):
    _open_thread(page, served, limit=50)
    marker = page.locator("#conversation > li.summary-marker")
    assert marker.count() == 1
    assert marker.get_attribute("data-seq") == "16"
    assert marker.locator("summary").inner_text() == "8 messages condensed"
    previous = marker.evaluate(
        "n => [n.previousElementSibling.dataset.seq, n.previousElementSibling.dataset.type]"
    )
    following = marker.evaluate(
        "n => [n.nextElementSibling.dataset.seq, n.nextElementSibling.dataset.type]"
    )
    assert previous == ["14", "human"]
    assert following == ["17", "ai"]


@pytest.fixture(scope="module")
def compacted_twice(tmp_path_factory):
    """A real agent's thread, compacted more than once, served; and its records."""
    url = f"sqlite:///{tmp_path_factory.mktemp('viewer-agent') / 'journal.db'}"
    records = seed_agent_file(url, "compacted-twice")
    with ServedApp(journal_app(url)) as app:
        yield app, records


def test_a_later_marker_card_counts_only_the_conversation_it_condensed(
    compacted_twice, page
):
    served, records = compacted_twice
    replaced = [
        r.content["changes"]["replaced_count"]
        for r in records
        if r.event_type == "middleware:summarize"
    ]
    assert len(replaced) >= 2
    page.goto(f"{served.url}/journal/ui/threads/compacted-twice")
    page.wait_for_selector("#conversation > li.summary-marker")
    labels = page.locator("li.summary-marker summary").all_inner_texts()
    assert labels[0] == f"{replaced[0]} messages condensed"
    assert labels[1] == f"{replaced[1] - 1} messages condensed"


def test_summary_opens_on_click(page, served):
    _open_thread(page, served, limit=50)
    text = page.locator(".summary-marker .summary-text")
    assert not text.is_visible()
    page.locator(".summary-marker summary").click()
    assert text.is_visible()
    assert text.inner_text() == SUMMARY_TEXT
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".summary-marker").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "viewer-thread.png"), full_page=True)


def test_tool_calls_and_tool_results_are_readable(page, served):
    _open_thread(page, served, limit=50)
    first_call = page.locator("li.message.ai .tool-call").first
    assert first_call.locator(".name").inner_text() == "get_weather"
    assert '"city": "Paris"' in first_call.locator(".args").inner_text()
    assert (
        page.locator("li.message.tool").first.locator(".result").inner_text()
        == "Sunny in Paris, 21C"
    )


def test_markup_in_a_message_is_shown_as_text_and_never_runs(page, served):
    _open_thread(page, served, limit=50)
    message = page.locator("li.message.human", has_text="window.__journalInjected")
    assert message.locator(".body").inner_text() == SCRIPT_TEXT
    assert message.locator("script, b").count() == 0
    assert page.evaluate("typeof window.__journalInjected") == "undefined"
    assert page.dialogs == []


def test_index_lists_recent_threads_with_links(page, served):
    page.goto(f"{served.url}/journal/ui")
    link = page.locator("a.thread-link")
    link.first.wait_for()
    assert link.inner_text() == THREAD_ID
    link.click()
    page.wait_for_selector("#conversation > li")
    assert page.locator("#thread-title").inner_text() == THREAD_ID
    assert page.console_errors == []


def test_unknown_thread_shows_the_error_detail(page, served):
    page.goto(f"{served.url}/journal/ui/threads/no-such-thread")
    status = page.locator("#status.error")
    status.wait_for()
    assert "404" in status.inner_text() and "no-such-thread" in status.inner_text()


OUTCOMES_THREAD = "thread-run-outcomes"
ERROR_TEXT = '<img src=x onerror="window.__outcomeInjected=1"> the tool failed'
QUESTION = '<script>window.__outcomeInjected=2</script> which city?'


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """A thread whose runs failed, were cancelled and paused, with markup in what they say."""
    import asyncio

    from journal_bridge import records
    from journal_bridge.events import make_event
    from journal_bridge.store import open_store

    def run(run_id, text, *drafts):
        human = {"type": "human", "content": text, "id": f"h-{run_id}"}
        return [
            records.record(OUTCOMES_THREAD, run_id, records.conversation_message(human, "input:0", 0)),
            *(records.record(OUTCOMES_THREAD, run_id, draft) for draft in drafts),
        ]

    events = [
        *run("r1", "fail please", records.run_error({"error": "ToolFailure", "message": ERROR_TEXT})),
        *run("r2", "block please", records.run_cancelled("interrupt requested", "interrupt")),
        *run("r3", "ask me", records.run_interrupt([{"id": "i1", "value": {"question": QUESTION}}]),
             records.run_end({"messages": []})),
    ]
    url = f"sqlite:///{tmp_path_factory.mktemp('viewer-outcomes') / 'journal.db'}"

    async def seed():
        async with open_store(url) as store:
            await store.put_batch([make_event(**{k: v for k, v in e.to_dict().items() if k != "seq"}) for e in events])

    asyncio.run(seed())
    with ServedApp(journal_app(url)) as app:
        yield app


def test_run_outcomes_show_as_status_cards_with_their_text_escaped(page, outcomes):
    page.goto(f"{outcomes.url}/journal/ui/threads/{OUTCOMES_THREAD}")
    page.wait_for_selector("#conversation > li.run-status")
    cards = page.locator("#conversation > li.run-status")
    assert cards.evaluate_all("nodes => nodes.map(n => n.dataset.status)") == ["failed", "cancelled", "interrupted"]
    failed, cancelled, paused = (cards.nth(i) for i in range(3))
    assert failed.locator(".role").text_content() == "Run failed"
    assert failed.locator(".error-type").inner_text() == "ToolFailure"
    assert failed.locator(".status-message").inner_text() == ERROR_TEXT
    assert cancelled.locator(".role").text_content() == "Run cancelled"
    assert cancelled.locator(".status-message").inner_text() == "interrupt requested"
    assert paused.locator(".role").text_content() == "Run paused: waiting for input"
    assert QUESTION in paused.locator(".interrupt-value").inner_text()
    # Each card follows the message of its run.
    types = page.locator("#conversation > li").evaluate_all("nodes => nodes.map(n => n.dataset.type)")
    assert types == ["human", "run_status"] * 3
    assert page.locator("#conversation img, #conversation script").count() == 0
    assert page.evaluate("typeof window.__outcomeInjected") == "undefined"
    assert page.dialogs == [] and page.console_errors == []
