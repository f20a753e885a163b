"""A real JavaScript client sees the same with and without the plugin.

Two `langgraph dev` servers of this project, one with the plugin and one
without (`project_config(plugin=False)`), each in a fresh working directory on
a free port, get the same scenarios: the JS SDK's `runs.stream` in every
stream mode `useStream` and others use, background runs, joins, waits,
stateless and batch runs, runs whose input and metadata hold NUL characters,
an invalid `stream_mode`, the protocol v2 thread stream, and raw HTTP
requests with unusual bodies and headers. Each scenario's transcript must be
identical on both servers once generated ids, times and ports are normalised
(see `tests.harness.transcripts`).

Needs node (20+) and npm; `npm ci` fills tests/harness/js/node_modules on first use.
The full transcripts of a run are written to test-artifacts/js-onoff/.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.harness.js_onoff import (
    HTTP_PROBES,
    JS_SCENARIOS,
    ensure_node_modules,
    listed_scenarios,
    node_problem,
    run_http_probe,
    run_js_scenario,
)
from tests.harness.langgraph_server import PROJECT_ROOT, LanggraphDevServer
from tests.harness.suites import require_or_skip
from tests.harness.transcripts import difference, normalize

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

ARTIFACTS = PROJECT_ROOT / "test-artifacts" / "js-onoff"
SCENARIOS = [*JS_SCENARIOS, *HTTP_PROBES]
# Scenarios in flight at once across both servers: the runs mostly wait for the
# server's queue, so a few at a time fit two cores.
PARALLEL = 6


@pytest.fixture(scope="module")
def js_client() -> None:
    problem = node_problem()
    if problem:
        require_or_skip(f"JavaScript client suite: {problem}")
    ensure_node_modules()


@pytest.fixture(scope="module")
def transcripts(js_client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    """Every scenario run against a server with the plugin and one without."""
    servers = {
        "plugin": LanggraphDevServer(plugin=True, workdir=tmp_path_factory.mktemp("js-plugin")),
        "plain": LanggraphDevServer(plugin=False, workdir=tmp_path_factory.mktemp("js-plain")),
    }
    errors: list[BaseException] = []

    def start(server: LanggraphDevServer) -> None:
        try:
            server.start()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    starters = [threading.Thread(target=start, args=(server,)) for server in servers.values()]
    for starter in starters:
        starter.start()
    for starter in starters:
        starter.join()
    try:
        if errors:
            raise errors[0]

        def run(side: str, name: str) -> dict[str, Any]:
            url = servers[side].url
            assert url is not None
            return run_http_probe(url, name) if name in HTTP_PROBES else run_js_scenario(url, name)

        jobs = [(side, name) for name in SCENARIOS for side in servers]
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            results = dict(zip(jobs, pool.map(lambda job: run(*job), jobs), strict=True))
        received: dict[str, dict[str, Any]] = {name: {} for name in SCENARIOS}
        for (side, name), transcript in results.items():
            received[name][side] = transcript
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for name, sides in received.items():
            for side, transcript in sides.items():
                (ARTIFACTS / f"{name}.{side}.json").write_text(json.dumps(transcript, indent=1, ensure_ascii=False))
                (ARTIFACTS / f"{name}.{side}.normalized.json").write_text(
                    json.dumps(normalize(transcript), indent=1, sort_keys=True, ensure_ascii=False)
                )
        (ARTIFACTS / "timing.json").write_text(json.dumps({"scenarios_seconds": round(time.monotonic() - started, 1)}))
        yield received
    finally:
        for server in servers.values():
            server.stop()


def test_the_harness_knows_every_js_scenario(js_client) -> None:
    assert listed_scenarios() == JS_SCENARIOS


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_receives_the_same_with_and_without_the_plugin(transcripts, scenario: str) -> None:
    sides = transcripts[scenario]
    for side, transcript in sides.items():
        assert "script_failed" not in transcript and "probe_failed" not in transcript, (
            f"{scenario} could not run against the server {side}: {json.dumps(transcript)[:3000]}"
        )
    different = difference(sides["plain"], sides["plugin"])
    assert different is None, (
        f"{scenario}: the client received something else with the plugin "
        f"(transcripts in {Path('test-artifacts/js-onoff') / scenario}.{{plain,plugin}}[.normalized].json):\n"
        + different
    )
