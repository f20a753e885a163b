"""Facts about the LangGraph Server the plugin runs in: versions, stream modes, SSE frames, run outcomes, the SDK client it is read through."""
