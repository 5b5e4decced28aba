#!/usr/bin/env bash
# Build the worker image and print its tag (last line of stdout).
#
#   docker/build-image.sh                       tag namesrv-fleet:<version>-<git sha>
#   IMAGE=reg.example/namesrv-fleet docker/build-image.sh
#   BASE_IMAGE=namesrv-base:bookworm-py3.11 docker/build-image.sh
#
# Base: BASE_IMAGE when set; else the Dockerfile's default (python:3.11-slim-bookworm) when it is
# present or can be pulled; else a Debian bookworm + python3.11 base made here by docker/make-base.sh
# (for machines that reach a Debian mirror but not Docker Hub).
set -euo pipefail
cd "$(dirname "$0")/.."

DEFAULT_BASE=python:3.11-slim-bookworm
LOCAL_BASE=namesrv-base:bookworm-py3.11
IMAGE="${IMAGE:-namesrv-fleet}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
short="${revision:0:12}"
# Uncommitted changes get their own tag, so a tag always names one build's sources.
if [[ "$revision" != unknown ]] && ! git diff --quiet HEAD -- . 2>/dev/null; then short="$short-dirty"; fi
tag="${TAG:-$IMAGE:$version-$short}"

if [[ -z "${BASE_IMAGE:-}" ]]; then
    if docker image inspect "$DEFAULT_BASE" >/dev/null 2>&1 \
        || timeout "${PULL_TIMEOUT:-30}" docker pull --quiet "$DEFAULT_BASE" >/dev/null 2>&1; then
        BASE_IMAGE="$DEFAULT_BASE"
    else
        echo "build-image: cannot pull $DEFAULT_BASE; using a local Debian base, $LOCAL_BASE" >&2
        docker/make-base.sh "$LOCAL_BASE" >&2
        BASE_IMAGE="$LOCAL_BASE"
    fi
fi

# The wheelhouse: the locked wheels (hash-checked) and the build backend, fetched here on the host,
# so the build inside Docker needs no index (and no trust in this host's proxy or certificates).
# Markers are dropped for the download only: the base's exact Python decides at install time
# (Debian's 3.11.2 needs async-timeout, a newer 3.11 does not).
arch="$(uname -m)"
quiet() { grep -v '^WARNING: Location' >&2 || true; }  # pip's notes on absent local indexes
python="${PYTHON:-python3}"
[[ -x .venv/bin/python ]] && python=.venv/bin/python
sed -E 's/ ; [^\\]*\\$/ \\/' requirements.lock > docker/wheels/requirements.any.txt
"$python" -m pip download --quiet --disable-pip-version-check --require-hashes --only-binary=:all: --no-deps \
    --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
    --platform "manylinux_2_36_$arch" --platform "manylinux_2_28_$arch" --platform "manylinux_2_17_$arch" \
    --platform "manylinux2014_$arch" --platform any \
    --dest docker/wheels -r docker/wheels/requirements.any.txt 2>&1 | quiet
"$python" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    --dest docker/wheels "$(sed -n 's/^requires = \["\(hatchling[^"]*\)"\]$/\1/p' pyproject.toml)" 2>&1 | quiet
rm docker/wheels/requirements.any.txt

echo "build-image: $tag on $BASE_IMAGE" >&2
docker build \
    --build-arg WHEELHOUSE_ONLY=1 \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    --build-arg "VERSION=$version" \
    --build-arg "REVISION=$revision" \
    --build-arg "CREATED=$(git log -1 --format=%cI 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)" \
    --tag "$tag" . >&2
size="$(docker image inspect --format '{{.Size}}' "$tag")"
echo "build-image: $tag is $((size / 1000000)) MB ($size bytes)" >&2
echo "$tag"
