"""The built distributions: what a user installs from an index, tried in a fresh project.

The wheel goes into a new venv (dependencies from the index, through pip's
cache) next to a small graph of the user's own with
`TrackingSummarizationMiddleware`; `langgraph dev` of that venv loads the plugin
from the wheel, and a conversation is journaled with its markers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.harness.conversation import human, wait_journal_idle
from tests.harness.langgraph_server import PROJECT_ROOT, LanggraphDevServer
from tests.harness.project_copy import source_files

pytestmark = [pytest.mark.e2e, pytest.mark.own_versions, pytest.mark.timeout(900)]

USER_GRAPH = '''
from langchain.agents import create_agent
from journal_bridge import TrackingSummarizationMiddleware
from offline_model import OfflineChatModel

model = OfflineChatModel()
graph = create_agent(model, [], middleware=[
    TrackingSummarizationMiddleware(model, trigger=("messages", 6), keep=("messages", 2)),
])
'''


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # Built from the project's sources, as a fresh clone or an archive holds them:
    # a working copy's leftover build/ directory would leak into the wheel.
    source = tmp_path_factory.mktemp("source")
    for name in source_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT_ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(source)],
                   check=True, capture_output=True)
    return out


def test_the_sdist_holds_the_package_and_its_viewer(dists):
    (sdist,) = dists.glob("journal_bridge-*.tar.gz")
    names = tarfile.open(sdist).getnames()
    (wheel,) = dists.glob("journal_bridge-*.whl")
    wheel_names = zipfile.ZipFile(wheel).namelist()
    for name in ("journal_bridge/server.py", "journal_bridge/host/compat.py", "journal_bridge/web/viewer/index.html"):
        assert any(n.endswith(name) for n in names), name
        assert name in wheel_names
    assert not any(n.startswith(("tests/", "graphs/")) for n in wheel_names)
    # The bundled agent's model and settings are demo code beside the library.
    for demo in ("offline_model.py", "agent_settings.py"):
        assert not any(n.endswith(demo) for n in wheel_names), demo


async def test_the_wheel_serves_a_users_graph_with_the_plugin(dists, tmp_path):
    (wheel,) = dists.glob("journal_bridge-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], check=True)
    located = subprocess.run(
        [str(python), "-c", "import journal_bridge; print(journal_bridge.__file__)"],
        check=True, capture_output=True, text=True, cwd=tmp_path,
    ).stdout
    assert str(env_dir) in located

    project = tmp_path / "project"
    project.mkdir()
    (project / "my_agent.py").write_text(USER_GRAPH)
    # The demo model is not in the wheel: the user's project carries its own copy.
    shutil.copy(PROJECT_ROOT / "graphs" / "offline_model.py", project / "offline_model.py")
    config = {
        "dependencies": ["."],
        "graphs": {"agent": "./my_agent.py:graph"},
        "http": {"app": "journal_bridge.server:app"},
    }
    # The installed wheel is what serves, not this checkout.
    server = LanggraphDevServer(
        config=config, workdir=project, program=[str(env_dir / "bin" / "langgraph")], imports_checkout=False
    )
    # `langgraph dev` reads dependencies relative to its config file: keep it in the project.
    with server:
        from langgraph_sdk import get_client

        client = get_client(url=server.url)
        thread_id = (await client.threads.create())["thread_id"]
        texts = [f"turn {i}" for i in range(5)]
        for text in texts:
            await client.runs.wait(thread_id, "agent", input=human(text))
        await wait_journal_idle(server.url)
        async with httpx.AsyncClient(base_url=server.url) as http:
            journal = (await http.get(f"/journal/threads/{thread_id}/messages", params={"limit": 200})).json()["data"]
    assert [item["content"] for item in journal if item["type"] == "human"] == texts
    assert [item for item in journal if item["type"] == "summary_marker"]
    assert json.loads((project / "langgraph.json").read_text()) == config
