"""The deployment files in deploy/ stay true, without a Docker engine:

- deploy/compose.yaml parses, builds the replicas from the repository's Dockerfile, and
  every CONTEXTD_* variable it sets is a setting of `contextd serve`;
- the replicas wait for a healthy PostgreSQL, and their stop timeout is longer than
  their shutdown grace;
- deploy/envoy.yaml balances over exactly the replicas' service names and port, over
  HTTP/2, with gRPC health checks frequent enough for the replicas' drain delay;
- docs/deployment.md names every file in deploy/.
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml
from contextd.config import ENV_PREFIX, Settings

from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
ENVOY = DEPLOY / "envoy.yaml"
DEPLOYMENT_PAGE = ROOT / "docs" / "deployment.md"

# The PostgreSQL settings every replica must be given.
DATABASE_SETTINGS = {
    "CONTEXTD_DATABASE_URL",
    "CONTEXTD_DATABASE_POOL_SIZE",
    "CONTEXTD_DATABASE_STATEMENT_TIMEOUT",
    "CONTEXTD_DATABASE_POOL_TIMEOUT",
}

DURATION = re.compile(r"^(\d+(?:\.\d+)?)s$")


def load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(document, dict), f"{path.name} is not a YAML mapping"
    return document


def seconds(value: object) -> float:
    """A duration as compose and Envoy write it: `40s`, or a bare number of seconds."""
    if isinstance(value, int | float):
        return float(value)
    match = DURATION.match(str(value))
    assert match, f"{value!r} is not a duration in seconds"
    return float(match.group(1))


def services() -> dict[str, dict[str, Any]]:
    found = load(COMPOSE)["services"]
    assert isinstance(found, dict)
    return found


def replicas() -> dict[str, dict[str, Any]]:
    """The services built from the repository: the contextd replicas."""
    return {name: service for name, service in services().items() if "build" in service}


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's variables, whether compose.yaml lists them as a mapping or as NAME=value."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {name: str(value) for name, value in env.items()}


def setting_variables() -> set[str]:
    return {ENV_PREFIX + f.name.upper() for f in fields(Settings)}


def dockerfile_port() -> int:
    match = re.search(r"CONTEXTD_PORT=(\d+)", (ROOT / "Dockerfile").read_text(encoding="utf-8"))
    assert match, "the Dockerfile sets no CONTEXTD_PORT"
    return int(match.group(1))


def contextd_cluster() -> dict[str, Any]:
    clusters = load(ENVOY)["static_resources"]["clusters"]
    assert len(clusters) == 1, "envoy.yaml has one cluster: the replicas"
    cluster: dict[str, Any] = clusters[0]
    return cluster


def test_compose_runs_at_least_two_replicas_of_the_dockerfile() -> None:
    built = replicas()
    assert len(built) >= 2
    for name, service in built.items():
        build = service["build"]
        context = (COMPOSE.parent / build["context"]).resolve()
        dockerfile = context / build.get("dockerfile", "Dockerfile")
        assert dockerfile == ROOT / "Dockerfile", f"{name} builds {dockerfile}"
        assert dockerfile.is_file()


def test_every_contextd_variable_is_a_setting() -> None:
    known = setting_variables()
    for name, service in services().items():
        for variable in environment(service):
            if variable.startswith(ENV_PREFIX):
                assert variable in known, f"{name} sets {variable}, which is no setting"


def test_every_replica_sets_the_database_settings() -> None:
    replicas = {n: s for n, s in services().items() if "build" in s}
    assert len(replicas) >= 2
    for name, service in replicas.items():
        assert set(environment(service)) >= DATABASE_SETTINGS, name


def test_replicas_wait_for_a_healthy_postgres_they_name() -> None:
    postgres = services()["postgres"]
    assert str(postgres["image"]).startswith("postgres:15")
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    volume = postgres["volumes"][0].split(":")[0]
    assert volume in load(COMPOSE)["volumes"], "PostgreSQL's data is in a named volume"
    for name, service in replicas().items():
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy", name
        assert "@postgres:5432/" in environment(service)["CONTEXTD_DATABASE_URL"], name


def test_replicas_are_stopped_after_their_shutdown_grace() -> None:
    for name, service in replicas().items():
        grace = float(environment(service)["CONTEXTD_SHUTDOWN_GRACE"])
        drain = float(environment(service).get("CONTEXTD_DRAIN_DELAY", "0"))
        assert drain < grace, name
        assert seconds(service["stop_grace_period"]) > grace, name


def test_envoy_balances_over_the_replicas() -> None:
    cluster = contextd_cluster()
    endpoints = {
        (
            endpoint["endpoint"]["address"]["socket_address"]["address"],
            endpoint["endpoint"]["address"]["socket_address"]["port_value"],
        )
        for group in cluster["load_assignment"]["endpoints"]
        for endpoint in group["lb_endpoints"]
    }
    port = dockerfile_port()
    expected = {
        (name, int(environment(service).get("CONTEXTD_PORT", port)))
        for name, service in replicas().items()
    }
    assert endpoints == expected
    options = cluster["typed_extension_protocol_options"]
    http = options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
    assert "http2_protocol_options" in http["explicit_http_config"], "gRPC needs HTTP/2"
    envoy = services()["envoy"]
    assert any(str(v).startswith("./envoy.yaml:") for v in envoy["volumes"])


def test_envoy_sees_a_drain_before_the_replica_refuses_calls() -> None:
    (check,) = contextd_cluster()["health_checks"]
    assert "grpc_health_check" in check
    noticed = seconds(check["interval"]) + seconds(check["timeout"])
    for name, service in replicas().items():
        assert float(environment(service)["CONTEXTD_DRAIN_DELAY"]) > noticed, name


def test_the_deployment_page_names_every_deploy_file() -> None:
    page = DEPLOYMENT_PAGE.read_text(encoding="utf-8")
    files = sorted(p.relative_to(ROOT).as_posix() for p in DEPLOY.rglob("*") if p.is_file())
    assert files
    for name in files:
        assert name in page, f"docs/deployment.md does not name {name}"
