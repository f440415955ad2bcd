"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}`` with
the HTTP status OpenAI answers with (chat_http.failure maps the native statuses)."""

from __future__ import annotations

from contextd.fronts.chat_http.failure import HttpFailure


def error_type(status: int) -> str:
    """OpenAI's ``type`` for an answer of ``status``."""
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    if status == 502:
        return "api_error"  # the provider failed
    return "server_error" if status >= 499 else "invalid_request_error"


def error_body(failure: HttpFailure) -> dict[str, object]:
    return {
        "error": {
            "message": failure.message,
            "type": error_type(failure.status),
            "param": failure.param,
            "code": failure.code,
        }
    }
