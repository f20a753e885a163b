"""The gateway with the journal, the one line a user adds to their own module."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway import create_gateway  # noqa: E402

from journal_bridge.server import with_journal  # noqa: E402

app = with_journal(create_gateway())
