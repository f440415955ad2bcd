"""Errors in Anthropic's shape: ``{"type": "error", "error": {"type", "message"},
"request_id"}``, the ``type`` Anthropic gives each HTTP status (chat_http.failure maps
the native statuses to statuses)."""

from __future__ import annotations

from contextd.fronts.chat_http.failure import HttpFailure

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
}


def error_type(status: int) -> str:
    return _TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def error_body(failure: HttpFailure, request_id: str | None = None) -> dict[str, object]:
    body: dict[str, object] = {
        "type": "error",
        "error": {"type": error_type(failure.status), "message": failure.message},
    }
    if request_id:
        body["request_id"] = request_id
    return body
