"""The deployment files in deploy/ stay true, without a Docker engine:

- deploy/compose.yaml parses, builds the replicas from the repository's Dockerfile, and
  every CONTEXTD_* variable it sets is a setting of `contextd serve`;
- the replicas wait for a healthy PostgreSQL, and their stop timeout is longer than
  their shutdown grace;
- deploy/envoy.yaml balances over exactly the replicas' service names and port, over
  HTTP/2, with gRPC health checks frequent enough for the replicas' drain delay;
- docs/deployment.md names every file in deploy/;
- the Dockerfile passes hadolint, its health check asks the port CONTEXTD_PORT names
  (run against a live server), .dockerignore sends only what the build copies, and the
  image's pinned packages (deploy/image-requirements.txt) satisfy pyproject.toml.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml
from contextd.config import ENV_PREFIX, Settings
from packaging.requirements import Requirement

from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
ENVOY = DEPLOY / "envoy.yaml"
DEPLOYMENT_PAGE = ROOT / "docs" / "deployment.md"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
IMAGE_PINS = DEPLOY / "image-requirements.txt"
HADOLINT = Path(sys.executable).parent / "hadolint"

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


# The image --------------------------------------------------------------------------


def hadolint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(HADOLINT), "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60
    )


def test_the_dockerfile_passes_hadolint() -> None:
    done = hadolint(DOCKERFILE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_catches_what_it_should(tmp_path: Path) -> None:
    sloppy = tmp_path / "Dockerfile"
    sloppy.write_text("FROM python:latest\nRUN pip install requests\nUSER contextd\n")
    done = hadolint(sloppy)
    assert done.returncode != 0
    for rule in ("DL3007", "DL3013", "DL3066"):  # latest tag, unpinned pip, named user
        assert rule in done.stdout, done.stdout


def health_command() -> list[str]:
    match = re.search(r"^HEALTHCHECK .*?CMD (\[.*?\])$", DOCKERFILE.read_text(), re.M | re.S)
    assert match, "the Dockerfile has no HEALTHCHECK ... CMD [...]"
    command = yaml.safe_load(match.group(1))  # a JSON array, which YAML reads too
    assert isinstance(command, list)
    return [str(part) for part in command]


def test_the_health_check_asks_the_port_contextd_port_names(address: str) -> None:
    host, port = address.rsplit(":", 1)
    assert host == "127.0.0.1"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    served = subprocess.run(
        health_command(), env={**env, "CONTEXTD_PORT": port}, capture_output=True, timeout=60
    )
    assert served.returncode == 0, served.stderr
    elsewhere = subprocess.run(
        health_command(), env={**env, "CONTEXTD_PORT": "1"}, capture_output=True, timeout=60
    )
    assert elsewhere.returncode != 0


def ignored(path: str, rules: list[str]) -> bool:
    """Whether .dockerignore's rules leave ``path`` (or a folder above it) out.

    As the engine reads them: the last rule that matches wins, `!` takes a path back,
    `**` spans folders, and a rule that matches a folder covers what is inside it.
    """
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for rule in rules:
        negate = rule.startswith("!")
        pattern = rule.removeprefix("!").strip("/")
        if any(re.fullmatch(glob_regex(pattern), prefix) for prefix in prefixes):
            result = not negate
    return result


def glob_regex(pattern: str) -> str:
    """`**/` is any run of folders (none too), `**` anything, `*` and `?` stop at a `/`."""
    pieces = re.split(r"(\*\*/|\*\*|\*|\?)", pattern)
    wildcards = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
    return "".join(wildcards.get(piece, re.escape(piece)) for piece in pieces)


def dockerignore_rules() -> list[str]:
    lines = DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def copied_sources() -> list[str]:
    sources: list[str] = []
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources.extend(shlex.split(line)[1:-1])
    return sources


def test_dockerignore_sends_what_the_build_copies_and_nothing_big() -> None:
    rules = dockerignore_rules()
    sources = copied_sources()
    assert {"pyproject.toml", "README.md", "server", "deploy/image-requirements.txt"} <= set(
        sources
    )
    for source in sources:
        assert not ignored(source, rules), source
    assert not ignored("server/contextd/store/engine/migrations/sqlite/0001_core.sql", rules)
    for heavy in (".venv/bin/python", ".git/HEAD", "clients/node/node_modules/x/y.js",
                  "tests/browser/dist/a.js", "server/contextd/__pycache__/cli.pyc",
                  "bench/README.md", "data/contextd.db"):  # fmt: skip
        assert ignored(heavy, rules), heavy


def test_the_ignore_reader_follows_the_engines_rules() -> None:
    rules = ["*", "!server/", "**/__pycache__", "!server/keep/__pycache__"]
    assert ignored("README.md", rules) and ignored("a/b/c", rules)
    assert not ignored("server/x.py", rules)
    assert ignored("server/a/__pycache__/x.pyc", rules)
    assert not ignored("server/keep/__pycache__/x.pyc", rules)


def test_the_image_pins_satisfy_pyproject() -> None:
    pins: dict[str, str] = {}
    for line in IMAGE_PINS.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version, f"not a pin: {line}"
            pins[canonical(name)] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for dependency in project["dependencies"]:
        requirement = Requirement(dependency)
        name = canonical(requirement.name)
        assert name in pins, f"{requirement.name} is not pinned; run scripts/lock_image.py"
        assert requirement.specifier.contains(pins[name]), (
            f"{name}=={pins[name]} is outside {requirement.specifier}; run scripts/lock_image.py"
        )


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("line", ["FROM python:3.11-slim", "FROM python:latest"])
def test_base_images_are_pinned_to_a_patch_release(line: str) -> None:
    assert not PINNED_BASE.match(line)


PINNED_BASE = re.compile(r"^FROM python:\d+\.\d+\.\d+-slim-\w+( AS \w+)?$")


def test_the_dockerfile_pins_its_base_image() -> None:
    bases = [line for line in DOCKERFILE.read_text().splitlines() if line.startswith("FROM ")]
    assert len(bases) == 2
    for line in bases:
        assert PINNED_BASE.match(line), line
