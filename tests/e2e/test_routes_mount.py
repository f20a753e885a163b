"""The journal on a real `langgraph dev` whose API is mounted under a prefix
(`http.mount_prefix`), with a custom auth handler: access follows the thread's."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.store import open_store
from tests.harness.langgraph_server import HARNESS
from tests.harness.seed import seed_conversation

pytestmark = pytest.mark.e2e

PREFIX = "/api"
AUTH_PATH = HARNESS / "auth" / "auth.py"
A = {"Authorization": "Bearer token-a"}
B = {"Authorization": "Bearer token-b"}


@pytest.fixture(scope="module")
def mounted_server(tmp_path_factory):
    from tests.harness.langgraph_server import LanggraphDevServer, project_config

    config = project_config(
        auth={"path": f"{AUTH_PATH}:auth"},
        http={"enable_custom_route_auth": True, "mount_prefix": PREFIX},
    )
    with LanggraphDevServer(config=config, workdir=tmp_path_factory.mktemp("mounted")) as server:
        yield server


@pytest.fixture(scope="module")
def api(mounted_server) -> str:
    # `langgraph dev` prints the API's URL with the prefix.
    url = mounted_server.url
    return url if url.endswith(PREFIX) else url + PREFIX


@pytest.fixture(scope="module")
def thread_a(mounted_server, api) -> str:
    async def create() -> str:
        client = get_client(url=api, api_key=None, headers=A)
        thread = await client.threads.create()
        async with open_store(mounted_server.store_url) as store:
            await seed_conversation(store, thread["thread_id"])
        return thread["thread_id"]

    return asyncio.run(create())


def _get(url: str, headers: dict | None = None) -> httpx.Response:
    return httpx.get(url, headers=headers or {}, timeout=30)


def test_owner_reads_the_journal_under_the_prefix(api, thread_a):
    response = _get(f"{api}/journal/threads/{thread_a}/messages?limit=500", A)
    assert response.status_code == 200, response.text
    assert "summary_marker" in [item["type"] for item in response.json()["data"]]


def test_another_user_gets_the_404_the_thread_route_gives(api, thread_a):
    assert _get(f"{api}/journal/threads/{thread_a}/messages", B).status_code == 404
    assert _get(f"{api}/threads/{thread_a}", B).status_code == 404


def test_unauthenticated_caller_is_refused_under_the_prefix(api, thread_a):
    assert _get(f"{api}/journal/threads/{thread_a}/messages").status_code in (401, 403)


def test_threads_index_under_the_prefix_lists_only_the_callers_threads(api, thread_a):
    mine = _get(f"{api}/journal/threads", A).json()["data"]
    theirs = _get(f"{api}/journal/threads", B).json()["data"]
    assert thread_a in [t["thread_id"] for t in mine]
    assert thread_a not in [t["thread_id"] for t in theirs]
