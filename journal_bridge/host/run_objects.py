"""What a run object (`runs.get`, `runs.list`) says about how its run was created."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["run_checkpoint"]


def run_checkpoint(kwargs: Mapping[str, Any]) -> dict[str, object] | None:
    """The checkpoint the run was created to go on from (`kwargs.config.configurable.checkpoint_id`)."""
    configurable = ((kwargs.get("config") or {}).get("configurable")) or {}
    checkpoint_id = configurable.get("checkpoint_id")
    return {"checkpoint_id": checkpoint_id} if isinstance(checkpoint_id, str) and checkpoint_id else None
