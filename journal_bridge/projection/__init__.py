"""Records to what a reader sees: history items, markers, thread and run summaries."""
