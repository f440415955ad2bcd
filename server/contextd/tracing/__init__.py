"""OpenTelemetry traces, opt-in through the standard ``OTEL_*`` environment variables.

``setup.provider_from_env`` reads them at start-up and makes the tracer provider (None:
tracing is off); ``spans.install`` makes it the one every layer's spans go to. The
layers (api, app, store, providers' callers) start spans through ``spans`` and
``genai`` only, and a server without tracing pays a check of one global per span site.
"""
