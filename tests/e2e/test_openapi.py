"""The journal routes in the OpenAPI document of a real `langgraph dev` with the plugin."""

from __future__ import annotations

import httpx
import pytest

from tests.harness.langgraph_server import docstring_warnings, foreign_tracebacks, startup_log

pytestmark = pytest.mark.e2e

ERROR_CODES = {
    ("/journal/threads", "get"): {"401", "422", "500", "503"},
    ("/journal/threads/{thread_id}/messages", "get"): {"401", "404", "422", "500", "503"},
    ("/journal/threads/{thread_id}/markers", "get"): {"401", "404", "422", "500", "503"},
    ("/journal/threads/{thread_id}/runs/{run_id}/events", "get"): {"401", "404", "422", "500", "503"},
    ("/journal/threads/{thread_id}/runs", "get"): {"401", "404", "422", "500", "503"},
    ("/journal/threads/{thread_id}/repair", "post"): {"401", "404", "409", "422", "500", "503"},
}
PARAMETERS = {
    ("/journal/threads", "get"): ["limit", "q"],
    ("/journal/threads/{thread_id}/messages", "get"): ["thread_id", "limit", "before_seq", "after_seq", "run_id", "checkpoint_id"],
    ("/journal/threads/{thread_id}/markers", "get"): ["thread_id", "limit", "before_seq", "after_seq", "run_id", "checkpoint_id"],
    ("/journal/threads/{thread_id}/runs/{run_id}/events", "get"): [
        "thread_id", "run_id", "event_types", "after_seq", "limit",
    ],
    ("/journal/threads/{thread_id}/runs", "get"): ["thread_id", "run_ids"],
    ("/journal/threads/{thread_id}/repair", "post"): ["thread_id", "since_checkpoint"],
    ("/journal/ui", "get"): [],
    ("/journal/ui/threads/{thread_id}", "get"): ["thread_id"],
    ("/journal/health", "get"): [],
}


@pytest.fixture(scope="module")
def spec(dev_server) -> dict:
    response = httpx.get(f"{dev_server.url}/openapi.json", timeout=30)
    assert response.status_code == 200
    return response.json()


def test_the_server_starts_without_a_traceback(dev_server):
    log = dev_server.read_log()
    # Only the server's warnings about its own routes' docstrings (langgraph-api
    # 0.10 and 0.11) may show a traceback; none of the plugin's routes may add to them.
    assert not [route for route in docstring_warnings(log) if route.startswith("/journal")]
    assert foreign_tracebacks(startup_log(log)) == 0


@pytest.mark.parametrize(("path", "method"), sorted(PARAMETERS))
def test_every_journal_route_is_described_with_its_parameters(spec, path, method):
    operation = spec["paths"][path][method]
    assert operation["operationId"].startswith("journal_")
    assert operation["summary"] and operation["tags"] == ["Journal"]
    assert [p["name"] for p in operation["parameters"]] == PARAMETERS[path, method]
    for parameter in operation["parameters"]:
        assert parameter["in"] == ("path" if f"{{{parameter['name']}}}" in path else "query")
        assert parameter["schema"]["type"]
    assert "200" in operation["responses"]


@pytest.mark.parametrize(("path", "method"), sorted(ERROR_CODES))
def test_every_api_route_describes_its_errors_as_json_detail(spec, path, method):
    responses = spec["paths"][path][method]["responses"]
    assert set(responses) == {"200", *ERROR_CODES[path, method]}
    for code in ERROR_CODES[path, method]:
        schema = responses[code]["content"]["application/json"]["schema"]
        assert schema["required"] == ["detail"]
        assert schema["properties"]["detail"]["type"] == "string"
    assert "application/json" in responses["200"]["content"]


def test_cursors_are_bounded_by_the_largest_seq_a_store_holds(spec):
    operation = spec["paths"]["/journal/threads/{thread_id}/messages"]["get"]
    schemas = {p["name"]: p["schema"] for p in operation["parameters"]}
    assert schemas["before_seq"] == schemas["after_seq"] == {
        "type": "integer", "minimum": 0, "maximum": 2**63 - 1,
    }
    assert schemas["limit"] == {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}


def test_the_built_in_routes_are_still_described(spec):
    assert "get" in spec["paths"]["/threads/{thread_id}"]


def test_every_schema_a_journal_route_names_is_in_the_served_document(spec):
    def refs(value):
        if isinstance(value, dict):
            if isinstance(value.get("$ref"), str):
                yield value["$ref"]
            for inner in value.values():
                yield from refs(inner)
        elif isinstance(value, list):
            for inner in value:
                yield from refs(inner)

    journal = {path: operations for path, operations in spec["paths"].items() if path.startswith("/journal")}
    schemas = spec["components"]["schemas"]
    named = set(refs(journal))
    assert "#/components/schemas/JournalHistoryPage" in named
    seen: set[str] = set()
    while named - seen:
        ref = (named - seen).pop()
        seen.add(ref)
        name = ref.removeprefix("#/components/schemas/")
        assert name in schemas, f"{ref} is not in the served document"
        named |= set(refs(schemas[name]))
    # The server's own schemas are still its own.
    assert schemas["Thread"] != schemas["JournalThread"]
