# syntax=docker/dockerfile:1
#
# namesrv-fleet worker image.
#
#   docker build -t namesrv-fleet:0.1.0 .
#   docker run --rm -p 8080:8080 -p 9876:9876 -e NAMESRV_REDIS_URL=redis://redis:6379/0 namesrv-fleet:0.1.0
#
# Two stages: "build" turns the project and its dependencies into wheels; the final stage installs
# only those wheels into a slim Python, with no compiler, no pip cache and no source tree, and runs
# as an unprivileged numeric user. The image needs a Redis URL (NAMESRV_REDIS_URL): it ships no
# redis-server, so it never starts the embedded Redis meant for laptops.
# Extra features (e.g. the change-log export's Parquet writer) come in with --build-arg EXTRAS=...

ARG PYTHON_VERSION=3.11

# ---- build: wheels for the service and every dependency ----
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY service ./service
COPY lua ./lua
COPY config ./config
ARG EXTRAS=""
RUN python -m pip wheel --wheel-dir /wheels ".${EXTRAS:+[$EXTRAS]}" \
 && python -m pip install --no-index --find-links /wheels --prefix /install \
      "namesrv-fleet${EXTRAS:+[$EXTRAS]}"

# ---- runtime: slim Python, the installed packages, a non-root user ----
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="namesrv-fleet" \
      org.opencontainers.image.description="A drop-in Apache RocketMQ NameServer: stateless workers sharing one route table in Redis" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --system --gid 10001 namesrv \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/namesrv --create-home \
      --shell /usr/sbin/nologin namesrv
COPY --from=build /install /usr/local
COPY config/default.toml /usr/local/share/namesrv/default.toml
WORKDIR /var/lib/namesrv
USER 10001:10001
# HTTP (JSON API, /livez, /readyz, /metrics, /rocketmq/nsaddr) and RocketMQ remoting.
EXPOSE 8080 9876
# Docker's own check; Kubernetes ignores it and uses the chart's probes. curl is not in slim images.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('NAMESRV_HTTP_PORT', '8080'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/livez', timeout=2).status == 200 else 1)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["namesrv"]
CMD []
