"""The run-observing middleware around a minimal ASGI app that answers as the server does.

The end-to-end suites drive it on a real server; here one request at a time
shows what the middleware hands the journal and what it keeps for later reads.
"""

from __future__ import annotations

import orjson
import pytest
from httpx import ASGITransport, AsyncClient

from journal_bridge.capture.intercept import RunObserverMiddleware
from journal_bridge.capture.run_requests import RunPlan
from journal_bridge.mapping.capture_setting import CaptureSetting
from tests.harness.asgi import request_body

THREAD = "00000000-0000-0000-0000-00000000000a"
RUN = "00000000-0000-0000-0000-00000000000b"


class _Server:
    """Creates a background run and reads it back, echoing what the request asked for."""

    def __init__(self) -> None:
        self.kwargs: dict = {}

    async def __call__(self, scope, receive, send) -> None:
        body = await request_body(receive)
        if scope["method"] == "POST":
            payload = orjson.loads(body)
            self.kwargs = {"stream_mode": payload["stream_mode"], "resumable": payload["stream_resumable"]}
        run = orjson.dumps({"run_id": RUN, "thread_id": THREAD, "kwargs": self.kwargs})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": run})


class _Sink:
    def __init__(self) -> None:
        self.joined: list[RunPlan] = []

    def join(self, thread_id: str, run_id: str, plan: RunPlan) -> None:
        self.joined.append(plan)

    def read_client_stream(self, thread_id, run_id, plan):  # pragma: no cover - no streamed runs here
        raise AssertionError("no run is streamed")

    def unplanned(self, reason: str) -> None:  # pragma: no cover
        raise AssertionError(reason)


@pytest.mark.parametrize("size", [10, 1_000_000])
async def test_a_remembered_run_keeps_what_later_reads_need_but_not_its_input(size):
    server, sink = _Server(), _Sink()
    middleware = RunObserverMiddleware(server, lambda scope: sink, CaptureSetting.AUTO)
    run_input = {"messages": [{"type": "human", "content": "x" * size}]}
    async with AsyncClient(transport=ASGITransport(app=middleware), base_url="http://server") as http:
        created = await http.post(
            f"/threads/{THREAD}/runs", json={"assistant_id": "agent", "input": run_input, "stream_mode": ["updates"]}
        )
        read = await http.get(f"/threads/{THREAD}/runs/{RUN}")

    # The journal got the whole plan: it maps the run's input into its first records.
    [plan] = sink.joined
    assert plan.run_input == run_input and plan.assistant_id == "agent"
    assert server.kwargs["stream_mode"] == ["updates", *plan.capture.added] and server.kwargs["resumable"] is True
    # The middleware keeps what restores later reads, and not the input.
    remembered = middleware.plans[RUN]
    assert remembered.run_input is None and remembered.assistant_id is None
    assert (remembered.client_modes, remembered.capture, remembered.forced_resumable) == (
        plan.client_modes,
        plan.capture,
        plan.forced_resumable,
    )
    for response in (created, read):
        assert response.json()["kwargs"] == {"stream_mode": ["updates"], "resumable": False}
