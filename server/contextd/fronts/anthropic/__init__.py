"""Anthropic's Messages API on the web port: ``POST /v1/messages`` and
``POST /v1/messages/count_tokens``, each a translation of one native call
(docs/anthropic.md)."""
