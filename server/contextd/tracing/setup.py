"""The tracer provider the ``OTEL_*`` environment variables ask for, or None (tracing off).

Tracing is on when ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``;
``none`` is off) or, that variable unset, when an OTLP endpoint is set
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``).
``OTEL_SDK_DISABLED=true`` turns it off whatever else is set. Everything else (the
endpoint, headers, timeout, ``OTEL_TRACES_SAMPLER``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_SERVICE_NAME``, the batch processor's ``OTEL_BSP_*``) is read by the SDK itself.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from opentelemetry.sdk.resources import (
    SERVICE_NAME,
    SERVICE_VERSION,
    OTELResourceDetector,
    Resource,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)

from contextd import __version__
from contextd.tracing import spans

log = logging.getLogger("contextd.tracing")

DEFAULT_SERVICE_NAME = "contextd"
PROTOCOLS = ("http/protobuf", "grpc")


def wanted_exporters(env: Mapping[str, str]) -> list[str]:
    """The exporters the environment names; empty when tracing is off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not named:
        endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        return ["otlp"] if any(env.get(name, "").strip() for name in endpoints) else []
    exporters = [name.strip() for name in named.split(",") if name.strip()]
    if "none" in exporters:
        return []
    unknown = [name for name in exporters if name not in ("otlp", "console")]
    if unknown:
        raise SystemExit(
            f"OTEL_TRACES_EXPORTER: {', '.join(unknown)} is not an exporter of contextd "
            "(otlp, console or none)"
        )
    return exporters


def provider_from_env(env: Mapping[str, str] | None = None) -> TracerProvider | None:
    """The provider with the exporters the environment asks for; None when it asks for none."""
    env = os.environ if env is None else env
    exporters = wanted_exporters(env)
    if not exporters:
        return None
    provider = TracerProvider(resource=_resource())  # the sampler from OTEL_TRACES_SAMPLER
    for name in exporters:
        if name == "console":
            provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        else:
            provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(env)))
    return provider


def install_from_env() -> TracerProvider | None:
    """Trace as the environment asks (see above); the provider, to be shut down at the
    end (it exports what is left), or None when tracing is off."""
    provider = provider_from_env()
    if provider is not None:
        spans.install(provider)
        log.info("tracing", extra={"exporters": wanted_exporters(os.environ)})
    return provider


def _resource() -> Resource:
    """The SDK's resource from the environment, with contextd's name and version where
    the environment gives none (the attributes passed to ``Resource.create`` would win
    over ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME``: only defaults are passed)."""
    from_env = OTELResourceDetector().detect().attributes
    defaults = {SERVICE_NAME: DEFAULT_SERVICE_NAME, SERVICE_VERSION: __version__}
    return Resource.create({k: v for k, v in defaults.items() if not from_env.get(k)})


def _otlp_exporter(env: Mapping[str, str]) -> SpanExporter:
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol in PROTOCOLS:
        from contextd.tracing import exporters

        if protocol == "grpc":
            return exporters.GrpcSpanExporter()
        return exporters.HttpSpanExporter()
    raise SystemExit(
        f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not supported by contextd "
        f"({' or '.join(PROTOCOLS)})"
    )
