"""The viewer page in headless Chromium, served by a real uvicorn over a seeded SQLite journal."""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import struct
import zlib
from datetime import UTC, datetime, timedelta

import pytest

from journal_bridge.model.envelope import make_event
from journal_bridge.store import open_store
from tests.harness.browser import ARTIFACTS
from tests.harness.seed import BRANCHED_THREAD, SCRIPT_TEXT, SUMMARY_TEXT, THREAD_ID, ServedApp, branched_records, journal_app, seed_file

pytestmark = pytest.mark.browser

@pytest.fixture(scope="module")
def served(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('viewer') / 'journal.db'}"
    seed_file(url)
    with ServedApp(journal_app(url)) as app:
        yield app


def _seqs(page) -> list[int]:
    return [
        int(s)
        for s in page.locator("#conversation .item").evaluate_all(
            "nodes => nodes.map(n => n.dataset.seq)"
        )
    ]


def _open_thread(page, served, limit: int = 5, thread_id: str = THREAD_ID) -> None:
    page.goto(f"{served.url}/journal/ui/threads/{thread_id}?limit={limit}")
    page.wait_for_selector("body[data-loaded]", state="attached")


def test_newest_page_first_and_older_pages_load_on_demand(page, served):
    _open_thread(page, served)
    assert _seqs(page) == [23, 26, 27, 28, 29]
    button = page.locator("#load-older")
    clicks = 0
    while button.is_visible():
        before = len(_seqs(page))
        button.click()
        page.locator("#conversation .item").nth(before).wait_for(state="attached")
        clicks += 1
    seqs = _seqs(page)
    assert clicks == 3
    assert seqs == sorted(seqs) and len(seqs) == len(set(seqs)) == 19
    assert seqs[0] == 2


def test_marker_card_sits_where_the_compaction_happened(page, served):
    _open_thread(page, served, limit=50)
    marker = page.locator("#conversation li.summary-marker")
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
    page.wait_for_selector("#conversation li.summary-marker")
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
    assert link.inner_text() == "What is the weather in Paris?"
    assert page.locator(".threads .thread-id").inner_text() == THREAD_ID
    link.click()
    page.wait_for_selector("body[data-loaded]", state="attached")
    assert page.locator("#thread-title").inner_text() == "What is the weather in Paris?"
    assert page.locator("#thread-id").inner_text() == THREAD_ID
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

    from journal_bridge.model import records
    from journal_bridge.model.envelope import make_event
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
    page.wait_for_selector("#conversation li.run-outcome")
    cards = page.locator("#conversation li.run-outcome")
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
    types = page.locator("#conversation li.item").evaluate_all("nodes => nodes.map(n => n.dataset.type)")
    assert types == ["human", "run_status"] * 3
    assert page.locator("#conversation img, #conversation script").count() == 0
    assert page.evaluate("typeof window.__outcomeInjected") == "undefined"
    assert page.dialogs == [] and page.console_errors == []


# -- the viewer as a product: compaction, runs, live updates, Markdown, search --

LONG_THREAD = "thread-long-compaction"
XSS_THREAD = "thread-xss"
XSS_TEXT = (
    "<script>window.__xss = 'script'</script>\n"
    "<img src=x onerror=\"window.__xss = 'img'\">\n"
    "[click me](javascript:window.__xss='link') and [docs](https://example.com/docs)\n\n"
    "**bold** and *italic* and `code`\n\n"
    "- first\n- second\n\n"
    "```\n<b>in a block</b>\n```"
)
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def _message(kind: str, n: int, text: str, **extra) -> dict:
    return {"type": kind, "content": text, "id": f"{kind[0]}{n}", **extra}


def _long_compaction_records(thread_id: str = LONG_THREAD) -> list:
    """Fourteen turns (56 messages), a compaction that condenses 54 of them, two turns after."""
    records, at = [], 0

    def add(run_id, event_type, content, metadata=None):
        nonlocal at
        records.append(make_event(thread_id=thread_id, run_id=run_id, event_type=event_type, content=content,
                                  metadata=metadata or {}, created_at=T0 + timedelta(seconds=at)))
        at += 1

    for n in range(16):
        run_id = f"run-{n:02d}"
        add(run_id, "run.start", {"assistant_id": "agent"})
        add(run_id, "llm.human.input", _message("human", n, f"Question number {n}: how far is {n * 7} km?"))
        if n == 14:
            condensed = [f"{kind}{i}" for i in range(14) for kind in ("h", "a", "t", "b")][:54]
            add(run_id, "middleware:summarize", {
                "name": "TrackingSummarizationMiddleware", "hook": "before_model", "action": "summarize",
                "changes": {"replaced_count": 55, "condensed_count": 54, "preserved_count": 3,
                            "replaced_message_ids": ["earlier-summary", *condensed],
                            "previous_summary_ids": ["earlier-summary"],
                            "summary_message_id": "summary-14",
                            "summary": "Fourteen distance questions, each answered with the **add** tool."},
            })
        call = {"name": "add", "args": {"a": n, "b": 7}, "id": f"call-{n}", "type": "tool_call"}
        add(run_id, "llm.ai.response", _message("ai", n, "", tool_calls=[call]))
        add(run_id, "llm.tool.result", _message("tool", n, str(n + 7), name="add", tool_call_id=f"call-{n}"))
        add(run_id, "llm.ai.response", {"type": "ai", "content": f"It is **{n * 7} km**.", "id": f"b{n}"})
        add(run_id, "run.end", {"message_count": 4}, {"status": "success"})
    return records


def _xss_records() -> list:
    run = "run-xss"
    return [
        make_event(thread_id=XSS_THREAD, run_id=run, event_type="run.start", content={"assistant_id": "agent"},
                   created_at=T0),
        make_event(thread_id=XSS_THREAD, run_id=run, event_type="llm.human.input",
                   content=_message("human", 1, XSS_TEXT), created_at=T0 + timedelta(seconds=1)),
        make_event(thread_id=XSS_THREAD, run_id=run, event_type="llm.ai.response",
                   content=_message("ai", 1, XSS_TEXT), created_at=T0 + timedelta(seconds=2)),
        make_event(thread_id=XSS_THREAD, run_id=run, event_type="run.error", content="ValueError: <b>bad</b> input",
                   metadata={"error_type": "ValueError"}, created_at=T0 + timedelta(milliseconds=2500)),
    ]


def _put(url: str, records: list) -> None:
    """Append through a store of its own, in a thread: Playwright's sync API holds this one's loop."""

    async def put():
        async with open_store(url) as store:
            await store.put_batch(records)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, put()).result()


@pytest.fixture(scope="module")
def product(tmp_path_factory):
    """A journal with the seeded conversation, a long compaction and a failed run with hostile text."""
    url = f"sqlite:///{tmp_path_factory.mktemp('viewer-product') / 'journal.db'}"
    seed_file(url)
    _put(url, _long_compaction_records())
    _put(url, _xss_records())
    with ServedApp(journal_app(url)) as app:
        app.store_url = url
        yield app


def _png_pixel(png: bytes, x: int, y: int) -> tuple[int, int, int]:
    """The RGB colour at (x, y) of an 8-bit RGB or RGBA PNG (what Chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, data, width = 8, b"", 0
    while pos < len(png):
        length = struct.unpack(">I", png[pos:pos + 4])[0]
        kind, body = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, _, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            data += body
        pos += 12 + length
    raw = zlib.decompress(data)
    stride = width * channels
    previous = bytearray(stride)
    for row in range(y + 1):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        previous = line
    return tuple(previous[x * channels:x * channels + 3])


MARKER_BACKGROUND = (0xFF, 0xF6, 0xE0)


def test_the_marker_is_in_view_first_with_the_messages_it_condensed_folded_away(page, product):
    page.set_viewport_size({"width": 1000, "height": 800})
    _open_thread(page, product, limit=500, thread_id=LONG_THREAD)
    page.evaluate("window.scrollTo(0, 0)")
    marker = page.locator("li.summary-marker")
    box = marker.bounding_box()
    header = page.locator("header.bar").bounding_box()
    # At the top of the thread the marker is fully in the viewport, below the sticky bar:
    # the 54 messages it condensed do not stand between the reader and it.
    assert box["y"] >= header["y"] + header["height"]
    assert box["y"] + box["height"] <= 800
    condensed = page.locator(".item.condensed")
    assert condensed.count() == 54
    assert condensed.evaluate_all("nodes => nodes.filter(n => n.getBoundingClientRect().height > 0).length") == 0
    assert marker.locator("summary").inner_text() == "54 messages condensed"
    ARTIFACTS.mkdir(exist_ok=True)
    shot = page.screenshot(path=str(ARTIFACTS / "viewer-marker-first.png"))
    # What the screenshot shows at the marker's place is the marker card.
    x, y = int(box["x"] + box["width"] - 12), int(box["y"] + box["height"] / 2)
    assert _png_pixel(shot, x, y) == MARKER_BACKGROUND


def test_the_marker_expands_to_the_messages_it_condensed_and_folds_them_again(page, product):
    page.set_viewport_size({"width": 1000, "height": 800})
    _open_thread(page, product, limit=500, thread_id=LONG_THREAD)
    toggle = page.locator("li.summary-marker .show-condensed")
    assert toggle.inner_text() == "Show the 54 condensed messages"
    toggle.click()
    rows = page.locator(".item.condensed")
    rows.first.wait_for()
    ids = rows.evaluate_all("nodes => nodes.filter(n => !n.hidden).map(n => n.dataset.messageId)")
    expected = [f"{kind}{i}" for i in range(14) for kind in ("h", "a", "t", "b")][:54]
    assert ids == expected
    # The reader lands on the first condensed message, the marker's list in seq order below it.
    first = rows.first.bounding_box()
    assert 0 <= first["y"] < 800
    assert page.locator(".summary-marker .show-condensed").inner_text() == "Hide the condensed messages"
    page.screenshot(path=str(ARTIFACTS / "viewer-marker-expanded.png"))
    page.locator(".summary-marker .show-condensed").click()
    assert rows.evaluate_all("nodes => nodes.filter(n => !n.hidden).length") == 0
    assert page.locator("li.summary-marker").bounding_box()["y"] < 800


def test_expanding_a_marker_reads_the_older_pages_its_messages_are_on(page, product):
    _open_thread(page, product, limit=10, thread_id=LONG_THREAD)
    assert page.locator(".item").count() == 10
    page.locator("li.summary-marker .show-condensed").click()
    page.locator(".item.condensed:not([hidden])").nth(53).wait_for()
    assert page.locator("#load-older").is_hidden()


def test_messages_are_grouped_by_run_with_status_duration_and_a_raw_events_link(page, product):
    _open_thread(page, product, limit=50)
    runs = page.locator("section.run")
    assert runs.evaluate_all("nodes => nodes.map(n => n.dataset.runId)") == [
        "run-1", "run-2", "run-3", "run-4", "run-5"
    ]
    third = page.locator('section.run[data-run-id="run-3"]')
    assert third.locator(".run-status").inner_text() == "success"
    assert third.locator(".run-duration").inner_text() == "5.0 s"
    link = third.locator("a.run-events")
    assert link.get_attribute("href") == f"/journal/threads/{THREAD_ID}/runs/run-3/events"
    # Runs whose every message was condensed fold into one line instead of empty boxes.
    assert page.locator('section.run[data-run-id="run-1"]').is_hidden()
    assert page.locator("#conversation .condensed-runs").inner_text() == (
        "2 runs · 8 messages condensed into a summary further down"
    )
    response = page.request.get(product.url + link.get_attribute("href"))
    assert [e["event_type"] for e in response.json()["data"]][-1] == "run.end"


def test_no_seq_numbers_are_shown(page, product):
    _open_thread(page, product, limit=50)
    text = page.locator("main").inner_text()
    assert re.search(r"#\d", text) is None


def test_a_failed_run_shows_its_error_once_as_text(page, product):
    _open_thread(page, product, limit=50, thread_id=XSS_THREAD)
    run = page.locator('section.run[data-run-id="run-xss"]')
    assert run.get_attribute("data-status") == "error"
    assert run.locator(".run-status").inner_text() == "error"
    # The run's failure card carries the error; the run's header does not repeat it.
    assert run.locator(".run-error").count() == 0
    card = run.locator("li.run-outcome")
    assert card.get_attribute("data-status") == "failed"
    assert card.locator(".error-type").inner_text() == "ValueError"
    assert card.locator(".status-message").inner_text() == "ValueError: <b>bad</b> input"
    assert card.locator("b").count() == 0
    assert run.inner_text().count("<b>bad</b> input") == 1


def test_markdown_renders_a_safe_subset_and_markup_never_runs(page, product):
    _open_thread(page, product, limit=50, thread_id=XSS_THREAD)
    for kind in ("human", "ai"):
        body = page.locator(f"li.message.{kind} .body")
        assert body.locator("strong").inner_text() == "bold"
        assert body.locator("em").inner_text() == "italic"
        assert body.locator("code").first.inner_text() == "code"
        assert body.locator("ul > li").all_inner_texts() == ["first", "second"]
        assert body.locator("pre.code").inner_text() == "<b>in a block</b>"
        links = body.locator("a")
        assert links.count() == 1
        assert links.get_attribute("href") == "https://example.com/docs"
        assert "noopener" in links.get_attribute("rel")
        assert body.locator("script, img, b, [onerror]").count() == 0
        text = body.inner_text()
        assert "<script>window.__xss = 'script'</script>" in text
        assert "<img src=x onerror=" in text
        assert "[click me](javascript:window.__xss='link')" in text
    page.locator("li.message.ai .body").get_by_text("click me", exact=False).click()
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.evaluate("document.querySelectorAll('a[href^=\"javascript\"]').length") == 0
    assert page.dialogs == []
    page.screenshot(path=str(ARTIFACTS / "viewer-markdown-xss.png"))


def test_index_shows_title_assistant_activity_counts_and_searches(page, product):
    page.goto(f"{product.url}/journal/ui")
    page.wait_for_selector("body[data-loaded]", state="attached")
    row = page.locator("li.thread", has=page.locator(".thread-id", has_text=LONG_THREAD))
    assert row.locator("a.thread-link").inner_text() == "Question number 0: how far is 0 km?"
    assert row.locator(".assistant").inner_text() == "agent"
    assert row.locator(".counts").inner_text() == "64 messages · 1 marker"
    assert row.locator(".activity").inner_text()
    page.screenshot(path=str(ARTIFACTS / "viewer-index.png"))
    page.locator("#search").fill("OSLO")
    page.locator("li.thread").nth(1).wait_for(state="detached")
    assert page.locator(".threads .thread-id").all_inner_texts() == [THREAD_ID]
    assert "q=OSLO" in page.url
    page.locator("#search").fill("no thread says this")
    page.locator("#status", has_text="No thread mentions").wait_for()
    assert page.locator("li.thread").count() == 0


def test_a_run_in_flight_updates_live(page, tmp_path):
    url = f"sqlite:///{tmp_path / 'live.db'}"
    thread = "thread-live"

    def event(run_id, event_type, content, metadata=None, second=0):
        return make_event(thread_id=thread, run_id=run_id, event_type=event_type, content=content,
                          metadata=metadata or {}, created_at=T0 + timedelta(seconds=second))

    _put(url, [
        event("run-a", "run.start", {}), event("run-a", "llm.human.input", _message("human", 1, "hi"), second=1),
        event("run-a", "llm.ai.response", _message("ai", 1, "hello"), second=2),
        event("run-a", "run.end", {}, {"status": "success"}, second=3),
        event("run-b", "run.start", {}, second=4),
        event("run-b", "llm.human.input", _message("human", 2, "and now?"), second=5),
    ])
    with ServedApp(journal_app(url)) as served:
        page.goto(f"{served.url}/journal/ui/threads/{thread}?poll=200")
        page.wait_for_selector("body[data-loaded]", state="attached")
        assert page.locator("#live").is_visible()
        assert page.locator('section.run[data-run-id="run-b"] .run-status').inner_text() == "running"
        _put(url, [
            event("run-b", "llm.ai.response", {"type": "ai", "content": "Now **this**.", "id": "a2"}, second=6),
            event("run-b", "run.end", {}, {"status": "success"}, second=8),
        ])
        answer = page.locator('li.message.ai[data-message-id="a2"]')
        answer.wait_for()
        assert answer.locator("strong").inner_text() == "this"
        page.locator('section.run[data-run-id="run-b"] .run-status', has_text="success").wait_for()
        page.locator("#live").wait_for(state="hidden")
        assert page.locator('section.run[data-run-id="run-b"] .run-duration').inner_text() == "4.0 s"
        assert page.console_errors == []


@pytest.fixture(scope="module")
def served_branches(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('viewer-branches') / 'journal.db'}"

    async def seed() -> None:
        async with open_store(url) as store:
            await store.put_batch(branched_records())

    asyncio.run(seed())
    with ServedApp(journal_app(url)) as app:
        yield app


def _texts(page) -> list[str]:
    return page.locator("#conversation .item.message .body").all_inner_texts()


def test_a_regenerated_turn_shows_its_versions_and_opens_the_others(page, served_branches):
    _open_thread(page, served_branches, limit=50, thread_id=BRANCHED_THREAD)
    assert _texts(page) == ["first question", "first answer", "second question", "the regenerated answer"]
    switch = page.locator("#conversation .branch-switch")
    assert switch.count() == 1
    assert switch.locator(".branch-position").inner_text() == "2 / 2"
    assert "regenerated" in switch.inner_text()
    assert page.locator("#branch-note").is_hidden()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "viewer-branches.png"), full_page=True)
    # The previous version: the branch that ends with the run whose answer was replaced.
    switch.locator("a.branch-step", has_text="‹").click()
    page.wait_for_url(re.compile(r"\?run_id=run-b$"))
    page.wait_for_selector("body[data-loaded]", state="attached")
    assert _texts(page) == ["first question", "first answer", "second question", "the answer that was regenerated"]
    assert page.locator("#conversation .branch-switch .branch-position").inner_text() == "1 / 2"
    assert page.locator("#branch-note").is_visible()
    page.locator("#conversation .branch-switch a.branch-step", has_text="›").click()
    page.wait_for_url(re.compile(r"\?run_id=run-c$"))
    page.wait_for_selector("body[data-loaded]", state="attached")
    assert _texts(page)[-1] == "the regenerated answer"
    assert page.console_errors == []
