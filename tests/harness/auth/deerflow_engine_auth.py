"""An auth handler that, like deer-flow's, finds a session's user through its
database engine (`deerflow_users.get_local_provider()`); otherwise as
`deerflow_auth.py`: the `access_token` cookie with the double-submit CSRF
header on writes, `metadata.user_id` stamped on create, reads filtered by it."""

from __future__ import annotations

from langgraph_sdk import Auth

from tests.harness.auth.deerflow_users import get_local_provider

auth = Auth()


@auth.authenticate
async def authenticate(request) -> str:
    token = request.cookies.get("access_token")
    if token is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Not authenticated")
    if request.method.upper() in {"POST", "PUT", "DELETE", "PATCH"}:
        cookie, header = request.cookies.get("csrf_token"), request.headers.get("x-csrf-token")
        if not cookie or cookie != header:
            raise Auth.exceptions.HTTPException(status_code=403, detail="CSRF token missing or wrong")
    user = await get_local_provider().get_user(token)
    if user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="User not found")
    return user


@auth.on
async def add_owner_filter(ctx: Auth.types.AuthContext, value: dict) -> dict:
    metadata = value.setdefault("metadata", {})
    metadata["user_id"] = ctx.user.identity
    return {"user_id": ctx.user.identity}
