"""The plugin's own in-process requests kept out of the server's log."""

from __future__ import annotations

import logging

__all__ = ["PLUGIN_HOST", "REQUESTS_FILTER"]

# The host the plugin's own in-process requests go to. The transport ignores it;
# it only tells the plugin's requests from the graphs' in the client's log.
PLUGIN_HOST = "journal-bridge.internal"


class _PluginRequestsFilter(logging.Filter):
    """Keeps httpx's line for each of the plugin's own requests out of the server's log
    (the reconciler alone would add one every few seconds); shown at debug level
    of the `journal_bridge` logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) > 1 and getattr(args[1], "host", None) == PLUGIN_HOST:
            return logging.getLogger("journal_bridge").isEnabledFor(logging.DEBUG)
        return True


REQUESTS_FILTER = _PluginRequestsFilter()
