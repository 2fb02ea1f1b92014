#!/usr/bin/env bash
# Builds the upstream Go programs the tests run against, from pinned Go modules, into
# target/tools/bin. Each directory under tools/ is a Go module of its own (go.mod and go.sum
# committed) whose `tool` directives name the programs; nothing is downloaded but modules
# from the machine's Go module proxy.
#
# A module is rebuilt only when its go.mod, go.sum or build settings change: a stamp per
# module records their hash, so a second run is a no-op. Go's module and build caches live
# under target/tools/go (never in $HOME), so `rm -rf target` starts from scratch.
#
#   scripts/build-go-tools.sh            # every module
#   scripts/build-go-tools.sh k8s kwok   # only these
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/target/tools/bin"
stamps="$root/target/tools/stamps"
share="$root/target/tools/share"
mkdir -p "$bin" "$stamps" "$share"

export GOMODCACHE="$root/target/tools/go/mod"
export GOCACHE="$root/target/tools/go/cache"
# Keep the machine's own GOFLAGS (its proxy set-up); -modcacherw lets `rm -rf` remove the cache.
GOFLAGS="$(go env GOFLAGS) -modcacherw"
export GOFLAGS
export CGO_ENABLED=0
# The Go compiler and linker collect garbage less often: a sixth less CPU for the same
# packages (k8s.io/api, apimachinery and client-go from scratch here: 97 s of CPU at the
# default 100, 78 s at 400; 470 MB at the peak instead of 350), the same binaries.
export GOGC=${GOGC:-400}

# The pinned version of a module's dependency, to stamp into the program (without it,
# kube-apiserver's /version says v0.0.0-master and `opm version` says unknown).
# Read from go.mod itself, not `go list`, which would need the module cache (dropped below).
pinned() { awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$root/tools/$1/go.mod"; }

# The programs a module's `tool` directives name, read from go.mod as above; and the module
# itself when it is a main package of ours (tools/coredns: CoreDNS with the plugins we use).
tools_of() {
  awk '/^tool \(/ { b = 1; next } b && /^\)/ { b = 0; next } b { print $1 } /^tool [^(]/ { print $2 }' "$1/go.mod"
  if [ -f "$1/main.go" ]; then echo .; fi
}

# Per module: the build tags and linker flags its programs need.
settings() {
  case "$1" in
    k8s)
      local v; v=$(pinned k8s k8s.io/kubernetes)
      local minor; minor=$(echo "$v" | cut -d. -f2)
      echo "tags= ldflags=-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
      ;;
    # opm, operator-sdk and OLM use containers/image: without this tag it needs gpgme (cgo).
    opm)
      local v; v=$(pinned opm github.com/operator-framework/operator-registry)
      echo "tags=containers_image_openpgp ldflags=-s -w -X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$v"
      ;;
    operator-sdk)
      local v; v=$(pinned operator-sdk github.com/operator-framework/operator-sdk)
      local pkg=github.com/operator-framework/operator-sdk/internal/version
      echo "tags=containers_image_openpgp ldflags=-s -w -X $pkg.Version=$v -X $pkg.GitVersion=$v"
      ;;
    ollama)
      # cgo: ggml's CPU kernels. x86-64-v3 turns on AVX2/FMA/F16C (SSE2-only answers at ~1
      # token/s); the flags are pinned, as greedy output changes with them. Static, for a
      # FROM-scratch image.
      local v; v=$(pinned ollama github.com/ollama/ollama)
      echo "tags= ldflags=-s -w -X github.com/ollama/ollama/version.Version=${v#v} -linkmode external -extldflags -static"
      ;;
    olm-v0)
      # Upstream's release flags: no cgo, the json1 tag (its sqlite code, unused with cgo off).
      local v; v=$(pinned olm-v0 github.com/operator-framework/operator-lifecycle-manager)
      echo "tags=json1 ldflags=-s -w -X github.com/operator-framework/operator-lifecycle-manager/pkg/version.OLMVersion=$v"
      ;;
    olm)
      local v; v=$(pinned olm github.com/operator-framework/operator-controller)
      echo "tags=containers_image_openpgp ldflags=-s -w -X github.com/operator-framework/operator-controller/internal/shared/version.version=$v"
      ;;
    *) echo "tags= ldflags=-s -w" ;;
  esac
}

# Files taken from a module's verified zip (go.sum) rather than built: the real CRDs of
# the optional kinds the operator renders. Prints the paths it wrote.
extract() {
  case "$1" in
    crds)
      local dir="$root/tools/crds" out="$share/crds"
      mkdir -p "$out"
      local keda prom
      keda=$(cd "$dir" && go mod download -json github.com/kedacore/keda/v2 | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
      prom=$(cd "$dir" && go mod download -json github.com/prometheus-operator/prometheus-operator | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
      cp "$keda/config/crd/bases/keda.sh_scaledobjects.yaml" "$out/"
      cp "$prom/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" "$out/"
      chmod u+w "$out"/*.yaml
      ;;
    olm)
      # OLM v1's own CRDs (ClusterCatalog, ClusterExtension), which the OLM drill installs.
      local src out="$share/olm"
      mkdir -p "$out"
      src=$(cd "$root/tools/olm" && go mod download -json github.com/operator-framework/operator-controller | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
      cp "$src/config/base/catalogd/crd/bases/olm.operatorframework.io_clustercatalogs.yaml" "$out/"
      cp "$src/config/base/operator-controller/crd/bases/olm.operatorframework.io_clusterextensions.yaml" "$out/"
      chmod u+w "$out"/*.yaml
      ;;
    olm-v0)
      # OLM v0's install manifests as its release makes them (scripts/package_release.sh:
      # `helm template` of deploy/chart with deploy/upstream/values.yaml), with its images by
      # tag and the pinned opm (local-cluster's olm_v0 module leaves out what needs the
      # internet), and its CRDs (deploy/chart/crds). helm comes from tools/operator-sdk.
      build_module operator-sdk
      local src out="$share/olm-v0" v opm helm_home
      v=$(pinned olm-v0 github.com/operator-framework/operator-lifecycle-manager)
      opm=$(pinned opm github.com/operator-framework/operator-registry)
      mkdir -p "$out"
      src=$(cd "$root/tools/olm-v0" && go mod download -json github.com/operator-framework/operator-lifecycle-manager | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
      helm_home=$(mktemp -d)
      HELM_CACHE_HOME=$helm_home HELM_CONFIG_HOME=$helm_home HELM_DATA_HOME=$helm_home \
        "$bin/helm" template olm "$src/deploy/chart" --namespace olm -f "$src/deploy/upstream/values.yaml" \
        --set "olm.image.ref=quay.io/operator-framework/olm:$v,catalog.image.ref=quay.io/operator-framework/olm:$v,package.image.ref=quay.io/operator-framework/olm:$v" \
        --set-string "catalog.opmImageArgs=--opmImage=quay.io/operator-framework/opm:$opm" >"$out/olm.yaml"
      rm -rf "$helm_home"
      for f in "$src"/deploy/chart/crds/*.yaml; do echo "---"; cat "$f"; done >"$out/crds.yaml"
      ;;
  esac
}

# What a module leaves in target/tools once built, to tell whether a build is complete.
outputs() {
  case "$1" in
    crds) echo "$share/crds/keda.sh_scaledobjects.yaml $share/crds/monitoring.coreos.com_servicemonitors.yaml" ;;
    k8s) for p in $2; do echo "$bin/$(basename "$p" | sed "s/^v3$/etcd/")"; done ;;
    *) for p in $2; do if [ "$p" = . ]; then echo "$bin/$1"; else echo "$bin/$(basename "$p")"; fi; done ;;
  esac
}

# The headers Go's module zip drops from Ollama's vendored llama.cpp (`llama/llama.cpp/vendor`
# is not in it): the same llama.cpp vendor directory of the llama-cpp-python sdist on PyPI,
# pinned and checked by SHA-256.
LLAMA_CPP_PYTHON=0.3.36
LLAMA_CPP_PYTHON_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
llama_vendor() {
  local out="$share/llama-cpp-python-$LLAMA_CPP_PYTHON"
  if [ ! -f "$out/nlohmann/json_fwd.hpp" ]; then
    local work; work=$(mktemp -d)
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
      "llama-cpp-python==$LLAMA_CPP_PYTHON" -d "$work" >&2
    echo "$LLAMA_CPP_PYTHON_SHA256  $work/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz" | sha256sum --check --quiet - >&2
    tar -xzf "$work/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz" -C "$work" --wildcards "*/vendor/llama.cpp/vendor/*"
    rm -rf "$out" && mv "$work/llama_cpp_python-$LLAMA_CPP_PYTHON/vendor/llama.cpp/vendor" "$out"
    rm -rf "$work"
  fi
  echo "$out"
}

# Per module: its cgo settings, exported (the others build without cgo). CPU_FLAGS is part
# of the stamp: a change rebuilds.
CPU_FLAGS="-O3 -march=x86-64-v3"
cgo_exports() {
  case "$1" in
    ollama) export CGO_ENABLED=1 CGO_CFLAGS="$CPU_FLAGS" CGO_CXXFLAGS="$CPU_FLAGS" CGO_CPPFLAGS="-I$(llama_vendor)" ;;
  esac
}

# No DWARF from the compiler either: the linker drops it (-w) anyway, and making it is a
# share of every package's compile time. Part of the stamp.
GCFLAGS="all=-dwarf=false"

build_module() {
  local name=$1 dir="$root/tools/$1"
  [ -f "$dir/go.mod" ] || { echo "build-go-tools: no module tools/$name" >&2; return 1; }
  local s tags ldflags
  s=$(settings "$name")
  tags=${s#tags=}; tags=${tags%% ldflags=*}
  ldflags=${s#*ldflags=}
  local key
  local native=; [ "$name" = ollama ] && native="$CPU_FLAGS $LLAMA_CPP_PYTHON"
  key=$(cat "$dir/go.mod" "$dir/go.sum" <(echo "$s" "$(go version)" "$CGO_ENABLED" "$GCFLAGS" $native) | sha256sum | cut -c1-16)
  # What a module leaves in share/ has a stamp of its own, with how it is made: a change
  # there makes it again without building the programs again.
  local extract_key
  extract_key=$(cat "$dir/go.mod" "$dir/go.sum" <(declare -f extract) | sha256sum | cut -c1-16)
  local programs
  programs=$(tools_of "$dir")
  local all_present=1 f
  for f in $(outputs "$name" "$programs"); do [ -e "$f" ] || all_present=0; done
  if [ "$all_present" = 1 ] && [ "$(cat "$stamps/$name" 2>/dev/null)" = "$key" ]; then
    if [ "$(cat "$stamps/$name.share" 2>/dev/null)" != "$extract_key" ]; then
      extract "$name"
      echo "$extract_key" > "$stamps/$name.share"
      built_any=1
    fi
    return 0
  fi
  echo "build-go-tools: building tools/$name ($(echo "$programs" | xargs -rn1 basename | tr '\n' ' '))" >&2
  local start=$SECONDS out p
  if [ -n "$programs" ]; then
    out=$(mktemp -d)
    (
      cd "$dir"
      cgo_exports "$name"
      go build -trimpath -gcflags "$GCFLAGS" ${tags:+-tags "$tags"} -ldflags "$ldflags" -o "$out/" $programs
    )
    for p in "$out"/*; do
      # etcd's main package is its module root, go.etcd.io/etcd/server/v3: Go names it `server`.
      case "$(basename "$p")" in
        server) mv "$p" "$bin/etcd" ;;
        *) mv "$p" "$bin/" ;;
      esac
    done
    rmdir "$out"
  fi
  extract "$name"
  echo "$key" > "$stamps/$name"
  echo "$extract_key" > "$stamps/$name.share"
  echo "build-go-tools: tools/$name built in $((SECONDS - start)) s" >&2
  built_any=1
}

modules=("$@")
if [ ${#modules[@]} -eq 0 ]; then
  for d in "$root"/tools/*/go.mod; do modules+=("$(basename "$(dirname "$d")")"); done
fi
built_any=0
for m in "${modules[@]}"; do build_module "$m"; done

# The binaries are the cache (stamped by version): Go's build and module caches (~13 GB
# after a cold build of every module) are dropped once they have served, or a fresh
# machine's `make test` runs out of disk. KEEP_GO_CACHE=1 keeps them for quicker rebuilds
# while editing a tools/ module.
if [ "$built_any" = 1 ] && [ "${KEEP_GO_CACHE:-0}" != 1 ]; then
  go clean -cache
  go clean -modcache
  echo "build-go-tools: Go caches dropped (KEEP_GO_CACHE=1 keeps them)" >&2
fi
