"""Local HTTP servers that speak LLM providers' streaming formats, for offline tests."""
