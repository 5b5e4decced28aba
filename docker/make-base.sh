#!/usr/bin/env bash
# Build a stand-in for python:3.11-slim from Debian packages and import it into the local Docker engine.
#
#   docker/make-base.sh [TAG]        (default tag: namesrv-base:bookworm-py3.11; needs root and debootstrap)
#
# For machines that reach a Debian mirror but not Docker Hub: debootstrap a minimal bookworm with Debian's
# python3.11 (plus its venv module, which the Dockerfile's build stage uses), strip what a runtime never
# reads (apt lists, docs, man pages, locales), and `docker import` the tree. Then:
#   docker build --build-arg BASE_IMAGE=namesrv-base:bookworm-py3.11 .
# Idempotent: an existing tag is kept unless FORCE=1.
set -euo pipefail

TAG="${1:-namesrv-base:bookworm-py3.11}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [[ "${FORCE:-0}" != 1 ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
    echo "make-base: $TAG already present (FORCE=1 rebuilds it)"
    exit 0
fi
if [[ $(id -u) != 0 ]]; then
    echo "make-base: debootstrap needs root" >&2
    exit 1
fi
command -v debootstrap >/dev/null || { echo "make-base: install debootstrap (apt-get install debootstrap)" >&2; exit 1; }

root="$(mktemp -d /tmp/namesrv-base.XXXXXX)"
trap 'rm -rf "$root"' EXIT

debootstrap --variant=minbase --include=python3.11,python3.11-venv,python3-venv,python3,ca-certificates \
    bookworm "$root" "$MIRROR"

# What only a package manager or a human reads: the image never runs apt or man. The packages'
# copyright files stay (as in Debian's own slim images).
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
       "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
       "$root"/var/log/* "$root"/tmp/*
find "$root"/usr/share/doc -mindepth 2 ! -name copyright ! -type d -delete
find "$root"/usr/share/doc -mindepth 1 -type d -empty -delete
find "$root"/usr/lib/python3* -name __pycache__ -prune -exec rm -rf {} +
# The mirror the image was made from, so `apt-get install` inside a derived build works.
echo "deb $MIRROR bookworm main" > "$root"/etc/apt/sources.list

tar -C "$root" -c . | docker import \
    --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["python3"]' \
    --message "debootstrap bookworm minbase + python3.11 (stand-in for python:3.11-slim)" \
    - "$TAG"
docker image ls "$TAG"
