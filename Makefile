# model-orchestra — the verbs operator-sdk users know.
VERSION ?= 0.1.0
CRD_VERSION ?= v1alpha1
CARGO ?= cargo
# Where cargo builds (CARGO_TARGET_DIR when set); the tools and caches stay in target/.
TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
# Every cargo command here builds for one target, glibc linked in (crt-static): the binaries
# FROM-scratch images hold. So the tiers, the tools and the images share one build of the
# dependencies: `make test` puts the binaries its tiers were built with in its images rather
# than compiling everything again in the release profile. (The rustflags apply to the target
# only, never to build scripts and proc macros: --target is always given.)
STATIC_TARGET := x86_64-unknown-linux-gnu
export CARGO_BUILD_TARGET := $(STATIC_TARGET)
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS := -C target-feature=+crt-static
# The profile of the binaries images are made of (scripts/released-operator.sh builds the
# releases' so too): release, dev inside `make test`.
export STATIC_PROFILE ?= $(if $(MAKE_TEST),dev,release)
STATIC_DIR = $(TARGET_DIR)/$(STATIC_TARGET)/$(if $(filter dev,$(STATIC_PROFILE)),debug,$(STATIC_PROFILE))
# Where the local cluster and the drills take the images' binaries from (cluster/src/tools.rs).
export MO_STATIC_DIR = $(STATIC_DIR)
# Inside `make test` clippy compiles the workspace's own crates (clippy-driver as the
# workspace's rustc wrapper, cargo clippy's own mechanism, with its warnings denied): the
# tiers' build is the lint, and the dependencies are compiled once, with code, rather than
# a second time in check mode for a separate `cargo clippy` (`make lint`'s recipe below).
# Incremental compilation is off: it slows a build from scratch, the kind `make test` does.
ifdef MAKE_TEST
export RUSTC_WORKSPACE_WRAPPER := $(shell command -v clippy-driver)
export CLIPPY_ARGS := -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
export CARGO_INCREMENTAL := 0
endif
OPERATOR := $(TARGET_DIR)/$(STATIC_TARGET)/debug/model-orchestra-operator
SAMPLE ?= config/samples/modelorchestra.yaml
IMAGE_TAG_BASE ?= ghcr.io/titanml/model-orchestra-operator
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
CHANNELS ?= stable
DEFAULT_CHANNEL ?= stable
CRD_MODE ?= shared
# CLAIM_UNLABELED=1: the bundle's operator also takes CRs without the operatorVersion label
# (routed by apiVersion); lines from 0.1.1 on are released so.
CLAIM_UNLABELED ?=
BUNDLE_TOOL := $(TARGET_DIR)/$(STATIC_TARGET)/debug/bundle-tool
BUNDLES_DIR ?= bundles
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
# Optional base image for the operator image (default: FROM scratch).
BASE_IMG ?=
PACKAGE ?= model-orchestra-operator
CATALOG_TEMPLATE ?= catalog/operator_catalog.yaml
CATALOG_DIR ?= catalog/configs
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:v$(VERSION)
# An opm image to build on, for OLM v0 CatalogSources that run the image itself
# (default: FROM scratch, for OLM v1 and for OLM v0 with extractContent).
CATALOG_BASE_IMG ?=
CHANNEL ?= stable-v$(firstword $(subst ., ,$(VERSION)))
OLM ?= v1
STATIC_BIN = $(STATIC_DIR)/model-orchestra-operator
KUBECTL ?= kubectl
# `make registry`'s port (default: a free one).
REGISTRY_PORT ?=
# The ModelOrchestra version `make run` serves: `make run API_VERSION=v1alpha2` starts the
# v1alpha2 line (routing value v1) beside the v1alpha1 one.
API_VERSION ?= v1alpha1
# More arguments for `make run`. The metrics port is ephemeral (logged at start), so two
# lines run side by side.
RUN_ARGS ?= --claim-unlabeled --metrics-addr 127.0.0.1:0
# HTTP_API=1: `make deploy` and `make bundle` include the HTTP API (docs: "HTTP API").
HTTP_API ?=

.PHONY: all help build test test-unit test-e2e olm-drill image-build-push lint render crd generate docs bench install uninstall deploy undeploy run cluster registry bench-operator bundle release released crds fmt static bundle-build-push docker-build catalog catalog-build-push subscriptions bench-catalog bench-api bench-engine bench-gateway bench-faults

all: build

## build: compile the operator and bundle-tool
#   inside `make test` with the test targets: the tiers built them, and a build of the
#   binaries alone (without the dev-dependencies' features) would compile the workspace again
build:
	$(CARGO) build --workspace $(if $(MAKE_TEST),--bins --tests)

## help: every target, one line each
help:
	@awk '/^## [a-z0-9-]+:/ { sub(/^## /, ""); n = index($$0, ":"); printf "  %-20s %s\n", substr($$0, 1, n - 1), substr($$0, n + 2) }' $(MAKEFILE_LIST)

## test: what .ci/run runs: lint, test-unit, test-e2e, the push e2e and the OLM drills
#   the test tools (apt packages, Go programs, models: scripts/install-test-deps.sh, logged
#   to target/install-test-deps.log) are installed while the Rust side builds everything
#   the tiers run (lint: the build is clippy's), runs what needs no tools (test-unit) and
#   rebuilds the released operators: the two share the machine's cores. The images hold the
#   dev-profile binaries test-unit built (STATIC_PROFILE). Then the cluster and e2e tiers
#   alone: beside other clusters, on two cores, their tests under load failed past what
#   they allow (three failures in one cold run). Last the oracles, the push e2e and the OLM
#   drills at once (their logs in target/test-logs/, shown when all are done). Each phase
#   prints its time (scripts/timed)
test: export MAKE_TEST = 1
test:
	@mkdir -p target; \
	setsid scripts/install-test-deps.sh >target/install-test-deps.log 2>&1 & deps=$$!; \
	trap 'kill -- -$$deps 2>/dev/null' EXIT; \
	echo "install-test-deps: in the background (target/install-test-deps.log)"; \
	scripts/timed "lint, test-unit and the released operators" $(MAKE) --no-print-directory lint test-unit released || exit 1; \
	echo "install-test-deps: waiting for it"; \
	start=$$(date +%s); wait $$deps || { cat target/install-test-deps.log; echo "install-test-deps failed" >&2; exit 1; }; \
	echo "make test: the test tools, after the Rust side: $$(( $$(date +%s) - start )) s more"; \
	trap - EXIT; grep -E 'built in|apt-get|install-test-deps:' target/install-test-deps.log || true
	scripts/timed "the cluster and e2e tiers" $(MAKE) --no-print-directory test-e2e E2E_TIERS="--test cluster --test e2e"
	scripts/timed "the oracles, the push e2e and the OLM drills, at once" scripts/at-once target/test-logs \
	  "$(MAKE) --no-print-directory test-e2e E2E_TIERS='--test oracles'" \
	  scripts/bundle-push-e2e.sh \
	  "$(MAKE) --no-print-directory olm-drill"

## released: every release's operator, rebuilt static from its commit (bundles/releases.yaml)
released: static
	for v in $(RELEASES); do scripts/released-operator.sh $$v >/dev/null || exit 1; done

## test-unit: the offline tier, in minutes; needs nothing but cargo
#   every crate's unit tests, the operator's and bundle-tool's offline suites (contract,
#   golden, CLI, the README's and the book's examples, generated files, module graph)
test-unit:
	$(CARGO) test --workspace

## test-e2e: the tier on real programs (installs the test tools first)
#   the local cluster's own tests, the operator's e2e suite on one shared cluster,
#   bundle-tool against opm, operator-sdk and a registry
E2E_TEST_THREADS ?= 4
E2E_TIERS ?= --test cluster --test e2e --test oracles
test-e2e: static
	scripts/install-test-deps.sh
	PATH="$(CURDIR)/target/tools/bin:$$PATH" $(CARGO) test --workspace $(E2E_TIERS) -- --test-threads $(E2E_TEST_THREADS)

## olm-drill: the two operator lines installed side by side by a real OLM v1 and by a real
#   OLM v0 (OLM's pods, catalogs, unpack Jobs and the lines on the real node), both drills at
#   once, each on a cluster of its own (docs: "The OLM drills"); builds what it runs first
RELEASES = $(shell awk '$$1 == "-" && $$2 == "version:" { print $$3 }' bundles/releases.yaml)
olm-drill: static released
	scripts/install-test-deps.sh
	$(CARGO) test --workspace --test olm_drill -- --nocapture --test-threads 2

## lint: cargo fmt --check, and clippy on every target with warnings as errors
#   (the test = false tiers named apart: beside --all-targets, --test names none of them);
#   inside `make test`, the build of every target those name, clippy compiling (see MAKE_TEST)
LINT_TIERS = --test cluster --test e2e --test oracles --test olm_drill
lint: fmt
ifdef MAKE_TEST
	@test -n "$$RUSTC_WORKSPACE_WRAPPER" || { echo "lint: clippy-driver is not installed (rustup component add clippy)" >&2; exit 1; }
	$(CARGO) test --workspace --all-targets --no-run
	$(CARGO) test --workspace $(LINT_TIERS) --no-run
else
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --workspace $(LINT_TIERS) -- -D warnings
endif

## fmt: cargo fmt --check
fmt:
	$(CARGO) fmt --all -- --check

## render: render the sample ModelOrchestra offline (no cluster needed)
#   SAMPLE picks another, e.g. SAMPLE=config/samples/modelorchestra-v1alpha2.yaml
render:
	@$(CARGO) build -p model-orchestra-operator --bin model-orchestra-operator
	@$(OPERATOR) render -f $(SAMPLE)

## crd: print the ModelOrchestra CRD
crd:
	$(CARGO) run --quiet --bin model-orchestra-operator -- crd

## generate: rewrite the checked-in generated files (CRD, values.schema.json, ClusterRole, values reference)
generate: build
	$(OPERATOR) crd > config/crd/models.titanml.co_modelorchestras.yaml
	$(OPERATOR) values-schema > charts/model-orchestra/values.schema.json
	$(OPERATOR) values-schema --api-version v1alpha2 > charts/model-orchestra-1.0/values.schema.json
	$(OPERATOR) rbac > config/rbac/role.yaml
	$(OPERATOR) manifests --claim-unlabeled > config/deploy/operator.yaml
	$(OPERATOR) manifests --only-http-api > config/deploy/http-api.yaml
	$(OPERATOR) openapi > httpapi/openapi.json
	$(OPERATOR) values-reference > docs/src/values/v1alpha1.md
	$(OPERATOR) values-reference --api-version v1alpha2 > docs/src/values/v1alpha2.md

## docs: build the book (docs/, mdBook) into target/book; installs the pinned mdbook first
#   open target/book/index.html; its examples are tested by make test-unit
docs:
	scripts/install-mdbook.sh
	$(CURDIR)/target/tools/bin/mdbook build docs

## install: install the ModelOrchestra CRD into the cluster of the current kubeconfig
#   (server-side: the CRD is too large for client-side apply's annotation)
install:
	$(KUBECTL) apply --server-side -f config/crd/models.titanml.co_modelorchestras.yaml

## uninstall: remove the CRD (and with it every ModelOrchestra and their children)
uninstall:
	$(KUBECTL) delete --ignore-not-found -f config/crd/models.titanml.co_modelorchestras.yaml

## deploy: install the CRD, then the operator (Namespace, RBAC, Deployment) with IMG
#   API_VERSION=v1alpha2 deploys the v1alpha2 line (beside the v1alpha1 one, if deployed)
deploy: install build
	$(OPERATOR) manifests --image $(IMG) $(if $(filter-out v1alpha1,$(API_VERSION)),--api-version $(API_VERSION)) --claim-unlabeled $(if $(HTTP_API),--http-api) | $(KUBECTL) apply --server-side -f -

## undeploy: remove the operator (the CRD and the CRs stay)
undeploy: build
	$(OPERATOR) manifests --image $(IMG) $(if $(filter-out v1alpha1,$(API_VERSION)),--api-version $(API_VERSION)) --claim-unlabeled $(if $(HTTP_API),--http-api) | $(KUBECTL) delete --ignore-not-found -f -

## run: run the operator locally against the current kubeconfig
run: build
	$(OPERATOR) run --api-version $(API_VERSION) --model-gateway-image $(IMG) $(RUN_ARGS)

## cluster: a local cluster with fake GPU nodes and two real nodes (REAL_NODES), until Ctrl-C
#   etcd, kube-apiserver, controller manager, scheduler, kwok CPU and GPU nodes, real nodes
#   with cluster DNS and a registry, in namespaces of its own, reached on 127.0.0.1; writes
#   an admin kubeconfig to target/local-cluster.kubeconfig and the registry's address to
#   target/local-cluster.registry
REAL_NODES ?= 2
cluster: static
	scripts/install-test-deps.sh
	scripts/test-models.sh smollm2
	$(CARGO) run --quiet -p local-cluster -- --kubeconfig $(CURDIR)/target/local-cluster.kubeconfig --registry-file $(CURDIR)/target/local-cluster.registry --real-nodes $(REAL_NODES)

## registry: a loopback OCI registry on 127.0.0.1 until Ctrl-C
#   Debian's docker-registry, a free port (or REGISTRY_PORT), temp storage; prints the
#   IMAGE_TAG_BASE to push to
registry:
	REGISTRY_PORT="$(REGISTRY_PORT)" scripts/registry.sh

## bench-operator: the operator beside a bare server-side apply, at 100 and 1,000 CRs
#   for BENCH_OPERATOR_CRS CRs x 4 applications (BENCH_APPS): a bare server-side apply of
#   the rendered objects, then the release operator, each on a fresh local control plane
BENCH_OPERATOR_CRS ?= 100 1000
bench-operator:
	scripts/build-go-tools.sh k8s kwok crds
	$(CARGO) build --release -p model-orchestra-operator --bins --benches
	for crs in $(BENCH_OPERATOR_CRS); do \
		BENCH_CRS=$$crs $(CARGO) bench -p model-orchestra-operator --bench operator || exit 1; \
	done

## bench-api: the HTTP API under load (100 CRs, 10 keys, 50 clients, 30 s)
bench-api:
	scripts/build-go-tools.sh k8s kwok crds
	$(CARGO) build --release -p model-orchestra-operator --bins --bench api
	$(CARGO) bench -p model-orchestra-operator --bench api

## bench-engine: kubectl apply of an Ollama CR to the model's first token, beside the floor
#   phases on the real node (scheduled, image pulled, started, model pulled, Ready, first
#   token) and the same Ollama and model as plain processes; BENCH_ENGINE_RUNS repeats
bench-engine: static
	scripts/install-test-deps.sh
	$(CARGO) build --release -p model-orchestra-operator --bins --bench engine
	PATH="$(CURDIR)/target/tools/bin:$$PATH" $(CARGO) bench -p model-orchestra-operator --bench engine

## bench-gateway: the model gateway on the real node: a request at zero replicas to its
#   first token (models kept on a claim, and pulled again), beside the floor (ollama serve
#   with the model on disk); the latency it adds at 1 and 32 clients; its memory
bench-gateway: static
	scripts/install-test-deps.sh
	$(CARGO) build --release -p model-orchestra-operator --bins --bench gateway
	PATH="$(CURDIR)/target/tools/bin:$$PATH" $(CARGO) bench -p model-orchestra-operator --bench gateway

## bench-faults: requests lost under a steady load through the model gateway while a
#   gateway pod, an application pod, a rolling update, a model added (its pull stalled) and
#   removed, a promotion, the operator's and the API server's restarts, a node's loss and a
#   drain happen (two real nodes); BENCH_FAULTS_PHASES=node-stop,drain runs some of them
bench-faults: static
	scripts/install-test-deps.sh
	$(CARGO) build --release -p model-orchestra-operator --bins --bench faults
	PATH="$(CURDIR)/target/tools/bin:$$PATH" $(CARGO) bench -p model-orchestra-operator --bench faults

## bench: render benchmarks, in process (criterion) and as a whole process
#   the release binary's median wall time and peak RSS for the sample, 50 and 1,000
#   applications
bench:
	$(CARGO) bench -p model-orchestra-operator --bench render
	$(CARGO) bench -p model-orchestra-operator --bench render_process

## bundle: generate bundles/$(VERSION) and validate it
#   the CSV from the operator's Deployment and RBAC; a released bundle never changes:
#   regenerating with different content is refused
bundle: build
	$(BUNDLE_TOOL) bundle generate --version $(VERSION) --crd-version $(CRD_VERSION) --channels $(CHANNELS) --default-channel $(DEFAULT_CHANNEL) --image $(IMAGE_TAG_BASE) --crd-mode $(CRD_MODE) $(if $(CLAIM_UNLABELED),--claim-unlabeled) $(if $(HTTP_API),--http-api) --output $(BUNDLES_DIR)
	$(BUNDLE_TOOL) bundle validate $(BUNDLES_DIR)/$(VERSION)

## release: cut the release of bundles/$(VERSION), generated by `make bundle` from HEAD
#   records HEAD and every file's SHA-256 in bundles/releases.yaml, keeps the CRD it
#   installs in bundles/crds/ and writes dist/$(VERSION)/ (install.yaml, crd.yaml: for
#   clusters without OLM); refused with tracked changes (the record names HEAD)
release: build
	@git diff --quiet HEAD -- || { echo "release: commit your changes first: the release records the commit it is cut from" >&2; exit 1; }
	$(BUNDLE_TOOL) bundle release $(BUNDLES_DIR)/$(VERSION) --commit $$(git rev-parse HEAD)

## crds: print the shared CRD (every served version); `make install` applies it
crds: build
	$(BUNDLE_TOOL) crds

## static: the operator and mo-pod as static binaries, for FROM-scratch images
#   glibc with crt-static; mo-pod is the pause and test images' program. STATIC_PROFILE:
#   release; inside `make test` dev, as `make build` made them
static:
	$(CARGO) build --profile $(STATIC_PROFILE) $(if $(MAKE_TEST),--workspace --bins --tests,-p model-orchestra-operator -p mo-pod)

## image-build-push: the operator image (IMG) from the static binary, pushed (no Docker)
#   e.g. IMG=$(cat target/local-cluster.registry)/model-orchestra-operator:dev for make cluster
image-build-push: build static
	$(BUNDLE_TOOL) image build --binary $(STATIC_BIN) $(if $(BASE_IMG),--base $(BASE_IMG)) --push $(IMG)

## bundle-build-push: the operator image (IMG) and the bundle image (BUNDLE_IMG), pushed
#   with oci-client (no Docker). Loopback registries use plain HTTP; others need
#   REGISTRY_USERNAME/REGISTRY_PASSWORD or ~/.docker/config.json
bundle-build-push: bundle static
	$(BUNDLE_TOOL) image build --binary $(STATIC_BIN) $(if $(BASE_IMG),--base $(BASE_IMG)) --push $(IMG)
	$(BUNDLE_TOOL) bundle build $(BUNDLES_DIR)/$(VERSION) --push $(BUNDLE_IMG)

## catalog: render the semver template to a File-Based Catalog and validate it
#   CATALOG_TEMPLATE to CATALOG_DIR, as opm's `alpha render-template semver` does, checked
#   with opm's rules; images `…:vX.Y.Z` are read from BUNDLES_DIR/X.Y.Z when present, else
#   pulled (cached by digest)
catalog: build
	$(BUNDLE_TOOL) catalog render $(CATALOG_TEMPLATE) --bundles-dir $(BUNDLES_DIR) -o $(CATALOG_DIR)/$(PACKAGE)/catalog.yaml
	$(BUNDLE_TOOL) catalog validate $(CATALOG_DIR)

## catalog-build-push: catalog, then the catalog image pushed to CATALOG_IMG
catalog-build-push: catalog
	$(BUNDLE_TOOL) catalog build $(CATALOG_DIR) $(if $(CATALOG_BASE_IMG),--base $(CATALOG_BASE_IMG)) --push $(CATALOG_IMG)

## subscriptions: manifests installing the CHANNEL line from CATALOG_IMG with OLM (v1|v0)
subscriptions: build
	@$(BUNDLE_TOOL) subscriptions --catalog-image $(CATALOG_IMG) --channel $(CHANNEL) --olm $(OLM) --package $(PACKAGE)

## bench-catalog: render a 200-bundle template from a loopback registry, cold and warm
bench-catalog:
	scripts/bench-catalog.sh

## docker-build: for people with Docker: the same bundle image from bundle.Dockerfile
docker-build:
	docker build -f bundles/$(VERSION)/bundle.Dockerfile -t $(BUNDLE_IMG) bundles/$(VERSION)
