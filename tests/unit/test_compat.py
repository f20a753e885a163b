"""The plugin refuses a LangGraph Server outside the supported versions, saying what to install."""

from __future__ import annotations

import pytest

from journal_bridge.host.compat import UnsupportedServer, check_server

SUPPORTED = {"langgraph-api": "0.16.7", "langgraph-runtime-inmem": "0.36.7"}


@pytest.mark.parametrize("api", ["0.11.0", "0.13.4", "0.16.7"])
def test_every_supported_minor_release_is_accepted(api):
    check_server({**SUPPORTED, "langgraph-api": api})


@pytest.mark.parametrize("api", ["0.10.3", "0.17.0", "1.0.0"])
def test_an_unsupported_server_is_refused_with_what_to_install(api):
    with pytest.raises(UnsupportedServer, match=rf"langgraph-api {api} \(supported: >=0.11,<0.17\).*pip install"):
        check_server({**SUPPORTED, "langgraph-api": api})


def test_the_in_memory_runtime_is_checked_only_where_it_runs():
    old_inmem = {**SUPPORTED, "langgraph-runtime-inmem": "0.30.3"}
    with pytest.raises(UnsupportedServer, match="langgraph-runtime-inmem 0.30.3"):
        check_server(old_inmem, edition="inmem")
    check_server(old_inmem, edition="pg")
