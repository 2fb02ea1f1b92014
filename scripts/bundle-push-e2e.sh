#!/usr/bin/env bash
# `make bundle-build-push` end to end against a loopback registry: Debian's docker-registry
# on 127.0.0.1 with an ephemeral port, then skopeo (an independent client) reads back the
# operator and bundle images, and the operator image's entrypoint runs.
# Needs docker-registry and skopeo (scripts/install-test-deps.sh). Run by `make test`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=lib/registry.sh
. "$root/scripts/lib/registry.sh"

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

# The project's catalog: rendered (bundles from the checked-in directories), validated,
# built and pushed; skopeo must see the configs label.
make --no-print-directory catalog-build-push VERSION=$version IMAGE_TAG_BASE="$base" CATALOG_DIR="$work/configs" >"$work/catalog.log" 2>&1 || { cat "$work/catalog.log"; exit 1; }
cmp -s "$work/configs/model-orchestra-operator/catalog.yaml" catalog/configs/model-orchestra-operator/catalog.yaml || { echo "make catalog differs from the checked-in catalog/configs"; exit 1; }
label=$(skopeo inspect --tls-verify=false "docker://$base-catalog:v$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Labels"]["operators.operatorframework.io.index.configs.v1"])')
[ "$label" = /configs ] || { echo "catalog image label wrong: $label"; exit 1; }

# The same from the registry: a template naming the bundle image pushed above.
printf 'schema: olm.semver\ngenerateMajorChannels: true\nstable:\n  bundles:\n  - image: %s\n' "$base-bundle:v$version" > "$work/template.yaml"
make --no-print-directory catalog-build-push VERSION=$version IMAGE_TAG_BASE="$base" CATALOG_TEMPLATE="$work/template.yaml" \
  BUNDLES_DIR="$work/none" CATALOG_DIR="$work/from-registry" CATALOG_IMG="$base-catalog:registry" >"$work/catalog2.log" 2>&1 || { cat "$work/catalog2.log"; exit 1; }
grep -q "1 pulled\|1 from the cache" "$work/catalog2.log" || { cat "$work/catalog2.log"; echo "the bundle was not read from the registry"; exit 1; }
skopeo inspect --tls-verify=false "docker://$base-catalog:registry" >/dev/null
make --no-print-directory subscriptions VERSION=$version IMAGE_TAG_BASE="$base" | grep -q "kind: ClusterExtension"
echo "bundle-push-e2e: ok (operator, bundle and catalog images pushed to 127.0.0.1:$port, read back with skopeo)"
