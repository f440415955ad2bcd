"""The OpenAI-compatible HTTP API on the web port: ``POST /v1/chat/completions`` and
``GET /v1/models``, each a translation of one native call (docs/openai.md)."""
