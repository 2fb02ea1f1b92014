#!/usr/bin/env bash
# The OLM drill: two operator lines installed side by side by a real OLM v1 (catalogd and
# operator-controller built from Go modules) from our own catalog, on the real control
# plane (local-cluster), as a user lives it. The README's "The OLM drill" walks through
# the same steps. Run by `make test`; `make olm-drill` runs it alone. Sections:
#
#   1. release 1.0.0 (v1alpha2) in a scratch copy of bundles/, mirror the released 0.1.0,
#      push bundle, operator and catalog images (the catalog lists 0.1.0 and 1.0.0)
#   2. apply the shared CRD, the ClusterCatalog and both ClusterExtensions as `bundle-tool
#      crds` and `bundle-tool subscriptions` print them; OLM unpacks the catalog and
#      installs both lines (Deployments, ServiceAccounts, RBAC)
#   3. each line's operator runs as its pod would: the Deployment's args and env, under a
#      token of the ServiceAccount OLM created (0.1.0's binary built from its release commit)
#   4. CRs reach their line: unlabelled v1alpha2 -> v1; labelled v0 -> 0.1.0; an unlabelled
#      v1alpha1 CR waits (0.1.0 takes only labelled CRs, v1 does not take v1alpha1 writes)
#   5. 0.1.1 (routes unlabelled v1alpha1 CRs) is added to the catalog; OLM upgrades the v0
#      line; children keep their UIDs and an edit made while the operator is replaced lands
#   6. a catalog whose new bundle's CRD drops v1alpha1 is refused before anything is pushed
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=lib/registry.sh
. "$root/scripts/lib/registry.sh"
export PATH="$root/target/tools/bin:$PATH"
target=${CARGO_TARGET_DIR:-$root/target}
tool=$target/debug/bundle-tool
operator=$target/debug/model-orchestra-operator
reg=127.0.0.1:$port
py=$root/target/tools/venv/bin/python3 # with PyYAML (kubernetes-validate's venv)
base=$reg/model-orchestra-operator
started=$SECONDS
pids=()
# Stops what it started, newest first (operators before the API server they release their
# Lease to), each by PID: SIGTERM, then SIGKILL after 10 s.
stop_pid() {
  local p=$1 i
  kill "$p" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
}
cleanup() {
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop_pid "${pids[i]}"; done
  cleanup_registry
}
trap cleanup EXIT
trap 'exit 143' TERM INT
step() { echo "olm-drill [$((SECONDS - started)) s]: $*"; }
fail() {
  echo "olm-drill: FAILED: $*" >&2
  for f in "$work"/logs/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 25 "$f" >&2; }; done
  exit 1
}
# wait_for SECONDS DESCRIPTION COMMAND...: retries COMMAND each second.
wait_for() {
  local limit=$1 what=$2; shift 2
  local i
  for ((i = 0; i < limit; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  fail "$what (not within $limit s)"
}
mkdir -p "$work/logs" "$work/home/.config/containers"

# --- 0. the programs: this commit's, and 0.1.0's from the commit that released it ------
scripts/build-go-tools.sh k8s kwok crds olm
cargo build --quiet --workspace
released=$(scripts/released-operator.sh 0.1.0)

# --- the cluster and OLM v1 ----------------------------------------------------------
"$target/debug/local-cluster" --kubeconfig "$work/kubeconfig" >"$work/logs/cluster.log" 2>&1 &
pids+=($!)
wait_for 120 "local-cluster starts" grep -q "Ctrl-C stops it" "$work/logs/cluster.log"
export KUBECONFIG=$work/kubeconfig
audit=$(sed -n 's/.*logs and the audit log: //p' "$work/logs/cluster.log")/audit.log
step "cluster up; audit log $audit"

# OLM reads insecure registries from registries.conf under HOME, never from the env.
printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$reg" >"$work/home/.config/containers/registries.conf"
printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >"$work/home/.config/containers/policy.json"
# catalogd serves catalogs (and its webhook) over TLS: a CA and a localhost certificate.
pki=$work/pki && mkdir -p "$pki/cas"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=olm-drill-ca -keyout "$pki/ca.key" -out "$pki/cas/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout "$pki/tls.key" -out "$pki/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$pki/san.ext"
openssl x509 -req -in "$pki/tls.csr" -CA "$pki/cas/ca.pem" -CAkey "$pki/ca.key" -CAserial "$pki/ca.srl" -CAcreateserial -days 1 -extfile "$pki/san.ext" -out "$pki/tls.crt" 2>/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
catalogs_port=$(free_port) webhook_port=$(free_port)
kubectl apply --server-side -f target/tools/share/olm/ >/dev/null
kubectl create namespace olmv1-system >/dev/null
# --cache-dir / --cache-path default to /var/cache, which they empty: always a temp dir.
HOME=$work/home catalogd --kubeconfig "$KUBECONFIG" --system-namespace=olmv1-system --cache-dir="$work/catalogd-cache" \
  --tls-cert "$pki/tls.crt" --tls-key "$pki/tls.key" --catalogs-server-addr "127.0.0.1:$catalogs_port" \
  --external-address "localhost:$catalogs_port" --webhook-server-port "$webhook_port" \
  --metrics-bind-address "127.0.0.1:$(free_port)" --health-probe-bind-address "127.0.0.1:$(free_port)" \
  >"$work/logs/catalogd.log" 2>&1 &
pids+=($!)
HOME=$work/home operator-controller --kubeconfig "$KUBECONFIG" --system-namespace=olmv1-system --cache-path="$work/operator-controller-cache" \
  --catalogd-cas-dir "$pki/cas" --health-probe-bind-address "127.0.0.1:$(free_port)" \
  >"$work/logs/operator-controller.log" 2>&1 &
pids+=($!)
# catalogd's mutating webhook labels each ClusterCatalog with its name (what the
# ClusterExtensions select by); registered by URL, as catalogd runs out of cluster.
wait_for 60 "catalogd's webhook listens" bash -c "exec 3<>/dev/tcp/127.0.0.1/$webhook_port"
kubectl apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: catalogd-mutating-webhook-configuration}
webhooks:
- name: inject-metadata-name.olm.operatorframework.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 10
  clientConfig:
    url: https://127.0.0.1:$webhook_port/mutate-olm-operatorframework-io-v1-clustercatalog
    caBundle: $(base64 -w0 "$pki/cas/ca.pem")
  rules:
  - {apiGroups: [olm.operatorframework.io], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [clustercatalogs]}
EOF
step "OLM v1 up (catalogd serves on 127.0.0.1:$catalogs_port)"

# --- 1. release 1.0.0 (and 0.1.1, for the upgrade) in a scratch copy of bundles/ ------
# The maintainer's steps: bundle generate (refused if it would change a released bundle or
# break the released CRD), the static operator image, the bundle image. 0.1.0 is mirrored
# as released (its CSV names ghcr.io's operator image, which nothing here pulls: kwok pods
# run no process).
bundles=$work/bundles
cp -r bundles "$bundles"
make --no-print-directory static >"$work/logs/static.log" 2>&1 || fail "make static: $(tail -5 "$work/logs/static.log")"
static=$target/x86_64-unknown-linux-gnu/release/model-orchestra-operator
release() { # VERSION CRD_VERSION CHANNEL
  "$tool" bundle generate --version "$1" --crd-version "$2" --image "$base" --claim-unlabeled \
    --channels "$3" --default-channel "$3" --output "$bundles" >"$work/logs/release-$1.log" 2>&1 || fail "bundle generate $1"
  "$tool" bundle validate "$bundles/$1" >>"$work/logs/release-$1.log" 2>&1 || fail "bundle validate $1"
  "$tool" image build --binary "$static" --push "$base:v$1" >>"$work/logs/release-$1.log" 2>&1 || fail "operator image $1"
  "$tool" bundle build "$bundles/$1" --push "$base-bundle:v$1" >>"$work/logs/release-$1.log" 2>&1 || fail "bundle image $1"
}
release 1.0.0 v1alpha2 stable-v1
"$tool" bundle build "$bundles/0.1.0" --push "$base-bundle:v0.1.0" >"$work/logs/release-0.1.0.log" 2>&1 || fail "bundle image 0.1.0"
catalog() { # TAG BUNDLE_VERSION...: the semver template naming the pushed bundle images, rendered, built, pushed
  local tag=$1; shift
  { printf 'schema: olm.semver\ngenerateMajorChannels: true\ngenerateMinorChannels: false\nstable:\n  bundles:\n'
    for v in "$@"; do printf '  - image: %s\n' "$base-bundle:v$v"; done; } >"$work/template-$tag.yaml"
  mkdir -p "$work/catalog-$tag/model-orchestra-operator"
  "$tool" catalog render "$work/template-$tag.yaml" --bundles-dir "$work/no-bundles" --cache-dir "$work/bundle-cache" \
    -o "$work/catalog-$tag/model-orchestra-operator/catalog.yaml" >"$work/logs/catalog-$tag.log" 2>&1 &&
    "$tool" catalog validate "$work/catalog-$tag" >>"$work/logs/catalog-$tag.log" 2>&1 &&
    "$tool" catalog build "$work/catalog-$tag" --push "$base-catalog:$tag" >>"$work/logs/catalog-$tag.log" 2>&1
}
catalog v1.0.0 0.1.0 1.0.0 || fail "catalog v1.0.0: $(cat "$work/logs/catalog-v1.0.0.log")"
step "pushed: bundles 0.1.0 and 1.0.0, operator image 1.0.0, catalog $base-catalog:v1.0.0"

# --- 2. the cluster admin's steps: the shared CRD, then one subscription per line ----
"$tool" crds | kubectl apply --server-side -f - >/dev/null
subscribe() { # CATALOG_TAG CHANNEL
  "$tool" subscriptions --catalog-image "$base-catalog:$1" --channel "$2" >"$work/subscriptions-$2.yaml"
  kubectl apply --server-side -f "$work/subscriptions-$2.yaml" >/dev/null
}
subscribe v1.0.0 stable-v0
subscribe v1.0.0 stable-v1
wait_for 120 "catalogd serves the catalog" kubectl wait clustercatalog/model-orchestra-catalog --for=condition=Serving --timeout=1s
step "catalogd serves $(kubectl get clustercatalog model-orchestra-catalog -o jsonpath='{.status.urls.base}')"
for line in v0 v1; do
  wait_for 180 "ClusterExtension model-orchestra-operator-$line installs" \
    kubectl wait "clusterextension/model-orchestra-operator-$line" --for=condition=Installed --timeout=1s
done
kubectl get clusterextensions -o custom-columns=NAME:.metadata.name,BUNDLE:.status.install.bundle.name,INSTALLED:.status.conditions[?\(@.type==\"Installed\"\)].status
for line in v0 v1; do
  ns=model-orchestra-$line name=model-orchestra-operator-$line
  kubectl get -n "$ns" "deployment/$name" "serviceaccount/$name" >/dev/null || fail "OLM did not create $ns/$name"
  wait_for 60 "the $line operator's pod is Ready (kwok)" kubectl wait -n "$ns" pod -l "app.kubernetes.io/instance=$name" --for=condition=Ready --timeout=1s
done
# The RBAC OLM made from each CSV, as the API server's authorizer answers for each operator.
can() { kubectl auth can-i --as="system:serviceaccount:model-orchestra-$1:model-orchestra-operator-$1" "${@:2}" >/dev/null 2>&1; }
for line in v0 v1; do
  can "$line" watch modelorchestras.models.titanml.co -A && can "$line" patch deployments.apps -n drill-x \
    && can "$line" update leases.coordination.k8s.io -n "model-orchestra-$line" || fail "OLM's RBAC for the $line line lacks what its CSV grants"
  ! can "$line" delete nodes || fail "the $line line may delete Nodes"
done
can v1 update modelorchestras.models.titanml.co --subresource=finalizers -A || fail "1.0.0 may not set blockOwnerDeletion"
! can v0 update modelorchestras.models.titanml.co --subresource=finalizers -A || fail "0.1.0 was expected to lack modelorchestras/finalizers"
step "OLM installed both lines: $(kubectl get deployments -A -l app.kubernetes.io/name=model-orchestra-operator -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {end}')with their RBAC"

# --- 3. each line's operator, run as its pod runs -------------------------------------
# run_line LINE BINARY: the Deployment's args and env (fieldRefs resolved for its kwok pod)
# under a token of the Deployment's ServiceAccount, so OLM's RBAC is what is tested. The
# metrics address is moved to an ephemeral loopback port.
run_line() {
  local line=$1 binary=$2 ns=model-orchestra-$1 name=model-orchestra-operator-$1
  local deployment=$work/deployment-$line.json pod sa kubeconfig=$work/kubeconfig-$line
  kubectl get -n "$ns" "deployment/$name" -o json >"$deployment"
  pod=$(kubectl get pods -n "$ns" -l "app.kubernetes.io/instance=$name" --field-selector=status.phase=Running -o jsonpath='{.items[0].metadata.name}')
  sa=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["spec"]["template"]["spec"]["serviceAccountName"])' "$deployment")
  cp "$KUBECONFIG" "$kubeconfig"
  kubectl --kubeconfig "$kubeconfig" config set-credentials "$sa" --token="$(kubectl create token -n "$ns" "$sa" --duration=2h)" >/dev/null
  kubectl --kubeconfig "$kubeconfig" config set-context --current --user="$sa" >/dev/null
  local -a env args
  mapfile -t env < <(python3 - "$deployment" "$pod" "$ns" <<'PY'
import json, sys
d, pod, ns = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
fields = {"metadata.name": pod, "metadata.namespace": ns}
for e in d["spec"]["template"]["spec"]["containers"][0].get("env", []):
    value = e.get("value") if "valueFrom" not in e else fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
    print(f'{e["name"]}={value}')
PY
  )
  mapfile -t args < <(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["spec"]["template"]["spec"]["containers"][0]; print("\n".join(c.get("command", [])[1:] + c.get("args", [])))' "$deployment")
  env -i "${env[@]}" MODEL_ORCHESTRA_METRICS_ADDR=127.0.0.1:0 KUBECONFIG="$kubeconfig" "$binary" "${args[@]}" >>"$work/logs/operator-$line.log" 2>&1 &
  line_pid[$line]=$!
  pids+=($!)
  echo "$line: $(basename "$(dirname "$binary")") binary as pod $ns/$pod, user system:serviceaccount:$ns:$sa, args ${args[*]}, env ${env[*]}"
}
declare -A line_pid
run_line v0 "$released"
run_line v1 "$operator"

# --- 4. CRs reach their line by apiVersion --------------------------------------------
# What the samples use: KEDA's ScaledObject and the Prometheus Operator's ServiceMonitor
# CRDs, installed after the operators started, as happens (the lines notice them within
# 15 s and restart their controllers with those watches; 0.1.0 did not).
kubectl apply --server-side -f target/tools/share/crds/ >/dev/null
cr() { # FILE NAMESPACE NAME [LABEL]: a sample, renamed, optionally labelled
  "$py" - "$@" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
doc["metadata"] = {"name": sys.argv[3], "namespace": sys.argv[2]}
if len(sys.argv) > 4:
    doc["metadata"]["labels"] = {"operatorVersion": sys.argv[4]}
print(yaml.safe_dump(doc))
PY
}
# writers NAMESPACE: the operators' ServiceAccounts that wrote in it (audit log).
writers() {
  python3 - "$audit" "$1" <<'PY'
import json, sys
users = set()
for line in open(sys.argv[1]):
    e = json.loads(line)
    ref = e.get("objectRef") or {}
    if e.get("verb") in ("create", "update", "patch", "delete") and ref.get("namespace") == sys.argv[2] and e["user"]["username"].startswith("system:serviceaccount:model-orchestra-"):
        users.add(e["user"]["username"])
print(" ".join(sorted(users)))
PY
}
# managers NAMESPACE: the field managers of their patches (server-side applies).
managers() {
  python3 - "$audit" "$1" <<'PY'
import json, sys, urllib.parse
managers = set()
for line in open(sys.argv[1]):
    e = json.loads(line)
    ref = e.get("objectRef") or {}
    if e.get("verb") == "patch" and ref.get("namespace") == sys.argv[2] and e["user"]["username"].startswith("system:serviceaccount:model-orchestra-"):
        query = urllib.parse.parse_qs(urllib.parse.urlparse(e["requestURI"]).query)
        managers.update(query.get("fieldManager", ["(none)"]))
print(" ".join(sorted(managers)))
PY
}
release_of() { kubectl get -n "$1" "modelorchestra/$2" -o jsonpath='{.status.operatorVersion}'; }
v0_user=system:serviceaccount:model-orchestra-v0:model-orchestra-operator-v0
v1_user=system:serviceaccount:model-orchestra-v1:model-orchestra-operator-v1
condition() { kubectl get -n "$1" "modelorchestra/$2" -o jsonpath="{.status.conditions[?(@.type==\"$3\")].$4}"; }
for ns in drill-a drill-b drill-c; do kubectl create namespace "$ns" >/dev/null; done
# The v1alpha2 sample's embedder keeps its models on the claim embedder-models, which the
# user provides: here a hostPath volume the PersistentVolume controller binds it to.
cat <<'CLAIM' | kubectl apply -f - >/dev/null
apiVersion: v1
kind: PersistentVolume
metadata: {name: drill-a-embedder-models}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  storageClassName: drill-manual
  hostPath: {path: /tmp/drill-a-embedder-models}
  claimRef: {namespace: drill-a, name: embedder-models}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: embedder-models, namespace: drill-a}
spec: {accessModes: [ReadWriteMany], storageClassName: drill-manual, resources: {requests: {storage: 1Gi}}}
CLAIM
cr config/samples/modelorchestra-v1alpha2.yaml drill-a unlabelled-v1alpha2 | kubectl apply -f - >/dev/null
cr config/samples/modelorchestra.yaml drill-b unlabelled-v1alpha1 | kubectl apply -f - >/dev/null
cr config/samples/modelorchestra.yaml drill-c labelled-v0 v0 | kubectl apply -f - >/dev/null
wait_for 120 "unlabelled v1alpha2 CR Ready" kubectl wait -n drill-a modelorchestra/unlabelled-v1alpha2 --for=condition=Ready --timeout=1s
[ "$(writers drill-a)" = "$v1_user" ] || fail "drill-a written by: $(writers drill-a)"
[ "$(managers drill-a)" = model-orchestra-operator ] || fail "drill-a written with field managers: $(managers drill-a)"
[ "$(release_of drill-a unlabelled-v1alpha2)" = 1.0.0 ] || fail "drill-a's status names operator $(release_of drill-a unlabelled-v1alpha2)"
step "the unlabelled v1alpha2 CR is the v1 line's: Ready ($(condition drill-a unlabelled-v1alpha2 Ready message))"
# 0.1.0's RBAC lacks update on modelorchestras/finalizers, which an API server enforcing
# owner-reference permissions (this one, and OpenShift's) requires of an owner reference
# with blockOwnerDeletion: the released 0.1.0 is refused on its first write.
wait_for 60 "0.1.0 reports its refused write" bash -c "kubectl get -n drill-c modelorchestra/labelled-v0 -o jsonpath='{.status.conditions}' | grep -q blockOwnerDeletion"
step "0.1.0 as released is refused by the API server: $(condition drill-c labelled-v0 Ready message | cut -c1-160)…"
# The workaround for a cluster on 0.1.0: grant it; then the CR is retried (annotated).
cat <<'RBAC' | kubectl apply -f - >/dev/null
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: model-orchestra-0.1.0-finalizers}
rules: [{apiGroups: [models.titanml.co], resources: [modelorchestras/finalizers], verbs: [update]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: model-orchestra-0.1.0-finalizers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: model-orchestra-0.1.0-finalizers}
subjects: [{kind: ServiceAccount, name: model-orchestra-operator-v0, namespace: model-orchestra-v0}]
RBAC
kubectl annotate -n drill-c modelorchestra/labelled-v0 drill/retry=1 >/dev/null
wait_for 120 "labelled v0 CR Ready under 0.1.0" kubectl wait -n drill-c modelorchestra/labelled-v0 --for=condition=Ready --timeout=1s
[ "$(writers drill-c)" = "$v0_user" ] || fail "drill-c written by: $(writers drill-c)"
[ "$(release_of drill-c labelled-v0)" = 0.1.0 ] || fail "drill-c's status names operator $(release_of drill-c labelled-v0)"
[ -z "$(writers drill-b)" ] || fail "the unlabelled v1alpha1 CR was written by $(writers drill-b) before a line routing it was installed"
step "the labelled v1alpha1 CR is 0.1.0's: Ready; the unlabelled v1alpha1 CR waits (0.1.0 takes labelled CRs only; v1 leaves v1alpha1 writes alone)"

# --- 5. an upgrade within the v0 line: 0.1.1 replaces 0.1.0 -----------------------------
release 0.1.1 v1alpha1 stable-v0
catalog v0.1.1 0.1.0 0.1.1 1.0.0 || fail "catalog v0.1.1: $(cat "$work/logs/catalog-v0.1.1.log")"
children() { kubectl get deployments,services,configmaps,serviceaccounts -n "$1" -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}={.metadata.uid}{"\n"}{end}' | grep -v -e kube-root-ca.crt -e ServiceAccount/default | sort; }
before=$(children drill-c) before_a=$(children drill-a)
# The ClusterCatalog is shared by the lines: it names the newest catalog image.
subscribe v0.1.1 stable-v0
wait_for 180 "OLM upgrades the v0 line to 0.1.1" \
  bash -c '[ "$(kubectl get clusterextension/model-orchestra-operator-v0 -o jsonpath={.status.install.bundle.version})" = 0.1.1 ]'
[ "$(kubectl get clusterextension/model-orchestra-operator-v1 -o jsonpath='{.status.install.bundle.version}')" = 1.0.0 ] || fail "the v1 line moved"
step "OLM upgraded model-orchestra-operator-v0 to $(kubectl get clusterextension/model-orchestra-operator-v0 -o jsonpath='{.status.install.bundle.name}')"
# The operator's pod is replaced: 0.1.0 stops, the CR is edited while no v0 operator runs,
# then 0.1.1 starts as the upgraded Deployment says, with only the RBAC its bundle brings.
stop_pid "${line_pid[v0]}"
kubectl delete clusterrolebinding/model-orchestra-0.1.0-finalizers clusterrole/model-orchestra-0.1.0-finalizers >/dev/null
can v0 update modelorchestras.models.titanml.co --subresource=finalizers -A || fail "0.1.1's own RBAC lacks modelorchestras/finalizers"
kubectl patch -n drill-c modelorchestra/labelled-v0 --type merge -p '{"spec":{"applications":{"hello-world":{"podLabels":{"drill":"edited-during-upgrade"}}}}}' >/dev/null
wait_for 60 "the upgraded v0 Deployment's pod is Ready" bash -c \
  '[ "$(kubectl get -n model-orchestra-v0 deployment/model-orchestra-operator-v0 -o jsonpath={.status.updatedReplicas}/{.status.readyReplicas}/{.status.replicas})" = 1/1/1 ]'
run_line v0 "$operator"
wait_for 120 "the edit made during the upgrade reaches the Deployment" bash -c \
  '[ "$(kubectl get -n drill-c deployments -o jsonpath={..spec.template.metadata.labels.drill})" = edited-during-upgrade ]'
wait_for 120 "labelled v0 CR Ready after the upgrade" kubectl wait -n drill-c modelorchestra/labelled-v0 --for=condition=Ready --timeout=1s
after=$(children drill-c)
[ "$before" = "$after" ] || fail "children of the v0 CR were recreated by the upgrade: $(diff <(echo "$before") <(echo "$after"))"
[ "$before_a" = "$(children drill-a)" ] || fail "the v1 line's children changed during the v0 upgrade"
# 0.1.1 routes unlabelled CRs by apiVersion: the waiting v1alpha1 CR is now its.
wait_for 120 "the unlabelled v1alpha1 CR Ready under 0.1.1" kubectl wait -n drill-b modelorchestra/unlabelled-v1alpha1 --for=condition=Ready --timeout=1s
[ "$(writers drill-b)" = "$v0_user" ] || fail "drill-b written by: $(writers drill-b)"
[ "$(writers drill-a)" = "$v1_user" ] || fail "drill-a written by: $(writers drill-a)"
[ "$(writers drill-c)" = "$v0_user" ] || fail "drill-c written by: $(writers drill-c)"
for ns in drill-b drill-c; do [ "$(managers $ns)" = model-orchestra-operator ] || fail "$ns written with field managers: $(managers $ns)"; done
[ "$(release_of drill-c labelled-v0)" = 0.1.1 ] && [ "$(release_of drill-b unlabelled-v1alpha1)" = 0.1.1 ] || fail "the v0 CRs' status does not name 0.1.1"
step "0.1.1 took over: the $(echo "$after" | wc -l) children of the v0 CR kept their UIDs, the edit made meanwhile applied; the unlabelled v1alpha1 CR is the v0 line's"

# --- 6. a release that would break a line is refused before anything is pushed ---------
# 2.0.0 carries the CRD (owned mode) and has dropped v1alpha1, which 0.1.x serves.
"$tool" bundle generate --version 2.0.0 --crd-version v1alpha2 --image "$base" --crd-mode owned \
  --channels stable-v2 --default-channel stable-v2 --output "$work/bad-bundles" >"$work/logs/release-2.0.0.log" 2>&1 || fail "bundle generate 2.0.0"
crd=$work/bad-bundles/2.0.0/manifests/models.titanml.co_modelorchestras.yaml
"$py" - "$crd" <<'PY'
import sys, yaml
crd = yaml.safe_load(open(sys.argv[1]))
crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] != "v1alpha1"]
yaml.safe_dump(crd, open(sys.argv[1], "w"))
PY
"$tool" bundle build "$work/bad-bundles/2.0.0" --push "$base-bundle:v2.0.0" >>"$work/logs/release-2.0.0.log" 2>&1 || fail "bundle image 2.0.0"
if catalog v2.0.0 0.1.0 0.1.1 1.0.0 2.0.0; then fail "a catalog with a bundle dropping v1alpha1 was pushed"; fi
grep -q "crd-keeps-versions" "$work/logs/catalog-v2.0.0.log" || fail "refused for another reason: $(cat "$work/logs/catalog-v2.0.0.log")"
if skopeo inspect --tls-verify=false "docker://$base-catalog:v2.0.0" >/dev/null 2>&1; then fail "the refused catalog's tag exists"; fi
step "refused: $(grep -m1 crd-keeps-versions "$work/logs/catalog-v2.0.0.log" | cut -c1-200)…"
echo "olm-drill: ok in $((SECONDS - started)) s"
