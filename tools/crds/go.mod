// Pins the projects whose CRDs the e2e tests install, so that the objects the operator
// renders for them are validated by the real schemas: KEDA's ScaledObject and the
// Prometheus Operator's ServiceMonitor. Nothing here is built; scripts/build-go-tools.sh
// copies the CRD files out of the verified module zips into target/tools/share/crds.
module github.com/titanml/model-orchestra/tools/crds

go 1.26.0

require (
	github.com/kedacore/keda/v2 v2.21.0
	github.com/prometheus-operator/prometheus-operator v0.89.0
)
