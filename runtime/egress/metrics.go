package egress

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics go to component-base's legacy registry (RegisterMetrics), which
// the CCM serves on /metrics of its secure port.
var (
	httpRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "host", Name: "http_requests_total",
		Help:           "Requests made through the http_do host function, by destination (the allowed origin reached, scheme://host:port; denied or invalid when none) and status code or refusal reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "host", "code"})
	httpCoalesced = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "host", Name: "http_coalesced_total",
		Help:           "GET requests answered by joining an identical request already in flight for another instance, by destination (the allowed origin).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "host"})
	// Each module has a rate budget of its own (its shadow shares it): the
	// series carry the module and the configured origin
	// (scheme://host:port).
	httpRateWait = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "wasmccm", Subsystem: "host", Name: "http_rate_wait_seconds",
		Help:           "Time requests to an origin of http.rateLimits waited for its rate budget before being sent.",
		Buckets:        metrics.ExponentialBuckets(0.001, 4, 9),
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "origin"})
	httpThrottled = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "host", Name: "http_throttled_total",
		Help:           "Requests to an origin of http.rateLimits throttled: by host, answered 429 by the host because the budget had no room before the call's deadline; by cloud, answered 429 by the cloud; by shadow, requests of a module in shadow answered 429 by the host for want of spare room.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "origin", "by"})
)

var registerOnce sync.Once

// RegisterMetrics registers the egress metrics; until then they count
// nothing. It may be called any number of times.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(httpRequests, httpCoalesced, httpRateWait, httpThrottled) })
}
