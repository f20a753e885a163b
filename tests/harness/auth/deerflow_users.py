"""deer-flow's database engine and local user provider, as its LangGraph auth
handler depends on them, for the tests.

deer-flow's handler looks every session's user up through `get_local_provider()`,
which needs the engine `init_engine_from_config()` starts and refuses with
deer-flow's own error before it. Nothing starts that engine under `langgraph
dev`; an app lifespan can (`tests/harness/apps/deerflow_engine.py`). Both
import this module by its name, so they share its engine, as deer-flow's
handler and an app of deer-flow's backend share `deerflow.persistence.engine`.
"""

from __future__ import annotations

from typing import Any

# The users table: session token -> user id.
USERS = {"session-alice": "alice", "session-bob": "bob"}

_engine: dict[str, str] | None = None


async def init_engine_from_config(config: Any) -> None:
    global _engine
    _engine = dict(USERS)


async def close_engine() -> None:
    global _engine
    _engine = None


class LocalAuthProvider:
    def __init__(self, users: dict[str, str]) -> None:
        self._users = users

    async def get_user(self, token: str) -> str | None:
        return self._users.get(token)


def get_local_provider() -> LocalAuthProvider:
    if _engine is None:
        raise RuntimeError("get_local_provider() called before init_engine_from_config(); cannot access users table")
    return LocalAuthProvider(_engine)
