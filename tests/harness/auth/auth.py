"""A custom LangGraph auth handler for the tests: two users, by bearer token.

Every resource a user creates is stamped with `owner`; every read, search and
update is filtered to the caller's own resources, the pattern the LangGraph
auth documentation teaches. The journal must follow the same decisions.
"""

from __future__ import annotations

from langgraph_sdk import Auth

TOKENS = {"token-a": "user-a", "token-b": "user-b"}

auth = Auth()


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token not in TOKENS:
        raise Auth.exceptions.HTTPException(
            status_code=401, detail="unknown or missing token"
        )
    return {"identity": TOKENS[token], "permissions": []}


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: dict) -> dict:
    owner = {"owner": ctx.user.identity}
    if isinstance(value, dict):
        if not isinstance(value.get("metadata"), dict):
            value["metadata"] = {}
        value["metadata"].update(owner)
    return owner
