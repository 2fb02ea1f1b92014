#!/usr/bin/env bash
# `make registry`: a loopback OCI registry (Debian's docker-registry) for `make
# bundle-build-push` and `make catalog-build-push`, on 127.0.0.1 with an ephemeral port
# (REGISTRY_PORT=N for a fixed one) and storage in a temp dir, until Ctrl-C; then it is
# stopped by PID and its storage removed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v docker-registry >/dev/null || { echo "docker-registry is not installed: apt-get install docker-registry (scripts/install-test-deps.sh does)" >&2; exit 1; }
registry_port=${REGISTRY_PORT:-}
if [ -n "$registry_port" ] && ! [[ "$registry_port" =~ ^[0-9]+$ ]]; then
  echo "REGISTRY_PORT=$registry_port: a port number is expected, e.g. REGISTRY_PORT=5000 (or leave it unset for a free port)" >&2
  exit 2
fi
if [ -n "$registry_port" ] && (exec 3<>"/dev/tcp/127.0.0.1/$registry_port") 2>/dev/null; then
  echo "127.0.0.1:$registry_port is already in use: pick another REGISTRY_PORT, or leave it unset for a free port" >&2
  exit 1
fi
# shellcheck source=lib/registry.sh
. "$root/scripts/lib/registry.sh"
# The EXIT trap stops the registry: make Ctrl-C and SIGTERM exit through it.
trap 'exit 130' INT
trap 'exit 143' TERM
address=127.0.0.1:$port
echo "registry $address is up (PID $registry_pid, storage $work/data)"
echo "  make bundle-build-push VERSION=0.1.0 IMAGE_TAG_BASE=$address/model-orchestra-operator"
echo "  make catalog-build-push VERSION=0.1.0 IMAGE_TAG_BASE=$address/model-orchestra-operator"
echo "Ctrl-C stops it."
status=0
wait "$registry_pid" || status=$?
echo "docker-registry exited by itself ($status)" >&2
exit 1
