"""Zero client change: with the plugin, a client observes exactly what it observes without it.

Every scenario runs against a plain `langgraph dev` and against the plugin
under each capture setting that promises it (`auto`, `lean`); the transcripts
(statuses, headers, SSE frames, JSON bodies, the thread's checkpoints) must be
equal after normalising generated ids and times (`tests.harness.transcripts`,
as for the JavaScript client). Checkpoint message ids keep their shape, so a
model streamed instead of invoked (`lc_run--<id>` instead of `lc_run--<id>-0`)
shows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.harness.conversation import wait_journal_idle
from tests.harness.langgraph_server import LanggraphDevServer
from tests.harness.onoff import (
    JOINS,
    SAMPLED_JOINS,
    SAMPLED_STREAM_MODES,
    STREAM_MODES,
    background_scenario,
    bad_input_scenario,
    join_name,
    joined_scenario,
    mode_name,
    stateless_scenario,
    stream_scenario,
    wait_scenario,
)
from tests.harness.suites import sampled
from tests.harness.transcripts import difference

pytestmark = pytest.mark.e2e

SETTINGS = ["auto", "lean"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LanggraphDevServer]]:
    started: dict[str, LanggraphDevServer] = {}
    try:
        started["plain"] = LanggraphDevServer(plugin=False, workdir=tmp_path_factory.mktemp("plain")).start()
        for setting in SETTINGS:
            server = LanggraphDevServer(
                workdir=tmp_path_factory.mktemp(setting), env={"JOURNAL_BRIDGE_CAPTURE": setting}
            )
            started[setting] = server.start()
        yield started
    finally:
        for server in started.values():
            server.stop()


def _assert_same(plain: list[Any], plugin: list[Any], label: str) -> None:
    different = difference(plain, plugin)
    if different is not None:
        pytest.fail(f"{label}: the client can tell the servers apart\n{different}")


async def _compare(servers, scenario, *args, **kwargs) -> None:
    plain = await scenario(servers["plain"].url, *args, **kwargs)
    for setting in SETTINGS:
        _assert_same(plain, await scenario(servers[setting].url, *args, **kwargs), setting)


@pytest.mark.parametrize("mode", sampled(STREAM_MODES, SAMPLED_STREAM_MODES), ids=mode_name)
async def test_streamed_runs_look_the_same(servers, mode):
    await _compare(servers, stream_scenario, mode)


async def test_streamed_runs_with_subgraphs_look_the_same(servers):
    await _compare(servers, stream_scenario, ["updates", "values"], subgraphs=True)


async def test_waited_runs_look_the_same(servers):
    await _compare(servers, wait_scenario)


async def test_background_runs_joined_read_and_listed_look_the_same(servers):
    await _compare(servers, background_scenario)


@pytest.mark.parametrize("join", sampled(JOINS, SAMPLED_JOINS), ids=join_name)
async def test_created_runs_joined_by_their_client_look_the_same(servers, join):
    before = {setting: _read_from_client_joins(servers[setting].url) for setting in SETTINGS}
    await _compare(servers, joined_scenario, join)
    for setting in SETTINGS:
        await wait_journal_idle(servers[setting].url)
        # Each run was read from its client's join, not joined a second time.
        assert _read_from_client_joins(servers[setting].url) - before[setting] == 3, setting


def _read_from_client_joins(url: str) -> int:
    return httpx.get(f"{url}/journal/health", timeout=30).json()["runs_read_from_client_joins"]


async def test_stateless_and_batch_runs_look_the_same(servers):
    await _compare(servers, stateless_scenario)


async def test_bad_requests_get_the_servers_own_answers(servers):
    await _compare(servers, bad_input_scenario)
