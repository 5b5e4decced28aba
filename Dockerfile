# namesrv-fleet worker image. `make image` builds it (tag: <version>-<git sha>) and prints its size.
#
#   docker build -t namesrv-fleet:0.1.0 .
#   docker run --rm --read-only --tmpfs /tmp -p 8080:8080 -p 9876:9876 \
#       -e NAMESRV_REDIS_URL=redis://redis:6379/0 namesrv-fleet:0.1.0
#
# Base: the official python:3.11-slim-bookworm by default. Where Docker Hub cannot be reached,
# docker/make-base.sh makes an equivalent from Debian's own packages (debootstrap bookworm + python3.11)
# and `--build-arg BASE_IMAGE=namesrv-base:bookworm-py3.11` builds on it; docker/build-image.sh picks
# between the two. Both stages use the same base, so the virtualenv's interpreter link stays valid.
#
# Two stages: "build" installs the locked dependencies (requirements.lock: exact versions and hashes,
# exported from uv.lock) and the service into a virtualenv; the final stage copies only that
# virtualenv, with no pip, no compiler and no source tree, and runs as an unprivileged numeric user.
# The image needs a Redis URL (NAMESRV_REDIS_URL): it ships no redis-server, so it never starts the
# embedded Redis meant for laptops.
#
# Read-only root filesystem: the worker writes nothing at run time. /tmp is the one writable path
# a deployment declares (the chart mounts an emptyDir there; `docker run --read-only --tmpfs /tmp`).

ARG BASE_IMAGE=python:3.11-slim-bookworm

# ---- build: a virtualenv with the locked dependencies and the service ----
FROM ${BASE_IMAGE} AS build
# WHEELHOUSE_ONLY=1: install only from the wheelhouse docker/wheels/ (docker/build-image.sh fills it on
# the host, for builders that cannot reach PyPI themselves); unset, pip downloads from PyPI.
ARG WHEELHOUSE_ONLY=""
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_FIND_LINKS=/wheels \
    PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /opt/namesrv
WORKDIR /src
# Dependencies first, alone: this layer is reused until the lockfile changes. Every wheel must match
# a hash in the lockfile, wherever it came from.
COPY requirements.lock ./
COPY docker/wheels/ /wheels/
RUN /opt/namesrv/bin/pip install ${WHEELHOUSE_ONLY:+--no-index} --require-hashes --only-binary=:all: --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY service ./service
COPY lua ./lua
COPY config ./config
# --no-deps: every dependency came from the lockfile above; pip check proves none is missing.
RUN /opt/namesrv/bin/pip install ${WHEELHOUSE_ONLY:+--no-index} --no-deps . \
 && /opt/namesrv/bin/pip check \
 && /opt/namesrv/bin/pip uninstall --yes pip setuptools

# ---- runtime: the base Python, the virtualenv, a non-root user ----
FROM ${BASE_IMAGE} AS runtime
ARG BASE_IMAGE
ARG VERSION=0.0.0
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.title="namesrv-fleet" \
      org.opencontainers.image.description="A drop-in Apache RocketMQ NameServer: stateless workers sharing one route table in Redis" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
ENV PATH=/opt/namesrv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The user is written into /etc/passwd directly: the Debian minbase stand-in has no useradd.
RUN echo 'namesrv:x:10001:10001:namesrv:/var/lib/namesrv:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'namesrv:x:10001:' >> /etc/group \
 && mkdir -p /var/lib/namesrv \
 && chown 10001:10001 /var/lib/namesrv
COPY --from=build /opt/namesrv /opt/namesrv
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
