"""Journal access under a custom auth handler, on a real `langgraph dev` with the plugin.

A caller may read a thread's journal exactly when the server lets them read the
thread (`GET /threads/{thread_id}`): the owner gets 200, another user 404, an
unauthenticated caller is refused.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.store import open_store
from tests.harness.langgraph_server import HARNESS
from tests.harness.seed import seed_conversation

pytestmark = pytest.mark.e2e

AUTH_PATH = HARNESS / "auth" / "auth.py"
A = {"Authorization": "Bearer token-a"}
B = {"Authorization": "Bearer token-b"}


def _auth_config(custom_route_auth: bool) -> dict:
    from tests.harness.langgraph_server import project_config

    return project_config(
        auth={"path": f"{AUTH_PATH}:auth"},
        http={"enable_custom_route_auth": custom_route_auth},
    )


async def _thread_of_user_a(server) -> str:
    """A thread created through the SDK with A's token, with journal records for it."""
    client = get_client(url=server.url, api_key=None, headers=A)
    thread = await client.threads.create()
    async with open_store(server.store_url) as store:
        await seed_conversation(store, thread["thread_id"])
    return thread["thread_id"]


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    from tests.harness.langgraph_server import LanggraphDevServer

    with LanggraphDevServer(
        config=_auth_config(True), workdir=tmp_path_factory.mktemp("auth-server")
    ) as server:
        yield server


@pytest.fixture(scope="module")
def thread_a(auth_server) -> str:
    return asyncio.run(_thread_of_user_a(auth_server))


def _get(server, path: str, headers: dict | None = None) -> httpx.Response:
    return httpx.get(f"{server.url}{path}", headers=headers or {}, timeout=30)


def test_owner_reads_their_thread_journal(auth_server, thread_a):
    response = _get(auth_server, f"/journal/threads/{thread_a}/messages?limit=500", A)
    assert response.status_code == 200, response.text
    types = [item["type"] for item in response.json()["data"]]
    assert "summary_marker" in types and "human" in types


@pytest.mark.parametrize(
    "path",
    ["/messages", "/markers", "/runs/run-3/events"],
)
def test_another_user_gets_404_for_the_thread_journal(auth_server, thread_a, path):
    response = _get(auth_server, f"/journal/threads/{thread_a}{path}", B)
    assert response.status_code == 404, response.text
    assert "summary" not in response.text
    # The built-in API gives the same answer for the thread itself.
    assert _get(auth_server, f"/threads/{thread_a}", B).status_code == 404


def test_unauthenticated_caller_is_refused(auth_server, thread_a):
    response = _get(auth_server, f"/journal/threads/{thread_a}/messages")
    assert response.status_code in (401, 403)
    assert _get(auth_server, "/journal/threads").status_code in (401, 403)


def test_threads_index_lists_only_the_callers_threads(auth_server, thread_a):
    mine = _get(auth_server, "/journal/threads", A).json()["data"]
    theirs = _get(auth_server, "/journal/threads", B).json()["data"]
    assert thread_a in [t["thread_id"] for t in mine]
    assert thread_a not in [t["thread_id"] for t in theirs]


def test_owned_thread_without_journal_records_is_404(auth_server):
    client = get_client(url=auth_server.url, api_key=None, headers=A)
    thread = asyncio.run(client.threads.create())
    response = _get(auth_server, f"/journal/threads/{thread['thread_id']}/messages", A)
    assert response.status_code == 404
    assert "journal" in response.json()["detail"]


def test_journal_follows_thread_access_without_custom_route_auth(start_dev_server):
    # Auth configured but not applied to custom routes: the journal still asks
    # the server with the caller's headers, so the decision is the same.
    server = start_dev_server(config=_auth_config(False))
    thread_id = asyncio.run(_thread_of_user_a(server))
    path = f"/journal/threads/{thread_id}/messages"
    assert _get(server, path, A).status_code == 200
    assert _get(server, path, B).status_code == 404
    assert _get(server, path).status_code == 401


@pytest.mark.parametrize("thread_id", ["%2E", "%2E%2E", "%2e%2e"])
@pytest.mark.parametrize("path", ["/messages", "/markers", "/runs/run-3/events"])
def test_a_dot_thread_id_is_an_unknown_thread_for_the_owner_too(auth_server, thread_id, path):
    # The access check asks the server about exactly this id, never about a
    # URL that dot segments shortened; the server has no such thread.
    response = _get(auth_server, f"/journal/threads/{thread_id}{path}", A)
    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == "application/json"


@pytest.mark.parametrize("thread_id", ["%2E", "%2E%2E", "not-a-uuid"])
def test_repair_of_a_dot_or_other_non_uuid_thread_id_is_422(auth_server, thread_id):
    response = httpx.post(f"{auth_server.url}/journal/threads/{thread_id}/repair", headers=A, timeout=30)
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith("thread_id: must be a UUID")
