"""The caller's trace context, sent with every call when the calling process uses OpenTelemetry.

When a span is current, the globally configured propagator
(``opentelemetry.propagate.inject``: W3C ``traceparent`` and ``tracestate`` unless
``OTEL_PROPAGATORS`` says otherwise) writes it into the call's metadata, so the server's
spans join the caller's trace. OpenTelemetry stays optional: the SDK looks for it only
once the calling process has loaded ``opentelemetry.context``, because a process that has
not cannot have a current span; without it nothing is imported and nothing is added.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Collection

from ._credentials import CallMetadata

_CONTEXT_MODULE = "opentelemetry.context"
# tracestate only means something next to the traceparent it came with.
_TRACE_KEYS = frozenset({"traceparent", "tracestate"})


@functools.cache
def _injector() -> Callable[[dict[str, str]], None] | None:
    try:
        from opentelemetry import propagate
    except Exception:
        # Missing, or failing at import (an unknown name in OTEL_PROPAGATORS raises):
        # the calls go without trace context rather than fail.
        return None
    return propagate.inject


def trace_metadata(own_keys: Collection[str]) -> CallMetadata:
    """The current trace context as metadata pairs, leaving out keys in ``own_keys``.

    ``own_keys`` are the (lowercase) keys of the caller's own metadata, which wins:
    with its own ``traceparent``, no ``tracestate`` is added either.
    """
    if _CONTEXT_MODULE not in sys.modules:
        return ()
    inject = _injector()
    if inject is None:
        return ()
    carrier: dict[str, str] = {}
    inject(carrier)
    skip = {*own_keys, *_TRACE_KEYS} if "traceparent" in own_keys else own_keys
    return tuple((key.lower(), value) for key, value in carrier.items() if key.lower() not in skip)


def with_trace(metadata: CallMetadata | None, trace: CallMetadata) -> CallMetadata | None:
    """``metadata`` with the ``trace`` pairs appended (when there are any)."""
    return (*(metadata or ()), *trace) if trace else metadata


def metadata_keys(metadata: CallMetadata | None) -> frozenset[str]:
    """The lowercase keys of ``metadata``."""
    return frozenset(key.lower() for key, _ in metadata or ())
