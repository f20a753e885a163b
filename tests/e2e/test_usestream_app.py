"""journal-bridge-react in a real useStream app.

The package (`js/journal-bridge-react`) is compiled with tsc under `strict`,
its merge rules are run by `node --test`, and it is packed and installed into
a React app (`tests/harness/usestream_app`: agent-chat-ui's layout, on
`@langchain/langgraph-sdk`'s `useStream` 1.15.0, bundled by esbuild, type-checked
under `strict` against the packed package). The app is served on another
origin than a real `langgraph dev` with the plugin, whose assistant compacts
early, and driven in headless Chromium: a new thread, turns through several
compactions, a reload, a regenerate, an edit, the branch switcher back and
forth, a new thread. After each step the rows the app renders are the
journal's branch the app shows, markers at their places; a row is
journal-only exactly when the state useStream shows lacks its message. No
page error and no console error on the way; every journal request carries
the app's `defaultHeaders`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from starlette.applications import Starlette
from starlette.responses import FileResponse, HTMLResponse
from starlette.routing import Route

from tests.harness.browser import ARTIFACTS
from tests.harness.seed import ServedApp
from tests.harness.suites import require_or_skip
from tests.harness.usestream_build import APP_DIR, PACKAGE_DIR, Built, build, build_problem, run

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

# Compactions early: at 4 messages, keeping 2 (docs/summarization.md).
EARLY = {"trigger": [{"type": "messages", "value": 4}], "keep": {"type": "messages", "value": 2}}
TURNS = ["hello", "add 2 and 3", "what is the weather in Paris?", "add 4 and 5", "thanks, that helps"]
AUTH_SCHEME = "journal-bridge-test"
WAIT = 60.0

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>chat</title></head>
<body><div id="root"></div><script type="module" src="/app.js"></script></body></html>"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    problem = build_problem()
    if problem:
        require_or_skip(f"journal-bridge-react: {problem}")
    return build(tmp_path_factory.mktemp("packed"))


def test_the_package_compiles_under_strict_and_its_merge_rules_hold(built: Built) -> None:
    config = json.loads((PACKAGE_DIR / "tsconfig.json").read_text())
    assert config["compilerOptions"]["strict"] is True
    run(["npx", "--no-install", "tsc", "-p", "tsconfig.json", "--noEmit"], PACKAGE_DIR)
    result = run(["node", "--test", "test/"], PACKAGE_DIR)
    passed = re.search(r"^# pass (\d+)$", result.stdout, re.M)
    failed = re.search(r"^# fail (\d+)$", result.stdout, re.M)
    assert passed and int(passed.group(1)) >= 10 and failed and failed.group(1) == "0", result.stdout[-3000:]


def test_the_packed_package_holds_its_declarations(built: Built) -> None:
    listed = run(["tar", "-tzf", str(built.tarball)], PACKAGE_DIR).stdout.split()
    for name in ("index.js", "index.d.ts", "useJournalHistory.d.ts", "types.d.ts", "components.js"):
        assert f"package/dist/{name}" in listed
    manifest = json.loads((APP_DIR / "node_modules" / "journal-bridge-react" / "package.json").read_text())
    assert manifest["exports"]["."]["types"] == "./dist/index.d.ts"


def test_the_app_type_checks_under_strict_against_the_packed_package(built: Built) -> None:
    config = json.loads((APP_DIR / "tsconfig.json").read_text())
    assert config["compilerOptions"]["strict"] is True and config["compilerOptions"]["skipLibCheck"] is False
    run(["npx", "--no-install", "tsc", "-p", "tsconfig.json"], APP_DIR)


# --- the app in Chromium ---------------------------------------------------------------


def _served_app(built: Built) -> Starlette:
    dist = built.bundle.parent
    return Starlette(routes=[
        Route("/", lambda request: HTMLResponse(PAGE)),
        Route("/app.js", lambda request: FileResponse(dist / "app.js", media_type="text/javascript")),
        Route("/app.js.map", lambda request: FileResponse(dist / "app.js.map", media_type="application/json")),
    ])


_READ_PAGE = """() => {
  const main = document.querySelector("main");
  const rows = [...document.querySelectorAll("ol.rows > li")].map((li) => ({
    kind: li.dataset.kind, key: li.dataset.key, id: li.dataset.id || null, type: li.dataset.type || null,
    journalOnly: li.dataset.journalOnly === "true", seq: li.dataset.seq,
    text: (li.querySelector(".text") || li.querySelector("summary") || li).textContent,
    regenerate: !!li.querySelector("button.regenerate"), edit: !!li.querySelector("button.edit"),
  }));
  return main && { thread: main.dataset.thread, loading: main.dataset.loading, journal: main.dataset.journal,
                   head: main.dataset.head, rows };
}"""


# Every list of questions the page showed, as it changed: a question that vanished
# and came back (a compaction during a run, the journal read after it) shows here.
_WATCH_QUESTIONS = """
window.__questions = [];
new MutationObserver(() => {
  const texts = JSON.stringify([...document.querySelectorAll("ol.rows > li[data-type=human] .text")].map((n) => n.textContent));
  if (window.__questions[window.__questions.length - 1] !== texts) window.__questions.push(texts);
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


def _journal(url: str, thread_id: str, **branch: str) -> list[dict[str, Any]]:
    """The whole branch, read from the journal's route as any client would."""
    items: list[dict[str, Any]] = []
    cursor = 0
    while True:
        response = httpx.get(
            f"{url}/journal/threads/{thread_id}/messages",
            params={"limit": 500, "after_seq": cursor, **branch},
            timeout=30,
        )
        response.raise_for_status()
        page = response.json()
        items += page["data"]
        if not page["has_more"]:
            return items
        cursor = page["next_after_seq"]


_KINDS = {"summary_marker": "marker", "run_status": "status"}


def _expected(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(_KINDS.get(item["type"], "message"), item["id"]) for item in items]


def _shown(state: dict[str, Any]) -> list[tuple[str, str]]:
    return [(row["kind"], row["id"] if row["kind"] == "message" else row["key"]) for row in state["rows"]]


class Chat:
    """The app in a page, and what the server and its journal say of it."""

    def __init__(self, page: Any, server_url: str, app_url: str) -> None:
        self.page = page
        self.server_url = server_url
        self.app_url = app_url
        self.steps: list[dict[str, Any]] = []

    def read(self) -> dict[str, Any]:
        return self.page.evaluate(_READ_PAGE)

    def settle(self, done: Callable[[dict[str, Any]], bool], **branch: str) -> dict[str, Any]:
        """Wait until the app is idle with the journal read (`ready`), `done` holds of what it
        shows, and its rows are the journal's branch; return what it shows then."""
        deadline = time.monotonic() + WAIT
        state: dict[str, Any] = {}
        expected: list[tuple[str, str]] = []
        while time.monotonic() < deadline:
            state = self.read()
            if state and state["loading"] == "false" and state["journal"] == "ready" and done(state):
                expected = _expected(_journal(self.server_url, state["thread"], **branch))
                if _shown(state) == expected:
                    return state
            time.sleep(0.2)
        raise AssertionError(
            f"the app never showed the journal's branch {branch or '(current)'}:\n"
            f"shown    {_shown(state) if state else None}\nexpected {expected}\n"
            f"state    {json.dumps({k: v for k, v in state.items() if k != 'rows'}) if state else None}"
        )

    def check(self, step: str, state: dict[str, Any]) -> None:
        """Rows a message of the shown state has are live, the others journal-only; no summary shown."""
        with get_sync_client(url=self.server_url, api_key=None) as client:
            shown_state = client.threads.get_state(state["thread"], checkpoint_id=state["head"] or None)
        messages = shown_state["values"].get("messages", [])
        in_state = {m["id"] for m in messages}
        summaries = {m["id"] for m in messages if (m.get("additional_kwargs") or {}).get("lc_source") == "summarization"}
        for row in state["rows"]:
            if row["kind"] != "message":
                assert row["journalOnly"] and not row["regenerate"] and not row["edit"], (step, row)
                continue
            assert row["id"] not in summaries, (step, row)
            assert row["journalOnly"] is (row["id"] not in in_state), (step, row)
            if row["journalOnly"]:
                assert not row["regenerate"] and not row["edit"], (step, row)
        self.steps.append({"step": step, "rows": _shown(state), "journal_only": sum(r["journalOnly"] for r in state["rows"])})

    def send(self, text: str) -> dict[str, Any]:
        asked = [row["text"] for row in self.read()["rows"] if row["type"] == "human"]
        seen = self.page.evaluate("window.__questions.length")
        self.page.fill("form.composer textarea", text)
        self.page.click("form.composer button[type=submit]")
        state = self.settle(lambda s: _answered(s, text))
        self.check(f"send {text!r}", state)
        # While the run streamed and compacted, no question left the page: not the earlier
        # ones, not this one once it showed.
        shown = [json.loads(texts) for texts in self.page.evaluate("window.__questions")[seen:]]
        first = next(i for i, texts in enumerate(shown) if texts[len(asked):] == [text])
        assert all(texts[: len(asked)] == asked for texts in shown[:first]), (text, asked, shown)
        assert all(texts == [*asked, text] for texts in shown[first:]), (text, asked, shown)
        return state


def _answered(state: dict[str, Any], text: str) -> bool:
    """The newest human row says `text` and an answer the journal holds follows it."""
    rows = state["rows"]
    humans = [i for i, row in enumerate(rows) if row["type"] == "human"]
    return bool(humans) and rows[humans[-1]]["text"] == text and rows[-1]["type"] == "ai" and rows[-1]["seq"] != ""


@pytest.mark.browser
def test_a_usestream_app_shows_the_journal_through_every_step(page, dev_server, built: Built) -> None:
    with get_sync_client(url=dev_server.url, api_key=None) as client:
        assistant = client.assistants.create("agent", config={"configurable": {"summarization": EARLY}})
    page_errors: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    journal_requests: list[tuple[str, str | None]] = []
    page.on("request", lambda request: journal_requests.append((request.url, request.headers.get("x-auth-scheme")))
            if "/journal/" in request.url else None)
    page.add_init_script(_WATCH_QUESTIONS)
    started = time.monotonic()
    with ServedApp(_served_app(built)) as app:
        chat = Chat(page, dev_server.url, app.url)
        page.goto(f"{app.url}/?apiUrl={dev_server.url}&assistantId={assistant['assistant_id']}")
        page.wait_for_selector("main[data-journal=idle]", state="attached")
        assert chat.read()["rows"] == []

        # A new thread, then turns through several compactions.
        for text in TURNS:
            state = chat.send(text)
        thread_id = state["thread"]
        assert thread_id and f"threadId={thread_id}" in page.url
        markers = [row for row in state["rows"] if row["kind"] == "marker"]
        assert len(markers) >= 3, _shown(state)
        assert [row["text"] for row in state["rows"] if row["type"] == "human"] == TURNS
        assert any(row["journalOnly"] for row in state["rows"]) and not state["rows"][-1]["journalOnly"]
        assert all(re.fullmatch(r"\d+ messages? condensed", row["text"]) for row in markers)
        # Turns that only add to the branch are read a page at a time, never the whole branch again.
        full_reads = [url for url, _ in journal_requests if "after_seq=0" in url]
        assert len(full_reads) == 1, full_reads

        # A reload: the same rows, from the journal and the state.
        before_reload = _shown(state)
        page.reload()
        state = chat.settle(lambda s: s["thread"] == thread_id and len(s["rows"]) > 0)
        chat.check("reload", state)
        assert _shown(state) == before_reload

        # Regenerate the last answer: the new one replaces it, marked 2 / 2 in the journal.
        old_answer = state["rows"][-1]
        page.locator("ol.rows > li").last.locator("button.regenerate").click()
        state = chat.settle(lambda s: s["rows"][-1]["type"] == "ai" and s["rows"][-1]["id"] != old_answer["id"])
        chat.check("regenerate", state)
        assert old_answer["id"] not in [row["id"] for row in state["rows"]]
        regenerated = _journal(dev_server.url, thread_id)
        assert regenerated[-1]["branch"]["index"] == 2 and regenerated[-1]["branch"]["count"] == 2
        regenerate_run = regenerated[-1]["run_id"]

        # Edit the last question: the new question and its answer replace the old turn.
        page.locator("ol.rows > li[data-type=human]").last.locator("button.edit").click()
        page.fill("form.edit-form textarea", "thanks, edited")
        page.click("form.edit-form button[type=submit]")
        state = chat.settle(lambda s: _answered(s, "thanks, edited"))
        chat.check("edit", state)
        humans = [row["text"] for row in state["rows"] if row["type"] == "human"]
        assert humans == [*TURNS[:-1], "thanks, edited"]
        edit_head = state["head"]

        # The branch switcher, back to the regenerated turn and forth to the edited one.
        page.locator("ol.rows > li[data-type=human]").last.locator("button.branch-prev").click()
        state = chat.settle(lambda s: s["head"] != edit_head and _answered(s, TURNS[-1]), run_id=regenerate_run)
        chat.check("branch back", state)
        assert state["rows"][-1]["id"] == regenerated[-1]["id"]
        page.locator("ol.rows > li[data-type=human]").last.locator("button.branch-next").click()
        state = chat.settle(lambda s: s["head"] == edit_head and _answered(s, "thanks, edited"))
        chat.check("branch forth", state)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "usestream-app-thread.png"), full_page=True)

        # A new thread: nothing of the old one, then its own conversation.
        page.click("button.new-thread")
        page.wait_for_selector("main[data-thread='']", state="attached")
        assert chat.read()["rows"] == []
        state = chat.send("hello again")
        assert state["thread"] != thread_id
        assert [row["text"] for row in state["rows"] if row["type"] == "human"] == ["hello again"]

        page.screenshot(path=str(ARTIFACTS / "usestream-app-new-thread.png"), full_page=True)
    (ARTIFACTS / "usestream-app-steps.json").write_text(json.dumps(
        {"seconds": round(time.monotonic() - started, 1), "steps": chat.steps, "journal_requests": len(journal_requests)},
        indent=1,
    ))
    assert page_errors == [] and page.console_errors == []
    assert journal_requests and all(scheme == AUTH_SCHEME for _, scheme in journal_requests), journal_requests
