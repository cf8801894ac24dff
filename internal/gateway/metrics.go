package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
)

// gatewayMetrics are the gateway's own series (GET /metrics); the nodes
// serve theirs.
type gatewayMetrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec
	located     *prometheus.CounterVec
	proxyErrors prometheus.Counter
	nodes       *prometheus.GaugeVec
}

func newGatewayMetrics() *gatewayMetrics {
	m := &gatewayMetrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warren_gateway_requests_total",
			Help: "Requests the gateway answered, by route and status code.",
		}, []string{"route", "code"}),
		located: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warren_gateway_locate_total",
			Help: "How the node of a sandbox or snapshot was found: memo, cache, probe, or miss.",
		}, []string{"how"}),
		proxyErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "warren_gateway_proxy_errors_total",
			Help: "Requests a node did not answer (502).",
		}),
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "warren_gateway_nodes",
			Help: "Warren nodes the gateway knows, by state (ready, total).",
		}, []string{"state"}),
	}
	m.reg.MustRegister(m.requests, m.located, m.proxyErrors, m.nodes)
	return m
}

// routeNames label requests by route.
var routeNames = map[routeKind]string{
	routeOther: "other", routePlane: "plane", routeSandbox: "sandbox", routeCreate: "create",
	routeList: "list", routeSnapshot: "snapshot", routeImport: "import", routeTemplate: "template",
	routeKeys: "api-keys", routeHealth: "health", routeMetrics: "metrics", routeUnrouted: "unrouted", routeSigned: "signed-url",
	routeNodes:    "fleet-nodes",
	routeTplBuild: "build-request", routeTpl: "built-template", routeTplTags: "built-template-tags", routeTplCache: "build-cache",
}
