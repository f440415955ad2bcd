"""Which OTEL_* settings turn tracing on, and which are refused at start-up."""

from __future__ import annotations

import pytest
from contextd.tracing.setup import provider_from_env, wanted_exporters

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


@pytest.mark.parametrize(
    ("env", "exporters"),
    [
        ({}, []),
        (ENDPOINT, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, ["otlp", "console"]),
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, []),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, []),
    ],
)
def test_tracing_is_on_when_the_environment_asks(env: dict[str, str], exporters: list[str]) -> None:
    assert wanted_exporters(env) == exporters


def test_an_unknown_exporter_stops_the_start() -> None:
    with pytest.raises(SystemExit, match="zipkin"):
        wanted_exporters({"OTEL_TRACES_EXPORTER": "zipkin"})


def test_an_unknown_protocol_stops_the_start() -> None:
    with pytest.raises(SystemExit, match="http/json"):
        provider_from_env({**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_both_otlp_protocols_are_carried() -> None:
    for protocol in ("http/protobuf", "grpc"):
        provider = provider_from_env({**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol})
        assert provider is not None
        provider.shutdown()
