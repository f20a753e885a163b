"""The gateway with the journal, the one line a user adds to their own module."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from journal_bridge.server import with_journal

# The server loads this file by its path: its sibling is loaded the same way.
_spec = importlib.util.spec_from_file_location("gateway", Path(__file__).with_name("gateway.py"))
gateway = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gateway)

app = with_journal(gateway.create_gateway())
