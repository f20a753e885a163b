"""`journal-bridge history`: the conversation with markers inline, from a store or a server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from journal_bridge.cli import main
from tests.harness.seed import BRANCHED_THREAD, SUMMARY_TEXT, THREAD_ID, ServedApp, branched_records, journal_app, seed_file


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    seed_file(url)
    return url


def _blocks(output: str) -> list[str]:
    return [block for block in output.strip().split("\n\n") if block]


def test_history_prints_messages_and_the_marker_inline(store_url, capsys):
    assert main(["history", THREAD_ID, "--store", store_url]) == 0
    blocks = _blocks(capsys.readouterr().out)
    headers = [block.splitlines()[0] for block in blocks]
    at = headers.index("[16] ── 8 messages condensed ──")
    assert headers[at - 1].startswith("[14] human")
    assert headers[at + 1].startswith("[17] ai")
    assert blocks[at].splitlines()[1] == "    " + SUMMARY_TEXT
    assert len(blocks) == 19


def test_a_later_marker_says_how_many_conversation_messages_it_condensed(
    compacted_twice, capsys
):
    served, records = compacted_twice
    changes = [r.content["changes"] for r in records if r.event_type == "middleware:summarize"]
    assert len(changes) >= 2 and changes[1]["previous_summary_ids"]
    assert main(["history", "compacted-twice", "--url", served.url]) == 0
    headers = [block.splitlines()[0] for block in _blocks(capsys.readouterr().out)]
    labels = [h.split("── ")[1] for h in headers if "condensed" in h]
    assert labels[1] == f"{changes[1]['replaced_count'] - 1} messages condensed ──"
    assert labels[0] == f"{changes[0]['replaced_count']} messages condensed ──"


def test_history_shows_tool_calls_with_args_and_tool_results(store_url, capsys):
    main(["history", THREAD_ID, "--store", store_url])
    out = capsys.readouterr().out
    assert '    → get_weather({"city": "Paris"})' in out
    assert "[4] tool get_weather  (run …run-1)\n    Sunny in Paris, 21C" in out


def test_history_limit_keeps_the_newest_items(store_url, capsys):
    main(["history", THREAD_ID, "--store", store_url, "--limit", "3"])
    headers = [block.splitlines()[0] for block in _blocks(capsys.readouterr().out)]
    assert [h.split("]")[0] for h in headers] == ["[27", "[28", "[29"]


def test_history_store_defaults_to_the_environment(store_url, capsys, monkeypatch):
    monkeypatch.setenv("JOURNAL_BRIDGE_STORE_URL", store_url)
    assert main(["history", THREAD_ID, "--limit", "1"]) == 0
    assert capsys.readouterr().out.startswith("[29] ai")


def test_history_over_http_pages_through_the_server_and_matches_the_store(
    store_url, capsys
):
    main(["history", THREAD_ID, "--store", store_url, "--json"])
    from_store = capsys.readouterr().out
    with ServedApp(journal_app(store_url)) as served:
        url = ["--url", served.url, "--page-size", "3", "--json"]
        assert main(["history", THREAD_ID, *url]) == 0
        from_server = capsys.readouterr().out
        assert main(["history", THREAD_ID, *url, "--limit", "7"]) == 0
        newest = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert from_server == from_store
    assert newest == [json.loads(line) for line in from_store.splitlines()][-7:]


def test_history_of_an_unknown_thread_fails_with_a_message(store_url, capsys):
    assert main(["history", "no-such-thread", "--store", store_url]) == 1
    assert "not in the journal" in capsys.readouterr().err


def test_history_shows_the_current_branch_and_any_other_by_its_run(tmp_path, capsys):
    import asyncio

    from journal_bridge.store import open_store

    url = f"sqlite:///{tmp_path / 'journal.db'}"

    async def seed() -> None:
        async with open_store(url) as store:
            await store.put_batch(branched_records())

    asyncio.run(seed())

    def contents(args: list[str]) -> list[str]:
        assert main(["history", BRANCHED_THREAD, "--json", *args]) == 0
        return [json.loads(line)["content"] for line in capsys.readouterr().out.splitlines()]

    current = ["first question", "first answer", "second question", "the regenerated answer"]
    original = [*current[:3], "the answer that was regenerated"]
    assert contents(["--store", url]) == current
    assert contents(["--store", url, "--run-id", "run-b"]) == original
    with ServedApp(journal_app(url)) as served:
        assert contents(["--url", served.url, "--run-id", "run-b"]) == original
        assert main(["history", BRANCHED_THREAD, "--url", served.url, "--run-id", "no-such-run"]) == 1
        assert "no-such-run" in capsys.readouterr().err
    assert main(["history", BRANCHED_THREAD, "--store", url, "--run-id", "no-such-run"]) == 1
    assert "has no record" in capsys.readouterr().err


def test_history_of_an_unreachable_server_fails_with_the_reason(capsys):
    assert main(["history", THREAD_ID, "--url", "http://127.0.0.1:9"]) == 1
    assert "cannot read http://127.0.0.1:9" in capsys.readouterr().err


def test_console_script_runs(store_url):
    script = Path(sys.executable).parent / "journal-bridge"
    result = subprocess.run(
        [str(script), "history", THREAD_ID, "--store", store_url, "--limit", "2"],
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("[28] tool get_weather")


def test_history_into_a_closed_pipe_ends_quietly(tmp_path):
    """`journal-bridge history ... | head -1`: the reader leaves early; no traceback."""
    import asyncio

    from journal_bridge.model.envelope import make_event
    from journal_bridge.store import open_store

    url = f"sqlite:///{tmp_path / 'long.db'}"

    async def seed_long_thread() -> None:
        async with open_store(url) as store:
            await store.put_batch([
                make_event(thread_id="long", run_id="r", event_type="llm.human.input",
                           content={"type": "human", "content": f"message {n} " * 20, "id": f"h{n}"})
                for n in range(2000)
            ])

    asyncio.run(seed_long_thread())
    cli = Path(sys.executable).parent / "journal-bridge"
    proc = subprocess.Popen([str(cli), "history", "long", "--store", url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"[1] human")
    proc.stdout.close()  # far more than a pipe holds is still to come
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


def test_history_without_a_store_creates_no_journal_and_says_what_to_give(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JOURNAL_BRIDGE_STORE_URL", raising=False)
    assert main(["history", THREAD_ID]) == 1
    err = capsys.readouterr().err
    assert f"no journal at {tmp_path / 'journal.db'}" in err
    assert "--store" in err and "--url" in err and "JOURNAL_BRIDGE_STORE_URL" in err
    assert list(tmp_path.iterdir()) == []


def test_history_of_a_missing_sqlite_file_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "elsewhere.db"
    assert main(["history", THREAD_ID, "--store", f"sqlite:///{missing}"]) == 1
    assert f"no journal at {missing}" in capsys.readouterr().err
    assert not missing.exists()


def test_version_is_the_installed_distributions(capsys):
    from importlib import metadata

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"journal-bridge {metadata.version('journal-bridge')}\n"


class _HeaderRecorder:
    """A server that records each request's headers: no threads, no runs."""

    def __init__(self) -> None:
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        self.seen: list[dict[str, str]] = []

        async def search(request):
            self.seen.append(dict(request.headers))
            return JSONResponse([])

        async def anything(request):
            self.seen.append(dict(request.headers))
            return JSONResponse({"detail": "not found"}, status_code=404)

        self.app = Starlette(routes=[
            Route("/threads/search", search, methods=["POST"]),
            Route("/{path:path}", anything, methods=["GET", "POST"]),
        ])


def _follow(url, tmp_path, *extra):
    return ["follow", "--url", url, "--store", f"sqlite:///{tmp_path / 'f.db'}", "--once", *extra]


def _backfill(url, tmp_path, *extra):
    thread = "00000000-0000-0000-0000-000000000001"
    return ["backfill", "--url", url, "--store", f"sqlite:///{tmp_path / 'b.db'}", "--thread", thread, *extra]


@pytest.mark.parametrize("command", [_follow, _backfill])
def test_follow_and_backfill_send_the_given_headers_and_the_api_key_from_the_environment(
    tmp_path, api_key_env, command
):
    recorder = _HeaderRecorder()
    with ServedApp(recorder.app) as served:
        main(command(served.url, tmp_path, "--header", "X-Tenant: blue", "--header", "Authorization:Bearer t"))
    assert recorder.seen
    for headers in recorder.seen:
        assert headers["x-tenant"] == "blue"
        assert headers["authorization"] == "Bearer t"
        assert headers["x-api-key"] == "from-env"


@pytest.mark.parametrize("command", [_follow, _backfill])
def test_an_x_api_key_header_wins_over_the_environment(tmp_path, api_key_env, command):
    recorder = _HeaderRecorder()
    with ServedApp(recorder.app) as served:
        main(command(served.url, tmp_path, "--header", "X-API-Key: given"))
    assert recorder.seen
    assert {h["x-api-key"] for h in recorder.seen} == {"given"}


def test_history_over_http_sends_the_api_key_like_the_sdk(tmp_path, api_key_env):
    recorder = _HeaderRecorder()
    with ServedApp(recorder.app) as served:
        assert main(["history", THREAD_ID, "--url", served.url, "--token", "t"]) == 1
    assert [(h["x-api-key"], h["authorization"]) for h in recorder.seen] == [("from-env", "Bearer t")]


@pytest.mark.parametrize("command", [_follow, _backfill])
def test_a_malformed_header_is_a_usage_error(tmp_path, capsys, command):
    assert main(command("http://127.0.0.1:9", tmp_path, "--header", "no colon")) == 2
    assert "--header: expected 'Name: value', got 'no colon'" in capsys.readouterr().err


def test_follow_says_how_many_reports_its_summary_no_longer_lists(tmp_path, capsys, monkeypatch):
    from journal_bridge.capture import follower

    reported = [{"outcome": "unobservable", "run_id": f"r{i}", "thread_id": "t1", "reason": "no replay"}
                for i in (3, 4)]
    summary = {"runs_discovered": 5, "journaled": 0, "live_only": 1, "unobservable": 4, "records_written": 0,
               "backlog": 0, "reported": reported, "poll_errors": 0}
    monkeypatch.setattr(follower, "run_follower", lambda *args, **kwargs: summary)
    assert main(_follow("http://127.0.0.1:9", tmp_path)) == 0
    out = capsys.readouterr().out
    assert "run r3 (thread t1): no replay" in out and "run r4 (thread t1): no replay" in out
    assert "(3 earlier reports not listed" in out
