// CoreDNS with only the plugins the local cluster's DNS uses: the cluster's names from the
// API server (kubernetes), a cache, health and readiness endpoints, and the errors log.
// The local cluster runs it on its real node's address, as the kubelet's clusterDNS.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The order plugins handle a query in (a subset of CoreDNS's own order).
func init() {
	dnsserver.Directives = []string{"bind", "errors", "health", "ready", "cache", "loadbalance", "kubernetes"}
}

func main() {
	coremain.Run()
}
