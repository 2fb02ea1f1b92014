# model-orchestra — the verbs operator-sdk users know.
VERSION ?= 0.1.0
CRD_VERSION ?= v1alpha1
CARGO ?= cargo
OPERATOR := target/debug/model-orchestra-operator
SAMPLE ?= config/samples/modelorchestra.yaml

.PHONY: all build test render crd generate bench

all: build

## build: compile the operator and bundle-tool
build:
	$(CARGO) build --workspace

## test: install the test tools (scripts/install-test-deps.sh), then run every test.
## This is the command .ci/run runs.
test:
	scripts/install-test-deps.sh
	PATH="$(CURDIR)/target/tools/bin:$$PATH" $(CARGO) test --workspace

## render: render the sample ModelOrchestra offline (no cluster needed)
render:
	$(CARGO) run --quiet --bin model-orchestra-operator -- render -f $(SAMPLE)

## crd: print the ModelOrchestra CRD
crd:
	$(CARGO) run --quiet --bin model-orchestra-operator -- crd

## generate: rewrite the checked-in generated files (CRD, values.schema.json, ClusterRole)
generate: build
	$(OPERATOR) crd > config/crd/models.titanml.co_modelorchestras.yaml
	$(OPERATOR) values-schema > charts/model-orchestra/values.schema.json
	$(OPERATOR) rbac > config/rbac/role.yaml

## bench: render benchmarks (criterion)
bench:
	$(CARGO) bench -p model-orchestra-operator --bench render
