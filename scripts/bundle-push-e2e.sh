#!/usr/bin/env bash
# `make bundle-build-push` end to end against a loopback registry: Debian's docker-registry
# on 127.0.0.1 with an ephemeral port, then skopeo (an independent client) reads back the
# operator and bundle images, and the operator image's entrypoint runs.
# Needs docker-registry and skopeo (scripts/install-test-deps.sh). Run by `make test`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$(mktemp -d)
registry_pid=
cleanup() {
  [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: /nonexistent\nhttp:\n  addr: 127.0.0.1:5000\n' > "$work/config.yml"
REGISTRY_HTTP_ADDR=127.0.0.1:$port REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY=$work/data \
  docker-registry serve "$work/config.yml" >/dev/null 2>&1 &
registry_pid=$!
for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

version=0.1.0
base=127.0.0.1:$port/model-orchestra-operator
# The checked-in bundle names ghcr.io; build this one into a scratch bundles dir.
make --no-print-directory bundle-build-push VERSION=$version IMAGE_TAG_BASE="$base" BUNDLES_DIR="$work/bundles" >"$work/make.log" 2>&1 || { cat "$work/make.log"; exit 1; }

labels=$(skopeo inspect --tls-verify=false "docker://$base-bundle:v$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Labels"]["operators.operatorframework.io.bundle.package.v1"])')
[ "$labels" = model-orchestra-operator ] || { echo "bundle image labels wrong: $labels"; exit 1; }
entry=$(skopeo inspect --config --tls-verify=false "docker://$base:v$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["config"]["Entrypoint"][0])')
[ "$entry" = /model-orchestra-operator ] || { echo "operator entrypoint wrong: $entry"; exit 1; }
skopeo copy -q --src-tls-verify=false "docker://$base:v$version" "oci:$work/op:x"
layer=$(skopeo inspect --raw --tls-verify=false "docker://$base:v$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][0]["digest"].split(":")[1])')
mkdir "$work/root" && tar -xzf "$work/op/blobs/sha256/$layer" -C "$work/root"
ldd "$work/root/model-orchestra-operator" 2>&1 | grep -Eq 'not a dynamic executable|statically linked' || { echo "operator binary is not static"; exit 1; }
"$work/root/model-orchestra-operator" --help >/dev/null
echo "bundle-push-e2e: ok (operator image and bundle image pushed to 127.0.0.1:$port, read back with skopeo)"
