# contextd server image. Not built in CI (no Docker engine on the CI machines).
# Build: docker build -t contextd .   Run: docker run -p 50151:50151 -v contextd-data:/data contextd

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY server ./server
RUN python -m venv /opt/contextd \
    && /opt/contextd/bin/pip install --no-cache-dir --upgrade pip \
    && /opt/contextd/bin/pip install --no-cache-dir .

FROM python:3.11-slim
RUN useradd --system --uid 10001 --home-dir /data --create-home contextd
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
USER contextd
WORKDIR /data
VOLUME ["/data"]
# 50152: gRPC-Web / Connect for browser and .NET Framework add-ins, off unless
# CONTEXTD_WEB_PORT=50152 (and CONTEXTD_CORS_ORIGINS for browser pages) is set.
EXPOSE 50151 50152
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["contextd", "health", "--address", "127.0.0.1:50151"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["contextd", "serve"]
