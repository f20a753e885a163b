"""The server's own word on a thread's branch, for comparing the journal's history with it.

The truth is the messages first seen along a chain of checkpoints (from a head
back through `parent_checkpoint`), and one marker per compaction on that chain.
"""

from __future__ import annotations

from typing import Any

MESSAGE_TYPES = ("human", "ai", "tool")
MARKER = "<marker>"


def is_summary(message: dict[str, Any]) -> bool:
    return (message.get("additional_kwargs") or {}).get("lc_source") == "summarization"


def messages(state: dict[str, Any]) -> list[dict[str, Any]]:
    return (state.get("values") or {}).get("messages", [])


async def chain(client, thread_id: str, head: str | None = None) -> list[dict[str, Any]]:
    """The checkpoints of the branch ending at `head` (default: the current one), oldest first."""
    history = await client.threads.get_history(thread_id, limit=1000)
    by_id = {h["checkpoint"]["checkpoint_id"]: h for h in history}
    head = head or (await client.threads.get_state(thread_id))["checkpoint"]["checkpoint_id"]
    found = []
    while head is not None:
        state = by_id[head]
        found.append(state)
        head = (state.get("parent_checkpoint") or {}).get("checkpoint_id")
    return found[::-1]


async def truth(client, thread_id: str, head: str | None = None) -> tuple[list[str], int]:
    """(ids of the messages first seen on the branch ending at `head`, compactions on it)."""
    seen: dict[str, str] = {}
    markers = 0
    for state in await chain(client, thread_id, head):
        for message in messages(state):
            if is_summary(message):
                if message["id"] not in seen:
                    markers += 1
                    seen[message["id"]] = "summary"
                continue
            if message["type"] in MESSAGE_TYPES and message.get("id") and message["id"] not in seen:
                seen[message["id"]] = message["type"]
    return [i for i, kind in seen.items() if kind != "summary"], markers


async def regenerate_from(client, thread_id: str) -> str:
    """The checkpoint a "regenerate" of the last answer goes on from: the parent of the first
    checkpoint of the current branch that holds it."""
    states = await chain(client, thread_id)
    answer = messages(states[-1])[-1]["id"]
    first = next(s for s in states if any(m["id"] == answer for m in messages(s)))
    return first["parent_checkpoint"]["checkpoint_id"]


async def conversation(client, thread_id: str, head: str | None = None) -> list[str]:
    """The branch's conversation as the history must show it: message ids in order
    of first appearance, and `MARKER` where each compaction happened -- before the
    messages first seen in the checkpoint that first holds its summary."""
    seen: set[str] = set()
    out: list[str] = []
    for state in await chain(client, thread_id, head):
        new = [m for m in messages(state) if m.get("id") and m["id"] not in seen]
        seen.update(m["id"] for m in new)
        out += [MARKER for m in new if is_summary(m)]
        out += [m["id"] for m in new if not is_summary(m) and m["type"] in MESSAGE_TYPES]
    return out


def shown(items: list[dict[str, Any]]) -> list[str]:
    """A history page's items in the form of `conversation`."""
    return [MARKER if i["type"] == "summary_marker" else i["id"] for i in items if i["type"] != "run_status"]
