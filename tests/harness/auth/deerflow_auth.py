"""An auth handler that behaves like deer-flow's Standard-mode one, for the tests.

The identity comes from the `access_token` session cookie (or a bearer token);
state-changing requests with the cookie need the double-submit CSRF header.
Every resource a user creates is stamped with `metadata.user_id`, and every
read is filtered by it, as deer-flow's `langgraph_auth.py` does.
"""

from __future__ import annotations

from langgraph_sdk import Auth

TOKENS = {"session-alice": "alice", "session-bob": "bob"}

auth = Auth()


@auth.authenticate
async def authenticate(request) -> str:
    token = request.cookies.get("access_token")
    if token is not None and request.method.upper() in {"POST", "PUT", "DELETE", "PATCH"}:
        cookie, header = request.cookies.get("csrf_token"), request.headers.get("x-csrf-token")
        if not cookie or cookie != header:
            raise Auth.exceptions.HTTPException(status_code=403, detail="CSRF token missing or wrong")
    if token is None:
        scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
        token = token if scheme.lower() == "bearer" else None
    if token not in TOKENS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Not authenticated")
    return TOKENS[token]


@auth.on
async def add_owner_filter(ctx: Auth.types.AuthContext, value: dict) -> dict:
    metadata = value.setdefault("metadata", {})
    metadata["user_id"] = ctx.user.identity
    return {"user_id": ctx.user.identity}
